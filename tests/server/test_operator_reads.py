"""The operator's log pages and history search over HTTP (ADR-0073), on each store."""

from __future__ import annotations

import pytest

from tests.server.conftest import ADA, OPERATOR, READER, Served

pytestmark = pytest.mark.usefixtures("every_store")
TURN = {"owner_id": "alice", "conversation": "telegram:42"}


def test_the_log_reads_page_by_page_as_the_python_api_does(server: Served) -> None:
    for n in range(5):
        server.post("/v1/messages", ADA, {**TURN, "role": "user", "content": f"message {n}"})
    first = server.get("/v1/events/log", READER, limit=3).json()
    assert [e["position"] for e in first["entries"]] == [1, 2, 3] and first["next_after"] == 3
    rest = server.get("/v1/events/log", READER, after=first["next_after"], limit=1000).json()
    assert rest["next_after"] is None
    everything = first["entries"] + rest["entries"]
    assert [e["position"] for e in everything] == [e.position for e in server.memory.log_entries()]
    assert everything[0]["kind"] == "message.appended" and everything[0]["event"]["content"] == "message 0"
    only = server.get("/v1/events/log", OPERATOR, kind="message.appended").json()["entries"]
    assert {e["kind"] for e in only} == {"message.appended"}
    for bad in ({"limit": 0}, {"limit": 1001}, {"after": -1}, {"after": "x"}):
        answer = server.get("/v1/events/log", READER, **bad)
        assert answer.status_code == 400, bad
    assert server.get("/v1/events/log", ADA).status_code == 403


def test_history_search_finds_the_owners_words_and_no_one_elses(server: Served) -> None:
    server.post("/v1/messages", ADA, {**TURN, "role": "user", "content": "Where should I buy a cello?"})
    server.post("/v1/messages", ADA, {**TURN, "role": "assistant", "content": "Try the shop near the river."})
    server.post("/v1/messages", ADA, {"owner_id": "bob", "conversation": "telegram:7", "role": "user",
                                      "content": "my cello is broken"})
    found = server.get("/v1/history/search", READER, agent_id="ada", owner_id="alice", q="cello",
                       mode="keyword").json()
    texts = [hit["message"]["content"] for hit in found["messages"]]
    assert "Where should I buy a cello?" in texts and "my cello is broken" not in texts
    assert "Try the shop near the river." in texts  # the answer to the question it found


def test_owners_are_listed_with_their_live_and_archived_rows(server: Served) -> None:
    for owner, key in (("alice", "tea"), ("alice", "coffee"), ("carol", "city")):
        server.post("/v1/memories", OPERATOR, {"agent_id": "ada", "owner_id": owner, "trust": "operator",
                                               "operations": [{"op": "add", "category": "preference", "key": key,
                                                               "value": f"{owner} {key}"}]})
    server.post("/v1/memories", OPERATOR, {"agent_id": "bob", "owner_id": "alice", "trust": "operator",
                                           "operations": [{"op": "add", "category": "identity", "key": "k",
                                                           "value": "v"}]})
    rows = server.get("/v1/memories", OPERATOR, agent_id="ada", owner_id="alice").json()
    server.post("/v1/memories", OPERATOR, {"agent_id": "ada", "owner_id": "alice", "trust": "operator",
                                           "operations": [{"op": "archive", "id": next(
                                               r["id"] for r in rows if r["key"] == "coffee")}]})
    listed = server.get("/v1/owners", READER).json()
    assert listed == [{"agent_id": "ada", "owner_id": "alice", "live": 1, "archived": 1},
                      {"agent_id": "ada", "owner_id": "carol", "live": 1, "archived": 0},
                      {"agent_id": "bob", "owner_id": "alice", "live": 1, "archived": 0}]
    assert server.get("/v1/owners", READER, agent_id="bob").json() == listed[2:]
    assert [o.owner_id for o in server.memory.owners(agent_id="ada")] == ["alice", "carol"]
