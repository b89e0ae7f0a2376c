"""Use case: compose the messages of a turn (R-FENCE): one system message, then the window.

The system message holds, in order: the host's own system prompt, this owner's prompt files
inside one ``<memory-context>`` fence, then every system message of the window: a compaction
checkpoint inside its ``<conversation-summary>`` fence, an operator's as it is, anybody
else's inside a ``<conversation-note>`` fence (data, never instructions; ADR-0022). The window
follows without system messages, and never starts with an assistant reply whose question was
compacted away (an orphan): such a reply joins the summary before it (inside its fence), so
nothing the model said is lost and providers that want a user message first get one (ADR-0017).

Every prompt is a request the model's API accepts (ADR-0022): a message with no text is left
out; a tool result is sent as one only right after the assistant turn that made its call
(otherwise, and for a call without its result, the call or the result is shown as text; calls
recorded one assistant message each, with no text, are one turn); when
the window's user turns come from more than one sender, each says who wrote it (OpenAI's
``name``, else a ``[sender]`` prefix); Anthropic's shape merges consecutive turns of one role.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any, cast

import attrs

from fermix_memory.application.context_blocks import context_block
from fermix_memory.application.plain_turns import (
    API_NAME,
    ROLE_CONTENT,
    anthropic_messages,
    named,
    only_rows,
    openai_turns,
    plain_anthropic,
    plain_openai,
    prefixed_text,
    row_speakers,
)
from fermix_memory.application.query_ports import ResourceRevision
from fermix_memory.application.stored_messages import StoredItem, StoredRow, as_message, message_of
from fermix_memory.domain.checkpoint import is_checkpoint
from fermix_memory.domain.fence import (
    SUMMARY_CLOSE_TAG,
    as_summary_block,
    conversation_note_block,
    conversation_summary_block,
    escape_fence,
)
from fermix_memory.domain.messages import Message
from fermix_memory.domain.tool_calls import TOOL_CALLS_KEY, ToolCall, as_text, tool_call_id_of, tool_calls_of
from fermix_memory.domain.values import ConversationKey, Role, Trust

RevisionReader = Callable[[str, str, str], ResourceRevision | None]
WindowReader = Callable[[str, ConversationKey], list[Message]]
StoredWindowReader = Callable[[str, ConversationKey], Sequence[StoredItem]]  # messages, or plain rows as read

_ANTHROPIC_ID = re.compile(r"[A-Za-z0-9_-]+")
NO_OUTPUT = "(no output)"


@attrs.frozen
class PromptTurn:
    """One turn after the system message, in neither API's shape yet."""

    role: str  # "user" | "assistant" | "tool" (a result answering a call of the turn before)
    content: str
    speaker: str = ""  # who wrote a user turn
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""


@attrs.frozen
class ComposedPrompt:
    system: str
    turns: tuple[PromptTurn, ...]

    @property
    def several_speakers(self) -> bool:
        """True when the user turns come from more than one sender: then each names its sender."""
        return len({t.speaker for t in self.turns if t.role == "user" and t.speaker}) > 1


def compose_prompt(
    revision: RevisionReader,
    window: WindowReader,
    agent_id: str,
    owner_id: str,
    conversation: ConversationKey,
    *,
    system: str = "",
) -> ComposedPrompt:
    """The system text (empty only when there is nothing to put in it) and the window's user,
    assistant and tool turns, oldest first.

    The files' content comes from their current revision in the log, so what the model sees
    is exactly what ``fermix resource show`` shows.
    """
    items = window(agent_id, conversation)
    system_text, rest, _, _ = _system_and_rest(revision, items, agent_id, owner_id, conversation, system)
    return ComposedPrompt(system=system_text, turns=tuple(_turns([as_message(m, agent_id, conversation)
                                                                  for m in rest])))


