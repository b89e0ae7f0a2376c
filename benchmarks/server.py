"""The HTTP overhead of a turn through ``fermix serve`` (ADR-0073, ADR-0089), against the in-process API.

A real ``fermix serve`` (a subprocess on a free port of 127.0.0.1, one operator token) and N
concurrent clients (threads, each with its own keep-alive client and its own conversation)
running turns two ways: in ONE request (``POST /v1/messages`` asking for the prompt composed
after the message, ADR-0089: ``one``) and in two (``POST /v1/messages`` then ``POST /v1/prompt``:
``two``). Beside them, in the same run, the same turns in this process through
``memory.session(...)`` (``append`` then ``compose_prompt``) from the same number of threads, on
a home of its own. Each thread moves to a new conversation every ``--window`` turns (100), so a
prompt holds 1 to 100 messages every way. Beside all, a bare ASGI application under the same
uvicorn answers every request with a small fixed JSON: a turn of two requests to it, the first
also timed alone, gives the floor of one and of two requests through uvicorn and the client on
this machine. Every server is driven with httpx and a keep-alive ``http.client`` connection
(``_light``), far lighter, so that the client's own cost weighs less; the one-request turn and the
floor also with a keep-alive socket speaking just the HTTP/1.1 these turns need (``_raw``:
``RawClient``; ``http.client`` parses an answer's headers with the ``email`` package, a few tens
of microseconds a line). Each figure compares one client with itself; the bar (overhead < 1 ms
at N = 1) is read with the lightest, the raw socket, beside ``http.client`` and httpx (ADR-0094).
Every client parses the answer's JSON with the standard library. Beside the session's in-process
turn, ``in_process_api`` makes the calls the server makes for a turn in one request
(``memory.append_message`` then ``memory.compose_prompt``), and each figure's
``http_overhead_vs_served_calls_p50_ms`` is measured against it.
``--before-src DIR`` also serves a second ``fermix_memory`` package from DIR (an earlier version
of the code) and drives it like ``one_light`` and ``one_raw`` (``one_before_light``,
``one_before_raw``): a before/after in one run.
The sides rotate slice by slice so that the machine's noise taxes them alike.
For each N (1, 4 and 16 by default), under ``one_request`` and ``two_requests``, each
client (httpx at the top level, http.client under ``light``): turns per second and the ratio to
in-process, p50 and p95 of a turn, the HTTP overhead of a turn (its p50 minus the in-process
turn's p50, the same work), the floor's p50 (as many bare requests, same client) and the
overhead above it, and the CPU time of a turn above the in-process turn's (this process plus the
server's, from /proc: far steadier than wall time on a loaded machine).

Then ``--profile`` (on by default; ``--no-profile`` to skip) runs a server of its own under
cProfile (its event loop thread: the HTTP side of a turn; the memory's own work runs on the lane
threads, as in-process) for a number of single-client turns, and prints the functions that cost
the most, per turn, to stderr; the JSON holds the loop thread's profiled time per turn and the
top entries (single-client turns in one request).

Run from the repository root::

    .venv/bin/python benchmarks/server.py [--quick] [--clients 1,4,16] [--turns 240] [--slices 9] [--window 100]

The last line of stdout is one JSON object of the figures (milliseconds, turns per second).
"""

from __future__ import annotations

import argparse
import cProfile
import http.client
import importlib.util
import io
import json
import os
import pstats
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx

from fermix_memory import MemorySystem

TOKEN_VAR, TOKEN = "FERMIX_BENCH_OPERATOR", "bench-operator-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
AGENT, OWNER = "ada", "alice"
CONTENT = "I live in Paris and I like green tea; remind me about the concert on Friday"
PROFILED = "--serve-profiled"  # how this script runs a server under cProfile (a child process)


# --- the server -------------------------------------------------------------------------------------


def _serve_command(home: Path, profile_to: Path | None) -> list[str]:
    """How to start ``fermix serve`` on ``home`` (under cProfile when ``profile_to`` is given)."""
    flags = ["--home", str(home), "serve", "--port", "0", "--token-env", TOKEN_VAR]
    if profile_to is None:
        return [sys.executable, "-m", "fermix_memory", *flags]
    return [sys.executable, __file__, PROFILED, str(profile_to), *flags]


