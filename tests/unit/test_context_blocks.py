"""The owner's files in their fence are escaped once per pair of revisions shown, not once per
prompt: a kept block is the one ``memory_context_block`` gives for the same texts, it is used
only for the very revisions it was made of, and it goes when either of them goes (the prompt
files' cache letting a revision go, an erased owner's among them, takes its block along)."""

from __future__ import annotations

import gc
from datetime import UTC, datetime

from fermix_memory.application.context_blocks import ContextBlocks
from fermix_memory.application.query_ports import ResourceRevision
from fermix_memory.domain.fence import memory_context_block

T0 = datetime(2026, 1, 2, tzinfo=UTC)


def revision(name: str, content: str, number: int = 1) -> ResourceRevision:
    return ResourceRevision(agent_id="ada", owner_id="alice", name=name, revision=number, content=content,
                            content_sha256="", reason="", created_at=T0)


def test_a_kept_block_is_the_block_of_the_same_texts() -> None:
    blocks = ContextBlocks()
    user, memory = revision("user_md", "- name: Ada & co <b>\n"), revision("memory_md", "- R&amp;D &lt;x&gt;\n")
    expected = memory_context_block(user.content, memory.content)
    assert blocks(user, memory) == expected
    assert blocks(user, memory) == expected  # kept
    assert blocks(None, memory) == memory_context_block("", memory.content)
    assert blocks(user, None) == memory_context_block(user.content, "")
    assert blocks(None, None) == ""


def test_a_block_serves_only_the_revisions_it_was_made_of() -> None:
    blocks = ContextBlocks()
    user = revision("user_md", "- a\n")
    first = revision("memory_md", "- one\n")
    assert "one" in blocks(user, first)
    second = revision("memory_md", "- two\n", number=2)
    assert "two" in blocks(user, second) and "one" not in blocks(user, second)
    equal = revision("memory_md", "- one\n")  # an equal revision, another object: made again, the same text
    assert blocks(user, equal) == blocks(user, first)


def test_a_block_goes_with_its_revisions() -> None:
    blocks = ContextBlocks()
    user, memory = revision("user_md", "- secret & more\n"), revision("memory_md", "- x\n")
    blocks(user, memory)
    blocks(None, memory)
    assert len(blocks) == 2
    del user
    gc.collect()
    assert len(blocks) == 1  # the one made of the user's file went with it
    del memory
    gc.collect()
    assert len(blocks) == 0
