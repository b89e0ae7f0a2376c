"""The ``fermix`` admin command: review, restore, audit, import/export (SPEC §11).

``main(argv) -> int`` never raises for user errors: it prints one clear line on stderr and
returns non-zero. ``--home`` and ``--json`` are accepted before or after the sub-command.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from fermix_memory.adapters.sqlite.codec import CONVERTER
from fermix_memory.domain.errors import FermixError
from fermix_memory.domain.values import INT64_MAX
from fermix_memory.entrypoints.api import MemorySystem

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 70


class UsageError(FermixError):
    """Bad command-line input that argparse could not catch."""


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

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        width = 30
        filled = int(width * done / total)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


# --- commands ---------------------------------------------------------------------------------------


def _memory_line(m: Any) -> str:
    state = f" (archived: {m.archive_reason or 'no reason'})" if m.archived_at else ""
    return (f"{m.id}\t{m.agent_id}\t{m.owner_id}\t{m.scope_type.value}:{m.scope_id}\t{m.category.value}\t"
            f"{m.key} = {m.value}{state}")


def cmd_events_verify(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    report = memory.verify(expect_head=args.expect_head)
    out.emit(report, lambda r: [f"ok: {r.events} events, chain and projections verified"
                                + (f" ({r.redacted} redacted)" if r.redacted else "")] if r.ok else
             [f"FAILED at event {r.first_bad_position}: {r.problem}" if r.first_bad_position is not None
              else f"FAILED: {r.problem}"])
    if not report.ok:
        sys.stderr.write(f"fermix: error: verification failed: {report.problem}\n")
        return EXIT_ERROR
    return EXIT_OK


def cmd_events_head(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    head = memory.head()
    out.emit({"position": head.position, "hash": head.hash}, lambda h: [f"{h['position']}:{h['hash']}"])
    return EXIT_OK


def cmd_events_replay(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    from fermix_memory.adapters.sqlite import audit

    result = audit.replay_into(memory.app.store.path, Path(args.into), Progress("replay", sys.stderr))
    out.emit(result, lambda r: [f"replayed {r['events']} events into {r['target']}",
                                "projections identical to the live database" if r["identical"] else
                                f"DIFFERENT tables: {', '.join(r['differing_tables'])}"])
    return EXIT_OK if result["identical"] else EXIT_ERROR


def cmd_events_log(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    from fermix_memory.adapters.sqlite import audit

    items = []
    for entry in audit.log_entries(memory.app.store.reader(), after=args.after, kind=args.kind):
        items.append({"position": entry.position, "stream": entry.stream, "version": entry.version,
                      "kind": entry.kind, "recorded_at": entry.recorded_at, "redacted": entry.event is None,
                      "payload_sha256": entry.payload_sha256,
                      "event": None if entry.event is None else jsonable(entry.event)})
        if len(items) >= args.limit:
            break
    out.emit(items, lambda rows: [f"{r['position']}\t{r['kind']}\t{r['stream']}\t" + (
        "[redacted]" if r["redacted"] else json.dumps(r["event"], ensure_ascii=False)[:160]) for r in rows])
    return EXIT_OK


def cmd_history_import(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    path = Path(args.file)
    try:
        with path.open(encoding="utf-8") as fh:
            lines = fh.readlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    service = memory.app.history
    events = service.parse_jsonl(lines, Progress("checking", sys.stderr))
    ids = service.import_events(events)
    out.emit({"imported": len(ids), "first_id": ids[0] if ids else None, "last_id": ids[-1] if ids else None},
             lambda r: [f"imported {r['imported']} messages from {path}"])
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
        out.emit({"exported": count, "file": str(target)}, lambda r: [f"exported {r['exported']} messages"])
    else:
        for line in lines:
            out.out.write(line + "\n")
    return EXIT_OK


def cmd_memory_list(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    rows = memory.memories(agent_id=args.agent, owner_id=args.owner, include_archived=not args.active)
    out.emit(rows, lambda rs: [_memory_line(m) for m in rs] or ["no memory rows"])
    return EXIT_OK


def cmd_memory_show(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    result = memory.explain(args.id)

    def human(r: dict[str, Any]) -> list[str]:
        lines = [_memory_line(r["memory"]), "history:"]
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
            return [f"nothing of owner {r.owner_id!r} was found; nothing erased"]
        lines = [f"forgot owner {r.owner_id!r} with {agent}: {n} events redacted, their rows deleted"
                 for agent, n in sorted(r.erased_events.items())]
        lines.append(f"memory.db rewritten: {r.bytes_before:,} -> {r.bytes_after:,} bytes")
        return lines

    out.emit(report, human)
    if not report.wal_truncated:
        sys.stderr.write("fermix: error: another process holds a read open, so the WAL still has old pages;"
                         " run forget again once it has closed\n")
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


def _revision_line(r: Any) -> str:
    return f"{r.name}\t{r.agent_id}/{r.owner_id}\trev {r.revision}\t{r.created_at.isoformat()}\t{r.reason}"


def cmd_resource_list(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    rows = memory.resources(agent_id=args.agent, owner_id=args.owner)
    out.emit([{k: v for k, v in jsonable(r).items() if k != "content"} for r in rows] if out.as_json else rows,
             lambda rs: [_revision_line(r) for r in rs] or ["no resources"])
    return EXIT_OK


def cmd_resource_history(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    agent, owner = _resource_owner(memory, args)
    rows = memory.resource_history(args.name, agent_id=agent, owner_id=owner, limit=args.limit)
    if not rows:
        raise UsageError(f"{args.name} of {agent}/{owner} has no revisions")
    out.emit([{k: v for k, v in jsonable(r).items() if k != "content"} for r in rows] if out.as_json else rows,
             lambda rs: [_revision_line(r) for r in rs])
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
    return EXIT_ERROR if any(r.status == "failed" for r in results) else EXIT_OK


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
    from fermix_memory.adapters.config_toml import render_default_config

    path = _config_path(args)
    if path.exists():
        raise UsageError(f"{path} already exists; edit it, or use 'fermix setup review-interval'")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_default_config(), encoding="utf-8")
    out.emit({"file": str(path)}, lambda r: [f"wrote {r['file']} (every knob at its default)"])
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
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hours") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("hours must be 0 (off) or more")
    return value


# --- parser -----------------------------------------------------------------------------------------


def _common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    default: Any = None if top else argparse.SUPPRESS
    parser.add_argument("--home", default=default, help="memory home folder (default $FERMIX_HOME or ~/.fermix)")
    parser.add_argument("--json", action="store_true", default=False if top else argparse.SUPPRESS,
                        help="print one JSON document on stdout")


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fermix", description="Admin and audit tool of fermix-memory.")
    _common(parser, top=True)
    groups = parser.add_subparsers(dest="group", required=True,
                                   metavar="{demo,events,forget,history,memory,resource,setup}")

    def command(sub: Any, name: str, func: Any, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_text)
        _common(p, top=False)
        p.set_defaults(func=func)
        return p

    command(groups, "demo", cmd_demo, "run the whole loop on the sample conversation shipped with the package")

    events = groups.add_parser("events", help="the event log: verify, replay, log").add_subparsers(
        dest="command", required=True)
    p = command(events, "verify", cmd_events_verify, "check the hash chain and the projections")
    p.add_argument("--expect-head", metavar="POSITION:HASH",
                   help="a head printed earlier by 'events head': the log must still hold it")
    command(events, "head", cmd_events_head, "print the log's last POSITION:HASH, to keep elsewhere")
    p = command(events, "replay", cmd_events_replay, "rebuild every projection from the log into a new folder")
    p.add_argument("--into", required=True, help="folder for the rebuilt memory.db (must not hold one)")
    p = command(events, "log", cmd_events_log, "print events in log order")
    p.add_argument("--after", type=_position, default=0, help="only events after this position")
    p.add_argument("--limit", type=_positive, default=100)
    p.add_argument("--kind", help="only events of this kind, e.g. memory.added")

    p = command(groups, "forget", cmd_forget, "erase everything an owner left (messages, facts, files, jobs)")
    p.add_argument("owner", help="the owner id to forget")
    p.add_argument("--agent", help="only what they left with this agent (default: every agent)")
    p.add_argument("--reason", help="kept in the record of the erasure (no content of the owner's)")
    p.add_argument("--yes", action="store_true", help="required: the erasure cannot be undone")

    history = groups.add_parser("history", help="conversation history: import, export").add_subparsers(
        dest="command", required=True)
    p = command(history, "import", cmd_history_import, "import messages from a JSON Lines file (all or nothing)")
    p.add_argument("file")
    p = command(history, "export", cmd_history_export, "export messages as JSON Lines")
    p.add_argument("--agent")
    p.add_argument("--output", "-o", help="file to write (default stdout)")

    mem = groups.add_parser("memory", help="memory rows: list, show, search, review, restore").add_subparsers(
        dest="command", required=True)
    p = command(mem, "list", cmd_memory_list, "list memory rows")
    p.add_argument("--agent")
    p.add_argument("--owner")
    p.add_argument("--active", action="store_true", help="leave out archived rows")
    p = command(mem, "show", cmd_memory_show, "a row and the events and messages behind it")
    p.add_argument("id", type=_id)
    p = command(mem, "search", cmd_memory_search, "full-text search as a reader would")
    p.add_argument("query")
    p.add_argument("--agent", required=True)
    p.add_argument("--owner", required=True)
    p.add_argument("--conversation", help="CHANNEL:CHAT_ID[:THREAD]")
    p.add_argument("--scope", choices=("current", "owner", "all"), default="current")
    p.add_argument("--source", choices=("memories", "history", "all"), default="memories")
    p.add_argument("--limit", type=_positive, default=10)
    p = command(mem, "review", cmd_memory_review, "review conversations with new messages now")
    p.add_argument("--now", action="store_true", help="past the interval and back-off gates (required)")
    p.add_argument("--conversation", help="CHANNEL:CHAT_ID[:THREAD]")
    p.add_argument("--agent")
    p.add_argument("--owner")
    p = command(mem, "restore", cmd_memory_restore, "un-archive a memory row and rebuild the prompt files")
    p.add_argument("id", type=_id)

    setup = groups.add_parser("setup", help="the config file: init, show, review-interval").add_subparsers(
        dest="command", required=True)
    command(setup, "init", cmd_setup_init, "write a config.toml with every knob at its default")
    command(setup, "show", cmd_setup_show, "the settings in effect")
    p = command(setup, "review-interval", cmd_setup_review_interval,
                "set the background review interval in hours (0 disables it; --now still works)")
    p.add_argument("hours", type=_hours)

    res = groups.add_parser("resource", help="versioned prompt files: list, history, show, diff, rollback")
    res_cmds = res.add_subparsers(dest="command", required=True)

    def resource_command(name: str, func: Any, help_text: str) -> argparse.ArgumentParser:
        p = command(res_cmds, name, func, help_text)
        p.add_argument("--agent", help="agent id (needed when several agents have prompt files)")
        p.add_argument("--owner", help="owner id (needed when several owners have prompt files)")
        return p

    resource_command("list", cmd_resource_list, "the current revision of every resource")
    names = ("user_md", "memory_md")
    p = resource_command("history", cmd_resource_history, "revisions of a resource, newest first")
    p.add_argument("name", choices=names)
    p.add_argument("--limit", type=_positive, default=20)
    p = resource_command("show", cmd_resource_show, "the content of one revision")
    p.add_argument("name", choices=names)
    p.add_argument("rev", type=_id)
    p = resource_command("diff", cmd_resource_diff, "unified diff between two revisions")
    p.add_argument("name", choices=names)
    p.add_argument("a", type=_id)
    p.add_argument("b", type=_id)
    p = resource_command("rollback", cmd_resource_rollback, "restore a revision's content as a new revision")
    p.add_argument("name", choices=names)
    p.add_argument("rev", type=_id)
    return parser


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = Output(bool(args.json), stdout or sys.stdout)
    try:
        if args.group == "setup":
            return int(args.func(args, out))
        with MemorySystem.open(args.home) as memory:
            return int(args.func(memory, args, out))
    except FermixError as exc:
        sys.stderr.write(f"fermix: error: {exc}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("fermix: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # a bug: still one line, and a distinct exit code
        sys.stderr.write(f"fermix: internal error: {type(exc).__name__}: {exc}\n")
        return EXIT_INTERNAL


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
