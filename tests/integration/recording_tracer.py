"""A tracer that keeps every model-call trace in memory, in call order, for tests to read."""

from __future__ import annotations

import threading

from fermix_memory.application.model_ports import ModelCallTrace


class RecordingTracer:
    """Keeps every trace in memory, in call order; safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._traces: list[ModelCallTrace] = []

    def record(self, trace: ModelCallTrace) -> None:
        with self._lock:
            self._traces.append(trace)

    @property
    def traces(self) -> list[ModelCallTrace]:
        """A snapshot copy of the traces recorded so far."""
        with self._lock:
            return list(self._traces)
