"""Mutation testing of one module of the layer folders (``domain/values.py`` …).

Usage (from the repository root, with the dev environment)::

    .venv/bin/python tools/mutation/mutate.py domain/values.py          # tests from modules.toml
    .venv/bin/python tools/mutation/mutate.py domain/fence.py --list    # the mutants, not run
    .venv/bin/python tools/mutation/mutate.py domain/fence.py --only 12 --show
    .venv/bin/python tools/mutation/mutate.py domain/values.py --tests tests/unit/test_domain_values.py

For every mutation site of the module (see ``MUTATIONS`` below) one mutant is made from the
module's syntax tree; the mutated module is written to a temporary folder and the chosen unit
tests are run by ``pytest`` in a child process forked from the runner (which has imported pytest
and Hypothesis once, but nothing of the project), in which an import hook placed before the
editable install's finder loads ``fermix_memory.<layer>.<module>`` from that file. The
source tree is never changed. A mutant is *killed* when the tests fail (or time out), else it
*survives*. Mutants listed as equivalent in ``modules.toml`` (with the reason) are not run and
do not count. The score is killed / (all - equivalent). The process runs at ``nice 10``.

Not mutated: docstrings, annotations, decorators (attrs options such as ``kw_only``), f-strings
and the arguments of ``raise`` (error wording), ``__all__``. Hypothesis runs derandomised, with
``--examples`` examples per property (default 20), without its example database and without
deadlines, so a run is reproducible and leaves nothing behind.
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib.util
import os
import signal
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).with_name("modules.toml")
LAYERS = ("domain", "application", "adapters", "entrypoints")

_COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv,
}
_SYMBOLS = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Div: "/", ast.Mod: "%",
    ast.And: "and", ast.Or: "or",
}
MUTATIONS = (
    "comparison flips (< <=, > >=, == !=, is / is not, in / not in)",
    "and / or swaps",
    "numeric constants +1 and -1, True / False",
    "arithmetic swaps (+ -, * //, / *, % //)",
    "negated conditions of if / while / conditional expressions, `not` removed",
    "removed statements (raise, expression statements, continue, break, augmented and re-assignments)",
)


@dataclass(frozen=True)
class Mutant:
    number: int
    line: int
    col: int
    description: str
    source_line: str
    occurrence: int = 1  # the n-th mutant of the module with the same line text and change

    @property
    def key(self) -> str:
        """Stable name used in modules.toml: the mutated line's text and the change (and which
        occurrence, when the same line text appears more than once in the module)."""
        key = f"{self.source_line.strip()} | {self.description}"
        return key if self.occurrence == 1 else f"{key} [{self.occurrence}]"


class _Sites(ast.NodeTransformer):
    """Walks a module; numbers every mutation site; applies the one numbered ``target``."""

    def __init__(self, target: int | None = None, wording: frozenset[str] = frozenset()) -> None:
        self.target = target
        self.wording = wording  # functions that only word error messages: not mutated
        self.sites: list[tuple[int, int, str]] = []
        self.applied = False

    # -- bookkeeping --------------------------------------------------------------------
    def _site(self, node: ast.AST, description: str) -> bool:
        number = len(self.sites)
        self.sites.append((getattr(node, "lineno", 0), getattr(node, "col_offset", 0), description))
        if number == self.target:
            self.applied = True
            return True
        return False

    # -- places never mutated -----------------------------------------------------------
    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if node.value is not None:
            node.value = self.visit(node.value)
        return node

    def _removed(self, node: ast.stmt, what: str, *, inside: bool = True) -> ast.AST:
        """The site "``what`` removed": ``pass`` in place of ``node`` when it is the target;
        else ``node``, its inside visited when ``inside``."""
        if self._site(node, f"{what} removed"):
            return ast.Pass(lineno=node.lineno, col_offset=node.col_offset)
        if inside:
            self.generic_visit(node)
        return node

    def visit_Raise(self, node: ast.Raise) -> ast.AST:
        return self._removed(node, "raise", inside=False)

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return node
        if self._is_reassignment(node):
            return self._removed(node, "assignment")
        self.generic_visit(node)
        return node

    # -- functions: remember names already bound, skip docstrings -----------------------
    _bound: list[set[str]]

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        if node.name in self.wording:
            return node
        names = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
        for extra in (node.args.vararg, node.args.kwarg):
            if extra is not None:
                names.add(extra.arg)
        self._bound = [*getattr(self, "_bound", []), names]
        node.body = self._body(node.body)
        node.args.defaults = [self.visit(d) for d in node.args.defaults]
        node.args.kw_defaults = [d if d is None else self.visit(d) for d in node.args.kw_defaults]
        self._bound.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.body = self._body(node.body)  # decorators (attrs options) are not mutated
        return node

    def visit_Module(self, node: ast.Module) -> ast.AST:
        node.body = self._body(node.body)
        return node

    def _body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for n, stmt in enumerate(body):
            if n == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                out.append(stmt)  # docstring
                continue
            result = self.visit(stmt)
            out.append(result if isinstance(result, ast.stmt) else stmt)
        return out

    def _is_reassignment(self, node: ast.Assign) -> bool:
        scopes = getattr(self, "_bound", [])
        if not scopes or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            if scopes:
                for target in node.targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            scopes[-1].add(name.id)
            return False
        name = node.targets[0].id
        if name in scopes[-1]:
            return True
        scopes[-1].add(name)
        return False

    # -- mutations ----------------------------------------------------------------------
    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        return self._removed(node, "statement")

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        return self._removed(node, "augmented assignment")

    def visit_Continue(self, node: ast.Continue) -> ast.AST:
        return self._removed(node, "continue", inside=False)

    def visit_Break(self, node: ast.Break) -> ast.AST:
        return self._removed(node, "break", inside=False)

    def _negate(self, node: ast.If | ast.While | ast.IfExp) -> None:
        if self._site(node.test, "condition negated"):
            node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)

    def visit_If(self, node: ast.If) -> ast.AST:
        self._negate(node)
        self.generic_visit(node)
        return node

    def visit_While(self, node: ast.While) -> ast.AST:
        self._negate(node)
        self.generic_visit(node)
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self._negate(node)
        self.generic_visit(node)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        if isinstance(node.op, ast.Not) and self._site(node, "`not` removed"):
            return self.visit(node.operand)
        self.generic_visit(node)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        for i, op in enumerate(node.ops):
            swap = _COMPARE_SWAPS.get(type(op))
            if swap is not None and self._site(node, f"`{_SYMBOLS[type(op)]}` -> `{_SYMBOLS[swap]}` (#{i + 1})"):
                node.ops[i] = swap()
        self.generic_visit(node)
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        swap = ast.Or if isinstance(node.op, ast.And) else ast.And
        if self._site(node, f"`{_SYMBOLS[type(node.op)]}` -> `{_SYMBOLS[swap]}`"):
            node.op = swap()
        self.generic_visit(node)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        swap = _BINOP_SWAPS.get(type(node.op))
        if swap is not None and not _is_text(node) and self._site(
            node, f"`{_SYMBOLS[type(node.op)]}` -> `{_SYMBOLS[swap]}`"
        ):
            node.op = swap()
        self.generic_visit(node)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = node.value
        if isinstance(value, bool):
            if self._site(node, f"{value} -> {not value}"):
                return ast.Constant(value=not value)
        elif isinstance(value, int | float):
            for delta in (1, -1):
                if self._site(node, f"{value!r} -> {value + delta!r}"):
                    return ast.Constant(value=value + delta)
        return node


def _is_text(node: ast.BinOp) -> bool:
    """``"a" + "b"`` and ``"%s" % x``: string building, not arithmetic."""
    return any(isinstance(side, ast.Constant) and isinstance(side.value, str) for side in (node.left, node.right))


def mutants(source: str, wording: frozenset[str] = frozenset()) -> list[Mutant]:
    walker = _Sites(wording=wording)
    walker.visit(ast.parse(source))
    lines = source.splitlines()
    seen: dict[tuple[str, str], int] = {}
    out: list[Mutant] = []
    for n, (line, col, description) in enumerate(walker.sites):
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        occurrence = seen[(text.strip(), description)] = seen.get((text.strip(), description), 0) + 1
        out.append(Mutant(n, line, col, description, text, occurrence))
    return out


def mutated_source(source: str, number: int, wording: frozenset[str] = frozenset()) -> str:
    walker = _Sites(target=number, wording=wording)
    tree = walker.visit(copy.deepcopy(ast.parse(source)))
    if not walker.applied:
        raise SystemExit(f"no mutant number {number}")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


class _Mutated:
    """Import hook placed first in ``sys.meta_path``: serves one module name from one file."""

    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.path = path

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        return importlib.util.spec_from_file_location(self.name, self.path) if fullname == self.name else None


def _pytest_args(tests: list[str]) -> list[str]:
    return ["-x", "-q", "-p", "no:cacheprovider", "--no-header", "--tb=no", "-o", "addopts=", *tests]


def _child(module_name: str, module_file: Path, tests: list[str], examples: int) -> int:
    """In a forked child: load the mutated module in place of the real one and run the tests."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.meta_path.insert(0, _Mutated(module_name, module_file))
    from hypothesis import settings

    settings.register_profile(
        "mutation", database=None, deadline=None, derandomize=True, print_blob=False, max_examples=examples
    )
    settings.load_profile("mutation")
    return int(pytest.main(_pytest_args(tests)))


