"""Admission (R-CAT, R-OPS): decide, one operation at a time, what a write may change.

``AdmissionPolicy.decide`` is pure: it reads rows through a :class:`RowLookup` the caller
provides and returns the events to record — the change itself, nothing (an idempotent
restatement), or an :class:`OperationRefused` naming the reason.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from datetime import datetime

import attrs

from fermix_memory.domain.errors import InvalidArgument, InvalidIdentifier
from fermix_memory.domain.event_base import DomainEvent, Provenance
from fermix_memory.domain.expiry import PastExpiry, stated_expiry
from fermix_memory.domain.memory import MAX_VALUE_CHARS, Memory, Statement
from fermix_memory.domain.memory_events import (
    MemoryAdded,
    MemoryArchived,
    MemoryReplaced,
    MemoryRestored,
    OperationRefused,
)
from fermix_memory.domain.memory_evolution import older_statement
from fermix_memory.domain.operations import (
    AddOperation,
    ArchiveOperation,
    Operation,
    ReplaceOperation,
)
from fermix_memory.domain.row_lookup import RowLookup
from fermix_memory.domain.scopes import (
    Reader,
    RecallScope,
    WriterKind,
    memory_filter,
    write_scope,
)
from fermix_memory.domain.values import (
    Category,
    PromoteTarget,
    Trust,
    is_encodable,
    normalise_key,
    preview,
    shorten,
)


class Refusal(Exception):
    """Internal: carries a refusal reason out of a check."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


@attrs.frozen(kw_only=True)
class WriteContext:
    """Who writes and in what context: the reader view decides what rows can be touched;
    ``said_at`` and ``operator_set``: see :func:`~fermix_memory.domain.memory_evolution.older_statement`."""

    writer: WriterKind
    reader: Reader
    provenance: Provenance
    said_at: datetime | None = None
    operator_set: Mapping[int, datetime] = attrs.field(factory=dict, hash=False)

    @property
    def trust(self) -> Trust:
        return self.provenance.trust


MAX_MEMORY_ID = 2**63 - 1  # SQLite's largest rowid
# Where a writer's row of a category goes, for a reader: a pure function of three frozen values,
# asked again at every add of a run of writes in one context.
_write_scope = functools.lru_cache(maxsize=1024)(write_scope)
_CONTROL_EXCEPT_NEWLINE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


