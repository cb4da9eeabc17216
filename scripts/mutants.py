"""Mutation testing: does the test suite notice when the code is wrong?

Outside the test run. Each *mutant* is the module with one small change a slip of the pen
would make - a comparison turned (``<`` to ``<=``, ``==`` to ``!=``, ``is`` to ``is not``,
``in`` to ``not in``), ``and`` for ``or``, a ``not`` dropped, ``+`` for ``-``, an integer off
by one, ``True`` for ``False`` - in function bodies only (not annotations or docstrings). For
each mutant, in a copy of the project, the chosen tests run until the first failure: a failure
(or a run 10x slower than the clean one) *kills* the mutant; a pass means the tests would not
have noticed that change, and the mutant *survives* - printed with its line, to be read:
either a missing test or an equivalent mutant (a change that does not change behaviour).

    python scripts/mutants.py projections/window.py --tests tests/projections/test_window.py
    python scripts/mutants.py eventlog/hashing.py --tests tests/eventlog/test_hashing.py \\
        --json mutants-hashing.json

Every module is mutated in place in the copy (the project itself is never touched); the
score is killed / all. For a PostgreSQL module, set ``CI=true`` (a mutant that breaks the
import would otherwise skip every PostgreSQL test and count as survived), and run one
PostgreSQL mutation run at a time on a server (``read_all`` hides records above the oldest
open transaction of the database, another run's included).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_FLIP_COMPARE: dict[type[ast.cmpop], type[ast.cmpop]] = {
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


@dataclass
class Mutant:
    """One change, where it is, and what the tests made of it."""

    index: int
    line: int
    change: str
    outcome: str = ""  # killed | survived | timeout | broken (does not import)


def _annotations(tree: ast.AST) -> set[int]:
    """ids of the nodes inside annotations: types are not behaviour."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        roots: list[ast.AST | None] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            roots.append(node.returns)
        elif isinstance(node, (ast.arg, ast.AnnAssign)):
            roots.append(node.annotation)
        for root in roots:
            if root is not None:
                inside.update(id(n) for n in ast.walk(root))
    return inside


def _in_functions(tree: ast.AST) -> set[int]:
    """ids of the nodes in function bodies (module constants, __all__ and class
    attributes are configuration, not logic), docstrings left out."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]
            for statement in body:
                inside.update(id(n) for n in ast.walk(statement))
    return inside


def _sites(tree: ast.AST) -> Iterator[tuple[ast.AST, int, str]]:
    """Every (node, variant, description) a mutant can be made of, in source order."""
    skip = _annotations(tree)
    keep = _in_functions(tree)
    for node in ast.walk(tree):
        if id(node) in skip or id(node) not in keep:
            continue
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in _FLIP_COMPARE:
                    new = _FLIP_COMPARE[type(op)].__name__
                    yield node, i, f"line {line}: {type(op).__name__} -> {new}"
        elif isinstance(node, ast.BoolOp):
            other = "Or" if isinstance(node.op, ast.And) else "And"
            yield node, 0, f"line {line}: {type(node.op).__name__} -> {other}"
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, 0, f"line {line}: not dropped"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            other = "Sub" if isinstance(node.op, ast.Add) else "Add"
            yield node, 0, f"line {line}: {type(node.op).__name__} -> {other}"
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            yield node, 0, f"line {line}: {node.value} -> {not node.value}"
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            yield node, 0, f"line {line}: {node.value} -> {node.value + 1}"


class _Apply(ast.NodeTransformer):
    """Make the one change at ``target`` (the node's position in ``ast.walk`` order)."""

    def __init__(self, target: ast.AST, variant: int) -> None:
        self.target, self.variant = target, variant

    def visit(self, node: ast.AST) -> ast.AST:
        if node is not self.target:
            visited: ast.AST = super().visit(node)
            return visited
        if isinstance(node, ast.Compare):
            ops = list(node.ops)
            ops[self.variant] = _FLIP_COMPARE[type(ops[self.variant])]()
            return ast.Compare(node.left, ops, node.comparators)
        if isinstance(node, ast.BoolOp):
            return ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values)
        if isinstance(node, ast.UnaryOp):
            return node.operand
        if isinstance(node, ast.BinOp):
            op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
            return ast.BinOp(node.left, op, node.right)
        if isinstance(node, ast.Constant) and type(node.value) is bool:
            return ast.Constant(not node.value)
        assert isinstance(node, ast.Constant) and type(node.value) is int  # the sites above
        return ast.Constant(node.value + 1)


def mutated(source: str, index: int) -> tuple[str, str] | None:
    """The module's source with mutant ``index`` applied, and its description."""
    tree = ast.parse(source)
    for i, (node, variant, change) in enumerate(_sites(tree)):
        if i == index:
            new = ast.fix_missing_locations(_Apply(node, variant).visit(tree))
            return ast.unparse(new), change
    return None


def _run(copy: Path, tests: list[str], timeout: float) -> tuple[str, float, str]:
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o",
           "addopts=", *tests]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start, ""
    took = time.monotonic() - start
    tail = (proc.stdout + proc.stderr)[-2000:]
    if proc.returncode == 0:
        return "survived", took, tail
    if proc.returncode in (2, 3, 4):  # interrupted, internal or usage error: did not run
        return "broken", took, tail
    return "killed", took, tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="the module to mutate, relative to the project")
    parser.add_argument("--tests", nargs="+", required=True, help="pytest paths to run")
    parser.add_argument("--max", type=int, help="mutate at most this many sites (the first)")
    parser.add_argument("--json", type=Path, help="also write every mutant's outcome here")
    args = parser.parse_args(argv)
    source = (ROOT / args.module).read_text(encoding="utf-8")
    total = sum(1 for _ in _sites(ast.parse(source)))
    count = min(total, args.max) if args.max else total
    with tempfile.TemporaryDirectory(prefix="chatledger-mutants-") as tmp:
        copy = Path(tmp) / "project"
        shutil.copytree(
            ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.db")
        )
        clean, took, tail = _run(copy, args.tests, timeout=3600)
        if clean != "survived":
            print(f"the tests do not pass on the unchanged code ({clean}): fix that first\n{tail}")
            return 2
        print(f"{args.module}: {count} mutants (of {total} sites); clean run {took:.1f} s")
        target = copy / args.module
        mutants = []
        for index in range(count):
            made = mutated(source, index)
            assert made is not None  # index < total
            text, change = made
            target.write_text(text, encoding="utf-8")
            outcome, _, _ = _run(copy, args.tests, timeout=max(10 * took, 30))
            mutants.append(Mutant(index, int(change.split()[1].rstrip(":")), change, outcome))
            if outcome == "survived":
                print(f"  survived: {change}")
        target.write_text(source, encoding="utf-8")
    killed = sum(m.outcome in ("killed", "timeout") for m in mutants)
    broken = sum(m.outcome == "broken" for m in mutants)
    scored = len(mutants) - broken
    score = killed / scored if scored else 1.0
    print(f"{args.module}: killed {killed} of {scored} ({score:.0%}); {broken} did not run")
    if args.json:
        doc = {"module": args.module, "tests": args.tests, "score": score,
               "mutants": [asdict(m) for m in mutants]}  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
