"""The turns of a prompt whose messages take no part in a tool call, shaped for each API in one
pass (``composer.compose_openai`` and ``compose_anthropic``), from stored rows or ``Message``s
alike; a window of plain rows only, by comprehensions over the rows' fields."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from itertools import compress
from operator import itemgetter
from typing import Any

from fermix_memory.application.stored_messages import StoredItem, StoredRow, stored_row
from fermix_memory.domain.values import Role

# What both APIs accept as a message ``name`` (OpenAI) and a tool's name.
API_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class PlainRows(list[StoredItem]):
    """A window of plain rows only (``caches.all_plain``) as a cache hands it out: the rows as
    read, no ``Message`` among them, so a prompt takes it as rows without a look at each item."""

    __slots__ = ()


def only_rows(items: Sequence[StoredItem]) -> bool:
    """Whether every item is still a stored row, named or the bare tuple a statement returned (one
    pass in C: the set of their types; none for a ``PlainRows``)."""
    return type(items) is PlainRows or set(map(type, items)) <= _ROW_TYPES


def named(items: Sequence[StoredItem]) -> Sequence[StoredItem]:
    """``items`` with each bare tuple of a statement named (``StoredRow``): what reads rows by name."""
    if tuple not in set(map(type, items)):
        return items
    return [stored_row(item) if type(item) is tuple else item for item in items]


_ROW_TYPES = frozenset((StoredRow, tuple))


def row_speakers(rows: Sequence[StoredRow], roles: Sequence[str] | None = None) -> set[str]:
    """The speakers of the user turns of plain rows (as :func:`plain_turns` names them: the
    sender, else the owner), from ``roles``, the rows' roles when already read, in C: the senders
    of the user rows as a set; when one is empty and one owner wrote every user row, that owner."""
    users = list(map(_IS_USER, map(_ROLE, rows) if roles is None else roles))
    senders = set(compress(map(_SENDER, rows), users))
    if "" not in senders:
        return senders
    owners = set(compress(map(_OWNER, rows), users))
    if len(owners) == 1:
        senders.discard("")
        return senders | owners
    return {sender or owner for owner, sender, role in set(map(_SPEAKER, rows)) if role == "user"}


def plain_openai(rows: Sequence[StoredRow], out: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """``out`` followed by OpenAI's message of each of ``rows`` (a window of plain rows, as kept:
    ``caches.all_plain``), each the row's role and text, built in one comprehension; or ``None``
    (``out`` untouched) when the window needs the turn-by-turn path (:func:`one_pass`)."""
    if not rows:
        return out
    if not one_pass(rows):
        return None
    out += [{"role": row[_ROLE_AT], "content": row[_CONTENT_AT]} for row in rows]
    return out


def plain_anthropic(rows: Sequence[StoredRow]) -> list[dict[str, Any]] | None:
    """Anthropic's messages of ``rows`` (a window of plain rows, as kept) when the user's turns and
    the replies take turns: one message per row, its text (a reply's without trailing space, which
    says nothing), built in two comprehensions (the user's, the replies); or ``None`` when the
    window needs the turn-by-turn path (:func:`one_pass`, or two turns of one role in a row:
    merged into one message)."""
    if not rows:
        return []
    if not one_pass(rows):
        return None
    roles = list(map(_ROLE, rows))
    users, replies = roles[::2], roles[1::2]
    if users.count("user") != len(users) or replies.count("assistant") != len(replies):
        return None
    out: list[Any] = list(map(_CONTENT, rows))  # the texts, then each made its message in place
    out[::2] = [{"role": "user", "content": text} for text in out[::2]]
    out[1::2] = [{"role": "assistant", "content": text} for text in map(str.rstrip, out[1::2])]
    return out


def one_pass(rows: Sequence[StoredRow]) -> bool:
    """Whether a window of plain rows (not empty) makes one turn of each row, as it is: it opens
    with a user's (no orphan reply), every row has text, and the user turns have one speaker (no
    group chat, whose turns name their senders). Each check is a pass in C over the rows; the
    speakers' first: when every row names one sender (the user's turns and the replies alike),
    the user turns have one speaker, without telling the user rows apart."""
    if rows[0][_ROLE_AT] != "user" or not all(map(str.strip, map(_CONTENT, rows))):
        return False
    senders = set(map(_SENDER, rows))
    return (len(senders) == 1 and "" not in senders) or len(row_speakers(rows)) < 2


# A stored row's fields by position, read in C (``StoredRow``'s order).
ROLE_CONTENT = itemgetter(StoredRow._fields.index("role"), StoredRow._fields.index("content"))
_SPEAKER = itemgetter(*map(StoredRow._fields.index, ("owner_id", "sender", "role")))
_ROLE, _CONTENT, _SENDER, _OWNER = map(itemgetter, map(StoredRow._fields.index, ("role", "content", "sender",
                                                                               "owner_id")))
_IS_USER = "user".__eq__
_ROLE_AT, _CONTENT_AT = StoredRow._fields.index("role"), StoredRow._fields.index("content")


def plain_turns(rest: Sequence[StoredItem]) -> Iterator[tuple[str, str, str]]:
    """``(role, text, speaker)`` of each plain user or assistant turn, from a stored row or a
    ``Message`` alike (a user turn's speaker is its sender, else its owner; an assistant's is "")."""
    user = Role.USER
    for m in rest:
        if type(m) is StoredRow:
            yield ("user", m.content, m.sender or m.owner_id) if m.role == "user" else ("assistant", m.content, "")
        elif m.role is user:
            yield "user", m.content, m.sender or m.owner_id
        else:
            yield "assistant", m.content, ""


def openai_turns(rest: Sequence[StoredItem], out: list[dict[str, Any]], *, named: bool
                 ) -> tuple[list[dict[str, Any]], set[str]]:
    """``out`` followed by OpenAI's message of each plain turn (:func:`plain_turns`), each user
    turn naming its speaker when ``named``; and the speakers of the user turns."""
    speakers: set[str] = set()
    for role, text, speaker in plain_turns(rest):
        if not speaker:
            out.append({"role": role, "content": text})
            continue
        speakers.add(speaker)
        if named:  # the sender as the API's name, else in the text
            out.append({"role": "user", "content": text, "name": speaker} if API_NAME.fullmatch(speaker)
                       else {"role": "user", "content": prefixed_text(speaker, text)})
        else:
            out.append({"role": "user", "content": text})
    return out, speakers


def anthropic_messages(rest: Sequence[StoredItem], *, named: bool) -> tuple[list[dict[str, Any]], set[str]]:
    """Anthropic's messages of the plain turns (:func:`plain_turns`): consecutive turns of one
    role merged into one message of text blocks, each user turn prefixed with its speaker when
    ``named``, an assistant's without a trailing space (it says nothing); and the speakers of
    the user turns."""
    out: list[dict[str, Any]] = []
    speakers: set[str] = set()
    last = ""
    for role, text, speaker in plain_turns(rest):
        if speaker:
            speakers.add(speaker)
            if named:
                text = prefixed_text(speaker, text)
        elif role == "assistant":
            text = text.rstrip()
        if role != last:
            out.append({"role": role, "content": text})
            last = role
        elif type(content := out[-1]["content"]) is str:  # a second turn of the role: blocks
            out[-1]["content"] = [{"type": "text", "text": content}, {"type": "text", "text": text}]
        else:
            content.append({"type": "text", "text": text})
    return out, speakers


def prefixed_text(speaker: str, content: str) -> str:
    """A user turn's text with its speaker in front (brackets in the name made parentheses)."""
    who = speaker.replace("[", "(").replace("]", ")")
    return f"[{who}] {content}"
