"""Progress of long CLI work: a bar with rate and time left on a terminal, a plain line every few
seconds in a pipe, nothing for short work in a pipe. The clock is injected: no test sleeps."""

from __future__ import annotations

import io

from fermix_memory.entrypoints.cli import Progress
from fermix_memory.entrypoints.cli.output import PLAIN_EVERY_S, progress_bars


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_terminal_gets_a_progress_line() -> None:
    stream = Terminal()
    progress = Progress("replay", stream)
    progress(5, 10)
    progress(10, 10)
    text = stream.getvalue()
    assert "replay [" in text and "5/10" in text and "10/10" in text and text.endswith("\n")
    assert text.count("\n") == 1


def test_a_terminal_bar_shows_the_rate_and_the_time_left() -> None:
    stream, clock = Terminal(), Clock()
    progress = Progress("importing", stream, clock=clock)
    progress(0, 1000)
    clock.now += 2
    progress(200, 1000)  # 100 a second, 800 to go: 8 s
    assert stream.getvalue().endswith("200/1000  100/s  ETA 8s\x1b[K")
    clock.now += 8
    progress(1000, 1000)
    assert stream.getvalue().endswith("1000/1000  100/s\x1b[K\n")  # finished: no time left to show


def test_a_pipe_gets_a_plain_line_every_few_seconds_with_rate_and_eta() -> None:
    stream, clock = io.StringIO(), Clock()
    progress = Progress("verify", stream, clock=clock)
    progress(0, 100_000)
    clock.now += PLAIN_EVERY_S / 2
    progress(1_000, 100_000)
    assert stream.getvalue() == ""  # not yet: a line every few seconds, not every call
    clock.now += PLAIN_EVERY_S / 2
    progress(2_000, 100_000)
    assert stream.getvalue() == f"verify: 2,000/100,000 (2%), {2_000 / PLAIN_EVERY_S:,.0f}/s, ETA 4:05\n"
    clock.now += 1
    progress(2_500, 100_000)
    assert stream.getvalue().count("\n") == 1
    clock.now += PLAIN_EVERY_S
    progress(100_000, 100_000)  # the end after lines: a last one, so the log shows it finished
    last = stream.getvalue().splitlines()[-1]
    assert last.startswith("verify: 100,000/100,000 (100%), ") and "ETA" not in last and "\r" not in last


def test_short_work_in_a_pipe_prints_nothing() -> None:
    stream, clock = io.StringIO(), Clock()
    progress = Progress("import", stream, clock=clock)
    progress(5, 10)
    clock.now += PLAIN_EVERY_S / 10
    progress(10, 10)
    progress.close()
    assert stream.getvalue() == ""


def test_the_helper_takes_a_stream_and_a_clock_and_closes_what_stopped_early() -> None:
    stream, clock = Terminal(), Clock()
    with progress_bars("checking", "importing", stream=stream, clock=clock) as (checking, importing):
        checking(3, 3)
        importing(1, 4)  # stops early: the helper ends the line
    assert stream.getvalue().count("\n") == 2 and "importing [" in stream.getvalue()
