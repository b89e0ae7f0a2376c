"""Background work when a memory closes, or its process ends without closing it (ADR-0055).

A review a turn queued is run by ``close()`` while ``close_wait_s`` lasts, even behind upkeep (the
vectors of recall by meaning); one left over is recorded (``review.skipped``, reason
``left_at_close``) and runs after the memory next opens. A process that ends without ``close()``
gets the same, through the memory's exit hook, and says nothing on stderr.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fermix_memory import ConversationKey, MemorySystem
from fermix_memory.application import review_queue
from fermix_memory.application.background import BackgroundWorker
from fermix_memory.entrypoints.bootstrap import bootstrap
from tests.integration.fake_embedder import ConceptEmbedder

pytestmark = pytest.mark.usefixtures("every_store")

AGENT, OWNER, CONV = "ada", "alice", "cli:1"
REPO = Path(__file__).resolve().parents[2]
WAIT_S = 60.0  # how long a condition may take to come true on a loaded machine


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {WAIT_S} s: {what}")
        time.sleep(0.01)


def kinds_and_reasons(memory: MemorySystem) -> list[tuple[str, str]]:
    return [(r.event.kind, getattr(r.event, "reason", "")) for r in memory.events()
            if r.event.kind.startswith("review.")]


def chat(memory: MemorySystem) -> None:
    s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
    s.append("user", "I live in Paris and I like tea")
    s.append("assistant", "Noted")


def held_worker() -> tuple[BackgroundWorker, threading.Event]:
    """A worker busy with a job until the returned event is set: what a turn queues waits."""
    worker, started, gate = BackgroundWorker("test-held"), threading.Event(), threading.Event()
    worker.submit(("held",), lambda: started.set() or gate.wait(WAIT_S))
    assert started.wait(WAIT_S)
    return worker, gate


def closing(memory: MemorySystem, worker: BackgroundWorker) -> threading.Thread:
    """Start closing ``memory`` on a thread; return once its worker takes nothing new."""
    thread = threading.Thread(target=memory.close)
    thread.start()
    wait_for(lambda: worker.submit(("probe", object()), lambda: None).done(), "closing began")
    return thread


def test_close_runs_the_review_a_turn_queued_behind_the_vectors_upkeep(tmp_path: Path) -> None:
    worker, gate = held_worker()
    memory = MemorySystem(bootstrap(tmp_path / "home", config={"fermix_core": {}}, background=worker,
                                    embedder=ConceptEmbedder()))
    chat(memory)  # queues the vectors' upkeep, then the review, behind the held job
    review = memory.after_turn(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
    thread = closing(memory, worker)
    gate.set()
    thread.join(WAIT_S)
    assert review.result(0).status == "completed"
    with MemorySystem.open(tmp_path / "home", config={"fermix_core": {}}) as reopened:
        assert ("review.completed", "") in kinds_and_reasons(reopened)
        assert reopened.awaiting_review() == []
        assert [m.key for m in reopened.memories(agent_id=AGENT, owner_id=OWNER)]


def test_a_review_left_when_the_wait_is_over_is_recorded_and_runs_after_the_next_opening(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    home = tmp_path / "home"
    worker, gate = held_worker()
    memory = MemorySystem(bootstrap(home, config={"fermix_core": {"timeouts": {"close_wait_s": 0}}},
                                    background=worker))
    chat(memory)
    memory.after_turn(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
    with caplog.at_level(logging.WARNING, logger="fermix_memory"):
        thread = closing(memory, worker)
        gate.set()
        thread.join(WAIT_S)
    assert any("closed before it ran" in r.getMessage() for r in caplog.records)
    # A short command closes before the left review's delay is over: it stays recorded.
    with MemorySystem.open(home, config={"fermix_core": {}}) as short:
        assert kinds_and_reasons(short) == [("review.skipped", "left_at_close")]
    monkeypatch.setattr(review_queue, "OPEN_DELAY_S", 0.0)
    with MemorySystem.open(home, config={"fermix_core": {}}) as host:
        wait_for(lambda: ("review.completed", "") in kinds_and_reasons(host), "the left review ran")
        assert host.awaiting_review() == []


def test_a_review_that_was_not_due_is_not_recorded_when_left(tmp_path: Path) -> None:
    """Under the review interval the review would have skipped: nothing is lost, nothing recorded."""
    home = tmp_path / "home"
    config = {"fermix_core": {"timeouts": {"close_wait_s": 0}}}
    with MemorySystem.open(home, config=config) as memory:
        chat(memory)
        assert memory.review_now(agent_id=AGENT)[0].status == "completed"
    worker, gate = held_worker()
    memory = MemorySystem(bootstrap(home, config=config, background=worker))
    memory.session(agent_id=AGENT, owner_id=OWNER, conversation=CONV).append("user", "I also like chess")
    memory.after_turn(agent_id=AGENT, owner_id=OWNER, conversation=CONV)
    thread = closing(memory, worker)
    gate.set()
    thread.join(WAIT_S)
    with MemorySystem.open(home, config=config) as reopened:
        assert ("review.skipped", "left_at_close") not in kinds_and_reasons(reopened)
        assert reopened.awaiting_review() == [(AGENT, OWNER, ConversationKey("cli", "1"))]


# argv: home. A host that ends without close(), its vectors' upkeep and a review still queued.
NO_CLOSE = r"""
import sys
from fermix_memory import MemorySystem
from tests.integration.fake_embedder import ConceptEmbedder

memory = MemorySystem.open(sys.argv[1], config={"fermix_core": {}}, embedder=ConceptEmbedder())
s = memory.session(agent_id="ada", owner_id="alice", conversation="cli:1")
for i in range(50):
    s.append("user", f"I live in Paris and I like tea, message {i}")
s.append("assistant", "Noted")
s.after_turn()
print("queued", flush=True)
"""


def test_a_process_that_ends_without_close_does_the_queued_review_and_says_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = subprocess.run([sys.executable, "-c", NO_CLOSE, str(home)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert (done.returncode, done.stdout, done.stderr) == (0, "queued\n", "")
    with MemorySystem.open(home, config={"fermix_core": {}}, embedder=ConceptEmbedder()) as reopened:
        assert ("review.completed", "") in kinds_and_reasons(reopened)
        assert reopened.fill_vectors() >= 0  # what the upkeep left is still queued: embedded now
        assert reopened.recall("where does alice live", agent_id=AGENT, owner_id=OWNER, conversation=CONV,
                               source="history", mode="semantic").messages
