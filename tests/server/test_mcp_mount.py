"""``fermix serve`` also serves the MCP endpoint at ``/mcp``, with the MCP tokens, on the same port
(ADR-0073): a client of the official SDK stores and recalls there what the HTTP API then sees."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import httpx
import pytest

from tests.server.test_serve_process import AUTH, serving
from tests.waits import HANG_GUARD_S

pytest.importorskip("mcp")

from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def test_an_mcp_client_and_the_http_api_share_one_memory_on_one_port(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    digest = hashlib.sha256(b"mcp-secret").hexdigest()
    (home / "config.toml").write_text(f"""
[[fermix_core.mcp_tokens]]
name = "laptop"
sha256 = "{digest}"
agent_id = "ada"
owner_id = "alice"
""", encoding="utf-8")
    with serving(home) as (_, url):
        async def store() -> None:
            http_client = create_mcp_http_client(headers={"Authorization": "Bearer mcp-secret"})
            async with Client(streamable_http_client(f"{url}/mcp", http_client=http_client), cache=None) as client:
                stored = await client.call_tool("memory_store", {"key": "pin", "value": "door code 4711"})
                assert stored.structured_content is not None and stored.structured_content["ok"] is True

        asyncio.run(store())
        with httpx.Client(base_url=url, trust_env=False, timeout=HANG_GUARD_S) as http:
            assert http.post(f"{url}/mcp", json={}).status_code == 401  # the MCP tokens guard /mcp
            rows = http.get("/v1/memories", headers=AUTH, params={"agent_id": "ada", "owner_id": "alice"}).json()
            assert [(r["key"], r["value"]) for r in rows] == [("pin", "door code 4711")]
            missing = http.get("/nowhere", headers=AUTH)
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
