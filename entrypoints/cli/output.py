"""What the ``fermix`` command prints: exit codes, the usage error, human lines or one JSON
document on stdout, failures on stderr, and a progress bar while long work runs."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from fermix_memory.domain.errors import FermixError

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 70


class UsageError(FermixError):
    """Bad command-line input (argparse's complaints included)."""


def one_line(text: str) -> str:
    """``text`` with control characters and line breaks escaped: one terminal line, always."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


SHORT_CHARS = 120  # an error in a summary line: the rest (a provider's whole error body) is for --verbose


def short(text: str, limit: int = SHORT_CHARS) -> str:
    """``text`` on one line, whitespace folded, cut to ``limit`` characters with an ellipsis."""
    flat = one_line(" ".join(text.split()))
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def plural(count: int, noun: str) -> str:
    """``1 message``, ``2 messages``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def jsonable(value: Any) -> Any:
    """Domain values (attrs classes, enums, datetimes) as plain JSON data."""
    # Imported here: the codec builds cattrs' converter, which ``fermix --help`` never needs.
    from fermix_memory.adapters.sqlite.codec import CONVERTER

    return CONVERTER.unstructure(value)


class Output:
    """Writes either human lines or one JSON document on stdout."""

    def __init__(self, as_json: bool, out: TextIO) -> None:
        self.as_json = as_json
        self.out = out

    def emit(self, data: Any, human: Callable[[Any], Sequence[str]]) -> None:
        if self.as_json:
            json.dump(jsonable(data), self.out, ensure_ascii=False, indent=2, sort_keys=True)
            self.out.write("\n")
        else:
            for line in human(data):
                self.out.write(line + "\n")


class Progress:
    """A one-line progress display on stderr, only when stderr is a terminal."""

    def __init__(self, label: str, stream: TextIO) -> None:
        self.label = label
        self.stream = stream
        self.enabled = stream.isatty()
        self._shown: tuple[int, int] | None = None
        self._open = False  # a bar without its final newline is on screen

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0 or self._shown == (done, total):
            return  # the same figures twice (a last batch that is also the end) print once
        self._shown = (done, total)
        width = 30
        filled = int(width * min(done, total) / total)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        self._open = done < total
        if not self._open:
            self.stream.write("\n")
        self.stream.flush()

    def close(self) -> None:
        """End a bar the work left unfinished (it stopped early, or skipped the last call)."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


@contextmanager
def progress_bars(*labels: str) -> Iterator[tuple[Progress, ...]]:
    """One :class:`Progress` on stderr per label, each closed however the work inside ends."""
    bars = tuple(Progress(label, sys.stderr) for label in labels)
    try:
        yield bars
    finally:
        for bar in bars:
            bar.close()


def report_error(as_json: bool, exc: BaseException, lines: Sequence[str] | None = None) -> None:
    """Report a failure on stderr: ``fermix: error: ...`` lines, or one JSON object."""
    lines = list(lines) if lines is not None else [str(exc)]
    if as_json:
        json.dump({"error": lines[0] if len(lines) == 1 else "; ".join(lines), "type": type(exc).__name__,
                   "lines": lines}, sys.stderr, ensure_ascii=False)
        sys.stderr.write("\n")
    else:
        for line in lines:
            sys.stderr.write(f"fermix: error: {one_line(line)}\n")


@contextmanager
def log_lines(stream: TextIO) -> Iterator[None]:
    """While inside, the library's log records go to ``stream`` as ``fermix: <level>: ...`` lines."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(LogLine())
    logger = logging.getLogger("fermix_memory")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


# The library's loggers whose warnings repeat a failed model call in full (each retry, each
# provider, the review's summary of them all): a command that prints its own summary holds them back.
MODEL_CALL_LOGGERS = ("fermix_memory.providers", "fermix_memory.reviewer", "fermix_memory.compaction")


class _DropAll(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


@contextmanager
def held_back_warnings(*, shown: bool) -> Iterator[None]:
    """While inside, the model-call loggers' records are dropped, unless ``shown`` (``--verbose``)."""
    if shown:
        yield
        return
    loggers = [logging.getLogger(name) for name in MODEL_CALL_LOGGERS]
    drop = _DropAll()
    for logger in loggers:
        logger.addFilter(drop)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(drop)


class LogLine(logging.Formatter):
    """One line per log record, no traceback: ``fermix: warning: ...``."""

    def format(self, record: logging.LogRecord) -> str:
        return f"fermix: {record.levelname.lower()}: {one_line(record.getMessage())}"
