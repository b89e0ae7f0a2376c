"""Suite-wide settings: hypothesis never fails a test on wall-clock time (the suite shares a
small, busy machine; timings are not what any property here is about).

Every prompt composed anywhere in the suite (in this process) is also checked against the
request rules of both APIs (``tests/request_rules.py``), whichever shape the test asked for.

One PostgreSQL server serves the whole run (``tests/postgres_server.py``): ``postgres_url`` is a
fresh database of it for one test."""

from __future__ import annotations

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
def every_store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test once on each store: the home's SQLite file, then a fresh PostgreSQL database
    (``FERMIX_DATABASE_URL``, which every open of the test then uses)."""
    if request.param == "postgres":
        monkeypatch.setenv("FERMIX_DATABASE_URL", request.getfixturevalue("postgres_url"))
    else:
        monkeypatch.delenv("FERMIX_DATABASE_URL", raising=False)
    return str(request.param)
