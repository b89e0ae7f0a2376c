"""A retention run killed at any point loses nothing that was not due and leaves nothing half
erased: killed inside its transaction, nothing is erased; killed after its commit (before or
during the file rewrite, or before its follow-up), the next open finishes the rewrite and a run
then finds nothing left to do."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from fermix_memory.domain.privacy_events import RetentionRan
from tests.integration.test_forget import found
from tests.integration.test_postgres_forget_bytes import database_folder
from tests.postgres_server import PostgresServer
from tests.waits import HANG_GUARD_S

DUE = ("Kioskquincepin", "Kioskmangopassword", "Expiringturnipcode")
KEPT = ("Telegramwalnutnote", "Goalballoontrip", "Kioskfreshfig")
CONFIG: dict[str, Any] = {"fermix_core": {"retention": {"check_every_s": 0, "policy": [
    {"name": "kiosk", "after": "30d", "channel_prefix": "kiosk:"},
    {"name": "goals", "after": "90d", "category": "goal"}]}}}

CHILD = """
import json, os, sys
from datetime import UTC, datetime, timedelta
from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite.erasure import SqliteErasure
from fermix_memory.application.prompt_files import PromptFiles
from fermix_memory.entrypoints import retention as wiring

class Later:
    def now(self):
        return datetime.now(UTC) + timedelta(days=60)

point = sys.argv[2]
if point == "inside":  # every item redacted and recorded, the prompt files next, then the commit
    PromptFiles.record_in = lambda self, tx, events, at: os._exit(9)
elif point == "before-scrub":
    SqliteErasure.scrub = lambda self: os._exit(9)
elif point == "before-scrub-postgres":
    from fermix_memory.adapters.postgres.erasure import PostgresErasure
    PostgresErasure.scrub = lambda self: os._exit(9)
elif point == "during-vacuum":
    scrub = SqliteErasure.scrub
    def dying_scrub(self):
        with self.store.exclusive("traced") as writer:
            writer.exec_trace = lambda cursor, sql, bindings: (
                sql.lstrip().upper().startswith("VACUUM")
                and cursor.connection.set_progress_handler(lambda: os._exit(9), 50)) or True
        return scrub(self)
    SqliteErasure.scrub = dying_scrub
elif point == "before-follow-up":
    wiring.FollowUpOf.erased = lambda self, records, head: os._exit(9)
with MemorySystem.open(sys.argv[1], config=json.loads(sys.argv[3]), clock=Later()) as memory:
    memory.run_retention()
"""


def fill(home: Path, config: dict[str, Any] = CONFIG) -> None:
    with MemorySystem.open(home, config=config) as memory:
        for i in range(10):
            memory.append_message(agent_id="shop", owner_id="visitor", conversation="kiosk:1", role="user",
                                  content=f"my pin is {DUE[0]} try {i}")
        memory.append_message(agent_id="shop", owner_id="other", conversation="kiosk:2", role="user",
                              content=f"password {DUE[1]}")
        memory.append_message(agent_id="shop", owner_id="visitor", conversation="telegram:1", role="user",
                              content=f"note {KEPT[0]}")
        memory.write_memory({"op": "add", "category": "goal", "key": "trip", "value": KEPT[1]},
                            agent_id="shop", owner_id="visitor", trust="operator")
        memory.write_memory({"op": "add", "category": "preference", "key": "code", "value": DUE[2],
                             "expires_at": (datetime.now(UTC) + timedelta(days=10)).isoformat()},
                            agent_id="shop", owner_id="visitor", trust="operator")


def killed_run(home: Path, point: str, config: dict[str, Any] = CONFIG) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(home), point, json.dumps(config)], capture_output=True,
                          text=True, timeout=HANG_GUARD_S, check=False)
    assert done.returncode == 9, done.stderr


def runs(memory: MemorySystem) -> list[RetentionRan]:
    return [e.event for e in memory.events() if isinstance(e.event, RetentionRan)]


def test_a_run_killed_inside_its_transaction_erases_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    fill(home)
    killed_run(home, "inside")
    with MemorySystem.open(home, config=CONFIG) as memory:
        assert runs(memory) == []
        assert len(memory.history("shop", "kiosk:1", limit=None)) == 10 and memory.history("shop", "kiosk:2")
        assert memory.verify().ok
    assert set(found(home, DUE + KEPT[:2])) == set(DUE + KEPT[:2])


@pytest.mark.parametrize("point", ["before-scrub", "during-vacuum", "before-follow-up"])
def test_a_run_killed_after_its_commit_is_finished_by_the_next_open(tmp_path: Path, point: str) -> None:
    home = tmp_path / "home"
    fill(home)
    killed_run(home, point)
    with MemorySystem.open(home, config=CONFIG) as memory:
        assert [(r.conversations, r.memory_rows, r.policies) for r in runs(memory)] == [
            (2, 1, ("kiosk", "expires_at"))]
        assert memory.history("shop", "kiosk:1", limit=None) == [] and memory.history("shop", "kiosk:2") == []
        assert [m.content for m in memory.history("shop", "telegram:1")] == [f"note {KEPT[0]}"]
        assert [m.value for m in memory.memories(agent_id="shop", owner_id="visitor")] == [KEPT[1]]
        assert memory.run_retention().items == [] and len(runs(memory)) == 1
        assert memory.verify().ok
    assert found(home, DUE) == {}
    assert set(found(home, KEPT[:2])) == set(KEPT[:2])


def test_a_run_killed_before_its_scrub_on_postgresql_is_finished_by_the_next_open(
        postgres_server: PostgresServer, postgres_url: str, tmp_path: Path) -> None:
    home, config = tmp_path / "home", {"fermix_core": {**CONFIG["fermix_core"], "storage": {"url": postgres_url}}}
    fill(home, config)
    killed_run(home, "before-scrub-postgres", config)
    assert set(found(database_folder(postgres_server, postgres_url), DUE)) == set(DUE)  # dead tuples hold them
    with MemorySystem.open(home, config=config) as memory:
        assert [(r.conversations, r.memory_rows) for r in runs(memory)] == [(2, 1)]
        assert memory.run_retention().items == [] and memory.verify().ok
    database = database_folder(postgres_server, postgres_url)
    assert found(database, DUE) == {}
    assert set(found(database, KEPT[:2])) == set(KEPT[:2])
