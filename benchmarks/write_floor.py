"""What a write through a way in costs beside the SQL it runs, and that SQL beside the peer's whole
write: LangGraph's ``put`` (``FermixStore`` against ``SqliteStore``) and the OpenAI Agents SDK's
``add_items`` of one turn's four items (``FermixAgentsSession`` against ``agents.SQLiteSession``).

Three sides take turns, slice by slice, in one run:

- **ours**: the call, as a host makes it;
- **its SQL**: every statement our writer connection ran for the same calls (captured with apsw's
  exec tracer, bindings included, on a twin home filled alike, untimed), replayed in order on a copy
  of that twin's file taken before the calls, through a bare apsw connection: the same rows, log
  entries, indexes, triggers and commits, with nothing around them (no admission, no payload
  building, no caches, no lane). Background work of our writer (the full-text catch-up) that ran
  during the calls is replayed in the slice it fell in; each row of an ``executemany`` is replayed
  as an ``execute`` of its own (a little slower than ours). The replay pays no thread hop, and the
  log is checkpointed between slices, untimed, as ours is in a pause (ADR-0046);
- **the peer**: the package a host would use instead, as shipped (``SqliteStore`` on WAL with
  ``synchronous = NORMAL``, as ``peers_langgraph.py``, checkpointed between slices as there;
  ``SQLiteSession`` with its own settings);
- for ``put``, **its Python**: the same calls on a third home filled alike whose writer connection
  runs no statement (each one finds no row and changes one; nothing is written): the Python of the
  whole write path alone (admission, the chained event, the projection's rows, the commit's
  bookkeeping, the caches told), without SQLite and without the WAL hook SQLite calls in a commit.

Figures (throughput, higher is better for ours): ``ours_to_peer`` (what ``peers_*.py`` report),
``sql_to_peer`` (the statements alone, replayed back to back, beside the peer: ADR-0108) and
``ours_to_sql`` (how much of the time is the SQL). Ratios by the process's CPU time too
(``cpu_*``). For ``put`` also ``put_in_path_ms`` (ours less its Python: the statements as they run
between the write path's Python, the WAL hook included) and ``put_zero_python_to_peer`` (the peer
beside that: what a put would reach were its Python free; ADR-0111).

Run from the repository root::

    .venv/bin/python benchmarks/write_floor.py --quick

The last line of stdout is one JSON object of the figures (progress goes to stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # storage figures: no model (ADR-0044)

import apsw  # noqa: E402

from fermix_memory import MemorySystem  # noqa: E402

Statement = tuple[str, Any]


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Capture:
    """Every statement each connection to one file runs from its opening (apsw's exec tracer, set
    as the connection opens), with marks between calls; the writer is the connection that begins
    ``IMMEDIATE`` transactions."""

    def __init__(self, path: Path) -> None:
        self._path = str(path.resolve())
        self._by_connection: dict[int, list[Statement]] = {}
        self._marks: list[dict[int, int]] = []
        apsw.connection_hooks.append(self._hook)

    def _hook(self, conn: apsw.Connection) -> None:
        if str(Path(conn.filename).resolve()) != self._path:
            return
        statements = self._by_connection.setdefault(id(conn), [])

        def trace(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
            statements.append((sql, bindings))
            return True

        conn.exec_trace = trace

    def mark(self) -> None:
        self._marks.append({cid: len(s) for cid, s in self._by_connection.items()})

    def writer(self) -> tuple[list[Statement], list[int]]:
        """The writer's statements and where each mark fell among them."""
        found = [cid for cid, s in self._by_connection.items()
                 if any(sql.startswith("BEGIN IMMEDIATE") for sql, _ in s)]
        if len(found) != 1:
            raise SystemExit(f"expected one writer connection among the traced ones, found {len(found)}")
        return self._by_connection[found[0]], [m.get(found[0], 0) for m in self._marks]

    def close(self) -> None:
        apsw.connection_hooks.remove(self._hook)


