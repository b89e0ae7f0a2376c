"""Encrypted exports lose what an erasure of a memory row, of a conversation or a retention run
took (ADR-0081): each sealed payload is sealed under its log position's key too, and those
erasures puncture the keys of the positions they redacted. An export made before them, opened
with the keyring as it is after, holds none of the erased words (decrypted or raw) and everything
else whole; it imports into a log that verifies and replays, equal to the source's as the erasure
left it. The keyring stays small however many positions are punctured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import EventFileError, MemorySystem
from fermix_memory.adapters.home_keys import keys_folder
from fermix_memory.entrypoints.api.export_keys import home_keyring
from tests.cli_runner import run_cli
from tests.integration.homes_on_stores import Config, opened
from tests.integration.test_encrypted_export import decrypted_text, lines_of, plain_events
from tests.integration.test_forget import ALICE_SECRETS, BOB_WORDS, write_everything
from tests.manual_clock import TestClock

ROW = ("Pomegranatefizzword",)  # alice's row, forgotten alone
TALK = ("Tangerinecipherword", "Walrusmoonword")  # said in one conversation, forgotten whole
KIOSK = ("Kioskquincepin",)  # said at the kiosk, erased by a retention run
ERASED = ROW + TALK + KIOSK
KEPT = ALICE_SECRETS + BOB_WORDS
POLICIES: dict[str, Any] = {"fermix_core": {"retention": {"check_every_s": 0, "policy": [
    {"name": "kiosk", "after": "30d", "channel_prefix": "kiosk:"}]}}}




def fill(memory: MemorySystem) -> int:
    """Everything of the forget tests, a row, a conversation and a kiosk visit: the row's id."""
    write_everything(memory)
    [row] = memory.write_memory({"op": "add", "category": "preference", "key": "fizz",
                                 "value": f"Drinks {ROW[0]}"}, agent_id="ada", owner_id="alice", trust="operator")
    assert row.memory_id is not None
    for text in TALK:
        memory.append_message(agent_id="max", owner_id="alice", conversation="slack:alice", role="user",
                              sender="alice", content=f"between us: {text}")
    memory.clear_window("max", "slack:alice", owner_id="alice")  # a payload of no owner in it
    memory.append_message(agent_id="shop", owner_id="visitor", conversation="kiosk:7", role="user",
                          sender="visitor", content=f"my pin is {KIOSK[0]}", trust="guest")
    return row.memory_id


def erased_positions(memory: MemorySystem) -> list[int]:
    return sorted(p for kind in ("memory.forgotten", "conversation.forgotten")
                  for entry in memory.log_entries(kind=kind) if entry.event is not None
                  for p in entry.event.redacted_positions)


def check_the_old_export(tmp_path: Path, store_of: Config, export: Path, source_log: list[str],
                         erased: list[int]) -> None:
    """What the keyring as it is now opens of ``export``, and its import into a new home."""
    source = tmp_path / "source"
    raw = export.read_bytes().lower()
    assert [w for w in ERASED + KEPT if w.lower().encode() in raw] == []  # sealed on disk
    text = decrypted_text(export, keys_folder(source))
    assert [w for w in ERASED if w.lower() in text.lower()] == []
    assert [w for w in KEPT if w not in text] == []  # everything else opens
    head = json.loads(export.read_text(encoding="utf-8").splitlines()[0])["head"]["position"]
    with opened(tmp_path, "copy", store_of) as copy:
        report = copy.import_events(lines_of(export), keys=keys_folder(source))
        assert report.keys_destroyed == () and report.redacted == report.positions_lost == len(erased)
        [record] = [e for e in copy.log_entries(kind="import.payloads_lost") if e.event is not None]
        assert list(record.event.redacted_positions) == erased
        assert report.erasure_records == (record.position,)
        check = copy.verify()
        assert check.ok, check.problem
        assert plain_events(copy, head) == source_log  # the source's log as the erasures left it
        receipts = [json.loads(e.event.receipt) for e in copy.log_entries(kind="erasure.receipted") if e.event]
        assert [(r["asked_by"]["source_type"], [p for p, _ in r["erased"]]) for r in receipts] == [("import", erased)]
        assert copy.verify_receipt(copy.receipt(record.position)).ok
        assert copy.memories(agent_id="ada", owner_id="alice") != []
        plain = "".join(copy.export_events())
        if store_of("copy") is None:
            assert copy.replay_into(tmp_path / "replayed")["identical"]
    assert [w for w in ERASED if w.lower() in plain.lower()] == []
    assert [w for w in KEPT if w not in plain] == []


def test_an_export_made_before_a_row_or_a_conversation_is_forgotten_loses_it(tmp_path: Path,
                                                                             store_of: Config) -> None:
    export = tmp_path / "export.jsonl"
    with opened(tmp_path, "source", store_of) as memory:
        row = fill(memory)
        export.write_text("".join(memory.export_events(encrypted=True)), encoding="utf-8")
        assert all(w in decrypted_text(export, keys_folder(tmp_path / "source")) for w in ERASED + KEPT)
        memory.forget_memory(row, reason="asked")
        memory.forget_conversation("max", "slack:alice")
        memory.forget_conversation("shop", "kiosk:7")
        head = json.loads(export.read_text(encoding="utf-8").splitlines()[0])["head"]["position"]
        source_log = plain_events(memory, head)
        erased = [p for p in erased_positions(memory) if p <= head]
        # The receipts name no key destroyed: an owner's keys stay, only positions go.
        receipts = [json.loads(e.event.receipt) for e in memory.log_entries(kind="erasure.receipted") if e.event]
        assert len(receipts) == 3 and all(r["keys_destroyed"] == [] for r in receipts)
    assert len(home_keyring(tmp_path / "source").pairs()) == 5  # (shop, visitor) too: no key destroyed
    check_the_old_export(tmp_path, store_of, export, source_log, erased)


