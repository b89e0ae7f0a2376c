"""Suite-wide settings: hypothesis never fails a test on wall-clock time (the suite shares a
small, busy machine; timings are not what any property here is about).

Every prompt composed anywhere in the suite (in this process) is also checked against the
request rules of both APIs (``tests/request_rules.py``), whichever shape the test asked for.

One PostgreSQL server serves the whole run (``tests/postgres_server.py``): ``postgres_url`` is a
fresh database of it for one test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

from fermix_memory.application import composer
from fermix_memory.entrypoints import bootstrap
from tests.postgres_server import postgres_server, postgres_url  # noqa: F401  # fixtures for every test
from tests.request_rules import check_anthropic, check_openai

settings.register_profile("fermix", deadline=None)
settings.load_profile("fermix")


@pytest.fixture(autouse=True)
def every_composed_prompt_is_a_valid_request(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def checked(*args: Any, **kwargs: Any) -> composer.ComposedPrompt:
        prompt = composer.compose_prompt(*args, **kwargs)
        check_openai(composer.as_openai(prompt))
        check_anthropic(composer.as_anthropic(prompt))
        return prompt

    monkeypatch.setattr(bootstrap, "compose_prompt", checked)
    yield


@pytest.fixture(params=["sqlite", "postgres"])
def every_store(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test once on each store: the home's SQLite file, then a fresh PostgreSQL database
    (``FERMIX_DATABASE_URL``, which every open of the test then uses; set outside ``monkeypatch``
    so that a test undoing its own patches keeps it). A module opts in with
    ``pytestmark = pytest.mark.usefixtures("every_store")``; a test about the SQLite file itself
    says so with ``@pytest.mark.sqlite_only("why")``."""
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