@attrs.frozen(kw_only=True)
class AdmissionPolicy:
    """Trust gate, category validation, category→scope mapping and value limits."""

    max_value_chars: int = MAX_VALUE_CHARS

    def decide(self, op: Operation, ctx: WriteContext, rows: RowLookup, at: datetime) -> list[DomainEvent]:
        try:
            if isinstance(op, AddOperation):
                return self._add(op, ctx, rows, at)
            if isinstance(op, ReplaceOperation):
                return self._replace(op, ctx, rows, at)
            return self._archive(op, ctx, rows, at)
        except Refusal as refusal:
            return [self._refused(op, ctx, at, refusal)]

    def restore(self, memory_id: int, ctx: WriteContext, rows: RowLookup, at: datetime) -> list[DomainEvent]:
        """Un-archive a row (operator action). Unknown ids are refused; live rows are a no-op."""
        row = rows.by_id(memory_id) if 1 <= memory_id <= MAX_MEMORY_ID else None
        if row is None:
            return [self._refused(ArchiveOperation(id=memory_id), ctx, at,
                                  Refusal("unknown_memory", f"no memory row {memory_id}"), op_name="restore")]
        if not row.archived:
            return []
        return [MemoryRestored(at=at, memory_id=row.id, restored_by=ctx.provenance.source_type or ctx.writer.value,
                               provenance=ctx.provenance)]

    # --- checks -------------------------------------------------------------------------

    def _category(self, raw: object, ctx: WriteContext) -> Category:
        try:
            if not isinstance(raw, str):
                raise ValueError(raw)
            category = Category(raw)
        except ValueError:
            raise Refusal("unknown_category", f"{preview(raw)} is not a memory category") from None
        if category.operator_only and ctx.trust is not Trust.OPERATOR:
            raise Refusal("guest_directive", "only the operator may write directive rows")
        return category

    def _value(self, raw: object, writer: WriterKind) -> str:
        """Values up to ``max_value_chars`` are stored whole (the prompt files show the first 200
        characters). A longer one is refused — except from the reviewer, whose facts come from
        messages that will not be reviewed again: it is cut at a word boundary and ends in ``…``."""
        if not isinstance(raw, str) or not is_encodable(raw):
            raise Refusal("invalid_value", "value must be valid text")
        value = _CONTROL_EXCEPT_NEWLINE.sub(" ", raw).strip()
        if not value:
            raise Refusal("empty_value", "value is empty")
        if len(value) > self.max_value_chars:
            if writer is WriterKind.REVIEWER:
                return shorten(value, self.max_value_chars)
            raise Refusal(
                "value_too_long", f"value has {len(value)} characters, limit {self.max_value_chars}"
            )
        return value

    @staticmethod
    def _key(raw: object) -> str:
        try:
            return normalise_key(raw)
        except InvalidIdentifier as exc:
            raise Refusal("invalid_key", str(exc)) from None

    @staticmethod
    def _confidence(raw: object) -> float:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise Refusal("invalid_confidence", "confidence must be a number from 0 to 1")
        try:
            value = float(raw)
        except OverflowError:
            raise Refusal("invalid_confidence", "confidence must be a number from 0 to 1") from None
        if math.isnan(value) or not 0.0 <= value <= 1.0:
            raise Refusal("invalid_confidence", "confidence must be a number from 0 to 1")
        return value

    @staticmethod
    def _expiry(raw: object, current: datetime | None, at: datetime) -> datetime | None:
        """:func:`~fermix_memory.domain.expiry.stated_expiry`, its errors as refusals."""
        try:
            return stated_expiry(raw, current, at)
        except PastExpiry as exc:
            raise Refusal("past_expiry", str(exc)) from None
        except InvalidArgument as exc:
            raise Refusal("invalid_expiry", str(exc)) from None

    @staticmethod
    def _promote_target(writer: WriterKind, category: Category) -> PromoteTarget | None:
        # memory_store rows and job rows are never rendered into the prompt files.
        if writer in (WriterKind.TOOL, WriterKind.JOB):
            return None
        return category.promote_target

    @staticmethod
    def _visible_row(memory_id: object, ctx: WriteContext, rows: RowLookup) -> Memory:
        if isinstance(memory_id, bool) or not isinstance(memory_id, int):
            raise Refusal("invalid_id", "id must be an integer")
        if not 1 <= memory_id <= MAX_MEMORY_ID:
            raise Refusal("not_visible", f"memory ids run from 1 to {MAX_MEMORY_ID}: no such memory")
        row = rows.by_id(memory_id)
        if row is None or not memory_filter(ctx.reader, _scope_for_writes(ctx)).admits(row):
            raise Refusal("not_visible", f"memory {memory_id} does not exist or is not visible here")
        if row.category.operator_only and ctx.trust is not Trust.OPERATOR:
            raise Refusal("guest_directive", "only the operator may change directive rows")
        return row

    # --- operations ---------------------------------------------------------------------

    def _add(self, op: AddOperation, ctx: WriteContext, rows: RowLookup, at: datetime) -> list[DomainEvent]:
        category = self._category(op.category, ctx)
        key = self._key(op.key)
        value = self._value(op.value, ctx.writer)
        confidence = self._confidence(op.confidence)
        scope = _write_scope(ctx.writer, category, ctx.reader)
        if scope is None:
            raise Refusal("no_scope", f"a {ctx.writer.value} cannot write here")
        reader = ctx.reader
        existing = rows.by_key(reader.agent_id, reader.owner_id, scope, key)
        promote = self._promote_target(ctx.writer, category)
        expires_at = self._expiry(op.expires_at, None if existing is None else existing.expires_at, at)
        if existing is not None:
            if existing.category.operator_only and ctx.trust is not Trust.OPERATOR:
                raise Refusal("guest_directive", "only the operator may change directive rows")
            _check_rule_stays_rule(existing, category)
            # Latest statement wins: the same key in the same scope replaces, never duplicates.
            return self._replacement(existing, Statement(category, key, value, confidence, promote, expires_at),
                                     ctx, at)
        return [
            MemoryAdded(
                at=at,
                agent_id=reader.agent_id,
                owner_id=reader.owner_id,
                scope_type=scope.type,
                scope_id=scope.id,
                category=category,
                key=key,
                value=value,
                confidence=confidence,
                promote_target=promote,
                provenance=ctx.provenance,
                expires_at=expires_at,
            )
        ]

    def _replace(
        self, op: ReplaceOperation, ctx: WriteContext, rows: RowLookup, at: datetime
    ) -> list[DomainEvent]:
        row = self._visible_row(op.id, ctx, rows)
        category = row.category if op.category is None else self._category(op.category, ctx)
        if category.is_profile != row.category.is_profile:
            raise Refusal(
                "category_changes_scope",
                "archive the row and add a new one to move it between USER.md and MEMORY.md",
            )
        _check_rule_stays_rule(row, category)
        key = row.key if op.key is None else self._key(op.key)
        value = row.value if op.value is None else self._value(op.value, ctx.writer)
        confidence = row.confidence if op.confidence is None else self._confidence(op.confidence)
        if key != row.key:
            clash = rows.by_key(row.agent_id, row.owner_id, row.scope, key)
            if clash is not None and clash.id != row.id:
                raise Refusal("key_conflict", f"key {key!r} is already memory {clash.id}")
        promote = row.promote_target if row.promote_target is None else category.promote_target
        expires_at = self._expiry(op.expires_at, row.expires_at, at)
        return self._replacement(row, Statement(category, key, value, confidence, promote, expires_at), ctx, at)

    def _archive(
        self, op: ArchiveOperation, ctx: WriteContext, rows: RowLookup, at: datetime
    ) -> list[DomainEvent]:
        row = self._visible_row(op.id, ctx, rows)
        if row.archived:
            return []
        _check_not_older_than_operator(row, ctx)
        reason = op.reason.strip()[:500] if isinstance(op.reason, str) else ""
        return [MemoryArchived(at=at, memory_id=row.id, archived_by=ctx.writer.value, reason=reason,
                               provenance=ctx.provenance)]

    @staticmethod
    def _replacement(row: Memory, new: Statement, ctx: WriteContext, at: datetime) -> list[DomainEvent]:
        unchanged = (
            row.category is new.category
            and row.key == new.key
            and row.value == new.value
            and row.confidence == new.confidence
            and row.promote_target == new.promote_target
            and row.expires_at == new.expires_at
            and not row.archived
        )
        if unchanged:
            return []
        _check_not_older_than_operator(row, ctx)
        return [
            MemoryReplaced(
                at=at,
                memory_id=row.id,
                category=new.category,
                key=new.key,
                value=new.value,
                confidence=new.confidence,
                promote_target=new.promote_target,
                previous_value=row.value,
                provenance=ctx.provenance,
                expires_at=new.expires_at,
            )
        ]

    @staticmethod
    def _refused(
        operation: Operation,
        ctx: WriteContext,
        at: datetime,
        refusal: Refusal,
        op_name: str | None = None,
    ) -> OperationRefused:
        category = getattr(operation, "category", None)
        key = getattr(operation, "key", None)
        memory_id = getattr(operation, "id", None)
        return OperationRefused(
            at=at,
            op=op_name or operation.op,
            reason=refusal.reason,
            detail=refusal.detail,
            category=_clipped(category, 40),
            key=_clipped(key, 80),
            memory_id=memory_id if isinstance(memory_id, int) and not isinstance(memory_id, bool)
            and 1 <= memory_id <= MAX_MEMORY_ID else None,
            provenance=ctx.provenance,
        )