def compose_openai(revision: RevisionReader, window: StoredWindowReader, agent_id: str, owner_id: str,
                   conversation: ConversationKey, *, system: str = "") -> list[dict[str, Any]]:
    """``as_openai(compose_prompt(...))``, the same list, from a window whose messages may still be
    the rows the store read (``application.stored_messages``). A window kept as plain rows that
    opens with a user's, each with text, one speaker (the usual one): one dict per row, built from
    the rows in one comprehension (``plain_turns.plain_openai``). Otherwise, when no message of it
    takes part in a tool call, the pairing of calls and results has nothing to do: the dicts are
    built in one pass, a plain row's straight from the row; else the turns are composed as above."""
    items = window(agent_id, conversation)  # first: a cold read holds the log's position
    if only_rows(items):
        text = _system_text(system, revision(agent_id, owner_id, "user_md"), revision(agent_id, owner_id, "memory_md"))
        fast = plain_openai(cast(list[StoredRow], items), [{"role": "system", "content": text}] if text else [])
        if fast is not None:
            return fast
    system_text, rest, paired, rows = _system_and_rest(revision, items, agent_id, owner_id, conversation, system)
    if paired:
        return as_openai(ComposedPrompt(system=system_text, turns=tuple(_turns(
            [as_message(m, agent_id, conversation) for m in rest]))))
    head: list[dict[str, Any]] = [{"role": "system", "content": system_text}] if system_text else []
    if rows and len(row_speakers(plain := cast(list[StoredRow], rest))) < 2:  # each row as it is: one pass
        head += [{"role": role, "content": content} for role, content in map(ROLE_CONTENT, plain)]
        return head
    out, speakers = openai_turns(rest, list(head), named=False)
    if len(speakers) > 1:  # as as_openai: each user turn names its sender (a group chat)
        out, _ = openai_turns(rest, head, named=True)
    return out


def compose_anthropic(revision: RevisionReader, window: StoredWindowReader, agent_id: str, owner_id: str,
                      conversation: ConversationKey, *, system: str = "") -> tuple[str, list[dict[str, Any]]]:
    """``as_anthropic(compose_prompt(...))``, the same system text and messages, from a window
    whose messages may still be the rows the store read, as :func:`compose_openai`: a window kept
    as plain rows whose user turns and replies take turns, one speaker, each with text: one dict
    per row (``plain_turns.plain_anthropic``); else one pass when no message of it takes part in
    a tool call."""
    items = window(agent_id, conversation)
    if only_rows(items) and (fast := plain_anthropic(cast(list[StoredRow], items))) is not None:
        user, memory = revision(agent_id, owner_id, "user_md"), revision(agent_id, owner_id, "memory_md")
        return _system_text(system, user, memory), fast
    system_text, rest, paired, _ = _system_and_rest(revision, items, agent_id, owner_id, conversation, system)
    if paired:
        return as_anthropic(ComposedPrompt(system=system_text, turns=tuple(_turns(
            [as_message(m, agent_id, conversation) for m in rest]))))
    messages, speakers = anthropic_messages(rest, named=False)
    if len(speakers) > 1:  # as as_anthropic: each user turn says who wrote it (a group chat)
        messages, _ = anthropic_messages(rest, named=True)
    return system_text, messages


def _system_text(system: str, user: ResourceRevision | None, memory: ResourceRevision | None) -> str:
    """The system text of a window with no system message and no orphan reply: the host's own
    prompt, then the owner's files in their fence."""
    parts = (system.strip(), context_block(user, memory))
    return "\n\n".join(p for p in parts if p)


def _system_and_rest(
    revision: RevisionReader, items: Sequence[StoredItem], agent_id: str, owner_id: str,
    conversation: ConversationKey, system: str,
) -> tuple[str, list[StoredItem], bool, bool]:
    """The system text, the window's messages that become turns (a plain row stays a row),
    whether any of those takes part in a tool call (a tool result, or an assistant message
    recording calls), and whether they are all plain rows. The window is read first: a cold one
    comes with the log's position, which then serves the files' freshness check
    (``caches.PositionReads``): the caller reads it, then calls this."""
    items = named(items)
    user = revision(agent_id, owner_id, "user_md")
    memory = revision(agent_id, owner_id, "memory_md")
    parts = [system.strip(), context_block(user, memory)]
    rest: list[StoredItem] = []
    rows = only_rows(items)
    if rows:  # plain rows: from the first user turn on, each row with text is a turn
        said = [row for row in items if row.content.strip()]
        first = next((i for i, row in enumerate(said) if row.role == "user"), len(said))
        paired = _take(said[:first], agent_id, conversation, parts, rest)  # replies before it: orphans
        rest += said[first:]
    else:
        paired = _take(items, agent_id, conversation, parts, rest)
    return "\n\n".join(p for p in parts if p), rest, paired, rows and not paired


