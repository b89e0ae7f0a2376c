"""``fermix memory`` (list, show, set, archive, restore, review; search and embed: ``search``) and
``fermix forget``."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fermix_memory.application.errors import ModelError, StorageBusy
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.values import ConversationKey, ScopeType, normalise_key
from fermix_memory.entrypoints.cli.erased_lines import emit_listed, erased_since
from fermix_memory.entrypoints.cli.output import (
    EXIT_ERROR,
    EXIT_OK,
    Output,
    UsageError,
    held_back_warnings,
    one_line,
    plural,
    report_error,
    short,
)

if TYPE_CHECKING:  # the writer side is imported by the commands that write, when they run (ADR-0063)
    from fermix_memory.application.memory_writes import OperationOutcome
    from fermix_memory.application.reviewer import ReviewResult
    from fermix_memory.entrypoints.api.memory_system import MemorySystem
    from fermix_memory.entrypoints.reader import MemoryReader

MEMORY_HEADER = "ID\tAGENT\tOWNER\tSCOPE\tCATEGORY\tKEY = VALUE"
BY = "cli"  # who the provenance of an operator's write from this command names


def scope_text(scope_type: ScopeType, scope_id: str) -> str:
    """A row's scope as an operator writes it: ``owner:alice``, ``conversation:telegram:-999``
    (a conversation as ``CHANNEL:CHAT_ID[:THREAD]``, never its stored, percent-encoded id)."""
    if scope_type is ScopeType.CONVERSATION:
        try:
            return f"{scope_type.value}:{ConversationKey.from_scope_id(scope_id)}"
        except DomainError:
            pass  # not a key this version can read: shown as stored
    return f"{scope_type.value}:{scope_id}"


def _memory_line(m: Any) -> str:
    state = f" (archived: {m.archive_reason or 'no reason'})" if m.archived_at else ""
    if m.expires_at is not None:  # its own expiry (ADR-0082)
        state += f" (expires {m.expires_at.isoformat()})"
    cells = (str(m.id), m.agent_id, m.owner_id, scope_text(m.scope_type, m.scope_id), m.category.value,
             f"{m.key} = {m.value}{state}")
    return "\t".join(one_line(c) for c in cells)


def cmd_memory_list(memory: MemoryReader, args: argparse.Namespace, out: Output) -> int:
    rows = memory.memories(agent_id=args.agent, owner_id=args.owner, include_archived=not args.active, as_of=args.as_of)
    emit_listed(out, rows, erased_since(memory, args), MEMORY_HEADER, _memory_line)  # erased rows: ADR-0083
    return EXIT_OK


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.casefold()) if len(w) > 2}


def _holding(value: str, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages that hold most of ``value``'s words (at least half of them): where, in a
    review's batch, the value was said."""
    wanted = _words(value)
    if not wanted or not messages:
        return []
    scored = [(len(wanted & _words(m["content"])) / len(wanted), m) for m in messages]
    best = max(score for score, _ in scored)
    return [m for score, m in scored if score == best] if best >= 0.5 else []


def _source_lines(event: dict[str, Any]) -> list[str]:
    """Where a change came from: the messages its event names; for a review recorded without
    them, which messages it read and the one(s) of them holding the value (every message it
    read is in ``--json``)."""
    read = event.get("source_messages", [])
    shown, lead = read, "from"
    lines = []
    by = event.get("by", {})
    if by.get("dropped_source_messages"):
        lines.append(f"      {plural(by['dropped_source_messages'], 'named source')} left out: not messages "
                     "the writer was shown")
    if by.get("source_type") == "reviewer" and len(read) > 1 and "source_message_ids" not in by:
        # A review records the batch it read, not which message of it each fact came from.
        first, last = read[0]["id"], read[-1]["id"]
        lines.append(f"      the review read {plural(len(read), 'user message')}, #{first} to #{last}")
        shown, lead = _holding(str(event.get("value") or ""), read), "the value's words in"
    return lines + [f"      {lead} #{m['id']} ({m['conversation']}, {m['sender']}): {one_line(m['content'][:120])}"
                    for m in shown]


