"""How ``fermix memory list --as-of`` shows a row that stood then and was erased since
(ADR-0083): a placeholder naming its id, owner, and when and by what it was erased; never what
it said."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Any

from fermix_memory.entrypoints.cli.output import Output, jsonable, one_line

if TYPE_CHECKING:  # `memory list` without --as-of never loads the log's event classes
    from fermix_memory.domain.erased_rows import ErasedRow


def _is_erased(r: Any) -> bool:
    return hasattr(r, "erased_by")


def erased_since(memory: Any, args: argparse.Namespace) -> list[ErasedRow]:
    """With ``--as-of``, the rows that stood then and were erased since; none without it."""
    if args.as_of is None:
        return []
    found: list[ErasedRow] = memory.erased_memories(agent_id=args.agent, owner_id=args.owner, as_of=args.as_of)
    return found


def emit_listed(out: Output, rows: Sequence[Any], erased: Sequence[ErasedRow], header: str,
                row_line: Callable[[Any], str]) -> None:
    """``memory list``'s output: the rows and the placeholders, by id (JSON: ``listed_json``)."""
    listed = sorted([*rows, *erased], key=lambda r: r.memory_id if _is_erased(r) else r.id)
    if out.as_json:
        out.emit(listed_json(listed), lambda _: [])
        return
    out.emit(listed, lambda rs: [header] + [erased_line(r) if _is_erased(r) else row_line(r) for r in rs]
             if rs else ["no memory rows"])


def erased_entry(r: ErasedRow) -> dict[str, Any]:
    """A placeholder as ``--json`` gives it: ``"erased": true`` and no key, value or category."""
    return {"id": r.memory_id, "agent_id": r.agent_id, "owner_id": r.owner_id, "erased": True,
            "recorded_at": r.recorded_at.isoformat(),
            "erased_at": None if r.erased_at is None else r.erased_at.isoformat(),
            "erased_by": r.erased_by, "source_type": r.source_type, "source_id": r.source_id,
            "record": r.record, "record_kind": r.record_kind, "receipt": r.receipt}


def listed_json(rows: list[Any]) -> list[Any]:
    return [erased_entry(r) if _is_erased(r) else jsonable(r) for r in rows]


def erased_line(r: ErasedRow) -> str:
    """``12  ada  alice  [erased at 2026-03-01T09:20:00Z by retention policy kiosk; receipt at 57]``."""
    when = "at a time not on record" if r.erased_at is None else \
        f"at {r.erased_at.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"
    receipt = "" if r.receipt is None else f"; receipt at {r.receipt}"
    return "\t".join((str(r.memory_id), one_line(r.agent_id), one_line(r.owner_id),
                      f"[erased {when} by {one_line(r.erased_by)}{receipt}]"))
