"""A receipt of an erasure: its canonical body, the strict reading of a receipt file, and the
check that a log bears it out (every way a log or a receipt can be changed is named)."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from fermix_memory.domain.log_chain import GENESIS_HASH, Head, LoggedEvent, chain_hash, checkpoint_hash, payload_digest
from fermix_memory.domain.receipts import (
    BadReceipt,
    Receipt,
    ReceiptCheck,
    canonical,
    check_problems,
    parse_head,
    parse_receipt,
)

KEY = "ed25519:" + "ab" * 32
SIGNATURE = "cd" * 64
ADDED = '{"key":"drink","value":"Zorblax"}'
REVISED = '{"text":"Drinks Zorblax"}'


def _log(rows: list[tuple[str, str, str | None, str]], chains: int = 1,
         chain_of: Any = None) -> list[LoggedEvent]:
    """Events ``(stream, kind, payload or None, original payload)`` linked as a store links them."""
    heads = [GENESIS_HASH] * chains
    versions: dict[str, int] = {}
    out = []
    for position, (stream, kind, payload, original) in enumerate(rows, 1):
        chain = chain_of(stream) if chain_of else 0
        versions[stream] = versions.get(stream, 0) + 1
        digest = payload_digest(original)
        h = chain_hash(heads[chain], position, stream, versions[stream], kind, 1, "2026-01-01T00:00:00", digest)
        heads[chain] = h
        out.append(LoggedEvent(position=position, stream=stream, version=versions[stream], kind=kind, schema=1,
                               recorded_at="2026-01-01T00:00:00", payload=payload, payload_sha256=digest, hash=h))
    return out


def _record(positions: list[int]) -> str:
    return json.dumps({"redacted_positions": positions, "memory_id": 1})


RECORD = _record([1, 2])


def _base() -> list[LoggedEvent]:
    return _log([("memory/a/o", "memory.added", None, ADDED), ("resource/a/o/u", "resource.revised", None, REVISED),
                 ("conversation/a/x", "message.appended", '{"content":"hi"}', '{"content":"hi"}'),
                 ("memory/a/o", "memory.forgotten", RECORD, RECORD)])


def _receipt(log: list[LoggedEvent], **changes: Any) -> Receipt:
    """The receipt of the erasure recorded at 4 in :func:`_base`'s log (fields ``changes`` given)."""
    defaults: dict[str, Any] = dict(
        records=lambda: ((4, "memory.forgotten", log[3].payload_sha256),),
        erased=lambda: ((1, log[0].payload_sha256), (2, log[1].payload_sha256)),
        head_before=lambda: f"3:{log[2].hash}", head_after=lambda: f"4:{log[3].hash}")
    values: dict[str, Any] = dict(public_key=KEY, at="2026-01-01T00:00:00+00:00", source_type="forget",
                                  source_id="cli", reason="asked", keys_destroyed=(("a", "o"),), signature=SIGNATURE)
    values.update({name: make() for name, make in defaults.items() if name not in changes}, **changes)
    return Receipt(**values)


ORIGINALS = {payload_digest(text): text for text in (ADDED, REVISED)}


def _with_receipt(log: list[LoggedEvent], receipt: Receipt, *, payload: str | None = None,
                  before: tuple[str, ...] = ()) -> list[LoggedEvent]:
    """``log`` and the ``erasure.receipted`` event that records ``receipt`` (or ``payload``),
    after those of ``before``."""
    text = payload if payload is not None else json.dumps({"receipt": receipt.body_text(),
                                                           "signature": receipt.signature, "records": [4]})
    rows = [(e.stream, e.kind, e.payload, e.payload if e.payload is not None else ORIGINALS[e.payload_sha256])
            for e in log]
    receipts = [("privacy/receipts", "erasure.receipted", t, t) for t in (*before, text)]
    return _log([*rows, *receipts])


def _problems(receipt: Receipt, log: list[LoggedEvent], declared: Head | None = None) -> list[str]:
    return check_problems(receipt, log, declared=declared)


