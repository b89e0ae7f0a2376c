"""The store's put takes shortcuts that must land where the general path lands: the command it
builds equals what the host-input converter makes of the same arguments, and a key is canonical
exactly when folding it leaves it as it is."""

from __future__ import annotations

import json
import random
import string

import pytest

from fermix_memory.application.commands import WriteMemory
from fermix_memory.application.host_input import converter
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.operations import AddOperation, ArchiveOperation
from fermix_memory.domain.values import is_canonical_key, normalise_key
from fermix_memory.entrypoints.integrations.langgraph_items import (
    CATEGORY,
    SOURCE_TYPE,
    ValueNotStorable,
    encode,
    place_of,
    row_key,
    write_command,
)


def _folds_to_itself(key: str) -> bool:
    try:
        return normalise_key(key) == key
    except DomainError:
        return False


@pytest.mark.parametrize("trust", ["guest", "operator"])
@pytest.mark.parametrize("namespace", [("memories", "alice"), ("memories", "bob", "notes", "x:y%z"), ("solo",)])
def test_the_built_command_is_the_one_the_converter_makes(namespace: tuple[str, ...], trust: str) -> None:
    place = place_of(namespace, 1, default_owner="shared")
    operations = [AddOperation(category=CATEGORY, key=row_key("new-1"), value='{"key":"new-1","value":{}}'),
                  ArchiveOperation(id=7, reason="deleted through the LangGraph store")]
    built = write_command(place, "bench", trust, operations)
    parsed = converter.structure(
        {"operations": operations, "agent_id": "bench", "owner_id": place.owner_id, "writer": "tool",
         "trust": trust, "conversation": place.conversation, "source_type": SOURCE_TYPE}, WriteMemory)
    assert built == parsed
    assert built.context() == parsed.context()


_ALPHABET = string.ascii_lowercase + string.digits + "_.-/ " + "AZ\u00e9\u2160\uff41__"


def test_a_key_is_canonical_exactly_when_folding_leaves_it_as_it_is() -> None:
    rng = random.Random(35)
    keys = ["a", "a.b", "a_b", "a__b", "_a", "a_", ".a", "a.", "A", "k." + "0" * 40, "a" * 64, "a" * 65,
            "new-100-3", "coffee order", "\u2170", "\uff41", "", " a", "a..b", "a_.b"]
    keys += ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 70))) for _ in range(3000)]
    for key in keys:
        assert is_canonical_key(key) is _folds_to_itself(key), key


def test_a_row_key_is_the_item_key_only_when_canonical_and_no_digest_shape() -> None:
    assert row_key("coffee_order") == "coffee_order"
    for key in ("new-100-3", "Coffee", "a__b", "k." + "0" * 40, "ünïcode"):
        made = row_key(key)
        assert made.startswith("k.") and len(made) == 42 and is_canonical_key(made)
    assert row_key("new-100-3") != row_key("new-100-4")


def _random_json(rng: random.Random, depth: int) -> object:
    kind = rng.randrange(8 if depth > 0 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randint(-10**20, 10**20)
    if kind == 2:
        return rng.uniform(-1e9, 1e9)
    if kind in (3, 4, 5):
        return "".join(rng.choice("ab \"\\\n\u00e9\u4e2d\U0001f600/") for _ in range(rng.randint(0, 8)))
    if kind == 6:
        return [_random_json(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {str(i) + rng.choice("xy\u00e9"): _random_json(rng, depth - 1) for i in range(rng.randint(0, 3))}


def test_an_item_text_is_the_json_the_standard_encoder_writes() -> None:
    rng = random.Random(35)
    for i in range(500):
        value = {"v": _random_json(rng, 4)}
        text = encode(f"key-{i}", value)
        assert text == json.dumps({"key": f"key-{i}", "value": value}, ensure_ascii=False, allow_nan=False,
                                  separators=(",", ":"))
        assert json.loads(text) == {"key": f"key-{i}", "value": value}


@pytest.mark.parametrize("value", [{"n": float("nan")}, {"t": (1, 2)}, {1: "x"}, {"s": {1, 2}}])
def test_what_would_not_come_back_equal_is_refused(value: dict[object, object]) -> None:
    with pytest.raises(ValueNotStorable):
        encode("k", value)


def test_a_value_holding_itself_is_refused() -> None:
    value: dict[str, object] = {}
    value["self"] = value
    with pytest.raises(ValueNotStorable):
        encode("k", value)