def run_tests(module_name: str, module_file: Path, tests: list[str], timeout: float, examples: int) -> str:
    """Run the tests in a child forked from this process, which has already imported pytest and
    Hypothesis but nothing of fermix_memory (so every project module is imported fresh)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            code = _child(module_name, module_file, tests, examples)
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            # Any failure counts: failed tests (1), an import or collection error (2), a crash.
            return "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.02)


def module_name_of(path: Path) -> str:
    relative = path.resolve().relative_to(ROOT)
    if relative.parts[0] not in LAYERS:
        raise SystemExit(f"{path} is not in one of the layer folders {LAYERS}")
    return ".".join(("fermix_memory", *relative.with_suffix("").parts))


def load_config(module: str) -> dict[str, object]:
    config = tomllib.loads(CONFIG.read_text(encoding="utf-8"))
    entry = config.get("modules", {}).get(module, {})
    return dict(entry)


def floor() -> float:
    """The score every module must reach (``floor`` in modules.toml, percent)."""
    return float(tomllib.loads(CONFIG.read_text(encoding="utf-8"))["floor"])


def _run(args: argparse.Namespace) -> int:
    path = (ROOT / args.module).resolve() if not Path(args.module).is_absolute() else Path(args.module)
    relative = str(path.relative_to(ROOT))
    module_name = module_name_of(path)
    config = load_config(relative)
    tests: list[str] = list(args.tests or config.get("tests", []))  # type: ignore[call-overload]
    equivalent = {e["mutant"]: e["reason"] for e in config.get("equivalent", [])}  # type: ignore[attr-defined]
    source = path.read_text(encoding="utf-8")
    wording = frozenset(config.get("wording", []))  # type: ignore[call-overload]
    everything = mutants(source, wording)
    chosen = [m for m in everything if args.only is None or m.number in args.only]

    if args.list or args.show:
        for m in chosen:
            mark = "  (equivalent)" if m.key in equivalent else ""
            print(f"#{m.number} {relative}:{m.line}:{m.col} {m.description}{mark}\n    key: {m.key}")
            if args.show:
                print(_diff(source, mutated_source(source, m.number, wording)))
        return 0

    if not tests:
        raise SystemExit(f"no tests for {relative}: add them to {CONFIG.relative_to(ROOT)} or pass --tests")
    unknown = sorted(set(equivalent) - {m.key for m in everything})
    for key in unknown:
        print(f"warning: equivalent mutant no longer exists: {key}", file=sys.stderr)

    os.nice(10)
    for heavy in ("hypothesis", "hypothesis.strategies", "attrs", "cattrs"):  # imported once, shared by forks
        importlib.import_module(heavy)
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        target = Path(tmp) / path.name
        target.write_text(source, encoding="utf-8")
        started = time.monotonic()
        baseline = run_tests(module_name, target, tests, args.timeout or 600, args.examples)
        elapsed = time.monotonic() - started
        if baseline != "survived":
            raise SystemExit(f"the tests do not pass on the unmutated module ({baseline}): {' '.join(tests)}")
        timeout = args.timeout or max(30.0, 5 * elapsed)
        print(f"{relative}: {len(chosen)} mutants, tests {' '.join(tests)} ({elapsed:.1f}s unmutated)", flush=True)
        killed = survived = skipped = 0
        survivors: list[Mutant] = []
        for m in chosen:
            if m.key in equivalent:
                skipped += 1
                continue
            target.write_text(mutated_source(source, m.number, wording), encoding="utf-8")
            outcome = run_tests(module_name, target, tests, timeout, args.examples)
            if outcome == "survived":
                survived += 1
                survivors.append(m)
                print(f"SURVIVED #{m.number} {relative}:{m.line} {m.description}\n    {m.source_line.strip()}",
                      flush=True)
            else:
                killed += 1
                if args.verbose:
                    print(f"{outcome} #{m.number} {relative}:{m.line} {m.description}", flush=True)
    counted = killed + survived
    score = 100.0 * killed / counted if counted else 100.0
    print(f"{relative}: score {score:.1f}% ({killed} killed of {counted}; {skipped} equivalent not run)")
    if survivors:
        print("surviving mutants (key for modules.toml):")
        for m in survivors:
            print(f"  {m.key}")
    fail_under = floor() if args.fail_under is None else args.fail_under
    return 0 if score >= fail_under else 1


def _diff(before: str, after: str) -> str:
    import difflib

    old = ast.unparse(ast.parse(before)).splitlines()
    return "\n".join(difflib.unified_diff(old, after.splitlines(), lineterm="", n=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="a module of a layer folder, e.g. domain/values.py")
    parser.add_argument("--tests", nargs="+", help="test files or node ids (default: modules.toml)")
    parser.add_argument("--only", type=int, nargs="+", help="run only these mutant numbers")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--show", action="store_true", help="list the mutants with their diffs")
    parser.add_argument("--timeout", type=float, help="seconds per mutant (default 5x the unmutated run)")
    parser.add_argument("--examples", type=int, default=20,
                        help="Hypothesis examples per property test (default 20; tests that set their own keep it)")
    parser.add_argument("--fail-under", type=float,
                        help="exit 1 below this score (percent; default: the floor in modules.toml)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print killed mutants too")
    return _run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
