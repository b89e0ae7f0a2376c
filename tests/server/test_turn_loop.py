"""A whole turn over HTTP gives what the Python API gives, on each store (ADR-0073)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fermix_memory.adapters.sql.codec import CONVERTER
from tests.server.conftest import ADA, OPERATOR, Served, served

pytestmark = pytest.mark.usefixtures("every_store")
TURN = {"owner_id": "alice", "conversation": "telegram:42"}


def test_a_whole_turn_over_http_is_the_python_apis_turn(server: Served) -> None:
    first = server.post("/v1/messages", ADA, {**TURN, "role": "user", "content": "I live in Paris", "sender": "alice"})
    assert first.status_code == 201
    calls = [{"id": "call_1", "name": "memory_recall", "arguments": {"query": "city"}}]
    reply = server.post("/v1/messages/batch", ADA, {"messages": [
        {**TURN, "role": "assistant", "content": "", "tool_calls": calls},
        {**TURN, "role": "tool", "content": '{"ok": true}', "tool_call_id": "call_1"},
        {**TURN, "role": "assistant", "content": "Paris is lovely."}]})
    assert reply.status_code == 201 and len(reply.json()["ids"]) == 3
    assert reply.json()["ids"][0] > first.json()["id"]

    assert server.post("/v1/turns/before", ADA, {**TURN, "context_window": 100_000}).json()["compacted"] is False
    openai = server.post("/v1/prompt", ADA, {**TURN, "system": "Be brief."}).json()["messages"]
    assert openai == server.memory.compose_prompt("ada", "alice", "telegram:42", system="Be brief.")
    anthropic = server.post("/v1/prompt", ADA, {**TURN, "style": "anthropic"}).json()
    system, messages = server.memory.compose_prompt("ada", "alice", "telegram:42", style="anthropic")
    assert anthropic == {"system": system, "messages": messages}
    assert server.post("/v1/turns/after", ADA, {**TURN, "peak_prompt_tokens": 900}).status_code == 202

    assert server.post("/v1/commands", ADA, {**TURN, "text": "just chatting"}).json() == {"result": None}
    written = server.post("/v1/memories", ADA, {"owner_id": "alice", "trust": "operator", "operations": [
        {"op": "add", "category": "preference", "key": "coffee", "value": "Prefers flat whites"}]})
    assert written.json()[0]["status"] == "added"
    found = server.post("/v1/recall", ADA, {**TURN, "query": "flat whites", "mode": "keyword"}).json()
    assert [hit["memory"]["key"] for hit in found["memories"]] == ["coffee"]
    tool = server.post("/v1/tools/call", ADA, {**TURN, "name": "memory_store",
                                               "arguments": {"key": "dog", "value": "has a dog called Rex"}}).json()
    assert tool["ok"] is True
    stored = server.memory.memory_by_key(agent_id="ada", owner_id="alice", conversation="telegram:42", key="dog")
    assert stored is not None and stored.value == "has a dog called Rex"
    names = [t["function"]["name"] for t in server.get("/v1/tools", ADA).json()]
    assert "memory_store" in names and "memory_recall" in names

    reset = server.post("/v1/commands", ADA, {**TURN, "text": "/new", "trust": "operator"}).json()["result"]
    assert reset["command"] == "/new" and reset["ok"] is True
    assert server.memory.history("ada", "telegram:42") == []


def test_the_operators_reads_are_the_python_apis(server: Served) -> None:
    server.post("/v1/messages", ADA, {**TURN, "role": "user", "content": "I live in Lyon"})
    server.post("/v1/memories", ADA, {"owner_id": "alice", "trust": "operator", "operations": [
        {"op": "add", "category": "identity", "key": "home_city", "value": "Lyon"}]})
    rows = server.get("/v1/memories", OPERATOR, agent_id="ada", owner_id="alice").json()
    assert [r["key"] for r in rows] == [m.key for m in server.memory.memories(agent_id="ada", owner_id="alice")]
    row = rows[0]
    assert server.get(f"/v1/memories/{row['id']}", OPERATOR).json() == row
    story = server.get(f"/v1/memories/{row['id']}/explain", OPERATOR).json()
    assert story == server.memory.explain(row["id"])
    window = server.get("/v1/history", OPERATOR, agent_id="ada", conversation="telegram:42").json()
    assert [m["content"] for m in window] == ["I live in Lyon"]
    files = server.get("/v1/resources", OPERATOR, agent_id="ada", owner_id="alice").json()
    assert files == [CONVERTER.unstructure(r) for r in server.memory.resources(agent_id="ada", owner_id="alice")]
    assert "user_md" in {f["name"] for f in files}
    server.post("/v1/memories", ADA, {"owner_id": "alice", "trust": "operator", "operations": [
        {"op": "add", "category": "preference", "key": "tea", "value": "Green tea"}]})
    history = server.get("/v1/resources/user_md/history", OPERATOR, agent_id="ada", owner_id="alice").json()
    assert [r["revision"] for r in history] == [
        r.revision for r in server.memory.resource_history("user_md", agent_id="ada", owner_id="alice")]
    assert len(history) >= 2
    diff = server.get("/v1/resources/user_md/diff", OPERATOR, agent_id="ada", owner_id="alice",
                      a=history[-1]["revision"], b=history[0]["revision"]).json()["diff"]
    assert diff == server.memory.resource_diff("user_md", history[-1]["revision"], history[0]["revision"],
                                               agent_id="ada", owner_id="alice")
    assert "+- tea: Green tea" in diff
    head = server.get("/v1/events/head", OPERATOR).json()
    assert head["text"] == str(server.memory.head())
    report = server.post("/v1/events/verify", OPERATOR, {"expect_head": head["text"]}).json()
    assert report["ok"] is True and report["events"] >= 4
    cut = server.post("/v1/events/verify", OPERATOR, {"expect_head": "999:" + "0" * 64}).json()
    assert cut["ok"] is False


def test_a_batch_with_one_bad_message_stores_none_of_it(server: Served) -> None:
    before = server.position()
    answer = server.post("/v1/messages/batch", ADA, {"messages": [
        {**TURN, "role": "user", "content": "fine"}, {**TURN, "role": "boss", "content": "bad role"}]})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_message"
    assert server.position() == before
    assert server.memory.history("ada", "telegram:42") == []


def _kinds(server: Served, after: int) -> list[str]:
    return [entry.kind for entry in server.memory.log_entries(after=after)]


def test_a_turn_in_one_request_is_the_append_then_the_prompt(server: Served) -> None:
    """``POST /v1/messages`` with ``prompt`` (ADR-0089): the same message, the same events and the
    same prompt as an append followed by ``POST /v1/prompt``."""
    start = server.position()
    two = server.post("/v1/messages", ADA, {**TURN, "conversation": "telegram:1", "role": "user", "content": "Hi"})
    prompt = server.post("/v1/prompt", ADA, {**TURN, "conversation": "telegram:1", "system": "Be brief."}).json()
    middle = server.position()
    one = server.post("/v1/messages", ADA, {**TURN, "role": "user", "content": "Hi", "prompt": {"system": "Be brief."}})
    assert one.status_code == two.status_code == 201
    assert set(one.json()) == {"id", "prompt"} and set(two.json()) == {"id"}
    assert one.json()["prompt"] == prompt
    assert one.json()["prompt"]["messages"] == server.memory.compose_prompt("ada", "alice", "telegram:42",
                                                                            system="Be brief.")
    assert _kinds(server, middle) == _kinds(server, start)[:len(_kinds(server, middle))]
    assert len(_kinds(server, middle)) == middle - start
    anthropic = server.post("/v1/messages", OPERATOR, {**TURN, "agent_id": "ada", "role": "assistant",
                                                       "content": "Hello!", "prompt": {"style": "anthropic"}}).json()
    system, messages = server.memory.compose_prompt("ada", "alice", "telegram:42", style="anthropic")
    assert anthropic["prompt"] == {"system": system, "messages": messages}
    assert [m.content for m in server.memory.history("ada", "telegram:42")] == ["Hi", "Hello!"]


@pytest.mark.parametrize(("option", "code"), [
    ({"style": "markdown"}, "invalid_argument"), ({"system": 42}, "invalid_argument"),
    ({"system": "x" * 200_001}, "invalid_argument"), ({"as_of": "2024-01-01T00:00Z"}, "unknown_field"),
    ({"styles": "openai"}, "unknown_field"), ("openai", "invalid_argument"), (None, "invalid_argument"),
    ([], "invalid_argument")])
def test_a_bad_prompt_option_is_a_typed_refusal_and_stores_nothing(server: Served, option: object,
                                                                    code: str) -> None:
    before = server.position()
    answer = server.post("/v1/messages", ADA, {**TURN, "role": "user", "content": "hi", "prompt": option})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == code, answer.text
    batch = server.post("/v1/messages/batch", ADA, {"messages": [{**TURN, "role": "user", "content": "hi",
                                                                  "prompt": {}}]})
    assert batch.status_code == 400 and batch.json()["error"]["code"] == "invalid_message"
    assert server.position() == before and server.memory.history("ada", "telegram:42") == []


def test_a_turn_request_over_the_limit_or_not_json_stores_nothing(tmp_path: Path) -> None:
    for served_memory in served(tmp_path / "home", max_body=2_000):
        before = served_memory.position()
        big = served_memory.post("/v1/messages", ADA, {**TURN, "role": "user", "content": "x" * 3_000, "prompt": {}})
        assert big.status_code == 413 and big.json()["error"]["code"] == "body_too_large"
        for raw in (b'{"prompt": {}', b'{"prompt": {}, "prompt": {}}', b"[]"):
            bad = served_memory.client.post("/v1/messages", headers={**ADA, "Content-Type": "application/json"},
                                            content=raw)
            assert bad.status_code == 400 and bad.json()["error"]["code"] == "malformed_json", bad.text
        unknown = served_memory.post("/v1/messages", ADA, {**TURN, "role": "user", "content": "x", "prompt": {},
                                                           "promptly": True})
        assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "unknown_field"
        assert served_memory.position() == before