def _check_rule_stays_rule(row: Memory, category: Category) -> None:
    """A directive is shown to every owner of the agent, any other row only to its owner: a
    change between the two would change who sees the row, so it is refused like a move
    between the prompt files."""
    if (category is Category.DIRECTIVE) != (row.category is Category.DIRECTIVE):
        raise Refusal(
            "category_changes_scope",
            "archive the row and add a new one to turn it into or out of a directive",
        )


def _check_not_older_than_operator(row: Memory, ctx: WriteContext) -> None:
    """An operator's fact is never overwritten by a guest's statement older than it (see
    :func:`~fermix_memory.domain.memory_evolution.older_statement`)."""
    detail = older_statement(row.id, ctx.trust, ctx.said_at, ctx.operator_set)
    if detail:
        raise Refusal("older_than_operator", detail)


def _clipped(value: object, limit: int) -> str:
    """A refused field as the refusal records it: text cut short, another value by its type."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value[:limit] if is_encodable(value) else ""
    return f"<{type(value).__name__}>"


def _scope_for_writes(ctx: WriteContext) -> RecallScope:
    """The rows a writer may change by id: an operator, any row of the owner; the reviewer and
    tools, only the rows they are shown (the ``current`` view), never another owner's."""
    return RecallScope.ALL if ctx.writer is WriterKind.OPERATOR else RecallScope.CURRENT