def test_an_export_made_before_a_retention_run_loses_what_it_erased(tmp_path: Path) -> None:
    clock, export = TestClock(), tmp_path / "export.jsonl"
    with MemorySystem.open(tmp_path / "source", config=POLICIES, clock=clock) as memory:
        fill(memory)
        memory.forget_memory(memory.memories(agent_id="ada", owner_id="alice")[0].id)  # erased before: plain
        export.write_text("".join(memory.export_events(encrypted=True)), encoding="utf-8")
        clock.advance(days=31)
        run = memory.run_retention()
        assert [i.conversation for i in run.items] == ["kiosk:7"] and run.receipt is not None
        head = json.loads(export.read_text(encoding="utf-8").splitlines()[0])["head"]["position"]
        source_log = plain_events(memory, head)
        before = {p for e in memory.log_entries(kind="memory.forgotten") if e.event for p in
                  e.event.redacted_positions}
        erased = [p for p in erased_positions(memory) if p <= head and p not in before]
    assert erased
    text = decrypted_text(export, keys_folder(tmp_path / "source"))
    assert KIOSK[0] not in text and ROW[0] in text and TALK[0] in text
    with MemorySystem.open(tmp_path / "copy") as copy:
        report = copy.import_events(lines_of(export), keys=keys_folder(tmp_path / "source"))
        [record] = [e for e in copy.log_entries(kind="import.payloads_lost") if e.event is not None]
        assert list(record.event.redacted_positions) == erased and report.erasure_records == (record.position,)
        check = copy.verify()
        assert check.ok, check.problem
        assert plain_events(copy, head) == source_log
        assert copy.replay_into(tmp_path / "replayed")["identical"]
    result = run_cli("events", "import", str(export), "--keys", str(keys_folder(tmp_path / "source")),
                     home=tmp_path / "cli-copy")
    assert result.returncode == 0, result.stderr
    assert f"\n{len(erased)} payload" in result.stdout and "erased after the export" in result.stdout, result.stdout


def test_a_row_forgotten_then_its_owner_is_accounted_once(tmp_path: Path) -> None:
    """A position whose owner's key is gone too comes in under the owner's record alone."""
    export = tmp_path / "export.jsonl"
    with MemorySystem.open(tmp_path / "source") as memory:
        row = fill(memory)
        export.write_text("".join(memory.export_events(encrypted=True)), encoding="utf-8")
        memory.forget_memory(row)
        cover = len(home_keyring(tmp_path / "source").path.read_bytes())
        memory.forget_owner("alice")
        assert len(home_keyring(tmp_path / "source").path.read_bytes()) < cover  # keys go, no position punctured
        memory.forget_conversation("shop", "kiosk:7")
        kiosk = [p for e in memory.log_entries(kind="conversation.forgotten") if e.event is not None
                 for p in e.event.redacted_positions]
    with MemorySystem.open(tmp_path / "copy") as copy:
        report = copy.import_events(lines_of(export), keys=keys_folder(tmp_path / "source"))
        assert report.keys_destroyed == (("ada", "alice"), ("max", "alice"))
        [record] = [e for e in copy.log_entries(kind="import.payloads_lost") if e.event is not None]
        assert list(record.event.redacted_positions) == kiosk  # the row's position: under alice's record
        check = copy.verify()
        assert check.ok, check.problem
        text = "".join(copy.export_events())
    assert [w for w in ERASED + ALICE_SECRETS if w.lower() in text.lower()] == []
    assert [w for w in BOB_WORDS if w not in text] == []


def test_keys_of_another_tree_or_none_are_refused(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "source") as memory:
        fill(memory)
        lines = list(memory.export_events(encrypted=True))
    changed = [json.loads(line) for line in lines]
    for item in changed[1:]:
        if "sealed" in item:
            item["sealed"]["position"]["tree"] = "0" * 16
    with MemorySystem.open(tmp_path / "copy") as copy:
        with pytest.raises(EventFileError, match="position keys"):
            copy.import_events(lambda: [json.dumps(i) + "\n" for i in changed], keys=keys_folder(tmp_path / "source"))
        assert copy.head().position == 0


@pytest.mark.parametrize("spread", [1, 10])
def test_a_thousand_punctured_positions_keep_the_keyring_small(tmp_path: Path, spread: int) -> None:
    keyring = home_keyring(tmp_path / "home")
    keyring.data_keys([("ada", "alice")], create=True)
    assert keyring.position_keys(create=True) is not None
    before = keyring.path.stat().st_size
    positions = range(5_000, 5_000 + 1_000 * spread, spread)
    for start in range(0, 1_000, 100):  # as erasures come, a hundred positions at a time
        assert keyring.puncture(positions[start:start + 100]) == 100
    assert keyring.puncture(positions) == 0
    size = keyring.path.stat().st_size
    print(f"keyring: {before:,} bytes, {size:,} bytes with 1,000 positions punctured {spread} apart")
    assert size <= before + (3_000 if spread == 1 else 220_000)
    leaves = keyring.position_keys()
    assert leaves is not None and leaves.key_of(positions[0]) is None and leaves.key_of(4_999) is not None
