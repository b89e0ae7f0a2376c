"""The console's forms (ADR-0074): sign in and out, archive and restore a row, roll a prompt file
back, verify the log (forgetting is ``forgetting.py``'s). Every change goes through the same use
cases as the CLI, with the token's name recorded as who asked; every form carries the session's
CSRF token."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from fermix_memory.entrypoints.console import pages
from fermix_memory.entrypoints.console.views import TEMPLATES, Console, Page, owner_url
from fermix_memory.entrypoints.server.errors import HttpRefusal


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


__all__ = ["archive", "restore", "rollback", "signin_page", "signout", "verify"]
