"""Moving a home (ADR-0030): a log exported as an event file, checked whole, and appended into
another store — SQLite or any other behind the :class:`EventStore` port — with its chain.

Export streams the log up to the head it read first. Import reads the file twice: once to check
every line (format, positions, stream versions, digests, payload schemas, the chain, the
header's head) and to find where the target stands, writing nothing; then to append, in
batches, only what follows the target's head. Memory stays constant whatever the log's size.
An encrypted export (ADR-0081) is read through an :class:`Opener` that opens its sealed payloads
on both reads; what it could not open (a destroyed key) is appended redacted, then recorded.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

import attrs

from fermix_memory.application.errors import EventFileError
from fermix_memory.application.privacy_ports import ErasureFollowUp
from fermix_memory.application.store_ports import EventStore, LogHead
from fermix_memory.application.streams import chain_for
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.log_chain import (
    GENESIS_HASH,
    MAX_CHAINS,
    ChainCheck,
    Head,
    LoggedEvent,
    PayloadCheck,
    Relink,
    checkpoint_hash,
)
from fermix_memory.domain.log_lines import SealedPayload, event_line, header_line, parse_event_line, parse_file_header

BATCH = 2_000  # events appended per transaction
Lines = Callable[[], Iterable[str]]  # opens the event file anew, one line per item
Progress = Callable[[int, int], None]


class Opener(Protocol):
    """Opens the sealed payloads of an encrypted export (``application.sealed_import``)."""

    def begin(self, keyring_id: str) -> None:
        """The file, sealed with that keyring, is read from its start (again)."""
        ...

    def open(self, e: LoggedEvent, sealed: SealedPayload) -> LoggedEvent:
        """``e`` with its payload opened, or redacted when a key of it is destroyed."""
        ...

    def record(self, store: EventStore) -> list[int]:
        """Once the events are in: record the erasures the destroyed keys stand for (positions)."""
        ...

    @property
    def destroyed(self) -> Mapping[tuple[str, str], Sequence[int]]:
        """Per (agent, owner) whose key is destroyed, the positions it left redacted."""
        ...

    @property
    def lost(self) -> Sequence[int]:
        """The positions whose own keys were destroyed (punctured), left redacted."""
        ...


@attrs.frozen(kw_only=True)
class ImportReport:
    events: int  # in the file
    appended: int  # appended to the target (the rest it already held)
    head_position: int
    head_hash: str
    redacted: int
    chains: int = 1
    anchor: str = ""  # the head as ``events head`` prints it (the checkpoint's text for several chains)
    rechained_from: str = ""  # the file's own anchor, when the import linked its events onto other chains
    # An encrypted export: the pairs whose destroyed keys left payloads redacted, and their records.
    keys_destroyed: tuple[tuple[str, str], ...] = ()
    erasure_records: tuple[int, ...] = ()
    positions_lost: int = 0  # payloads whose position keys were destroyed (ADR-0081)


def export_lines(store: EventStore) -> Iterator[str]:
    """The store's log as an event file: the header with the head read first, then every event up
    to that head (writes committed meanwhile are left for the next export: on a log of several
    chains, whose writes commit side by side, an event is in only when its chain's head was)."""
    head = head_value(store.head())
    yield header_line(head)
    if head.position == 0:
        return
    chains = len(head.chains)
    for e in store.read_log():
        if not chains or e.position <= head.chains[chain_for(e.stream, chains)]:
            yield event_line(e)
        if e.position >= head.position:
            return
    raise EventFileError(f"the log ended before its head {head.position}")


def head_value(head: LogHead) -> Head:
    """A store's head as the domain's value (a store's may carry its chains)."""
    return Head(head.position, head.hash, tuple(getattr(head, "chains", ())))


def _events(lines: Iterable[str], opener: Opener | None = None) -> Iterator[tuple[int, LoggedEvent | Head]]:
    """``(line number, parsed line)``: the header as the :class:`Head` it names, then events
    (sealed payloads opened by ``opener``; a sealed file without one is refused)."""
    try:
        items = iter(lines)
    except TypeError:
        raise EventFileError(f"the event file must give its lines, got {type(lines).__name__}") from None
    number = 0
    for number, text in enumerate(items, 1):
        try:
            if not isinstance(text, str):
                raise EventFileError(f"a line must be text, got {type(text).__name__}")
            if number == 1:
                yield number, _header(text.removeprefix("\ufeff"), opener)
            elif text.strip():
                e, sealed = parse_event_line(text)
                if sealed is not None and opener is None:
                    raise EventFileError("its payload is sealed (an encrypted export): import it with the keys"
                                         " of the home that exported it")
                yield number, e if sealed is None or opener is None else opener.open(e, sealed)
            else:
                raise EventFileError("an empty line (every line after the header is one event)")
        except DomainError as exc:
            raise EventFileError(f"line {number}: {exc}") from None
        except EventFileError as exc:
            raise EventFileError(f"line {number}: {exc}") from None
    if number == 0:
        raise EventFileError("line 1: the file is empty (an event file starts with its header)")


def _header(text: str, opener: Opener | None) -> Head:
    head, keyring = parse_file_header(text)
    if keyring and opener is None:
        raise EventFileError("the file is an encrypted export (its payloads sealed with keyring"
                             f" {keyring}): import it with the keys of the home that exported it")
    if keyring and opener is not None:
        opener.begin(keyring)
    return head


def check_lines(lines: Lines, structure: PayloadCheck, *, progress: Progress | None = None,
                target_at: LogHead | None = None, opener: Opener | None = None) -> ImportReport:
    """Check the whole file; nothing is written. ``target_at``: the head of a log that must be
    a prefix of the file's (its event at that position has that hash). ``opener``: opens the
    payloads of an encrypted export (each must open, or have a destroyed key)."""
    check = ChainCheck(structure)
    declared = Head(0, "")
    target = head_value(target_at) if target_at is not None else None
    wanted = dict.fromkeys(target.chains or (target.position,)) if target is not None and target.position else {}
    seen: dict[int, str] = {}
    number = 0
    for number, item in _events(lines(), opener):
        if isinstance(item, Head):
            declared = item
            chains = len(item.chains) or 1
            check = ChainCheck(structure, chains=chains, chain_of=functools.partial(_chain, chains=chains))
            continue
        problem = check.problem(item)
        if problem:
            raise EventFileError(f"line {number}: {problem}")
        if item.position in wanted:
            seen[item.position] = item.hash
        if progress is not None and item.position % BATCH == 0:
            progress(item.position, declared.position)
    if check.head != declared:
        raise EventFileError(f"line {number}: the file ends at event {check.position}, but its header names"
                             f" the head {declared} (a cut or padded file)")
    if target is not None and target.position and not _holds(target, seen):
        raise EventFileError(f"the target's log (head {str(target)[:40]}…)"
                             " is not a prefix of the file's: nothing was written")
    return ImportReport(events=check.events, appended=0, head_position=check.position, head_hash=check.hash,
                        redacted=check.redacted, chains=len(check.heads), anchor=str(check.head))


def _chain(stream: str, *, chains: int) -> int:
    return chain_for(stream, chains)


def _holds(target: Head, seen: dict[int, str]) -> bool:
    """Whether the file holds the log whose head is ``target`` as its prefix (``seen``: the file's
    hashes at the positions the head names)."""
    if not target.chains:
        return seen.get(target.position) == target.hash
    if any(p and p not in seen for p in target.chains):
        return False
    return checkpoint_hash([(p, seen[p]) if p else (0, GENESIS_HASH) for p in target.chains]) == target.hash


class LogTransfer:
    """Export the log of one store, or import an event file into it."""

    def __init__(self, store: EventStore, structure: PayloadCheck, after_import: Callable[[], object],
                 follow_up: ErasureFollowUp | None = None) -> None:
        """``structure(kind, schema, payload)``: the codec that turns a payload into its event
        class (raises on one that does not fit); ``after_import``: rebuilds what is derived
        outside the store (prompt files) once events were appended; ``follow_up``: what runs
        after the erasures an encrypted export's destroyed keys stand for are recorded."""
        self._store = store
        self._structure = structure
        self._after_import = after_import
        self._follow_up = follow_up

    def export_lines(self) -> Iterator[str]:
        return export_lines(self._store)

    def check(self, lines: Lines, *, progress: Progress | None = None,
              target_at: LogHead | None = None, opener: Opener | None = None) -> ImportReport:
        return check_lines(lines, self._structure, progress=progress, target_at=target_at, opener=opener)

    def import_lines(self, lines: Lines, *, resume: bool = False, progress: Progress | None = None,
                     checked: Progress | None = None, chains: int | None = None,
                     copy_of: str | None = None, opener: Opener | None = None) -> ImportReport:
        """Check the whole file, then append what follows the target's head (see the module).

        An empty target takes the whole file. A target holding events is refused unless
        ``resume`` is set and its log is exactly a prefix of the file's (an import that was cut
        off, or a copy made earlier): then only the rest is appended. ``chains``: link the events
        onto that many chains instead of the file's (ADR-0031) — an empty target only; the
        events, positions and digests stay, their chain hashes and the anchor are new.
        ``copy_of``: the home this import copies (``storage migrate``): the target carries it as
        the mark of an unfinished copy from its first appended events to its last (ADR-0051).
        ``opener``: opens an encrypted export's payloads (ADR-0081); after the events, the erasures
        its destroyed keys stand for are recorded (and followed up: receipts)."""
        at = self._store.head()
        if at.position and not resume:
            raise EventFileError(f"the target already holds events (up to position {at.position}): nothing was"
                                 " imported (import into an empty home, or --resume an import whose log is a"
                                 " prefix of this file's)")
        if chains is not None and (type(chains) is not int or not 1 <= chains <= MAX_CHAINS):
            raise EventFileError(f"chains is a whole number from 1 to {MAX_CHAINS}, not {chains!r}")
        report = self.check(lines, progress=checked, target_at=at, opener=opener)
        wanted = report.chains if chains is None else chains
        rechain = wanted != report.chains
        if rechain and (resume or at.position):
            raise EventFileError("linking a log onto other chains needs an empty target (no --resume): nothing"
                                 " was written")
        if rechain and wanted == 1 and report.events != report.head_position:
            raise EventFileError("a log of one chain numbers its events without gaps, and this file's positions"
                                 " leave some: import it with its own chains; nothing was written")
        held = len(head_value(at).chains) or 1
        if held != wanted:
            if at.position:
                raise EventFileError(f"the target's log has {held} chain(s) and the file's {report.chains}:"
                                     " nothing was written")
            self._store.adopt_chains(wanted)  # an empty target takes the file's chains (or those asked)
        relink = Relink(wanted, functools.partial(_chain, chains=wanted)) if rechain else None
        appended = self._copy(lines, at.position, report, relink, progress, copy_of, opener)
        if opener is not None:
            report = self._recorded(report, opener)
        self._after_import()
        if relink is None:
            return attrs.evolve(report, appended=appended)
        head = relink.head
        return attrs.evolve(report, appended=appended, head_hash=head.hash, chains=wanted, anchor=str(head),
                            rechained_from=report.anchor)

    def _recorded(self, report: ImportReport, opener: Opener) -> ImportReport:
        """Record what the destroyed keys of an encrypted export left redacted; follow it up."""
        head_before = str(head_value(self._store.head()))
        records = opener.record(self._store)
        if records and self._follow_up is not None:
            self._follow_up.erased(records, head_before)
        destroyed = tuple(sorted(opener.destroyed))
        return attrs.evolve(report, keys_destroyed=destroyed, erasure_records=tuple(records),
                            positions_lost=len(opener.lost))

    def _copy(self, lines: Lines, after: int, report: ImportReport, relink: Relink | None,
              progress: Progress | None, copy_of: str | None, opener: Opener | None) -> int:
        """Append the checked file's events that follow position ``after``, in batches; how many.
        A batch is appended once the next event is read, so the last one is known as the last:
        with ``copy_of``, the first batch writes the mark and the last removes it."""
        batch: list[LoggedEvent] = []
        appended = 0
        for _, item in _events(lines(), opener):
            if isinstance(item, Head) or item.position <= after:
                continue
            if item.position > report.head_position:
                break  # a file that grew since it was checked: only what was checked goes in
            if len(batch) >= BATCH:
                appended += self._append(batch, progress, appended, report.events, copy_of)
            batch.append(relink(item) if relink is not None else item)
        if batch or (copy_of is not None and self._store.unfinished_copy() is not None):
            appended += self._append(batch, progress, appended, report.events, copy_of, last=True)
        return appended

    def _append(self, batch: list[LoggedEvent], progress: Progress | None, before: int, total: int,
                copy_of: str | None, *, last: bool = False) -> int:
        if copy_of is None:
            self._store.append_logged(batch)
        else:
            self._store.append_logged(batch, copy_of=copy_of, copied=last)
        count = len(batch)
        batch.clear()
        if progress is not None:
            progress(before + count, total)
        return count
