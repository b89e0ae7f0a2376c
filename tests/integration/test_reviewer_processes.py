"""The reviewer across processes: one review per conversation, claims of dead processes, the CLI.

Each test writes ``<home>/config.toml`` pointing at a loopback OpenAI server started by the
test, then runs the installed ``fermix`` command (or ``python -c`` calling its ``main``) in
child processes against that home.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from fermix_memory.application.model_ports import ChatMessage, ChatRequest
from fermix_memory.application.reviewer_prompt import parse_review_input
from fermix_memory.entrypoints.api.memory_system import MemorySystem
from tests.cli_runner import CliResult, run_cli
from tests.integration.loopback_models import LoopbackModelServer, RecordedRequest
from tests.waits import HANG_GUARD_S

FERMIX = Path(sys.executable).parent / "fermix"
AGENT, OWNER, CONV = "ada", "alice", "telegram:1"
ADD_PARIS = json.dumps({"operations": [{"op": "add", "category": "identity", "key": "home_city",
                                        "value": "Lives in Paris"}]})

# Waits for a "go" file (so both children have imported everything and start at once), then
# runs the CLI's main with the remaining arguments.
BARRIER_MAIN = """
import sys, time
from pathlib import Path
from fermix_memory.entrypoints import cli
ready, go = Path(sys.argv[1]), Path(sys.argv[2])
ready.touch()
deadline = time.monotonic() + 60
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.002)
sys.exit(cli.main(sys.argv[3:]))
"""


class FixedClock:
    def __init__(self, at: datetime) -> None:
        self.t = at

    def now(self) -> datetime:
        return self.t


def child_env() -> dict[str, str]:
    """The environment without proxy settings, so loopback stays loopback."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["NO_PROXY"] = "127.0.0.1,localhost"
    env.pop("FERMIX_HOME", None)
    return env


def write_config(home: Path, server: LoopbackModelServer, *, timeout_s: float = 10.0,
                 **memory: Any) -> None:
    home.mkdir(parents=True, exist_ok=True)
    config = {"fermix_core": {
        "providers": [{"name": "primary", "kind": "openai", "base_url": server.base_url, "model": "m1",
                       "retries": 0}],
        "timeouts": {"llm_buffered_s": timeout_s},
        "memory": memory,
    }}
    (home / "config.toml").write_text(tomli_w.dumps(config), encoding="utf-8")


def seed(home: Path, *messages: tuple[str, str, str]) -> None:
    """Append ``(owner, conversation, text)`` user messages (reading ``config.toml``, as the CLI will)."""
    with MemorySystem.open(home) as memory:
        for owner, conversation, text in messages:
            memory.append_message(agent_id=AGENT, owner_id=owner, conversation=conversation, role="user",
                                  content=text, sender=owner, trust="operator")
            memory.append_message(agent_id=AGENT, owner_id=owner, conversation=conversation, role="assistant",
                                  content="Noted.", sender=AGENT)


def fermix(home: Path, *args: str) -> CliResult:
    """The command in this process (the process tests above start real ones)."""
    return run_cli(*args, home=home)


def event_kinds(home: Path) -> list[str]:
    with MemorySystem.open(home) as memory:
        return [item.event.kind for item in memory.events()]


def events_of(home: Path, kind: str) -> list[Any]:
    with MemorySystem.open(home) as memory:
        return [item.event for item in memory.events() if item.event.kind == kind]


def review_texts(request: RecordedRequest) -> list[str]:
    chat = tuple(ChatMessage(role=m["role"], content=m["content"]) for m in request.json["messages"])
    return [m["text"] for m in parse_review_input(ChatRequest(messages=chat))[1]]


