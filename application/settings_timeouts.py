"""The timeout settings: ``[fermix_core.timeouts]``, the central timeout policies."""

from __future__ import annotations

import attrs

from fermix_memory.application.settings_checks import NON_NEGATIVE_NUMBER, POSITIVE_NUMBER, about, at_most

_CENTURY_S = 100 * 365 * 24 * 3600


@attrs.frozen(kw_only=True)
class TimeoutSettings:
    """``[fermix_core.timeouts]``: the central timeout policies."""

    llm_buffered_s: float = attrs.field(default=120.0, metadata=about(
        at_most(POSITIVE_NUMBER, _CENTURY_S, "100 years"),
        "Seconds a buffered (non-streaming) model call may take: the reviewer, compaction."))
    close_wait_s: float = attrs.field(default=30.0, metadata=about(
        at_most(NON_NEGATIVE_NUMBER, _CENTURY_S, "100 years"),
        "Seconds closing a memory (or the end of a process that did not close it) keeps running the"
        " reviews and compactions turns queued; a review left then is recorded and runs after the"
        " memory next opens. A review already running is always let finish."))
