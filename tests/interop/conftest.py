"""A real LiteLLM proxy on 127.0.0.1, started once per module, answering from ``mock_response``.

The proxy lives in its own virtual environment, ``.venv/interop`` at the repository's root
(``tests/interop/requirements.txt``; the README's test command makes it), since its pins cannot
share one with the ``[mcp]`` extra. Without it these tests are skipped, except under CI (``CI``
set), where a missing proxy is an error. The proxy runs fully
offline: ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (no cost map download), no database.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.loopback_models import fenced_json, prose_around_json

HOME_CITY = {"op": "add", "category": "identity", "key": "home_city", "value": "Berlin"}
OPS = json.dumps({"operations": [HOME_CITY]})
SLOW_S = 3  # the "slow" deployment answers after this long; clients give up sooner

# model_name -> (litellm model, mock_response or None, extra litellm_params)
DEPLOYMENTS: dict[str, tuple[str, str | None, dict[str, object]]] = {
    "gpt-4o-ops": ("openai/gpt-4o", OPS, {}),
    "gpt-4o-fenced": ("openai/gpt-4o", fenced_json({"operations": [HOME_CITY]}), {}),
    "gpt-4o-prose": ("openai/gpt-4o", prose_around_json({"operations": [HOME_CITY]}), {}),
    "gpt-4o-empty": ("openai/gpt-4o", '{"operations": []}', {}),
    "gpt-4o-nothing": ("openai/gpt-4o", "Nothing to save.", {}),
    "o4-mini-ops": ("openai/o4-mini", OPS, {}),
    "claude-sonnet-4-5": ("anthropic/claude-sonnet-4-5", OPS, {}),
    "gpt-4o-429": ("openai/gpt-4o", "litellm.RateLimitError", {}),
    "gpt-4o-500": ("openai/gpt-4o", "litellm.InternalServerError", {}),
    "gpt-4o-slow": ("openai/gpt-4o", OPS, {"mock_delay": SLOW_S}),
}


INTEROP_VENV = Path(__file__).resolve().parents[2] / ".venv" / "interop"


def _litellm_command() -> list[str] | None:
    found = (shutil.which("litellm", path=str(INTEROP_VENV / "bin"))
             or shutil.which("litellm", path=str(Path(sys.executable).parent)) or shutil.which("litellm"))
    return [found] if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _config() -> str:
    lines = ["model_list:"]
    for name, (model, mock, extra) in DEPLOYMENTS.items():
        params = {"model": model, "api_key": "sk-interop-not-a-key", **extra}
        if mock is not None:
            params["mock_response"] = mock
        lines.append(f"  - model_name: {json.dumps(name)}")
        lines.append("    litellm_params:")
        lines += [f"      {key}: {json.dumps(value)}" for key, value in params.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def litellm_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The proxy's root URL (``http://127.0.0.1:PORT``)."""
    command = _litellm_command()
    if command is None:
        if os.environ.get("CI"):
            pytest.fail("the LiteLLM proxy is not installed (.venv/interop: tests/interop/requirements.txt)")
        pytest.skip("the LiteLLM proxy is not installed (.venv/interop: tests/interop/requirements.txt)")
    folder = tmp_path_factory.mktemp("litellm")
    config = folder / "config.yaml"
    config.write_text(_config(), encoding="utf-8")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY") and k != "DATABASE_URL"}
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False", "NO_PROXY": "*"})
    log = (folder / "proxy.log").open("wb")
    process = subprocess.Popen(
        [*command, "--config", str(config), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=folder,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        with httpx.Client(trust_env=False) as client:
            while True:
                if process.poll() is not None:
                    pytest.fail(f"the LiteLLM proxy exited: {(folder / 'proxy.log').read_text()[-2000:]}")
                try:
                    if client.get(url + "/health/liveliness", timeout=1.0).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail("the LiteLLM proxy did not start within 120 s")
                time.sleep(0.25)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
