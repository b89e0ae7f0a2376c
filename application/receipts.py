"""Receipts of erasures (ADR-0079): once an erasure is committed and scrubbed, the export keys
of a forgotten owner are destroyed (the keys of the positions it redacted punctured, for any
other erasure: ADR-0081) and the home signs a receipt of what went, recorded in the log; a
receipt is checked against the log, the home's or an exported one.

:class:`Receipts` is what follows every committed erasure (the ``ErasureFollowUp`` port). It
also makes up, when a writable memory opens, for erasures a crash left without a receipt: it
reads only the erasure records after a mark (the log's position up to which every erasure had
its receipt, kept beside the home's key), never the whole log again.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import attrs

from fermix_memory.application.errors import EventFileError, NotFound, StorageError
from fermix_memory.application.log_transfer import head_value
from fermix_memory.application.ports import Clock
from fermix_memory.application.privacy_ports import ExportKeys, Signer
from fermix_memory.application.store_ports import LogHead, RecordedEvent, WriteTransaction
from fermix_memory.application.streams import EXPORT_KEYS_STREAM, RECEIPT_STREAM, chain_for
from fermix_memory.domain import events as ev
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.log_chain import GENESIS_HASH, Head, LoggedEvent, head_of
from fermix_memory.domain.log_lines import parse_event, parse_header
from fermix_memory.domain.receipts import BadReceipt, Receipt, ReceiptCheck, parse_receipt

log = logging.getLogger("fermix_memory")
T = TypeVar("T")
Decode = Callable[[str, int, str], object]  # (kind, schema, payload) -> the event
SignatureCheck = Callable[[str, bytes, str], bool]  # (public key, body, signature hex) -> holds

RECORD_KINDS = frozenset(cls.kind for cls in ev.ERASURE_RECORDS) | {ev.RetentionRan.kind}
_READ_KINDS = RECORD_KINDS | {ev.ErasureReceipted.kind}
# The mark moves when receipts were signed, or when this many events followed it: an open that
# signs nothing changes no file of the home until the log has grown by that much (ADR-0079).
MARK_EVERY = 1_000
Erasing = ev.OwnerForgotten | ev.MemoryForgotten | ev.ConversationForgotten | ev.SealedPayloadsLost | ev.RetentionRan


class ReceiptLog(Protocol):
    """The reads and the write receipts need of the event log."""

    def write(self, work: Callable[[WriteTransaction], T]) -> T: ...

    def read_events(self, after: int = 0, *, stream: str | None = None) -> Iterator[RecordedEvent]: ...

    def read_log(self, after: int = 0) -> Iterator[LoggedEvent]: ...

    def head(self) -> LogHead: ...

    def logged_at(self, positions: Collection[int]) -> list[LoggedEvent]:
        """The events at ``positions`` as stored (redacted ones too), in log order."""
        ...

    def logged_of_kinds(self, kinds: Collection[str], after: int) -> list[LoggedEvent]:
        """Every event of one of ``kinds`` after position ``after`` as stored, in log order."""
        ...


class ReceiptMark(Protocol):
    """Where the log's position up to which every erasure has its receipt is kept."""

    def read(self) -> tuple[int, str] | None:
        """``(position, hash of the event there)``, or ``None`` when none was kept."""
        ...

    def write(self, position: int, hash_: str) -> None: ...


@attrs.frozen(kw_only=True)
class ReceiptReport:
    """What checking a receipt found: ``ok`` when nothing is wrong, else one line per problem."""

    ok: bool
    problems: list[str]
    public_key: str
    records: int = 0
    erased: int = 0


