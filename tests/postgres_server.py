"""One real PostgreSQL server for the whole test run, and a fresh database for each test.

The server is the machine's PostgreSQL (``initdb``/``pg_ctl`` on ``PATH`` or under
``/usr/lib/postgresql/*/bin``), run as the ``postgres`` user (it refuses root) with its data
folder and its Unix socket in a temporary folder that user owns, listening on no TCP port
(``listen_addresses=''``), ``fsync=off`` (a test server loses nothing that matters on a crash).
That folder is in memory when the machine has room (``tests/scratch.py``): copying a database
there costs a quarter of what it costs on disk.
``running_server(durable=True)`` starts the same server on disk with ``fsync`` and synchronous
commits on, as ``benchmarks/postgres.py`` and ``benchmarks/recall_quality.py`` use it.

Each test gets a database of its own, created from ``template_fermix`` — an empty database
already migrated to the current schema — so a test pays for a file copy, not for the DDL — and
dropped when the test ends, so the server holds one test's files at a time. The copy is
PostgreSQL's ``FILE_COPY`` strategy on the test server (its checkpoint costs nothing without
``fsync``; about 20 ms a database instead of 35 for the default, which writes the copy through
the WAL), and both statements go through one administration session kept for the run. Without PostgreSQL
the tests that need it are skipped, except under CI (``CI`` set), where a missing server is an
error.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.scratch import in_memory_folder

SERVER_USER = "postgres"
TEMPLATE = "template_fermix"


def _bin_dir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(candidates[-1]).parent if candidates else None


def _as_server_user(*argv: str) -> list[str]:
    return ["runuser", "-u", SERVER_USER, "--", *argv] if os.geteuid() == 0 else list(argv)


class PostgresServer:
    """A running test server: its socket folder, and fresh databases made on it."""

    def __init__(self, bin_dir: Path, root: Path, *, durable: bool = False) -> None:
        """``durable``: ``fsync``, ``synchronous_commit`` and full-page writes on (a server's
        defaults); off by default, since a test server loses nothing that matters on a crash."""
        self.bin_dir = bin_dir
        self.root = root
        self.durable = durable
        self.data = root / "data"
        self.socket_dir = root / "socket"
        self._names = itertools.count(1)
        self._admin: Any = None  # the administration session, opened at its first use
        self._copy = ""  # how CREATE DATABASE copies the template (set once the server runs)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SERVER_USER}@/{database}?host={self.socket_dir}"

    def start(self) -> None:
        self.socket_dir.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.root, SERVER_USER)
            shutil.chown(self.socket_dir, SERVER_USER)
        _run(_as_server_user(str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", SERVER_USER,
                             "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"))
        safety = "on" if self.durable else "off"
        options = (f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' -c fsync={safety}"
                   f" -c synchronous_commit={safety} -c full_page_writes={safety} -c max_connections=200")
        _run(_as_server_user(str(self.bin_dir / "pg_ctl"), "start", "-w", "-D", str(self.data), "-o", options,
                             "-l", str(self.root / "server.log")))

    def stop(self) -> None:
        self._close_admin()
        subprocess.run(_as_server_user(str(self.bin_dir / "pg_ctl"), "stop", "-m", "immediate", "-w", "-D",
                                       str(self.data)), capture_output=True, check=False)

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every session is ended (transactions in flight rolled back),
        committed ones kept; returns once the server accepts connections again."""
        self._close_admin()
        _run(_as_server_user(str(self.bin_dir / "pg_ctl"), "restart", "-m", "fast", "-w", "-D", str(self.data),
                             "-l", str(self.root / "server.log")))

    def prepare_template(self) -> None:
        """``template_fermix``: an empty database at the current schema, copied for each test."""
        from fermix_memory.adapters.postgres.connection import connect
        from fermix_memory.adapters.postgres.schema import migrate

        self.admin(f"CREATE DATABASE {TEMPLATE}")
        with connect(self.url(TEMPLATE)) as conn:
            migrate(conn, self.url(TEMPLATE))
        # FILE_COPY (PostgreSQL 15 and later) checkpoints at each copy: cheap without fsync only.
        if not self.durable and int(self._session().execute("SHOW server_version_num").fetchone()[0]) >= 150000:
            self._copy = " STRATEGY FILE_COPY"

    def admin(self, sql: str) -> None:
        """Run ``sql`` in the administration session (opened again once if the server restarted)."""
        import psycopg

        try:
            self._session().execute(sql)
        except psycopg.OperationalError:
            self._close_admin()
            self._session().execute(sql)

    def _session(self) -> Any:
        import psycopg

        if self._admin is None or self._admin.closed:
            self._admin = psycopg.connect(self.url(), autocommit=True)
        return self._admin

    def _close_admin(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def fresh_database(self) -> str:
        """The URL of a new database at the current schema, holding nothing."""
        name = f"test_{os.getpid()}_{next(self._names)}"
        self.admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}{self._copy}")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        """Drop the database of ``url`` (made by :meth:`fresh_database`), ending any session
        still connected to it."""
        name = url.removeprefix(f"postgresql://{SERVER_USER}@/").partition("?")[0]
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:5])}... failed ({done.returncode}): {done.stderr or done.stdout}")


def missing_server() -> str | None:
    """Why no server can be started here (no PostgreSQL, or no driver), or None."""
    if _bin_dir() is None:
        return "PostgreSQL's pg_ctl is not installed (apt-get install postgresql)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    return None


@contextmanager
def running_server(*, durable: bool = False) -> Iterator[PostgresServer]:
    """A throwaway server with its template database, stopped and deleted on exit."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        raise RuntimeError(missing_server())
    root = Path(tempfile.mkdtemp(prefix="fermix-pg-", dir=None if durable else in_memory_folder()))
    server = PostgresServer(bin_dir, root, durable=durable)
    try:
        server.start()
        server.prepare_template()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole run (skipped without PostgreSQL, an error under CI)."""
    missing = missing_server()
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{missing}: the PostgreSQL tests run under CI")
        pytest.skip(missing)
    with running_server() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty database at the current schema, for this test only (dropped after it)."""
    url = postgres_server.fresh_database()
    yield url
    postgres_server.drop_database(url)


@contextmanager
def one_connection_memory(url: str, home: Path, **options: Any) -> Iterator[tuple[Any, Any]]:
    """A memory at ``home`` on the database ``url`` whose store holds ONE connection, so every
    statement of a test runs on it (prepared statements, cursors, a failed pipeline); yields the
    memory and its store. ``options``: more arguments of the store (``chains``, ``feed``)."""
    from fermix_memory import MemorySystem
    from fermix_memory.adapters.postgres.event_store import PostgresEventStore
    from fermix_memory.entrypoints.bootstrap import bootstrap

    store = PostgresEventStore(url, pool_max=1, **options)
    with MemorySystem(bootstrap(home, store=store)) as memory:
        yield memory, store
