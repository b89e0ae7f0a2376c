"""A read-only command imports the readers only (ADR-0063): ``fermix memory list`` loads the
settings, the store opened read-only and its row queries, never a use case of the writer side
(reviewer, compaction, erasure, jobs, the model providers, the tokenizer, the embedding model).

Checked in fresh interpreters on a home with a message and a row: the installed command under
``-X importtime`` (what an operator profiles it with), and the same command with ``sys.modules``
listed at its exit (``importtime`` does not show a module loaded by ``importlib.import_module``,
as the command's own group module is). Not a time measurement: ``benchmarks/startup.py`` times it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waits import HANG_GUARD_S

# What ``memory list`` may import of this package: the command line, the home and its settings,
# the SQLite store opened read-only, its queries and the domain values they return; not the write
# transaction (the events' codec, the projections) nor the domain events (every event class).
ALLOWED = {
    "fermix_memory",
    "fermix_memory.adapters", "fermix_memory.adapters.clock", "fermix_memory.adapters.config_toml",
    "fermix_memory.adapters.durable_file",
    "fermix_memory.adapters.sql", "fermix_memory.adapters.sql.copy_mark", "fermix_memory.adapters.sql.cursor",
    "fermix_memory.adapters.sql.ddl", "fermix_memory.adapters.sql.event_log", "fermix_memory.adapters.sql.marks",
    "fermix_memory.adapters.sql.event_store", "fermix_memory.adapters.sql.head", "fermix_memory.adapters.sql.history",
    "fermix_memory.adapters.sql.queries", "fermix_memory.adapters.sql.read_side", "fermix_memory.adapters.sql.rows",
    "fermix_memory.adapters.sql.rows_under",
    "fermix_memory.adapters.sql.scope_sql", "fermix_memory.adapters.sql.scope_tokens",
    "fermix_memory.adapters.sql.search_terms",
    "fermix_memory.adapters.sqlite", "fermix_memory.adapters.sqlite.connection",
    "fermix_memory.adapters.sqlite.event_store", "fermix_memory.adapters.sqlite.fts_query",
    "fermix_memory.adapters.sqlite.group_commit", "fermix_memory.adapters.sqlite.history_rank",
    "fermix_memory.adapters.sqlite.history_search", "fermix_memory.adapters.sqlite.memory_vector_changes",
    "fermix_memory.adapters.sqlite.json_numbers",  # a read's bounds of JSON numbers (ADR-0109)
    "fermix_memory.adapters.sqlite.full_text_catch_up",  # its marks' SQL, read by the searches (ADR-0091)
    "fermix_memory.adapters.sqlite.migrations",
    "fermix_memory.adapters.sqlite.queries", "fermix_memory.adapters.sqlite.schema",
    "fermix_memory.adapters.sqlite.wal_checkpoints",
    "fermix_memory.application", "fermix_memory.application.errors", "fermix_memory.application.message_input",
    "fermix_memory.application.query_ports", "fermix_memory.application.settings",
    "fermix_memory.application.settings_checks", "fermix_memory.application.settings_mcp",
    "fermix_memory.application.settings_storage", "fermix_memory.application.store_ports",
    "fermix_memory.application.settings_retention", "fermix_memory.application.settings_timeouts",
    "fermix_memory.application.write_at_once",  # what a write was asked (ADR-0110), read by the group commit
    "fermix_memory.domain.retention", "fermix_memory.entrypoints.cli.erased_lines",
    "fermix_memory.application.stored_messages", "fermix_memory.application.streams",
    "fermix_memory.domain", "fermix_memory.domain.checkpoint", "fermix_memory.domain.conversation_states",
    "fermix_memory.domain.errors", "fermix_memory.domain.log_chain", "fermix_memory.domain.mark_keys",
    "fermix_memory.domain.memory", "fermix_memory.domain.query_words",
    "fermix_memory.domain.message_metadata", "fermix_memory.domain.messages", "fermix_memory.domain.row_lookup",
    "fermix_memory.domain.scopes", "fermix_memory.domain.tool_calls", "fermix_memory.domain.values",
    "fermix_memory.entrypoints", "fermix_memory.entrypoints.cli", "fermix_memory.entrypoints.cli.commands",
    "fermix_memory.entrypoints.cli.flags", "fermix_memory.entrypoints.cli.memory",
    "fermix_memory.entrypoints.cli.output", "fermix_memory.entrypoints.cli.parser", "fermix_memory.entrypoints.home",
    "fermix_memory.entrypoints.reader", "fermix_memory.entrypoints.storage",
    "fermix_memory.__main__",
}
# Named, so that a failure says what came in: the writer side and what only it needs.
NEVER = (
    "fermix_memory.application.reviewer", "fermix_memory.application.compaction", "fermix_memory.application.forget",
    "fermix_memory.application.jobs", "fermix_memory.application.history", "fermix_memory.application.memory_writes",
    "fermix_memory.application.host_input", "fermix_memory.application.commands",
    "fermix_memory.application.turns", "fermix_memory.application.background", "fermix_memory.domain.admission",
    "fermix_memory.adapters.providers", "fermix_memory.adapters.embedding", "fermix_memory.adapters.tokens_tiktoken",
    "fermix_memory.entrypoints.bootstrap", "fermix_memory.entrypoints.api.memory_system",
    "fermix_memory.adapters.sql.transaction", "fermix_memory.adapters.sql.projections",
    "fermix_memory.adapters.sql.codec", "fermix_memory.domain.events", "fermix_memory.application.caches",
    "httpx", "tiktoken", "onnxruntime", "tokenizers", "tenacity", "apsw.ext", "tomlkit", "cattrs",
)

PROBE = """
import json, runpy, sys
sys.argv = ["fermix", *sys.argv[1:]]
try:
    runpy.run_module("fermix_memory", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
sys.stderr.write("MODULES " + json.dumps([code, sorted(sys.modules)]) + "\\n")
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fermix_memory import MemorySystem

    home = tmp_path_factory.mktemp("reads") / "home"
    with MemorySystem.open(home) as memory:
        mid = memory.append_message(agent_id="ada", owner_id="alice", conversation="tg:1", role="user",
                                    content="I live in Paris")
        memory.write_memory({"op": "add", "category": "identity", "key": "home_city", "value": "Lives in Paris"},
                            agent_id="ada", owner_id="alice", trust="operator", source_message_id=mid)
    return home


def importtime_names(stderr: str) -> set[str]:
    """The modules ``-X importtime`` lists (``import time: SELF | CUMULATIVE | NAME``)."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.add(name)
    return names


def unwanted(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == bad or n.startswith(bad + ".") for bad in NEVER))


def test_memory_list_imports_the_readers_only(home: Path) -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "fermix_memory", "--home", str(home),
                           "memory", "list"], capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "home_city = Lives in Paris" in done.stdout
    names = importtime_names(done.stderr)
    assert "fermix_memory.entrypoints.reader" in names and "apsw" in names  # the log is the one looked for
    ours = {n for n in names if n.split(".")[0] == "fermix_memory"}
    assert sorted(ours - ALLOWED) == []
    assert unwanted(names) == []


def test_memory_list_holds_no_writer_module_at_exit(home: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, "--home", str(home), "memory", "list"],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    [line] = [x for x in done.stderr.splitlines() if x.startswith("MODULES ")]
    code, modules = json.loads(line.removeprefix("MODULES "))
    assert code == 0, done.stderr[-2000:]
    ours = {n for n in modules if n.split(".")[0] == "fermix_memory"}
    assert sorted(ours - ALLOWED) == []
    assert unwanted(set(modules)) == []
