"""A write's statements on one PostgreSQL connection, pipelined by libpq itself (ADR-0099).

The driver's own pipeline mode spent about a millisecond of the client's CPU on a one-message
append (a dozen statements): each statement passes its generators, its prepare bookkeeping and
a round of sending and polling of its own. Here a statement is queued in libpq's buffer
(``PQsendQueryPrepared``, prepared under a name of :mod:`.prepared`'s at its first run on the
connection, in the same pipeline), and nothing is sent until an answer is needed: then one sync,
one flush, and the answers read in order. Waiting is done in ``poll`` (without the GIL), never
in libpq; the connection stays in non-blocking mode, as the driver keeps it, and a flush reads
what the server sends meanwhile, so a long batch cannot block both ends.

Answers follow the driver's: a failed statement raises the driver's error for it (its class
by SQLSTATE, as ``psycopg.errors``) when the answers of its sync are read; the statements after
it are skipped by the server until that sync. A statement the session no longer knows (a
``DEALLOCATE ALL`` run on the connection meanwhile) fails the write with
``InvalidSqlStatementName`` after forgetting every name of the connection: the write is run
again (``connection.is_retryable``) and prepares them again.
"""

from __future__ import annotations

import contextlib
import select
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from fermix_memory.adapters.postgres.prepared import (
    COMMAND,
    FATAL,
    OK,
    SQLSTATE,
    SYNC,
    TUPLES,
    UNKNOWN_STATEMENT,
    Transformer,
    as_text,
    error_from_result,
    placeholders,
    statement_names,
)

Answer = list[Any]  # one statement's answer: [its libpq result], [None] until its sync is read


class WritePipeline:
    """One write's statements on ``conn`` (psycopg's, idle, autocommit), in libpq's pipeline
    mode from ``__enter__`` to ``__exit__`` (which reads every answer still due). ``on(conn)``
    gives the one kept with the connection, for its writes one after the other."""

    @classmethod
    def on(cls, conn: Any) -> WritePipeline:
        """The pipeline of ``conn``'s writes, made at its first (kept with it, gone when it is)."""
        kept: WritePipeline | None = getattr(conn, _KEPT, None)
        if kept is None or kept._due:
            kept = cls(conn)
            setattr(conn, _KEPT, kept)
        return kept

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._pg = conn.pgconn
        self._due: list[Answer | tuple[str]] = []  # sent since the last sync: answers, and (sql,) of prepares
        self._names = statement_names(conn)
        self._loader: Any = None
        self._poll = select.poll()
        self._poll.register(self._pg.socket, select.POLLIN)

    def __enter__(self) -> WritePipeline:
        self._pg.enter_pipeline_mode()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if kind is None:
                self.sync()  # raises the first failure among the statements not yet answered
            elif self._due and self._pg.status == OK:
                with contextlib.suppress(Exception):  # the failure being raised says more
                    self._read_through_sync()
        finally:
            if self._pg.status == OK:
                # Answers still due: the connection is not idle, and the pool drops it.
                with contextlib.suppress(Exception):
                    self._pg.exit_pipeline_mode()

    def send(self, sql: str, params: Any, *, prepare: bool) -> Answer:
        """Queue ``sql`` (SQLite's placeholders) with ``params``; its answer once synced."""
        command, order = placeholders(sql)
        if order is not None:
            params = [params[name] for name in order]
        try:
            values, formats = _values(params)
        except TypeError:  # a kind of value only the driver's adapters know: typed by them, not prepared
            self._send_typed(command, params)
        else:
            if prepare:
                name = self._names.get(sql)
                if name is None:
                    name = self._names.add(sql)
                    self._pg.send_prepare(name, command)
                    self._due.append((sql,))
                self._pg.send_query_prepared(name, values, param_formats=formats)
            else:
                self._pg.send_query_params(command, values, param_formats=formats)
        answer: Answer = [None]
        self._due.append(answer)
        return answer

    def _send_typed(self, command: bytes, params: Sequence[Any]) -> None:
        from psycopg.adapt import PyFormat  # a rare kind of value: imported when one comes

        dumper = Transformer(self._conn)
        values = dumper.dump_sequence(params, [PyFormat.AUTO] * len(params))
        self._pg.send_query_params(command, values, param_types=dumper.types, param_formats=dumper.formats)

    def answer(self, answer: Answer) -> Any:
        """The libpq result of the statement ``answer`` belongs to, synced first when it is due."""
        if answer[0] is None:
            self.sync()
        return answer[0]

    def rows(self, answer: Answer) -> list[tuple[Any, ...]]:
        """The rows of that statement (none for a statement that returns none)."""
        result = self.answer(answer)
        if result.status != TUPLES:
            return []
        if self._loader is None:
            self._loader = Transformer(self._conn)  # loaders by column type, kept for the next answers
        self._loader.set_pgresult(result)
        rows: list[tuple[Any, ...]] = self._loader.load_rows(0, result.ntuples, tuple)
        return rows

    def sync(self) -> None:
        """Send what is queued with a sync and read every answer due; the first failure is raised."""
        if not self._due:
            return
        failed = self._read_through_sync()
        if failed is not None:
            if failed.error_field(SQLSTATE) == UNKNOWN_STATEMENT:
                self._names.clear()  # the session's statements were dropped: the write runs again
            raise error_from_result(failed, encoding=self._conn.info.encoding)

    def _read_through_sync(self) -> Any:
        """Sync, flush, read the answers due in order; the first failed result (or ``None``)."""
        pg = self._pg
        due, self._due = self._due, []
        pg.pipeline_sync()
        self._flush()
        failed = None
        for entry in due:
            result = self._next()
            if result is None:
                raise _lost(pg)
            while self._next() is not None:  # a statement's answers end with an empty one
                pass
            if result.status == FATAL and failed is None:
                failed = result
            if isinstance(entry, list):
                entry[0] = result
            elif result.status != COMMAND:  # a prepare: a name the server did not take is not the statement's
                self._names.forget(entry[0])
        if (end := self._next()) is None or end.status != SYNC:
            raise _lost(pg)
        return failed

    def _flush(self) -> None:
        pg = self._pg
        while pg.flush():  # not all sent: wait to send more, reading what the server sends meanwhile
            self._poll.modify(pg.socket, select.POLLIN | select.POLLOUT)
            if any(events & select.POLLIN for _, events in self._poll.poll()):
                pg.consume_input()
        self._poll.modify(pg.socket, select.POLLIN)

    def _next(self) -> Any:
        pg = self._pg
        while pg.is_busy():
            self._poll.poll()
            pg.consume_input()
        return pg.get_result()


def _values(params: Sequence[Any]) -> tuple[list[bytes | None] | None, list[int] | None]:
    """The parameters as libpq takes them (text, bytes in binary); ``TypeError`` for other kinds."""
    if not params:
        return None, None
    values: list[bytes | None] = []
    formats: list[int] | None = None
    for index, value in enumerate(params):
        if type(value) in _BINARY:
            if formats is None:
                formats = [0] * len(params)
            formats[index] = 1
            values.append(bytes(value))
        else:
            values.append(as_text(value))
    return values, formats


def _lost(pg: Any) -> Exception:
    import psycopg

    message = pg.error_message.decode(errors="replace").strip() or "no answer"
    return psycopg.OperationalError(f"the connection was lost during a write: {message}")


_BINARY = (bytes, bytearray, memoryview)
_KEPT = "_fermix_write_pipeline"  # the attribute of a connection holding its writes' pipeline
