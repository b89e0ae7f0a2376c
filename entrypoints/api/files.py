"""The embedding API, part three: prompt files and resources, erasure, audit."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from fermix_memory.adapters.home_keys import keys_folder
from fermix_memory.adapters.prompt_files_fs import PromptFileFolder
from fermix_memory.adapters.sql import audit
from fermix_memory.adapters.sql.codec import decode_payload
from fermix_memory.adapters.sql.head import Head, checked_head
from fermix_memory.application.as_of import check_moment, revision_as_of
from fermix_memory.application.commands import Forget, ForgetMemory
from fermix_memory.application.errors import NotFound
from fermix_memory.application.forget import ConversationForgetReport, ForgetReport, MemoryForgetReport
from fermix_memory.application.host_input import check_flag, row_id
from fermix_memory.application.log_transfer import ImportReport
from fermix_memory.application.message_input import conversation_key
from fermix_memory.application.prompt_files import check_resource_name, unified_diff
from fermix_memory.application.query_ports import ResourceRevision
from fermix_memory.application.resource_rollback import RollbackReport
from fermix_memory.application.sealed_export import sealed_export_lines
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.domain.events import ERASURE_RECORDS
from fermix_memory.domain.log_chain import MAX_CHAINS
from fermix_memory.domain.values import check_identifier, check_int
from fermix_memory.entrypoints.api.base import ApiBase, check_owner, folder, optional_id
from fermix_memory.entrypoints.api.export_keys import home_keyring, opening
from fermix_memory.entrypoints.api.held_lines import HeldLines


class FilesApi(ApiBase):
    """Prompt files and their revisions, erasure and the audit of the log."""

    @property
    def home(self) -> Path:
        return self._app.home

    def prompt_file(self, agent_id: str, owner_id: str, name: str = "user_md") -> Path:
        """Where ``USER.md`` (``user_md``) or ``MEMORY.md`` (``memory_md``) of an owner lives."""
        check_owner(agent_id, owner_id)
        return PromptFileFolder(self.home).path(agent_id, owner_id, check_resource_name(name))

    def rebuild_prompt_files(self, agent_id: str, owner_id: str) -> list[str]:
        """Re-render an owner's files from the rows now; returns the names that changed."""
        self._check_open()
        check_owner(agent_id, owner_id)
        return self._app.prompt_files.rebuild(agent_id, owner_id, check_files=True)

    def resources(self, *, agent_id: str | None = None, owner_id: str | None = None) -> list[ResourceRevision]:
        """The current revision of every versioned resource."""
        self._check_open()
        return self._app.queries.resources(agent_id=optional_id(agent_id, "agent_id"),
                                           owner_id=optional_id(owner_id, "owner_id"))

    def resource_history(self, name: str, *, agent_id: str, owner_id: str,
                         limit: int | None = None) -> list[ResourceRevision]:
        """Revisions of a resource, newest first."""
        self._check_open()
        check_owner(agent_id, owner_id)
        if limit is not None:
            check_int(limit, "limit", minimum=0)
        return self._app.queries.resource_history(agent_id, owner_id, check_resource_name(name), limit)

    def resource_revision(self, name: str, revision: int, *, agent_id: str, owner_id: str) -> ResourceRevision:
        self._check_open()
        check_owner(agent_id, owner_id)
        found = self._app.queries.resource_revision(agent_id, owner_id, check_resource_name(name),
                                                   row_id(revision, "revision"))
        if found is None:
            raise NotFound(f"{name} of {agent_id}/{owner_id} has no revision {revision}")
        return found

    def resource_as_of(self, name: str, as_of: datetime | str, *, agent_id: str, owner_id: str
                       ) -> ResourceRevision | None:
        """The revision of ``user_md`` / ``memory_md`` that was current at the moment ``as_of`` (a
        timezone-aware datetime or ISO 8601 text), from the log (ADR-0033); ``None`` when the
        file had no revision yet (an empty memory). A time without a zone or in the future is
        :class:`InvalidArgument`."""
        self._check_open()
        check_owner(agent_id, owner_id)
        name = check_resource_name(name)
        return revision_as_of(self._app.store, agent_id, owner_id, name, check_moment(as_of, self._app.clock.now()))

    def resource_diff(self, name: str, a: int, b: int, *, agent_id: str, owner_id: str) -> str:
        """A unified diff from revision ``a`` to revision ``b``."""
        return unified_diff(self.resource_revision(name, a, agent_id=agent_id, owner_id=owner_id),
                            self.resource_revision(name, b, agent_id=agent_id, owner_id=owner_id))

    def resource_rollback(self, name: str, revision: int, *, agent_id: str, owner_id: str,
                          by: str = "operator") -> ResourceRevision:
        """Restore revision ``revision``'s content as a new revision and rewrite the file; returns
        the current revision (unchanged when ``revision`` is the current one). The rows are not
        changed: the next rebuild overwrites the file (see :meth:`roll_back`)."""
        report = self.roll_back(name, revision, agent_id=agent_id, owner_id=owner_id, by=by)
        return self.resource_revision(name, report.revision, agent_id=agent_id, owner_id=owner_id)

    def roll_back(self, name: str, revision: int, *, agent_id: str, owner_id: str, rows: bool = False,
                  by: str = "operator") -> RollbackReport:
        """Roll prompt file ``name`` back to revision ``revision`` and say what that did.

        By default its text comes back as a new revision (the rows untouched, so the next rebuild
        renders them again over it). ``rows=True`` restores instead the memory rows that
        revision was rendered from, as operator memory events through admission, and renders the
        file from them: file and rows agree, and rebuilds keep it. Rolling back to what is already
        there (the current revision; rows already those of the revision) records nothing
        (``changed`` is False)."""
        self._check_open()
        check_owner(agent_id, owner_id)
        use = self._app.rollback.rows if rows else self._app.rollback.text
        return use(agent_id, owner_id, check_resource_name(name), row_id(revision, "revision"),
                   by=check_identifier(by, "by"))

    # --- erasure ---------------------------------------------------------------------------------

    def forget_owner(self, owner_id: str, *, agent_id: str | None = None, dry_run: bool = False,
                     by: str = "operator", reason: str = "") -> ForgetReport:
        """Erase everything ``owner_id`` left with ``agent_id`` (every agent when ``None``).

        Their messages, memory rows (archived ones too), reviews, prompt files and revisions,
        memory sources, jobs and job runs are deleted; the payloads of the events that carried
        them are redacted (the hash chain and ``verify`` still hold); an ``owner.forgotten``
        event records who asked, when and how much went, without any content. The database is
        then rewritten so no erased byte stays in ``memory.db`` or its WAL (``wal_truncated``
        is false when another process held a read open: run it again when it has closed).
        Slow on a large database: it rewrites the whole file. The report's ``content`` says, per
        agent, which messages, memory rows and prompt-file revisions went; ``dry_run=True`` only
        reports what would go, changing nothing.
        """
        self._check_open()  # a closed memory says so before anything about the arguments
        return self._app.forgetting.forget(self._command(Forget, dict(
            owner_id=owner_id, agent_id=agent_id, dry_run=dry_run, by=by, reason=reason)))

    def forget_memory(self, memory_id: int, *, dry_run: bool = False, by: str = "operator",
                      reason: str = "") -> MemoryForgetReport:
        """Erase one memory row (archived or not), as :meth:`forget_owner` erases an owner.

        The row is deleted and the payloads of every event that carried any value it had are
        redacted: its add, replaces, archive and restore records, refusals naming it, and the
        prompt-file revisions recorded while it was live (every owner's MEMORY.md when it was a
        standing rule of the agent). A ``memory.forgotten`` event records which row, whose, which
        events, who asked and why, without any content; the prompt files are re-rendered without
        the row and the database is rewritten (``wal_truncated`` as for :meth:`forget_owner`).
        The messages the value was learnt from stay: they are the conversation's. Raises
        :class:`NotFound` for a row that does not exist; forgetting it again finishes a rewrite
        left pending. ``dry_run=True`` only reports what would go (``revisions``), changing nothing.
        """
        self._check_open()  # a closed memory says so before anything about the arguments
        return self._app.forgetting.forget_row(self._command(ForgetMemory, dict(
            memory_id=row_id(memory_id, "memory"), dry_run=dry_run, by=by, reason=reason)))

    def forget_conversation(self, agent_id: str, conversation: Any, *, dry_run: bool = False, by: str = "operator",
                            reason: str = "") -> ConversationForgetReport:
        """Erase one conversation with ``agent_id``, as :meth:`forget_owner` erases an owner: its
        messages and checkpoints, its window and compaction records, the review records of it,
        and the memory rows learnt only from it (scoped to it, or every statement of which came
        from one of its messages; each erased as :meth:`forget_memory` does). A
        ``conversation.forgotten`` event records it without content; the prompt files are
        re-rendered and the database rewritten. ``dry_run=True`` only reports what would go.
        """
        self._check_open()
        check_identifier(agent_id, "agent_id")
        return self._app.forgetting.forget_conversation(agent_id, conversation_key(conversation),
                                                        dry_run=check_flag(dry_run, "dry_run"),
                                                        by=check_identifier(by, "by"), reason=reason)

    # --- audit -----------------------------------------------------------------------------------

    def head(self) -> Head:
        """The log's anchor as a :class:`Head`: its last event's ``(position, hash)`` (``str()``
        gives ``POSITION:HASH``), or for a log of several chains each chain's last position and
        the checkpoint over their heads (``P0,P1,...:CHECKPOINT``, ADR-0031). Keep it elsewhere
        and pass it (or its text) to :meth:`verify` later to prove nothing was cut off."""
        self._check_open()
        return self._app.audit.head()

    def verify(self, progress: audit.Progress | None = None, *,
               expect_head: Head | str | None = None) -> audit.VerifyReport:
        """Check the hash chain, the FTS indexes and that the log replays to the same tables
        (``progress(done, total)`` is called throughout: one count over the index check, the
        chain walk and the replay, that only rises to ``total``); that the log still holds
        ``expect_head`` (a :meth:`head` kept elsewhere, or its ``POSITION:HASH`` text) and this
        home's own last-seen head; and report what opening found wrong (append-only triggers
        missing, a head the log no longer holds). Once the log passes, this home's prompt files
        are checked too: one that an erasure changed (made here, or on another host sharing the
        database) but that still differs from its current revision may show erased text, and
        fails the check. A read-only memory is verified without writing."""
        self._check_open()
        expected = None if expect_head is None else checked_head(expect_head)
        report = self._app.audit.verify(_progress(progress), expected)
        if not report.ok:  # a damaged or tampered log is named first; its records are not trusted
            return report
        problems = [f"{self.prompt_file(agent, owner, name)} still differs from its current revision after an"
                    " erasure and may show erased text (the erasure has not reached this home yet)"
                    for agent, owner, name in self._app.prompt_files.shown_after_erasure(
                        entry.event for record in ERASURE_RECORDS
                        for entry in self._app.audit.log_entries(0, record.kind) if entry.event is not None)]
        if not problems:
            return report
        return attrs.evolve(report, ok=False, problem="; ".join(problems))

    def replay_into(self, target_dir: str | os.PathLike[str], progress: audit.Progress | None = None) -> dict[str, Any]:
        """Rebuild every projection from the log alone into ``target_dir/memory.db``
        (``progress(done, total)`` is called as the log is replayed)."""
        self._check_open()
        return self._app.audit.replay_into(folder(target_dir, "target_dir"), _progress(progress))

    def events(self, *, after: int = 0, stream: str | None = None) -> Iterator[RecordedEvent]:
        """The event log itself, in log order: every event after position ``after`` (of one
        ``stream`` when given) as ``RecordedEvent(position, stream, version, event)``; erased
        (redacted) events are skipped. For audits and tests; the log is never written here."""
        self._check_open()
        return self._app.audit.events(check_int(after, "after", minimum=0), optional_id(stream, "stream"))

    def log_entries(self, *, after: int = 0, kind: str | None = None) -> Iterator[audit.LogEntry]:
        """Every log entry after ``after`` (of one event ``kind`` when given) as the audit shows
        it: position, stream, kind, time, payload digest, redacted or not."""
        self._check_open()
        return self._app.audit.log_entries(check_int(after, "after", minimum=0), optional_id(kind, "kind"))

    # --- moving a home (ADR-0030) ------------------------------------------------------------------

    def export_events(self, *, encrypted: bool = False) -> Iterator[str]:
        """The log as an event file, line by line (``\n`` ended): a header naming the head, then
        every event up to it, chain included; the same log always gives the same lines.

        ``encrypted`` (ADR-0081): each owner's payloads are sealed under the owner's data key in
        this home's keyring (``HOME/keys``, made when missing; keep it beside, not inside, the
        export): forgetting the owner destroys the key, and with it those payloads in every
        encrypted export made before; the chain of digests still verifies. A read-only memory
        needs the home key a writable one made (:class:`StorageError` otherwise)."""
        self._check_open()
        if check_flag(encrypted, "encrypted"):
            keyring = home_keyring(self.home, make_key=not getattr(self._app.store, "readonly", False))
            return sealed_export_lines(self._app.store, decode_payload, keyring)
        return self._app.transfer.export_lines()

    def import_events(self, lines: Callable[[], Iterable[str]], *, resume: bool = False,
                      progress: audit.Progress | None = None, checked: audit.Progress | None = None,
                      chains: int | None = None, keys: str | os.PathLike[str] | None = None) -> ImportReport:
        """Check a whole event file (``lines()`` opens it; it is read once, and what was checked
        is appended even if the file changes meanwhile), then append its events into this memory
        and render the prompt files from them. Any problem raises
        :class:`EventFileError` naming the line, and nothing is written. A memory that holds
        events is refused unless ``resume`` and its log is a prefix of the file's. ``chains``:
        link the events onto that many chains instead of the file's (an empty memory only; the
        anchors of the file's log do not apply to the new one, ADR-0031).

        An encrypted export is opened with the keys folder ``keys`` (``home.key`` and
        ``keyring.json`` of the home that exported it; by default this home's own): a payload
        whose key is still there comes back as it was, one whose key was destroyed (its owner
        forgotten) comes in redacted, and one ``owner.forgotten`` per such (agent, owner) then
        records it (``keys_destroyed`` in the report). A sealed payload that does not open
        (edited, another keyring or home key) is an :class:`EventFileError`: nothing written."""
        self._check_open()
        if not callable(lines):
            raise InvalidArgument("lines must be a function that opens the event file (returns its lines)")
        check_flag(resume, "resume")
        if chains is not None and (type(chains) is not int or not 1 <= chains <= MAX_CHAINS):
            raise InvalidArgument(f"chains must be a whole number from 1 to {MAX_CHAINS} (or None: the file's)")
        # Read once: what is appended is what was checked, whatever the file does meanwhile.
        opener = opening(keys_folder(self.home) if keys is None else folder(keys, "keys"), self._app.clock.now())
        with HeldLines(lines, self.home) as held:
            return self._app.transfer.import_lines(held, resume=resume, progress=_progress(progress),
                                                   checked=_progress(checked), chains=chains, opener=opener)


def _progress(progress: object) -> audit.Progress | None:
    if progress is not None and not callable(progress):
        raise InvalidArgument("progress must be a function of (done, total)")
    return progress

