"""What ``fermix forget OWNER --dry-run`` and ``forget --memory ID --dry-run`` print: what would
go, changing nothing; and what every forget prints of the file's rewrite."""

from __future__ import annotations

from collections.abc import Sequence

from fermix_memory.application.forget import ConversationForgetReport, ForgetReport, MemoryForgetReport
from fermix_memory.domain.events import RedactedRevision


def _revisions(revisions: Sequence[RedactedRevision]) -> str:
    return ", ".join(f"{r.name} rev {r.revision} of {r.owner_id}" for r in revisions) or "none"


def owner_lines(report: ForgetReport, agent: str | None) -> list[str]:
    """Per agent: the events, messages (and their conversations), memory rows and revisions."""
    if not report.erased_events:
        with_agent = f" with agent {agent!r}" if agent else ""
        return [f"nothing of owner {report.owner_id!r} was found{with_agent}; nothing would be erased"]
    lines = []
    for name, c in sorted(report.content.items()):
        rows = ", ".join(str(m) for m in c.memory_ids) or "none"
        lines.append(f"would erase owner {report.owner_id!r} with {name}: {c.events} events; {len(c.messages)}"
                     f" messages in {', '.join(c.conversations) or 'no conversation'}; memory rows: {rows};"
                     f" prompt-file revisions: {_revisions(c.revisions)}")
    return lines


def memory_lines(report: MemoryForgetReport) -> list[str]:
    """The row, the events and the prompt-file revisions that would go."""
    return [f"would erase memory {report.memory_id} of {report.agent_id}/{report.owner_id}:"
            f" {report.erased_events} events; prompt-file revisions: {_revisions(report.revisions)}"]


def rewritten(report: ForgetReport | MemoryForgetReport | ConversationForgetReport) -> str:
    """The line on the file's rewrite: done, or left pending (the error that follows says why)."""
    if not report.rewrite_pending:
        return f"{report.store} rewritten: {report.bytes_before:,} -> {report.bytes_after:,} bytes"
    return f"{report.store}: the rewrite is pending, the erased bytes are still in it (see below)"