def _replayer(path: Path, statements: list[Statement]) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """What replays ``statements[start:end]`` on ``path`` (a bare connection), and what checkpoints
    its log (between slices, untimed, as ours does in a pause: ADR-0046)."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    cur = conn.cursor()

    def replay(start: int, end: int) -> None:
        for sql, bindings in statements[start:end]:
            cur.execute(sql, bindings).fetchall()

    return replay, lambda: conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE) and None


Side = tuple[Callable[[int], None], Callable[[], None]]


class _NoRows(list[Any]):
    def fetchall(self) -> list[Any]:
        return self


_NO_ROWS = _NoRows()


class _Unrun:
    """A writer connection whose statements run nothing: each finds no row and changes one."""

    def __init__(self, real: apsw.Connection) -> None:
        self._real = real
        self.connection = self

    def cursor(self) -> _Unrun:
        return self

    def execute(self, sql: str, bindings: Any = None) -> _NoRows:
        return _NO_ROWS

    def executemany(self, sql: str, rows: Any) -> _NoRows:
        return _NO_ROWS

    def changes(self) -> int:
        return 1

    def data_version(self) -> int:
        # Unchanged, as after the writer's own commit: what it knew of the log carries over.
        return int(self._real.data_version())

    def set_busy_timeout(self, ms: int) -> None:
        pass

    def __getattr__(self, name: str) -> Any:  # closing, and what the store does as it closes
        return getattr(self._real, name)


def _python_alone(memory: MemorySystem, run_slice: Callable[[int], None]) -> Callable[[int], None]:
    """``run_slice`` with ``memory``'s writer running no statement for the slice's length (this
    reaches into the store on purpose: a measurement of the write path's Python, on a home of its
    own that is thrown away; its background work between slices runs on the real writer)."""
    store: Any = memory._open_app().store
    real = store._writer

    def run(k: int) -> None:
        store._writer = _Unrun(real)
        try:
            run_slice(k)
        finally:
            store._writer = real

    return run


def _timed_rounds(sides: dict[str, Side], slices: int) -> dict[str, tuple[float, float]]:
    """Each side's median (wall, CPU) seconds per slice; the sides take turns slice by slice, and
    what each does in a pause (its settle) runs after its slice, untimed."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for k in range(slices):
        for name, (run_slice, settle) in sides.items():
            t, c = time.perf_counter(), time.process_time()
            run_slice(k)
            samples[name].append((time.perf_counter() - t, time.process_time() - c))
            settle()
    return {name: (statistics.median(w for w, _ in s), statistics.median(c for _, c in s))
            for name, s in samples.items()}


