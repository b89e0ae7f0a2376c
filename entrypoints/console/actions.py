"""The console's forms (ADR-0074): sign in and out, archive and restore a row, roll a prompt file
back, verify the log, forget an owner. Every change goes through the same use cases as the CLI,
with the token's name recorded as who asked; every form carries the session's CSRF token."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from fermix_memory.entrypoints.cli.forget_preview import owner_lines
from fermix_memory.entrypoints.console import pages
from fermix_memory.entrypoints.console.views import TEMPLATES, Console, Page, owner_url
from fermix_memory.entrypoints.server.errors import HttpRefusal

SCANNED_MIN_CHARS = 6  # shorter texts would be found by chance in any database file


def _back(url: str) -> Response:
    return RedirectResponse(url, status_code=303)


async def signin_page(console: Console, request: Request) -> Response:
    if request.method == "GET":
        return TEMPLATES.TemplateResponse(request, "signin.html", {"signed": None})
    token = (await request.form()).get("token")
    response = _back("/owners")
    try:
        if not isinstance(token, str) or not token:
            raise HttpRefusal(401, "unauthenticated", "give a token")
        console.sessions.sign_in(token, response)
    except HttpRefusal as exc:
        problem = "That token is not one of this server's." if exc.status == 401 else str(exc)
        return TEMPLATES.TemplateResponse(request, "signin.html", {"signed": None, "problem": problem},
                                          status_code=exc.status)
    return response


async def signout(page: Page) -> Response:
    await page.form(changes=False)
    response = _back("/signin")
    page.console.sessions.sign_out(response)
    return response


async def archive(page: Page) -> Response:
    await page.form()
    row = await page.memory.memory(pages.number(page.request.path_params["memory_id"], "memory row"))
    await page.memory.write_memory({"op": "archive", "id": row.id, "reason": "archived in the console"},
                                   agent_id=row.agent_id, owner_id=row.owner_id, trust="operator",
                                   source_type="console", source_id=page.signed.caller.name)
    return _back(owner_url(row.agent_id, row.owner_id))


async def restore(page: Page) -> Response:
    await page.form()
    row = await page.memory.restore(pages.number(page.request.path_params["memory_id"], "memory row"),
                                    by=page.signed.caller.name)
    return _back(owner_url(row.agent_id, row.owner_id))


async def rollback(page: Page) -> Response:
    fields = await page.form()
    agent, owner = page.request.path_params["agent"], page.request.path_params["owner"]
    name = page.request.path_params["name"]
    await page.memory.resource_rollback(name, pages.number(fields.get("revision", ""), "revision"),
                                        agent_id=agent, owner_id=owner, by=page.signed.caller.name)
    return _back(f"{owner_url(agent, owner)}/files/{name}")


async def verify(page: Page) -> Response:
    await page.form(changes=False)  # a reader may verify: it changes nothing
    return await pages.events(page, report=await page.memory.verify())


async def _texts_of(page: Page, agent: str, owner: str) -> set[str]:
    """What the owner's rows and messages say: what must not be in the files after forgetting."""
    texts = {r.value for r in await page.memory.memories(agent_id=agent, owner_id=owner)}
    preview = await page.memory.forget_owner(owner, agent_id=agent, dry_run=True)
    for content in preview.content.values():
        ids = set(content.messages)
        for conversation in content.conversations:
            texts |= {m.content for m in await page.memory.messages(agent, conversation) if m.id in ids}
    return {t for t in texts if len(t) >= SCANNED_MIN_CHARS}


def _scan(home: Path, texts: set[str]) -> str:
    """Whether any of ``texts`` is still in the home's database files, byte for byte."""
    files = sorted(p for p in home.glob("memory.db*") if p.is_file())
    if not files:
        return "The memory is on PostgreSQL: no database file of this home to scan; see what remains below."
    found = [p.name for p in files for t in texts if t.encode("utf-8") in p.read_bytes()]
    names = ", ".join(p.name for p in files)
    if found:
        return f"Byte scan FOUND erased text in {', '.join(sorted(set(found)))}."
    return f"Byte scan: none of the {len(texts)} erased texts is left in {names}."


async def forget(page: Page) -> Response:
    agent, owner = page.request.path_params["agent"], page.request.path_params["owner"]
    if page.request.method == "GET":
        return await _preview(page, agent, owner)
    fields = await page.form()
    if fields.get("confirm", "") != owner:
        return await _preview(page, agent, owner, problem="The confirmation did not match the owner's id:"
                                                          " nothing was forgotten.")
    texts = await _texts_of(page, agent, owner)
    report = await page.memory.forget_owner(owner, agent_id=agent, by=page.signed.caller.name,
                                            reason=fields.get("reason", ""))
    result = {"events": sum(report.erased_events.values()), "store": report.store,
              "bytes_before": report.bytes_before, "bytes_after": report.bytes_after,
              "remains": report.remains, "scan": _scan(page.memory.home, texts)}
    return page.render("forget.html", agent=agent, owner=owner, result=result)


async def _preview(page: Page, agent: str, owner: str, problem: str = "") -> Response:
    if not page.signed.may_change:
        raise HttpRefusal(403, "forbidden", "a reader may not forget")
    report = await page.memory.forget_owner(owner, agent_id=agent, dry_run=True)
    return page.render("forget.html", 400 if problem else 200, agent=agent, owner=owner, problem=problem,
                       preview=owner_lines(report, agent), has_something=bool(report.erased_events))


__all__ = ["archive", "forget", "restore", "rollback", "signin_page", "signout", "verify"]