class Receipts:
    """Destroy the export keys of forgotten owners (puncture the positions other erasures
    redacted), then sign and record each erasure's receipt."""

    def __init__(self, log: ReceiptLog, signer: Signer, decode: Decode, clock: Clock, *,
                 keys: ExportKeys | None = None, mark: ReceiptMark | None = None) -> None:
        self._log = log
        self._signer = signer
        self._decode = decode
        self._clock = clock
        self._keys = keys
        self._mark = mark
        self._lock = threading.Lock()

    def public_key(self) -> str:
        return self._signer.public_key()

    def erased(self, records: Sequence[int], head_before: str) -> int | None:
        """Receipt the erasure whose records are ``records`` (and any left without one before it);
        the log position of its receipt."""
        with self._lock:
            return self._catch_up(set(records), head_before)

    def issue_missing(self) -> list[int]:
        """Receipt every erasure a crash left without one; the positions of the receipts made."""
        with self._lock:
            before = self._log.head().position
            self._catch_up(set(), "")
            return [r.position for r in self._log.read_events(before, stream=RECEIPT_STREAM)]

    def _start(self) -> int:
        """The position after which erasures may lack a receipt (the mark, when it still holds)."""
        kept = self._mark.read() if self._mark is not None else None
        if kept is None or kept[0] == 0:
            return 0
        at = self._log.logged_at([kept[0]])
        return kept[0] if at and at[0].hash == kept[1] else 0

    def _catch_up(self, given: set[int], head_before: str) -> int | None:
        start, upto = self._start(), head_value(self._log.head())
        after = min(start, min(given) - 1) if given else start
        logged = {e.position: e for e in self._log.logged_of_kinds(_READ_KINDS, after)}
        decoded = {p: self._decode(e.kind, e.schema, e.payload) for p, e in logged.items() if e.payload is not None}
        covered = {r: p for p, e in decoded.items() if isinstance(e, ev.ErasureReceipted) for r in e.records}
        erasing = {p: e for p, e in decoded.items() if isinstance(e, Erasing) and _receiptable(e)}
        if given and given <= covered.keys():
            return covered[min(given)]
        mine = None
        groups = _groups(erasing, set(erasing) - covered.keys(), given)
        for group in groups:
            position = self._issue(group, erasing, logged, head_before if group & given else "")
            if group & given:
                mine = position
        if groups or upto.position - start >= MARK_EVERY:
            self._move_mark(upto.position)
        return mine

    def _move_mark(self, position: int) -> None:
        last = self._log.logged_at([position]) if self._mark is not None and position else []
        try:
            if self._mark is not None and last:
                self._mark.write(position, last[0].hash)
        except StorageError as exc:  # only a later open reads more of the log
            log.warning("%s", exc)

    def _issue(self, group: set[int], erasing: Mapping[int, Erasing], logged: Mapping[int, LoggedEvent],
               head_before: str) -> int:
        positions = sorted(group)
        runs = [erasing[p] for p in positions if isinstance(erasing[p], ev.RetentionRan)]
        first: Erasing = runs[0] if runs else erasing[positions[0]]
        if isinstance(first, ev.RetentionRan):
            asked = ("retention", ",".join(first.policies), first.provenance.reason)
            head_before = head_before or first.head_before
        else:
            asked = (first.provenance.source_type, first.provenance.source_id, first.provenance.reason)
        owners = [(p, e) for p, e in zip(positions, map(erasing.__getitem__, positions), strict=True)
                  if isinstance(e, ev.OwnerForgotten)]
        pairs = tuple(sorted({(e.agent_id, e.owner_id) for _, e in owners}))
        if self._keys is not None and pairs:
            self._keys.destroy(pairs)  # durably, before anything records it
        erased = sorted({p for e in map(erasing.__getitem__, positions) for p in _redacted(e)})
        if self._keys is not None:  # an owner's go with the owner's keys; the rest one by one
            self._keys.puncture(p for e in map(erasing.__getitem__, positions)
                                if not isinstance(e, ev.OwnerForgotten) for p in _redacted(e))
        receipt = Receipt(
            public_key=self._signer.public_key(), at=first.at.isoformat(), source_type=asked[0],
            source_id=asked[1], reason=asked[2],
            records=tuple((p, logged[p].kind, logged[p].payload_sha256) for p in positions),
            erased=tuple((e.position, e.payload_sha256) for e in self._log.logged_at(erased)),
            head_before=head_before or self._head_at(positions[0] - 1), head_after=str(head_value(self._log.head())),
            keys_destroyed=pairs if self._keys is not None else ())
        body = receipt.body_text()
        signature = self._signer.sign(body.encode("ascii"))
        now = self._clock.now()
        owner_records = tuple(p for p, _ in owners)

        def work(tx: WriteTransaction) -> int:
            for item in tx.read_events(positions[0] - 1, stream=RECEIPT_STREAM):  # another process was first
                if isinstance(item.event, ev.ErasureReceipted) and group & set(item.event.records):
                    return item.position
            if receipt.keys_destroyed:
                tx.append(EXPORT_KEYS_STREAM, [ev.ExportKeysDestroyed(at=now, pairs=pairs, records=owner_records)])
            [position] = tx.append(RECEIPT_STREAM, [ev.ErasureReceipted(
                at=now, records=tuple(positions), receipt=body, signature=signature)])
            return position

        return self._log.write(work)

    def _head_at(self, position: int) -> str:
        """The log's head as it stood at ``position`` (its text as ``events head`` prints it)."""
        chains = len(head_value(self._log.head()).chains)
        if not chains:
            found = self._log.logged_at([position]) if position else []
            return f"{position}:{found[0].hash if found else GENESIS_HASH}"
        heads = [(0, GENESIS_HASH)] * chains  # several chains: their heads then are folded from the log
        for e in self._log.read_log():
            if e.position > position:
                break
            heads[chain_for(e.stream, chains)] = (e.position, e.hash)
        return str(head_of(heads))


def _receiptable(e: Erasing) -> bool:
    """Whether a record says what it redacted (an owner's record of schema 1 does not)."""
    return isinstance(e, ev.RetentionRan) or e.redacted_positions is not None


