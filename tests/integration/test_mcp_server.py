"""The MCP server through the SDK's own ``Client``: in-process for the cases, one real stdio
subprocess (the README's desktop config) and one real HTTP server on 127.0.0.1 (ADR-0025)."""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from fermix_memory import MemorySystem
from fermix_memory.application.settings import settings_from_mapping
from fermix_memory.application.tool_definitions import tool_definitions
from fermix_memory.entrypoints.mcp.server import OneSpeaker, build_server, token_sha256
from tests.cli_runner import run_cli
from tests.waits import HANG_GUARD_S

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home") as opened:
        yield opened


def connect(memory: MemorySystem, owner: str = "alice", conversation: str = "mcp:stdio") -> Client:
    """A client of a server built now, as a desktop client's launch of ``fermix mcp`` would be."""
    session = memory.session(agent_id="ada", owner_id=owner, conversation=conversation)
    return Client(build_server(memory, OneSpeaker(session)), cache=None)


def run(test: Callable[[], Awaitable[None]]) -> None:
    anyio.run(test)


# --- tools ----------------------------------------------------------------------------------------


def test_the_tools_are_the_memory_tools_with_their_own_definitions(memory: MemorySystem) -> None:
    async def test() -> None:
        async with connect(memory) as client:
            tools = (await client.list_tools()).tools
        assert [(t.name, t.description, t.input_schema) for t in tools] == [
            (d["name"], d["description"], d["parameters"]) for d in tool_definitions()]
        hints = {t.name: t.annotations.read_only_hint for t in tools if t.annotations}
        assert hints == {"memory_store": False, "memory_recall": True, "memory_sources_list": True}

    run(test)


def test_a_fact_stored_in_one_chat_is_recalled_in_the_next(memory: MemorySystem) -> None:
    async def test() -> None:
        async with connect(memory) as first_chat:
            stored = await first_chat.call_tool("memory_store", {"key": "flight", "value": "LH 454 on Friday"})
        assert not stored.is_error and stored.structured_content is not None
        assert stored.structured_content == {"ok": True, "status": "added", "id": 1, "key": "flight",
                                             "scope": "conversation"}
        assert json.loads(stored.content[0].text) == stored.structured_content  # type: ignore[union-attr]
        async with connect(memory) as next_chat:  # a new chat, even a new server process
            recalled = await next_chat.call_tool("memory_recall", {"query": "flight"})
            by_key = await next_chat.call_tool("memory_recall", {"key": "flight"})
        for result in (recalled, by_key):
            assert result.structured_content is not None and result.structured_content["ok"] is True
            assert [m["value"] for m in result.structured_content["memories"]] == ["LH 454 on Friday"]

    run(test)


BAD_CALLS = [
    ("memory_store", {"key": "", "value": "x"}, "too_short"),
    ("memory_store", {"key": "flight"}, "missing_argument"),
    ("memory_store", {"key": 5, "value": "x"}, "invalid_type"),
    ("memory_store", {"key": "k", "value": "v", "owner_id": "bob"}, "unknown_argument"),
    ("memory_recall", {"query": "a", "key": "b"}, "conflicting_arguments"),
    ("memory_recall", {"query": "a", "limit": 500}, "out_of_range"),
    ("memory_recall", {"query": "a", "scope": "everyone"}, "invalid_value"),
    ("memory_sources_list", {"x": 1}, "unknown_argument"),
]


@pytest.mark.parametrize(("name", "arguments", "code"), BAD_CALLS)
def test_a_bad_argument_is_a_tool_error_with_our_message(memory: MemorySystem, name: str,
                                                         arguments: dict[str, Any], code: str) -> None:
    expected = memory.session(agent_id="ada", owner_id="alice", conversation="mcp:stdio").dispatch_tool(
        name, arguments)
    assert expected["ok"] is False and expected["code"] == code

    async def test() -> None:
        async with connect(memory) as client:
            result = await client.call_tool(name, arguments)
        assert result.is_error
        assert result.structured_content == expected
        text = result.content[0].text  # type: ignore[union-attr]
        assert json.loads(text) == expected and "Error executing tool" not in text

    run(test)


