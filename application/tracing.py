"""The default trace sink: every model call becomes a ``model.call_traced`` event in the log."""

from __future__ import annotations

import logging

from fermix_memory.application.model_ports import ModelCallTrace
from fermix_memory.application.store_ports import EventStore
from fermix_memory.application.streams import TRACE_STREAM
from fermix_memory.domain.activity_events import ModelCallTraced

log = logging.getLogger("fermix_memory.trace")


class EventLogTracer:
    """Records traces as events (no prompt text, no keys: who, which model, cost, outcome)."""

    def __init__(self, store: EventStore) -> None:
        self._store = store

    def record(self, trace: ModelCallTrace) -> None:
        event = ModelCallTraced(
            at=trace.at, agent=trace.agent, agent_id=trace.agent_id, provider=trace.provider, model=trace.model,
            latency_ms=round(trace.latency_ms, 3), prompt_tokens=trace.prompt_tokens,
            completion_tokens=trace.completion_tokens, outcome=trace.outcome,
            served_model=trace.served_model, attempts=trace.attempts, notes=trace.notes,
        )
        self._store.write(lambda tx: tx.append(TRACE_STREAM, [event]))
        log.info("model call %s %s/%s %s %.0f ms, %d attempt(s)", trace.agent, trace.provider, trace.model,
                 trace.outcome, trace.latency_ms, trace.attempts)
