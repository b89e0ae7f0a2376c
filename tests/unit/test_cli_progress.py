"""Progress bars appear on long CLI work only when stderr is a terminal."""

from __future__ import annotations

import io

from fermix_memory.entrypoints.cli import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_progress_line() -> None:
    stream = Terminal()
    progress = Progress("replay", stream)
    progress(5, 10)
    progress(10, 10)
    text = stream.getvalue()
    assert "replay [" in text and "5/10" in text and text.endswith("10/10\n")


def test_a_pipe_or_file_gets_nothing() -> None:
    stream = io.StringIO()
    Progress("import", stream)(5, 10)
    assert stream.getvalue() == ""
