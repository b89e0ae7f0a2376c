"""Forgetting from the console (ADR-0074): an owner, one fact, or one conversation. Each shows
the dry-run preview first, then wants the owner's id typed, then shows what went and a byte scan
of the home's database files for every erased text of at least six characters."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.responses import Response

from fermix_memory.entrypoints.cli.forget_preview import memory_lines, owner_lines
from fermix_memory.entrypoints.console import pages
from fermix_memory.entrypoints.console.views import Page, owner_url
from fermix_memory.entrypoints.server.errors import HttpRefusal

SCANNED_MIN_CHARS = 6  # shorter texts would be found by chance in any database file
MISMATCH = "The confirmation did not match the owner's id: nothing was forgotten."


def scan(home: Path, texts: set[str]) -> str:
    """Whether any of ``texts`` (those of at least six characters) is still in the home's database
    files, byte for byte."""
    texts = {t for t in texts if len(t) >= SCANNED_MIN_CHARS}
    files = sorted(p for p in home.glob("memory.db*") if p.is_file())
    if not files:
        return "The memory is on PostgreSQL: no database file of this home to scan; see what remains below."
    found = [p.name for p in files for t in texts if t.encode("utf-8") in p.read_bytes()]
    names = ", ".join(p.name for p in files)
    if found:
        return f"Byte scan FOUND erased text in {', '.join(sorted(set(found)))}."
    return f"Byte scan: none of the {len(texts)} erased texts is left in {names}."


def conversation_url(agent: str, owner: str, conversation: str, *, forget: bool = False) -> str:
    """The conversation's page, or with ``forget`` its forget page (a conversation key may hold a
    ``/``: the key is the path's last part, so neither can be mistaken for the other)."""
    where = "forget-conversation" if forget else "conversations"
    return f"{owner_url(agent, owner)}/{where}/{quote(conversation, safe='')}"


def _may_forget(page: Page) -> None:
    if not page.signed.may_change:
        raise HttpRefusal(403, "forbidden", "a reader may not forget")


def _result(page: Page, report: Any, texts: set[str]) -> dict[str, Any]:
    events = report.erased_events
    return {"events": sum(events.values()) if isinstance(events, dict) else events, "store": report.store,
            "bytes_before": report.bytes_before, "bytes_after": report.bytes_after,
            "remains": report.remains, "scan": scan(page.memory.home, texts)}


# --- an owner ------------------------------------------------------------------------------------

async def _owner_texts(page: Page, agent: str, owner: str) -> set[str]:
    """What the owner's rows and messages say: what must not be in the files after forgetting."""
    texts = {r.value for r in await page.memory.memories(agent_id=agent, owner_id=owner)}
    preview = await page.memory.forget_owner(owner, agent_id=agent, dry_run=True)
    for content in preview.content.values():
        ids = set(content.messages)
        for conversation in content.conversations:
            texts |= {m.content for m in await page.memory.messages(agent, conversation) if m.id in ids}
    return texts


async def forget_owner(page: Page) -> Response:
    agent, owner = page.request.path_params["agent"], page.request.path_params["owner"]
    context: dict[str, Any] = {"agent": agent, "owner": owner, "subject": owner, "back": owner_url(agent, owner)}
    if page.request.method == "POST":
        fields = await page.form()
        if fields.get("confirm", "") == owner:
            texts = await _owner_texts(page, agent, owner)
            report = await page.memory.forget_owner(owner, agent_id=agent, by=page.signed.caller.name,
                                                    reason=fields.get("reason", ""))
            return page.render("forget.html", result=_result(page, report, texts), **context)
        context["problem"] = MISMATCH
    _may_forget(page)
    report = await page.memory.forget_owner(owner, agent_id=agent, dry_run=True)
    return page.render("forget.html", 400 if "problem" in context else 200, preview=owner_lines(report, agent),
                       has_something=bool(report.erased_events), **context)


# --- one fact ------------------------------------------------------------------------------------