def _take(items: Sequence[StoredItem], agent_id: str, conversation: ConversationKey, parts: list[str],
          rest: list[StoredItem]) -> bool:
    """Put each of ``items`` where the prompt shows it: a system message or an orphan reply in
    ``parts`` (the system text), a turn in ``rest``; whether a turn takes part in a tool call."""
    paired = False
    system_role, tool, assistant = Role.SYSTEM, Role.TOOL, Role.ASSISTANT
    for item in items:
        if type(item) is StoredRow:  # a plain row (what a stored window holds as rows)
            if not item.content.strip():
                continue  # no API takes a turn without text
            if rest or item.role == "user":  # not an orphan reply
                rest.append(item)
                continue
            m = message_of(item, agent_id, conversation)
        else:
            m = item  # type: ignore[assignment]
        role = m.role
        if role is system_role:
            if m.content.strip():
                parts.append(system_part(m))
        elif not (m.content.strip() or role is tool or tool_calls_of(m.metadata)):
            continue  # no API takes a turn without text
        elif role is assistant and not rest:  # an orphan reply: its question was compacted away
            said = as_text(m.content, tool_calls_of(m.metadata))
            if parts[-1].endswith(_SUMMARY_TAIL):
                parts[-1] = _with_reply(parts[-1], said)
            else:  # no summary just before it (a window cleared by /new): one of its own
                parts.append(conversation_summary_block(f"- assistant: {said}"))
        else:
            rest.append(m)
            paired = paired or role is tool or TOOL_CALLS_KEY in m.metadata
    return paired


def system_part(m: Message) -> str:
    """A system message of the window as the system prompt shows it (fenced unless an operator's)."""
    if is_checkpoint(m):
        return as_summary_block(m.content)
    return m.content if m.trust is Trust.OPERATOR else conversation_note_block(m.content)


_SUMMARY_TAIL = f"\n{SUMMARY_CLOSE_TAG}"


def _with_reply(block: str, reply: str) -> str:
    """The summary block with the reply that followed it inside, so one fence holds both."""
    return f"{block[:-len(_SUMMARY_TAIL)]}\n- assistant: {escape_fence(reply.strip())}{_SUMMARY_TAIL}"


def _speaker(m: Message) -> str:
    return m.sender or m.owner_id


def _loose_result(m: Message) -> PromptTurn:
    """A tool result whose call is not the turn before it (compacted away, never recorded, or
    recorded without ids): shown as text in a user turn."""
    call_id = tool_call_id_of(m.metadata)
    label = f"[result of tool call {call_id}]" if call_id else "[tool result]"
    return PromptTurn(role="user", content=f"{label} {m.content.strip() or NO_OUTPUT}")


def _turns(messages: Sequence[Message]) -> list[PromptTurn]:
    """Pair each call with its result: a call is sent as one when its result is among the tool
    messages right after it (and its id and name are usable), else both are text."""
    turns: list[PromptTurn] = []
    sent: set[str] = set()  # call ids already sent: an id is used once per prompt
    i = 0
    while i < len(messages):
        m = messages[i]
        i += 1
        if m.role is Role.USER:
            turns.append(PromptTurn(role="user", content=m.content, speaker=_speaker(m)))
            continue
        if m.role is Role.TOOL:
            turns.append(_loose_result(m))
            continue
        calls = tool_calls_of(m.metadata)
        # A reply and its calls recorded one message each (an agent framework's items): one turn.
        while i < len(messages) and _only_calls(messages[i]):
            calls += tool_calls_of(messages[i].metadata)
            i += 1
        if not calls and (i == len(messages) or messages[i].role is not Role.TOOL):
            turns.append(PromptTurn(role="assistant", content=m.content))  # a plain reply: nothing to pair
            continue
        end = i
        while end < len(messages) and messages[end].role is Role.TOOL:
            end += 1
        results, i = messages[i:end], end
        usable = {c.id: c for c in calls if c.id not in sent and API_NAME.fullmatch(c.name)}
        answers: dict[str, Message] = {}
        loose: list[Message] = []
        for r in results:
            call_id = tool_call_id_of(r.metadata)
            if call_id is not None and call_id in usable and call_id not in answers:
                answers[call_id] = r
            else:
                loose.append(r)
        answered = tuple(c for c in calls if c.id in answers and usable.get(c.id) is c)
        unanswered = [c for c in calls if c not in answered]
        content = as_text(m.content, unanswered) if unanswered else m.content
        turns.append(PromptTurn(role="assistant", content=content, tool_calls=answered))
        sent.update(c.id for c in answered)
        turns += [PromptTurn(role="tool", content=answers[c.id].content.strip() or NO_OUTPUT, tool_call_id=c.id)
                  for c in answered]
        turns += [_loose_result(r) for r in loose]
    return turns