@contextmanager
def serving(home: Path, profile_to: Path | None = None,
            source: str | None = None) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A ``fermix serve`` on a free port, and its base URL once it says where it listens;
    ``source``: a folder holding another ``fermix_memory`` package to serve from (a prior
    version of the code, for a before/after in one run)."""
    env = {**os.environ, TOKEN_VAR: TOKEN}
    if source is not None:
        env["PYTHONPATH"] = source
    server = subprocess.Popen(_serve_command(home, profile_to), env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()  # type: ignore[union-attr]
        found = re.search(r"(http://127\.0\.0\.1:\d+)/v1", line)
        if not found:
            raise SystemExit(f"the server did not start: {line}{server.communicate(timeout=30)[1]}")
        yield server, found.group(1)
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)


def serve_profiled(out: str, argv: list[str]) -> None:
    """``fermix <argv>`` under cProfile (the main thread: the event loop), stats written to ``out``
    once the server has stopped (SIGTERM stops it and returns here)."""
    from fermix_memory.entrypoints.cli import run

    profile = cProfile.Profile()
    signal.signal(signal.SIGTERM, lambda *_: None)  # uvicorn raises it again once it has stopped
    signal.signal(signal.SIGUSR1, lambda *_: profile.enable())  # once warm: startup left out
    sys.argv = ["fermix", *argv]
    with suppress(SystemExit):
        run()
    profile.disable()
    profile.dump_stats(out)


# A bare ASGI application under the same uvicorn (same HTTP protocol, event loop and headers, no
# framework, no memory), answering every request with a small fixed JSON body: the floor a turn
# of two requests has here.
BARE_SERVER = """
import asyncio, socket, uvicorn
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 201 if scope["path"] == "/v1/messages" else 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"8")]})
    await send({"type": "http.response.body", "body": b'{"id":1}'})
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
sock.bind(("127.0.0.1", 0))
sock.listen(128)
print(f"serving on http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
try:  # the loop and the headers ``fermix serve`` has (ADR-0094)
    import uvloop
    factory = uvloop.new_event_loop
except ImportError:
    factory = None
config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False)
with asyncio.Runner(loop_factory=factory) as runner:
    runner.run(uvicorn.Server(config).serve(sockets=[sock]))
"""


@contextmanager
def bare_serving() -> Iterator[tuple[int, str]]:
    """The bare application in a process of its own: its pid and its base URL."""
    server = subprocess.Popen([sys.executable, "-c", BARE_SERVER], stdout=subprocess.PIPE, text=True)
    try:
        found = re.search(r"(http://127\.0\.0\.1:\d+)/v1", server.stdout.readline())  # type: ignore[union-attr]
        if not found:
            raise SystemExit("the bare server did not start")
        yield server.pid, found.group(1)
    finally:
        server.terminate()
        server.communicate(timeout=60)


# --- turns ------------------------------------------------------------------------------------------


def _turn(conversation: str) -> dict[str, Any]:
    return {"agent_id": AGENT, "owner_id": OWNER, "conversation": conversation}


def _said(conversation: str, one: bool) -> dict[str, Any]:
    """The user's message; ``one``: asking for the prompt composed after it (a turn in one request)."""
    said = {**_turn(conversation), "role": "user", "content": CONTENT}
    return {**said, "prompt": {}} if one else said


def http_turn(client: httpx.Client, conversation: str, one: bool = False) -> float:
    """One turn with httpx: one request (``one``) or two (an append, then the prompt). Returns
    the first request's latency (ms)."""
    start = time.perf_counter()
    sent = client.post("/v1/messages", headers=AUTH, json=_said(conversation, one))
    first = (time.perf_counter() - start) * 1000
    if one:
        prompt, got = sent, 200 if "prompt" in sent.json() else 0
    else:
        prompt = client.post("/v1/prompt", headers=AUTH, json=_turn(conversation))
        prompt.json()
        got = prompt.status_code
    if sent.status_code != 201 or got != 200:
        raise SystemExit(f"a turn failed: {sent.status_code} {sent.text[:200]} / {prompt.status_code}")
    return first