def wait_for(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


def assert_one_review(outputs: list[list[Mapping[str, Any]]]) -> None:
    """Exactly one process completed the review; the others skipped it as claimed or found nothing new."""
    completed = [r for out in outputs for r in out if r["status"] == "completed"]
    assert len(completed) == 1, outputs
    assert completed[0]["applied"] == 1
    others = [out for out in outputs if not any(r["status"] == "completed" for r in out)]
    assert len(others) == len(outputs) - 1
    for other in others:
        assert other == [] or [(r["status"], r["reason"]) for r in other] in (
            [("skipped", "claimed")], [("skipped", "no_new_messages")]), outputs


# --- two processes, one review ----------------------------------------------------------------------------


@pytest.mark.usefixtures("every_store")  # on PostgreSQL, as replicas on several hosts would share it
def test_four_processes_started_together_make_exactly_one_review(
    tmp_path: Path, openai_server: LoopbackModelServer,
) -> None:
    home = tmp_path / "home"
    openai_server.always(openai_server.ok(ADD_PARIS, delay_s=1.0))
    write_config(home, openai_server)
    seed(home, (OWNER, CONV, "I live in Paris"))
    go = tmp_path / "go"
    children = []
    for n in range(4):
        ready = tmp_path / f"ready{n}"
        args = [sys.executable, "-c", BARRIER_MAIN, str(ready), str(go),
                "--home", str(home), "memory", "review", "--now", "--json"]
        children.append((ready, subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                                 env=child_env())))
    wait_for(lambda: all(ready.exists() for ready, _ in children))
    go.touch()
    results = [(*child.communicate(timeout=HANG_GUARD_S), child.returncode) for _, child in children]

    for _out, err, code in results:
        assert code == 0, err
    outputs = [json.loads(out) for out, _, _ in results]
    assert_one_review(outputs)
    assert len(openai_server.requests) == 1
    kinds = event_kinds(home)
    assert kinds.count("review.completed") == 1
    assert kinds.count("review.claimed") == 1
    assert kinds.count("memory.added") == 1
    assert "review.failed" not in kinds


def test_two_installed_fermix_commands_at_once_make_exactly_one_review(
    tmp_path: Path, openai_server: LoopbackModelServer,
) -> None:
    home = tmp_path / "home"
    openai_server.always(openai_server.ok(ADD_PARIS, delay_s=1.0))
    write_config(home, openai_server)
    seed(home, (OWNER, CONV, "I live in Paris"))
    args = [str(FERMIX), "--home", str(home), "memory", "review", "--now", "--json"]

    children = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
                for _ in range(2)]
    results = [(*child.communicate(timeout=HANG_GUARD_S), child.returncode) for child in children]

    for _out, err, code in results:
        assert code == 0, err
    assert_one_review([json.loads(out) for out, _, _ in results])
    assert len(openai_server.requests) == 1
    assert event_kinds(home).count("review.completed") == 1


# --- a claim left by a dead process ------------------------------------------------------------------------


