"""Moving a home (ADR-0030): ``fermix events export`` / ``events import`` and ``fermix storage
migrate`` copy the log with its chain; the copy verifies, has the source's projection
checksums and prompt files, and exports to the very same bytes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from fermix_memory import AsyncMemorySystem, MemorySystem
from fermix_memory.application import log_transfer
from fermix_memory.domain.log_chain import chain_hash, payload_digest
from tests.cli_runner import run_cli

CONVERSATIONS = ("telegram:42", "slack:C01:thread-1")


def fill(memory: MemorySystem) -> None:
    """Messages, facts replaced and archived, standing rules, prompt files, and a forgotten
    owner (redacted events) in several conversations."""
    for i in range(40):
        for owner in ("alice", "bob", "chlo\u00e9"):
            memory.append_message(agent_id="ada", owner_id=owner, conversation=CONVERSATIONS[i % 2], role="user",
                                  sender=owner,
                                  content=f"message {i} from {owner} \u2615 \"quoted\"\nline two\u2028three\r")
    for owner in ("alice", "bob", "chlo\u00e9"):
        [out] = memory.write_memory({"op": "add", "category": "identity", "key": "home",
                                     "value": f"{owner} lives in Paris"}, agent_id="ada", owner_id=owner,
                                    trust="operator")
        memory.write_memory({"op": "replace", "id": out.memory_id, "value": f"{owner} lives in Lyon"},
                            agent_id="ada", owner_id=owner, trust="operator")
        memory.write_memory({"op": "add", "category": "preference", "key": "drink", "value": "flat white"},
                            agent_id="ada", owner_id=owner, trust="operator")
    memory.write_memory({"op": "add", "category": "directive", "key": "tone", "value": "Answer briefly."},
                        agent_id="ada", owner_id="alice", trust="operator")
    [gone] = memory.write_memory({"op": "add", "category": "interest", "key": "chess", "value": "plays chess"},
                                 agent_id="ada", owner_id="alice", trust="operator")
    memory.write_memory({"op": "archive", "id": gone.memory_id, "reason": "stopped"}, agent_id="ada",
                        owner_id="alice", trust="operator")
    memory.forget_owner("bob")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("source")
    with MemorySystem.open(home) as memory:
        fill(memory)
        assert memory.verify().redacted > 0
    return home


@pytest.fixture(scope="module")
def exported(source: Path, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("exported") / "events.jsonl"
    result = run_cli("events", "export", str(path), home=source)
    assert result.returncode == 0, result.stderr
    return path.read_bytes()


def verified(home: Path) -> dict[str, object]:
    result = run_cli("events", "verify", "--json", home=home)
    assert result.returncode == 0, result.stderr
    report: dict[str, object] = json.loads(result.stdout)
    return report


def prompt_files(home: Path) -> dict[str, str]:
    return {str(p.relative_to(home)): p.read_text(encoding="utf-8") for p in sorted(home.glob("memory/*/*/*.md"))}


def imported(exported: bytes, home: Path, *extra: str) -> Path:
    path = home.parent / f"{home.name}.jsonl"
    path.write_bytes(exported)
    result = run_cli("events", "import", str(path), *extra, home=home)
    assert result.returncode == 0, result.stderr
    return home


def test_the_file_is_a_header_then_every_event_in_log_order(source: Path, exported: bytes) -> None:
    lines = exported.decode("utf-8").split("\n")
    assert lines.pop() == ""
    header = json.loads(lines[0])
    with MemorySystem.open(source, readonly=True) as memory:
        head = memory.head()
    assert header == {"format": "fermix-events", "format_version": 1,
                      "head": {"position": head.position, "hash": head.hash}}
    events = [json.loads(line) for line in lines[1:]]
    assert [e["position"] for e in events] == list(range(1, head.position + 1))
    assert events[-1]["hash"] == head.hash
    redacted = [e for e in events if e.get("redacted")]
    assert redacted and all("payload" not in e and len(e["payload_sha256"]) == 64 for e in redacted)
    assert all(payload_digest(e["payload"]) == e["payload_sha256"] for e in events if "payload" in e)
    # Deterministic bytes: sorted keys, no spaces, UTF-8 text as is.
    assert all(line == json.dumps(json.loads(line), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
               for line in lines)
    assert "chlo\u00e9" in exported.decode("utf-8")


def test_export_import_export_gives_byte_identical_files(exported: bytes, tmp_path: Path) -> None:
    home = imported(exported, tmp_path / "copy")
    again = tmp_path / "again.jsonl"
    assert run_cli("events", "export", str(again), home=home).returncode == 0
    assert again.read_bytes() == exported


def test_the_copy_verifies_with_the_sources_projection_checksums(source: Path, exported: bytes,
                                                                  tmp_path: Path) -> None:
    home = imported(exported, tmp_path / "copy")
    mine, theirs = verified(home), verified(source)
    assert mine["ok"] is True and mine["events"] == theirs["events"]
    assert mine["redacted"] == theirs["redacted"] and mine["redacted"]
    assert mine["table_checksums"] == theirs["table_checksums"]


def test_the_copy_renders_the_sources_prompt_files(source: Path, exported: bytes, tmp_path: Path) -> None:
    home = imported(exported, tmp_path / "copy")
    files = prompt_files(source)
    assert any(name.endswith("USER.md") for name in files) and any(name.endswith("MEMORY.md") for name in files)
    assert not any("/bob/" in name for name in files)  # the forgotten owner's files stay gone
    assert prompt_files(home) == files


def test_export_to_standard_output_and_import_from_standard_input(source: Path, exported: bytes,
                                                                  tmp_path: Path) -> None:
    out = run_cli("events", "export", "-", home=source)
    assert out.returncode == 0 and out.stdout.encode("utf-8") == exported
    result = run_cli("events", "import", "-", home=tmp_path / "copy", stdin=exported)
    assert result.returncode == 0, result.stderr
    assert verified(tmp_path / "copy")["table_checksums"] == verified(source)["table_checksums"]


def test_the_asyncio_api_exports_and_imports_too(source: Path, exported: bytes, tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncMemorySystem.open(source, readonly=True) as memory:
            lines = await memory.export_events()
        assert "".join(lines).encode("utf-8") == exported
        async with AsyncMemorySystem.open(tmp_path / "copy") as copy:
            report = await copy.import_events(lambda: lines)
            assert report.appended == report.events == len(lines) - 1

    asyncio.run(main())


# --- a file that is not right: one error naming the line, nothing written ----------------------


def _edit(field: str, value: object) -> Callable[[list[dict[str, object]]], None]:
    def edit(events: list[dict[str, object]]) -> None:
        events[9][field] = value
    return edit


def _rechained(events: list[dict[str, object]], start: int) -> None:
    """Make the chain hold again from ``events[start]`` on (a forger who recomputes hashes)."""
    prev = str(events[start - 1]["hash"])
    for e in events[start:]:
        e["hash"] = prev = chain_hash(prev, int(str(e["position"])), str(e["stream"]), int(str(e["version"])),
                                      str(e["kind"]), int(str(e["schema"])), str(e["at"]), str(e["payload_sha256"]))


def _payload_off_schema(events: list[dict[str, object]]) -> None:
    payload = json.loads(str(events[9]["payload"]))
    payload["unexpected"] = 1
    events[9]["payload"] = text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    events[9]["payload_sha256"] = payload_digest(text)
    _rechained(events, 9)


def _payload_changed(events: list[dict[str, object]]) -> None:
    events[9]["payload"] = str(events[9]["payload"]).replace("message", "massage")


BAD_FILES: dict[str, tuple[Callable[[list[dict[str, object]]], None], int, str]] = {
    # case: (edit of the events, the line the error names, words of the error)
    "payload_not_matching_its_digest": (_payload_changed, 11, "payload does not match its digest"),
    "time_changed": (_edit("at", "2020-01-01T00:00:00+00:00"), 11, "chain hash does not match"),
    "a_gap": (lambda events: events.pop(9), 11, "expected position 10"),
    "version_out_of_turn": (_edit("version", 7), 11, "does not follow"),
    "payload_off_its_schema": (_payload_off_schema, 11, "does not match its schema"),
    "cut_off": (lambda events: events.pop(), -1, "header names the head"),
    "a_missing_field": (lambda events: events[9].pop("kind"), 11, "missing kind"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_event_file_names_its_line_and_creates_nothing(exported: bytes, tmp_path: Path, case: str) -> None:
    edit, line, words = BAD_FILES[case]
    header, *rest = exported.decode("utf-8").split("\n")[:-1]
    events = [json.loads(text) for text in rest]
    edit(events)
    line = line if line > 0 else len(events) + 1
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([header, *(json.dumps(e, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                                         for e in events)]) + "\n", encoding="utf-8")
    result = run_cli("events", "import", str(path), home=tmp_path / "home")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"line {line}:" in result.stderr and words in result.stderr, result.stderr
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize(("text", "line", "words"), [
    (b"", 1, "the file is empty"),
    (b'{"format":"other"}\n', 1, "not an event file"),
    (b"not json\n", 1, "not JSON"),
])
def test_a_file_that_is_not_an_event_file_is_refused(tmp_path: Path, text: bytes, line: int, words: str) -> None:
    result = run_cli("events", "import", "-", home=tmp_path / "home", stdin=text)
    assert result.returncode == 1 and f"line {line}: " in result.stderr and words in result.stderr, result.stderr
    assert not (tmp_path / "home").exists()


def test_bytes_that_are_not_utf8_name_their_line(exported: bytes, tmp_path: Path) -> None:
    lines = exported.split(b"\n")
    lines[3] = lines[3].replace(b"message", b"m\xffssage", 1)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(lines))
    result = run_cli("events", "import", str(path), home=tmp_path / "home")
    assert result.returncode == 1 and "line 4: not UTF-8" in result.stderr, result.stderr


def test_an_existing_home_with_a_bad_file_is_left_as_it_was(exported: bytes, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home):
        pass
    bad = exported.replace(b"message 3 from", b"message 4 from", 1)
    result = run_cli("events", "import", "-", home=home, stdin=bad)
    assert result.returncode == 1 and "payload does not match its digest" in result.stderr
    with MemorySystem.open(home, readonly=True) as memory:
        assert memory.head().position == 0


# --- a target that holds events -----------------------------------------------------------------


def _prefix(exported: bytes, events: int) -> bytes:
    """The file of the log's first ``events`` events (what a cut-off import left behind)."""
    lines = exported.decode("utf-8").split("\n")[:-1][1:events + 1]
    last = json.loads(lines[-1])
    header = json.dumps({"format": "fermix-events", "format_version": 1,
                         "head": {"position": last["position"], "hash": last["hash"]}},
                        sort_keys=True, separators=(",", ":"))
    return "\n".join([header, *lines, ""]).encode("utf-8")