def random_arguments(rng: random.Random) -> dict[str, Any]:
    names = ["key", "value", "query", "scope", "source", "limit", "owner_id", "agent_id", "trust", ""]
    values: list[Any] = [None, True, 0, -1, 10.0, 1e308, "", " ", "tea", "x" * 3000, "\u0000", "\ud800", [], {},
                         {"key": "k"}, "current", "all", "owner", "memories", "history", 50, 51]
    return {rng.choice(names): rng.choice(values) for _ in range(rng.randint(0, 4))}


def test_any_arguments_get_a_result_or_a_tool_error_never_a_protocol_error(memory: MemorySystem) -> None:
    rng = random.Random(19)
    calls = [(rng.choice([d["name"] for d in tool_definitions()]), random_arguments(rng)) for _ in range(150)]

    async def test() -> None:
        async with connect(memory) as client:
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                answer = result.structured_content
                assert answer is not None and json.loads(result.content[0].text) == answer  # type: ignore[union-attr]
                assert result.is_error is (answer["ok"] is not True), (name, arguments, answer)
                if result.is_error:
                    assert set(answer) == {"ok", "error", "code"} and answer["error"], (name, arguments, answer)

    run(test)
    assert memory.verify().ok


def test_a_memory_that_cannot_write_is_a_tool_error_too(tmp_path: Path) -> None:
    MemorySystem.open(tmp_path / "home").close()
    with MemorySystem.open(tmp_path / "home", readonly=True) as memory:
        async def test() -> None:
            async with connect(memory) as client:
                stored = await client.call_tool("memory_store", {"key": "flight", "value": "LH 454"})
                recalled = await client.call_tool("memory_recall", {"query": "flight"})
            assert stored.is_error and stored.structured_content is not None
            assert stored.structured_content["code"] == "server_error"
            assert "read-only" in stored.structured_content["error"]
            assert recalled.structured_content == {"ok": True, "memories": [], "messages": []}

        run(test)


def test_who_speaks_is_the_binding_and_owners_never_see_each_other(memory: MemorySystem) -> None:
    async def test() -> None:
        async with connect(memory, "alice") as alice, connect(memory, "bob") as bob:
            await alice.call_tool("memory_store", {"key": "pin", "value": "alice's door code 4711"})
            for scope in ("current", "all"):
                seen = await bob.call_tool("memory_recall", {"query": "door code", "scope": scope})
                assert seen.structured_content == {"ok": True, "memories": [], "messages": []}
            mine = await alice.call_tool("memory_recall", {"query": "door code"})
            assert mine.structured_content is not None and len(mine.structured_content["memories"]) == 1

    run(test)
    (row,) = memory.memories(agent_id="ada", owner_id="alice")
    assert row.scope_id.startswith("mcp:stdio")


# --- resources and the prompt ---------------------------------------------------------------------


def test_the_prompt_files_and_their_revisions_are_resources(memory: MemorySystem) -> None:
    for key, value in (("city", "lives in Paris"), ("work", "works in Lyon")):
        memory.write_memory({"op": "add", "category": "identity", "key": key, "value": value},
                            agent_id="ada", owner_id="alice", trust="operator")
    history = memory.resource_history("user_md", agent_id="ada", owner_id="alice")
    assert len(history) >= 2

    async def text(client: Client, uri: str) -> str:
        contents = (await client.read_resource(uri)).contents
        return contents[0].text  # type: ignore[union-attr]

    async def test() -> None:
        async with connect(memory) as client:
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            assert uris == {"fermix://prompt-files/user_md", "fermix://prompt-files/memory_md"}
            current = await text(client, "fermix://prompt-files/user_md")
            assert "Lyon" in current and current == history[0].content
            listed = json.loads(await text(client, "fermix://prompt-files/user_md/revisions"))
            assert [r["revision"] for r in listed] == [r.revision for r in history]
            oldest = await text(client, listed[-1]["uri"])
            assert oldest == history[-1].content
            for bad in ("fermix://prompt-files/user_md/revisions/999", "fermix://prompt-files/user_md/revisions/x",
                        "fermix://prompt-files/secrets/revisions/1"):
                with pytest.raises(MCPError):
                    await client.read_resource(bad)
        async with connect(memory, "bob") as bob:  # another owner: their own (empty) file
            assert await text(bob, "fermix://prompt-files/user_md") == ""

    run(test)


