"""In two processes (``-n 2 --dist loadfile``), the longest modules are handed out first."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("xdist")

from tests.slow_files import LONGEST, LongestFilesFirst, pytest_xdist_make_scheduler


class Node:
    """A worker as the scheduler sees it: what it was sent, in order."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[list[int]] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def config(dist: str = "loadfile") -> Any:
    values = {"tx": ["2*popen"], "dist": dist}
    return SimpleNamespace(getvalue=values.__getitem__, option=SimpleNamespace(loadscopereorder=True))


def test_the_longest_modules_are_handed_out_first_and_the_rest_in_xdists_order() -> None:
    longest = sorted(LONGEST, key=LONGEST.__getitem__, reverse=True)
    many = [f"tests/unit/test_many.py::test_{i}" for i in range(50)]  # xdist alone: most tests first
    few = [f"tests/unit/test_few.py::test_{i}" for i in range(3)]
    collection = [*many, *few, f"{longest[2]}::test_a", f"{longest[0]}::test_a", f"{longest[0]}::test_b"]
    scheduler = LongestFilesFirst(config())
    nodes = [Node("gw0"), Node("gw1")]
    for node in nodes:
        scheduler.add_node(node)  # type: ignore[arg-type]
        scheduler.add_node_collection(node, collection)  # type: ignore[arg-type]
    scheduler.schedule()

    first = [collection[node.sent[0][0]].split("::")[0] for node in nodes]
    assert first == [longest[0], longest[2]]
    handed_out = [collection[batch[0]].split("::")[0] for node in nodes for batch in node.sent]
    assert sorted(handed_out) == sorted({c.split("::")[0] for c in collection})  # each module once


def test_only_loadfile_gets_this_order() -> None:
    assert isinstance(pytest_xdist_make_scheduler(config(), None), LongestFilesFirst)
    assert pytest_xdist_make_scheduler(config("load"), None) is None