def test_a_receipt_the_log_bears_out_has_no_problem() -> None:
    log = _base()
    receipt = _receipt(log)
    full = _with_receipt(log, receipt)
    assert _problems(receipt, full) == []
    assert _problems(receipt, full, declared=Head(5, full[4].hash)) == []


def test_the_body_is_canonical_json_and_the_file_adds_the_signature() -> None:
    receipt = _receipt(_base())
    body = receipt.body_text()
    assert body == canonical(receipt.body())
    assert body == json.dumps(json.loads(body), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert json.loads(body) == {
        "receipt": 1, "public_key": KEY, "at": "2026-01-01T00:00:00+00:00",
        "asked_by": {"source_type": "forget", "source_id": "cli", "reason": "asked"},
        "records": [[4, "memory.forgotten", receipt.records[0][2]]],
        "erased": [[1, receipt.erased[0][1]], [2, receipt.erased[1][1]]],
        "head_before": receipt.head_before, "head_after": receipt.head_after, "keys_destroyed": [["a", "o"]]}
    assert receipt.document() == {**json.loads(body), "signature": SIGNATURE}
    assert canonical({"b": "é", "a": [1]}) == '{"a":[1],"b":"\\u00e9"}'


def test_a_receipt_file_reads_back_as_the_receipt() -> None:
    receipt = _receipt(_base())
    assert parse_receipt(receipt.document()) == receipt
    assert parse_receipt(json.loads(json.dumps(receipt.document(), indent=2))) == receipt


def _edited(**changes: Any) -> dict[str, Any]:
    document = _receipt(_base()).document()
    document.update(changes)
    return document


@pytest.mark.parametrize("document", [
    [], "receipt", 5, None, _edited(extra=1), {k: v for k, v in _edited().items() if k != "at"},
    _edited(receipt=2), _edited(receipt=True), _edited(receipt="1"),
    _edited(asked_by=[]), _edited(asked_by={"source_type": "forget", "source_id": "cli"}),
    _edited(asked_by={"source_type": "forget", "source_id": "cli", "reason": "", "more": 1}),
    _edited(asked_by={"source_type": 1, "source_id": "cli", "reason": ""}),
    _edited(asked_by={"source_type": "forget", "source_id": None, "reason": ""}),
    _edited(asked_by={"source_type": "forget", "source_id": "cli", "reason": 0}),
    _edited(records="none"), _edited(records=[[4, "memory.forgotten"]]), _edited(records=[(4, "k", "0" * 64)]),
    _edited(records=[[0, "memory.forgotten", "0" * 64]]), _edited(records=[[True, "memory.forgotten", "0" * 64]]),
    _edited(records=[[4.0, "memory.forgotten", "0" * 64]]), _edited(records=[[4, 7, "0" * 64]]),
    _edited(records=[[4, "memory.forgotten", "0" * 63]]), _edited(records=[[4, "memory.forgotten", "A" * 64]]),
    _edited(records=[[4, "memory.forgotten", "0" * 65]]), _edited(records=[[4, "memory.forgotten", 5]]),
    _edited(erased=[[1]]), _edited(erased=[[-1, "0" * 64]]), _edited(erased=[[1, "g" * 64]]), _edited(erased={}),
    _edited(keys_destroyed=[["a"]]), _edited(keys_destroyed=[["a", 1]]), _edited(keys_destroyed=[[None, "o"]]),
    _edited(public_key=1), _edited(at=None), _edited(signature=b"x"), _edited(head_before=3),
    _edited(head_before="3"), _edited(head_after="x:" + "0" * 64), _edited(head_after=None),
])
def test_a_receipt_file_not_in_the_format_is_refused(document: Any) -> None:
    with pytest.raises(BadReceipt):
        parse_receipt(document)


def test_the_positions_of_a_receipt_may_be_any_from_one() -> None:
    document = _edited(records=[[1, "memory.forgotten", "0" * 64]], erased=[])
    assert parse_receipt(document).records == ((1, "memory.forgotten", "0" * 64),)
    assert parse_receipt(_edited(keys_destroyed=[])).keys_destroyed == ()


def test_a_head_reads_as_one_chain_or_several() -> None:
    h = "1f" * 32
    assert parse_head(f"7:{h}") == Head(7, h)
    assert parse_head(f"0:{h}") == Head(0, h)
    assert parse_head(f"3,0,9:{h}") == Head(9, h, (3, 0, 9))
    for bad in (f"7{h}", f"7:{h[:-1]}", f"7:{h}0", f"7:{h.upper()}", f"-1:{h}", f"x:{h}", f"1,,2:{h}", f"1,-2:{h}",
                f":{h}", "7:"):
        with pytest.raises(BadReceipt):
            parse_head(bad)


def test_each_edit_of_the_receipt_is_caught_by_the_log() -> None:
    log = _base()
    receipt = _receipt(log)
    full = _with_receipt(log, receipt)
    d = "9" * 64
    edits = {
        "records": _receipt(log, records=((4, "memory.forgotten", d),)),
        "kind": _receipt(log, records=((4, "owner.forgotten", log[3].payload_sha256),)),
        "erased digest": _receipt(log, erased=((1, d), (2, log[1].payload_sha256))),
        "erased one less": _receipt(log, erased=((1, log[0].payload_sha256),)),
        "head_before": _receipt(log, head_before=f"3:{d}"),
        "head_after": _receipt(log, head_after=f"4:{d}"),
    }
    for what, edited in edits.items():
        assert _problems(edited, full), what


def test_an_erased_event_readable_again_or_with_another_digest_or_missing() -> None:
    log = _base()
    receipt = _receipt(log)
    full = _with_receipt(log, receipt)
    put_back = [attrs.evolve(e, payload=ADDED) if e.position == 1 else e for e in full]
    assert _problems(receipt, put_back) == ["erased event 1 (memory.added) is readable: its payload is in the log"]
    other = _receipt(log, erased=((1, "9" * 64), (2, log[1].payload_sha256)))
    assert _problems(other, _with_receipt(log, other)) == [f"erased event 1 has the digest {log[0].payload_sha256},"
                                                           f" not {'9' * 64}"]
    beyond = _receipt(log, erased=((1, log[0].payload_sha256), (2, log[1].payload_sha256), (9, "9" * 64)))
    assert _problems(beyond, _with_receipt(log, beyond)) == [
        "erased event 9 is not in the log", "the records redacted positions [1,2]; the receipt names [1,2,9]"]


def test_the_records_must_be_the_logs() -> None:
    log = _base()
    digest = log[3].payload_sha256
    missing = _receipt(log, records=((4, "memory.forgotten", digest), (8, "owner.forgotten", digest)))
    assert _problems(missing, _with_receipt(log, missing)) == ["record 8 is not in the log",
                                                               "head_after is before the erasure's records"]
    kind = _receipt(log, records=((4, "owner.forgotten", digest),))
    assert _problems(kind, _with_receipt(log, kind)) == ["record 4 is a memory.forgotten event, not owner.forgotten"]
    other = _receipt(log, records=((4, "memory.forgotten", "9" * 64),))
    assert _problems(other, _with_receipt(log, other)) == [f"record 4 has the digest {digest}, not {'9' * 64}"]
    receipt = _receipt(log)
    full = _with_receipt(log, receipt)
    redacted = [attrs.evolve(e, payload=None) if e.position == 4 else e for e in full]
    assert _problems(receipt, redacted) == ["record 4 is redacted: what it erased cannot be read"]


def test_the_records_redacted_positions_are_the_erased_ones() -> None:
    for positions, named in (([1], "[1]"), ([1, 2, 3], "[1,2,3]"), ([], "[]")):
        record = _record(positions)
        log = _log([("memory/a/o", "memory.added", None, ADDED), ("resource/a/o/u", "resource.revised", None, REVISED),
                    ("conversation/a/x", "message.appended", "{}", "{}"), ("memory/a/o", "memory.forgotten", record,
                                                                          record)])
        receipt = _receipt(log)
        assert _problems(receipt, _with_receipt(log, receipt)) == [
            f"the records redacted positions {named}; the receipt names [1,2]"]


@pytest.mark.parametrize("payload", ["not json", "[1, 2]", '{"redacted_positions": null}',
                                     '{"redacted_positions": {"1": 1}}', '{"redacted_positions": ["1", 2.0]}'])
def test_a_record_that_names_no_positions_redacted_none(payload: str) -> None:
    log = _log([("memory/a/o", "memory.added", None, ADDED), ("resource/a/o/u", "resource.revised", None, REVISED),
                ("conversation/a/x", "message.appended", "{}", "{}"), ("owner/a/o", "owner.forgotten", payload,
                                                                      payload)])
    receipt = _receipt(log, records=((4, "owner.forgotten", log[3].payload_sha256),))
    assert _problems(receipt, _with_receipt(log, receipt)) == [
        "the records redacted positions []; the receipt names [1,2]"]


def test_the_records_of_a_run_name_their_positions_together() -> None:
    one, two = _record([1]), _record([2])
    log = _log([("memory/a/o", "memory.added", None, ADDED), ("resource/a/o/u", "resource.revised", None, REVISED),
                ("memory/a/o", "memory.forgotten", one, one), ("memory/a/o", "memory.forgotten", two, two),
                ("privacy/retention", "retention.ran", "{}", "{}")])
    receipt = _receipt(log, records=tuple((e.position, e.kind, e.payload_sha256) for e in log[2:]),
                       head_before=f"2:{log[1].hash}", head_after=f"5:{log[4].hash}")
    assert _problems(receipt, _with_receipt(log, receipt)) == []


def test_the_heads_must_surround_the_records() -> None:
    log = _base()
    late = _receipt(log, head_before=f"4:{log[3].hash}")
    assert _problems(late, _with_receipt(log, late)) == ["head_before is not before the erasure's records"]
    early = _receipt(log, head_after=f"3:{log[2].hash}")
    assert _problems(early, _with_receipt(log, early)) == ["head_after is before the erasure's records"]
    genesis = _receipt(log, head_before=f"0:{GENESIS_HASH}")
    assert _problems(genesis, _with_receipt(log, genesis)) == []
    beyond = _receipt(log, head_after=f"7:{log[3].hash}")
    assert _problems(beyond, _with_receipt(log, beyond)) == [
        f"head_after 7:{log[3].hash[:38]}… is not a head of this log"]
    no_records = _receipt(log, records=(), erased=())
    assert _problems(no_records, _with_receipt(log, no_records)) == []


def test_heads_of_several_chains_are_checkpoints() -> None:
    def chain_of(stream: str) -> int:
        return 0 if stream.startswith("memory") else 1

    rows: list[tuple[str, str, str | None, str]] = [
        ("memory/a/o", "memory.added", None, ADDED), ("conversation/a/x", "message.appended", "{}", "{}"),
            ("memory/a/o", "memory.forgotten", _record([1]), _record([1]))]
    log = _log(rows, chains=2, chain_of=chain_of)
    before = checkpoint_hash([(1, log[0].hash), (2, log[1].hash)])
    after = checkpoint_hash([(3, log[2].hash), (2, log[1].hash)])
    receipt = _receipt(log, records=((3, "memory.forgotten", log[2].payload_sha256),),
                       erased=((1, log[0].payload_sha256),), head_before=f"1,2:{before}", head_after=f"3,2:{after}")
    text = json.dumps({"receipt": receipt.body_text(), "signature": SIGNATURE})
    full = _log([*rows, ("privacy/receipts", "erasure.receipted", text, text)], chains=2, chain_of=chain_of)
    full[0] = attrs.evolve(full[0], payload=None)
    assert check_problems(receipt, full, chains=2, chain_of=chain_of) == []
    wrong = attrs.evolve(receipt, head_before=f"2,1:{before}")
    assert any("head_before" in p for p in check_problems(wrong, full, chains=2, chain_of=chain_of))
    unseen = attrs.evolve(receipt, head_before=f"1,9:{before}")
    assert [p for p in check_problems(unseen, full, chains=2, chain_of=chain_of) if "head_before" in p] == [
        f"head_before 1,9:{before[:36]}… is not a head of this log", "head_before is not before the erasure's records"]
    empty = attrs.evolve(receipt, head_before=f"0,0:{checkpoint_hash([(0, GENESIS_HASH)] * 2)}")
    assert check_problems(empty, full, chains=2, chain_of=chain_of) == [
        "the log holds no erasure.receipted event of this receipt"]  # its body is another


def test_a_log_tampered_with_breaks_its_chain() -> None:
    log = _base()
    receipt = _receipt(log)
    full = _with_receipt(log, receipt)
    dropped = [e for e in full if e.position != 3]
    assert _problems(receipt, dropped)[0].startswith("the log's chain is broken: event 4")
    changed = [attrs.evolve(e, payload_sha256="9" * 64) if e.position == 2 else e for e in full]
    problems = _problems(receipt, changed)
    assert problems[0] == ("the log's chain is broken: event 2 (resource.revised): chain hash does not match its"
                           " contents and the event before")
    assert len([p for p in problems if p.startswith("the log's chain")]) == 1
    cut = full[:-1]
    assert _problems(receipt, cut, declared=Head(5, full[-1].hash)) == [
        f"the log ends at 4:{full[3].hash}, not at the head 5:{full[4].hash} it declares",
        "the log holds no erasure.receipted event of this receipt"]
    assert _problems(receipt, dropped, declared=Head(5, full[-1].hash))[0].startswith("the log's chain is broken")


@pytest.mark.parametrize("payload", ["not json", "[]", '{"receipt": "x", "signature": "cd"}'])
def test_the_log_must_record_the_receipt(payload: str) -> None:
    log = _base()
    receipt = _receipt(log)
    assert _problems(receipt, _with_receipt(log, receipt, payload=payload)) == [
        "the log holds no erasure.receipted event of this receipt"]
    other = attrs.evolve(receipt, signature="ee" * 64)
    assert _problems(receipt, _with_receipt(log, other)) == ["the log holds no erasure.receipted event of this receipt"]


def test_the_receipt_is_found_among_several_and_a_redacted_one_is_not_it() -> None:
    log = _base()
    receipt = _receipt(log)
    other = json.dumps({"receipt": "x", "signature": "y"})
    assert _problems(receipt, _with_receipt(log, receipt, before=(other, "{}"))) == []
    full = _with_receipt(log, receipt)
    hidden = [attrs.evolve(e, payload=None) if e.kind == "erasure.receipted" else e for e in full]
    assert _problems(receipt, hidden) == ["the log holds no erasure.receipted event of this receipt"]


def test_many_positions_are_shown_cut() -> None:
    record = _record(list(range(1, 26)))
    log = _log([("memory/a/o", "memory.forgotten", record, record)])
    receipt = _receipt(log, records=((1, "memory.forgotten", log[0].payload_sha256),), erased=(),
                       head_before=f"0:{GENESIS_HASH}", head_after=f"1:{log[0].hash}")
    assert _problems(receipt, _with_receipt(log, receipt)) == [
        "the records redacted positions [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,…]; the receipt names []"]


def test_a_check_fed_one_event_at_a_time_reads_one_chain_by_default() -> None:
    log = _base()
    receipt = _receipt(log)
    check = ReceiptCheck(receipt)
    for e in _with_receipt(log, receipt):
        check.add(e)
    assert check.problems() == [] and check.problems(None) == []


@pytest.mark.parametrize(("count", "shown"), [(20, "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]"),
                                              (21, "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,…]")])
def test_twenty_positions_are_shown_whole(count: int, shown: str) -> None:
    record = _record(list(range(1, count + 1)))
    log = _log([("memory/a/o", "memory.forgotten", record, record)])
    receipt = _receipt(log, records=((1, "memory.forgotten", log[0].payload_sha256),), erased=(),
                       head_before=f"0:{GENESIS_HASH}", head_after=f"1:{log[0].hash}")
    assert _problems(receipt, _with_receipt(log, receipt)) == [f"the records redacted positions {shown}; the receipt"
                                                               " names []"]
