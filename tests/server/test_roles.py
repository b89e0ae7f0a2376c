"""Who may do what over HTTP (ADR-0073): a host token speaks for its own agent only, a reader only
reads, a request without a known token gets nothing; and no answer shows one owner's data to a
request about another."""

from __future__ import annotations

import pytest

from tests.server.conftest import ADA, BOB, OPERATOR, READER, Served

TURN = {"owner_id": "alice", "conversation": "telegram:42"}


def _seed(server: Served) -> None:
    server.post("/v1/messages", ADA, {**TURN, "role": "user", "content": "my PIN is 4921"})
    server.post("/v1/memories", ADA, {"owner_id": "alice", "trust": "operator", "operations": [
        {"op": "add", "category": "identity", "key": "pin", "value": "PIN 4921"}]})


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic ada-secret"},
                                     {"Authorization": "Bearer "}, {"Authorization": "ada-secret"}])
def test_no_valid_token_gets_a_401_and_nothing_is_stored(server: Served, headers: dict[str, str]) -> None:
    before = server.position()
    for answer in (server.post("/v1/messages", headers, {**TURN, "agent_id": "ada", "role": "user", "content": "x"}),
                   server.get("/v1/memories", headers), server.get("/v1/events/head", headers)):
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == "unauthenticated"
        assert answer.headers["www-authenticate"] == "Bearer"
    assert server.position() == before


def test_a_host_token_speaks_for_its_own_agent_only(server: Served) -> None:
    _seed(server)
    before = server.position()
    for path, body in [("/v1/messages", {**TURN, "agent_id": "ada", "role": "user", "content": "x"}),
                       ("/v1/prompt", {**TURN, "agent_id": "ada"}),
                       ("/v1/recall", {**TURN, "agent_id": "ada", "query": "PIN"}),
                       ("/v1/memories", {"agent_id": "ada", "owner_id": "alice", "operations": []}),
                       ("/v1/tools/call", {**TURN, "agent_id": "ada", "name": "memory_recall", "arguments": {}})]:
        answer = server.post(path, BOB, body)
        assert answer.status_code == 403, path
        assert answer.json()["error"]["code"] == "forbidden"
    assert server.position() == before
    # Without naming an agent, bob's token reaches bob's memory of alice: nothing of ada's.
    found = server.post("/v1/recall", BOB, {**TURN, "query": "PIN", "source": "all", "scope": "all"}).json()
    assert found["memories"] == [] and found["messages"] == []
    prompt = server.post("/v1/prompt", BOB, TURN).json()["messages"]
    assert "4921" not in str(prompt)


def test_a_host_token_reaches_no_read_of_the_operator(server: Served) -> None:
    _seed(server)
    for path in ("/v1/memories", "/v1/memories/1", "/v1/memories/1/explain", "/v1/history", "/v1/resources",
                 "/v1/resources/user_md/history", "/v1/events/head"):
        answer = server.get(path, ADA)
        assert answer.status_code == 403, path
        assert "4921" not in answer.text
    assert server.post("/v1/events/verify", ADA, {}).status_code == 403


def test_a_reader_reads_and_writes_nothing(server: Served) -> None:
    _seed(server)
    before = server.position()
    assert server.get("/v1/memories", READER, owner_id="alice").status_code == 200
    for path, body in [("/v1/messages", {**TURN, "agent_id": "ada", "role": "user", "content": "x"}),
                       ("/v1/memories", {"agent_id": "ada", "owner_id": "alice", "operations": [
                           {"op": "add", "category": "identity", "key": "k", "value": "v"}]}),
                       ("/v1/turns/after", {**TURN, "agent_id": "ada"}),
                       ("/v1/commands", {**TURN, "agent_id": "ada", "text": "/clear"})]:
        assert server.post(path, READER, body).status_code == 403, path
    assert server.position() == before


def test_an_operator_names_the_agent_and_without_one_gets_a_typed_error(server: Served) -> None:
    ok = server.post("/v1/messages", OPERATOR, {**TURN, "agent_id": "bob", "role": "user", "content": "hi"})
    assert ok.status_code == 201
    missing = server.post("/v1/messages", OPERATOR, {**TURN, "role": "user", "content": "hi"})
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "invalid_identifier"


def test_owner_reads_show_only_the_owner_asked_about(server: Served) -> None:
    _seed(server)
    server.post("/v1/memories", ADA, {"owner_id": "carol", "trust": "operator", "operations": [
        {"op": "add", "category": "identity", "key": "home_city", "value": "Oslo"}]})
    rows = server.get("/v1/memories", READER, agent_id="ada", owner_id="carol").json()
    assert [r["value"] for r in rows] == ["Oslo"]
    files = server.get("/v1/resources", READER, agent_id="ada", owner_id="carol").json()
    assert files and all(f["owner_id"] == "carol" and "4921" not in f["content"] for f in files)


def test_a_write_records_the_tokens_name_as_who_asked(server: Served) -> None:
    written = server.post("/v1/memories", ADA, {"owner_id": "alice", "operations": [
        {"op": "add", "category": "preference", "key": "tea", "value": "Green tea"}]}).json()
    story = server.memory.explain(written[0]["memory_id"])
    assert story["events"][0]["by"]["source_type"] == "api" and story["events"][0]["by"]["source_id"] == "ada-bot"
    named = server.post("/v1/memories", OPERATOR, {"agent_id": "ada", "owner_id": "alice", "source_id": "import-7",
                                                   "operations": [{"op": "add", "category": "preference",
                                                                   "key": "jam", "value": "Fig jam"}]}).json()
    assert server.memory.explain(named[0]["memory_id"])["events"][0]["by"]["source_id"] == "import-7"
