"""The PostgreSQL store beyond the contract suite: a whole memory on it, the append-only rules
enforced by the server itself, the chain, safe full-text queries, and the configuration's clear
refusals (a wrong URL, a password in config, a refused connection, a missing database, a missing
extra), none of which ever touches the SQLite file of the home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from fermix_memory.application.errors import ConfigError, ReadOnlyStore, StorageError
from fermix_memory.application.streams import chain_for
from fermix_memory.domain.log_chain import GENESIS_HASH, chain_hash, checkpoint_hash
from tests.cli_runner import run_cli
from tests.postgres_server import PostgresServer
from tests.waits import HANG_GUARD_S

FERMIX = Path(sys.executable).parent / "fermix"
HOSTILE = ["a & b | !c:* <-> d", "'quoted' \"double\" (paren", "\\ backslash :* ''", "*", "!!!", "NEAR(a b)",
           "x' || to_tsquery('y"]


def config(url: str) -> dict[str, Any]:
    return {"fermix_core": {"storage": {"url": url}}}


def sql(url: str, statement: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement)  # type: ignore[arg-type]  # the test's own SQL
        return cur.fetchall() if cur.description else []


def test_a_memory_on_postgres_appends_recalls_composes_and_leaves_the_home_without_a_database(
        postgres_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MemorySystem.open(home, config=config(postgres_url)) as memory:
        s = memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42")
        s.append("user", "Which harbour does my boat Petrel sail from?")
        s.append("assistant", "From Brest, you told me last week.")
        mid = s.append("user", "I live in Paris")
        memory.write_memory({"op": "add", "category": "identity", "key": "home_city", "value": "Lives in Paris"},
                            agent_id="ada", owner_id="alice", writer="reviewer", trust="operator",
                            source_message_id=mid)
        other = memory.session(agent_id="ada", owner_id="bob", conversation="telegram:7")
        other.append("user", "My boat Petrel is blue")
        hits = s.recall("petrel boats", source="history")
        # The matching question brings its reply; bob's message is never alice's.
        assert [h.message.content for h in hits.messages] == ["Which harbour does my boat Petrel sail from?",
                                                               "From Brest, you told me last week."]
        assert hits.messages[1].context_of == hits.messages[0].message.id
        assert [h.memory.key for h in s.recall("Paris", source="memories").memories] == ["home_city"]
        assert "home_city: Lives in Paris" in s.compose_prompt(system="You are Ada.")[0]["content"]
        for text in HOSTILE:
            s.recall(text, source="all")  # any text is a safe query: no error
        report = memory.verify()
        assert report.ok and report.events == 6, report.problem
        replayed = memory.replay_into(tmp_path / "replayed")
        assert replayed["identical"] and replayed["events"] == 6
        assert [e.kind for e in memory.log_entries(kind="memory.added")] == ["memory.added"]
    assert home.is_dir() and not (home / "memory.db").exists()


def test_verify_names_a_projection_row_the_log_does_not_explain_and_a_missing_trigger(postgres_url: str,
                                                                                      tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home", config=config(postgres_url)) as memory:
        memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42").append("user", "hello")
        sql(postgres_url, "UPDATE messages SET content = 'forged'")
        report = memory.verify()
        assert not report.ok and "projection tables differ from the log: messages" in report.problem
        sql(postgres_url, "UPDATE messages SET content = 'hello'")
        assert memory.verify().ok
        sql(postgres_url, "DROP TRIGGER events_append_only_delete ON events")
        report = memory.verify()
        assert not report.ok and "events_append_only_delete" in report.problem
        sql(postgres_url, "DELETE FROM events WHERE position = 1")
        assert not memory.verify().ok


def test_the_server_refuses_changing_or_deleting_events_but_allows_a_redaction(postgres_url: str,
                                                                               tmp_path: Path) -> None:
    import psycopg

    with MemorySystem.open(tmp_path / "home", config=config(postgres_url)) as memory:
        memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42").append("user", "hello")
    for statement in ("DELETE FROM events", "TRUNCATE events", "UPDATE events SET payload = '{}'",
                      "UPDATE events SET stream = 'x'", "UPDATE events SET payload = NULL, kind = 'x'"):
        with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match=r"append-only|only be redacted"):
            sql(postgres_url, statement)
    sql(postgres_url, "UPDATE events SET payload = NULL")
    assert sql(postgres_url, "SELECT count(*), count(payload) FROM events") == [(1, 0)]


@pytest.mark.parametrize("chains", [1, 16])
def test_the_chain_links_every_event_over_its_payload_digest(postgres_url: str, tmp_path: Path, chains: int) -> None:
    with MemorySystem.open(tmp_path / "home", config={"fermix_core": {"storage": {"url": postgres_url,
                                                                                  "chains": chains}}}) as memory:
        for owner in ("alice", "bob", "carol"):
            s = memory.session(agent_id="ada", owner_id=owner, conversation=f"telegram:{owner}")
            for n in range(3):
                s.append("user", f"message {n}")
        head = memory.head()
    rows = sql(postgres_url, "SELECT position, stream, version, kind, schema, recorded_at, payload_sha256, prev_hash,"
                             " hash FROM events ORDER BY position")
    previous = [GENESIS_HASH] * chains
    for position, stream, version, kind, schema, recorded_at, digest, prev_hash, row_hash in rows:
        chain = chain_for(stream, chains)
        assert prev_hash == previous[chain]  # the event before it in its own chain
        assert row_hash == chain_hash(prev_hash, position, stream, version, kind, schema, recorded_at, digest)
        previous[chain] = row_hash
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))  # one writer: no gaps either way
    if chains == 1:
        assert str(head) == f"{rows[-1][0]}:{rows[-1][-1]}"
    else:  # each chain's last position, then the checkpoint over the heads
        assert len({chain_for(r[1], chains) for r in rows}) > 1
        lasts = {chain_for(r[1], chains): (r[0], r[-1]) for r in rows}
        heads = [lasts.get(c, (0, GENESIS_HASH)) for c in range(chains)]
        assert str(head) == f"{','.join(str(p) for p, _ in heads)}:{checkpoint_hash(heads)}"


def test_a_read_only_open_reads_and_refuses_writes(postgres_url: str, tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home", config=config(postgres_url)) as memory:
        memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42").append("user", "hello")
    with MemorySystem.open(tmp_path / "home", config=config(postgres_url), readonly=True) as memory:
        s = memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42")
        assert [m["content"] for m in s.compose_prompt()] == ["hello"]
        with pytest.raises(ReadOnlyStore):
            s.append("user", "more")


# --- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "needle"), [
    ("postgresql://fermix:secret@db.example/fermix", "without a password"),
    ("postgresql://fermix@db.example/fermix?password=secret", "without a password"),
    ("mysql://fermix@db.example/fermix", "postgresql://USER@HOST:PORT/DATABASE"),
    ("postgresql://fermix@db.example:port/fermix", "postgresql://USER@HOST:PORT/DATABASE"),
])
def test_a_bad_url_in_config_toml_is_refused_naming_the_key_never_the_password(url: str, needle: str,
                                                                                tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[fermix_core.storage]\nurl = "{url}"\n')
    with pytest.raises(ConfigError, match=r"fermix_core\.storage\.url") as refused:
        MemorySystem.open(home)
    assert needle in str(refused.value) and "secret" not in str(refused.value)
    assert not (home / "memory.db").exists()


def test_the_environment_url_wins_over_the_file_and_is_checked_too(postgres_url: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[fermix_core.storage]\nurl = "postgresql://nobody@/nothing?host=/nowhere"\n')
    monkeypatch.setenv("FERMIX_DATABASE_URL", postgres_url)
    with MemorySystem.open(home) as memory:
        memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42").append("user", "hello")
    assert sql(postgres_url, "SELECT count(*) FROM events") == [(1,)]
    monkeypatch.setenv("FERMIX_DATABASE_URL", "postgresql://u:hunter2@db.example/fermix")
    with pytest.raises(ConfigError, match=r"FERMIX_DATABASE_URL .*password") as refused:
        MemorySystem.open(home)
    assert "hunter2" not in str(refused.value)
    assert not (home / "memory.db").exists()


@pytest.mark.parametrize("case", ["refused", "no_socket", "no_database"])
def test_an_unreachable_store_is_one_clear_line_through_the_cli_and_no_sqlite_file_appears(
        case: str, postgres_server: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, needle = {
        "refused": ("postgresql://fermix@127.0.0.1:1/fermix", "connection refused"),
        "no_socket": (f"postgresql://fermix@/fermix?host={tmp_path / 'nowhere'}", "connection refused"),
        "no_database": (postgres_server.url("no_such_db"), "the database 'no_such_db' does not exist"),
    }[case]
    monkeypatch.setenv("FERMIX_DATABASE_URL", url)
    home = tmp_path / "home"
    result = run_cli("events", "head", home=home)
    assert result.returncode != 0 and result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in result.stderr, result.stderr
    assert not (home / "memory.db").exists()


def test_a_missing_driver_is_one_clear_line(postgres_url: str, tmp_path: Path) -> None:
    code = ("import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
            "from fermix_memory import MemorySystem\n"
            f"MemorySystem.open({str(tmp_path / 'home')!r}, config={config(postgres_url)!r})\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "ConfigError: a PostgreSQL URL is configured but the PostgreSQL driver is not installed:" \
           " pip install 'fermix-memory[postgres]'" in done.stderr
    assert not (tmp_path / "home" / "memory.db").exists()


# A host: opens the memory of the home it is given (the URL from its config.toml or from
# FERMIX_DATABASE_URL), then for each line on stdin ("append TEXT" appends a user message first)
# prints alice's prompt and USER.md as this host has it, without ever reopening anything.
HOST = """
import json, sys
from fermix_memory import MemorySystem
with MemorySystem.open(sys.argv[1]) as memory:
    s = memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42")
    user_md = memory.prompt_file("ada", "alice", "user_md")
    for line in sys.stdin:
        if line.startswith("append "):
            s.append("user", line.removeprefix("append ").rstrip("\\n"))
        prompt = s.compose_prompt(system="You are Ada.")
        print(json.dumps({"prompt": prompt, "user_md": user_md.read_text(encoding="utf-8") if user_md.exists()
                          else None}), flush=True)
