"""``rules``: an offline, deterministic chat model that answers memory-review requests only.

It reads the review input of a request built by
:func:`fermix_memory.application.reviewer_prompt.build_review_request`, runs the pure
:func:`fermix_memory.domain.rules_extractor.extract_operations` over it, and answers in the
reviewer contract (SPEC §12): ``Nothing to save.`` or ``{"operations": [...]}``. No network,
no clock, no randomness; usage is reported as 0 tokens.

A request without a review input block (a compaction request, say) is not something rules can
answer, so it raises :class:`ModelBadResponse` rather than inventing a reply.
"""

from __future__ import annotations

import json

from fermix_memory.application.errors import ModelBadResponse
from fermix_memory.application.ports import ChatRequest, ChatResponse
from fermix_memory.application.reviewer_prompt import ReviewInputError, parse_review_input
from fermix_memory.domain.reviewer_answer import NOTHING_TO_SAVE
from fermix_memory.domain.rules_extractor import extract_operations

MODEL_NAME = "rules-v1"


class RulesProvider:
    """A :class:`~fermix_memory.application.ports.ChatModel` that needs no model at all."""

    def __init__(self, name: str = "rules") -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def complete(self, request: ChatRequest) -> ChatResponse:
        try:
            memories, messages = parse_review_input(request)
        except ReviewInputError as exc:
            raise ModelBadResponse(f"{self._name}: only memory-review requests can be answered ({exc})") from None
        operations = extract_operations(messages, memories)
        text = json.dumps({"operations": operations}, ensure_ascii=False) if operations else NOTHING_TO_SAVE
        return ChatResponse(text=text, prompt_tokens=0, completion_tokens=0, provider=self._name, model=MODEL_NAME)
