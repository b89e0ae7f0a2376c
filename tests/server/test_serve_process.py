"""``fermix serve`` as a real process (ADR-0073): it refuses to serve unsafely, answers over real
HTTP, and a SIGKILL under load loses nothing it acknowledged, on each store."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.cli_runner import run_cli
from tests.waits import HANG_GUARD_S, until

pytest.importorskip("uvicorn")
TOKEN = {"FERMIX_TEST_OPERATOR": "op-secret-1"}
AUTH = {"Authorization": "Bearer op-secret-1"}
TURN = {"agent_id": "ada", "owner_id": "alice", "conversation": "telegram:42"}


def _serve(home: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "fermix_memory", "--home", str(home), "serve", *flags]


@contextmanager
def serving(home: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A server on a free port of 127.0.0.1, and its base URL, once it says where it listens."""
    server = subprocess.Popen(_serve(home, "--port", "0", "--token-env", "FERMIX_TEST_OPERATOR"),
                              env={**os.environ, **TOKEN}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()  # type: ignore[union-attr]
        found = re.search(r"(http://127\.0\.0\.1:\d+)/v1", line)
        assert found, (line, server.communicate(timeout=HANG_GUARD_S))
        yield server, found.group(1)
    finally:
        if server.poll() is None:
            server.terminate()
        server.communicate(timeout=HANG_GUARD_S)


def test_it_refuses_to_serve_without_a_token_or_on_a_public_address_without_tls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("FERMIX_TEST_OPERATOR", TOKEN["FERMIX_TEST_OPERATOR"])
    bare = run_cli("serve", "--port", "0", home=home)
    assert bare.returncode == 1 and "without tokens" in bare.stderr and len(bare.stderr.splitlines()) == 1
    public = run_cli("serve", "--host", "0.0.0.0", "--port", "0", "--token-env", "FERMIX_TEST_OPERATOR", home=home)
    assert public.returncode == 1 and "without TLS" in public.stderr
    half = run_cli("serve", "--port", "0", "--tls-cert", "c.pem", "--token-env", "FERMIX_TEST_OPERATOR", home=home)
    assert half.returncode == 1 and "--tls-key" in half.stderr
    unset = run_cli("serve", "--port", "0", "--token-env", "FERMIX_NOT_SET_ANYWHERE", home=home)
    assert unset.returncode == 1 and "FERMIX_NOT_SET_ANYWHERE" in unset.stderr
    spec = run_cli("serve", "--print-openapi", home=home)
    assert spec.returncode == 0
    assert spec.stdout == (Path(__file__).parents[2] / "docs" / "openapi.json").read_text(encoding="utf-8")


def test_a_turn_over_real_http(tmp_path: Path) -> None:
    with serving(tmp_path / "home") as (_, url), httpx.Client(base_url=url, trust_env=False,
                                                              timeout=HANG_GUARD_S) as http:
        assert http.post("/v1/messages", json={**TURN, "role": "user", "content": "hi"}).status_code == 401
        sent = http.post("/v1/messages", headers=AUTH, json={**TURN, "role": "user", "content": "I live in Oslo"})
        assert sent.status_code == 201
        prompt = http.post("/v1/prompt", headers=AUTH, json=TURN).json()["messages"]
        assert prompt[-1] == {"role": "user", "content": "I live in Oslo"}
        assert http.get("/v1/openapi.json").json()["openapi"] == "3.1.0"


@pytest.mark.usefixtures("every_store")
def test_a_sigkill_under_load_loses_no_acknowledged_message(tmp_path: Path) -> None:
    home = tmp_path / "home"
    acknowledged: list[tuple[int, str]] = []
    lock = threading.Lock()
    with serving(home) as (server, url):
        def client(n: int) -> None:
            with httpx.Client(base_url=url, trust_env=False, timeout=HANG_GUARD_S) as http:
                for i in range(10_000):
                    text = f"client {n} message {i}"
                    try:
                        answer = http.post("/v1/messages", headers=AUTH, json={**TURN, "role": "user", "content": text})
                    except httpx.TransportError:
                        return  # the server is gone: this one was never acknowledged
                    assert answer.status_code == 201, answer.text
                    with lock:
                        acknowledged.append((answer.json()["id"], text))

        clients = [threading.Thread(target=client, args=(n,)) for n in range(4)]
        for thread in clients:
            thread.start()
        until(lambda: len(acknowledged) >= 60, "60 acknowledged appends")
        server.send_signal(signal.SIGKILL)
        for thread in clients:
            thread.join(HANG_GUARD_S)
    with serving(home) as (_, url), httpx.Client(base_url=url, trust_env=False, timeout=HANG_GUARD_S) as http:
        window = http.get("/v1/history", headers=AUTH, params={"agent_id": "ada", "conversation": "telegram:42"}).json()
        kept = {(m["id"], m["content"]) for m in window}
        assert set(acknowledged) <= kept
        assert http.post("/v1/events/verify", headers=AUTH, json={}).json()["ok"] is True


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README's turn is written for curl")
def test_the_readmes_curl_turn_runs_as_written(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### From any language"):]
    script = section[section.index("```bash\n") + 8:section.index("```\n", section.index("```bash\n") + 8)]
    lines = [line for line in script.splitlines() if not line.startswith(("export ", "fermix serve"))]
    with serving(tmp_path / "home") as (_, url):
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(lines).replace("localhost:8765", url)],
                              env={**os.environ, "FERMIX_TOKEN": TOKEN["FERMIX_TEST_OPERATOR"]},
                              capture_output=True, text=True, timeout=HANG_GUARD_S)
        assert done.returncode == 0, done.stderr
        with httpx.Client(base_url=url, trust_env=False, timeout=HANG_GUARD_S) as http:
            window = http.get("/v1/history", headers=AUTH,
                              params={"agent_id": "ada", "conversation": "telegram:42"}).json()
    assert [m["content"] for m in window] == ["I live in Paris", "Paris!"]
    assert '"error"' not in done.stdout and '"role":"system","content":"You are Ada.' in done.stdout
