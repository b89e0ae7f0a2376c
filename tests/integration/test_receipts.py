"""Every erasure gets one signed receipt, checkable against the home's log or an export with only
the public key; a receipt edited in any field, or a log tampered with, fails the check; a crash
between an erasure and its receipt is made up for at the next open; on both stores."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.clock import SystemClock
from fermix_memory.application.forget import Forgetting
from fermix_memory.domain.events import DomainEvent, ErasureReceipted
from fermix_memory.entrypoints.home import open_store
from fermix_memory.entrypoints.storage import open_postgres, sqlite_storage

pytestmark = pytest.mark.usefixtures("every_store")

SECRET = "Zorblaxian"


def _fill(memory: MemorySystem) -> dict[str, int]:
    """Alice with two agents, a conversation of Bob's, and a fact of Bob's: what the forgets take."""
    for agent in ("ada", "max"):
        memory.append_message(agent_id=agent, owner_id="alice", conversation="telegram:alice", role="user",
                              sender="alice", content=f"I drink {SECRET} tea")
    memory.append_message(agent_id="ada", owner_id="bob", conversation="kiosk:1", role="user", sender="bob",
                          content=f"my code is {SECRET}")
    [fact] = memory.write_memory({"op": "add", "category": "preference", "key": "drink", "value": f"{SECRET} tea"},
                                 agent_id="ada", owner_id="bob", trust="operator")
    assert fact.memory_id is not None
    return {"fact": fact.memory_id}


class _NoFiles:
    """Prompt files left as they are (the next open repairs them)."""

    def remove_files(self, agent_id: str, owner_id: str) -> bool:
        return False

    def record_in(self, tx: Any, events: Sequence[DomainEvent], at: datetime) -> None:
        return None


@contextmanager
def _forget_unsigned(home: Path, url: str | None = None) -> Iterator[Forgetting]:
    """The forgets of a process that dies right after each erasure's commit and scrub: no follow-up."""
    url = os.environ.get("FERMIX_DATABASE_URL") or url
    storage = open_postgres(url) if url else sqlite_storage(open_store(home))
    try:
        yield Forgetting(storage.store, storage.erasure, _NoFiles(), SystemClock())
    finally:
        storage.store.close()


def _receipts(memory: MemorySystem) -> list[Any]:
    return [e for e in memory.events() if isinstance(e.event, ErasureReceipted)]


