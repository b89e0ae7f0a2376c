"""Tests use public seams only: no test reaches into ``memory.app`` (the wired application) or
reads an underscore attribute of another object. Fault injection goes through the composition
root (``bootstrap(store=..., files=..., background=...)``), public methods, or a use case the test
builds itself from public classes. The scan reads the raw text, so code in subprocess scripts
held in strings is checked too."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

APP_REACH = re.compile(r"\.app\b")
PRIVATE_READ = re.compile(r"\b(\w+)\.(_(?!_)\w*)")
OWN = {"self", "cls"}  # a helper's own state
ALLOWED = {
    ("os", "_exit"),  # a hard crash, on purpose
}


def reaches(source: str) -> list[str]:
    """Every line of ``source`` that reaches into the app or reads another object's private attribute."""
    found = []
    for number, line in enumerate(source.splitlines(), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith(("'", '"')) else line
        if code.lstrip().startswith(("from ", "import ")):
            continue  # a module path, not an attribute read
        private = [(owner, name) for owner, name in PRIVATE_READ.findall(code)
                   if owner not in OWN and (owner, name) not in ALLOWED]
        if APP_REACH.search(code) or private:
            found.append(f"{number}: {line.strip()}")
    return found


def test_the_scan_finds_each_kind_of_reach() -> None:
    assert reaches("memory.app.reviewer.review()") != []
    assert reaches("x = memory.app") != []
    assert reaches("writer = store._writer") != []
    assert reaches("tx._next_version(stream)") != []
    assert reaches('SCRIPT = """\nmemory.app.store._writer.exec_trace = f\n"""') != []
    assert reaches("self._lock = threading.Lock()\nos._exit(9)\nfrom a._b import c\nmemory.append(x)") == []
    assert reaches("obj.__class__") == []


def test_no_test_reaches_into_the_app_or_private_attributes() -> None:
    offenders = {}
    for path in sorted(TESTS.rglob("*.py")):
        if path == Path(__file__).resolve():
            continue
        lines = reaches(path.read_text(encoding="utf-8"))
        if lines:
            offenders[str(path.relative_to(TESTS))] = lines
    assert offenders == {}