def _story_texts(story: dict[str, Any]) -> set[str]:
    """The row's value and every value its events carried."""
    texts = {story["memory"]["value"]}
    for event in story["events"]:
        texts |= {event[name] for name in ("value", "previous_value") if isinstance(event.get(name), str)}
    return texts


async def forget_fact(page: Page) -> Response:
    memory_id = pages.number(page.request.path_params["memory_id"], "memory row")
    row = await page.memory.memory(memory_id)
    context: dict[str, Any] = {"agent": row.agent_id, "owner": row.owner_id, "subject": f"row {row.id} ({row.key})",
               "back": f"/memories/{row.id}"}
    if page.request.method == "POST":
        fields = await page.form()
        if fields.get("confirm", "") == row.owner_id:
            texts = _story_texts(await page.memory.explain(memory_id))
            report = await page.memory.forget_memory(memory_id, by=page.signed.caller.name,
                                                     reason=fields.get("reason", ""))
            context["back"] = owner_url(row.agent_id, row.owner_id)
            return page.render("forget.html", result=_result(page, report, texts), **context)
        context["problem"] = MISMATCH
    _may_forget(page)
    report = await page.memory.forget_memory(memory_id, dry_run=True)
    return page.render("forget.html", 400 if "problem" in context else 200, preview=memory_lines(report),
                       has_something=True, **context)


# --- one conversation ----------------------------------------------------------------------------

async def _conversation_texts(page: Page, agent: str, conversation: str, memory_ids: list[int]) -> set[str]:
    """Its messages' texts and those of the rows learnt only from it."""
    texts = {m.content for m in await page.memory.messages(agent, conversation)}
    for memory_id in memory_ids:
        texts |= _story_texts(await page.memory.explain(memory_id))
    return texts


def conversation_preview(report: Any) -> list[str]:
    rows = ", ".join(str(m) for m in report.memory_ids) or "none"
    return [f"would erase conversation {report.conversation!r} with {report.agent_id}: {report.messages} messages,"
            f" {report.checkpoints} checkpoints, {report.review_records} review records; memory rows learnt"
            f" only from it: {rows}; {report.erased_events} events in all"]


async def forget_conversation(page: Page) -> Response:
    agent, owner = page.request.path_params["agent"], page.request.path_params["owner"]
    conversation = page.request.path_params["conversation"]
    await owners_conversation(page, agent, owner, conversation)
    context: dict[str, Any] = {"agent": agent, "owner": owner, "subject": f"conversation {conversation}",
               "back": conversation_url(agent, owner, conversation)}
    if page.request.method == "POST":
        fields = await page.form()
        if fields.get("confirm", "") == owner:
            preview = await page.memory.forget_conversation(agent, conversation, dry_run=True)
            texts = await _conversation_texts(page, agent, conversation, preview.memory_ids)
            report = await page.memory.forget_conversation(agent, conversation, by=page.signed.caller.name,
                                                           reason=fields.get("reason", ""))
            context["back"] = f"{owner_url(agent, owner)}/history"
            return page.render("forget.html", result=_result(page, report, texts), **context)
        context["problem"] = MISMATCH
    _may_forget(page)
    report = await page.memory.forget_conversation(agent, conversation, dry_run=True)
    return page.render("forget.html", 400 if "problem" in context else 200, preview=conversation_preview(report),
                       has_something=bool(report.erased_events), **context)


async def owners_conversation(page: Page, agent: str, owner: str, conversation: str) -> list[Any]:
    """The stored messages of ``conversation`` with ``agent``, if ``owner`` spoke in it (404 otherwise)."""
    messages = await page.memory.messages(agent, conversation)
    if not any(m.owner_id == owner for m in messages):
        raise HttpRefusal(404, "not_found", f"no conversation {conversation[:80]!r} of {owner} with {agent}")
    return messages


__all__ = ["conversation_url", "forget_conversation", "forget_fact", "forget_owner", "scan"]
