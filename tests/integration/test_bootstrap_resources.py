"""What bootstrap opens is closed: by App.close, and when a later bootstrap step fails."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from fermix_memory.adapters.providers import _http
from fermix_memory.adapters.providers.openai_compat import OpenAICompatibleProvider
from fermix_memory.entrypoints import bootstrap as bootstrap_module
from fermix_memory.entrypoints.bootstrap import bootstrap
from tests.integration.loopback_models import unused_base_url

KEY_VAR = "FERMIX_TEST_RESOURCES_KEY"


class RecordedClient(httpx.Client):
    made: list[httpx.Client] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        RecordedClient.made.append(self)


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Client]:
    RecordedClient.made = []
    monkeypatch.setattr(_http.httpx, "Client", RecordedClient)
    monkeypatch.setenv(KEY_VAR, "sk-resources")
    return RecordedClient.made


def two_providers() -> dict[str, Any]:
    common = {"base_url": unused_base_url(), "model": "m", "api_key_env": KEY_VAR}
    providers = [{"name": "a", "kind": "openai", **common}, {"name": "b", "kind": "anthropic", **common}]
    return {"fermix_core": {"providers": providers}}


def open_files(name: str) -> list[str]:
    """Files of this process whose path ends with ``name`` (Linux's /proc)."""
    fds = Path("/proc/self/fd")
    found = []
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.endswith(name):
            found.append(target)
    return found


def test_close_closes_the_http_clients_of_configured_providers(tmp_path: Path, clients: list[httpx.Client]):
    app = bootstrap(tmp_path / "home", config=two_providers())
    assert len(clients) == 2 and not any(c.is_closed for c in clients)

    app.close()

    assert all(c.is_closed for c in clients)
    app.close()  # a second close does nothing


def test_providers_given_by_the_host_stay_open(tmp_path: Path):
    with httpx.Client() as host_client:
        provider = OpenAICompatibleProvider("host", unused_base_url(), "m", None, client=host_client)
        app = bootstrap(tmp_path / "home", providers=[provider])
        app.close()
        assert not host_client.is_closed


def test_a_failing_late_step_closes_what_bootstrap_opened(
    tmp_path: Path, clients: list[httpx.Client], monkeypatch: pytest.MonkeyPatch
):
    def fails(store: object) -> None:
        raise RuntimeError("late step failed")

    monkeypatch.setattr(bootstrap_module, "finish_erasures", fails)
    home = tmp_path / "home"

    with pytest.raises(RuntimeError, match="late step failed"):
        bootstrap(home, config=two_providers())

    assert clients and all(c.is_closed for c in clients)
    assert open_files("memory.db") == []
