"""Small value objects shared by the whole domain: ids, trust, categories, scopes, keys."""

from __future__ import annotations

import enum
import functools
import re
import unicodedata
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import quote, unquote

import attrs

from fermix_memory.domain.errors import InvalidArgument, InvalidConversationKey, InvalidIdentifier, InvalidNumber

MAX_ID_CHARS = 256
# A memory value is stored whole up to MAX_VALUE_CHARS; the prompt files show at most
# MAX_RENDERED_VALUE_CHARS of it (cut at a word boundary, with an ellipsis). Recall searches
# and returns the whole stored value.
MAX_VALUE_CHARS = 2000
MAX_RENDERED_VALUE_CHARS = 200
# A message's content holds at most MAX_CONTENT_CHARS. A row that keeps a framework's own item (a
# LangGraph store item: JSON, never shown in a prompt file) may hold as much (ADR-0104); only code
# chooses that bound, never host input.
MAX_CONTENT_CHARS = 1_000_000
MAX_ITEM_VALUE_CHARS = MAX_CONTENT_CHARS
# A conversation scope id percent-encodes three ids: up to 12 characters per code point.
MAX_SCOPE_ID_CHARS = 3 * 12 * MAX_ID_CHARS + 2


class Trust(enum.StrEnum):
    """Who a statement comes from: the agent's operator, or anybody else."""

    OPERATOR = "operator"
    GUEST = "guest"


class PromoteTarget(enum.StrEnum):
    """The prompt file a memory row renders into."""

    USER_MD = "user_md"
    MEMORY_MD = "memory_md"


class Category(enum.StrEnum):
    """The six memory categories (R-CAT): four about the user, two about the work."""

    IDENTITY = "identity"
    PREFERENCE = "preference"
    INTEREST = "interest"
    GOAL = "goal"
    CONTEXT = "context"
    DIRECTIVE = "directive"

    @property
    def promote_target(self) -> PromoteTarget:
        if self in (Category.CONTEXT, Category.DIRECTIVE):
            return PromoteTarget.MEMORY_MD
        return PromoteTarget.USER_MD

    @property
    def is_profile(self) -> bool:
        """True for the categories about the user (identity, preference, interest, goal)."""
        return self.promote_target is PromoteTarget.USER_MD

    @property
    def operator_only(self) -> bool:
        return self is Category.DIRECTIVE


class ScopeType(enum.StrEnum):
    OWNER = "owner"
    AGENT = "agent"
    CONVERSATION = "conversation"
    JOB = "job"


class Role(enum.StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_UNSAFE_ID = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def check_identifier(value: object, what: str, *, allow_empty: bool = False) -> str:
    """Return ``value`` if it is a usable identifier, else raise :class:`InvalidIdentifier`.

    Identifiers are opaque text: any printable characters, at most 256 of them, no control
    characters (they end up in file names, logs and terminal output).
    """
    if not isinstance(value, str):
        raise InvalidIdentifier(f"{what} must be text, got {type(value).__name__}")
    if not value and not allow_empty:
        raise InvalidIdentifier(f"{what} must not be empty")
    if len(value) > MAX_ID_CHARS:
        raise InvalidIdentifier(f"{what} is longer than {MAX_ID_CHARS} characters")
    # Printable ASCII is safe by its own flags; else one scan, the problem told apart on failure.
    if not (value.isascii() and value.isprintable()) and _UNSAFE_ID.search(value):
        if _CONTROL.search(value):
            raise InvalidIdentifier(f"{what} must not contain control characters")
        raise InvalidIdentifier(f"{what} is not valid Unicode text (lone surrogate)")
    return value


def preview(value: object, limit: int = 40) -> str:
    """How an error message shows a bad value: text cut to ``limit`` characters (``repr``), any
    other value by its type only (``repr`` of a huge int or a deep structure can itself fail)."""
    if isinstance(value, str):
        return repr(value[:limit])
    return f"a value of type {type(value).__name__}"


E = TypeVar("E", bound=enum.StrEnum)


@functools.cache  # made once per enum
def members_by_value(enum_cls: type[E]) -> dict[str, E]:
    """The members of ``enum_cls`` by their text (a read-only table: callers must not change it)."""
    return {m.value: m for m in enum_cls}


def parse_enum(enum_cls: type[E], value: object, what: str, error: Callable[[str], Exception] = InvalidArgument) -> E:
    """The member ``value`` (a member or its text) names, else ``error`` naming the allowed values.
    Only text is looked up: the enum's own error builds the ``repr`` of a deep list (RecursionError)."""
    if isinstance(value, str) and (member := members_by_value(enum_cls).get(value)) is not None:
        return member  # type: ignore[no-any-return]  # a member of enum_cls (``cast`` is a call)
    raise error(f"{what} must be one of {', '.join(m.value for m in enum_cls)}, got {preview(value)}")


# SQLite stores integers as signed 64-bit values; a larger one cannot be bound at all.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def check_int(value: object, what: str, *, minimum: int = INT64_MIN) -> int:
    """Return ``value`` if it is a whole number in SQLite's signed 64-bit range and at least
    ``minimum``, else raise :class:`InvalidNumber`. ``True``/``False``, floats and digit strings
    are refused: a host passing them has a bug worth hearing about."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidNumber(f"{what} must be a whole number, got {type(value).__name__}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidNumber(f"{what} is out of range (it must fit in a signed 64-bit integer)")
    if value < minimum:
        raise InvalidNumber(f"{what} must be at least {minimum}")
    return value


def check_text(value: object, what: str, *, max_chars: int) -> str:
    """Return ``value`` if it is storable free text (newlines allowed) of at most ``max_chars``
    characters, else raise :class:`InvalidArgument`."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be text, got {type(value).__name__}")
    if len(value) > max_chars:
        raise InvalidArgument(f"{what} is longer than {max_chars} characters")
    if "\x00" in value:
        raise InvalidArgument(f"{what} must not contain NUL characters")
    if _SURROGATE.search(value):
        raise InvalidArgument(f"{what} is not valid Unicode text (lone surrogate)")
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")

