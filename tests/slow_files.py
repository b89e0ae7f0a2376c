"""The longest test modules start first when the suite runs in two processes (``-n 2 --dist loadfile``).

pytest-xdist hands out whole modules and, by default, those with the most tests first: a module of
one or two long tests (a kill mid-write, many writers on one store) was among the last handed out,
and one process ran it alone at the end while the other had finished. Handing out the longest
first (the rest keep xdist's order after them) leaves short modules for the end, where they even
out the two processes. The list only orders the modules: a module missing from it, or a time that
has changed, costs balance, never a test. Seconds are rough, from ``--durations`` runs.

Registered by ``tests/conftest.py`` only when pytest-xdist is installed.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling

# Module -> rough seconds on the two-core machine, most first.
LONGEST: dict[str, float] = {
    "tests/integration/test_prompt_files_deadlock.py": 35,
    "tests/console/test_console_browser.py": 30,
    "tests/server/test_serve_process.py": 25,
    "tests/server/test_typescript_client.py": 20,
    "tests/integration/test_prompt_files.py": 35,
    "tests/integration/test_api_every_method_answers_or_refuses.py": 30,
    "tests/integration/test_reviewer_processes.py": 25,
    "tests/interop/test_litellm_proxy.py": 25,
    "tests/integration/test_crash_durability.py": 25,
    "tests/integration/test_postgres_statistics.py": 12,
    "tests/integration/test_forget.py": 25,
    "tests/integration/test_mcp_server.py": 20,
    "tests/integration/test_cli_every_command_answers_clearly.py": 20,
    "tests/integration/test_verify_progress.py": 20,
    "tests/unit/test_domain_prompt_file_rendering.py": 20,
    "tests/integration/test_concurrency.py": 18,
    "tests/integration/test_readme_examples.py": 15,
    "tests/integration/test_agents_add_items_crash.py": 15,
    "tests/langgraph/test_batches.py": 15,
    "tests/integration/test_migrate_cut_off.py": 15,
    "tests/integration/test_replay.py": 15,
    "tests/integration/test_postgres_store.py": 15,
    "tests/unit/test_domain_reviewer_answer.py": 14,
    "tests/langgraph/test_differential.py": 14,
    "tests/integration/test_crash_mid_upkeep.py": 13,
    "tests/e2e/test_installed_command.py": 13,
    "tests/integration/test_real_model_offline_and_floor.py": 13,
    "tests/integration/test_background_at_close.py": 12,
    "tests/integration/test_job_claims.py": 12,
    "tests/integration/test_vectors.py": 11,
    "tests/integration/test_hash_chain.py": 10,
    "tests/integration/test_erasure_interrupted.py": 10,
    "tests/integration/test_startup_imports.py": 10,
    "tests/unit/test_domain_admission.py": 10,
    "tests/server/test_turn_loop.py": 10,
    "tests/server/test_contract.py": 10,
    "tests/unit/test_domain_scopes.py": 10,
    "tests/unit/test_domain_fence.py": 10,
}


class LongestFilesFirst(LoadFileScheduling):
    """``--dist loadfile``, with the modules of :data:`LONGEST` handed out before the others."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        self._ordered = False

    def _assign_work_unit(self, node: Any) -> None:
        if not self._ordered:  # the first hand-out: the queue of modules is complete
            self._ordered = True
            for scope in sorted((s for s in self.workqueue if s in LONGEST), key=LONGEST.__getitem__):
                self.workqueue.move_to_end(scope, last=False)  # the longest is moved last: first
        super()._assign_work_unit(node)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadFileScheduling | None:
    return LongestFilesFirst(config, log) if config.getvalue("dist") == "loadfile" else None
