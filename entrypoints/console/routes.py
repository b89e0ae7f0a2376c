"""The console's routes (ADR-0074), mounted at ``/`` by ``fermix serve``."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from fermix_memory.entrypoints.api.async_memory_system import AsyncMemorySystem
from fermix_memory.entrypoints.console import actions, forgetting, history, live, pages, privacy
from fermix_memory.entrypoints.console.signin import ConsoleSessions
from fermix_memory.entrypoints.console.views import Console, View, view
from fermix_memory.entrypoints.server.auth import Tokens

OWNER = "/owners/{agent}/{owner}"


def console_routes(memory: AsyncMemorySystem, tokens: Tokens, *, secure: bool = False) -> list[BaseRoute]:
    """The pages and forms of the console over ``memory``, for the operator and reader ``tokens``;
    ``secure``: the server speaks HTTPS (the session cookie is then Secure)."""
    console = Console(memory, ConsoleSessions(tokens, secure=secure))

    async def signin(request: Request) -> Response:
        return await actions.signin_page(console, request)

    async def home(request: Request) -> Response:
        return RedirectResponse("/owners", status_code=303)

    def page(path: str, handler: View, methods: tuple[str, ...] = ("GET",)) -> Route:
        return Route(path, view(console, handler), methods=list(methods))

    return [
        Route("/", home, methods=["GET"]),
        Route("/signin", signin, methods=["GET", "POST"]),
        page("/signout", actions.signout, ("POST",)),
        page("/owners", pages.owners),
        page(OWNER, pages.owner),
        page(f"{OWNER}/rows", pages.owner_rows),
        page(f"{OWNER}/live", live.owner_live),
        page(f"{OWNER}/files/{{name}}", pages.files),
        page(f"{OWNER}/files/{{name}}/rollback", actions.rollback, ("POST",)),
        page(f"{OWNER}/forget", forgetting.forget_owner, ("GET", "POST")),
        page(f"{OWNER}/history", history.history),
        page(f"{OWNER}/conversations/{{conversation:path}}", history.conversation),
        page(f"{OWNER}/forget-conversation/{{conversation:path}}", forgetting.forget_conversation, ("GET", "POST")),
        page("/memories/{memory_id}", pages.memory),
        page("/memories/{memory_id}/forget", forgetting.forget_fact, ("GET", "POST")),
        page("/memories/{memory_id}/archive", actions.archive, ("POST",)),
        page("/memories/{memory_id}/restore", actions.restore, ("POST",)),
        page("/events", pages.events),
        page("/events/verify", actions.verify, ("POST",)),
        page("/privacy", privacy.privacy),
        Mount("/static", app=StaticFiles(directory=str(Path(__file__).parent / "static")), name="console-static"),
    ]