ELLIPSIS = "…"
# How far a cut may back off to avoid splitting a combining sequence; beyond that a hard cut
# is fine (pathological text), and the bound keeps the cut O(1).
_MAX_CUT_BACKOFF = 8
_ZWJ = "\u200d"


def shorten(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else a prefix ending in ``…`` that is
    never longer than ``limit``: it ends at the last word boundary (space or line break) of
    its first ``limit - 1`` characters when that keeps at least half the limit, otherwise it
    keeps ``limit - 1`` characters, backing off a few code points rather than splitting a
    combining mark or a ZWJ sequence."""
    if len(text) <= limit:
        return text
    cut = limit - 1
    if cut < 1:
        return ELLIPSIS[: max(limit, 0)]
    if not text[cut].isspace():
        boundary = max(text.rfind(" ", limit // 2, cut), text.rfind("\n", limit // 2, cut))
        if boundary > 0:
            return text[:boundary].rstrip() + ELLIPSIS
    floor = max(cut - _MAX_CUT_BACKOFF, 1)
    back = cut
    while back > floor and _joins_previous(text, back):
        back -= 1
    if not _joins_previous(text, back):
        cut = back
    return text[:cut].rstrip() + ELLIPSIS


def _joins_previous(text: str, i: int) -> bool:
    """True if cutting before ``text[i]`` would split a grapheme (mark, ZWJ, selector)."""
    ch = text[i]
    return (
        ch == _ZWJ
        or text[i - 1] == _ZWJ
        or unicodedata.category(ch) in ("Mn", "Mc", "Me")
        or "\ufe00" <= ch <= "\ufe0f"
    )


def is_encodable(text: str) -> bool:
    """True when ``text`` can be stored as UTF-8 (no lone surrogates)."""
    return text.isascii() or _SURROGATE.search(text) is None  # ASCII holds no surrogate


def _check_channel(value: object) -> str:
    try:
        return check_identifier(value, "channel")
    except InvalidIdentifier as exc:
        raise InvalidConversationKey(str(exc)) from None


def _check_chat_id(value: object) -> str:
    try:
        return check_identifier(value, "chat_id")
    except InvalidIdentifier as exc:
        raise InvalidConversationKey(str(exc)) from None


def _check_thread(value: object) -> str:
    try:
        return check_identifier(value, "thread_scope", allow_empty=True)
    except InvalidIdentifier as exc:
        raise InvalidConversationKey(str(exc)) from None


@attrs.frozen(order=True)
class ConversationKey:
    """Where a conversation happens: ``{channel, chat_id, thread_scope}``.

    ``scope_id`` is the one encoding used for conversation-scoped rows: each part is
    percent-encoded with no safe characters (so ``:`` and ``%`` inside a part are escaped),
    then the three are joined with ``:``. Distinct keys always give distinct scope ids and
    :meth:`from_scope_id` inverts it.
    """

    channel: str = attrs.field(converter=_check_channel)
    chat_id: str = attrs.field(converter=_check_chat_id)
    thread_scope: str = attrs.field(default="", converter=_check_thread)

    @functools.cached_property
    def scope_id(self) -> str:
        return ":".join(quote(part, safe="") for part in (self.channel, self.chat_id, self.thread_scope))

    @classmethod
    def from_scope_id(cls, scope_id: str) -> ConversationKey:
        parts = scope_id.split(":")
        if len(parts) != 3:
            raise InvalidConversationKey(f"not a conversation scope id: {scope_id!r}")
        return cls(*(unquote(p) for p in parts))

    @classmethod
    def parse(cls, text: str) -> ConversationKey:
        """Parse the command-line spelling ``CHANNEL:CHAT_ID`` or ``CHANNEL:CHAT_ID:THREAD``.

        The thread part may itself contain ``:`` (everything after the second colon).
        """
        if not isinstance(text, str):
            raise InvalidConversationKey("a conversation key must be text")
        parts = text.split(":", 2)
        if len(parts) < 2 or not parts[0] or not parts[1]:
            raise InvalidConversationKey(
                f"conversation must be CHANNEL:CHAT_ID or CHANNEL:CHAT_ID:THREAD, got {text!r}"
            )
        return cls(parts[0], parts[1], parts[2] if len(parts) == 3 else "")

    def __str__(self) -> str:
        base = f"{self.channel}:{self.chat_id}"
        return f"{base}:{self.thread_scope}" if self.thread_scope else base


def _check_scope_id(value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_SCOPE_ID_CHARS:
        raise InvalidIdentifier("scope_id must be non-empty text of reasonable length")
    if _CONTROL.search(value):
        raise InvalidIdentifier("scope_id must not contain control characters")
    return value


@attrs.frozen(order=True)
class Scope:
    """Which readers may see a memory row: ``{type, id}`` (R-SCOPE)."""

    type: ScopeType = attrs.field(converter=ScopeType)
    id: str = attrs.field(converter=_check_scope_id)

    @classmethod
    def owner(cls, owner_id: str) -> Scope:
        return cls(ScopeType.OWNER, owner_id)

    @classmethod
    def agent(cls, agent_id: str) -> Scope:
        return cls(ScopeType.AGENT, agent_id)

    @classmethod
    def conversation(cls, key: ConversationKey) -> Scope:
        return cls(ScopeType.CONVERSATION, key.scope_id)

    @classmethod
    def job(cls, memory_source_id: str) -> Scope:
        return cls(ScopeType.JOB, memory_source_id)


MAX_KEY_CHARS = 64
_KEY_SEPARATORS = re.compile(r"[\s\-/]+")
_KEY_ALLOWED = re.compile(r"[^a-z0-9_.]")
# A key already spelt canonically (most are: a row's own key, a store's digest key): ASCII of
# ``[a-z0-9_.]`` at most 64 long, neither ``_`` nor ``.`` at an end, and no run of ``_``. The
# folding leaves such a key as it is, so it is returned without being folded.
_KEY_CANONICAL = re.compile(r"[a-z0-9](?:[a-z0-9_.]{0,62}[a-z0-9])?")


def is_canonical_key(text: str) -> bool:
    """Whether ``text`` is a key spelt canonically: what :func:`normalise_key` returns as it is
    (and any other text it folds into something else, or refuses)."""
    return _KEY_CANONICAL.fullmatch(text) is not None and "__" not in text


def normalise_key(raw: object) -> str:
    """Fold a memory key to its canonical spelling: ``"Coffee Order"`` → ``"coffee_order"``.

    Lower case, NFKC, whitespace / hyphens / slashes become ``_``, anything else but
    ``[a-z0-9_.]`` is dropped, runs of ``_`` collapse. Raises if nothing usable remains or the
    result is longer than 64 characters.
    """
    if not isinstance(raw, str):
        raise InvalidIdentifier(f"key must be text, got {type(raw).__name__}")
    if is_canonical_key(raw):
        return raw
    text = unicodedata.normalize("NFKC", raw).strip().lower()
    text = _KEY_SEPARATORS.sub("_", text)
    text = _KEY_ALLOWED.sub("", text)
    text = re.sub(r"_+", "_", text).strip("_.")
    if not text:
        raise InvalidIdentifier(f"key {raw[:40]!r} has no usable characters")
    if len(text) > MAX_KEY_CHARS:
        raise InvalidIdentifier(f"key is longer than {MAX_KEY_CHARS} characters")
    return text
