"""The hash chain of the log (R-LOG): walk every event in order and name the first one whose
payload, link or row hash is wrong, or whose redaction no erasure record accounts for; and the
log as an auditor reads it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from fermix_memory.adapters.sql.codec import decode_payload
from fermix_memory.adapters.sql.cursor import SqlReader, scalar_int
from fermix_memory.adapters.sql.event_log import LOG_ROWS, read_chain_heads
from fermix_memory.application.errors import IntegrityError
from fermix_memory.application.streams import chain_for
from fermix_memory.domain.events import ERASURE_RECORDS, OwnerForgotten
from fermix_memory.domain.log_chain import GENESIS_HASH, chain_hash, follows, payload_digest

Progress = Callable[[int, int], None]
BATCH = 5_000  # events between two progress calls (and commits, when folding)
# Every column of the log, in log order: what the chain check walks and a replay copies.
ALL_EVENT_ROWS = LOG_ROWS.replace("WHERE position > ? ", "")


class Stages:
    """One progress over several stages of work, for a caller that gets a single ``(done, total)``
    callback: each stage reports in its own units, scaled into its share of the whole (``sizes``,
    in one common unit), so ``done`` only rises, and reaches ``total`` when the last stage ends."""

    def __init__(self, progress: Progress | None, sizes: Sequence[int]) -> None:
        self._progress = progress
        self._sizes = list(sizes)
        self._total = sum(self._sizes)
        self._next = 0

    def stage(self) -> Progress | None:
        """The progress of the next stage (``None`` when nobody is told)."""
        start, size = sum(self._sizes[:self._next]), self._sizes[self._next]
        self._next += 1
        report, total = self._progress, self._total
        if report is None:
            return None

        def progress(done: int, stage_total: int) -> None:
            share = size if stage_total <= 0 else size * min(done, stage_total) // stage_total
            report(start + share, total)

        return progress


@attrs.frozen(kw_only=True)
class VerifyReport:
    ok: bool
    events: int
    first_bad_position: int | None = None
    problem: str = ""
    redacted: int = 0
    table_checksums: dict[str, str] = attrs.field(factory=dict)
    # Messages and rows still waiting for their vector (ADR-0043): work for the background, not damage.
    vectors_waiting: int = 0



def check_chain(conn: SqlReader, progress: Progress | None = None) -> VerifyReport:
    """Walk the log in order; name the first row whose payload or chain hash is wrong. A log of
    several chains (ADR-0031): each row links to its chain's last, positions only increase, and
    every chain ends where its ``chain_heads`` row says."""
    total = scalar_int(conn, "SELECT count(*) FROM events")
    recorded = read_chain_heads(conn) if scalar_int(conn, "SELECT count(*) FROM chain_heads") else []
    chains = max(1, len(recorded))
    heads = [(0, GENESIS_HASH)] * chains
    count, redacted, last = 0, 0, 0
    erasures = _ErasureAccount()
    rows = conn.execute(ALL_EVENT_ROWS)
    for position, stream, version, kind, schema, recorded_at, payload, digest, prev_hash, row_hash in rows:
        count += 1
        chain = chain_for(stream, chains)
        prev = heads[chain][1]
        problem = ""
        if not follows(position, last, chains):
            problem = f"gap in the log: expected position {last + 1}" if chains == 1 else \
                f"event {position}: positions must increase (after {last})"
        elif payload is not None and payload_digest(payload) != digest:
            problem = f"event {position} ({kind}): payload does not match its digest"
        elif prev_hash != prev:
            problem = (f"event {position} ({kind}): previous hash does not link to event {heads[chain][0]}"
                       + (f" (the last of chain {chain})" if chains > 1 else ""))
        elif chain_hash(prev, position, stream, version, kind, schema, recorded_at, digest) != row_hash:
            problem = f"event {position} ({kind}): row hash does not match its contents"
        if problem:
            return VerifyReport(ok=False, events=count, first_bad_position=position, problem=problem)
        last = position
        if payload is None:
            redacted += 1
            erasures.unaccounted[position] = kind
        heads[chain] = (position, row_hash)
        if kind in _ERASURE_KINDS and payload is not None:
            problem = erasures.record(position, kind, schema, payload)
            if problem:
                return VerifyReport(ok=False, events=count, first_bad_position=position, problem=problem,
                                    redacted=redacted)
        if progress is not None and count % BATCH == 0:
            progress(count, total)
    if erasures.unaccounted:
        position, kind = min(erasures.unaccounted.items())
        return VerifyReport(
            ok=False, events=count, first_bad_position=position, redacted=redacted,
            problem=f"event {position} ({kind}): payload is NULL but no recorded erasure names it"
                    f" ({len(erasures.unaccounted)} such events)",
        )
    for chain, (walked, said) in enumerate(zip(heads, recorded, strict=False)):
        if walked != said:
            return VerifyReport(ok=False, events=count, first_bad_position=said[0] or None, redacted=redacted,
                                problem=f"chain {chain} ends at event {walked[0]}, but the log's record of its head"
                                        f" says {said[0]}:{said[1][:12]}…: a chain's head was changed or cut")
    if progress is not None:
        progress(count, total)
    return VerifyReport(ok=True, events=count, redacted=redacted)


_ERASURE_KINDS = frozenset(cls.kind for cls in ERASURE_RECORDS)


class _ErasureAccount:
    """Every NULL payload must be named by a later erasure record (``owner.forgotten``,
    ``memory.forgotten``); schema-1 ``owner.forgotten`` records (which only gave a number)
    account for that many of the unnamed ones before them."""

    def __init__(self) -> None:
        self.unaccounted: dict[int, str] = {}
        self.accounted: set[int] = set()

    def record(self, position: int, kind: str, schema: int, payload: str) -> str:
        try:
            event = decode_payload(kind, schema, payload)
        except IntegrityError as exc:
            return f"event {position} ({kind}): {exc}"
        assert isinstance(event, ERASURE_RECORDS)
        if event.redacted_positions is None:
            assert isinstance(event, OwnerForgotten)
            for old in sorted(self.unaccounted)[:event.erased_events]:
                del self.unaccounted[old]
                self.accounted.add(old)
            return ""
        for named in event.redacted_positions:
            if self.unaccounted.pop(named, None) is None:
                state = "was already accounted for" if named in self.accounted else "is not redacted"
                return f"event {position} ({kind}) names event {named} as erased, but it {state}"
            self.accounted.add(named)
        return ""


@attrs.frozen(kw_only=True)
class LogEntry:
    """One row of the log as an auditor reads it; ``event`` is ``None`` once redacted."""

    position: int
    stream: str
    version: int
    kind: str
    recorded_at: str
    payload_sha256: str
    event: Any


def log_entries(conn: SqlReader, after: int = 0, kind: str | None = None) -> Iterator[LogEntry]:
    """Every event after ``after`` in log order (of one kind when given), redacted ones included."""
    sql = ("SELECT position, stream, version, kind, schema, recorded_at, payload, payload_sha256 FROM events"
           " WHERE position > ?" + (" AND kind = ?" if kind else "") + " ORDER BY position")
    for position, stream, version, row_kind, schema, recorded_at, payload, digest in conn.execute(
        sql, (after, kind) if kind else (after,)
    ):
        yield LogEntry(position=position, stream=stream, version=version, kind=row_kind, recorded_at=recorded_at,
                       payload_sha256=digest,
                       event=None if payload is None else decode_payload(row_kind, schema, payload))