class LightClient:
    """A keep-alive ``http.client`` connection: a far lighter client than httpx, so that the
    client's own cost weighs less in the figures (the same client on both sides of a compare)."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self._connection = http.client.HTTPConnection(host, int(port), timeout=60)
        self._headers = {**AUTH, "Content-Type": "application/json"}

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        data = json.dumps(body)
        try:
            self._connection.request("POST", path, data, self._headers)
            response = self._connection.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # The server closed the connection while it sat idle (its keep-alive timeout, while
            # another side ran): the request never reached it. Connect again, as httpx does.
            self._connection.close()
            self._connection.request("POST", path, data, self._headers)
            response = self._connection.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self._connection.close()


class RawClient:
    """A keep-alive socket speaking just the HTTP/1.1 these turns need (a request with a
    Content-Length; an answer with one): the lightest client, so that what remains is the
    server's and the transport's. Beside httpx and ``http.client``, never instead of them."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self._address = (host, int(port))
        self._head = (f"Host: {host}:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
                      "Content-Type: application/json\r\nContent-Length: ").encode()
        self._socket = self._connect()

    def _connect(self) -> socket.socket:
        connection = socket.create_connection(self._address, timeout=60)
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        data = json.dumps(body).encode()
        request = b"POST %s HTTP/1.1\r\n%s%d\r\n\r\n%s" % (path.encode(), self._head, len(data), data)
        try:
            return self._exchange(request)
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # The server closed the idle connection (its keep-alive timeout): connect again.
            self._socket.close()
            self._socket = self._connect()
            return self._exchange(request)

    def _exchange(self, request: bytes) -> tuple[int, bytes]:
        self._socket.sendall(request)
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = self._socket.recv(65536)
            if not chunk:
                raise http.client.RemoteDisconnected("closed before an answer")
            got += chunk
        head, body = got.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        fields = dict(line.split(b":", 1) for line in lines[1:])
        length = int({k.strip().lower(): v for k, v in fields.items()}[b"content-length"])
        while len(body) < length:
            chunk = self._socket.recv(65536)
            if not chunk:
                raise http.client.RemoteDisconnected("closed within an answer")
            body += chunk
        return int(lines[0].split()[1]), body

    def close(self) -> None:
        self._socket.close()


def light_turn(client: LightClient | RawClient, conversation: str, one: bool = False) -> float:
    """:func:`http_turn` with the light client."""
    start = time.perf_counter()
    sent, answer = client.post("/v1/messages", _said(conversation, one))
    first = (time.perf_counter() - start) * 1000
    got, prompt = (200, answer) if one else client.post("/v1/prompt", _turn(conversation))
    parsed = json.loads(prompt)
    if sent != 201 or got != 200 or (one and "prompt" not in parsed):
        raise SystemExit(f"a turn failed: {sent} / {got} {prompt[:200]!r}")
    return first


