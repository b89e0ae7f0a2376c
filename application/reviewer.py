"""Use case: the time-gated background memory reviewer (R-REVIEW-GATE, R-OPS).

One review of one (agent, owner, conversation):
1. gate and claim in ONE write transaction — interval, failure back-off, new user messages,
   and an atomic claim (a claim past its expiry was left by a dead process and is taken over);
2. outside any transaction, one bounded model call tagged ``memory_reviewer`` on the agent's
   provider route, with the unseen user messages and the visible memory state;
3. parsing of the answer (strict, plus the documented conservative repairs; an unusable answer
   got one repair turn, then the next provider, on the route); each operation through
   admission; the claim checked again; applied operations, refusals and the completion
   recorded in ONE transaction. Any failure records ``review.failed`` with a back-off and
   writes nothing else.
The gate and claim rules are the domain's (``domain.review_gate``); the prompt-file revisions
of applied operations are recorded in the same transaction (``MemoryWriter``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

import attrs

from fermix_memory.application.errors import ModelError, RouteExhausted
from fermix_memory.application.memory_writes import MemoryWriter, OperationOutcome
from fermix_memory.application.model_ports import ChatModel
from fermix_memory.application.ports import Clock
from fermix_memory.application.reviewer_prompt import (
    REVIEWER_AGENT_TAG,
    ReviewInputMessage,
    build_review_request,
    pack_review_input,
)
from fermix_memory.application.settings import MemorySettings
from fermix_memory.application.store_ports import EventStore, ReviewState, WriteTransaction
from fermix_memory.application.streams import review_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain import review_gate as gate
from fermix_memory.domain.admission import WriteContext
from fermix_memory.domain.errors import ReviewerAnswerError
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.operations import Operation
from fermix_memory.domain.reviewer_answer_repair import parse_reviewer_answer_tolerant
from fermix_memory.domain.scopes import MemoryFilter, Reader, RecallScope, WriterKind, memory_filter
from fermix_memory.domain.values import ConversationKey, Trust

log = logging.getLogger("fermix_memory.reviewer")


@attrs.frozen(kw_only=True)
class ReviewResult:
    """What one review did: ``completed``, ``skipped`` (with the reason) or ``failed``."""

    agent_id: str
    owner_id: str
    conversation: ConversationKey
    status: str
    reason: str = ""
    messages_reviewed: int = 0
    applied: int = 0
    refused: int = 0
    outcomes: tuple[OperationOutcome, ...] = ()
    # A failed review: each provider's error, in the order they were tried (one when the failure
    # was not the providers'), and the earliest time a background review may try again (the
    # back-off it recorded, or the review interval since the last completed review if later).
    errors: tuple[str, ...] = ()
    retry_after: datetime | None = None


@attrs.frozen(kw_only=True)
class _Claim:
    claim_id: str
    after_id: int


class ReviewQueries(Protocol):
    """The reads a review needs outside its transactions."""

    def user_messages_after(self, agent_id: str, owner_id: str, conversation: ConversationKey, after_id: int,
                            limit: int) -> list[Message]: ...

    def memories(self, where: MemoryFilter, *, include_archived: bool = False) -> list[Memory]: ...

    def review_state(self, agent_id: str, owner_id: str, conversation: ConversationKey) -> ReviewState: ...

    def reviews_left_at_close(self) -> list[tuple[str, str, ConversationKey]]:
        """Every (agent, owner, conversation) whose due review a closing memory left unrun."""
        ...


class Reviewer:
    def __init__(
        self,
        store: EventStore,
        queries: ReviewQueries,
        writer: MemoryWriter,
        clock: Clock,
        settings: MemorySettings,
        model_for: Callable[[str], ChatModel],
        count_tokens: Callable[[str], int],
        *,
        timeout_s: float,
        holder: str,
    ) -> None:
        self._store = store
        self._queries = queries
        self._writer = writer
        self._clock = clock
        self._settings = settings
        self._model_for = model_for
        self._count = count_tokens
        self._timeout_s = timeout_s
        self._holder = holder

    def review(self, agent_id: str, owner_id: str, conversation: ConversationKey, *, now: bool = False
               ) -> ReviewResult:
        """Run one review if it is due (``now`` bypasses the interval and back-off gates)."""
        result = ReviewResult(agent_id=agent_id, owner_id=owner_id, conversation=conversation, status="skipped")
        claim = self._store.write(lambda tx: self._gate_and_claim(tx, agent_id, owner_id, conversation, now))
        if isinstance(claim, str):
            return attrs.evolve(result, reason=claim)
        reader = Reader(agent_id=agent_id, owner_id=owner_id, conversation=conversation)
        try:
            pending = self._queries.user_messages_after(agent_id, owner_id, conversation, claim.after_id,
                                                        self._settings.review_max_messages)
            packed = pack_review_input([ReviewInputMessage.from_message(m) for m in pending], self._count,
                                       max_messages=self._settings.review_max_messages,
                                       token_budget=self._settings.review_input_token_budget)
            visible = self._queries.memories(memory_filter(reader, RecallScope.CURRENT))
            request = build_review_request(messages=packed, memories=visible,
                                           max_output_tokens=self._settings.review_max_output_tokens,
                                           timeout_s=self._timeout_s)
            request = attrs.evolve(request, tags={**request.tags, "agent": REVIEWER_AGENT_TAG,
                                                  "agent_id": agent_id})
            answer = self._model_for(agent_id).complete(request)
            operations, repairs = parse_reviewer_answer_tolerant(answer.text)
            if repairs:
                log.info("reviewer answer of %s (%s) repaired: %s", answer.provider, answer.model, ", ".join(repairs))
        except (ModelError, ReviewerAnswerError) as exc:
            return self._fail(result, claim, exc)
        except Exception as exc:  # a bug must not leave the claim held until it expires
            log.exception("review of %s/%s %s crashed", agent_id, owner_id, conversation)
            self._fail(result, claim, exc)
            raise
        trusts = {m.trust for m in pending[: len(packed)]}
        last_id = packed[-1].id if packed else claim.after_id
        ctx = WriteContext(
            writer=WriterKind.REVIEWER, reader=reader,
            provenance=ev.Provenance(
                agent_id=agent_id, owner_id=owner_id,
                # A batch with any guest message is a guest's statement: no directives from it.
                trust=Trust.OPERATOR if trusts == {Trust.OPERATOR} else Trust.GUEST,
                source_type="reviewer", source_id=self._holder, run_id=claim.claim_id,
                source_message_id=last_id or None, reason="memory review",
            ),
        )
        shown = frozenset(m.id for m in packed)
        for index, op in enumerate(operations):
            unknown = [i for i in op.source_message_ids if i not in shown]
            if unknown:  # recorded in the provenance of what the operation writes (ADR-0034)
                log.warning("review of %s/%s %s: operations[%d] names messages it was not shown, dropped: %s",
                            agent_id, owner_id, conversation, index, unknown[:10])
        try:
            written = {m.id: m.created_at for m in pending if m.id in shown}
            return self._store.write(lambda tx: self._apply(tx, result, claim, operations, ctx, len(packed), last_id,
                                                            shown, written))
        except Exception as exc:  # nothing was applied; release the claim and back off
            log.exception("applying the review of %s/%s %s failed", agent_id, owner_id, conversation)
            self._fail(result, claim, exc)
            raise

    def left_at_close(self, agent_id: str, owner_id: str, conversation: ConversationKey) -> bool:
        """Record that a queued review of the conversation did not run before the memory closed
        (``review.skipped``, reason ``left_at_close``: the next opening runs it), if it was due;
        whether it was."""
        def work(tx: WriteTransaction) -> bool:
            state = tx.review_state(agent_id, owner_id, conversation)
            events = gate.decide_left_at_close(state, self._claim_command(tx, agent_id, owner_id, conversation,
                                                                          now=False))
            if events:
                tx.append(review_stream(agent_id, owner_id, conversation), events)
            return state.last_skip_reason == gate.LEFT_AT_CLOSE or bool(events)

        left = self._store.write(work)
        if left:
            log.warning("the review of %s/%s %s was queued but the memory closed before it ran: recorded, it"
                        " runs after the memory next opens", agent_id, owner_id, conversation)
        return left

    def reviewed_up_to(self, agent_id: str, owner_id: str, conversation: ConversationKey) -> int:
        """The id of the last message a completed review covered (0: never reviewed)."""
        return self._queries.review_state(agent_id, owner_id, conversation).reviewed_up_to_id

    # --- steps --------------------------------------------------------------------------------------

    def _key(self, result: ReviewResult) -> gate.ReviewKey:
        return gate.ReviewKey(agent_id=result.agent_id, owner_id=result.owner_id, conversation=result.conversation)

    def _gate_and_claim(self, tx: WriteTransaction, agent_id: str, owner_id: str, conversation: ConversationKey,
                        now: bool) -> _Claim | str:
        state = tx.review_state(agent_id, owner_id, conversation)
        cmd = self._claim_command(tx, agent_id, owner_id, conversation, now=now)
        events = gate.decide_claim(state, cmd)
        if events:
            tx.append(review_stream(agent_id, owner_id, conversation), events)
        reason = gate.gate_reason(state, cmd)
        return reason or _Claim(claim_id=cmd.claim_id, after_id=state.reviewed_up_to_id)

    def _claim_command(self, tx: WriteTransaction, agent_id: str, owner_id: str, conversation: ConversationKey,
                       *, now: bool) -> gate.ClaimReview:
        return gate.ClaimReview(
            key=gate.ReviewKey(agent_id=agent_id, owner_id=owner_id, conversation=conversation),
            at=self._clock.now(), last_user_message_id=tx.last_user_message_id(agent_id, owner_id, conversation),
            claim_id=uuid.uuid4().hex, holder=self._holder, interval_hours=self._settings.review_interval_hours,
            claim_ttl=timedelta(seconds=self._settings.review_claim_ttl_s), now=now)

    def _fail(self, result: ReviewResult, claim: _Claim, exc: BaseException) -> ReviewResult:
        error = f"{type(exc).__name__}: {exc}"[:1000]
        log.warning("review of %s/%s %s failed: %s", result.agent_id, result.owner_id, result.conversation, error)
        cmd = gate.FailReview(key=self._key(result), at=self._clock.now(), claim_id=claim.claim_id, error=error,
                              backoff=timedelta(milliseconds=self._settings.review_failure_backoff_ms))

        def work(tx: WriteTransaction) -> datetime | None:
            state = tx.review_state(result.agent_id, result.owner_id, result.conversation)
            events = gate.decide_fail(state, cmd)
            if events:
                tx.append(review_stream(result.agent_id, result.owner_id, result.conversation), events)
            return state.last_review_at

        last_review_at = self._store.write(work)
        retry_after = cmd.at + cmd.backoff  # and the interval since the last completed review, if later
        if last_review_at is not None and self._settings.review_interval_hours > 0:
            retry_after = max(retry_after, last_review_at + timedelta(hours=self._settings.review_interval_hours))
        errors = exc.errors if isinstance(exc, RouteExhausted) else [exc]
        return attrs.evolve(result, status="failed", reason=error, retry_after=retry_after,
                            errors=tuple(f"{type(e).__name__}: {e}"[:1000] for e in errors))

    def _apply(self, tx: WriteTransaction, result: ReviewResult, claim: _Claim, operations: list[Operation],
               ctx: WriteContext, reviewed: int, last_id: int, shown: frozenset[int],
               written: dict[int, datetime]) -> ReviewResult:
        at = self._clock.now()
        stream = review_stream(result.agent_id, result.owner_id, result.conversation)
        state = tx.review_state(result.agent_id, result.owner_id, result.conversation)
        cmd = gate.CompleteReview(key=self._key(result), at=at, claim_id=claim.claim_id,
                                  reviewed_up_to_message_id=last_id, messages_reviewed=reviewed, applied=0,
                                  refused=0, nothing_to_save=not operations)
        if state.claim_id != claim.claim_id:  # nothing of a lost claim's review may be applied
            tx.append(stream, gate.decide_complete(state, cmd))
            return attrs.evolve(result, reason="claim_lost")
        outcomes = self._writer.apply_in(tx, operations, ctx, at, shown_messages=shown, written=written)
        applied = sum(o.status in ("added", "replaced", "archived") for o in outcomes)
        refused = sum(o.status == "refused" for o in outcomes)
        tx.append(stream, gate.decide_complete(state, attrs.evolve(cmd, applied=applied, refused=refused)))
        return attrs.evolve(result, status="completed", reason="nothing_to_save" if not operations else "",
                            messages_reviewed=reviewed, applied=applied, refused=refused, outcomes=tuple(outcomes))
