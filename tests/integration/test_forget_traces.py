"""Model-call traces keep no model output: a reviewer that echoes the owner's words into an
unusable answer leaves nothing of them behind once the owner is forgotten."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fermix_memory import MemorySystem
from tests.cli_runner import run_cli
from tests.integration.loopback_models import LoopbackModelServer, RecordedRequest, Reply

PIN = "77318642"  # long enough that no hex digest in the file holds it by chance
SECRET = f"My PIN is {PIN}, and my door word is Quokkamarmalade"


def echoing(server: LoopbackModelServer) -> object:
    """A model that repeats the owner's words back instead of answering in the format: first
    as prose, then (the repair turn) as an op and a field name, where the error names them."""
    def respond(request: RecordedRequest) -> Reply:
        said = re.search(r"My PIN is \d+, and my door word is \w+", json.dumps(request.json))
        words = said.group(0) if said else "nothing"
        if len(request.json["messages"]) <= 2:
            return server.ok(f"your words: {words}")
        return server.ok(json.dumps({"operations": [{"op": words}], f"also {words}": 1}))
    return respond


def test_a_reviewer_echoing_the_owner_leaves_nothing_in_traces_after_forget(
        tmp_path: Path, openai_server: LoopbackModelServer) -> None:
    home = tmp_path / "home"
    openai_server.always(echoing(openai_server))  # type: ignore[arg-type]
    config = {"fermix_core": {"providers": [{"name": "echo", "kind": "openai", "base_url": openai_server.base_url,
                                             "model": "m", "retries": 0}]}}
    with MemorySystem.open(home, config=config) as memory:
        memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:alice", role="user",
                              sender="alice", content=SECRET)
        memory.append_message(agent_id="ada", owner_id="bob", conversation="telegram:bob", role="user",
                              sender="bob", content="I collect Bobwombatfacts")
        [result] = memory.review_now(agent_id="ada", owner_id="alice", conversation="telegram:alice")
        assert result.status == "failed"
        assert len(openai_server.requests) == 2  # the answer, then its repair turn: both unusable
        traces = [e.event for e in memory.events() if e.event.kind == "model.call_traced"]
        assert [t.outcome for t in traces] == ["rejected", "rejected"]
        assert any("repair turn" in note for t in traces for note in t.notes)
        assert "left out" in " ".join(note for t in traces for note in t.notes)
        memory.forget_owner("alice")
    scanned = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.name == "memory.db" for p in scanned)
    for path in scanned:
        data = path.read_bytes()
        assert PIN.encode() not in data and b"Quokkamarmalade" not in data, path
    assert b"Bobwombatfacts" in (home / "memory.db").read_bytes()  # the scan can see text at all
    result = run_cli("events", "log", "--limit", "1000", home=home)
    assert result.returncode == 0 and "model.call_traced" in result.stdout
    assert PIN not in result.stdout and "Quokkamarmalade" not in result.stdout
    result = run_cli("events", "log", "--limit", "1000", "--json", home=home)
    assert PIN not in result.stdout
