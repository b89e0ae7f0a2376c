"""An event file read once, for an import that reads it twice (check, then append).

An import checks the whole file before it appends anything, and appends it in batches: were the
file read anew for the append, a file changed in between (a writer still at work, a copy being
replaced) would put in events that were never checked, and a batch that no longer links would
stop the import after the first ones were committed. :class:`HeldLines` gives the source's lines
on the first pass and keeps each in an unnamed temporary file; every later pass reads that copy,
so what is appended is exactly what was checked.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO

from fermix_memory.application.errors import EventFileError

# A kept line that holds a newline (or starts with this mark) is kept as JSON text after the mark.
_ESCAPED = "\x00"


class HeldLines:
    """``lines`` (a function opening the file anew) as a function whose every call gives the
    lines the first call read. Use as a context manager: the copy is deleted on exit."""

    def __init__(self, lines: Callable[[], Iterable[str]], folder: Path) -> None:
        self._lines = lines
        self._folder = folder
        self._copy: IO[str] | None = None
        self._complete = False

    def __call__(self) -> Iterator[str]:
        if self._copy is None:
            self._copy = self._open_copy()
            return self._first()
        if not self._complete:
            raise EventFileError("the event file was read again before it had been read to its end")
        return self._again(self._copy)

    def _open_copy(self) -> IO[str]:
        # Beside the memory (room for it is there), else wherever temporary files go.
        options = {"mode": "w+", "encoding": "utf-8", "errors": "surrogatepass", "newline": "\n"}
        try:
            return tempfile.TemporaryFile(dir=self._folder, **options)  # type: ignore[call-overload, no-any-return]
        except OSError:
            return tempfile.TemporaryFile(**options)  # type: ignore[call-overload, no-any-return]

    def _first(self) -> Iterator[str]:
        copy = self._copy
        assert copy is not None
        opened = self._lines()
        try:
            source = iter(opened)
        except TypeError:
            raise EventFileError(f"the event file must give its lines, got {type(opened).__name__}") from None
        for line in source:
            if not isinstance(line, str):
                yield line  # the check refuses it; the copy is never read again
                return
            if "\n" in line or line.startswith(_ESCAPED):
                copy.write(_ESCAPED + json.dumps(line) + "\n")
            else:
                copy.write(line + "\n")
            yield line
        copy.flush()
        self._complete = True

    @staticmethod
    def _again(copy: IO[str]) -> Iterator[str]:
        copy.seek(0)
        for kept in copy:
            kept = kept[:-1]
            yield str(json.loads(kept[1:])) if kept.startswith(_ESCAPED) else kept

    def close(self) -> None:
        if self._copy is not None:
            self._copy.close()

    def __enter__(self) -> HeldLines:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
