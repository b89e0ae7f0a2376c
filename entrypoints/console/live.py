"""The live stream of an owner's page (ADR-0090): server-sent events, ``changed`` after each
committed write touching that agent's owner (its rows, its prompt files, its erasure), whoever
wrote it; nothing for any other owner's writes. One shared listener of the memory's writes
(:func:`owner_changes`) fans out to the open streams, each with a bounded queue; a closed page
frees its slot."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from starlette.responses import Response, StreamingResponse

from fermix_memory.entrypoints.api.changes import owner_changes
from fermix_memory.entrypoints.console.views import Page

KEEP_ALIVE_S = 15.0  # a quiet stream sends a comment this often (proxies and browsers keep it open)
PENDING = 1  # a stream's queue: one ``changed`` waiting is as good as many (the page reloads its rows)


def _queue_for(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[int]) -> Callable[[int], None]:
    def put(position: int) -> None:
        if not queue.full():
            queue.put_nowait(position)

    def told(position: int) -> None:  # on the thread that heard the write
        with contextlib.suppress(RuntimeError):  # the loop is closed: the server is stopping
            loop.call_soon_threadsafe(put, position)

    return told


async def owner_live(page: Page) -> Response:
    """Server-sent events: ``changed`` (its data: the write's log position, 0 when the change feed
    did not say) after each write touching this page's owner; ``listening`` once it listens."""
    agent, owner = page.request.path_params["agent"], page.request.path_params["owner"]
    hub = owner_changes(page.memory.sync)

    async def events() -> AsyncIterator[str]:
        queue: asyncio.Queue[int] = asyncio.Queue(PENDING)
        stop = hub.listen(agent, owner, _queue_for(asyncio.get_running_loop(), queue))
        try:
            yield "event: listening\ndata: yes\n\n"
            while True:
                try:
                    position = await asyncio.wait_for(queue.get(), KEEP_ALIVE_S)
                except TimeoutError:
                    yield ": still here\n\n"
                    continue
                yield f"event: changed\ndata: {position}\n\n"
        finally:
            stop()

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
