"""The hash chains of the event log, without any store: digests, chain hashes, which chain a key
belongs to, checkpoints over several heads, the incremental check and relinking.

Hashes are pinned as literals (worked out once from the documented material, below) so that a
change to how a log links fails here, whatever store is in use.
"""

from __future__ import annotations

import hashlib

import attrs
import pytest

from fermix_memory.domain.log_chain import (
    GENESIS_HASH,
    MAX_CHAINS,
    ChainCheck,
    Head,
    LoggedEvent,
    Relink,
    chain_hash,
    chain_of,
    checkpoint_hash,
    follows,
    head_of,
    is_hex_digest,
    payload_digest,
)

ZERO = "0" * 64
AT = "2026-01-01T00:00:00+00:00"
EMPTY_OBJECT_DIGEST = "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"  # sha256(b"{}")
FIRST_HASH = "2e76e79e3b098d6625433785ed93e271b0a4ba6943a85e312173a973f8eca83b"
H1, H2 = "a" * 64, "b" * 64


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def linked(rows: list[tuple[int, str, int]], *, chains: int = 1, chain_for: dict[str, int] | None = None,
           payload: str | None = "{}") -> list[LoggedEvent]:
    """Rows ``(position, stream, version)`` linked as a log of ``chains`` chains."""
    heads = [GENESIS_HASH] * chains
    out = []
    for position, stream, version in rows:
        chain = (chain_for or {}).get(stream, 0)
        digest = payload_digest(payload if payload is not None else "{}")
        h = chain_hash(heads[chain], position, stream, version, "message.appended", 1, AT, digest)
        heads[chain] = h
        out.append(LoggedEvent(position=position, stream=stream, version=version, kind="message.appended",
                               schema=1, recorded_at=AT, payload=payload, payload_sha256=digest, hash=h))
    return out


# --- constants, digests and chain hashes --------------------------------------------------------


def test_the_genesis_hash_is_64_zeros_and_a_log_has_at_most_1024_chains() -> None:
    assert GENESIS_HASH == ZERO
    assert MAX_CHAINS == 1024


def test_a_payload_digest_is_the_sha256_of_its_utf8_text() -> None:
    assert payload_digest("{}") == EMPTY_OBJECT_DIGEST
    assert payload_digest("é") == hashlib.sha256(b"\xc3\xa9").hexdigest()


def test_a_chain_hash_covers_the_previous_hash_and_every_field_but_the_payload() -> None:
    assert chain_hash(ZERO, 1, "s", 1, "k", 1, AT, EMPTY_OBJECT_DIGEST) == FIRST_HASH
    assert sha("\n".join((ZERO, "1", "s", "1", "k", "1", AT, EMPTY_OBJECT_DIGEST))) == FIRST_HASH
    fields = (ZERO, 1, "s", 1, "k", 1, AT, EMPTY_OBJECT_DIGEST)
    changed = (H1, 2, "t", 2, "j", 2, "2026-01-02T00:00:00+00:00", H2)
    for n, other in enumerate(changed):
        varied = list(fields)
        varied[n] = other
        assert chain_hash(*varied) != FIRST_HASH, f"field {n} is covered"  # type: ignore[arg-type]


# --- which chain a key belongs to ---------------------------------------------------------------


@pytest.mark.parametrize(("key", "expected"), [
    ("conversation/a", [0, 0, 0, 0, 8, 888]),
    ("memory/ada/alice", [0, 1, 2, 1, 9, 425]),
    ("", [0, 0, 1, 0, 4, 20]),
    ("résumé", [0, 1, 0, 3, 3, 659]),
])
def test_a_keys_chain_is_the_first_8_bytes_of_its_sha256_modulo_the_chains(key: str, expected: list[int]) -> None:
    assert [chain_of(key, n) for n in (1, 2, 3, 4, 16, 1024)] == expected


# --- positions ----------------------------------------------------------------------------------


def test_one_chain_numbers_its_events_without_gaps_several_only_increase() -> None:
    assert [follows(p, 1, 1) for p in (0, 1, 2, 3)] == [False, False, True, False]
    assert [follows(p, 1, 2) for p in (0, 1, 2, 3)] == [False, False, True, True]
    assert follows(1, 0, 1) and follows(9, 0, 3)


# --- checkpoints and heads ----------------------------------------------------------------------


def test_a_one_chain_checkpoint_is_its_heads_own_hash() -> None:
    assert checkpoint_hash([(7, H1)]) == H1
    assert checkpoint_hash([(0, GENESIS_HASH)]) == GENESIS_HASH


