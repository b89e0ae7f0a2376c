"""What the ``fermix`` command prints: exit codes, the usage error, human lines or one JSON
document on stdout, failures on stderr, and a progress bar while long work runs."""

from __future__ import annotations

import json
import logging
import sys
import time
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
    from fermix_memory.adapters.sql.codec import CONVERTER

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


PLAIN_EVERY_S = 5.0  # a pipe or a log file gets a progress line this often, not a redrawn bar


def _duration(seconds: float) -> str:
    """``42s``, ``3:07``, ``1:02:03``."""
    whole = int(seconds + 0.5)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}" if minutes else f"{secs}s"


class Progress:
    """Progress of long work on stderr, with its rate and the time left: on a terminal a bar
    redrawn in place; elsewhere (a pipe, a log file) a plain line every ``every`` seconds, and
    nothing at all for work that ends sooner. ``clock`` gives seconds (monotonic)."""

    def __init__(self, label: str, stream: TextIO, *, clock: Callable[[], float] = time.monotonic,
                 every: float = PLAIN_EVERY_S) -> None:
        self.label = label
        self.stream = stream
        self.terminal = stream.isatty()
        self.enabled = True  # it shows something wherever it writes (kept: callers may read it)
        self._clock = clock
        self._every = every
        self._start: tuple[float, int] | None = None  # (when, done) at the first call: the rate's base
        self._last_line: float | None = None  # when a plain line was last written
        self._shown: tuple[int, int] | None = None
        self._open = False  # a bar without its final newline is on screen

    def __call__(self, done: int, total: int) -> None:
        if total <= 0 or self._shown == (done, total):
            return  # the same figures twice (a last batch that is also the end) print once
        now = self._clock()
        if self._start is None:
            self._start = (now, done)
        if self.terminal:
            self._bar(done, total, now)
        elif self._plain_due(done, total, now):
            self._shown = (done, total)
            self._last_line = now
            self.stream.write(f"{self.label}: {done:,}/{total:,} ({100 * min(done, total) // total}%)"
                              f"{self._speed(done, total, now, ', ')}\n")
            self.stream.flush()

    def _plain_due(self, done: int, total: int, now: float) -> bool:
        """Whether a plain line is due: ``every`` seconds after the last (or the start), and at
        the end only after such lines (short work stays silent)."""
        if done >= total:
            return self._last_line is not None
        assert self._start is not None
        return now - (self._start[0] if self._last_line is None else self._last_line) >= self._every

    def _speed(self, done: int, total: int, now: float, sep: str) -> str:
        """``1,234/s ETA 0:42`` once a rate can be measured (a finished bar: the rate alone)."""
        assert self._start is not None
        began, base = self._start
        if now <= began or done <= base:
            return ""
        rate = (done - base) / (now - began)
        left = "" if done >= total else f"{sep}ETA {_duration((total - done) / rate)}"
        return f"{sep}{rate:,.0f}/s{left}"

    def _bar(self, done: int, total: int, now: float) -> None:
        self._shown = (done, total)
        width = 30
        filled = int(width * min(done, total) / total)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
                          f"{self._speed(done, total, now, '  ')}\x1b[K")
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
def progress_bars(*labels: str, stream: TextIO | None = None,
                  clock: Callable[[], float] = time.monotonic) -> Iterator[tuple[Progress, ...]]:
    """One :class:`Progress` per label (on ``stream``, by default stderr), each closed however the
    work inside ends."""
    bars = tuple(Progress(label, stream or sys.stderr, clock=clock) for label in labels)
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
