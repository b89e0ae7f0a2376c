"""The console's pages (ADR-0074): owners, an owner's rows, a fact's story, a prompt file's
revisions, the event log (an owner's live stream is in live.py). They read through the asyncio
API only, as every way in does."""

from __future__ import annotations

import itertools
from typing import Any

from starlette.responses import Response

from fermix_memory.application.errors import NotFound
from fermix_memory.domain.memory import Memory
from fermix_memory.entrypoints.console.views import Page

LOG_SHOWN = 50  # newest events on the log page


async def owners(page: Page) -> Response:
    return page.render("owners.html", pairs=await page.memory.owners())


def _by_category(rows: list[Memory], query: str) -> list[tuple[str, list[Memory]]]:
    wanted = query.casefold()
    shown = [r for r in rows if not wanted or wanted in f"{r.key} {r.value}".casefold()]
    shown.sort(key=lambda r: (r.category.value, r.archived_at is not None, r.key))
    return [(category, list(group)) for category, group in itertools.groupby(shown, key=lambda r: r.category.value)]


async def _rows_context(page: Page) -> dict[str, Any]:
    agent, owner = page.request.path_params["agent"], page.request.path_params["owner"]
    query = page.request.query_params.get("q", "")
    as_of = page.request.query_params.get("as_of") or None
    rows = await page.memory.memories(agent_id=agent, owner_id=owner, as_of=as_of)
    # Rows that stood then and were erased since (ADR-0083): their ids and erasures, never what they said.
    erased = [] if as_of is None else await page.memory.erased_memories(agent_id=agent, owner_id=owner, as_of=as_of)
    return {"agent": agent, "owner": owner, "query": query, "as_of": as_of, "by_category": _by_category(rows, query),
            "erased": erased}


async def owner(page: Page) -> Response:
    return page.render("owner.html", **await _rows_context(page))


async def owner_rows(page: Page) -> Response:
    """The rows alone: what a live page reloads when the log moves."""
    return page.render("rows.html", **await _rows_context(page))


async def memory(page: Page) -> Response:
    memory_id = number(page.request.path_params["memory_id"], "memory row")
    return page.render("memory.html", story=await page.memory.explain(memory_id))


def _diff_lines(text: str) -> list[dict[str, str]]:
    def kind(line: str) -> str:
        if line.startswith(("+++", "---")):
            return "head"
        return {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")

    return [{"kind": kind(line), "text": line} for line in text.splitlines()]


async def files(page: Page) -> Response:
    agent, owner_id = page.request.path_params["agent"], page.request.path_params["owner"]
    name = page.request.path_params["name"]
    revisions = await page.memory.resource_history(name, agent_id=agent, owner_id=owner_id)
    diff: list[dict[str, str]] = []
    a = b = None
    if revisions:
        params = page.request.query_params
        b = number(params.get("b") or str(revisions[0].revision), "revision")
        a = number(params.get("a") or str(revisions[min(1, len(revisions) - 1)].revision), "revision")
        diff = _diff_lines(await page.memory.resource_diff(name, a, b, agent_id=agent, owner_id=owner_id))
    file = {"user_md": "USER.md", "memory_md": "MEMORY.md"}.get(name, name)
    return page.render("files.html", agent=agent, owner=owner_id, name=name, file=file, revisions=revisions,
                       diff=diff, a=a, b=b)


async def events(page: Page, report: Any = None) -> Response:
    head = await page.memory.head()
    first = max(0, head.position - LOG_SHOWN)
    entries = [e async for e in page.memory.log_entries(after=first)]
    entries.reverse()
    return page.render("events.html", head=str(head), entries=entries[:LOG_SHOWN], report=report)


def number(text: str, what: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        raise NotFound(f"no {what} {text[:40]!r}")
    return int(text)