def test_a_home_that_holds_events_is_refused(exported: bytes, tmp_path: Path) -> None:
    home = imported(_prefix(exported, 50), tmp_path / "home")
    result = run_cli("events", "import", "-", home=home, stdin=exported)
    assert result.returncode == 1 and "--resume" in result.stderr
    assert "already holds events (up to position 50)" in result.stderr
    with MemorySystem.open(home, readonly=True) as memory:
        assert memory.head().position == 50


def test_resume_appends_only_what_follows_a_prefix(source: Path, exported: bytes, tmp_path: Path) -> None:
    home = imported(_prefix(exported, 50), tmp_path / "home")
    result = run_cli("events", "import", "-", "--resume", "--json", home=home, stdin=exported)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["appended"] == report["events"] - 50
    assert run_cli("events", "export", "-", home=home).stdout.encode("utf-8") == exported
    assert verified(home)["table_checksums"] == verified(source)["table_checksums"]
    assert prompt_files(home) == prompt_files(source)


def test_an_import_cut_off_between_batches_leaves_a_prefix_that_resume_finishes(
        source: Path, exported: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_transfer, "BATCH", 40)
    lines = exported.decode("utf-8").split("\n")[:-1]

    def cut_off(done: int, total: int) -> None:
        if done >= 80:
            raise KeyboardInterrupt  # the operator's Ctrl-C, after two batches committed

    with MemorySystem.open(tmp_path / "home") as memory, pytest.raises(KeyboardInterrupt):
        memory.import_events(lambda: lines, progress=cut_off)
    with MemorySystem.open(tmp_path / "home") as memory:
        assert memory.head().position == 80
        # A valid chain, but the erasure record that accounts for its redacted events is still to come.
        assert "no recorded erasure names it" in memory.verify().problem
        report = memory.import_events(lambda: lines, resume=True)
        assert (report.appended, report.events) == (len(lines) - 81, len(lines) - 1)
        assert memory.verify().ok
    assert run_cli("events", "export", "-", home=tmp_path / "home").stdout.encode("utf-8") == exported
    assert prompt_files(tmp_path / "home") == prompt_files(source)