def _only_calls(m: Message) -> bool:
    """An assistant message that holds tool calls and no text."""
    return m.role is Role.ASSISTANT and not m.content.strip() and bool(tool_calls_of(m.metadata))


def _prefixed(turn: PromptTurn) -> str:
    return prefixed_text(turn.speaker, turn.content)


def as_openai(prompt: ComposedPrompt) -> list[dict[str, Any]]:
    """OpenAI's Chat Completions ``messages``: the system message, then the turns; an assistant
    turn's calls as ``tool_calls``, each result as a ``tool`` message with its ``tool_call_id``."""
    out: list[dict[str, Any]] = [{"role": "system", "content": prompt.system}] if prompt.system else []
    named = prompt.several_speakers
    for t in prompt.turns:
        if t.role == "user":
            message: dict[str, Any] = {"role": "user", "content": t.content}
            if named and t.speaker:
                if API_NAME.fullmatch(t.speaker):
                    message["name"] = t.speaker
                else:
                    message["content"] = _prefixed(t)
        elif t.role == "assistant":
            message = {"role": "assistant", "content": t.content if t.content.strip() or not t.tool_calls else None}
            if t.tool_calls:
                message["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in t.tool_calls]
        else:
            message = {"role": "tool", "tool_call_id": t.tool_call_id, "content": t.content}
        out.append(message)
    return out


def anthropic_id(call_id: str) -> str:
    """``call_id`` as Anthropic accepts a ``tool_use`` id (letters, digits, ``_`` and ``-``): an id
    with other characters gets them replaced and a digest of the original, so ids stay distinct."""
    if _ANTHROPIC_ID.fullmatch(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{re.sub(r'[^A-Za-z0-9_-]', '_', call_id)[:64]}_{digest}"


def as_anthropic(prompt: ComposedPrompt) -> tuple[str, list[dict[str, Any]]]:
    """Anthropic's Messages shape: the system prompt apart, then alternating user / assistant
    messages (consecutive turns of one role merged), calls as ``tool_use`` blocks and results as
    ``tool_result`` blocks opening the user message that follows. A message of one text block is
    sent as a plain string."""
    named = prompt.several_speakers
    merged: list[tuple[str, list[dict[str, Any]]]] = []
    for t in prompt.turns:
        role, blocks = _anthropic_blocks(t, named)
        if merged and merged[-1][0] == role:
            merged[-1][1].extend(blocks)
        else:
            merged.append((role, blocks))
    messages: list[dict[str, Any]] = []
    for role, blocks in merged:
        single_text = len(blocks) == 1 and blocks[0]["type"] == "text"
        messages.append({"role": role, "content": blocks[0]["text"] if single_text else blocks})
    return prompt.system, messages


def _anthropic_blocks(t: PromptTurn, named: bool) -> tuple[str, list[dict[str, Any]]]:
    if t.role == "tool":
        return "user", [{"type": "tool_result", "tool_use_id": anthropic_id(t.tool_call_id), "content": t.content}]
    if t.role == "user":
        return "user", [{"type": "text", "text": _prefixed(t) if named and t.speaker else t.content}]
    # Anthropic refuses a final assistant text ending in whitespace; trailing space says nothing.
    text = [{"type": "text", "text": t.content.rstrip()}] if t.content.strip() else []
    return "assistant", text + [{"type": "tool_use", "id": anthropic_id(c.id), "name": c.name, "input": c.input()}
                                for c in t.tool_calls]