def cmd_memory_show(memory: MemoryReader, args: argparse.Namespace, out: Output) -> int:
    from fermix_memory.adapters.sql.codec import CONVERTER

    result = memory.explain(args.id)

    def human(r: dict[str, Any]) -> list[str]:
        lines = [_memory_line(CONVERTER.structure(r["memory"], Memory)), "history:"]
        for e in r["events"]:
            by = e.get("by", {})
            lines.append(f"  {e['at']}  #{e['position']} {e['kind']}  value={e.get('value', '')!r}  "
                         f"by={by.get('source_type', '')}/{by.get('trust', '')}"
                         f"{'  reason=' + e['reason'] if e.get('reason') else ''}"
                         f"{'  expires_at=' + e['expires_at'] if e.get('expires_at') else ''}")
            lines += _source_lines(e)
        return lines

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
    if args.memory is not None and args.conversation is not None:
        raise UsageError("forget erases one thing at a time: give --memory or --conversation, not both")
    if args.memory is not None:
        return _forget_memory(memory, args, out)
    if args.conversation is not None:
        return _forget_conversation(memory, args, out)
    if args.owner is None:
        raise UsageError("forget needs an owner id, --memory ID for one memory row, or --conversation CH:ID --agent A")
    if not args.yes and not args.dry_run:
        where = f"agent {args.agent!r}" if args.agent else "every agent"
        raise UsageError(f"forget erases everything of owner {args.owner!r} with {where}, for good;"
                         " add --yes to go ahead (or --dry-run to see what would go)")
    report = memory.forget_owner(args.owner, agent_id=args.agent, dry_run=args.dry_run, by="cli",
                                 reason=args.reason or "")

    def human(r: Any) -> list[str]:
        from fermix_memory.entrypoints.cli import forget_preview

        if r.dry_run:
            return forget_preview.owner_lines(r, args.agent)
        if not r.erased_events:
            with_agent = f" with agent {args.agent!r}" if args.agent else ""
            return [f"nothing of owner {r.owner_id!r} was found{with_agent}; nothing to erase, nothing erased"]
        lines = [f"forgot owner {r.owner_id!r} with {agent}: {n} events redacted, their rows deleted"
                 for agent, n in sorted(r.erased_events.items())]
        lines.append(forget_preview.rewritten(r))
        return lines

    out.emit(report, human)
    return _scrubbed(report, out, memory, args)


