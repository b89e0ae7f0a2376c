"""Erased rows as of a moment over HTTP (ADR-0083), on each store: the same placeholders as the
Python API, no content, for reader and operator tokens only."""

from __future__ import annotations

import pytest

from tests.server.conftest import ADA, OPERATOR, READER, Served

pytestmark = pytest.mark.usefixtures("every_store")


def test_the_erased_rows_of_a_moment_as_the_python_api_gives_them(server: Served) -> None:
    [added] = server.post("/v1/memories", OPERATOR, {
        "agent_id": "ada", "owner_id": "alice", "trust": "operator",
        "operations": [{"op": "add", "category": "identity", "key": "pet", "value": "a Quetzalcoatlus"}]}).json()
    row = server.memory.memory(added["memory_id"])
    server.memory.forget_memory(row.id, by="olga")
    moment = row.created_at.isoformat()
    answer = server.get("/v1/memories-erased", READER, agent_id="ada", as_of=moment)
    assert answer.status_code == 200, answer.text
    [erased] = answer.json()
    assert erased["memory_id"] == row.id and erased["erased_by"] == "operator olga"
    assert erased["receipt"] == server.memory.erased_memories(as_of=moment)[0].receipt
    assert "Quetzalcoatlus" not in answer.text and "pet" not in answer.text
    erased_at = server.memory.erased_memories(as_of=moment)[0].erased_at
    assert erased_at is not None
    assert server.get("/v1/memories-erased", OPERATOR, as_of=erased_at.isoformat()).json() == []
    assert server.get("/v1/memories-erased", READER).status_code == 400
    assert server.get("/v1/memories-erased", ADA, as_of=moment).status_code == 403