def test_a_checkpoint_over_several_chains_hashes_each_chains_head_in_chain_order() -> None:
    heads = [(1, H1), (0, GENESIS_HASH)]
    expected = "32a47635b89eba87d985ed20b450d2845520c4b693330db4369f29dcb3743915"
    assert checkpoint_hash(heads) == expected
    assert sha(f"checkpoint\n2\n0:1:{H1}\n1:0:{GENESIS_HASH}") == expected
    assert checkpoint_hash(list(reversed(heads))) != expected


def test_a_head_of_one_chain_is_its_last_event_and_of_several_the_checkpoint() -> None:
    one = head_of([(4, H1)])
    assert one == Head(4, H1) and one.chains == ()
    assert str(one) == f"4:{H1}"
    several = head_of([(3, H1), (0, GENESIS_HASH), (5, H2)])
    assert several == Head(5, checkpoint_hash([(3, H1), (0, GENESIS_HASH), (5, H2)]), (3, 0, 5))
    assert str(several) == f"3,0,5:{several.hash}"


# --- the incremental check ----------------------------------------------------------------------


def test_an_empty_check_stands_at_position_0_on_the_genesis_hash() -> None:
    check = ChainCheck()
    assert (check.position, check.events, check.redacted) == (0, 0, 0)
    assert check.head == Head(0, GENESIS_HASH) and check.hash == GENESIS_HASH
    two = ChainCheck(chains=2, chain_of=lambda s: 0)
    assert two.head == Head(0, checkpoint_hash([(0, GENESIS_HASH)] * 2), (0, 0))


def test_several_chains_need_the_chain_of_each_stream_one_does_not() -> None:
    with pytest.raises(ValueError, match="several chains"):
        ChainCheck(chains=2)
    assert ChainCheck(chains=1).head == Head(0, GENESIS_HASH)


def test_a_well_linked_log_passes_and_the_check_counts_events_and_redactions() -> None:
    rows = linked([(1, "a", 1), (2, "b", 1), (3, "a", 2)])
    rows[1] = attrs.evolve(rows[1], payload=None)  # redacted: its digest still links
    check = ChainCheck()
    assert [check.problem(r) for r in rows] == ["", "", ""]
    assert (check.position, check.events, check.redacted) == (3, 3, 1)
    assert check.head == Head(3, rows[2].hash) and check.hash == rows[2].hash


def test_a_gap_in_a_one_chain_log_is_named() -> None:
    rows = linked([(1, "a", 1), (3, "a", 2)])
    check = ChainCheck()
    assert check.problem(rows[0]) == ""
    assert check.problem(rows[1]) == "event 3: expected position 2 (positions run from 1 without gaps)"
    assert (check.position, check.events) == (1, 1), "a bad row does not advance the check"


def test_a_stream_version_out_of_turn_is_named() -> None:
    first = linked([(1, "a", 2)])[0]
    assert ChainCheck().problem(first) == "event 1 (message.appended): version 2 of stream 'a' does not follow 0"
    rows = linked([(1, "a", 1), (2, "a", 1)])
    check = ChainCheck()
    assert check.problem(rows[0]) == ""
    assert check.problem(rows[1]) == "event 2 (message.appended): version 1 of stream 'a' does not follow 1"


def test_a_payload_that_does_not_match_its_digest_is_named() -> None:
    [row] = linked([(1, "a", 1)])
    assert ChainCheck().problem(attrs.evolve(row, payload="{ }")) == (
        "event 1 (message.appended): payload does not match its digest")


def test_a_payload_the_structure_refuses_is_named_with_its_error() -> None:
    [row] = linked([(1, "a", 1)])
    seen: list[tuple[str, int, str]] = []

    def refuse(kind: str, schema: int, payload: str) -> object:
        seen.append((kind, schema, payload))
        raise ValueError("no such field")

    assert ChainCheck(refuse).problem(row) == "event 1 (message.appended): no such field"
    assert seen == [("message.appended", 1, "{}")]
    assert ChainCheck(lambda k, s, p: None).problem(row) == ""
    seen.clear()
    assert ChainCheck(refuse).problem(attrs.evolve(row, payload=None)) == "", "a redacted payload is not structured"
    assert seen == []


def test_a_hash_that_does_not_recompute_is_named() -> None:
    [row] = linked([(1, "a", 1)])
    assert ChainCheck().problem(attrs.evolve(row, hash=H1)) == (
        "event 1 (message.appended): chain hash does not match its contents and the event before")


