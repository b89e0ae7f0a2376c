"""``fermix history``: import messages from JSON Lines (all or nothing), compact a conversation,
export them."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from fermix_memory.application.errors import ModelError
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey
from fermix_memory.entrypoints.cli.output import (
    EXIT_ERROR,
    EXIT_OK,
    Output,
    UsageError,
    held_back_warnings,
    jsonable,
    one_line,
    plural,
    progress_bars,
    report_error,
    short,
)

if TYPE_CHECKING:  # imported by the commands that open a whole memory, when they run (ADR-0063)
    from fermix_memory.entrypoints.api.memory_system import MemorySystem
    from fermix_memory.entrypoints.reader import MemoryReader


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


def cmd_history_import(args: argparse.Namespace, out: Output) -> int:
    """Import a file into the home, creating the home only if every line of the file is good."""
    from fermix_memory.application.history import parse_history
    from fermix_memory.entrypoints.api.memory_system import MemorySystem, open_app
    from fermix_memory.entrypoints.home import DB_NAME, resolve_home

    lines = _read_lines(args.file)
    home = resolve_home(args.home)
    with progress_bars("checking", "importing") as (checking, writing):
        if (home / DB_NAME).exists():
            with MemorySystem.open(home) as memory:
                ids = memory.import_history(lines, checking=checking, importing=writing)
        else:  # a failed import creates nothing: the file is checked before the home is made, once
            events = parse_history(lines, datetime.now(UTC), checking)
            # The checked events go to the use case itself: the public API takes lines only.
            app = open_app(home)
            with MemorySystem(app):
                ids = app.history.import_events(events, writing)
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


def cmd_history_compact(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    """The operator's ``/compact``: the same use case as the chat command."""
    conversation = ConversationKey.parse(args.conversation)
    if not memory.messages(args.agent, conversation, limit=1):
        raise UsageError(f"agent {args.agent!r} has no messages in {conversation}; nothing to compact")
    with held_back_warnings(shown=False):
        result = memory.compact(agent_id=args.agent, conversation=conversation, context_window=args.context_window)
    where = f"{args.agent} {conversation}"

    def human(_: object) -> list[str]:
        if result.status == "compacted":
            return [f"{where}: compacted: {plural(result.replaced, 'message')} summarised into checkpoint"
                    f" #{result.checkpoint_message_id}; window {result.tokens_before:,} -> {result.tokens_after:,}"
                    " tokens (the messages stay in the log and in search)"]
        if result.reason == "nothing_to_compact":
            return [f"{where}: nothing to compact yet (the window holds {result.tokens_before:,} tokens)"]
        return [f"{where}: {result.status} ({short(result.reason)}); older history is unchanged"]

    out.emit({"agent_id": args.agent, "conversation": conversation, **jsonable(result)}, human)
    if result.status == "failed":
        report_error(out.as_json, ModelError(f"compaction of {where} failed: {short(result.reason)}"))
        return EXIT_ERROR
    return EXIT_OK



def _message_line(m: Message) -> str:
    return one_line(f"#{m.id} {m.created_at:%Y-%m-%d %H:%M:%S} {m.role} {m.sender}: {m.content}")


def cmd_history_show(memory: MemoryReader, args: argparse.Namespace, out: Output) -> int:
    """A page of the conversation, with the ids that page on (``--before`` older, ``--after`` newer)."""
    conversation = ConversationKey.parse(args.conversation)
    given = [flag for flag, v in (("--before", args.before), ("--after", args.after), ("--page", args.page))
             if v is not None]
    if len(given) > 1:
        raise UsageError(f"give one of --before, --after and --page, not {' and '.join(given)}")
    where = {"agent_id": args.agent, "conversation": conversation, "owner_id": args.owner}
    page = memory.message_page(**where, limit=args.limit, before_id=args.before, after_id=args.after,
                               page=args.page or 1)
    # Whether there is more on either side: one message looked for past each end of the page.
    older = page[0].id if page and memory.message_page(**where, limit=1, before_id=page[0].id) else None
    newer = page[-1].id if page and memory.message_page(**where, limit=1, after_id=page[-1].id) else None
    shown = f"fermix history show {conversation} --agent {args.agent}" + (f" --owner {args.owner}" if args.owner
                                                                          else "")

    def human(_: object) -> list[str]:
        return ([_message_line(m) for m in page] or [f"{args.agent} {conversation}: no messages here"]) + \
            ([f"older: {shown} --before {older}"] if older is not None else []) + \
            ([f"newer: {shown} --after {newer}"] if newer is not None else [])

    out.emit({"agent_id": args.agent, "conversation": str(conversation), "messages": page,
              "older_before": older, "newer_after": newer}, human)
    return EXIT_OK