def _cpu_seconds(pid: int | None) -> float:
    """CPU time (user + system, every thread) of the process ``pid``, or of this one."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_slice(turners: list[Callable[[], float | None]], turns: int,
              pid: int | None) -> tuple[float, float, list[float], list[float]]:
    """Each of ``turners`` on a thread of its own, ``turns`` times, all started together: the
    slice's wall time (s), the CPU time it took (s: this process's, plus the server's ``pid``),
    every turn's latency (ms) and every first request's latency (ms, when a turner gives it)."""
    samples: list[list[float]] = [[] for _ in turners]
    firsts: list[list[float]] = [[] for _ in turners]
    gate = threading.Barrier(len(turners) + 1)

    def work(n: int) -> None:
        gate.wait()
        own, first, turn = samples[n], firsts[n], turners[n]
        for _ in range(turns):
            start = time.perf_counter()
            one = turn()
            own.append((time.perf_counter() - start) * 1000)
            if one is not None:
                first.append(one)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(len(turners))]
    for thread in threads:
        thread.start()
    cpu = _cpu_seconds(None) + (_cpu_seconds(pid) if pid else 0.0)
    gate.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    took = time.perf_counter() - start
    cpu = _cpu_seconds(None) + (_cpu_seconds(pid) if pid else 0.0) - cpu
    return took, cpu, [s for own in samples for s in own], [s for own in firsts for s in own]


def _summary(seconds: float, cpu: float, samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    return {"turns_per_s": round(len(samples) / seconds, 1), "p50_ms": round(statistics.median(samples), 3),
            "p95_ms": round(samples[int(len(samples) * 0.95)], 3),
            "cpu_ms_per_turn": round(cpu / len(samples) * 1000, 3)}


def _figures(got: dict[str, dict[str, float]], http: str, bare: str, floor: float) -> dict[str, float]:
    """The overhead of a turn over HTTP (p50, minus in-process), the floor of the same client (as
    many bare requests), and the CPU a turn takes beyond the in-process turn (client + server)."""
    local = got["in_process"]
    overhead = got[http]["p50_ms"] - local["p50_ms"]
    return {"http_overhead_vs_served_calls_p50_ms": round(got[http]["p50_ms"] - got["in_process_api"]["p50_ms"], 3),
            "throughput_ratio": round(got[http]["turns_per_s"] / local["turns_per_s"], 3),
            "p50_ratio": round(got[http]["p50_ms"] / local["p50_ms"], 3),
            "http_overhead_p50_ms": round(overhead, 3), "transport_floor_p50_ms": floor,
            "overhead_above_floor_p50_ms": round(overhead - floor, 3),
            "cpu_overhead_ms_per_turn": round(got[http]["cpu_ms_per_turn"] - local["cpu_ms_per_turn"], 3),
            "bare_cpu_ms": got[bare]["cpu_ms_per_turn"]}


# The sides over HTTP: (server, requests a turn takes, client); the turn through the bare
# application is two requests, the first timed on its own (the floor of one request).
SIDES = {"one": ("http", True, ""), "one_light": ("http", True, "_light"), "two": ("http", False, ""),
         "two_light": ("http", False, "_light"), "bare": ("bare", False, ""), "bare_light": ("bare", False, "_light"),
         "one_raw": ("http", True, "_raw"), "bare_raw": ("bare", False, "_raw"),
         "one_before_light": ("before", True, "_light"), "one_before_raw": ("before", True, "_raw")}
# (the last two only with --before-src)


def compare(servers: dict[str, tuple[int, str]], memory: MemorySystem, clients: int, turns: int, slices: int,
            window: int) -> dict[str, Any]:
    """``clients`` threads over HTTP (each side of :data:`SIDES`) and as many in-process,
    ``slices`` rotating slices of ``turns`` turns in all per slice (after a warm-up of each side);
    each thread moves to a new conversation every ``window`` turns."""
    per_client = max(1, turns // clients)
    kinds: dict[str, tuple[Callable[[str], Any], Callable[[Any, str, bool], float]]] = {
        "": (lambda url: httpx.Client(base_url=url, trust_env=False, timeout=60), http_turn),
        "_light": (LightClient, light_turn), "_raw": (RawClient, light_turn)}
    pools = {name: [kinds[kind][0](servers[server][1]) for _ in range(clients)]
             for name, (server, _, kind) in SIDES.items() if server in servers}
    sessions = [memory.session(agent_id=AGENT, owner_id=OWNER, conversation=f"bench:{clients}-{n}")
                for n in range(clients)]

    def in_process(n: int) -> Callable[[], None]:
        session, done = sessions[n], 0

        def turn() -> None:
            nonlocal session, done
            if done and done % window == 0:  # a new conversation: windows of 1 to ``window`` messages
                session = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=f"bench:{clients}-{n}-{done}")
            session.append("user", CONTENT)
            session.compose_prompt()
            done += 1

        return turn

    def as_served(n: int) -> Callable[[], None]:
        done = 0

        def turn() -> None:  # the calls the server makes for a turn in one request (ADR-0089)
            nonlocal done
            said = {**_turn(f"bench:api:{clients}-{n}-{done - done % window}"), "role": "user", "content": CONTENT}
            memory.append_message(**said)
            memory.compose_prompt(said["agent_id"], said["owner_id"], said["conversation"])
            done += 1

        return turn

    def over_http(name: str, client: Any, n: int) -> Callable[[], float]:
        done, (_, one, kind) = 0, SIDES[name]
        turn_of = kinds[kind][1]

        def turn() -> float:
            nonlocal done
            base = f"bench:{name}:{clients}-{n}"
            first = turn_of(client, base + (f"-{done - done % window}" if done >= window else ""), one)
            done += 1
            return first

        return turn

    sides: dict[str, list[Callable[[], float | None]]] = {
        name: [over_http(name, c, n) for n, c in enumerate(pool)] for name, pool in pools.items()}
    sides["in_process"] = [in_process(n) for n in range(clients)]
    sides["in_process_api"] = [as_served(n) for n in range(clients)]
    pids = {name: servers[server][0] for name, (server, _, _) in SIDES.items() if server in servers}
    names = list(sides)
    seconds, cpu = dict.fromkeys(names, 0.0), dict.fromkeys(names, 0.0)
    samples: dict[str, list[float]] = {name: [] for name in names}
    firsts: dict[str, list[float]] = {name: [] for name in names}
    try:
        for name, side in sides.items():  # warm-up: connections, caches, the first write of each conversation
            run_slice(side, max(2, per_client // 4), pids.get(name))
        for s in range(slices):
            for name in names[s % len(names):] + names[:s % len(names)]:
                took, used, got, first = run_slice(sides[name], per_client, pids.get(name))
                seconds[name] += took
                cpu[name] += used
                samples[name] += got
                firsts[name] += first
                memory.wait_for_background()
    finally:
        for pool in pools.values():
            for client in pool:
                client.close()
    got = {name: _summary(seconds[name], cpu[name], samples[name]) for name in names}
    floors = {kind: (round(statistics.median(firsts["bare" + kind]), 3), got["bare" + kind]["p50_ms"])
              for kind in kinds}
    before = {f"before{kind}": _figures(got, f"one_before{kind}", f"bare{kind}", floors[kind][0])
              for kind in ("_light", "_raw") if f"one_before{kind}" in got}
    return {**got, "bare_one_request_p50_ms": floors[""][0], "bare_light_one_request_p50_ms": floors["_light"][0],
            "bare_raw_one_request_p50_ms": floors["_raw"][0],
            "one_request": {**_figures(got, "one", "bare", floors[""][0]),
                            "light": _figures(got, "one_light", "bare_light", floors["_light"][0]),
                            "raw": _figures(got, "one_raw", "bare_raw", floors["_raw"][0]), **before},
            "two_requests": {**_figures(got, "two", "bare", floors[""][1]),
                             "light": _figures(got, "two_light", "bare_light", floors["_light"][1])}}


# --- the server side of a turn, profiled --------------------------------------------------------------


def profile_server(home: Path, turns: int) -> dict[str, Any]:
    """``turns`` single-client turns against a server under cProfile: its loop thread's time per
    turn and the functions that cost the most (own time), per turn."""
    out = home.parent / "server.prof"
    with serving(home, profile_to=out) as (server, url), \
            httpx.Client(base_url=url, trust_env=False, timeout=60) as client:
        for _ in range(20):
            http_turn(client, "profiled:1", True)
        server.send_signal(signal.SIGUSR1)
        for i in range(turns):
            http_turn(client, f"profiled:{1 + i // 100}", True)
    stats = pstats.Stats(str(out), stream=io.StringIO())
    stats.sort_stats("tottime")
    text = io.StringIO()
    pstats.Stats(str(out), stream=text).sort_stats("tottime").print_stats(25)
    print(text.getvalue(), file=sys.stderr)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])  # type: ignore[attr-defined]
    idle = sum(v[2] for (f, _, name), v in rows if name.startswith("<method 'poll'") or "select" in name)
    total = sum(v[2] for _, v in rows)
    top = [{"function": f"{Path(f).name}:{line}({name})", "own_us_per_turn": round(v[2] / turns * 1e6, 1),
            "calls_per_turn": round(v[1] / turns, 2)} for (f, line, name), v in rows[:12]]
    return {"turns": turns, "loop_busy_ms_per_turn": round((total - idle) / turns * 1000, 3), "top": top}


def _report(clients: int, got: dict[str, Any]) -> None:
    local = got["in_process"]
    print(f"N={clients:>2} in-process turn: {local['turns_per_s']:.1f} turns/s p50 {local['p50_ms']:.3f} ms,"
          f" CPU {local['cpu_ms_per_turn']:.3f} ms/turn", file=sys.stderr)
    suffix = {"httpx": "", "http.client": "_light", "raw socket": "_raw"}
    for requests in ("one_request", "two_requests"):
        for client, nums in (("httpx", got[requests]), ("http.client", got[requests]["light"]),
                             ("raw socket", got[requests].get("raw"))):
            if nums is None:
                continue
            side = got[("one" if requests == "one_request" else "two") + suffix[client]]
            print(f"N={clients:>2} {requests:>12} {client:>11}: {side['turns_per_s']:>7.1f} turns/s p50"
                  f" {side['p50_ms']:.3f} p95 {side['p95_ms']:.3f} ms | ratio {nums['throughput_ratio']:.3f},"
                  f" overhead p50 {nums['http_overhead_p50_ms']:.3f} ms (bare uvicorn floor"
                  f" {nums['transport_floor_p50_ms']:.3f} ms, above it {nums['overhead_above_floor_p50_ms']:.3f} ms);"
                  f" CPU above in-process {nums['cpu_overhead_ms_per_turn']:.3f} ms/turn", file=sys.stderr)
    api, before = got["in_process_api"], got["one_request"].get("before_light")
    above = got["one_request"]["light"]["http_overhead_vs_served_calls_p50_ms"]
    then = "" if before is None else (
        f" (before: p50 {got['one_before_light']['p50_ms']:.3f} ms, above them"
        f" {before['http_overhead_vs_served_calls_p50_ms']:.3f} ms, CPU above in-process"
        f" {before['cpu_overhead_ms_per_turn']:.3f} ms/turn)")
    print(f"N={clients:>2} in-process, the server's calls: p50 {api['p50_ms']:.3f} ms, CPU {api['cpu_ms_per_turn']:.3f}"
          f" ms/turn; one request http.client above them: {above:.3f} ms{then}", file=sys.stderr)
    raw, raw_before = got["one_request"]["raw"], got["one_request"].get("before_raw")
    print(f"N={clients:>2} one request, raw socket: overhead p50 {raw['http_overhead_p50_ms']:.3f} ms, above the"
          f" server's calls {raw['http_overhead_vs_served_calls_p50_ms']:.3f} ms" + ("" if raw_before is None else
          f" (before: p50 {got['one_before_raw']['p50_ms']:.3f} ms, overhead {raw_before['http_overhead_p50_ms']:.3f}"
          f" ms, CPU above in-process {raw_before['cpu_overhead_ms_per_turn']:.3f} ms/turn)"), file=sys.stderr)


# --- main ---------------------------------------------------------------------------------------------


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == PROFILED:
        serve_profiled(sys.argv[2], sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns and slices: well under a minute")
    parser.add_argument("--clients", default="1,4,16", help="the numbers of concurrent clients, comma-separated")
    parser.add_argument("--turns", type=int, default=240, help="turns per slice, spread over the clients")
    parser.add_argument("--slices", type=int, default=9, help="rotations of the sides per number of clients")
    parser.add_argument("--window", type=int, default=100, help="turns per conversation: its largest window")
    parser.add_argument("--no-profile", dest="profile", action="store_false", help="skip the profiled server")
    parser.add_argument("--profile-turns", type=int, default=300)
    parser.add_argument("--before-src", help="a folder holding another fermix_memory package (an earlier version):"
                        " its server is driven too (one request, http.client: one_before_light), in the same run")
    args = parser.parse_args()
    if args.quick:
        args.turns, args.slices, args.profile_turns = 64, 6, 100
    os.environ.setdefault("FERMIX_RECALL_BY_MEANING", "false")  # meaning only where asked for (ADR-0044)
    parser_name = "httptools" if importlib.util.find_spec("httptools") else "h11"  # uvicorn's choice ("auto")
    figures: dict[str, Any] = {"turns_per_slice": args.turns, "slices": args.slices, "window": args.window,
                               "http_parser": parser_name}
    with tempfile.TemporaryDirectory(prefix="fermix-serve-bench-") as work:
        root = Path(work)
        with serving(root / "served") as (served, url), bare_serving() as bare, \
                MemorySystem.open(root / "local") as memory, ExitStack() as more:
            servers = {"http": (served.pid, url), "bare": bare}
            if args.before_src:
                before, before_url = more.enter_context(serving(root / "before", source=args.before_src))
                servers["before"] = (before.pid, before_url)
            for clients in (int(n) for n in args.clients.split(",")):
                got = compare(servers, memory, clients, args.turns, args.slices, args.window)
                figures[f"clients_{clients}"] = got
                _report(clients, got)
        if args.profile:
            figures["server_profile"] = profile_server(root / "profiled", args.profile_turns)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
