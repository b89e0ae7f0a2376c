"""Changes of a memory row (replaced, archived, restored), and what they can do to the prompt
files: whether any file showed or shows the row, whether it touched one of the agent's standing
rules. Asked inside the write that recorded the change (``prompt_files.PromptFiles.record_in``)."""

from __future__ import annotations

import attrs

from fermix_memory.application.store_ports import WriteTransaction
from fermix_memory.domain import events as ev
from fermix_memory.domain.scopes import is_agent_rule
from fermix_memory.domain.values import Category, Trust

ROW_CHANGES = (ev.MemoryReplaced, ev.MemoryArchived, ev.MemoryRestored)
RowChange = ev.MemoryReplaced | ev.MemoryArchived | ev.MemoryRestored


def shown_by_no_file(tx: WriteTransaction, e: RowChange) -> bool:
    """Whether the row this change touched had no promote target before it (as the transaction
    first read it, before changing it) and has none after: no file showed it or shows it. A row
    the transaction did not read first counts as shown (rendered, to be safe)."""
    before = tx.first_read(e.memory_id)
    if before is None or before.promote_target is not None:
        return False
    return not isinstance(e, ev.MemoryReplaced) or e.promote_target is None


def changes_a_rule(tx: WriteTransaction, e: RowChange) -> bool:
    """Did this change touch one of the agent's standing rules? Only an operator-trusted write
    can (admission), and a replace never turns a row into or out of a directive."""
    if e.provenance.trust is not Trust.OPERATOR:
        return False
    if isinstance(e, ev.MemoryReplaced) and e.category != Category.DIRECTIVE:
        return False
    row = tx.by_id(e.memory_id)
    return row is not None and is_agent_rule(attrs.evolve(row, archived_at=None))
