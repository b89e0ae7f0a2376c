"""The TypeScript client (clients/typescript): its types are generated from the checked-in OpenAPI
document, it compiles under ``strict``, and its example host loop runs a whole turn under Node
against a real ``fermix serve`` (ADR-0073)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.server.test_serve_process import TOKEN, serving
from tests.waits import HANG_GUARD_S

CLIENT = Path(__file__).parents[2] / "clients" / "typescript"
pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="Node runs the TypeScript client")


def _bin(name: str) -> str:
    found = CLIENT / "node_modules" / ".bin" / name
    assert found.exists(), "clients/typescript needs `npm ci` (the README's test command runs it)"
    return str(found)


def test_the_generated_types_are_those_of_the_checked_in_document(tmp_path: Path) -> None:
    out = tmp_path / "schema.d.ts"
    subprocess.run([_bin("openapi-typescript"), "../../docs/openapi.json", "--output", str(out)], cwd=CLIENT,
                   check=True, capture_output=True, timeout=HANG_GUARD_S)
    # After a change to the API: cd clients/typescript && npm run generate
    assert out.read_text(encoding="utf-8") == (CLIENT / "src" / "schema.d.ts").read_text(encoding="utf-8")


def test_the_typescript_host_loop_runs_a_whole_turn(tmp_path: Path) -> None:
    built = tmp_path / "dist"
    compiled = subprocess.run([_bin("tsc"), "-p", ".", "--outDir", str(built)], cwd=CLIENT, capture_output=True,
                              text=True, timeout=HANG_GUARD_S)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    (built / "package.json").write_text('{"type": "module"}', encoding="utf-8")
    with serving(tmp_path / "home") as (_, url):
        done = subprocess.run(["node", str(built / "examples" / "host_loop.js")], capture_output=True, text=True,
                              env={**os.environ, "FERMIX_URL": url, "FERMIX_TOKEN": TOKEN["FERMIX_TEST_OPERATOR"]},
                              timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["first_id"] >= 1 and summary["stored"] is True
    assert summary["system"].startswith("You are Ada.") and summary["reply"] == "You said: I live in Paris"
    assert "Lives in Paris" in summary["recalled"]
    assert summary["refused"] == "invalid_identifier"