def _forget_memory(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    if args.owner is not None or args.agent is not None:
        raise UsageError("forget --memory ID erases one row: give no owner and no --agent with it")
    if not args.yes and not args.dry_run:
        raise UsageError(f"forget --memory erases memory {args.memory} and every record of its value, for good;"
                         " add --yes to go ahead (or --dry-run to see what would go)")
    report = memory.forget_memory(args.memory, dry_run=args.dry_run, by="cli", reason=args.reason or "")

    def human(r: Any) -> list[str]:
        from fermix_memory.entrypoints.cli import forget_preview

        if r.dry_run:
            return forget_preview.memory_lines(r)
        if not r.erased_events:
            return [f"memory {r.memory_id} was erased already; the rewrite it left pending is done"]
        return [f"forgot memory {r.memory_id} of {r.agent_id}/{r.owner_id}: {r.erased_events} events redacted"
                f" ({r.redacted_revisions} prompt-file revisions), the row deleted, the prompt files re-rendered",
                forget_preview.rewritten(r)]

    out.emit(report, human)
    return _scrubbed(report, out, memory, args)


def _forget_conversation(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    if args.owner is not None or args.agent is None:
        raise UsageError("forget --conversation CH:ID erases one conversation of one agent: give --agent, no owner")
    conversation = ConversationKey.parse(args.conversation)
    if not args.yes and not args.dry_run:
        raise UsageError(f"forget --conversation erases {conversation} of agent {args.agent!r} and the facts learnt"
                         " only from it, for good; add --yes to go ahead (or --dry-run to see what would go)")
    report = memory.forget_conversation(args.agent, conversation, dry_run=args.dry_run, by="cli",
                                        reason=args.reason or "")

    def human(r: Any) -> list[str]:
        if not r.erased_events:
            return [f"nothing of {r.conversation} with agent {r.agent_id!r} was found; nothing to erase"]
        verb = "would erase" if r.dry_run else "erased"
        rows = ", ".join(str(m) for m in r.memory_ids) or "none"
        lines = [f"{verb} {r.conversation} of {r.agent_id}: {r.messages} messages, {r.checkpoints} checkpoints,"
                 f" {r.review_records} review records, memory rows learnt only from it: {rows}"
                 f" ({r.erased_events} events)"]
        from fermix_memory.entrypoints.cli import forget_preview
        return lines if r.dry_run else [*lines, forget_preview.rewritten(r)]

    out.emit(report, human)
    return _scrubbed(report, out, memory, args)


def _scrubbed(report: Any, out: Output, memory: MemorySystem, args: argparse.Namespace) -> int:
    """An erasure left unfinished is an error (a later run finishes it); one finished with erased
    bytes beyond the store's reach (a PostgreSQL server's WAL) is a warning on stderr."""
    if args.receipt and report.receipt is not None:  # its signed receipt too (ADR-0079)
        from fermix_memory.entrypoints.cli.events import save_receipt
        save_receipt(memory.receipt(report.receipt), args.receipt)
    if not report.finished:
        report_error(out.as_json, StorageBusy("; ".join(report.remains) or f"{report.store} still holds erased bytes;"
                                              " run forget again"))
        return EXIT_ERROR
    for line in report.remains:
        sys.stderr.write(f"fermix: warning: {one_line(line)}\n")
    return EXIT_OK


def _waiting(memory: MemorySystem, agent_id: str, owner_id: str, conversation: ConversationKey) -> int:
    """How many of the owner's user messages in the conversation no review has covered yet."""
    after = memory.reviewed_up_to(agent_id=agent_id, owner_id=owner_id, conversation=conversation)
    return sum(1 for m in memory.messages(agent_id, conversation, after_id=after)
               if m.owner_id == owner_id and m.role.value == "user")


def _providers_tried(memory: MemorySystem, agent_id: str, after: int,
                     errors: Sequence[str]) -> list[dict[str, Any]]:
    """One entry per provider the failed review tried, in order (from the ``model.call_traced``
    events it left; a repair turn is the same provider again), with that provider's error."""
    from fermix_memory.application.reviewer_prompt import REVIEWER_AGENT_TAG

    tried: list[dict[str, Any]] = []
    for entry in memory.log_entries(after=after, kind="model.call_traced"):
        trace = entry.event
        if trace is None or trace.agent != REVIEWER_AGENT_TAG or trace.agent_id != agent_id:
            continue  # another process's model call
        if tried and tried[-1]["provider"] == trace.provider:
            tried[-1]["attempts"] += trace.attempts
            tried[-1]["outcome"] = trace.outcome
            continue
        tried.append({"provider": trace.provider, "model": trace.model, "outcome": trace.outcome,
                      "attempts": trace.attempts, "error": ""})
    if len(tried) == len(errors):
        for item, error in zip(tried, errors, strict=True):
            item["error"] = error
    elif errors:  # not a provider's failure (or no trace of it): the error alone
        tried = [{"provider": "", "model": "", "outcome": "error", "attempts": 0, "error": e} for e in errors]
    return tried


def _review_conversation(memory: MemorySystem, agent_id: str, owner_id: str, conversation: ConversationKey,
                         max_rounds: int) -> dict[str, Any]:
    """Review one conversation batch after batch until it is caught up, a review does not
    complete, or ``max_rounds`` reviews ran; what it did, summed, and what still waits."""
    from fermix_memory.application.reviewer import ReviewResult

    rounds: list[ReviewResult] = []
    providers: list[dict[str, Any]] = []
    while len(rounds) < max_rounds:
        before = memory.head().position
        found = memory.review_now(agent_id=agent_id, owner_id=owner_id, conversation=conversation)
        if not found:
            break
        rounds.append(found[0])
        if found[0].status == "failed":
            providers = _providers_tried(memory, agent_id, before, found[0].errors)
        if found[0].status != "completed" or found[0].messages_reviewed == 0:
            break
    last = rounds[-1] if rounds else ReviewResult(agent_id=agent_id, owner_id=owner_id, conversation=conversation,
                                                  status="skipped", reason="no_new_messages")
    return {
        "agent_id": agent_id, "owner_id": owner_id, "conversation": conversation, "status": last.status,
        "reason": last.reason, "rounds": len(rounds),
        "messages_reviewed": sum(r.messages_reviewed for r in rounds), "applied": sum(r.applied for r in rounds),
        "refused": sum(r.refused for r in rounds), "outcomes": [o for r in rounds for o in r.outcomes],
        "waiting": _waiting(memory, agent_id, owner_id, conversation), "providers": providers,
        "retry_after": last.retry_after,
    }


# "ProviderUnavailable: provider 'main' (https://...): " before a provider's error: the line names it already.
_PROVIDER_PREFIX = re.compile(r"^\w+: provider '[^']*'(?: \([^)]*\))?: ")


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _review_lines(r: dict[str, Any], max_rounds: int, interval_hours: float) -> list[str]:
    where = f"{r['agent_id']}/{r['owner_id']} {r['conversation']}"
    done = (f"{plural(r['messages_reviewed'], 'message')} in {plural(r['rounds'], 'review')},"
            f" {r['applied']} applied, {r['refused']} refused")
    if r["status"] == "failed":
        next_review = (f"a background review tries again at the first turn after {_when(r['retry_after'])}"
                       if interval_hours > 0 else "background reviews are off (review_interval_hours = 0)")
        lines = [f"{where}: failed ({done} before it)" if r["rounds"] > 1 else f"{where}: failed"]
        for p in r["providers"]:
            who = f"provider {p['provider']!r} ({p['model']})" if p["provider"] else "review"
            tries = f", {plural(p['attempts'], 'attempt')}" if p["attempts"] > 1 else ""
            lines.append(f"  {who}: {p['outcome']}{tries}: {short(_PROVIDER_PREFIX.sub('', p['error']))}")
        lines.append(f"  the {plural(r['waiting'], 'message')} stay queued; {next_review}, or run"
                     " 'fermix memory review --now' again (details: --verbose)")
        return lines
    if r["status"] == "skipped":
        return [f"{where}: skipped ({r['reason']}); {plural(r['waiting'], 'message')} wait"]
    if r["waiting"]:
        return [f"{where}: {done}; {plural(r['waiting'], 'message')} still wait"
                f" (stopped after --max-rounds {max_rounds}; run it again to go on)"]
    return [f"{where}: caught up: {done}" + (f" ({r['reason']})" if r["reason"] else "")]


def cmd_memory_review(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    if not args.now:
        raise UsageError("background reviews run after turns; use --now to review now")
    only = ConversationKey.parse(args.conversation) if args.conversation is not None else None
    targets = [t for t in memory.awaiting_review(agent_id=args.agent, owner_id=args.owner)
               if only is None or t[2] == only]
    with held_back_warnings(shown=args.verbose):
        results = [_review_conversation(memory, a, o, c, args.max_rounds) for a, o, c in targets]
    interval = memory.settings.memory.review_interval_hours
    out.emit(results, lambda rs: [x for r in rs for x in _review_lines(r, args.max_rounds, interval)]
             or ["no conversation has new messages to review"])
    failed = [r for r in results if r["status"] == "failed"]
    if failed:
        first = failed[0]
        tried = first["providers"]
        why = short(_PROVIDER_PREFIX.sub("", tried[-1]["error"]) if tried else first["reason"], 100)
        if len(tried) > 1:
            why = f"all {len(tried)} providers failed, the last: {why}"
        report_error(out.as_json, ModelError(f"{plural(len(failed), 'review')} failed; the first"
                                             f" ({first['agent_id']}/{first['owner_id']} {first['conversation']}):"
                                             f" {why}"))
        return EXIT_ERROR
    return EXIT_OK


# --- an operator's own writes ------------------------------------------------------------------------


def _one_outcome(memory: MemorySystem, outcome: OperationOutcome, verb: str) -> Memory:
    """The row an operator's write left, or a :class:`UsageError` naming why admission refused it."""
    if outcome.status == "refused":
        raise UsageError(f"refused ({outcome.reason}): {outcome.detail or verb}; nothing was written")
    if outcome.memory_id is None:
        raise UsageError(f"{verb}: nothing to change")
    return memory.memory(outcome.memory_id)


def cmd_memory_set(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    """Add a value, or replace the one the owner has under that key in that scope (the scope
    follows the category, as for every operator write), through admission."""
    before = {m.id: m.value for m in memory.memories(agent_id=args.agent, owner_id=args.owner)}
    op = {"op": "add", "category": args.category, "key": args.key, "value": args.value}
    if args.expires_at is not None:
        op["expires_at"] = args.expires_at
    [outcome] = memory.write_memory(op, agent_id=args.agent, owner_id=args.owner, writer="operator", trust="operator",
                                    source_type=BY, source_id=BY, reason=args.reason or "set by the operator")
    if outcome.status == "unchanged":  # the same value restated: the row as it is
        key = normalise_key(args.key)
        rows = [m for m in memory.memories(agent_id=args.agent, owner_id=args.owner, include_archived=False)
                if m.key == key and m.category.value == args.category]
        out.emit({"status": "unchanged", "memory": rows[0] if rows else None},
                 lambda r: [f"unchanged: {_memory_line(r['memory'])}" if r["memory"] else "unchanged"])
        return EXIT_OK
    row = _one_outcome(memory, outcome, "set")
    previous = before.get(row.id) if outcome.status == "replaced" else None
    out.emit({"status": outcome.status, "previous_value": previous, "memory": row},
             lambda r: [f"{r['status']}: {_memory_line(r['memory'])}"
                        + (f" (was: {one_line(previous)})" if previous is not None else "")])
    return EXIT_OK


def cmd_memory_archive(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    """Archive a row (kept, restorable, out of the prompt files), through admission."""
    row = memory.memory(args.id)
    if row.archived_at is not None:  # nothing to do: say so, and write nothing
        out.emit({"status": "already_archived", "memory": row}, lambda r: [f"already archived: {_memory_line(row)}"])
        return EXIT_OK
    scoped: dict[str, Any] = {}
    if row.scope_type is ScopeType.CONVERSATION:
        scoped["conversation"] = ConversationKey.from_scope_id(row.scope_id)
    elif row.scope_type is ScopeType.JOB:
        scoped["job_source_id"] = row.scope_id
    reason = args.reason or "archived by the operator"
    [outcome] = memory.write_memory({"op": "archive", "id": row.id, "reason": reason},
                                    agent_id=row.agent_id, owner_id=row.owner_id, writer="operator",
                                    trust="operator", source_type=BY, source_id=BY, reason=args.reason or "",
                                    **scoped)
    archived = _one_outcome(memory, outcome, "archive")
    out.emit({"status": "archived", "memory": archived}, lambda r: [f"archived: {_memory_line(archived)}"])
    return EXIT_OK