def test_the_memory_block_prompt_is_what_compose_prompt_puts_in_the_system_message(memory: MemorySystem) -> None:
    memory.write_memory({"op": "add", "category": "preference", "key": "tea", "value": "likes green tea"},
                        agent_id="ada", owner_id="alice", trust="operator")
    system = memory.session(agent_id="ada", owner_id="alice", conversation="mcp:stdio").compose_prompt()[0]
    assert system["role"] == "system" and "green tea" in system["content"]

    async def test() -> None:
        async with connect(memory) as client:
            (prompt,) = (await client.list_prompts()).prompts
            got = await client.get_prompt(prompt.name)
        assert [m.content.text for m in got.messages] == [system["content"]]  # type: ignore[union-attr]

    run(test)


# --- the command ----------------------------------------------------------------------------------


def test_http_refuses_to_start_without_tokens_and_identity_flags_are_for_stdio(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for bind, where in (("8123", "on this machine"), ("0.0.0.0:8123", "non-loopback")):
        result = run_cli("mcp", "--http", bind, "--insecure-bind", home=home)
        assert result.returncode == 1 and where in result.stderr and "mcp_tokens" in result.stderr
    result = run_cli("mcp", "--http", "8123", "--owner", "bob", home=home)
    assert result.returncode == 1 and "each token says who speaks" in result.stderr
    result = run_cli("mcp", "--http", "8123:x", home=home)
    assert result.returncode == 1 and "port" in result.stderr
    result = run_cli("mcp", home=home)  # stdio captured by the test: no file to speak MCP on
    assert result.returncode == 1 and "standard input and output" in result.stderr
    (home / "config.toml").write_text('[[fermix_core.mcp_tokens]]\nname = "ci"\ntoken_env = "NO_SUCH_MCP_TOKEN_VAR"\n'
                                      'agent_id = "ada"\nowner_id = "alice"\n', encoding="utf-8")
    result = run_cli("mcp", "--http", "8123", home=home)
    assert result.returncode == 1 and "NO_SUCH_MCP_TOKEN_VAR is not set" in result.stderr


def with_a_token(home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[[fermix_core.mcp_tokens]]\nname = "ci"\nsha256 = "{token_sha256("s")}"\n'
                                      'agent_id = "ada"\nowner_id = "alice"\n', encoding="utf-8")
    return home


def test_http_on_a_busy_port_is_one_line_and_exit_1(tmp_path: Path) -> None:
    home = with_a_token(tmp_path / "home")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "fermix_memory", "--home", str(home), "mcp", "--http",
                                 str(port)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                timeout=HANG_GUARD_S)  # a hang guard only
    assert result.returncode == 1, result.stderr
    assert result.stderr == f"fermix: error: cannot listen on 127.0.0.1:{port}: the port is already in use by" \
                            " another program; choose another with --http\n"


@pytest.mark.parametrize("bind", ["0.0.0.0:8123", "[::]:8123", "192.0.2.7:8123", "example.org:8123"])
def test_http_on_a_non_loopback_address_needs_insecure_bind_and_says_why(tmp_path: Path, bind: str) -> None:
    assert "--insecure-bind" in run_cli("mcp", "--help").stdout  # first: a server that did start would not return
    home = with_a_token(tmp_path / "home")
    result = run_cli("mcp", "--http", bind, home=home)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "non-loopback address" in result.stderr and "no TLS" in result.stderr
    assert "--insecure-bind" in result.stderr


