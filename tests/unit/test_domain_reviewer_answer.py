"""The reviewer's answer: how many source message ids one operation may name, in the parser and
in the structured-output schema providers enforce (the same limit, written here as a literal)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fermix_memory.domain.errors import ReviewerAnswerError
from fermix_memory.domain.operations import AddOperation, ArchiveOperation
from fermix_memory.domain.reviewer_answer import MAX_SOURCE_IDS, OPERATIONS_SCHEMA, parse_reviewer_answer

LIMIT = 50


def answer(*ops: dict[str, object]) -> str:
    return json.dumps({"operations": list(ops)})


def test_the_source_id_limit_is_50() -> None:
    assert MAX_SOURCE_IDS == LIMIT


def test_exactly_50_source_ids_are_accepted_and_51_refused() -> None:
    ids = list(range(1, LIMIT + 1))
    assert parse_reviewer_answer(answer({"op": "archive", "id": 1, "source_message_ids": ids})) == [
        ArchiveOperation(id=1, source_message_ids=tuple(ids))]
    add = {"op": "add", "category": "goal", "key": "k", "value": "v"}
    assert parse_reviewer_answer(answer({**add, "source_message_ids": ids})) == [
        AddOperation(category="goal", key="k", value="v", source_message_ids=tuple(ids))]
    with pytest.raises(ReviewerAnswerError, match='"source_message_ids" has more than 50 ids'):
        parse_reviewer_answer(answer({"op": "archive", "id": 1, "source_message_ids": [*ids, LIMIT + 1]}))


def test_51_ids_are_refused_even_when_duplicates_fold_to_fewer() -> None:
    # The limit is on what the model wrote, before duplicates are folded.
    with pytest.raises(ReviewerAnswerError, match="more than 50 ids"):
        parse_reviewer_answer(answer({"op": "archive", "id": 1, "source_message_ids": [7] * (LIMIT + 1)}))
    assert parse_reviewer_answer(answer({"op": "archive", "id": 1, "source_message_ids": [7] * LIMIT})) == [
        ArchiveOperation(id=1, source_message_ids=(7,))]


def test_every_operation_of_the_schema_allows_50_source_ids_and_50_operations() -> None:
    properties: Any = OPERATIONS_SCHEMA["properties"]
    operations = properties["operations"]
    assert operations["maxItems"] == 50
    limits = [op["properties"]["source_message_ids"]["maxItems"] for op in operations["items"]["anyOf"]]
    assert limits == [50, 50, 50]


def test_a_refused_answer_is_quoted_for_the_model_and_left_out_of_the_record() -> None:
    quoting = ReviewerAnswerError("not JSON: ", "my address is 1 Main St")
    assert str(quoting) == "not JSON: my address is 1 Main St"
    assert quoting.without_answer == "not JSON: (the answer's text is left out)"
    plain = ReviewerAnswerError("too long")
    assert (str(plain), plain.without_answer) == ("too long", "too long")
