"""The README's Python examples run as written, each against a fresh home."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


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
