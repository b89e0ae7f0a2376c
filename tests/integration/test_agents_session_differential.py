"""Our Agents session beside the SDK's own ``SQLiteSession``, driven by the same random runs of
``add_items``, ``pop_item`` and ``get_items(limit)``: every answer is the same.

Items come in the shapes a Runner hands over: user and assistant messages (text, several text
parts, parts with a picture as a data URL, a refusal), function calls and their outputs (text or
parts; a NUL in some, a text longer than a message's content in one), reasoning, a hosted tool's
call, and model items with the SDK's placeholder id. The one
intended difference is left out of the runs: an item added again with the same real id is
recorded once by ours (ADR-0050), so each real id is added once (or again after ``pop_item``,
ADR-0102).
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from agents import SQLiteSession
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fermix_memory import MemorySystem
from fermix_memory.application.message_input import MAX_CONTENT_CHARS
from fermix_memory.entrypoints.integrations.agents_items import PLACEHOLDER_ID
from fermix_memory.openai_agents import FermixAgentsSession

TEXTS = st.sampled_from(["hi", "I live in Paris", "", "tab\tand\nnewline", "nul \x00 inside", "émoji 🙂",
                         "x" * (MAX_CONTENT_CHARS + 5)])
PICTURE = "data:image/png;base64," + "iVBORw0KGgo" * 4000


def _ids() -> itertools.count[int]:
    return itertools.count(1)


@st.composite
def items(draw: st.DrawFn, ids: itertools.count[int]) -> dict[str, Any]:
    shape = draw(st.sampled_from(["user", "user_parts", "assistant", "placeholder", "call", "output",
                                  "reasoning", "system", "output_parts", "two_texts", "hosted", "refusal"]))
    text = draw(TEXTS)
    n = next(ids)
    if shape == "user":
        return {"role": "user", "content": text}
    if shape == "user_parts":
        return {"role": "user", "content": [{"type": "input_text", "text": text},
                                            {"type": "input_image", "image_url": PICTURE, "detail": "auto"}]}
    if shape in ("assistant", "placeholder"):
        return {"id": PLACEHOLDER_ID if shape == "placeholder" else f"msg_{n}", "type": "message",
                "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
    if shape == "call":
        return {"type": "function_call", "id": draw(st.sampled_from([f"fc_{n}", PLACEHOLDER_ID])),
                "call_id": f"call_{n}", "name": "lookup", "arguments": '{"q": 1}'}
    if shape == "output":
        return {"type": "function_call_output", "call_id": f"call_{n}", "output": text}
    if shape == "reasoning":
        return {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": text}]}
    if shape == "output_parts":
        return {"type": "function_call_output", "call_id": f"call_{n}",
                "output": [{"type": "input_text", "text": text}, {"type": "input_image", "image_url": PICTURE}]}
    if shape == "two_texts":
        return {"role": "user", "content": [{"type": "input_text", "text": text},
                                            {"type": "input_text", "text": "and more"}]}
    if shape == "hosted":
        return {"type": "web_search_call", "id": f"ws_{n}", "status": "completed",
                "action": {"type": "search", "query": text[:20]}}
    if shape == "refusal":
        return {"id": f"msg_{n}", "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "refusal", "refusal": text}]}
    return {"role": "system", "content": text or "be brief"}


@st.composite
def runs(draw: st.DrawFn) -> list[tuple[str, Any]]:
    ids = _ids()
    steps: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["add", "add", "pop", "get"]))
        if kind == "add":
            steps.append(("add", draw(st.lists(items(ids), min_size=1, max_size=4))))
        elif kind == "pop":
            steps.append(("pop", None))
        else:
            steps.append(("get", draw(st.one_of(st.none(), st.integers(0, 6)))))
    return steps


async def answers(session: Any, steps: list[tuple[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for kind, argument in steps:
        if kind == "add":
            await session.add_items(argument)
        elif kind == "pop":
            out.append(await session.pop_item())
        else:
            out.append(await session.get_items(argument))
    out.append(await session.get_items())
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(steps=runs())
def test_every_answer_is_the_sdks_sessions(tmp_path_factory: Any, steps: list[tuple[str, Any]]) -> None:
    where: Path = tmp_path_factory.mktemp("run")
    theirs = SQLiteSession("s", db_path=where / "sdk.db")
    with MemorySystem.open(where / "home", config={}) as memory:
        ours = FermixAgentsSession.open(memory, "s", agent_id="ada", owner_id="alice", review=False)
        assert asyncio.run(answers(ours, steps)) == asyncio.run(answers(theirs, steps))
    theirs.close()