"""


class Host:
    """A host process running ``HOST`` on its own home."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home = home
        self.process = subprocess.Popen([sys.executable, "-c", HOST, str(home)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def ask(self, line: str = "compose") -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, f"the host at {self.home} ended: {self.process.communicate(timeout=HANG_GUARD_S)[1]}"
        return dict(json.loads(answer))

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=HANG_GUARD_S)
            finally:
                if self.process.poll() is None:
                    self.process.kill()
        assert self.process.returncode == 0, self.process.communicate()[1]


def test_a_fact_written_on_one_host_shows_in_another_hosts_prompt_and_user_md_without_a_restart(
        postgres_url: str, tmp_path: Path) -> None:
    """Two hosts, two processes, two homes, one database: host A names it in its config.toml,
    host B in FERMIX_DATABASE_URL. What A's operator sets shows in B's next prompts, and B's own
    USER.md is rendered from the revision in the database, each time the fact changes."""
    env = {k: v for k, v in os.environ.items() if k not in ("FERMIX_DATABASE_URL", "FERMIX_HOME")}
    home_a, home_b = tmp_path / "host-a", tmp_path / "host-b"
    home_a.mkdir()
    (home_a / "config.toml").write_text(f'[fermix_core.storage]\nurl = "{postgres_url}"\n', encoding="utf-8")
    a, b = Host(home_a, env), Host(home_b, {**env, "FERMIX_DATABASE_URL": postgres_url})
    try:
        assert b.ask() == {"prompt": [{"role": "system", "content": "You are Ada."}], "user_md": None}
        a.ask("append I live in Paris")

        def set_on_a_then_see_on_b(city: str) -> dict[str, Any]:
            done = subprocess.run([str(FERMIX), "--home", str(home_a), "memory", "set", "--agent", "ada", "--owner",
                                   "alice", "--category", "identity", "--key", "home city", f"Lives in {city}"],
                                  capture_output=True, text=True, env=env, timeout=HANG_GUARD_S, check=False)
            assert done.returncode == 0, done.stderr
            seen: dict[str, Any] = {}

            def b_shows_it() -> bool:
                seen.update(b.ask())
                return f"home_city: Lives in {city}" in seen["prompt"][0]["content"] and \
                    f"Lives in {city}" in (seen["user_md"] or "")

            _until(b_shows_it, f"host B shows the fact (Lives in {city}) without a restart")
            return seen

        for city in ("Paris", "Lyon"):  # a new fact, then a changed one
            seen = set_on_a_then_see_on_b(city)
            assert seen["prompt"][-1] == {"role": "user", "content": "I live in Paris"}
            with MemorySystem.open(tmp_path / "reader", config=config(postgres_url), readonly=True) as reader:
                [revision] = reader.resource_history("user_md", agent_id="ada", owner_id="alice", limit=1)
            assert seen["user_md"] == revision.content == (home_a / "memory" / "ada" / "alice" / "USER.md"
                                                            ).read_text(encoding="utf-8")
    finally:
        a.close()
        b.close()
    assert not (home_a / "memory.db").exists() and not (home_b / "memory.db").exists()


def _until(condition: Any, what: str) -> None:
    """Poll ``condition`` until it holds (a notification is asynchronous); fail after 10 s."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        assert time.monotonic() < deadline, f"not within 10 s: {what}"
        time.sleep(0.01)


def test_a_write_on_one_host_reaches_the_caches_and_prompt_files_of_another_through_notify(
        postgres_url: str, tmp_path: Path) -> None:
    from fermix_memory.adapters.postgres.event_store import PostgresEventStore
    from fermix_memory.entrypoints.bootstrap import bootstrap

    store_b = PostgresEventStore(postgres_url)
    reads: list[str] = []
    read = store_b.rows
    store_b.rows = lambda sql, params=(), **kw: (reads.append(sql), read(sql, params, **kw))[1]  # type: ignore[method-assign]
    with MemorySystem.open(tmp_path / "host-a", config=config(postgres_url)) as a, \
            MemorySystem(bootstrap(tmp_path / "host-b", store=store_b)) as b:
        _until(lambda: store_b.listening, "host b listens")
        on_b = b.session(agent_id="ada", owner_id="alice", conversation="telegram:42")
        other_on_b = b.session(agent_id="ada", owner_id="bob", conversation="telegram:7")
        other_on_b.append("user", "I am Bob")
        assert on_b.compose_prompt() == []
        other_on_b.compose_prompt()
        reads.clear()
        assert [m["content"] for m in other_on_b.compose_prompt()] == ["I am Bob"]
        unchanged = list(reads)
        assert not any("FROM events" in q or "FROM messages" in q for q in unchanged), \
            "nothing changed: the window comes from memory and no position is asked of the server"

        on_a = a.session(agent_id="ada", owner_id="alice", conversation="telegram:42")
        mid = on_a.append("user", "I live in Paris")
        a.write_memory({"op": "add", "category": "identity", "key": "home_city", "value": "Lives in Paris"},
                       agent_id="ada", owner_id="alice", writer="reviewer", trust="operator", source_message_id=mid)
        user_md = tmp_path / "host-b" / "memory" / "ada" / "alice" / "USER.md"
        _until(lambda: user_md.exists() and "Lives in Paris" in user_md.read_text(encoding="utf-8"),
               "host b renders alice's USER.md from the database")
        head = a.head().position
        _until(lambda: store_b.known_position() == head, "host b hears every write")
        reads.clear()
        assert [m["content"] for m in other_on_b.compose_prompt()] == ["I am Bob"]
        assert reads == unchanged, "a write to another conversation leaves this one's cached window alone"
        prompt = on_b.compose_prompt(system="You are Ada.")
        assert "home_city: Lives in Paris" in prompt[0]["content"]
        assert prompt[-1] == {"role": "user", "content": "I live in Paris"}


def test_what_was_written_while_a_host_did_not_listen_reaches_its_prompt_files_when_it_listens_again(
        postgres_url: str, tmp_path: Path) -> None:
    from fermix_memory.adapters.postgres.event_store import PostgresEventStore
    from fermix_memory.entrypoints.bootstrap import bootstrap

    store_b = PostgresEventStore(postgres_url)
    with MemorySystem.open(tmp_path / "host-a", config=config(postgres_url)) as a, \
            MemorySystem(bootstrap(tmp_path / "host-b", store=store_b)) as b:
        on_b = b.session(agent_id="ada", owner_id="alice", conversation="telegram:42")
        assert on_b.compose_prompt() == []
        a.write_memory({"op": "add", "category": "identity", "key": "name", "value": "Bob"}, agent_id="ada",
                       owner_id="bob", writer="reviewer", trust="operator")  # host a is warm: its next write is quick
        _until(lambda: store_b.listening, "host b listens")
        database = sql(postgres_url, "SELECT current_database()")[0][0]
        sql(postgres_url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"  # as a network failure would
                          f" WHERE datname = '{database}' AND application_name = 'fermix change feed'")
        _until(lambda: not store_b.listening, "host b has lost its change feed")
        a.write_memory({"op": "add", "category": "identity", "key": "home_city", "value": "Lives in Paris"},
                       agent_id="ada", owner_id="alice", writer="reviewer", trust="operator")
        # No notification of that write ever reaches host b: it hears of it when it listens again.
        user_md = tmp_path / "host-b" / "memory" / "ada" / "alice" / "USER.md"
        _until(lambda: user_md.exists() and "Lives in Paris" in user_md.read_text(encoding="utf-8"),
               "host b renders alice's USER.md once it listens again")
        _until(lambda: store_b.listening, "host b listens again")
        assert "home_city: Lives in Paris" in on_b.compose_prompt(system="You are Ada.")[0]["content"]


def test_a_lost_connection_is_a_storage_error_and_the_pool_reconnects(postgres_server: PostgresServer,
                                                                      tmp_path: Path) -> None:
    url = postgres_server.fresh_database()
    with MemorySystem.open(tmp_path / "home", config=config(url)) as memory:
        s = memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42")
        s.append("user", "before")
        # Every connection of the memory is cut, as a server restart or a network failure would.
        database = sql(url, "SELECT current_database()")[0][0]
        sql(postgres_server.url(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                   f" WHERE datname = '{database}'")
        outcomes = []
        for text in ("during", "after", "later"):
            try:
                s.append("user", text)
                outcomes.append(text)
            except StorageError as exc:
                assert "connection" in str(exc)
        assert outcomes[-2:] == ["after", "later"]
        contents = [m["content"] for m in s.compose_prompt()]
        assert contents == ["before", *outcomes]
        assert memory.verify().ok


def test_a_server_restarted_under_load_loses_nothing_acknowledged_and_the_writers_go_on(
        postgres_server: PostgresServer, tmp_path: Path) -> None:
    url = postgres_server.fresh_database()
    acked: dict[int, str] = {}
    failures: list[BaseException] = []
    after_restart = [0] * 4
    restarted, stop = threading.Event(), threading.Event()
    from fermix_memory.adapters.postgres.event_store import PostgresEventStore
    from fermix_memory.entrypoints.bootstrap import bootstrap

    store = PostgresEventStore(url)
    with MemorySystem(bootstrap(tmp_path / "home", store=store)) as memory:

        def writer(n: int) -> None:
            s = memory.session(agent_id="ada", owner_id=f"owner-{n}", conversation=f"telegram:{n}")
            i = 0
            while not stop.is_set():
                text = f"writer {n} message {i}"
                i += 1
                try:
                    acked[s.append("user", text)] = text
                except BaseException as exc:  # every failure is looked at below
                    failures.append(exc)
                    continue
                if restarted.is_set():
                    after_restart[n] += 1

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        try:
            _until(lambda: len(acked) >= 40, "the writers are under way")
            postgres_server.restart()  # pg_ctl restart -m fast: every session ended mid-write
            restarted.set()
            _until(lambda: min(after_restart) >= 10,
                   "every writer writes again once the server is back")
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        # A write in flight either committed or failed with a clear StorageError (one whose COMMIT
        # was under way cannot know which); the others were retried on new connections.
        assert all(isinstance(f, StorageError) and "lost while committing" in str(f) for f in failures), failures
        assert min(after_restart) >= 10
        stored = dict(sql(url, "SELECT id, content FROM messages"))
        assert {mid: stored.get(mid) for mid in acked} == acked, "an acknowledged message was lost"
        report = memory.verify()
        assert report.ok, report.problem  # every chain links: nothing forked
        _until(lambda: store.listening and store.known_position() == store.last_position(),
               "the change feed listens again, caught up with the log")


def test_setup_init_with_a_database_url_migrates_it_and_creates_no_sqlite_file(
        postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERMIX_DATABASE_URL", postgres_url)
    home = tmp_path / "home"
    result = run_cli("setup", "init", home=home)
    assert result.returncode == 0, result.stderr
    assert f"kept the existing {postgres_url}" in result.stdout
    assert (home / "config.toml").is_file() and not (home / "memory.db").exists()
    from fermix_memory.adapters.postgres.schema import SCHEMA_VERSION

    assert sql(postgres_url, "SELECT max(version) FROM fermix_migrations") == [(SCHEMA_VERSION,)]