def test_each_forget_gets_one_receipt_that_the_log_and_an_export_bear_out(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        made = _fill(memory)
        reports = [memory.forget_memory(made["fact"], by="dpo", reason="request 7"),
                   memory.forget_conversation("ada", "kiosk:1"), memory.forget_owner("alice")]
        positions = [r.receipt for r in reports]
        assert all(isinstance(p, int) for p in positions)
        assert [e.position for e in _receipts(memory)] == positions  # one each, none more
        owner = memory.receipt(positions[2])
        assert len(owner["records"]) == 2 and {k for k, in [[r[1]] for r in owner["records"]]} == {"owner.forgotten"}
        assert memory.receipt(owner["records"][0][0]) == owner  # found by its erasure record too
        first = memory.receipt(positions[0])
        assert first["asked_by"] == {"source_type": "forget", "source_id": "dpo", "reason": "request 7"}
        assert first["public_key"] == memory.public_key()
        assert SECRET not in json.dumps([memory.receipt(p) for p in positions])
        lines = list(memory.export_events())
        for position in positions:
            document = memory.receipt(position)
            assert memory.verify_receipt(document).ok
            assert memory.verify_receipt(document, log_lines=lines, public_key=memory.public_key()).ok
        assert memory.verify().ok
        replayed = memory.replay_into(tmp_path / "replay")
        assert replayed["identical"]
    keys = tmp_path / "home" / "keys"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700
    for name in ("home.key", "receipts.mark"):
        assert stat.S_IMODE((keys / name).stat().st_mode) == 0o600


def _edits(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The receipt with one field changed, for every field."""
    changed: dict[str, Any] = {
        "receipt": 2, "public_key": "ed25519:" + "00" * 32, "at": "2020-01-01T00:00:00+00:00",
        "asked_by": {**document["asked_by"], "reason": "another"}, "records": document["records"][:-1],
        "erased": document["erased"][1:], "head_before": document["head_after"],
        "head_after": document["head_before"], "keys_destroyed": [["ada", "mallory"]],
        "signature": document["signature"][:-2] + ("00" if document["signature"][-2:] != "00" else "11")}
    assert set(changed) == set(document)
    edits = {key: {**document, key: value} for key, value in changed.items()}
    edits["asked_by.source_id"] = {**document, "asked_by": {**document["asked_by"], "source_id": "someone"}}
    edits["erased digest"] = {**document, "erased": [[p, "0" * 64] for p, _ in document["erased"]]}
    edits["record digest"] = {**document, "records": [[p, k, "0" * 64] for p, k, _ in document["records"]]}
    return edits


def test_a_receipt_edited_in_any_field_fails(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        _fill(memory)
        document = memory.receipt(memory.forget_owner("alice").receipt)  # type: ignore[arg-type]
        lines = list(memory.export_events())
        for what, edited in _edits(document).items():
            assert not memory.verify_receipt(edited).ok, what
            report = memory.verify_receipt(edited, log_lines=lines)
            assert not report.ok and report.problems, what


def test_a_log_tampered_with_fails(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        made = _fill(memory)
        before = {json.loads(line).get("position"): json.loads(line) for line in memory.export_events()}
        document = memory.receipt(memory.forget_memory(made["fact"]).receipt)  # type: ignore[arg-type]
        lines = list(memory.export_events())
    erased = document["erased"][0][0]
    items = [json.loads(line) for line in lines]

    def text(changed: list[dict[str, Any]]) -> list[str]:
        return [json.dumps(item, sort_keys=True, separators=(",", ":")) + "\n" for item in changed]

    put_back = [{k: v for k, v in {**i, "payload": before[erased]["payload"]}.items() if k != "redacted"}
                if i.get("position") == erased else i for i in items]
    digest = [{**i, "payload_sha256": "0" * 64} if i.get("position") == erased else i for i in items]
    dropped = [i for i in items if i.get("position") != erased]
    header = {**items[0], "head": {**items[0]["head"], "hash": "0" * 64}}
    record = document["records"][0][0]
    record_gone = [i for i in items if i.get("position") != record]
    cut = items[:-1]
    with MemorySystem.open(tmp_path / "home") as memory:
        assert memory.verify_receipt(document, log_lines=text(items)).ok
        for what, changed in {"payload put back": put_back, "digest changed": digest, "event dropped": dropped,
                              "head changed": [header, *items[1:]], "record dropped": record_gone,
                              "last event cut": cut}.items():
            report = memory.verify_receipt(document, log_lines=text(changed))
            assert not report.ok, what


def test_a_crash_before_the_receipt_is_made_up_for_at_the_next_open(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        made = _fill(memory)
    with _forget_unsigned(home) as forgetting:
        unsigned = [forgetting.forget_memory(made["fact"]), forgetting.forget_owner("alice")]
    assert [r.receipt for r in unsigned] == [None, None]
    (home / "keys" / "receipts.mark").write_text(f"1:{'0' * 64}\n")  # a mark of another log is not trusted
    with MemorySystem.open(home) as memory:
        made_up = _receipts(memory)
        assert len(made_up) == 2  # the row's, and the owner's two agents together
        assert sorted(len(e.event.records) for e in made_up) == [1, 2]
        for e in made_up:
            assert memory.verify_receipt(memory.receipt(e.position)).ok
        mark = (home / "keys" / "receipts.mark").read_text()
        assert mark.startswith(f"{made_up[0].position - 1}:")  # where the head stood when they were looked for
        later = memory.forget_conversation("ada", "kiosk:1")
        assert later.receipt is not None and len(_receipts(memory)) == 3
    with MemorySystem.open(home) as memory:
        assert len(_receipts(memory)) == 3  # nothing signed twice
        assert memory.verify().ok


@pytest.mark.sqlite_only("a log of several chains is PostgreSQL's; this test opens its own database")
def test_a_log_of_several_chains_names_checkpoints(postgres_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = {"fermix_core": {"storage": {"url": postgres_url, "chains": 8}}}
    with MemorySystem.open(home, config=config) as memory:
        made = _fill(memory)
        signed = memory.receipt(memory.forget_owner("alice").receipt)  # type: ignore[arg-type]
        assert "," in signed["head_before"] and "," in signed["head_after"]
    with _forget_unsigned(home, postgres_url) as forgetting:
        forgetting.forget_memory(made["fact"])
    with MemorySystem.open(home, config=config) as memory:
        [_, made_up] = _receipts(memory)
        document = memory.receipt(made_up.position)
        assert "," in document["head_before"]  # folded from the log, as it stood before the record
        lines = list(memory.export_events())
        for checked in (signed, document):
            assert memory.verify_receipt(checked).ok
            assert memory.verify_receipt(checked, log_lines=lines).ok
            wrong = {**checked, "head_before": "0," + checked["head_before"]}
            assert not memory.verify_receipt(wrong, log_lines=lines).ok