def _figures(name: str, per_slice: int, measured: dict[str, tuple[float, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for clock, i in (("", 0), ("cpu_", 1)):
        ours, sql, peer = (measured[side][i] for side in ("ours", "sql", "peer"))
        out |= {f"{clock}{name}_ms": {side: round(measured[side][i] / per_slice * 1e3, 4) for side in measured},
                f"{clock}{name}_ours_to_peer": round(peer / ours, 3),
                f"{clock}{name}_sql_to_peer": round(peer / sql, 3),
                f"{clock}{name}_ours_to_sql": round(sql / ours, 3)}
        if "python" in measured:
            in_path = ours - measured["python"][i]
            out |= {f"{clock}{name}_in_path_ms": round(in_path / per_slice * 1e3, 4),
                    f"{clock}{name}_zero_python_to_peer": round(peer / in_path, 3) if in_path > 0 else None}
    said = ", ".join(f"{side} {measured[side][0] / per_slice * 1e3:.4f} ms" for side in measured)
    _say(f"  {name} a call: {said}")
    return out


def _side_by_side(workdir: Path, fill: Callable[[MemorySystem], None],
                  make: Callable[[MemorySystem], Callable[[int], None]], peer: Side,
                  slices: int, *, python: bool = False) -> dict[str, tuple[float, float]]:
    """Homes filled alike by ``fill``; ``make(memory)`` gives a slice of calls on one (slice k).
    The twin runs every slice first (traced, untimed); then ours, the twin's SQL replayed on a copy
    of its file from before it opened, and ``peer`` take turns, slice by slice (with ``python``, the
    same calls on a third home whose writer runs no statement too)."""
    homes = {side: workdir / side for side in ("ours", "twin", *(("python",) if python else ()))}
    for home in homes.values():
        with MemorySystem.open(home, config={}) as memory:
            fill(memory)
    copy = workdir / "replayed.db"
    shutil.copy(homes["twin"] / "memory.db", copy)
    capture = Capture(homes["twin"] / "memory.db")
    try:
        with MemorySystem.open(homes["twin"], config={}) as twin:
            twin.wait_for_background()
            run_twin = make(twin)
            capture.mark()
            for k in range(slices):
                run_twin(k)
                capture.mark()
        statements, marks = capture.writer()
    finally:
        capture.close()
    replay, checkpoint = _replayer(copy, statements)
    replay(0, marks[0])  # what the twin wrote as it opened, untimed
    checkpoint()
    with contextlib.ExitStack() as stack:
        ours = stack.enter_context(MemorySystem.open(homes["ours"], config={}))
        ours.wait_for_background()
        sides = {"ours": (make(ours), ours.wait_for_background),
                 "sql": (lambda k: replay(marks[k], marks[k + 1]), checkpoint), "peer": peer}
        if python:
            alone = stack.enter_context(MemorySystem.open(homes["python"], config={}))
            alone.wait_for_background()
            sides["python"] = (_python_alone(alone, make(alone)), alone.wait_for_background)
        return _timed_rounds(sides, slices)


def langgraph_put(workdir: Path, slices: int, per_slice: int) -> dict[str, Any]:
    """``store.put`` of a new key, ``per_slice`` a slice, on an owner holding 2,000 items."""
    from langgraph.store.base import PutOp
    from langgraph.store.sqlite import SqliteStore

    from fermix_memory.langgraph import FermixStore

    namespace = ("memories", "owner")
    held = [PutOp(namespace, f"item-{j}", {"text": f"fact {j}: likes tea and chess", "n": j}) for j in range(2_000)]

    def puts(store: Any, k: int) -> None:
        for i in range(per_slice):
            store.put(namespace, f"new-{k}-{i}", {"text": f"fact {i}: likes tea and chess", "n": i})

    def fill(memory: MemorySystem) -> None:
        FermixStore(memory, agent_id="bench").batch(held)

    def make(memory: MemorySystem) -> Callable[[int], None]:
        store = FermixStore(memory, agent_id="bench")
        return lambda k: puts(store, k)

    conn = sqlite3.connect(workdir / "peer.db", check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    try:
        peer = SqliteStore(conn)
        peer.setup()
        peer.batch(held)
        checkpoint = lambda: conn.execute("PRAGMA wal_checkpoint(PASSIVE)") and None  # noqa: E731
        measured = _side_by_side(workdir, fill, make, (lambda k: puts(peer, k), checkpoint), slices, python=True)
    finally:
        conn.close()
    return _figures("put", per_slice, measured)


def agents_add_items(workdir: Path, slices: int, per_slice: int) -> dict[str, Any]:
    """``session.add_items`` of one turn's four items, ``per_slice`` calls a slice, to a session
    in a home holding another session of 1,000 items."""
    from agents import SQLiteSession
    from peers_agents import turn_items

    from fermix_memory.openai_agents import FermixAgentsSession

    loop = asyncio.new_event_loop()
    held = [item for _ in range(250) for item in turn_items()]
    turns = [[turn_items() for _ in range(per_slice)] for _ in range(slices)]

    def session(memory: MemorySystem, name: str) -> Any:
        return FermixAgentsSession.open(memory, name, agent_id="ada", owner_id="alice", review=False)

    def add(s: Any, k: int) -> None:
        for items in turns[k]:
            loop.run_until_complete(s.add_items(items))

    def fill(memory: MemorySystem) -> None:
        s = session(memory, "held")
        for i in range(0, len(held), 100):
            loop.run_until_complete(s.add_items(held[i:i + 100]))

    def make(memory: MemorySystem) -> Callable[[int], None]:
        s = session(memory, "turns")
        return lambda k: add(s, k)

    peer = SQLiteSession("turns", db_path=workdir / "agents.db")
    try:
        for i in range(0, len(held), 100):
            loop.run_until_complete(SQLiteSession("held", db_path=workdir / "agents.db").add_items(held[i:i + 100]))
        measured = _side_by_side(workdir, fill, make, (lambda k: add(peer, k), lambda: None), slices)
    finally:
        peer.close()
        loop.close()
    return _figures("add_items", per_slice, measured)


def run(quick: bool = False) -> dict[str, Any]:
    slices, puts, turns = (7, 40, 15) if quick else (15, 100, 40)
    out: dict[str, Any] = {"benchmark": "write_floor", "quick": quick, "slices": slices,
                           "puts_per_slice": puts, "add_items_calls_per_slice": turns}
    with tempfile.TemporaryDirectory(prefix="fermix-write-floor-") as tmp:
        _say("LangGraph put")
        (Path(tmp) / "lg").mkdir()
        out |= langgraph_put(Path(tmp) / "lg", slices, puts)
        _say("Agents add_items")
        (Path(tmp) / "ag").mkdir()
        out |= agents_add_items(Path(tmp) / "ag", slices, turns)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer slices and calls (well under a minute)")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
