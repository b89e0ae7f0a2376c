"""The README's Python examples run as written, each against a fresh home."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waits import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def embedding_examples() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("\n## Embedding\n"): text.index("\n### What it guarantees\n")]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def python_examples() -> list[str]:
    """Every ```python block of the README, in order (the embedding examples come first)."""
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_embedding_section_starts_with_the_session_api() -> None:
    examples = embedding_examples()
    assert len(examples) >= 3
    assert "memory.session(" in examples[0]
    first = examples[0]
    assert first.index("s.handle_command(text)") < first.index('s.append("user", text)'), \
        "commands are handled before the message is appended"


@pytest.mark.parametrize("index", range(len(python_examples())))
def test_a_readme_example_runs_as_written(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("FERMIX_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    code = python_examples()[index]
    exec(compile(code, f"README.md example {index + 1}", "exec"), {"__name__": "readme_example"})
    assert (tmp_path / ".fermix" / "memory.db").is_file()
    if index == 0:
        printed = capsys.readouterr().out.splitlines()
        assert printed[0] == "Noted." and printed[-1].startswith("Started a fresh conversation window")


# What a host's type checker must refuse: each line names a value no enum has.
MISTYPED = """\
from fermix_memory import MemorySystem

with MemorySystem.open("~/.fermix") as memory:
    s = memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42", trust="admin")
    s.append("usr", "hello")
    s.recall("x", scope="everywhere")
    s.recall("x", source="files")
    memory.write_memory([], agent_id="ada", owner_id="alice", writer="me", trust="operator")
    memory.append_message(agent_id="ada", owner_id="alice", conversation="t:1", role="user", content="x", trust="x")
    system: str = s.compose_prompt(style="openai")[0]
    s.compose_prompt(style="gemini")
"""
MISTYPED_LINES = [4, 5, 6, 7, 8, 9, 10, 11]


def test_the_readme_examples_pass_mypy_strict_and_a_mistyped_host_does_not(tmp_path: Path) -> None:
    """A host checked with ``mypy --strict`` can write what the README shows: the overloads of
    ``compose_prompt`` (``style="anthropic"`` gives a tuple), the literal argument types, the
    exported result types; and a misspelt trust, role, scope, source, writer or style, or an
    OpenAI prompt unpacked as Anthropic's, is caught. One mypy run over every example, through
    the package tree of ``.ci/typecheck`` (mypy cannot follow the editable install's mapping).

    Its cache is kept in the checkout's ``.mypy_cache`` (ignored by git), not thrown away with
    the tree: the examples follow the package into thousands of third-party modules (the OpenAI
    and LangChain SDKs), whose analysis is most of the run and the same every time. mypy
    re-checks whatever changed (sizes, times and hashes of the files), so a change to the
    package or the README is still checked, and fails, as on a cold cache."""
    files = []
    for index, code in enumerate(python_examples()):
        files.append(tmp_path / f"readme_example_{index + 1}.py")
        files[-1].write_text(code, encoding="utf-8")
    mistyped = tmp_path / "mistyped_host.py"
    mistyped.write_text(MISTYPED, encoding="utf-8")
    mypy = Path(sys.executable).parent / "mypy"
    done = subprocess.run(["bash", str(ROOT / ".ci" / "typecheck"), *map(str, [*files, mistyped])],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, check=False,  # a hang guard only
                          env={**os.environ, "MYPY": str(mypy), "MYPY_CACHE_DIR": str(ROOT / ".mypy_cache")})
    # By file name: a file mypy finds unchanged in its cache is reported from there, under the
    # path it had when it was checked (an earlier run's temporary folder).
    errors = [line for line in done.stdout.splitlines() if ": error: " in line]
    assert [e for e in errors if Path(e.split(":")[0]).name != mistyped.name] == [], done.stdout + done.stderr
    flagged = sorted({int(e.split(":")[1]) for e in errors})
    assert flagged == MISTYPED_LINES, done.stdout
