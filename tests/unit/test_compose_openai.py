"""``compose_openai`` is ``as_openai(compose_prompt(...))`` and ``compose_anthropic`` is
``as_anthropic(compose_prompt(...))`` byte for byte: the one-pass path taken when no message of
the window takes part in a tool call gives the same dicts, with their keys in the same order, as
composing the turns, for every kind of message a window can hold, whether the window holds
messages, the plain rows the store read (any other as a message), or both."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

from fermix_memory.application.composer import (
    as_anthropic,
    as_openai,
    compose_anthropic,
    compose_openai,
    compose_prompt,
)
from fermix_memory.application.query_ports import ResourceRevision
from fermix_memory.application.stored_messages import StoredRow, is_plain
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey, Role, Trust

KEY = ConversationKey("telegram", "1", "")
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
CALL = {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}


def message(n: int, role: Role, content: str, *, sender: str = "alice", owner: str = "alice", kind: str = "text",
            trust: Trust = Trust.GUEST, metadata: dict[str, object] | None = None) -> Message:
    return Message(id=n, agent_id="ada", owner_id=owner, conversation=KEY, sender=sender, role=role, kind=kind,
                   content=content, metadata=metadata or {}, trust=trust, created_at=T0 + timedelta(seconds=n))


# Every kind of message a window holds: (role, content, keyword arguments).
KINDS: list[tuple[Role, str, dict[str, object]]] = [
    (Role.USER, "Where do I live?", {}),
    (Role.USER, "hi from bob", {"sender": "bob", "owner": "bob"}),
    (Role.USER, "a name the API refuses", {"sender": "Bob [the] Smith"}),
    (Role.USER, "no sender: the owner speaks", {"sender": ""}),
    (Role.USER, "   ", {}),
    (Role.USER, "", {}),
    (Role.ASSISTANT, "You live in Paris.  ", {"sender": "ada"}),
    (Role.ASSISTANT, "", {"sender": "ada"}),
    (Role.ASSISTANT, "Let me look.", {"sender": "ada", "metadata": {"tool_calls": [CALL]}}),
    (Role.ASSISTANT, "", {"sender": "ada", "metadata": {"tool_calls": [CALL]}}),
    (Role.ASSISTANT, "", {"sender": "ada", "metadata": {"tool_calls": [{**CALL, "id": "call_2", "name": "bad name"}]}}),
    (Role.ASSISTANT, "malformed calls", {"sender": "ada", "metadata": {"tool_calls": "nonsense"}}),
    (Role.ASSISTANT, "no calls", {"sender": "ada", "metadata": {"tool_calls": []}}),
    (Role.TOOL, '{"temp": 21}', {"sender": "tool", "metadata": {"tool_call_id": "call_1"}}),
    (Role.TOOL, "", {"sender": "tool", "metadata": {"tool_call_id": "call_2"}}),
    (Role.TOOL, "a result of no known call", {"sender": "tool"}),
    (Role.SYSTEM, "The operator's rule.", {"sender": "op", "trust": Trust.OPERATOR}),
    (Role.SYSTEM, "a guest's note", {"sender": "guest"}),
    (Role.SYSTEM, "- user: we spoke of boats", {"sender": "compactor", "kind": "checkpoint"}),
    (Role.USER, "other metadata", {"metadata": {"café": "中文 🚀"}}),
    (Role.ASSISTANT, "an imported reply", {"sender": "ada", "metadata": {"import_key": "k1"}}),
    (Role.ASSISTANT, "a note naming tool_calls", {"sender": "ada", "metadata": {"note": "no tool_calls here"}}),
]


def compose_both(window: list[Message], system: str, files: tuple[str, str]) -> tuple[str, str]:
    def revision(agent_id: str, owner_id: str, name: str) -> ResourceRevision | None:
        content = files[0] if name == "user_md" else files[1]
        return ResourceRevision(agent_id=agent_id, owner_id=owner_id, name=name, revision=1, content=content,
                                content_sha256="", reason="", created_at=T0) if content else None

    def read(agent_id: str, conversation: ConversationKey) -> list[Message]:
        return list(window)

    composed = compose_prompt(revision, read, "ada", "alice", KEY, system=system)
    reference = json.dumps([as_openai(composed), as_anthropic(composed)], ensure_ascii=False)
    # The window as messages, as the rows the store read, and both (a cached window after a write):
    # a stored window gives a row only when it is plain, any other message as a ``Message``.
    # A window of plain rows only may be the bare tuples of the statement that read it.
    bare = [tuple(row(m)) for m in window] if all(is_plain(row(m)) for m in window) else []
    for stored in (list(window), [as_stored(m) for m in window], [as_stored(m) if m.id % 2 else m for m in window],
                   *([bare] if bare else [])):
        fast = json.dumps([compose(revision, lambda a, c, w=stored: w, "ada", "alice", KEY, system=system)
                           for compose in (compose_openai, compose_anthropic)], ensure_ascii=False)
        if fast != reference:
            return fast, reference
    return reference, reference


def as_stored(m: Message) -> Message | StoredRow:
    """``m`` as a stored window gives it: its row when the row is plain, else the message."""
    return row(m) if is_plain(row(m)) else m


def row(m: Message) -> StoredRow:
    """The row the store holds for ``m`` (``application.stored_messages``)."""
    metadata = json.dumps(m.metadata, sort_keys=True, separators=(",", ":"), ensure_ascii=False) if m.metadata else "{}"
    return StoredRow(m.id, m.owner_id, m.sender, m.role.value, m.kind, m.content, metadata, m.created_at.isoformat(),
                     m.trust.value)


def test_every_kind_of_message_alone_and_after_a_question() -> None:
    for role, content, options in KINDS:
        for window in ([message(1, role, content, **options)],  # type: ignore[arg-type]
                       [message(1, Role.USER, "q"), message(2, role, content, **options)]):  # type: ignore[arg-type]
            fast, reference = compose_both(window, "", ("", ""))
            assert fast == reference, (role, content, options)


def test_random_windows_of_every_kind_compose_byte_for_byte_alike() -> None:
    rng = random.Random(22)
    plain = [k for k in KINDS if k[0] is not Role.TOOL and "tool_calls" not in k[2].get("metadata", {})]  # type: ignore[operator]
    for case in range(1_500):
        palette = plain if case % 2 else KINDS  # half the windows take the one-pass path
        window = [message(n, role, content, **options)  # type: ignore[arg-type]
                  for n, (role, content, options) in enumerate(rng.choices(palette, k=rng.randrange(0, 14)), 1)]
        system = rng.choice(["", "You are Ada.", "  "])
        files = rng.choice([("", ""), ("- lives in Paris", ""), ("- lives in Paris", "- likes tea")])
        fast, reference = compose_both(window, system, files)
        assert fast == reference, window


def test_a_row_is_plain_only_when_its_metadata_cannot_name_a_tool_key() -> None:
    def stored(role: Role, metadata: dict[str, object]) -> StoredRow:
        return row(message(1, role, "text", metadata=metadata))

    assert is_plain(stored(Role.USER, {})) and is_plain(stored(Role.ASSISTANT, {"import_key": "k1"}))
    assert is_plain(stored(Role.USER, {"café": "中文 🚀"}))
    assert not is_plain(stored(Role.ASSISTANT, {"tool_calls": [CALL]}))
    assert not is_plain(stored(Role.ASSISTANT, {"tool_calls": []}))
    assert not is_plain(stored(Role.TOOL, {"tool_call_id": "call_1"}))
    assert not is_plain(stored(Role.ASSISTANT, {"note": "no tool_calls here"}))  # only ever too careful
    assert not is_plain(stored(Role.SYSTEM, {})) and not is_plain(stored(Role.TOOL, {}))


def test_random_plain_windows_compose_byte_for_byte_alike() -> None:
    """Windows of plain rows only (what a cold prompt reads): user turns and replies taking turns or
    not, one speaker or several, with and without an owner's sender, text with trailing space or
    none, a reply first; the one-comprehension paths give what composing the turns gives."""
    rng = random.Random(35)
    speakers = [("alice", "alice"), ("", "alice"), ("bob", "bob"), ("", "bob"), ("x", "alice")]
    texts = ["Where do I live?", "You live in Paris.  ", "tea & <b>cake</b>", "  ", "", "line\n", "中文 🚀 "]
    for case in range(600):
        alternate = case % 3 != 0
        window = []
        for n in range(1, rng.randrange(0, 16)):
            role = (Role.USER if n % 2 else Role.ASSISTANT) if alternate else rng.choice([Role.USER, Role.ASSISTANT])
            sender, owner = rng.choice(speakers[:2] if case % 4 else speakers)
            if role is Role.ASSISTANT:
                sender = rng.choice(["ada", sender, ""])
            text = rng.choice(texts) if case % 5 == 0 else rng.choice(texts[:3])
            window.append(message(n, role, text, sender=sender, owner=owner))
        system = rng.choice(["", "You are Ada."])
        files = rng.choice([("", ""), ("- lives in R&D", "- likes tea")])
        fast, reference = compose_both(window, system, files)
        assert fast == reference, window
