"""How soon an owner's live stream in the console tells a write another process made (ADR-0090).

A real ``fermix serve`` (a subprocess on a free port of 127.0.0.1, one operator token), signed
in once; one reader holds the owner's live stream (``GET /owners/AGENT/OWNER/live``, server-sent
events) and another the stream of a second owner. This process is the host: it writes N facts of
the owner (``write_memory``, one at a time, a pause of random length between them so that no
write lines up with a poll) and notes how long each took to reach the stream as ``changed``,
from the moment the write was asked. Beside it, in the same run, the way the page worked before:
a poll of the log's head every 0.5 s (what every open page did for itself), on the same writes.
Writes to a second owner are interleaved; a third owner's stream, never written, must hear nothing.

Run from the repository root::

    .venv/bin/python benchmarks/console_live.py [--quick] [--writes 40] [--store sqlite|postgres|both]

The last line of stdout is one JSON object: per store, p50/p95/max milliseconds from a write to
its event on the stream and for the former poll, the events each stream had, and those of a third
owner's stream, never written (must be 0).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.postgres_server

from fermix_memory import MemorySystem
from tests.postgres_server import missing_server, running_server

TOKEN_VAR, TOKEN = "FERMIX_BENCH_OPERATOR", "bench-operator-token"
FORMER_POLL_S = 0.5  # how often each open page looked at the log's head before (LIVE_POLL_S)


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextmanager
def serving(home: Path) -> Iterator[str]:
    """A ``fermix serve`` on a free port, and its base URL once it says where it listens."""
    command = [sys.executable, "-m", "fermix_memory", "--home", str(home), "serve", "--port", "0",
               "--token-env", TOKEN_VAR]
    server = subprocess.Popen(command, env={**os.environ, TOKEN_VAR: TOKEN}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()  # type: ignore[union-attr]
        found = re.search(r"(http://127\.0\.0\.1:\d+)/v1", line)
        if not found:
            raise SystemExit(f"the server did not start: {line}{server.communicate(timeout=30)[1]}")
        yield found.group(1)
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)


class Stream:
    """An owner's live stream read on a thread: when each ``changed`` arrived (monotonic)."""

    def __init__(self, url: str, cookies: httpx.Cookies, path: str) -> None:
        self.arrived: list[float] = []
        self.listening = threading.Event()
        self._client = httpx.Client(base_url=url, cookies=cookies, trust_env=False, timeout=600)
        threading.Thread(target=self._read, args=(path,), daemon=True).start()

    def _read(self, path: str) -> None:
        try:
            with self._client.stream("GET", path) as answer:
                for line in answer.iter_lines():
                    if line == "event: changed":
                        self.arrived.append(time.monotonic())
                    elif line == "event: listening":
                        self.listening.set()
        except httpx.HTTPError:
            pass

    def close(self) -> None:
        self._client.close()


class FormerPoll:
    """The former live page: the log's head looked at every 0.5 s, a change noted when it moved."""

    def __init__(self, memory: MemorySystem) -> None:
        self.arrived: list[float] = []
        self._memory, self._stop = memory, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        seen = self._memory.head().position
        while not self._stop.wait(FORMER_POLL_S):
            position = self._memory.head().position
            if position != seen:
                seen = position
                self.arrived.append(time.monotonic())

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _wait(condition: Any, what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"not within {limit} s: {what}")
        time.sleep(0.002)


def _figures(latencies: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in latencies)
    return {"p50_ms": round(statistics.median(ms), 1), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 1),
            "max_ms": round(ms[-1], 1)}


def measure(home: Path, writes: int) -> dict[str, Any]:
    with MemorySystem.open(home) as host:
        host.write_memory({"op": "add", "category": "context", "key": "seed", "value": "seed"},
                          agent_id="ada", owner_id="alice", trust="operator")
    with serving(home) as url, httpx.Client(base_url=url, trust_env=False, timeout=60, follow_redirects=True) as http, \
            MemorySystem.open(home) as host:
        signed = http.post("/signin", data={"token": TOKEN})
        if signed.url.path != "/owners":
            raise SystemExit(f"could not sign in: {signed.status_code}")
        alice = Stream(url, http.cookies, "/owners/ada/alice/live")
        bob = Stream(url, http.cookies, "/owners/ada/bob/live")
        carol = Stream(url, http.cookies, "/owners/ada/carol/live")  # never written: must hear nothing
        former = FormerPoll(host)
        ours: list[float] = []
        theirs: list[float] = []
        bob_writes = 0
        try:
            _wait(lambda: all(s.listening.is_set() for s in (alice, bob, carol)), "the streams listening")
            for n in range(writes):
                time.sleep(random.uniform(0.05, FORMER_POLL_S))
                if n % 4 == 3:  # another owner's write: its own stream only
                    host.write_memory({"op": "add", "category": "context", "key": f"b{n}", "value": f"bob {n}"},
                                      agent_id="ada", owner_id="bob", trust="operator")
                    bob_writes += 1
                    _wait(lambda b=bob_writes, k=n: len(bob.arrived) >= b and len(former.arrived) > k, "bob's event")
                    continue
                had, asked = len(alice.arrived), time.monotonic()
                host.write_memory({"op": "add", "category": "context", "key": f"k{n}", "value": f"fact {n}"},
                                  agent_id="ada", owner_id="alice", trust="operator")
                _wait(lambda h=had, k=n: len(alice.arrived) > h and len(former.arrived) > k, "the write's events")
                ours.append(alice.arrived[had] - asked)
                theirs.append(former.arrived[n] - asked)
                log(f"write {n}: stream {ours[-1] * 1000:.0f} ms, former poll {theirs[-1] * 1000:.0f} ms")
        finally:
            former.close()
            for stream in (alice, bob, carol):
                stream.close()
    return {"writes": len(ours), "stream": _figures(ours), "former_poll": _figures(theirs),
            "p50_ratio_former_over_stream": round(statistics.median(theirs) / statistics.median(ours), 1),
            # A write of a fact may make two events: its own, then its USER.md revision's (a write of its own).
            "owner_events": len(alice.arrived), "other_owner_writes": bob_writes,
            "other_owner_events": len(bob.arrived),
            "unwritten_owner_events": len(carol.arrived)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writes", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="20 writes a store")
    parser.add_argument("--store", choices=("sqlite", "postgres", "both"), default="both")
    args = parser.parse_args(argv)
    writes = 20 if args.quick else args.writes
    result: dict[str, Any] = {}
    workdir = Path(tempfile.mkdtemp(prefix="fermix-console-live-"))
    try:
        if args.store in ("sqlite", "both"):
            result["sqlite"] = measure(workdir / "sqlite", writes)
        if args.store in ("postgres", "both"):
            if missing := missing_server():
                log(f"console_live.py: PostgreSQL skipped: {missing}")
            else:
                with running_server() as server:
                    os.environ["FERMIX_DATABASE_URL"] = server.fresh_database()
                    try:
                        result["postgres"] = measure(workdir / "postgres", writes)
                    finally:
                        os.environ.pop("FERMIX_DATABASE_URL", None)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
