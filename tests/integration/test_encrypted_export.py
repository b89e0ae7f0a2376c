"""Encrypted exports (ADR-0081): each owner's payloads sealed under the owner's data key in the
home's keyring. An export made before a forget, opened with the keyring as it is after the
forget, holds no byte of the forgotten owner's words, imports into a log that verifies and is the
source's log as the forget left it; with every key kept, the import is the source itself. On
SQLite and on PostgreSQL (exported from it, and imported into it)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from fermix_memory import AsyncMemorySystem, MemorySystem
from fermix_memory.adapters.home_keys import keys_folder
from fermix_memory.domain.log_lines import parse_event_line, parse_file_header
from fermix_memory.entrypoints.api.export_keys import existing_keyring, home_keyring, opening
from tests.integration.homes_on_stores import Config, opened
from tests.integration.test_forget import ALICE_SECRETS, BOB_WORDS, found, write_everything


def lines_of(path: Path) -> Callable[[], Iterator[str]]:
    def lines() -> Iterator[str]:
        with path.open(encoding="utf-8", newline="\n") as fh:
            yield from (line.removesuffix("\n") for line in fh)
    return lines


def decrypted_text(path: Path, keys: Path) -> str:
    """Every payload of the file opened with ``keys`` as they are now (redacted ones left out)."""
    opener = opening(keys, datetime.now(UTC))
    header, *events = path.read_text(encoding="utf-8").splitlines()
    opener.begin(parse_file_header(header)[1])
    texts = []
    for text in events:
        e, sealed = parse_event_line(text)
        e = e if sealed is None else opener.open(e, sealed)
        texts.append(e.payload or "")
    return "\n".join(texts)


def plain_events(memory: MemorySystem, up_to: int) -> list[str]:
    """The event lines of a plain export, up to position ``up_to``."""
    return [line for line in list(memory.export_events())[1:] if json.loads(line)["position"] <= up_to]


def alice_erased(memory: MemorySystem) -> list[int]:
    return sorted(p for entry in memory.log_entries(kind="owner.forgotten") if entry.event is not None
                  and entry.event.owner_id == "alice" for p in entry.event.redacted_positions or ())


def test_an_export_made_before_a_forget_loses_the_owner_and_still_verifies(tmp_path: Path, store_of: Config) -> None:
    source, export = tmp_path / "source", tmp_path / "export.jsonl"
    with opened(tmp_path, "source", store_of) as memory:
        write_everything(memory)
        export.write_text("".join(memory.export_events(encrypted=True)), encoding="utf-8")
    raw = export.read_bytes().lower()
    assert [w for w in ALICE_SECRETS + BOB_WORDS if w.lower().encode() in raw] == []  # sealed, both owners
    before = decrypted_text(export, keys_folder(source))
    assert all(w in before for w in ALICE_SECRETS + BOB_WORDS)  # the keys still open everything

    with opened(tmp_path, "source", store_of) as memory:
        memory.forget_owner("alice", reason="erasure request")
        home_keyring(source).destroy([("ada", "alice"), ("max", "alice")])  # idempotent once forget does it
        head = json.loads(export.read_text(encoding="utf-8").splitlines()[0])["head"]["position"]
        source_log = plain_events(memory, head)
        erased = [p for p in alice_erased(memory) if p <= head]
    assert ("ada", "alice") not in home_keyring(source).pairs()

    after = decrypted_text(export, keys_folder(source))
    assert [w for w in ALICE_SECRETS if w.lower() in after.lower()] == []
    assert all(w in after for w in BOB_WORDS)  # other owners' payloads come back whole

    with opened(tmp_path, "copy", store_of) as copy:
        report = copy.import_events(lines_of(export), keys=keys_folder(source))
        assert report.keys_destroyed == (("ada", "alice"), ("max", "alice"))
        assert report.redacted == len(erased) and len(report.erasure_records) == 2
        check = copy.verify()
        assert check.ok, check.problem
        # The copy's log is the source's as the forget left it: the same positions redacted,
        # every other payload (Bob's, and what belonged to no one) the same, byte for byte.
        assert plain_events(copy, head) == source_log
        assert [p for p in alice_erased(copy)] == erased
        assert copy.memories(agent_id="ada", owner_id="alice") == []
        # The erasures the destroyed keys stand for get their signed receipt, asked by the import.
        receipts = [json.loads(e.event.receipt) for e in copy.log_entries(kind="erasure.receipted") if e.event]
        assert [(r["asked_by"]["source_type"], r["records"][0][0]) for r in receipts] == [
            ("import", report.erasure_records[0])]
        assert copy.memories(agent_id="ada", owner_id="bob") != []
        text = "".join(copy.export_events())
    assert [w for w in ALICE_SECRETS if w.lower() in text.lower()] == []
    if store_of("copy") is None:
        assert found(tmp_path / "copy", ALICE_SECRETS) == {}
        assert set(found(tmp_path / "copy", BOB_WORDS)) == set(BOB_WORDS)


def test_with_every_key_kept_the_import_is_the_source(tmp_path: Path, store_of: Config) -> None:
    export = tmp_path / "export.jsonl"
    with opened(tmp_path, "source", store_of) as memory:
        write_everything(memory)
        memory.forget_owner("bob")  # payloads already redacted go as they are
        export.write_text("".join(memory.export_events(encrypted=True)), encoding="utf-8")
        plain = list(memory.export_events())
        tables = memory.verify().table_checksums
    with opened(tmp_path, "copy", store_of) as copy:
        report = copy.import_events(lines_of(export), keys=keys_folder(tmp_path / "source"))
        assert report.keys_destroyed == () and report.erasure_records == ()
        assert list(copy.export_events()) == plain
        check = copy.verify()
        assert check.ok and check.table_checksums == tables


def test_payloads_of_no_owner_stay_plain_and_each_owner_has_a_key(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        write_everything(memory)
        lines = [json.loads(line) for line in memory.export_events(encrypted=True)]
    keyring = home_keyring(tmp_path / "home")
    assert lines[0]["sealed"] == {"keyring": keyring.keyring_id}
    sealed = [line for line in lines[1:] if "sealed" in line]
    plain = [line for line in lines[1:] if line.get("payload")]
    assert sealed and plain and all(line["payload"] is None for line in sealed)
    assert [w for line in plain for w in ALICE_SECRETS + BOB_WORDS if w in line["payload"]] == []
    assert keyring.pairs() == [("ada", "alice"), ("ada", "bob"), ("max", "alice"), ("max", "bob")]
    assert {tuple(layer[:2]) for line in sealed for layer in line["sealed"]["layers"]} == set(keyring.pairs())


def test_the_asyncio_api_exports_encrypted_too(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "source") as memory:
        write_everything(memory)

    async def main() -> None:
        async with AsyncMemorySystem.open(tmp_path / "source") as memory:
            lines = await memory.export_events(encrypted=True)
        assert '"sealed":{"keyring"' in lines[0]
        async with AsyncMemorySystem.open(tmp_path / "copy") as copy:
            report = await copy.import_events(lambda: lines, keys=keys_folder(tmp_path / "source"))
            assert report.appended == report.events == len(lines) - 1 and report.redacted == 0

    asyncio.run(main())


def test_the_keys_folder_an_import_reads_is_only_read(tmp_path: Path) -> None:
    """Opening an export never makes or changes keys in the folder it is given."""
    with MemorySystem.open(tmp_path / "source") as memory:
        write_everything(memory)
        lines = list(memory.export_events(encrypted=True))
    folder = keys_folder(tmp_path / "source")
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    with MemorySystem.open(tmp_path / "copy") as copy:
        copy.import_events(lambda: lines, keys=folder)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    assert existing_keyring(folder).pairs() == home_keyring(tmp_path / "source").pairs()


def test_forgetting_an_owner_is_enough_to_take_them_out_of_earlier_exports(tmp_path: Path) -> None:
    """End to end: no key is destroyed by hand, the forget's follow-up does it."""
    source, export = tmp_path / "source", tmp_path / "export.jsonl"
    with MemorySystem.open(source) as memory:
        write_everything(memory)
        export.write_text("".join(memory.export_events(encrypted=True)), encoding="utf-8")
        memory.forget_owner("alice")
    assert [p for p in home_keyring(source).pairs() if p[1] == "alice"] == []
    assert [w for w in ALICE_SECRETS if w in decrypted_text(export, keys_folder(source))] == []
    with MemorySystem.open(tmp_path / "copy") as copy:
        report = copy.import_events(lines_of(export), keys=keys_folder(source))
        assert report.keys_destroyed == (("ada", "alice"), ("max", "alice"))
        assert copy.verify().ok
