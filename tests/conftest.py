"""Suite-wide settings: hypothesis never fails a test on wall-clock time (the suite shares a
small, busy machine; timings are not what any property here is about).

Every prompt composed anywhere in the suite (in this process) is also checked against the
request rules of both APIs (``tests/request_rules.py``), whichever shape the test asked for.

One PostgreSQL server serves the whole run (``tests/postgres_server.py``): ``postgres_url`` is a
fresh database of it for one test.

Temporary folders (``tmp_path``, and the temp files of the run and of the processes it starts)
are in memory when the machine has room (``tests/scratch.py``), unless ``TMPDIR`` or
``--basetemp`` says where.

Recall by meaning is off for the run and the processes it starts (``FERMIX_RECALL_BY_MEANING``),
though the ``[semantic]`` extra is installed: a test about it gives its memory an embedder or
sets the variable itself (``recall_by_meaning_default`` below), and every other memory behaves as
on a core install, without loading the model.

The run writes the compiled bytecode of what it imports (``__pycache__``, which git ignores), and
so do the processes it starts, even where the environment says not to (``PYTHONDONTWRITEBYTECODE``):
otherwise every process of every run compiles the package and the test modules (and rewrites
their asserts) again.

With pytest-xdist (``-n 2 --dist loadfile``), the longest modules are handed out first
(``tests/slow_files.py``), so that no long module is left for one process at the end.

What the run has loaded once the tests are collected (modules, strategies, parametrized values)
lives until the end: it is moved out of the garbage collector's reach (``gc.freeze``), so that a
collection a test triggers walks only what the tests made since."""

from __future__ import annotations

import gc
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

from fermix_memory.adapters.sqlite import connection as sqlite_connection
from fermix_memory.application import composer
from fermix_memory.entrypoints import bootstrap
from fermix_memory.entrypoints.recall_by_meaning import RECALL_BY_MEANING_ENV
from tests.postgres_server import postgres_server, postgres_url  # noqa: F401  # fixtures for every test
from tests.request_rules import check_anthropic, check_openai
from tests.scratch import in_memory_folder

settings.register_profile("fermix", deadline=None)
settings.load_profile("fermix")


def pytest_configure(config: pytest.Config) -> None:
    os.environ[RECALL_BY_MEANING_ENV] = "false"
    if sys.dont_write_bytecode:  # PYTHONDONTWRITEBYTECODE: each process would compile every module again
        sys.dont_write_bytecode = False
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if config.option.basetemp is None and "TMPDIR" not in os.environ:
        folder = in_memory_folder()
        if folder is not None:  # for pytest's tmp_path, this process's temp files and its children's
            os.environ["TMPDIR"] = tempfile.tempdir = str(folder)
    if config.pluginmanager.hasplugin("xdist"):  # -n 2 --dist loadfile: the longest modules first
        from tests import slow_files

        config.pluginmanager.register(slow_files, "fermix-longest-files-first")


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def every_composed_prompt_is_a_valid_request(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def openai(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        messages = composer.compose_openai(*args, **kwargs)
        check_openai(messages)
        return messages

    def anthropic(*args: Any, **kwargs: Any) -> tuple[str, list[dict[str, Any]]]:
        prompt = composer.compose_anthropic(*args, **kwargs)
        check_anthropic(prompt)
        return prompt

    monkeypatch.setattr(bootstrap, "compose_openai", openai)
    monkeypatch.setattr(bootstrap, "compose_anthropic", anthropic)
    yield


@pytest.fixture
def recall_by_meaning_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Memories opened from now on (here and in processes started from here) choose recall by
    meaning as a host's would: by their settings, "auto" unless they say otherwise."""
    monkeypatch.delenv(RECALL_BY_MEANING_ENV)


@pytest.fixture
def short_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite connections opened from now on wait 50 ms, not 5 s, for a lock or a reader another
    connection holds: for the tests whose other connection never lets go while they wait."""
    monkeypatch.setattr(sqlite_connection, "BUSY_TIMEOUT_MS", 50)


@pytest.fixture(params=["sqlite", "postgres"])
def every_store(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test once on each store: the home's SQLite file, then a fresh PostgreSQL database
    (``FERMIX_DATABASE_URL``, which every open of the test then uses; set outside ``monkeypatch``
    so that a test undoing its own patches keeps it). A module opts in with
    ``pytestmark = pytest.mark.usefixtures("every_store")``; a test about the SQLite file itself,
    or one whose input is refused before any store is asked, says so with
    ``@pytest.mark.sqlite_only("why")`` and runs once."""
    saved = os.environ.pop("FERMIX_DATABASE_URL", None)
    try:
        if request.param == "postgres":
            marker = request.node.get_closest_marker("sqlite_only")
            if marker is not None:
                pytest.skip(f"SQLite only: {marker.args[0]}")
            os.environ["FERMIX_DATABASE_URL"] = request.getfixturevalue("postgres_url")
        yield str(request.param)
    finally:
        os.environ.pop("FERMIX_DATABASE_URL", None)
        if saved is not None:
            os.environ["FERMIX_DATABASE_URL"] = saved
