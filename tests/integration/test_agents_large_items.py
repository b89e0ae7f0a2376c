"""An Agents SDK item is kept whole, images and files as data URLs included (ADR-0103): up to
:data:`MAX_ITEM_METADATA_BYTES`, as the SDK's own ``SQLiteSession`` keeps it; so is a text no
message content can hold as it is (a NUL in it, or longer than a content), which the content
shows as it can; after a restart, and after a history export imported into another home; on every
store. A host's own metadata keeps its bound; text that is not Unicode is a typed error."""

from __future__ import annotations

import asyncio
import base64
import random
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession

from fermix_memory import MemorySystem
from fermix_memory.application.message_input import (
    MAX_CONTENT_CHARS,
    MAX_ITEM_METADATA_BYTES,
    MAX_METADATA_BYTES,
    InvalidMessage,
)
from fermix_memory.openai_agents import FermixAgentsSession

pytestmark = pytest.mark.usefixtures("every_store")

AGENT, OWNER, CHAT = "ada", "alice", "openai-agents:vision"


def data_url(kind: str, size: int) -> str:
    noise = random.Random(size).randbytes(size)
    return f"data:{kind};base64,{base64.b64encode(noise).decode()}"


def items() -> list[dict[str, Any]]:
    long_output = "".join(f"line {n}\n" for n in range(MAX_CONTENT_CHARS // 8))
    return [
        {"role": "user", "content": [{"type": "input_text", "text": "What is in this picture?"},
                                     {"type": "input_image", "image_url": data_url("image/png", 300_000),
                                      "detail": "auto"}]},
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "A cat on a sofa.", "annotations": []}]},
        {"role": "user", "content": [{"type": "input_file", "filename": "notes.pdf",
                                      "file_data": data_url("application/pdf", 1_000_000)}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read_file",
         "arguments": '{"path": "dump.bin"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "header\x00\x00payload"},
        {"role": "user", "content": "a\x00b"},
        {"type": "function_call_output", "call_id": "call_1", "output": long_output},
    ]


def session(memory: MemorySystem) -> FermixAgentsSession:
    return FermixAgentsSession.open(memory, "vision", agent_id=AGENT, owner_id=OWNER, review=False)


def test_items_with_images_and_files_are_kept_whole_as_in_the_sdks_session(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    theirs = SQLiteSession("vision", db_path=tmp_path / "sdk.db")
    asyncio.run(theirs.add_items(items()))  # type: ignore[arg-type]
    with MemorySystem.open(tmp_path / "home", config={}) as memory:
        ours = session(memory)
        asyncio.run(ours.add_items(items()))  # type: ignore[arg-type]
        assert asyncio.run(ours.get_items()) == asyncio.run(theirs.get_items()) == items()
        contents = [m.content for m in memory.history(AGENT, CHAT)]
        assert contents[:6] == ["What is in this picture?", "A cat on a sofa.", "", "", "header\ufffd\ufffdpayload",
                                "a\ufffdb"]
        assert contents[6] == items()[-1]["output"][:MAX_CONTENT_CHARS]  # what a content holds of it
        exported = list(memory.export_history())
    theirs.close()
    with MemorySystem.open(tmp_path / "home", config={}) as memory:  # after a restart
        assert asyncio.run(session(memory).get_items()) == items()
        assert memory.verify().ok
    with monkeypatch.context() as m:
        m.delenv("FERMIX_DATABASE_URL", raising=False)  # imported into a SQLite home of its own
        with MemorySystem.open(tmp_path / "moved", config={}) as memory:
            assert len(memory.import_history(exported)) == len(items())
            assert asyncio.run(session(memory).get_items()) == items()
            assert memory.import_history(exported) == []


def test_an_item_past_the_bound_is_a_typed_error_and_nothing_is_recorded(tmp_path: Path) -> None:
    huge = {"role": "user", "content": [{"type": "input_image", "detail": "auto",
                                         "image_url": "data:image/png;base64," + "A" * MAX_ITEM_METADATA_BYTES}]}
    with MemorySystem.open(tmp_path / "home", config={}) as memory:
        ours = session(memory)
        with pytest.raises(InvalidMessage, match=f"larger than {MAX_ITEM_METADATA_BYTES} bytes"):
            asyncio.run(ours.add_items([{"role": "user", "content": "first"}, huge]))  # type: ignore[list-item]
        assert asyncio.run(ours.get_items()) == []


def test_text_that_is_not_unicode_is_a_typed_error_and_nothing_is_recorded(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home", config={}) as memory:
        ours = session(memory)
        for bad in ({"role": "user", "content": "a\ud800b"},
                    {"type": "function_call_output", "call_id": "c", "output": "\udfff"}):
            with pytest.raises(InvalidMessage, match="surrogate"):
                asyncio.run(ours.add_items([{"role": "user", "content": "first"}, bad]))  # type: ignore[list-item]
        assert asyncio.run(ours.get_items()) == []


def test_a_hosts_own_metadata_keeps_its_bound(tmp_path: Path) -> None:
    big = {"blob": "x" * (MAX_METADATA_BYTES + 1)}
    with MemorySystem.open(tmp_path / "home", config={}) as memory:
        s = memory.session(agent_id=AGENT, owner_id=OWNER, conversation="telegram:1")
        for append in (lambda: s.append("user", "hi", metadata=big),
                       lambda: s.append_many([{"role": "user", "content": "hi", "metadata": big}]),
                       lambda: memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation="telegram:1",
                                                     role="user", content="hi", metadata=big)):
            with pytest.raises(InvalidMessage, match=f"larger than {MAX_METADATA_BYTES} bytes"):
                append()
        assert memory.history(AGENT, "telegram:1") == []
