"""Prompt-file rendering (R-PROMPT): memory rows → the text of ``USER.md`` / ``MEMORY.md``.

Pure: no I/O, no clock; tokens are counted by a ``Callable[[str], int]`` the caller passes in.

Layout (``\\n`` line endings, UTF-8 safe)::

    ## Identity
    - name: Ada Lovelace
    - pronouns: she/her

    ## Preferences
    - coffee: Prefers flat whites

- One ``## <Section>`` heading per non-empty section, in the file's fixed section order;
  sections are separated by one blank line; the text ends with one ``\\n``. No title line
  (the composer names each file when it fences them).
- One ``- <key>: <value>`` bullet per row. Within a section rows are listed most recently
  updated first (``updated_at`` desc, then ``id`` desc, then key, value) — the same order
  used to choose which rows survive the section cap, so the output depends only on the set
  of rows, never on their input order.
- No row renders → the empty string (the file exists but is empty).
- Working Rules (``MEMORY.md``) also show the agent's standing rules recorded with other
  owners (``agent_rules``, see :func:`~fermix_memory.domain.scopes.is_agent_rule`): the
  owner's own directives first, then the others, each group most recently updated first; one
  bullet per key (the owner's own statement of a key wins, else the most recent); the cap of 8
  applies to the merged list in that order.

Text hygiene: every key and value is put on one line — control characters (C0, DEL, C1),
line and paragraph separators become spaces, runs of whitespace collapse to one space and
the ends are trimmed — so stored text can never start a heading, a bullet or a new section.
Lone surrogates become U+FFFD so the file always encodes as UTF-8. Values (stored up to
2,000 characters) are then cut to 200 characters and keys to 64: a longer text ends at the
last word boundary within its first 199 characters (when that keeps at least half the
limit; otherwise it keeps 199 characters, backing off a few code points rather than
splitting a combining mark or a ZWJ sequence) followed by ``…``, so the result, ellipsis
included, is never longer than the limit.

Token budget: if the whole text counts more than ``budget`` tokens, the least recently
updated rows of the file (across all its sections) are dropped, as few as possible: the
result is the text with the fewest such drops that fits (binary search over the drop count,
so a handful of counts of the final-sized text rather than one per row).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from operator import attrgetter

import attrs

from fermix_memory.domain.memory import Memory
from fermix_memory.domain.scopes import is_agent_rule
from fermix_memory.domain.values import (
    MAX_KEY_CHARS,
    MAX_RENDERED_VALUE_CHARS,
    Category,
    PromoteTarget,
    ScopeType,
    shorten,
)

TokenCount = Callable[[str], int]

USER_MD_BUDGET = 1500
MEMORY_MD_BUDGET = 2000


@attrs.frozen
class Section:
    """A section of a prompt file: its heading, the category it shows and its row cap."""

    title: str
    category: Category
    cap: int


@attrs.frozen
class FileLayout:
    """Which rows a prompt file shows (by ``promote_target``) and in which sections."""

    target: PromoteTarget
    sections: tuple[Section, ...]
    budget: int

    def section_index(self) -> dict[str, int]:
        return {section.category.value: i for i, section in enumerate(self.sections)}


USER_MD = FileLayout(
    target=PromoteTarget.USER_MD,
    sections=(
        Section("Identity", Category.IDENTITY, 6),
        Section("Preferences", Category.PREFERENCE, 6),
        Section("Interests", Category.INTEREST, 6),
        Section("Goals", Category.GOAL, 5),
    ),
    budget=USER_MD_BUDGET,
)

MEMORY_MD = FileLayout(
    target=PromoteTarget.MEMORY_MD,
    sections=(
        Section("Context", Category.CONTEXT, 12),
        Section("Working Rules", Category.DIRECTIVE, 8),
    ),
    budget=MEMORY_MD_BUDGET,
)


# Every section a prompt file shows, as ``(target, category, cap)``. What a file shows depends only
# on the first ``cap`` rows of each that :func:`renders` keeps, most recently updated first (and,
# for Working Rules, on the agent's standing rules): :func:`shown_rows` of every live row renders
# exactly as every live row does, so a store may read just those (ADR-0060).
SHOWN_SECTIONS: tuple[tuple[PromoteTarget, Category, int], ...] = tuple(
    (layout.target, section.category, section.cap) for layout in (USER_MD, MEMORY_MD) for section in layout.sections
)

_JOB = ScopeType.JOB.value
_CONVERSATION = ScopeType.CONVERSATION.value
_DIRECTIVE = Category.DIRECTIVE.value


def renders(row: Memory) -> bool:
    """True if ``row`` may appear in a prompt file at all (reference, "Memory categories").

    It needs a ``promote_target``, must not be archived, must not be job-scoped, and must not
    be a conversation-scoped ``directive`` (conversation-scoped ``context`` does render).
    """
    if row.promote_target is None or row.archived_at is not None:
        return False
    scope = row.scope_type
    return scope != _JOB and not (scope == _CONVERSATION and row.category == _DIRECTIVE)


def shown_in(scope_type: ScopeType, category: Category, promote_target: PromoteTarget | None
             ) -> PromoteTarget | None:
    """The prompt file a live row of this scope, category and target shows in (``None``: none):
    the rules of :func:`renders`, and a section of that file for the row's category."""
    if promote_target is None or scope_type == _JOB or (scope_type == _CONVERSATION and category == _DIRECTIVE):
        return None
    layout = USER_MD if promote_target == PromoteTarget.USER_MD else MEMORY_MD
    return promote_target if category in layout.section_index() else None


