"""The OpenAPI document is the API (ADR-0073): checked in, valid, and what every answer matches;
and no body the document's operations can be sent, however wrong, gets a 500 or stores half."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fermix_memory.entrypoints.server.catalog import OPERATIONS as ENDPOINTS
from fermix_memory.entrypoints.server.openapi import body_fields, build_document
from tests.server.conftest import ADA, OPERATOR, Served

jsonschema = pytest.importorskip("jsonschema")

DOCUMENT = build_document()
CHECKED_IN = Path(__file__).parents[2] / "docs" / "openapi.json"
TURN = {"owner_id": "alice", "conversation": "telegram:42"}


def _answer_schema(path: str, method: str, status: int) -> dict[str, Any]:
    responses = DOCUMENT["paths"][path][method]["responses"]
    entry = responses.get(str(status), responses["default"])
    return {**entry["content"]["application/json"]["schema"], "components": DOCUMENT["components"]}


def _check(answer: Any, path: str, method: str) -> Any:
    """``answer`` matches what the document says of its status; its JSON."""
    data = answer.json()
    jsonschema.validate(data, _answer_schema(path, method, answer.status_code))
    return data


def test_the_checked_in_document_is_the_one_the_server_serves(server: Served) -> None:
    # After a change to the API: fermix serve --print-openapi > docs/openapi.json
    assert json.loads(CHECKED_IN.read_text(encoding="utf-8")) == DOCUMENT
    assert server.client.get("/v1/openapi.json").json() == DOCUMENT


def test_every_schema_of_the_document_is_valid_json_schema() -> None:
    assert DOCUMENT["openapi"].startswith("3.1")
    for name, schema in DOCUMENT["components"]["schemas"].items():
        jsonschema.Draft202012Validator.check_schema(schema), name
    operations = {op["operationId"] for methods in DOCUMENT["paths"].values() for op in methods.values()}
    assert operations == {e.name for e in ENDPOINTS}


def test_every_answer_of_a_whole_turn_and_the_reads_matches_the_document(server: Served) -> None:
    steps: list[tuple[str, str, dict[str, str], Any]] = [
        ("post", "/v1/messages", ADA, {**TURN, "role": "user", "content": "I live in Paris"}),
        ("post", "/v1/messages/batch", ADA, {"messages": [{**TURN, "role": "assistant", "content": "Nice."}]}),
        ("post", "/v1/turns/before", ADA, TURN),
        ("post", "/v1/prompt", ADA, {**TURN, "system": "Be brief."}),
        ("post", "/v1/prompt", ADA, {**TURN, "style": "anthropic"}),
        ("post", "/v1/turns/after", ADA, {**TURN, "peak_prompt_tokens": 10}),
        ("post", "/v1/commands", ADA, {**TURN, "text": "hello"}),
        ("post", "/v1/memories", ADA, {"owner_id": "alice", "operations": [
            {"op": "add", "category": "preference", "key": "coffee", "value": "flat white"}]}),
        ("post", "/v1/recall", ADA, {**TURN, "query": "coffee", "source": "all"}),
        ("post", "/v1/recall", ADA, {**TURN, "query": "what did we talk about yesterday?", "source": "history",
                                     "as_of": "2030-01-02T10:00Z"}),
        ("post", "/v1/recall", ADA, {**TURN, "query": "yesterday", "as_of": "yesterday"}),
        ("post", "/v1/tools/call", ADA, {**TURN, "name": "memory_recall", "arguments": {"query": "coffee"}}),
        ("get", "/v1/tools", ADA, None),
        ("get", "/v1/memories", OPERATOR, None),
        ("get", "/v1/history", OPERATOR, None),
        ("get", "/v1/resources", OPERATOR, None),
        ("get", "/v1/events/head", OPERATOR, None),
        ("post", "/v1/events/verify", OPERATOR, {}),
        ("post", "/v1/messages", ADA, {**TURN, "role": "nobody", "content": "x"}),
        ("get", "/v1/memories/12345", OPERATOR, None),
    ]
    for method, path, headers, body in steps:
        if path == "/v1/history":
            answer = server.get(path, headers, agent_id="ada", conversation="telegram:42")
        elif method == "get":
            answer = server.get(path, headers)
        else:
            answer = server.post(path, headers, body)
        template = "/v1/memories/{memory_id}" if path.startswith("/v1/memories/") else path
        _check(answer, template, method)
    row = server.get("/v1/memories", OPERATOR).json()[0]
    _check(server.get(f"/v1/memories/{row['id']}", OPERATOR), "/v1/memories/{memory_id}", "get")
    _check(server.get(f"/v1/memories/{row['id']}/explain", OPERATOR), "/v1/memories/{memory_id}/explain", "get")


JSON = st.recursive(st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
                    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)
POSTS = [e for e in ENDPOINTS if e.method == "POST"]


@st.composite
def requests(draw: st.DrawFn) -> tuple[Any, dict[str, Any], dict[str, str]]:
    endpoint = draw(st.sampled_from(POSTS))
    allowed, _ = body_fields(DOCUMENT, endpoint)
    known = draw(st.dictionaries(st.sampled_from(sorted(allowed)), JSON, max_size=len(allowed)))
    typical = draw(st.fixed_dictionaries({}, optional={
        "owner_id": st.sampled_from(["alice", "", "a" * 300, "x\x00y"]),
        "conversation": st.sampled_from(["telegram:1", "nope", "a:b:c:d", ""]),
        "role": st.sampled_from(["user", "assistant", "tool", "boss"]),
        "content": st.text(max_size=20)}))
    extra = draw(st.dictionaries(st.text(min_size=1, max_size=6), JSON, max_size=1))
    body = {**{k: v for k, v in typical.items() if k in allowed}, **known, **extra}
    headers = draw(st.sampled_from([ADA, OPERATOR]))
    return endpoint, body, headers


def test_no_body_gets_a_500_and_a_refused_one_stores_nothing(server: Served) -> None:
    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(requests())
    def one(request: tuple[Any, dict[str, Any], dict[str, str]]) -> None:
        endpoint, body, headers = request
        before = server.position()
        answer = server.post(endpoint.path, headers, body)
        assert answer.status_code < 500, (endpoint.path, body, answer.text)
        _check(answer, endpoint.path, "post")
        if answer.status_code >= 400:
            assert server.position() == before, (endpoint.path, body)

    one()


def test_recall_over_http_reads_the_days_from_as_of(server: Served) -> None:
    for day, text in ((1, "We planted the tulips."), (2, "The tulips are up already.")):
        answer = server.post("/v1/messages", ADA, {**TURN, "role": "user", "content": text,
                                                   "created_at": f"2024-05-0{day}T10:00:00Z"})
        assert answer.status_code == 201, answer.text
    found = server.post("/v1/recall", ADA, {**TURN, "query": "what did we talk about yesterday?", "source": "history",
                                            "as_of": "2024-05-02T20:00Z"})
    assert [hit["message"]["content"] for hit in found.json()["messages"]] == ["We planted the tulips."]
    refused = server.post("/v1/recall", ADA, {**TURN, "query": "yesterday", "as_of": "2024-05-02T20:00"})
    assert refused.status_code == 400 and "as_of" in refused.text
