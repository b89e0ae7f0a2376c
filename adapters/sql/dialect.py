"""What a SQL dialect package must provide (ADR-0056): the shared core in ``adapters/sql/``
holds everything that is the same on every SQL store; a dialect (``adapters/sqlite/``,
``adapters/postgres/``) provides the modules below and nothing imports one dialect from another.

Each :class:`Requirement` names a module of the dialect package and what it must hold: a class
derived from a core base class, and/or names (functions, constants, classes) by which the
composition root and the audit reach it. ``tests/unit/test_sql_dialects.py`` checks every
dialect in :data:`DIALECTS` against :data:`REQUIREMENTS`; a part of the core that asks more of
a dialect appends its :class:`Requirement` here.
"""

from __future__ import annotations

import attrs

# The dialect packages under ``fermix_memory.adapters``.
DIALECTS: tuple[str, ...] = ("sqlite", "postgres")


@attrs.frozen
class Requirement:
    """A module every dialect package holds (``module``, relative to the package), with a class
    derived from ``base`` (``"module:Class"`` of the core; empty: none asked) and the ``names``
    it defines; ``why`` says what it is for."""

    module: str
    why: str
    base: str = ""
    names: tuple[str, ...] = ()


REQUIREMENTS: list[Requirement] = [
    Requirement("connection", "opening connections, and the driver's errors translated into the store's",
                names=("translated_errors",)),
    Requirement("migrations", "the dialect's DDL of each schema version (the shared pieces are sql.ddl)",
                names=("MIGRATIONS", "APPEND_ONLY_TRIGGERS")),
    Requirement("schema", "running the migrations, checking a database at open, the append-only triggers",
                names=("migrate", "check_schema", "missing_triggers")),
    Requirement("transaction", "how writers share the log: start, locking of chains, positions, version clash",
                base="fermix_memory.adapters.sql.transaction:SqlTransaction"),
    Requirement("event_store", "the EventStore port: connections, writes and their commit, reads of the log",
                base="fermix_memory.adapters.sql.event_store:SqlEventStore"),
    Requirement("erasure", "the Erasure port: the logical step's SQL, and the physical step (the scrub)",
                base="fermix_memory.adapters.sql.erasure:ErasingTransaction"),
    Requirement("audit", "verify and replay over the dialect's own files or catalog (triggers, indexes)"),
    Requirement("queries", "the MemoryQueries port: the shared reads, and full-text search of memory rows and"
                " history (FTS5, tsvector)", base="fermix_memory.adapters.sql.queries:SqlQueries"),
    Requirement("import_keys", "the import keys a conversation holds, by the dialect's JSON functions"
                " (sql.import_keys.stored_import_keys)", names=("read_import_keys",)),
    Requirement("vectors", "the VectorIndex port: how new messages are queued and what waits for a vector, and"
                " UNVECTORED_SQL, what verify fails on", base="fermix_memory.adapters.sql.vectors:SqlVectorIndex",
                names=("UNVECTORED_SQL",)),
]