def test_a_claim_left_by_a_killed_process_expires_and_a_new_review_runs(
    tmp_path: Path, openai_server: LoopbackModelServer,
) -> None:
    home = tmp_path / "home"
    ttl_s = 1.0
    # The first request is held (far longer than the claim lives); later ones answer at once.
    openai_server.script(openai_server.slow(60.0, text=ADD_PARIS))
    openai_server.always(openai_server.ok(ADD_PARIS))
    write_config(home, openai_server, timeout_s=60.0, review_claim_ttl_s=ttl_s)
    seed(home, (OWNER, CONV, "I live in Paris"))

    child = subprocess.Popen([str(FERMIX), "--home", str(home), "memory", "review", "--now", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env())
    try:
        wait_for(lambda: len(openai_server.requests) == 1 or child.poll() is not None)
        assert child.poll() is None, child.communicate()
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=HANG_GUARD_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL

    [claimed] = events_of(home, "review.claimed")
    assert claimed.expires_at == claimed.at + timedelta(seconds=ttl_s)
    assert not {"review.completed", "review.failed"} & set(event_kinds(home))

    # Before it expires the dead process's claim still holds: no second model call.
    with MemorySystem.open(home, clock=FixedClock(claimed.at + timedelta(seconds=ttl_s / 2))) as memory:
        [held] = memory.review_now(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
        assert (held.status, held.reason) == ("skipped", "claimed")
    assert len(openai_server.requests) == 1

    # Once it has expired (real time now), the CLI takes the conversation over and reviews it.
    wait_for(lambda: datetime.now(UTC) > claimed.expires_at + timedelta(milliseconds=50), timeout_s=ttl_s + 5)
    done = fermix(home, "memory", "review", "--now", "--json")

    assert done.returncode == 0, done.stderr
    [result] = json.loads(done.stdout)
    assert (result["status"], result["applied"], result["messages_reviewed"]) == ("completed", 1, 1)
    assert len(openai_server.requests) == 2
    assert review_texts(openai_server.requests[1]) == ["I live in Paris"]
    claims = events_of(home, "review.claimed")
    assert len(claims) == 2 and claims[1].claim_id != claimed.claim_id
    [completed] = events_of(home, "review.completed")
    assert completed.claim_id == claims[1].claim_id
    with MemorySystem.open(home) as memory:
        assert [(r.key, r.value) for r in memory.memories()] == [("home_city", "Lives in Paris")]


# --- the CLI ------------------------------------------------------------------------------------------------


def test_review_now_json_prints_one_document_and_exits_0(tmp_path: Path, openai_server: LoopbackModelServer) -> None:
    home = tmp_path / "home"
    openai_server.always(openai_server.ok(ADD_PARIS, prompt_tokens=30, completion_tokens=4))
    write_config(home, openai_server)
    seed(home, (OWNER, CONV, "I live in Paris"), (OWNER, "slack:T1:C9", "I like jazz"))

    done = fermix(home, "memory", "review", "--now", "--json")

    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)  # one JSON document, nothing else on stdout
    assert isinstance(results, list) and len(results) == 2
    assert sorted((r["conversation"]["channel"], r["conversation"]["chat_id"], r["status"]) for r in results) == [
        ("slack", "T1", "completed"), ("telegram", "1", "completed")]
    assert all(r["agent_id"] == AGENT and r["owner_id"] == OWNER and r["messages_reviewed"] == 1 for r in results)
    assert len(openai_server.requests) == 2

    again = fermix(home, "memory", "review", "--now", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == []
    assert len(openai_server.requests) == 2


def test_review_now_with_conversation_reviews_only_that_conversation(
    tmp_path: Path, openai_server: LoopbackModelServer,
) -> None:
    home = tmp_path / "home"
    openai_server.always(openai_server.ok("Nothing to save."))
    write_config(home, openai_server)
    seed(home, (OWNER, "telegram:1", "I live in Paris"), (OWNER, "telegram:2", "I like jazz"),
         (OWNER, "slack:1", "I drink tea"))

    done = fermix(home, "memory", "review", "--now", "--conversation", "telegram:1", "--json")

    assert done.returncode == 0, done.stderr
    [result] = json.loads(done.stdout)
    assert result["conversation"] == {"channel": "telegram", "chat_id": "1", "thread_scope": ""}
    assert result["status"] == "completed"
    [request] = openai_server.requests
    assert review_texts(request) == ["I live in Paris"]
    with MemorySystem.open(home) as memory:
        left = memory.awaiting_review()
    assert sorted((c.channel, c.chat_id) for _, _, c in left) == [("slack", "1"), ("telegram", "2")]


def test_review_now_filters_by_agent_and_owner(tmp_path: Path, openai_server: LoopbackModelServer) -> None:
    home = tmp_path / "home"
    openai_server.always(openai_server.ok("Nothing to save."))
    write_config(home, openai_server)
    seed(home, (OWNER, CONV, "I live in Paris"), ("bob", CONV, "I live in Oslo"))

    done = fermix(home, "memory", "review", "--now", "--owner", "bob", "--agent", AGENT, "--json")

    assert done.returncode == 0, done.stderr
    assert [r["owner_id"] for r in json.loads(done.stdout)] == ["bob"]
    assert [review_texts(r) for r in openai_server.requests] == [["I live in Oslo"]]
    nobody = fermix(home, "memory", "review", "--now", "--agent", "nobody", "--json")
    assert nobody.returncode == 0 and json.loads(nobody.stdout) == []


def test_review_without_now_exits_1_with_one_line_on_stderr(
    tmp_path: Path, openai_server: LoopbackModelServer,
) -> None:
    home = tmp_path / "home"
    write_config(home, openai_server)
    seed(home, (OWNER, CONV, "I live in Paris"))

    done = fermix(home, "memory", "review")

    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "--now" in lines[0]
    assert openai_server.requests == []
    assert "review.claimed" not in event_kinds(home)


def test_a_failed_review_is_reported_in_the_json_and_exits_non_zero(
    tmp_path: Path, openai_server: LoopbackModelServer,
) -> None:
    home = tmp_path / "home"
    openai_server.always(openai_server.malformed())
    write_config(home, openai_server, timeout_s=2.0)
    seed(home, (OWNER, CONV, "I live in Paris"))

    done = fermix(home, "memory", "review", "--now", "--json")

    assert done.returncode != 0
    [result] = json.loads(done.stdout)
    assert result["status"] == "failed" and result["reason"]
    kinds = event_kinds(home)
    assert kinds.count("review.failed") == 1 and "memory.added" not in kinds
