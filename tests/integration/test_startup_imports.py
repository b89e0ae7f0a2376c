"""The default, offline set-up never loads the HTTP providers: opening a home, appending,
recalling and the CLI start without importing ``httpx`` (it costs every start ~0.1 s). Checked
in a fresh interpreter, since this test process has loaded it already."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys
from pathlib import Path
from fermix_memory import MemorySystem
from fermix_memory.entrypoints import cli
with MemorySystem.open(Path(sys.argv[1])) as memory:
    memory.append_message(agent_id="ada", owner_id="alice", conversation="tg:1", role="user", content="I like tea")
    memory.recall("tea", agent_id="ada", owner_id="alice", conversation="tg:1", source="all")
print(sorted(name for name in sys.modules if name.split(".")[0] == "httpx"))
"""


def test_an_offline_home_starts_without_the_http_providers(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "home")], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout
