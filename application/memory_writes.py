"""Use case: write memory rows through admission, one atomic batch, every outcome recorded."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any, Protocol

import attrs

from fermix_memory.application.commands import WriteMemory
from fermix_memory.application.errors import NotFound
from fermix_memory.application.ports import Clock
from fermix_memory.application.store_ports import EventStore, WriteTransaction
from fermix_memory.application.streams import memory_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain.admission import MAX_MEMORY_ID, AdmissionPolicy, WriteContext
from fermix_memory.domain.expiry import stated_expiry
from fermix_memory.domain.memory_evolution import operator_set_rows, statement_time
from fermix_memory.domain.operations import Operation, sourced
from fermix_memory.domain.row_rollback import RowChange
from fermix_memory.domain.scopes import Reader, WriterKind
from fermix_memory.domain.values import Trust


@attrs.frozen(kw_only=True)
class OperationOutcome:
    """What became of one operation: ``added``, ``replaced``, ``archived``, ``restored``,
    ``unchanged`` (a restatement) or ``refused`` (with the reason)."""

    op: str
    status: str
    memory_id: int | None = None
    reason: str = ""
    detail: str = ""


def _outcome(op_name: str, events: Sequence[ev.DomainEvent], positions: Sequence[int]) -> OperationOutcome:
    if not events:
        return OperationOutcome(op=op_name, status="unchanged")
    event = events[0]
    if isinstance(event, ev.OperationRefused):
        return OperationOutcome(op=op_name, status="refused", memory_id=event.memory_id,
                                reason=event.reason, detail=event.detail)
    if isinstance(event, ev.MemoryAdded):
        return OperationOutcome(op=op_name, status="added", memory_id=positions[0])
    status = {ev.MemoryReplaced: "replaced", ev.MemoryArchived: "archived",
              ev.MemoryRestored: "restored"}[type(event)]
    return OperationOutcome(op=op_name, status=status, memory_id=getattr(event, "memory_id", None))


def check_expiries(ops: Sequence[Operation], at: datetime) -> None:
    """Raise :class:`~fermix_memory.domain.errors.InvalidArgument` for the first operation whose
    ``expires_at`` admission would refuse (no ISO 8601 time with a zone, or not after ``at``): a
    host is told its mistake, nothing is recorded."""
    for index, op in enumerate(ops):
        if (raw := getattr(op, "expires_at", None)) is not None:  # none named: nothing to check
            stated_expiry(raw, None, at, f"operations[{index}].expires_at")


def _op_context(ctx: WriteContext, op: Operation, shown_messages: frozenset[int],
                written: Mapping[int, datetime] | None, operator_set: dict[int, datetime]) -> WriteContext:
    """The context ``op`` is decided in: ``ctx`` with the op's own sources, statement time and
    the rows an operator set (``ctx`` itself when none of them changes it: an op with no
    sources, written by no message)."""
    if not op.source_message_ids and not written and not operator_set and ctx.said_at is None \
            and not ctx.operator_set:
        return ctx
    return attrs.evolve(ctx, provenance=sourced(ctx.provenance, op, shown_messages),
                        said_at=statement_time(op, written or {}), operator_set=operator_set)


# What a command's context is made of: every field of the command but its operations.
_context_fields = operator.attrgetter(*(f.name for f in attrs.fields(WriteMemory) if f.name != "operations"))


class DerivedResources(Protocol):
    """What must change with the rows, in the same transaction (the prompt-file revisions)."""

    def record_in(self, tx: WriteTransaction, events: Sequence[ev.DomainEvent], at: datetime) -> None: ...


class MemoryWriter:
    def __init__(self, store: EventStore, clock: Clock, policy: AdmissionPolicy | None = None, *,
                 derived: DerivedResources | None = None) -> None:
        self._store = store
        self._clock = clock
        self._policy = policy or AdmissionPolicy()
        self._derived = derived
        self._last_context: tuple[tuple[object, ...], WriteContext] | None = None
        self._policies: dict[int, AdmissionPolicy] = {}

    def _derive(self, tx: WriteTransaction, events: Sequence[ev.DomainEvent], at: datetime) -> None:
        # The prompt-file revisions go in the same commit as the rows they render.
        if events and self._derived is not None:
            self._derived.record_in(tx, events, at)

    def apply_in(self, tx: WriteTransaction, ops: Sequence[Operation], ctx: WriteContext,
                 at: Any, *, shown_messages: frozenset[int] = frozenset(),
                 written: Mapping[int, datetime] | None = None,
                 recorded: list[ev.DomainEvent] | None = None,
                 policy: AdmissionPolicy | None = None) -> list[OperationOutcome]:
        """Decide and record ``ops`` inside an open transaction (for composed use cases).

        An operation's ``source_message_ids`` are kept only among ``shown_messages`` (the
        messages its writer was shown; see :func:`~fermix_memory.domain.operations.sourced`).
        ``written``: those messages' creation times, when the operations come from messages; a
        guest's operation older than an operator's change of its row is then refused.
        ``recorded``: where a caller composing several writes collects their events to render
        the prompt files once for all of them (by default they are rendered here). ``policy``:
        another admission policy than the writer's own (a longer value limit)."""
        operator_set: dict[int, datetime] = {}
        if written and ctx.trust is not Trust.OPERATOR:
            # Only a guest's statement needs them; the owner's stream holds every row it may change.
            stream = memory_stream(ctx.reader.agent_id, ctx.reader.owner_id)
            operator_set = operator_set_rows((r.position, r.event) for r in tx.read_events(stream=stream))
        decide = (policy or self._policy).decide
        return self._record_in(tx, ctx, at, [
            (op.op, partial(decide, op, _op_context(ctx, op, shown_messages, written, operator_set), tx, at))
            for op in ops], recorded)

    def apply_changes_in(self, tx: WriteTransaction, changes: Sequence[RowChange], ctx: WriteContext,
                         at: datetime) -> list[OperationOutcome]:
        """Decide and record row changes (operations, and restores where ``op`` is None), each
        through admission, inside an open transaction; the prompt files are rendered once."""
        return self._record_in(tx, ctx, at, [
            ("restore", partial(self._policy.restore, c.memory_id, ctx, tx, at)) if c.op is None
            else (c.op.op, partial(self._policy.decide, c.op, ctx, tx, at))
            for c in changes])

    def _record_in(self, tx: WriteTransaction, ctx: WriteContext, at: Any,
                   decisions: Sequence[tuple[str, Callable[[], list[ev.DomainEvent]]]],
                   into: list[ev.DomainEvent] | None = None) -> list[OperationOutcome]:
        """Run each decision in order (each sees the ones before it), append its events to the
        owner's memory stream and render the prompt files once for all of them (or add the
        events to ``into``, for a caller that renders them with others)."""
        stream = memory_stream(ctx.reader.agent_id, ctx.reader.owner_id)
        outcomes = []
        recorded: list[ev.DomainEvent] = [] if into is None else into
        for op_name, decide in decisions:
            events = decide()
            positions = tx.append(stream, events) if events else []
            outcomes.append(_outcome(op_name, events, positions))
            recorded += events
        if into is None:
            self._derive(tx, recorded, at)
        return outcomes

    def apply(self, ops: Sequence[Operation], ctx: WriteContext) -> list[OperationOutcome]:
        """Admit and record ``ops`` in one transaction; refusals are recorded as events."""
        at = self._clock.now()
        return self._store.write(lambda tx: self.apply_in(tx, ops, ctx, at))

    def write(self, cmd: WriteMemory) -> list[OperationOutcome]:
        """:meth:`apply` of the command's operations in the context it names. A host's expiry that
        is not after now is its mistake: :class:`InvalidArgument`, nothing written."""
        at = self._clock.now()
        check_expiries(cmd.operations, at)
        ctx = self._context(cmd)
        return self._store.write(lambda tx: self.apply_in(tx, cmd.operations, ctx, at))

    def _policy_for(self, value_limit: int) -> AdmissionPolicy:
        """The writer's policy with ``value_limit``, made once per limit (a frozen value)."""
        policy = self._policies.get(value_limit)
        if policy is None:
            policy = self._policies[value_limit] = attrs.evolve(self._policy, max_value_chars=value_limit)
        return policy

    def _context(self, cmd: WriteMemory) -> WriteContext:
        """``cmd.context()``, built once for a run of commands that differ in their operations
        only (a host writing one scope after another): the context is a frozen value."""
        key = _context_fields(cmd)
        last = self._last_context
        if last is not None and last[0] == key:
            return last[1]
        context = cmd.context()
        self._last_context = (key, context)
        return context

    def write_all(self, cmds: Sequence[WriteMemory], *, value_limit: int | None = None
                  ) -> list[list[OperationOutcome]]:
        """Several commands (of several scopes, even owners) in ONE transaction: all of them are
        recorded or none. Each command's operations are admitted or refused as :meth:`write`
        does, in order (each sees the commands before it); the prompt files are rendered once.
        ``value_limit``: the longest value admitted, for an integration whose rows keep its own
        items (ADR-0104); the policy's own limit by default."""
        at = self._clock.now()
        policy = self._policy if value_limit is None else self._policy_for(value_limit)
        for cmd in cmds:
            check_expiries(cmd.operations, at)

        def work(tx: WriteTransaction) -> list[list[OperationOutcome]]:
            recorded: list[ev.DomainEvent] = []
            outcomes = [self.apply_in(tx, cmd.operations, self._context(cmd), at, recorded=recorded, policy=policy)
                        for cmd in cmds]
            self._derive(tx, recorded, at)
            return outcomes

        return self._store.write(work) if cmds else []

    def restore(self, memory_id: int, *, by: str = "operator", source_type: str = "api") -> OperationOutcome:
        """Un-archive a row (operator action). Raises :class:`NotFound` for an unknown id."""
        at = self._clock.now()

        def work(tx: WriteTransaction) -> OperationOutcome:
            row = tx.by_id(memory_id) if 1 <= memory_id <= MAX_MEMORY_ID else None
            if row is None:
                raise NotFound(f"no memory row {memory_id}")
            ctx = WriteContext(
                writer=WriterKind.OPERATOR,
                reader=Reader(agent_id=row.agent_id, owner_id=row.owner_id),
                provenance=ev.Provenance(agent_id=row.agent_id, owner_id=row.owner_id,
                                         trust=Trust.OPERATOR, source_type=source_type, source_id=by),
            )
            events = self._policy.restore(memory_id, ctx, tx, at)
            positions = tx.append(memory_stream(row.agent_id, row.owner_id), events) if events else []
            self._derive(tx, events, at)
            return _outcome("restore", events, positions)

        return self._store.write(work)