def shown_rows(rows: Iterable[Memory], sections: Iterable[tuple[PromoteTarget, Category, int]] = SHOWN_SECTIONS
               ) -> list[Memory]:
    """The rows of ``rows`` a prompt file may show: of each ``(target, category, cap)`` section,
    the ``cap`` most recently updated rows that :func:`renders` keeps (the same order as the
    section cap's). What a store's bounded read of an owner's rows must return, as a set."""
    wanted = {(str(target), str(category)): cap for target, category, cap in sections}
    buckets: dict[tuple[str, str], list[Memory]] = {}
    for row in rows:
        section = (str(row.promote_target), str(row.category))
        if section in wanted and renders(row):
            buckets.setdefault(section, []).append(row)
    return [row for section, bucket in buckets.items() for row in heapq.nlargest(wanted[section], bucket, key=_recency)]


# (updated_at, id, key, value): recency first; key/value only break exact ties, so the
# chosen rows and their order are a function of the row set alone.
_recency: Callable[[Memory], tuple[datetime, int, str, str]] = attrgetter("updated_at", "id", "key", "value")

_UNSAFE_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SURROGATES = re.compile("[\ud800-\udfff]")


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (see the module docstring), at most ``limit`` characters long."""
    text = _SURROGATES.sub("\ufffd", _UNSAFE_CHARS.sub(" ", text))
    return shorten(" ".join(text.split()), limit)


def _bullet(row: Memory) -> str:
    key = one_line(row.key, MAX_KEY_CHARS)
    value = one_line(row.value, MAX_RENDERED_VALUE_CHARS)
    return f"- {key}: {value}" if value else f"- {key}:"


@attrs.frozen
class _Entry:
    section: int
    rank: tuple[datetime, int, str, str]
    line: str


def _select(rows: Iterable[Memory], layout: FileLayout, agent_rules: Iterable[Memory] = ()
            ) -> list[list[Memory]]:
    """Rows of each section after the rendering rules and the section cap, in display order."""
    index = layout.section_index()
    buckets: list[list[Memory]] = [[] for _ in layout.sections]
    target = layout.target.value
    # The rules of `renders`, inlined: this loop runs once per stored row (10,000s).
    for row in rows:
        if row.promote_target != target or row.archived_at is not None:
            continue
        i = index.get(row.category)
        if i is None:
            continue
        scope = row.scope_type
        if scope == _JOB or (scope == _CONVERSATION and row.category == _DIRECTIVE):
            continue
        buckets[i].append(row)
    selected = [
        heapq.nlargest(section.cap, bucket, key=_recency)
        for section, bucket in zip(layout.sections, buckets, strict=True)
    ]
    rules = index.get(_DIRECTIVE)
    if rules is not None:
        selected[rules] = _working_rules(buckets[rules], agent_rules, layout.sections[rules].cap)
    return selected


def _working_rules(own: list[Memory], agent_rules: Iterable[Memory], cap: int) -> list[Memory]:
    """The owner's own directives (most recent first), then the agent's standing rules recorded
    with other owners (most recent first), one row per key — the owner's own statement of a key
    wins, else the most recent — cut to ``cap`` in that order."""
    own_ids = {row.id for row in own}
    taken = {row.key for row in own}
    shared: dict[str, Memory] = {}
    for row in agent_rules:
        if row.id in own_ids or row.key in taken or not is_agent_rule(row):
            continue
        held = shared.get(row.key)
        if held is None or _recency(row) > _recency(held):
            shared[row.key] = row
    first = heapq.nlargest(cap, own, key=_recency)
    return first + heapq.nlargest(cap - len(first), shared.values(), key=_recency)


def _assemble(layout: FileLayout, entries: Sequence[_Entry], dropped: frozenset[int]) -> str:
    lines_by_section: list[list[str]] = [[] for _ in layout.sections]
    for n, entry in enumerate(entries):
        if n not in dropped:
            lines_by_section[entry.section].append(entry.line)
    blocks = [
        f"## {section.title}\n" + "\n".join(lines) + "\n"
        for section, lines in zip(layout.sections, lines_by_section, strict=True)
        if lines
    ]
    return "\n".join(blocks)


def render_prompt_file(
    rows: Iterable[Memory],
    layout: FileLayout,
    count_tokens: TokenCount,
    *,
    budget: int | None = None,
    agent_rules: Iterable[Memory] = (),
) -> str:
    """Render the rows that belong to ``layout`` into a prompt file (module docstring).

    ``budget`` defaults to the layout's budget; it must be ≥ 0. The rows are expected to be
    the rows of one agent / owner already (this function does not filter by reader).
    ``agent_rules`` are the agent's standing rules of every owner (rows that fail
    :func:`is_agent_rule` are ignored); they join the owner's own in the Working Rules.
    """
    limit = layout.budget if budget is None else budget
    if limit < 0:
        raise ValueError(f"token budget must be >= 0, got {limit}")
    selected = _select(rows, layout, agent_rules)
    entries = [
        _Entry(section=i, rank=_recency(row), line=_bullet(row))
        for i, section_rows in enumerate(selected)
        for row in section_rows
    ]
    text = _assemble(layout, entries, frozenset())
    if not text or count_tokens(text) <= limit:
        return text

    # Least recently updated first across the whole file; the section index breaks the last
    # possible tie (identical rank in two sections) so the drop order is total.
    drop_order = sorted(range(len(entries)), key=lambda n: (entries[n].rank, entries[n].section))

    def candidate(drops: int) -> str:
        return _assemble(layout, entries, frozenset(drop_order[:drops]))

    # Invariant: `drops = lo - 1` is over budget; `drops = hi` fits (dropping everything
    # leaves the empty text, which fits any budget >= 0 with a sane counter).
    lo, hi = 1, len(entries)
    while lo < hi:
        mid = (lo + hi) // 2
        if count_tokens(candidate(mid)) <= limit:
            hi = mid
        else:
            lo = mid + 1
    return candidate(lo)


def render_user_md(rows: Iterable[Memory], count_tokens: TokenCount, *, budget: int = USER_MD_BUDGET) -> str:
    """``USER.md``: Identity 6, Preferences 6, Interests 6, Goals 5; ``budget`` tokens."""
    return render_prompt_file(rows, USER_MD, count_tokens, budget=budget)


def render_memory_md(
    rows: Iterable[Memory],
    count_tokens: TokenCount,
    *,
    budget: int = MEMORY_MD_BUDGET,
    agent_rules: Iterable[Memory] = (),
) -> str:
    """``MEMORY.md``: Context 12, Working Rules 8 (the owner's directives, then the agent's
    standing rules recorded with other owners); ``budget`` tokens."""
    return render_prompt_file(rows, MEMORY_MD, count_tokens, budget=budget, agent_rules=agent_rules)
