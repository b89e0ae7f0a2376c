"""``rules``: an offline, deterministic chat model that answers memory-review requests only.

It reads the review input of a request built by
:func:`fermix_memory.application.reviewer_prompt.build_review_request`, runs the pure
:func:`~fermix_memory.adapters.providers.rules.extractor.extract_operations` over it, and
answers in the reviewer contract (SPEC §12): ``Nothing to save.`` or ``{"operations": [...]}``.
No network, no clock, no randomness; usage is reported as 0 tokens.

A compaction request (tagged ``compactor``) gets an extractive checkpoint: the first sentence
of each user message, in order, within the request's token budget — plain, honest, and enough
for offline use. Any other request raises :class:`ModelBadResponse` rather than inventing a
reply.
"""

from __future__ import annotations

import json
import re

from fermix_memory.adapters.providers.rules.extractor import extract_operations
from fermix_memory.application.errors import ModelBadResponse
from fermix_memory.application.model_ports import ChatRequest, ChatResponse
from fermix_memory.application.reviewer_prompt import ReviewInputError, parse_review_input
from fermix_memory.domain.reviewer_answer import NOTHING_TO_SAVE

MODEL_NAME = "rules-v1"


class RulesProvider:
    """A :class:`~fermix_memory.application.model_ports.ChatModel` that needs no model at all."""

    def __init__(self, name: str = "rules") -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def complete(self, request: ChatRequest) -> ChatResponse:
        if request.tags.get("agent") == COMPACTOR_TAG:
            return self._respond(extractive_checkpoint(request))
        try:
            memories, messages = parse_review_input(request)
        except ReviewInputError as exc:
            raise ModelBadResponse(f"{self._name}: only memory-review requests can be answered ({exc})") from None
        operations = extract_operations(messages, memories)
        text = json.dumps({"operations": operations}, ensure_ascii=False) if operations else NOTHING_TO_SAVE
        return self._respond(text)

    def _respond(self, text: str) -> ChatResponse:
        return ChatResponse(text=text, prompt_tokens=0, completion_tokens=0, provider=self._name, model=MODEL_NAME)


COMPACTOR_TAG = "compactor"
_LINE = re.compile(r"^\[(user|assistant|system|tool) ([^\]]*)\]: (.*)$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def extractive_checkpoint(request: ChatRequest) -> str:
    """The first sentence of every user message of the transcript, within ``max_tokens``
    (about 4 characters a token); a compactor request whose transcript has none gets a
    one-line note instead, never an empty answer."""
    transcript = request.messages[-1].content if request.messages else ""
    points = []
    for line in transcript.splitlines():
        match = _LINE.match(line)
        if match and match.group(1) == "user":
            sentence = _SENTENCE_END.split(match.group(3).strip(), maxsplit=1)[0][:200]
            points.append(f"- {match.group(2) or 'user'}: {sentence}")
    budget = max(200, request.max_tokens * 4)
    kept, used = [], 0
    for point in points:
        if used + len(point) + 1 > budget:
            break
        kept.append(point)
        used += len(point) + 1
    header = "Earlier in this conversation (extractive checkpoint, offline):"
    if not kept:
        return f"{header} no user messages to carry over."
    omitted = len(points) - len(kept)
    tail = [f"- … and {omitted} more user messages (in the history log)"] if omitted else []
    return "\n".join([header, *kept, *tail])
