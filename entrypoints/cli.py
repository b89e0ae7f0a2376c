"""The ``fermix`` admin command: review, restore, audit, import/export (SPEC §11).

``main(argv) -> int`` never raises for user errors: it prints one clear line on stderr (one
JSON object with ``--json``) and returns 1; only a bug gives 70. ``--home`` and ``--json`` are
accepted before or after the sub-command.

Each command declares how it opens the memory: ``read`` commands open an existing home
read-only (they never create or change anything, and work on a read-only mount), ``write``
commands need an existing home, ``create`` commands (imports, the demo, ``setup init``) may
create one, and ``config`` commands work on ``config.toml`` alone.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TextIO

from fermix_memory.adapters.sqlite.codec import CONVERTER
from fermix_memory.application.errors import IntegrityError, ModelError, StorageBusy
from fermix_memory.application.history import HistoryImportError
from fermix_memory.domain.errors import FermixError
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.values import INT64_MAX
from fermix_memory.entrypoints.api import MemorySystem

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 70
READ, WRITE, CREATE, CONFIG = "read", "write", "create", "config"


class UsageError(FermixError):
    """Bad command-line input (argparse's complaints included)."""


def one_line(text: str) -> str:
    """``text`` with control characters and line breaks escaped: one terminal line, always."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def plural(count: int, noun: str) -> str:
    """``1 message``, ``2 messages``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def jsonable(value: Any) -> Any:
    """Domain values (attrs classes, enums, datetimes) as plain JSON data."""
    return CONVERTER.unstructure(value)


class Output:
    """Writes either human lines or one JSON document on stdout."""

    def __init__(self, as_json: bool, out: TextIO) -> None:
        self.as_json = as_json
        self.out = out

    def emit(self, data: Any, human: Callable[[Any], Sequence[str]]) -> None:
        if self.as_json:
            json.dump(jsonable(data), self.out, ensure_ascii=False, indent=2, sort_keys=True)
            self.out.write("\n")
        else:
            for line in human(data):
                self.out.write(line + "\n")


class Progress:
    """A one-line progress display on stderr, only when stderr is a terminal."""

    def __init__(self, label: str, stream: TextIO) -> None:
        self.label = label
        self.stream = stream
        self.enabled = stream.isatty()
        self._shown: tuple[int, int] | None = None
        self._open = False  # a bar without its final newline is on screen

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0 or self._shown == (done, total):
            return  # the same figures twice (a last batch that is also the end) print once
        self._shown = (done, total)
        width = 30
        filled = int(width * min(done, total) / total)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        self._open = done < total
        if not self._open:
            self.stream.write("\n")
        self.stream.flush()

    def close(self) -> None:
        """End a bar the work left unfinished (it stopped early, or skipped the last call)."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


# --- commands ---------------------------------------------------------------------------------------


MEMORY_HEADER = "ID\tAGENT\tOWNER\tSCOPE\tCATEGORY\tKEY = VALUE"


def _memory_line(m: Any) -> str:
    state = f" (archived: {m.archive_reason or 'no reason'})" if m.archived_at else ""
    cells = (str(m.id), m.agent_id, m.owner_id, f"{m.scope_type.value}:{m.scope_id}", m.category.value,
             f"{m.key} = {m.value}{state}")
    return "\t".join(one_line(c) for c in cells)


def _verify_lines(r: Any) -> list[str]:
    if r.ok:
        return [f"ok: {plural(r.events, 'event')}, chain and projections verified"
                + (f" ({r.redacted} redacted)" if r.redacted else "")]
    where = f" at event {r.first_bad_position}" if r.first_bad_position is not None else ""
    return [f"FAILED{where}: {r.problem}"]


def cmd_events_verify(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    progress = Progress("verify", sys.stderr)
    try:
        report = memory.verify(progress, expect_head=args.expect_head)
    finally:
        progress.close()
    out.emit(report, _verify_lines)
    if not report.ok:
        _error(out.as_json, IntegrityError(f"verification failed: {report.problem}"))
        return EXIT_ERROR
    return EXIT_OK


def cmd_events_head(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    head = memory.head()
    out.emit({"position": head.position, "hash": head.hash}, lambda h: [f"{h['position']}:{h['hash']}"])
    return EXIT_OK


def cmd_events_replay(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    progress = Progress("replay", sys.stderr)
    try:
        result = memory.replay_into(Path(args.into), progress)
    finally:
        progress.close()
    out.emit(result, lambda r: [f"replayed {plural(r['events'], 'event')} into {r['target']}",
                                "projections identical to the live database" if r["identical"] else
                                f"DIFFERENT tables: {', '.join(r['differing_tables'])}"])
    return EXIT_OK if result["identical"] else EXIT_ERROR


def _event_detail(event: dict[str, Any] | None) -> str:
    """What an event says, for a terminal: whose it is, a memory's key and value or a message's
    words first, then the other fields."""
    if event is None:
        return "[redacted]"
    parts = []
    if "agent_id" in event or "owner_id" in event:
        parts.append(f"{event.get('agent_id', '')}/{event.get('owner_id', '')}")
    if "key" in event and "value" in event:
        parts.append(f"{event['key']} = {event['value']}")
    elif "content" in event:
        parts.append(f"{event.get('role', '')} {event.get('sender', '')}: {event['content']}".strip())
    shown = ("agent_id", "owner_id", "key", "value", "content", "role", "sender", "provenance", "at")
    rest = {k: v for k, v in event.items() if k not in shown}
    parts.append(json.dumps(rest, ensure_ascii=False, sort_keys=True))
    text = one_line("  ".join(parts))
    return text if len(text) <= 240 else text[:239] + "…"


def cmd_events_log(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    items = []
    for entry in memory.log_entries(after=args.after, kind=args.kind):
        items.append({"position": entry.position, "stream": entry.stream, "version": entry.version,
                      "kind": entry.kind, "recorded_at": entry.recorded_at, "redacted": entry.event is None,
                      "payload_sha256": entry.payload_sha256,
                      "event": None if entry.event is None else jsonable(entry.event)})
        if len(items) >= args.limit:
            break
    out.emit(items, lambda rows: ["POSITION\tKIND\tSTREAM\tEVENT"] + [
        f"{r['position']}\t{r['kind']}\t{r['stream']}\t{_event_detail(r['event'])}" for r in rows]
        if rows else ["no events"])
    return EXIT_OK


def _read_lines(name: str) -> list[str]:
    """The lines of a history file (``-``: standard input), a UTF-8 byte-order mark allowed."""
    try:
        if name == "-":
            raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        else:
            raw = Path(name).read_bytes()
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read {name}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from None
    # Split on newlines only: JSON strings may hold U+2028 and friends unescaped.
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def cmd_history_import(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    lines = _read_lines(args.file)
    checking, writing = Progress("checking", sys.stderr), Progress("importing", sys.stderr)
    try:
        ids = memory.import_history(lines, checking=checking, importing=writing)
    finally:
        checking.close()
        writing.close()
    source = "standard input" if args.file == "-" else args.file
    skipped = sum(1 for line in lines if line.strip()) - len(ids)
    out.emit({"imported": len(ids), "skipped": skipped, "first_id": ids[0] if ids else None,
              "last_id": ids[-1] if ids else None},
             lambda r: [f"imported {plural(r['imported'], 'message')} from {source}"
                        + (f"; skipped {plural(r['skipped'], 'message')} already imported" if skipped else "")])
    return EXIT_OK


def cmd_history_export(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    lines = memory.export_history(agent_id=args.agent)
    if args.output:
        target = Path(args.output)
        count = 0
        with target.open("w", encoding="utf-8") as fh:
            for line in lines:
                fh.write(line + "\n")
                count += 1
        out.emit({"exported": count, "file": str(target)},
                 lambda r: [f"exported {plural(r['exported'], 'message')} to {r['file']}"])
    else:
        for line in lines:
            out.out.write(line + "\n")
    return EXIT_OK


def cmd_memory_list(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    rows = memory.memories(agent_id=args.agent, owner_id=args.owner, include_archived=not args.active)
    out.emit(rows, lambda rs: [MEMORY_HEADER] + [_memory_line(m) for m in rs] if rs else ["no memory rows"])
    return EXIT_OK


def cmd_memory_show(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    result = memory.explain(args.id)

    def human(r: dict[str, Any]) -> list[str]:
        lines = [_memory_line(CONVERTER.structure(r["memory"], Memory)), "history:"]
        for e in r["events"]:
            by = e.get("by", {})
            lines.append(f"  {e['at']}  #{e['position']} {e['kind']}  value={e.get('value', '')!r}  "
                         f"by={by.get('source_type', '')}/{by.get('trust', '')}"
                         f"{'  reason=' + e['reason'] if e.get('reason') else ''}")
            for m in e.get("source_messages", []):
                lines.append(f"      from #{m['id']} ({m['conversation']}, {m['sender']}): {m['content'][:120]}")
        return lines

    out.emit(result, human)
    return EXIT_OK


def cmd_memory_search(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    result = memory.recall(args.query, agent_id=args.agent, owner_id=args.owner, conversation=args.conversation,
                           scope=args.scope, source=args.source, limit=args.limit)

    def human(r: Any) -> list[str]:
        lines = [f"memory {h.memory.id}: {h.memory.key} = {h.memory.value}" for h in r.memories]
        lines += [f"message {h.message.id} ({h.message.conversation}): {h.snippet}" for h in r.messages]
        return lines or ["nothing found"]

    out.emit(result, human)
    return EXIT_OK


def cmd_memory_restore(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    current = memory.memory(args.id)
    if current.archived_at is None:  # nothing to undo: say so, and write nothing
        out.emit(current, lambda m: [f"already active: {_memory_line(m)}"])
        return EXIT_OK
    row = memory.restore(args.id, by="cli")
    out.emit(row, lambda m: [f"restored: {_memory_line(m)}"])
    return EXIT_OK


def cmd_forget(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    if not args.yes:
        where = f"agent {args.agent!r}" if args.agent else "every agent"
        raise UsageError(f"forget erases everything of owner {args.owner!r} with {where}, for good;"
                         " add --yes to go ahead")
    report = memory.forget_owner(args.owner, agent_id=args.agent, by="cli", reason=args.reason or "")

    def human(r: Any) -> list[str]:
        if not r.erased_events:
            with_agent = f" with agent {args.agent!r}" if args.agent else ""
            return [f"nothing of owner {r.owner_id!r} was found{with_agent}; nothing to erase, nothing erased"]
        lines = [f"forgot owner {r.owner_id!r} with {agent}: {n} events redacted, their rows deleted"
                 for agent, n in sorted(r.erased_events.items())]
        lines.append(f"memory.db rewritten: {r.bytes_before:,} -> {r.bytes_after:,} bytes")
        return lines

    out.emit(report, human)
    if not report.wal_truncated:
        _error(out.as_json, StorageBusy("another process holds a read open, so the WAL still has old pages;"
                                        " run forget again once it has closed"))
        return EXIT_ERROR
    return EXIT_OK


def _resource_owner(memory: MemorySystem, args: argparse.Namespace) -> tuple[str, str]:
    """The (agent, owner) a resource command is about: as given, or the only one there is."""
    pairs = sorted({(r.agent_id, r.owner_id) for r in memory.resources(agent_id=args.agent, owner_id=args.owner)})
    if args.agent and args.owner:
        return args.agent, args.owner
    if len(pairs) == 1:
        return pairs[0]
    if not pairs:
        raise UsageError("no prompt-file revisions match; give --agent and --owner")
    listed = ", ".join(f"{a}/{o}" for a, o in pairs[:10])
    raise UsageError(f"several agents/owners have prompt files ({listed}); give --agent and --owner")


REVISION_HEADER = "NAME\tAGENT/OWNER\tREVISION\tCREATED\tREASON"


def _revision_line(r: Any) -> str:
    return f"{r.name}\t{r.agent_id}/{r.owner_id}\trev {r.revision}\t{r.created_at.isoformat()}\t{r.reason}"


def cmd_resource_list(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    rows = memory.resources(agent_id=args.agent, owner_id=args.owner)
    out.emit([{k: v for k, v in jsonable(r).items() if k != "content"} for r in rows] if out.as_json else rows,
             lambda rs: [REVISION_HEADER] + [_revision_line(r) for r in rs] if rs else ["no resources"])
    return EXIT_OK


def cmd_resource_history(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    agent, owner = _resource_owner(memory, args)
    rows = memory.resource_history(args.name, agent_id=agent, owner_id=owner, limit=args.limit)
    if not rows:
        raise UsageError(f"{args.name} of {agent}/{owner} has no revisions")
    out.emit([{k: v for k, v in jsonable(r).items() if k != "content"} for r in rows] if out.as_json else rows,
             lambda rs: [REVISION_HEADER] + [_revision_line(r) for r in rs])
    return EXIT_OK


def cmd_resource_show(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    agent, owner = _resource_owner(memory, args)
    revision = memory.resource_revision(args.name, args.rev, agent_id=agent, owner_id=owner)
    out.emit(revision, lambda r: r.content.splitlines())
    return EXIT_OK


def cmd_resource_diff(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    agent, owner = _resource_owner(memory, args)
    diff = memory.resource_diff(args.name, args.a, args.b, agent_id=agent, owner_id=owner)
    out.emit({"name": args.name, "from": args.a, "to": args.b, "diff": diff},
             lambda r: r["diff"].splitlines() or ["(no difference)"])
    return EXIT_OK


def cmd_resource_rollback(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    agent, owner = _resource_owner(memory, args)
    revision = memory.resource_rollback(args.name, args.rev, agent_id=agent, owner_id=owner, by="cli")
    path = memory.prompt_file(agent, owner, args.name)
    out.emit({"name": args.name, "rolled_back_to": args.rev, "new_revision": revision.revision, "file": str(path)},
             lambda r: [f"{r['name']}: revision {r['rolled_back_to']} restored as revision {r['new_revision']}"
                        f" ({r['file']})"])
    return EXIT_OK


# Full-text recall matches words: rows hold "home_city: Berlin", so the demo asks in those words.
DEMO_QUESTION = "home city"


def cmd_demo(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    """The whole loop on the embedded default: import the sample conversation shipped with the
    package, review it (the offline ``rules`` extractor unless a provider is configured), show
    the prompt files, recall a fact, verify the log."""
    from importlib.resources import files

    sample = files("fermix_memory").joinpath("samples/conversation.jsonl").read_text(encoding="utf-8")
    agent, owner, conversation = "ada", "alice", "telegram:12345"
    imported = 0 if memory.history(agent, conversation) else len(memory.import_history(sample.splitlines()))
    reviews = memory.review_now(agent_id=agent, owner_id=owner, conversation=conversation)
    found = memory.recall(DEMO_QUESTION, agent_id=agent, owner_id=owner, conversation=conversation,
                          source="all", limit=3)
    report = memory.verify()
    result = {
        "home": str(memory.home),
        "imported": imported,
        "reviews": reviews,
        "user_md": memory.prompt_file(agent, owner, "user_md").read_text(encoding="utf-8"),
        "memory_md": memory.prompt_file(agent, owner, "memory_md").read_text(encoding="utf-8"),
        "recall_memories": [{"id": h.memory.id, "key": h.memory.key, "value": h.memory.value}
                            for h in found.memories],
        "recall_messages": [{"id": h.message.id, "snippet": h.snippet} for h in found.messages],
        "verified": report.ok,
        "events": report.events,
    }

    def human(r: dict[str, Any]) -> list[str]:
        lines = [f"home: {r['home']}", f"imported {r['imported']} sample messages"]
        for review in r["reviews"]:
            lines.append(f"review {review.conversation}: {review.status} {review.reason} "
                         f"({review.messages_reviewed} messages, {review.applied} applied, {review.refused} refused)")
        lines += ["", f"--- {memory.prompt_file(agent, owner, 'user_md')}", r["user_md"].rstrip(),
                  f"--- {memory.prompt_file(agent, owner, 'memory_md')}", r["memory_md"].rstrip(), "",
                  f"recall '{DEMO_QUESTION}':"]
        lines += [f"  memory #{h['id']}: {h['key']}: {h['value']}" for h in r["recall_memories"]]
        lines += [f"  message #{h['id']}: {h['snippet']}" for h in r["recall_messages"]]
        lines.append(f"event log: {r['events']} events, verified={'yes' if r['verified'] else 'NO'}")
        return lines

    out.emit(result, human)
    return EXIT_OK if report.ok else EXIT_ERROR


def cmd_memory_review(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    if not args.now:
        raise UsageError("background reviews run after turns; use --now to review now")
    results = memory.review_now(agent_id=args.agent, owner_id=args.owner, conversation=args.conversation)

    def human(rs: list[Any]) -> list[str]:
        lines = [f"{r.agent_id}/{r.owner_id} {r.conversation}: {r.status}"
                 f"{' (' + r.reason + ')' if r.reason else ''}: {r.messages_reviewed} messages,"
                 f" {r.applied} applied, {r.refused} refused" for r in rs]
        return lines or ["no conversation has new messages to review"]

    out.emit(results, human)
    failed = [r for r in results if r.status == "failed"]
    if failed:
        _error(out.as_json, ModelError(f"{plural(len(failed), 'review')} failed; the first: {failed[0].reason}"))
        return EXIT_ERROR
    return EXIT_OK


# --- setup (works on the config file alone: it can mend a config that keeps memory from opening) ---


def _config_path(args: argparse.Namespace) -> Path:
    from fermix_memory.entrypoints.bootstrap import CONFIG_NAME, resolve_home

    return resolve_home(args.home) / CONFIG_NAME


def cmd_setup_review_interval(args: argparse.Namespace, out: Output) -> int:
    from fermix_memory.adapters.config_toml import set_review_interval

    path = _config_path(args)
    set_review_interval(path, args.hours)
    out.emit({"file": str(path), "review_interval_hours": args.hours},
             lambda r: [f"review_interval_hours = {r['review_interval_hours']:g} in {r['file']}"
                        + (" (background review disabled)" if r["review_interval_hours"] == 0 else "")])
    return EXIT_OK


def cmd_setup_init(args: argparse.Namespace, out: Output) -> int:
    """Write a default config.toml (unless there is one) and create the memory database."""
    from fermix_memory.adapters.config_toml import render_default_config
    from fermix_memory.entrypoints.bootstrap import DB_NAME

    path = _config_path(args)
    had_config, had_db = path.exists(), (path.parent / DB_NAME).exists()
    if had_config and had_db:
        raise UsageError(f"{path} already exists; edit it, or use 'fermix setup review-interval'")
    if not had_config:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render_default_config(), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    with MemorySystem.open(path.parent):
        pass  # creates memory.db with the settings now in effect
    out.emit({"file": str(path), "config_written": not had_config, "database": str(path.parent / DB_NAME)},
             lambda r: [f"wrote {r['file']} (every knob at its default)" if r["config_written"]
                        else f"kept the existing {r['file']}", f"created {r['database']}"])
    return EXIT_OK


def cmd_setup_show(args: argparse.Namespace, out: Output) -> int:
    from fermix_memory.adapters.config_toml import load_settings

    path = _config_path(args)
    settings = load_settings(path)
    data = jsonable(settings)
    out.emit({"file": str(path), "exists": path.exists(), "settings": data},
             lambda r: [f"{r['file']}{'' if r['exists'] else ' (not present: defaults)'}",
                        json.dumps(r["settings"], indent=2, sort_keys=True)])
    return EXIT_OK


def _hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of hours") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("hours must be 0 (off) or more")
    return value


# --- parser -----------------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is a :class:`UsageError` (one line, exit 1), not exit 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def shows_default(default: object) -> bool:
    """Whether an option's default is worth printing in its help ("(default: ...)")."""
    return not (default is None or default is False or default is argparse.SUPPRESS)


class HelpFormatter(argparse.HelpFormatter):
    """Shows each option's default when it has a meaningful one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (shows_default(action.default) and "%(default)" not in text and action.option_strings):
            text += " (default: %(default)s)"
        return text


def _path(text: str) -> str:
    if not text or "\x00" in text:
        raise argparse.ArgumentTypeError("a path must be non-empty, without NUL characters")
    return text


def _common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    default: Any = None if top else argparse.SUPPRESS
    parser.add_argument("--home", default=default, type=_path,
                        help="memory home folder (default: $FERMIX_HOME, else ~/.fermix)")
    parser.add_argument("--json", action="store_true", default=False if top else argparse.SUPPRESS,
                        help="print one JSON document on stdout (and errors as JSON on stderr)")


def _whole(text: str, minimum: int, rule: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
    if not minimum <= value <= INT64_MAX:  # SQLite cannot even compare with a larger number
        raise argparse.ArgumentTypeError(f"must be {rule} of at most {INT64_MAX}")
    return value


def _positive(text: str) -> int:
    return _whole(text, 1, "a positive number")


def _position(text: str) -> int:
    return _whole(text, 0, "a position (0 or more)")


def _id(text: str) -> int:
    return _positive(text)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fermix-memory")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="fermix", description="Admin and audit tool of fermix-memory.",
                    formatter_class=HelpFormatter, allow_abbrev=False)
    _common(parser, top=True)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                        help="print the version and exit")
    groups = parser.add_subparsers(dest="group", required=True, parser_class=Parser,
                                   metavar="{demo,events,forget,history,memory,resource,setup}")

    def group(name: str, help_text: str) -> Any:
        return groups.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter,
                                 allow_abbrev=False).add_subparsers(dest="command", required=True,
                                                                    parser_class=Parser, metavar="COMMAND")

    def command(sub: Any, name: str, func: Any, access: str, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_text, description=help_text,
                                                    formatter_class=HelpFormatter, allow_abbrev=False)
        _common(p, top=False)
        p.set_defaults(func=func, access=access)
        return p

    command(groups, "demo", cmd_demo, CREATE,
            "run the whole loop on the sample conversation shipped with the package")

    events = group("events", "the event log: verify, head, replay, log")
    p = command(events, "verify", cmd_events_verify, READ, "check the hash chain and the projections (read-only)")
    p.add_argument("--expect-head", metavar="POSITION:HASH", default=None,
                   help="a head printed earlier by 'events head': the log must still hold it (default: none)")
    command(events, "head", cmd_events_head, READ, "print the log's last POSITION:HASH, to keep elsewhere")
    p = command(events, "replay", cmd_events_replay, READ, "rebuild every projection from the log into a new folder")
    p.add_argument("--into", required=True, type=_path, help="folder for the rebuilt memory.db (must not hold one)")
    p = command(events, "log", cmd_events_log, READ, "print events in log order (redacted ones show as such)")
    p.add_argument("--after", type=_position, default=0, help="only events after this position")
    p.add_argument("--limit", type=_positive, default=100, help="print at most this many events")
    p.add_argument("--kind", help="only events of this kind, e.g. memory.added")

    p = command(groups, "forget", cmd_forget, WRITE, "erase everything an owner left (messages, facts, files, jobs)")
    p.add_argument("owner", help="the owner id to forget")
    p.add_argument("--agent", help="only what they left with this agent (default: every agent)")
    p.add_argument("--reason", help="kept in the record of the erasure (no content of the owner's)")
    p.add_argument("--yes", action="store_true", help="required: the erasure cannot be undone")

    history = group("history", "conversation history: import, export")
    p = command(history, "import", cmd_history_import, CREATE,
                "import messages from a JSON Lines file: every line is checked first, then all or nothing;"
                " messages imported before are skipped")
    p.add_argument("file", type=_path, help="the JSON Lines file, '-' for standard input (UTF-8, a BOM is fine)")
    p = command(history, "export", cmd_history_export, READ, "export messages as JSON Lines")
    p.add_argument("--agent", help="only this agent's messages (default: every agent)")
    p.add_argument("--output", "-o", type=_path, help="file to write (default: standard output)")

    mem = group("memory", "memory rows: list, show, search, review, restore")
    p = command(mem, "list", cmd_memory_list, READ, "list memory rows")
    p.add_argument("--agent", help="only this agent's rows (default: every agent)")
    p.add_argument("--owner", help="only this owner's rows (default: every owner)")
    p.add_argument("--active", action="store_true", help="leave out archived rows")
    p = command(mem, "show", cmd_memory_show, READ, "a row and the events and messages behind it")
    p.add_argument("id", type=_id, help="the memory row id")
    p = command(mem, "search", cmd_memory_search, READ, "full-text search as a reader would")
    p.add_argument("query", help="words to look for")
    p.add_argument("--agent", required=True, help="the agent searching")
    p.add_argument("--owner", required=True, help="the owner it searches for")
    p.add_argument("--conversation", help="the reader's conversation, CHANNEL:CHAT_ID[:THREAD]")
    p.add_argument("--scope", choices=("current", "owner", "all"), default="current",
                   help="which rows the reader may see")
    p.add_argument("--source", choices=("memories", "history", "all"), default="memories",
                   help="search memory rows, messages, or both")
    p.add_argument("--limit", type=_positive, default=10, help="at most this many hits of each source")
    p = command(mem, "review", cmd_memory_review, WRITE, "review conversations with new messages now")
    p.add_argument("--now", action="store_true", help="past the interval and back-off gates (required)")
    p.add_argument("--conversation", help="only this conversation, CHANNEL:CHAT_ID[:THREAD]")
    p.add_argument("--agent", help="only this agent's conversations (default: every agent)")
    p.add_argument("--owner", help="only this owner's conversations (default: every owner)")
    p = command(mem, "restore", cmd_memory_restore, WRITE,
                "un-archive a memory row and rebuild the prompt files (an active row is left as it is:"
                " 'already active', exit 0)")
    p.add_argument("id", type=_id, help="the memory row id")

    setup = group("setup", "the config file: init, show, review-interval")
    command(setup, "init", cmd_setup_init, CONFIG,
            "create the memory home: a config.toml with every knob at its default, and memory.db")
    command(setup, "show", cmd_setup_show, CONFIG, "the settings in effect")
    p = command(setup, "review-interval", cmd_setup_review_interval, CONFIG,
                "set the background review interval in hours (0 disables it; --now still works);"
                " the rest of config.toml, comments included, is kept")
    p.add_argument("hours", type=_hours, help="hours between background reviews; 0 turns them off")

    res_cmds = group("resource", "versioned prompt files: list, history, show, diff, rollback")

    def resource_command(name: str, func: Any, access: str, help_text: str) -> argparse.ArgumentParser:
        p = command(res_cmds, name, func, access, help_text)
        p.add_argument("--agent", help="agent id (needed when several agents have prompt files)")
        p.add_argument("--owner", help="owner id (needed when several owners have prompt files)")
        return p

    name_help = "the prompt file: user_md (USER.md) or memory_md (MEMORY.md)"
    resource_command("list", cmd_resource_list, READ, "the current revision of every resource")
    names = ("user_md", "memory_md")
    p = resource_command("history", cmd_resource_history, READ, "revisions of a resource, newest first")
    p.add_argument("name", choices=names, help=name_help)
    p.add_argument("--limit", type=_positive, default=20, help="at most this many revisions")
    p = resource_command("show", cmd_resource_show, READ, "the content of one revision")
    p.add_argument("name", choices=names, help=name_help)
    p.add_argument("rev", type=_id, help="the revision number")
    p = resource_command("diff", cmd_resource_diff, READ, "unified diff between two revisions")
    p.add_argument("name", choices=names, help=name_help)
    p.add_argument("a", type=_id, help="the older revision")
    p.add_argument("b", type=_id, help="the newer revision")
    p = resource_command("rollback", cmd_resource_rollback, WRITE, "restore a revision's content as a new revision")
    p.add_argument("name", choices=names, help=name_help)
    p.add_argument("rev", type=_id, help="the revision whose content comes back")
    return parser


def wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` is among the options (before any ``--``): errors are then one JSON object."""
    args = list(argv)
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def _error(as_json: bool, exc: BaseException, lines: Sequence[str] | None = None) -> None:
    """Report a failure on stderr: ``fermix: error: ...`` lines, or one JSON object."""
    lines = list(lines) if lines is not None else [str(exc)]
    if as_json:
        json.dump({"error": lines[0] if len(lines) == 1 else "; ".join(lines), "type": type(exc).__name__,
                   "lines": lines}, sys.stderr, ensure_ascii=False)
        sys.stderr.write("\n")
    else:
        for line in lines:
            sys.stderr.write(f"fermix: error: {one_line(line)}\n")


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = wants_json(argv)
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        _error(as_json, exc)
        return EXIT_ERROR
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    out = Output(bool(args.json), stdout or sys.stdout)
    try:
        if args.access == CONFIG:
            return int(args.func(args, out))
        with MemorySystem.open(args.home, create=args.access == CREATE, readonly=args.access == READ) as memory:
            return int(args.func(memory, args, out))
    except HistoryImportError as exc:
        _error(out.as_json, exc, [*exc.lines(), "nothing was imported"] if len(exc.problems) > 1 else None)
        return EXIT_ERROR
    except FermixError as exc:
        _error(out.as_json, exc)
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("fermix: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # a file the operator named (export -o, replay --into): their problem to fix
        _error(out.as_json, exc, [f"{exc.filename or 'file'}: {exc.strerror or exc}"])
        return EXIT_ERROR
    except Exception as exc:  # a bug: still one line, and a distinct exit code
        sys.stderr.write(f"fermix: internal error: {type(exc).__name__}: {exc}\n")
        return EXIT_INTERNAL


def run() -> None:
    """Console-script entry point: the library's warnings (a failed model call) show as
    ``fermix: warning: ...`` lines on stderr."""
    with log_lines(sys.stderr):
        code = main()
    sys.exit(code)


@contextmanager
def log_lines(stream: TextIO) -> Iterator[None]:
    """While inside, the library's log records go to ``stream`` as ``fermix: <level>: ...`` lines."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(LogLine())
    logger = logging.getLogger("fermix_memory")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


class LogLine(logging.Formatter):
    """One line per log record, no traceback: ``fermix: warning: ...``."""

    def format(self, record: logging.LogRecord) -> str:
        return f"fermix: {record.levelname.lower()}: {one_line(record.getMessage())}"