def test_one_chain_never_asks_a_streams_chain() -> None:
    rows = linked([(1, "a", 1), (2, "b", 1)])
    check = ChainCheck(chains=1, chain_of=lambda s: 1)
    assert [check.problem(r) for r in rows] == ["", ""]


def test_several_chains_link_each_event_to_its_own_chains_last() -> None:
    chain_for = {"a": 0, "b": 1}
    rows = linked([(1, "a", 1), (4, "b", 1), (5, "a", 2), (9, "b", 2)], chains=2, chain_for=chain_for)
    assert rows[2].hash == chain_hash(rows[0].hash, 5, "a", 2, "message.appended", 1, AT, EMPTY_OBJECT_DIGEST)
    check = ChainCheck(chains=2, chain_of=chain_for.__getitem__)
    assert [check.problem(r) for r in rows] == ["", "", "", ""]
    assert check.heads == [(5, rows[2].hash), (9, rows[3].hash)]
    assert check.head == Head(9, checkpoint_hash([(5, rows[2].hash), (9, rows[3].hash)]), (5, 9))
    one_chain = linked([(1, "a", 1), (4, "b", 1)])  # "b" linked to "a", as on one chain
    check = ChainCheck(chains=2, chain_of=chain_for.__getitem__)
    assert check.problem(one_chain[0]) == ""
    assert check.problem(one_chain[1]).endswith("chain hash does not match its contents and the event before")


def test_several_chains_refuse_a_position_that_does_not_increase() -> None:
    chain_for = {"a": 0, "b": 1}
    rows = linked([(2, "a", 1), (2, "b", 1)], chains=2, chain_for=chain_for)
    check = ChainCheck(chains=2, chain_of=chain_for.__getitem__)
    assert check.problem(rows[0]) == ""
    assert check.problem(rows[1]) == "event 2: expected a position after 2 (positions only increase)"


# --- relinking ----------------------------------------------------------------------------------


def test_relinking_onto_one_chain_gives_the_one_chain_hashes_and_never_asks_a_streams_chain() -> None:
    rows = linked([(1, "a", 1), (2, "b", 1), (3, "a", 2)])
    moved = [attrs.evolve(r, hash=H1) for r in rows]

    def never(stream: str) -> int:
        raise AssertionError("one chain needs no stream's chain")

    relink = Relink(1, never)
    assert relink.head == Head(0, GENESIS_HASH)
    assert [relink(r) for r in moved] == rows
    assert relink.head == Head(3, rows[2].hash)


def test_relinking_onto_two_chains_links_each_event_to_its_chains_last_and_keeps_the_rest() -> None:
    one = linked([(1, "a", 1), (2, "b", 1), (3, "a", 2)])
    chain_for = {"a": 0, "b": 1}
    relink = Relink(2, chain_for.__getitem__)
    out = [relink(r) for r in one]
    assert out == linked([(1, "a", 1), (2, "b", 1), (3, "a", 2)], chains=2, chain_for=chain_for)
    assert [attrs.evolve(r, hash="") for r in out] == [attrs.evolve(r, hash="") for r in one]
    assert out[1].hash == chain_hash(GENESIS_HASH, 2, "b", 1, "message.appended", 1, AT, EMPTY_OBJECT_DIGEST)
    assert relink.head == Head(3, checkpoint_hash([(3, out[2].hash), (2, out[1].hash)]), (3, 2))
    check = ChainCheck(chains=2, chain_of=chain_for.__getitem__)
    assert [check.problem(r) for r in out] == ["", "", ""]


@pytest.mark.parametrize(("text", "length", "expected"), [
    ("0123456789abcdef" * 4, 64, True),
    ("0123456789abcdef" * 2, 32, True),
    ("0123456789abcdef" * 2, 64, False),  # too short for a digest
    ("0123456789abcdef" * 4 + "0", 64, False),  # one digit too many
    ("0123456789ABCDEF" * 4, 64, False),  # hashes are written in lower case
    ("0123456789abcdeg" * 4, 64, False),
    ("", 0, True),
])
def test_a_hex_digest_is_its_length_of_lower_case_hex_digits(text: str, length: int, expected: bool) -> None:
    assert is_hex_digest(text, length) is expected


def test_a_hex_digest_is_a_sha256_one_unless_told_otherwise() -> None:
    assert is_hex_digest(payload_digest("x"))
    assert not is_hex_digest("0123456789abcdef" * 2)
