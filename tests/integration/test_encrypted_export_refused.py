"""An encrypted export that was changed, or opened with keys that are not the ones that sealed it,
is refused with an :class:`EventFileError` naming what is wrong, and nothing is imported; the
``fermix`` commands export, import and verify it."""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.home_keys import HomeKey, keys_folder
from fermix_memory.adapters.keyring import Keyring
from fermix_memory.application.errors import EventFileError
from tests.cli_runner import run_cli
from tests.integration.test_forget import ALICE_SECRETS, BOB_WORDS, write_everything


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("source")
    with MemorySystem.open(home) as memory:
        write_everything(memory)
    return home


@pytest.fixture(scope="module")
def exported(source: Path) -> list[str]:
    with MemorySystem.open(source, readonly=True) as memory:
        return list(memory.export_events(encrypted=True))


def _sealed_at(lines: list[str], nth: int = 0) -> int:
    return [i for i, line in enumerate(lines) if '"sealed":{"data"' in line][nth]


def _edit_data(lines: list[str]) -> None:
    i = _sealed_at(lines)
    item = json.loads(lines[i])
    data = bytearray(base64.b64decode(item["sealed"]["data"]))
    data[0] ^= 1
    item["sealed"]["data"] = base64.b64encode(bytes(data)).decode()
    lines[i] = json.dumps(item) + "\n"


def _swap_sealed(lines: list[str]) -> None:
    i, j = _sealed_at(lines, 0), _sealed_at(lines, 1)
    a, b = json.loads(lines[i]), json.loads(lines[j])
    a["sealed"], b["sealed"] = b["sealed"], a["sealed"]
    lines[i], lines[j] = json.dumps(a) + "\n", json.dumps(b) + "\n"


def _plain_header(lines: list[str]) -> None:
    item = json.loads(lines[0])
    del item["sealed"]
    lines[0] = json.dumps(item) + "\n"


EDITS: dict[str, tuple[Callable[[list[str]], None], str]] = {
    "sealed data edited": (_edit_data, "does not open"),
    "sealed payloads swapped": (_swap_sealed, "does not open"),
    "last event cut off": (lambda lines: lines.pop(), "header names the head"),
    "last line cut short": (lambda lines: lines.__setitem__(-1, lines[-1][:40]), "not JSON"),
    "header without its keyring": (_plain_header, "header names no keyring"),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_a_changed_export_is_refused_and_nothing_is_imported(source: Path, exported: list[str], tmp_path: Path,
                                                             case: str) -> None:
    lines = list(exported)
    edit, words = EDITS[case]
    edit(lines)
    with MemorySystem.open(tmp_path / "copy") as copy:
        with pytest.raises(EventFileError, match=words):
            copy.import_events(lambda: lines, keys=keys_folder(source))
        assert copy.head().position == 0


def test_another_homes_keyring_is_refused(source: Path, exported: list[str], tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "other") as other:
        list(other.export_events(encrypted=True))  # makes its own keyring
        with pytest.raises(EventFileError, match="sealed with keyring"):
            other.import_events(lambda: exported)  # its own keys by default
        assert other.head().position == 0


def test_the_keyring_with_another_home_key_is_refused(source: Path, exported: list[str], tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "other") as other:
        list(other.export_events(encrypted=True))  # makes its own home key
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    shutil.copy(keys_folder(tmp_path / "other") / "home.key", keys / "home.key")
    shutil.copy(keys_folder(source) / "keyring.json", keys / "keyring.json")
    with MemorySystem.open(tmp_path / "copy") as copy:
        with pytest.raises(EventFileError, match="does not unwrap"):
            copy.import_events(lambda: exported, keys=keys)
        assert copy.head().position == 0


def test_an_export_without_keys_is_refused(exported: list[str], tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "copy") as copy:
        with pytest.raises(EventFileError, match=r"holds no home\.key"):
            copy.import_events(lambda: exported, keys=tmp_path / "nowhere")
        assert copy.head().position == 0


def test_the_commands_export_import_and_verify_an_encrypted_log(source: Path, tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    result = run_cli("events", "export", "--encrypted", str(path), home=source)
    assert result.returncode == 0, result.stderr
    assert "keep it beside the export" in result.stdout
    data = path.read_bytes()
    assert [w for w in ALICE_SECRETS + BOB_WORDS if w.encode() in data] == []
    # Without the keys, the home is not even made.
    refused = run_cli("events", "import", str(path), home=tmp_path / "nokeys")
    assert refused.returncode != 0 and "encrypted export" in refused.stderr
    assert not (tmp_path / "nokeys" / "memory.db").exists()
    # A copy of the keys folder as it is after alice's keys died.
    keys = tmp_path / "keys"
    shutil.copytree(keys_folder(source), keys)
    Keyring(keys, HomeKey(keys, create=False).wrapping_key()).destroy([("ada", "alice"), ("max", "alice")])
    result = run_cli("events", "import", str(path), "--keys", str(keys), home=tmp_path / "copy")
    assert result.returncode == 0, result.stderr
    assert "were destroyed" in result.stdout and "redacted" in result.stdout
    verified = run_cli("events", "verify", home=tmp_path / "copy")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    shown = run_cli("events", "export", "-", home=tmp_path / "copy").stdout
    assert [w for w in ALICE_SECRETS if w in shown] == [] and all(w in shown for w in BOB_WORDS)