def test_resume_refuses_a_home_whose_log_is_not_a_prefix(exported: bytes, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        memory.append_message(agent_id="ada", owner_id="zoe", conversation="telegram:1", role="user",
                              sender="zoe", content="a log of its own")
    result = run_cli("events", "import", "-", "--resume", home=home, stdin=exported)
    assert result.returncode == 1 and "is not a prefix of the file's" in result.stderr, result.stderr
    with MemorySystem.open(home, readonly=True) as memory:
        assert memory.head().position == 1


# --- storage migrate ------------------------------------------------------------------------------


def test_migrate_copies_the_home_verifies_it_and_prints_both_heads(source: Path, exported: bytes,
                                                                  tmp_path: Path) -> None:
    target = tmp_path / "moved"
    result = run_cli("storage", "migrate", "--to", str(target), home=source)
    assert result.returncode == 0, result.stderr
    with MemorySystem.open(source, readonly=True) as memory:
        head = str(memory.head())
    assert f"source head {head}" in result.stdout and f"target head {head}" in result.stdout
    assert "target verified" in result.stdout
    assert run_cli("events", "export", "-", home=target).stdout.encode("utf-8") == exported
    assert verified(target)["table_checksums"] == verified(source)["table_checksums"]
    assert prompt_files(target) == prompt_files(source)
    again = run_cli("storage", "migrate", "--to", str(target), home=source)
    assert again.returncode == 1 and "already holds" in again.stderr


@pytest.mark.parametrize(("to", "words"), [
    ("postgresql://fermix:secret@db.example:5432/memory", "a URL holding a password"),
    ("postgresql://fermix@db.example:5432", "names no database"),
    ("mysql://x@y/z", "a home folder or a postgresql:// URL"),
])
def test_migrate_to_a_url_says_what_is_wrong(source: Path, tmp_path: Path, to: str, words: str) -> None:
    result = run_cli("storage", "migrate", "--to", to, home=source)
    assert result.returncode == 1 and words in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert "secret" not in result.stderr


def test_migrate_into_postgresql_and_back_gives_the_same_log_and_tables(
        source: Path, exported: bytes, tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERMIX_DATABASE_URL", raising=False)
    into_db = run_cli("storage", "migrate", "--to", postgres_url, home=source)
    assert into_db.returncode == 0, into_db.stderr
    assert "target verified" in into_db.stdout
    # A home that lives in that database exports the same bytes and has the same tables.
    on_db = tmp_path / "on-db"
    on_db.mkdir()
    (on_db / "config.toml").write_text(f'[fermix_core.storage]\nurl = "{postgres_url}"\n', encoding="utf-8")
    assert run_cli("events", "export", "-", home=on_db).stdout.encode("utf-8") == exported
    assert verified(on_db)["table_checksums"] == verified(source)["table_checksums"]
    with MemorySystem.open(on_db):  # a host opening the database renders its own prompt files
        pass
    assert prompt_files(on_db) == prompt_files(source)
    # And back into a folder: the same bytes again.
    back = tmp_path / "back"
    assert run_cli("storage", "migrate", "--to", str(back), home=on_db).returncode == 0
    assert run_cli("events", "export", "-", home=back).stdout.encode("utf-8") == exported
    # The database now holds a log: a second migration into it is refused, naming why.
    again = run_cli("storage", "migrate", "--to", postgres_url, home=source)
    assert again.returncode == 1 and "already holds" in again.stderr
    refused = run_cli("storage", "migrate", "--to", postgres_url, home=on_db)
    assert refused.returncode == 1 and "this very database" in refused.stderr


def test_migrate_into_the_same_home_is_refused(source: Path) -> None:
    result = run_cli("storage", "migrate", "--to", str(source), home=source)
    assert result.returncode == 1 and "this very home" in result.stderr


def test_a_log_of_many_chains_moves_from_postgresql_to_sqlite_and_back_byte_for_byte(
        tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERMIX_DATABASE_URL", raising=False)
    on_db = tmp_path / "on-db"
    with MemorySystem.open(on_db, config={"fermix_core": {"storage": {"url": postgres_url}}}) as memory:
        fill(memory)
        head = memory.head()
    assert len(head.chains) == 16 and sum(1 for p in head.chains if p) > 1  # written on several chains
    (on_db / "config.toml").write_text(f'[fermix_core.storage]\nurl = "{postgres_url}"\n', encoding="utf-8")
    from_db = run_cli("events", "export", "-", home=on_db).stdout.encode("utf-8")
    assert json.loads(from_db.splitlines()[0])["chains"] == list(head.chains)
    folder = imported(from_db, tmp_path / "folder")
    assert run_cli("events", "export", "-", home=folder).stdout.encode("utf-8") == from_db
    assert verified(folder)["table_checksums"] == verified(on_db)["table_checksums"]
    with MemorySystem.open(folder) as memory:  # the SQLite home goes on writing on the 16 chains
        assert memory.head() == head
        memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42").append("user", "still here")
        assert len(memory.head().chains) == 16 and memory.verify().ok


def test_migrate_onto_many_chains_relinks_the_log_and_keeps_every_table(
        source: Path, exported: bytes, tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERMIX_DATABASE_URL", raising=False)
    result = run_cli("storage", "migrate", "--to", postgres_url, "--chains", "8", home=source)
    assert result.returncode == 0, result.stderr
    assert "linked onto 8 chains" in result.stdout and "target verified" in result.stdout
    on_db = tmp_path / "on-db"
    on_db.mkdir()
    (on_db / "config.toml").write_text(f'[fermix_core.storage]\nurl = "{postgres_url}"\n', encoding="utf-8")
    assert verified(on_db)["table_checksums"] == verified(source)["table_checksums"]
    relinked = run_cli("events", "export", "-", home=on_db).stdout.encode("utf-8").splitlines()
    original = exported.splitlines()
    assert len(relinked) == len(original) and len(json.loads(relinked[0])["chains"]) == 8
    for new, old in zip(relinked[1:], original[1:], strict=True):  # the same events; only their links differ
        a, b = json.loads(new), json.loads(old)
        assert {**a, "hash": ""} == {**b, "hash": ""}
    with MemorySystem.open(source, readonly=True) as memory:
        old_anchor = str(memory.head())
    assert run_cli("events", "verify", "--expect-head", old_anchor, home=on_db).returncode == 1  # a new log


def test_linking_onto_other_chains_is_refused_where_it_cannot_hold(exported: bytes, tmp_path: Path) -> None:
    home = imported(_prefix(exported, 50), tmp_path / "home")
    path = tmp_path / "all.jsonl"
    path.write_bytes(exported)
    resumed = run_cli("events", "import", str(path), "--resume", "--chains", "4", home=home)
    assert resumed.returncode == 1 and "empty target" in resumed.stderr
    bad = run_cli("events", "import", str(path), "--chains", "5000", home=tmp_path / "other")
    assert bad.returncode != 0 and "chains" in bad.stderr and bad.stderr.count("\n") == 1
