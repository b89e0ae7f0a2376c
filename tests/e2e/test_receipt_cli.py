"""The receipt of an erasure from the command line: `forget --receipt`, `events receipt`,
`events head --public-key`, and a third party's `events verify-receipt` with only the receipt,
the public key and an export (no home at all)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from fermix_memory import MemorySystem
from tests.cli_runner import run_cli


def _home(tmp_path: Path) -> tuple[Path, int]:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        [fact] = memory.write_memory({"op": "add", "category": "preference", "key": "drink", "value": "Zorblaxian"},
                                     agent_id="ada", owner_id="alice", trust="operator")
    assert fact.memory_id is not None
    return home, fact.memory_id


def test_a_third_party_checks_a_receipt_with_the_key_and_an_export(tmp_path: Path) -> None:
    home, fact = _home(tmp_path)
    receipt = tmp_path / "receipt.json"
    done = run_cli("forget", "--memory", str(fact), "--yes", "--receipt", str(receipt), home=home)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(receipt.stat().st_mode) == 0o600
    key = run_cli("events", "head", "--public-key", home=home)
    assert key.returncode == 0 and key.stdout.startswith("ed25519:")
    (tmp_path / "key.txt").write_text(key.stdout)
    assert run_cli("events", "export", str(tmp_path / "log.jsonl"), home=home).returncode == 0
    document = json.loads(receipt.read_text())
    written = run_cli("events", "receipt", str(document["records"][0][0]), "-o", str(tmp_path / "again.json"),
                      home=home)
    assert written.returncode == 0 and json.loads((tmp_path / "again.json").read_text()) == document
    assert "Zorblaxian" not in receipt.read_text()

    nowhere = tmp_path / "no-home"
    third = ("events", "verify-receipt", str(receipt), "--log", str(tmp_path / "log.jsonl"))
    ok = run_cli(*third, "--public-key", str(tmp_path / "key.txt"), home=nowhere)
    assert ok.returncode == 0 and ok.stdout.startswith("ok: "), ok
    assert not nowhere.exists()
    assert run_cli(*third, "--public-key", key.stdout.strip(), "--json", home=nowhere).returncode == 0
    assert run_cli("events", "verify-receipt", str(receipt), home=home).returncode == 0
    assert run_cli("events", "verify", home=home).returncode == 0
    assert run_cli("events", "replay", "--into", str(tmp_path / "replayed"), home=home).returncode == 0

    document["at"] = "2020-01-01T00:00:00+00:00"
    (tmp_path / "edited.json").write_text(json.dumps(document))
    failed = run_cli("events", "verify-receipt", str(tmp_path / "edited.json"), "--log", str(tmp_path / "log.jsonl"),
                     "--public-key", key.stdout.strip(), home=nowhere)
    assert failed.returncode == 1
    assert failed.stdout.splitlines() == [
        "FAILED: the signature does not hold: the receipt was changed, or signed with another key",
        "FAILED: the log holds no erasure.receipted event of this receipt"]
    without_key = run_cli(*third, home=nowhere)
    assert without_key.returncode == 1 and "no key" in without_key.stderr


def test_a_home_without_a_key_says_so_and_makes_none(tmp_path: Path) -> None:
    home, _ = _home(tmp_path)
    (home / "keys" / "home.key").unlink()
    shown = run_cli("events", "head", "--public-key", home=home)
    assert shown.returncode == 1 and "has no key yet" in shown.stderr
    assert not (home / "keys" / "home.key").exists()
