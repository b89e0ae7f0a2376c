"""Moving a home (ADR-0030): a log exported as an event file, checked whole, and appended into
another store — SQLite or any other behind the :class:`EventStore` port — with its chain.

Export streams the log up to the head it read first. Import reads the file twice: once to check
every line (format, positions, stream versions, digests, payload schemas, the chain, the
header's head) and to find where the target stands, writing nothing; then to append, in
batches, only what follows the target's head. Memory stays constant whatever the log's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import attrs

from fermix_memory.application.errors import EventFileError
from fermix_memory.application.ports import EventStore, LogHead
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.log_chain import ChainCheck, LoggedEvent, PayloadCheck
from fermix_memory.domain.log_lines import event_line, header_line, parse_event, parse_header

BATCH = 2_000  # events appended per transaction
Lines = Callable[[], Iterable[str]]  # opens the event file anew, one line per item
Progress = Callable[[int, int], None]


@attrs.frozen(kw_only=True)
class ImportReport:
    events: int  # in the file
    appended: int  # appended to the target (the rest it already held)
    head_position: int
    head_hash: str
    redacted: int


def export_lines(store: EventStore) -> Iterator[str]:
    """The store's log as an event file: the header with the head read first, then every event up
    to that head (writes committed meanwhile are left for the next export)."""
    head = store.head()
    yield header_line(head.position, head.hash)
    if head.position == 0:
        return
    for e in store.read_log():
        yield event_line(e)
        if e.position >= head.position:
            return
    raise EventFileError(f"the log ended before its head {head.position}")


def _events(lines: Iterable[str]) -> Iterator[tuple[int, LoggedEvent | tuple[int, str]]]:
    """``(line number, parsed line)``: the header as ``(position, hash)``, then events."""
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
                yield number, parse_header(text.removeprefix("\ufeff"))
            elif text.strip():
                yield number, parse_event(text)
            else:
                raise EventFileError("an empty line (every line after the header is one event)")
        except DomainError as exc:
            raise EventFileError(f"line {number}: {exc}") from None
        except EventFileError as exc:
            raise EventFileError(f"line {number}: {exc}") from None
    if number == 0:
        raise EventFileError("line 1: the file is empty (an event file starts with its header)")


def check_lines(lines: Lines, structure: PayloadCheck, *, progress: Progress | None = None,
                target_at: LogHead | None = None) -> ImportReport:
    """Check the whole file; nothing is written. ``target_at``: the head of a log that must be
    a prefix of the file's (its event at that position has that hash)."""
    check = ChainCheck(structure)
    declared: tuple[int, str] = (0, "")
    prefix_ok = target_at is None or target_at.position == 0
    number = 0
    for number, item in _events(lines()):
        if isinstance(item, tuple):
            declared = item
            continue
        problem = check.problem(item)
        if problem:
            raise EventFileError(f"line {number}: {problem}")
        if target_at is not None and item.position == target_at.position:
            prefix_ok = item.hash == target_at.hash
        if progress is not None and item.position % BATCH == 0:
            progress(item.position, declared[0])
    if (check.position, check.hash) != declared:
        raise EventFileError(f"line {number}: the file ends at event {check.position}, but its header names"
                             f" the head {declared[0]}:{declared[1]} (a cut or padded file)")
    if not prefix_ok and target_at is not None:
        raise EventFileError(f"the target's log (head {target_at.position}:{target_at.hash[:12]}…)"
                             " is not a prefix of the file's: nothing was written")
    return ImportReport(events=check.position, appended=0, head_position=check.position, head_hash=check.hash,
                        redacted=check.redacted)


class LogTransfer:
    """Export the log of one store, or import an event file into it."""

    def __init__(self, store: EventStore, structure: PayloadCheck, after_import: Callable[[], object]) -> None:
        """``structure(kind, schema, payload)``: the codec that turns a payload into its event
        class (raises on one that does not fit); ``after_import``: rebuilds what is derived
        outside the store (prompt files) once events were appended."""
        self._store = store
        self._structure = structure
        self._after_import = after_import

    def export_lines(self) -> Iterator[str]:
        return export_lines(self._store)

    def check(self, lines: Lines, *, progress: Progress | None = None,
              target_at: LogHead | None = None) -> ImportReport:
        return check_lines(lines, self._structure, progress=progress, target_at=target_at)

    def import_lines(self, lines: Lines, *, resume: bool = False, progress: Progress | None = None,
                     checked: Progress | None = None) -> ImportReport:
        """Check the whole file, then append what follows the target's head (see the module).

        An empty target takes the whole file. A target holding events is refused unless
        ``resume`` is set and its log is exactly a prefix of the file's (an import that was cut
        off, or a copy made earlier): then only the rest is appended."""
        at = self._store.head()
        if at.position and not resume:
            raise EventFileError(f"the target already holds {at.position} events: nothing was imported"
                                 " (import into an empty home, or --resume an import whose log is a prefix"
                                 " of this file's)")
        report = self.check(lines, progress=checked, target_at=at)
        batch: list[LoggedEvent] = []
        appended = 0
        for _, item in _events(lines()):
            if isinstance(item, tuple) or item.position <= at.position:
                continue
            if item.position > report.head_position:
                break  # a file that grew since it was checked: only what was checked goes in
            batch.append(item)
            if len(batch) >= BATCH:
                appended += self._append(batch, progress, report.events)
        appended += self._append(batch, progress, report.events)
        self._after_import()
        return attrs.evolve(report, appended=appended)

    def _append(self, batch: list[LoggedEvent], progress: Progress | None, total: int) -> int:
        if not batch:
            return 0
        head = self._store.append_logged(batch)
        count = len(batch)
        batch.clear()
        if progress is not None:
            progress(head.position, total)
        return count
