"""What every console page shares: the templates, who is signed in, and how a failure shows."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import attrs
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from fermix_memory.application.errors import NotFound
from fermix_memory.domain.errors import FermixError
from fermix_memory.entrypoints.api.async_memory_system import AsyncMemorySystem
from fermix_memory.entrypoints.console.signin import ConsoleSessions, Signed
from fermix_memory.entrypoints.server.errors import HttpRefusal, error_code, log

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))


def owner_url(agent: str, owner: str) -> str:
    return f"/owners/{quote(agent, safe='')}/{quote(owner, safe='')}"


TEMPLATES.env.globals["owner_url"] = owner_url


@attrs.frozen
class Console:
    """The memory the console shows and who may see it."""

    memory: AsyncMemorySystem
    sessions: ConsoleSessions


@attrs.frozen
class Page:
    """A request of a signed-in operator or reader."""

    request: Request
    signed: Signed
    console: Console

    @property
    def memory(self) -> AsyncMemorySystem:
        return self.console.memory

    def render(self, template: str, status_code: int = 200, **context: Any) -> Response:
        return TEMPLATES.TemplateResponse(self.request, template, {"signed": self.signed, **context},
                                          status_code=status_code)

    async def form(self, *, changes: bool = True) -> dict[str, str]:
        """The form's fields, its CSRF token checked; ``changes``: and that the signed-in role may
        change things (signing out or verifying the log changes nothing)."""
        fields = {k: v for k, v in (await self.request.form()).items() if isinstance(v, str)}
        self.console.sessions.check_form(self.signed, fields.get("csrf"), changes=changes)
        return fields


View = Callable[[Page], Awaitable[Response]]


def _status(exc: BaseException) -> int:
    if isinstance(exc, HttpRefusal):
        return exc.status
    if isinstance(exc, NotFound):
        return 404
    return 400 if isinstance(exc, ValueError) else 500


def view(console: Console, handler: View) -> Callable[[Request], Awaitable[Response]]:
    """A page for the signed-in (anyone else goes to the sign-in page), its failures as a page."""

    async def serve(request: Request) -> Response:
        signed = console.sessions.signed(request)
        if signed is None:
            return RedirectResponse("/signin", status_code=303)
        page = Page(request, signed, console)
        try:
            return await handler(page)
        except FermixError as exc:
            status = _status(exc)
            title = {403: "Not allowed", 404: "Not found"}.get(status, "That did not work")
            return page.render("error.html", status, status=status, title=title, message=str(exc)[:500],
                               code=error_code(exc))
        except Exception as exc:  # the cause goes to the log, never to the page
            log.error("a console page failed", exc_info=exc)
            return page.render("error.html", 500, status=500, title="That did not work",
                               message="the console failed to answer; its log says why")

    return serve
