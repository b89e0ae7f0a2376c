"""Tracers for model calls: one structured log line per call, or an in-memory record."""

from __future__ import annotations

import json
import logging
import threading

import attrs

from fermix_memory.application.ports import ModelCallTrace

TRACE_LOGGER = "fermix_memory.trace"


def trace_fields(trace: ModelCallTrace) -> dict[str, object]:
    """The trace as JSON-ready fields (timestamps in ISO 8601, latency rounded to 0.1 ms)."""
    fields = attrs.asdict(trace)
    fields["at"] = trace.at.isoformat()
    fields["latency_ms"] = round(trace.latency_ms, 1)
    fields["notes"] = list(trace.notes)
    return fields


class LoggingTracer:
    """Logs each trace as one ``model_call {json}`` line on the ``fermix_memory.trace`` logger.

    A trace holds names, counts and timings only, never prompts, answers or keys. The fields
    are also attached to the record as ``record.model_call`` for structured handlers.
    """

    def __init__(self, logger: logging.Logger | None = None, level: int = logging.INFO) -> None:
        self._logger = logger if logger is not None else logging.getLogger(TRACE_LOGGER)
        self._level = level

    def record(self, trace: ModelCallTrace) -> None:
        fields = trace_fields(trace)
        self._logger.log(
            self._level,
            "model_call %s",
            json.dumps(fields, sort_keys=True, ensure_ascii=False),
            extra={"model_call": fields},
        )


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

    def clear(self) -> None:
        with self._lock:
            self._traces.clear()
