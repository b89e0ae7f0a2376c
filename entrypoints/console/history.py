"""An owner's conversation history in the console (ADR-0074): a search over every conversation
of the owner with the agent, each hit with its conversation, sender, time and the question it
answers or the reply it got; and one conversation's current window."""

from __future__ import annotations

from typing import Any

import attrs
from starlette.responses import Response

from fermix_memory.application.query_ports import MessageHit
from fermix_memory.entrypoints.console.forgetting import conversation_url, owners_conversation
from fermix_memory.entrypoints.console.views import Page

HITS_SHOWN = 50


@attrs.frozen
class Found:
    """A message the search matched, the replies it got among the hits, and its page."""

    hit: MessageHit
    replies: list[MessageHit]
    url: str


def _found(agent: str, owner: str, hits: list[MessageHit]) -> list[Found]:
    """Each matching message, with the reply turns recall gave as its context folded under it."""
    matched = {h.message.id for h in hits if h.context_of is None}
    replies: dict[int, list[MessageHit]] = {}
    for h in hits:
        if h.context_of is not None and h.context_of in matched:
            replies.setdefault(h.context_of, []).append(h)
    return [Found(h, replies.get(h.message.id, []), conversation_url(agent, owner, str(h.message.conversation)))
            for h in hits if h.context_of is None or h.context_of not in matched]


async def history(page: Page) -> Response:
    agent, owner = page.request.path_params["agent"], page.request.path_params["owner"]
    query = page.request.query_params.get("q", "").strip()
    context: dict[str, Any] = {"agent": agent, "owner": owner, "query": query}
    if query:
        result = await page.memory.recall(query, agent_id=agent, owner_id=owner, source="history", scope="all",
                                          mode="keyword", limit=HITS_SHOWN)
        context["found"] = _found(agent, owner, result.messages)
    else:
        preview = await page.memory.forget_owner(owner, agent_id=agent, dry_run=True)
        content = preview.content.get(agent)
        names = sorted(content.conversations) if content is not None else []
        context["conversations"] = [(name, conversation_url(agent, owner, name)) for name in names]
    return page.render("history.html", **context)


async def conversation(page: Page) -> Response:
    agent, owner = page.request.path_params["agent"], page.request.path_params["owner"]
    name = page.request.path_params["conversation"]
    stored = await owners_conversation(page, agent, owner, name)
    window = await page.memory.history(agent, name)
    return page.render("conversation.html", agent=agent, owner=owner, conversation=name, window=window,
                       stored=len(stored), forget_url=conversation_url(agent, owner, name, forget=True))


__all__ = ["conversation", "history"]
