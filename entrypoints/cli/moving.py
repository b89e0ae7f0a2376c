"""Moving a home (ADR-0030): ``fermix events export`` / ``events import`` (the log as an event
file, chain included) and ``fermix storage migrate`` (both in one step, into another home)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs

from fermix_memory.application.errors import ConfigError, EventFileError, IntegrityError
from fermix_memory.application.settings_storage import DATABASE_URL_ENV, storage_url_problem
from fermix_memory.entrypoints.cli.output import EXIT_OK, Output, UsageError, plural, progress_bars

if TYPE_CHECKING:  # imported by the commands that open a whole memory, when they run (ADR-0063)
    from fermix_memory.application.log_transfer import ImportReport
    from fermix_memory.entrypoints.api.memory_system import MemorySystem


@attrs.frozen
class MigrationTarget:
    """Where ``fermix storage migrate --to`` copies a home: a home folder, or a PostgreSQL
    database (``url``), opened with a scratch folder of its own for the prompt files it renders
    (each host renders its own from the database when it opens it, ADR-0029)."""

    home: Path | None = None
    url: str | None = None

    @property
    def shown(self) -> str:
        return str(self.home) if self.home is not None else str(self.url)  # a URL here holds no password


def migration_target(target: str) -> MigrationTarget:
    """What ``--to`` names: a folder (created when missing) or a ``postgresql://`` URL (refused
    with a password in it, like everywhere else); anything else is a clear error."""
    scheme, sep, _ = target.partition("://")
    if sep:
        if scheme.lower() not in ("postgresql", "postgres"):
            raise ConfigError(f"--to takes a home folder or a postgresql:// URL, not a {scheme[:20]}:// URL")
        problem = storage_url_problem(target)
        if problem is not None:
            raise ConfigError(f"--to is {problem}")
        return MigrationTarget(url=target)
    return MigrationTarget(home=Path(target).expanduser())


def _lines_of(fh: IO[bytes]) -> Callable[[], Iterator[str]]:
    """Opens the event file anew each call: its lines as text, split on ``\\n`` only."""

    def lines() -> Iterator[str]:
        fh.seek(0)
        for number, raw in enumerate(fh, 1):
            try:
                yield raw.decode("utf-8").removesuffix("\n")
            except UnicodeDecodeError as exc:
                raise EventFileError(f"line {number}: not UTF-8 text (byte {exc.start})") from None

    return lines


def _open_event_file(name: str, stack: ExitStack) -> IO[bytes]:
    """The file (``-``: standard input, kept in a temporary file, as import reads it twice)."""
    try:
        if name != "-":
            return stack.enter_context(Path(name).open("rb"))
        spool = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 (closed by the stack)
        source = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else None
        while chunk := (source.read(1 << 20) if source is not None else sys.stdin.read(1 << 20).encode()):
            spool.write(chunk)
        return spool
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from None


def cmd_events_export(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    lines = memory.export_events(encrypted=args.encrypted)
    if args.file == "-":
        sink = getattr(out.out, "buffer", None)
        for line in lines:
            sink.write(line.encode("utf-8")) if sink is not None else out.out.write(line)
        out.out.flush()
        return EXIT_OK
    target = Path(args.file)
    partial = target.with_name(target.name + ".partial")  # a cut-off export never looks finished
    count = -1
    try:
        with partial.open("wb") as fh:
            for line in lines:
                fh.write(line.encode("utf-8"))
                count += 1
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    result: dict[str, Any] = {"exported": count, "file": str(target)}
    if args.encrypted:
        result["keys"] = str(memory.home / "keys")
    out.emit(result, lambda r: [f"exported {plural(r['exported'], 'event')} to {r['file']}"] + (
        [f"owners' payloads sealed with the keyring in {r['keys']}: keep it beside the export, not with it"]
        if "keys" in r else []))
    return EXIT_OK


def _import_lines(report: ImportReport, source: str) -> list[str]:
    kept = f"; the target already held the first {report.events - report.appended}" \
        if report.appended < report.events else ""
    relinked = [f"linked onto {plural(report.chains, 'chain')}: the file's anchor {report.rechained_from[:24]}…"
                " does not apply to this log; keep the new one"] if report.rechained_from else []
    destroyed = [f"the export keys of {len(report.keys_destroyed)} (agent, owner) pair(s) were destroyed: their"
                 " payloads came in redacted, recorded as erased"] if report.keys_destroyed else []
    lost = [f"{plural(report.positions_lost, 'payload')} erased after the export (their position keys were"
            " destroyed) came in redacted, recorded as erased"] if report.positions_lost else []
    return [f"imported {plural(report.appended, 'event')} from {source}{kept}", *relinked, *destroyed, *lost,
            f"head {report.anchor}" + (f" ({report.redacted} redacted)" if report.redacted else "")]


def cmd_events_import(args: argparse.Namespace, out: Output) -> int:
    """Check the whole file before the home is even created; then import it."""
    from datetime import UTC, datetime

    from fermix_memory.adapters.home_keys import keys_folder
    from fermix_memory.adapters.sql.codec import decode_payload
    from fermix_memory.application.log_transfer import check_lines
    from fermix_memory.entrypoints.api.export_keys import opening
    from fermix_memory.entrypoints.api.memory_system import MemorySystem
    from fermix_memory.entrypoints.home import DB_NAME, resolve_home

    home = resolve_home(args.home)
    keys = Path(args.keys).expanduser() if args.keys else keys_folder(home)
    with ExitStack() as stack:
        lines = _lines_of(_open_event_file(args.file, stack))
        with progress_bars("checking", "importing") as (checking, writing):
            if not (home / DB_NAME).exists():  # a failed import creates nothing
                check_lines(lines, decode_payload, progress=checking,  # this build's codec, no store opened
                            opener=opening(keys, datetime.now(UTC)))
            with MemorySystem.open(args.home) as memory:
                report = memory.import_events(lines, resume=args.resume, progress=writing, checked=checking,
                                              chains=args.chains, keys=keys)
    source = "standard input" if args.file == "-" else args.file
    out.emit(report, lambda r: _import_lines(r, source))
    return EXIT_OK


def cmd_storage_migrate(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    """Export this home and import it into the target in one stream, then verify the target."""
    from fermix_memory.entrypoints.api.memory_system import MemorySystem, open_app

    target = migration_target(args.to)
    if target.home is not None and target.home.resolve() == memory.home.resolve():
        raise UsageError("--to names this very home; migrate into another one")
    if target.url is not None and os.environ.get(DATABASE_URL_ENV, "").strip():
        # The variable wins over any configuration, so the copy would go wherever it points.
        raise UsageError(f"{DATABASE_URL_ENV} is set; unset it to migrate into --to's database")
    if target.url is not None and target.url.strip() == (memory.settings.storage.url or "").strip():
        raise UsageError("--to names this very database; migrate into another one")
    source_head = memory.head()
    with ExitStack() as stack:
        checking, copying, verifying = stack.enter_context(progress_bars("checking", "copying", "verifying"))
        # Only --resume opens a target that holds an unfinished copy: every other open refuses it.
        if target.url is not None:
            # The database is the memory; the scratch folder only holds the prompt files the copy renders.
            scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="fermix-migrate-"))
            config = {"fermix_core": {"storage": {"url": target.url}}}
            app = open_app(Path(scratch), config=config, resume_copy=args.resume)
        else:
            app = open_app(target.home, resume_copy=args.resume)
        into = stack.enter_context(MemorySystem(app))
        # The target carries the source's name as the mark of an unfinished copy until its last event is in.
        report = app.transfer.import_lines(memory.export_events, resume=args.resume, progress=copying,
                                           checked=checking, chains=args.chains, copy_of=str(memory.home.resolve()))
        verified = into.verify(verifying)
        target_head = into.head()
    result: dict[str, Any] = {
        "target": target.shown, "events": report.events, "appended": report.appended,
        "source_head": str(source_head), "target_head": str(target_head), "verified": verified.ok,
        "problem": verified.problem, "table_checksums": verified.table_checksums,
    }
    out.emit(result, lambda r: [
        *_import_lines(report, str(memory.home))[:-1],
        f"source head {r['source_head']}", f"target head {r['target_head']}",
        "target verified: chain and projections" if r["verified"] else f"target FAILED verification: {r['problem']}",
    ])
    if not verified.ok:
        raise IntegrityError(f"the migrated home did not verify: {verified.problem}")
    return EXIT_OK