def _redacted(e: Erasing) -> tuple[int, ...]:
    return () if isinstance(e, ev.RetentionRan) else tuple(e.redacted_positions or ())


def _groups(erasing: Mapping[int, Erasing], missing: set[int], given: set[int]) -> list[set[int]]:
    """The erasures among the records ``missing`` a receipt, one set of records each: a retention
    run's records with its ``retention.ran``; the records of one owner's forget (the same time,
    owner and asker, one per agent); every other record alone; ``given`` as one erasure."""
    keyed: dict[object, set[int]] = {}
    for p in sorted(missing):
        e = erasing[p]
        if isinstance(e, ev.RetentionRan):
            key: object = ("run", p)
            keyed.setdefault(key, set()).update({p, *(r for r in e.records if r in missing)})
        elif isinstance(e, ev.OwnerForgotten):
            prov = e.provenance
            keyed.setdefault(("owner", e.at, e.owner_id, prov.source_type, prov.source_id, prov.reason), set()).add(p)
        else:
            keyed.setdefault(("one", p), set()).add(p)
    sets = [*keyed.values(), *([given] if given else [])]
    merged: list[set[int]] = []
    for found in sets:
        for other in [m for m in merged if m & found]:
            merged.remove(other)
            found = found | other
        merged.append(found)
    return sorted((m & erasing.keys() for m in merged if m & erasing.keys()), key=min)


def receipt_document(log: ReceiptLog, decode: Decode, position: int) -> dict[str, Any]:
    """The receipt file's object of the receipt recorded at ``position``, or of the receipt of
    the erasure record at ``position``; :class:`NotFound` when there is none."""
    found = log.logged_at([position])
    if found and found[0].kind in RECORD_KINDS:
        for item in log.read_events(position, stream=RECEIPT_STREAM):
            if isinstance(item.event, ev.ErasureReceipted) and position in item.event.records:
                return _document(item.event)
        raise NotFound(f"the erasure recorded at {position} has no receipt yet (a writable memory opened signs it)")
    if not found or found[0].kind != ev.ErasureReceipted.kind or found[0].payload is None:
        raise NotFound(f"event {position} is neither a receipt nor an erasure record")
    event = decode(found[0].kind, found[0].schema, found[0].payload)
    assert isinstance(event, ev.ErasureReceipted)
    return _document(event)


def _document(event: ev.ErasureReceipted) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(event.receipt)
    return {**body, "signature": event.signature}


def verify_receipt(document: object, events: Iterable[LoggedEvent], *, public_key: str, holds: SignatureCheck,
                   chains: int = 1, declared: Head | None = None) -> ReceiptReport:
    """Check a receipt file's object against a log read in order (``chains``: the log's; ``declared``:
    the head its source says it ends at), with the public key trusted to be the home's."""
    try:
        receipt = parse_receipt(document)
    except BadReceipt as exc:
        return ReceiptReport(ok=False, problems=[f"not a receipt: {exc}"], public_key=public_key)
    problems = []
    if receipt.public_key != public_key.strip():
        problems.append(f"the receipt names the key {receipt.public_key[:24]}…, not {public_key.strip()[:24]}…")
    if not holds(public_key, receipt.body_text().encode("ascii"), receipt.signature):
        problems.append("the signature does not hold: the receipt was changed, or signed with another key")
    check = ReceiptCheck(receipt, chains=chains, chain_of=functools.partial(chain_for, chains=chains))
    try:
        for e in events:
            check.add(e)
    except EventFileError as exc:
        problems.append(f"the log cannot be read: {exc}")
        declared = None
    problems += check.problems(declared)
    return ReceiptReport(ok=not problems, problems=problems, public_key=public_key, records=len(receipt.records),
                         erased=len(receipt.erased))


def verify_against_file(document: object, lines: Iterable[str], *, public_key: str,
                        holds: SignatureCheck) -> ReceiptReport:
    """:func:`verify_receipt` against an event file (``events export``'s lines)."""
    items = iter(lines)
    try:
        head = parse_header(next(items, "").removeprefix("\ufeff"))
    except DomainError as exc:
        return ReceiptReport(ok=False, problems=[f"the log cannot be read: line 1: {exc}"], public_key=public_key)
    return verify_receipt(document, _file_events(items), public_key=public_key, holds=holds,
                          chains=len(head.chains) or 1, declared=head)


def _file_events(lines: Iterator[str]) -> Iterator[LoggedEvent]:
    for number, text in enumerate(lines, 2):
        try:
            yield parse_event(text)
        except DomainError as exc:
            raise EventFileError(f"line {number}: {exc}") from None


def verify_against_log(document: object, log: ReceiptLog, *, public_key: str, holds: SignatureCheck) -> ReceiptReport:
    """:func:`verify_receipt` against the store's own log."""
    chains = len(head_value(log.head()).chains) or 1
    return verify_receipt(document, log.read_log(), public_key=public_key, holds=holds, chains=chains)
