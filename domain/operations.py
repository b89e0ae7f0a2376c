"""Memory operations (R-OPS): what a reviewer, a tool or an operator asks to change.

Categories are kept as the raw text the writer gave, so that an unknown category is refused
by admission (and the refusal recorded) instead of failing the whole batch.

``source_message_ids``: the messages a reviewer says the operation came from (optional; the
review keeps only ids of messages it was shown, ADR-0034).

``expires_at``: when the fact is to be erased (ADR-0082), as the writer gave it: ISO 8601 text
with an offset, a timezone-aware datetime, or ``"never"`` to take the row's expiry off; ``None``
(not named) leaves the row's expiry as it is. Admission judges it, as it judges a category.
"""

from __future__ import annotations

from datetime import datetime

import attrs

from fermix_memory.domain.event_base import Provenance
from fermix_memory.domain.expiry import EXAMPLE, MAX_EXPIRY_CHARS, NEVER

DEFAULT_CONFIDENCE = 1.0
# How a request names an expiry, for the schemas made from these classes (the HTTP API's).
EXPIRY_FIELD = {"json_schema": {
    "type": "string", "maxLength": MAX_EXPIRY_CHARS,
    "description": f"when the fact is erased: ISO 8601 with an offset, e.g. {EXAMPLE}; '{NEVER}' takes an expiry"
                   " off; left out, a row keeps its own"}}


@attrs.frozen(kw_only=True)
class AddOperation:
    category: str
    key: str
    value: str
    confidence: float = DEFAULT_CONFIDENCE
    source_message_ids: tuple[int, ...] = ()
    expires_at: datetime | str | None = attrs.field(default=None, metadata=EXPIRY_FIELD)

    op = "add"


@attrs.frozen(kw_only=True)
class ReplaceOperation:
    """Replace row ``id``'s value; may also change its category, key, confidence or expiry."""

    id: int
    value: str | None = None
    category: str | None = None
    key: str | None = None
    confidence: float | None = None
    source_message_ids: tuple[int, ...] = ()
    expires_at: datetime | str | None = attrs.field(default=None, metadata=EXPIRY_FIELD)

    op = "replace"


@attrs.frozen(kw_only=True)
class ArchiveOperation:
    id: int
    reason: str = ""
    source_message_ids: tuple[int, ...] = ()

    op = "archive"


Operation = AddOperation | ReplaceOperation | ArchiveOperation


def sourced(provenance: Provenance, op: Operation, shown: frozenset[int]) -> Provenance:
    """``provenance`` for ``op``, whose ``source_message_ids`` must be among ``shown`` (the
    messages its writer was shown): the others are dropped, and named in the provenance as
    dropped. Kept ids become the change's exact sources (the newest is its
    ``source_message_id``); with none kept the change keeps ``provenance``'s source."""
    if not op.source_message_ids:
        return provenance
    kept = tuple(sorted(i for i in op.source_message_ids if i in shown))
    dropped = tuple(i for i in op.source_message_ids if i not in shown)
    return attrs.evolve(provenance, source_message_ids=kept or None,
                        source_message_id=kept[-1] if kept else provenance.source_message_id,
                        dropped_source_message_ids=dropped)
