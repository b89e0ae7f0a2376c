"""Memory operations (R-OPS): what a reviewer, a tool or an operator asks to change.

Categories are kept as the raw text the writer gave, so that an unknown category is refused
by admission (and the refusal recorded) instead of failing the whole batch.
"""

from __future__ import annotations

import attrs

DEFAULT_CONFIDENCE = 1.0


@attrs.frozen(kw_only=True)
class AddOperation:
    category: str
    key: str
    value: str
    confidence: float = DEFAULT_CONFIDENCE

    op = "add"


@attrs.frozen(kw_only=True)
class ReplaceOperation:
    """Replace row ``id``'s value; may also change its category, key or confidence."""

    id: int
    value: str | None = None
    category: str | None = None
    key: str | None = None
    confidence: float | None = None

    op = "replace"


@attrs.frozen(kw_only=True)
class ArchiveOperation:
    id: int
    reason: str = ""

    op = "archive"


Operation = AddOperation | ReplaceOperation | ArchiveOperation