def test_http_on_an_address_this_machine_lacks_is_one_line(tmp_path: Path) -> None:
    home = with_a_token(tmp_path / "home")
    result = run_cli("mcp", "--http", "192.0.2.7:8123", "--insecure-bind", home=home)  # TEST-NET-1: never ours
    assert result.returncode == 1 and result.stderr.startswith("fermix: error: cannot listen on 192.0.2.7:8123: ")
    assert result.stderr.count("\n") == 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_the_http_server_wants_a_configured_bearer_token_and_speaks_as_its_owner(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f"""
[[fermix_core.mcp_tokens]]
name = "alice-laptop"
sha256 = "{token_sha256('alice-secret')}"
agent_id = "ada"
owner_id = "alice"

[[fermix_core.mcp_tokens]]
name = "bob-phone"
token_env = "BOB_MCP_TOKEN"
agent_id = "ada"
owner_id = "bob"
""", encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    server = subprocess.Popen([sys.executable, "-m", "fermix_memory", "--home", str(home), "mcp", "--http",
                               str(port)],  # a port alone binds 127.0.0.1
                              env={**os.environ, "BOB_MCP_TOKEN": "bob-secret"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        headers = {"Accept": "application/json, text/event-stream"}
        with httpx.Client(trust_env=False, timeout=5) as http:
            deadline = time.monotonic() + HANG_GUARD_S
            while True:
                try:
                    anonymous = http.post(url, json=hello, headers=headers)
                    break
                except httpx.TransportError:
                    assert server.poll() is None and time.monotonic() < deadline, server.communicate()
                    time.sleep(0.1)
            wrong = http.post(url, json=hello, headers={**headers, "Authorization": "Bearer alice-secreT"})
        assert anonymous.status_code == 401 and wrong.status_code == 401

        def client(token: str) -> Client:
            http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            return Client(streamable_http_client(url, http_client=http_client), cache=None)

        async def test() -> None:
            async with client("alice-secret") as alice, client("bob-secret") as bob:
                stored = await alice.call_tool("memory_store", {"key": "pin", "value": "alice's door code 4711"})
                assert stored.structured_content is not None and stored.structured_content["ok"] is True
                theirs = await bob.call_tool("memory_recall", {"query": "door code", "scope": "all"})
                mine = await alice.call_tool("memory_recall", {"query": "door code"})
            assert theirs.structured_content == {"ok": True, "memories": [], "messages": []}
            assert mine.structured_content is not None and len(mine.structured_content["memories"]) == 1

        run(test)
    finally:
        server.terminate()
        server.wait(timeout=HANG_GUARD_S)
    with MemorySystem.open(home) as memory:
        (row,) = memory.memories(agent_id="ada", owner_id="alice")
        assert row.scope_id.startswith("mcp:alice-laptop")


# --- the README -----------------------------------------------------------------------------------


def readme_mcp_block(language: str) -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### MCP"):]
    block = re.search(rf"```{language}\n(.*?)\n```", section[:section.index("\n### ", 1)], re.S)
    assert block is not None
    return block.group(1)


def readme_mcp_config() -> dict[str, Any]:
    config: dict[str, Any] = json.loads(readme_mcp_block("json"))
    return config


def test_the_readme_token_entry_is_valid_config() -> None:
    (token,) = settings_from_mapping(tomllib.loads(readme_mcp_block("toml")), "README.md").mcp_tokens
    assert (token.name, token.agent_id, token.owner_id, token.trust) == ("laptop", "assistant", "me", "guest")


def test_the_readme_desktop_config_starts_a_working_server(tmp_path: Path) -> None:
    (entry,) = readme_mcp_config()["mcpServers"].values()
    command = Path(sys.executable).parent / entry["command"]  # the console script of this install
    assert command.exists() and entry["args"][0] == "mcp"
    params = StdioServerParameters(command=str(command), args=entry["args"],
                                   env={**entry.get("env", {}), "FERMIX_HOME": str(tmp_path / "home")})

    async def test() -> None:
        async with Client(params, cache=None) as client:
            assert {t.name for t in (await client.list_tools()).tools} == {d["name"] for d in tool_definitions()}
            await client.call_tool("memory_store", {"key": "editor", "value": "uses helix"})
            recalled = await client.call_tool("memory_recall", {"query": "helix"})
        assert recalled.structured_content is not None and len(recalled.structured_content["memories"]) == 1

    run(test)
    with MemorySystem.open(tmp_path / "home") as memory:
        (row,) = memory.memories()
        assert (row.agent_id, row.owner_id, row.value) == (entry["args"][2], entry["args"][4], "uses helix")


def test_fermix_mcp_without_the_extra_names_it(tmp_path: Path) -> None:
    script = ("import sys; sys.modules['mcp'] = None\n"  # as if the [mcp] extra were not installed
              "from fermix_memory.entrypoints import cli\n"
              "sys.exit(cli.main(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, "-c", script, "--home", str(tmp_path / "home"), "mcp"],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("fermix: error: ") and "pip install 'fermix-memory[mcp]'" in line
