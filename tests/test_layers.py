"""The floors of the code: each package imports only from the floors below it.

eventlog (the log) imports nothing from projections; the two front ends - the CLI and the
inspector - read through projections.readmodel and projections.grammar, and the inspector
imports nothing from the CLI (the CLI may start the inspector's server, lazily).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _imports(package: str) -> list[tuple[str, str]]:
    """Every (file, imported module) of the package's modules, lazy imports included."""
    found = []
    for path in sorted((ROOT / package.replace(".", "/")).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.append((str(path.relative_to(ROOT)), node.module))
            elif isinstance(node, ast.Import):
                found.extend((str(path.relative_to(ROOT)), alias.name) for alias in node.names)
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [("eventlog", "projections"), ("projections.inspector", "projections.cli")],
)
def test_a_package_never_imports_from_the_floors_above_it(package, forbidden):
    wrong = [
        (where, module)
        for where, module in _imports(package)
        if module == forbidden or module.startswith(forbidden + ".")
    ]
    assert wrong == []
    assert _imports(package)  # the walk saw the package's imports at all


def test_no_module_holds_more_than_600_lines():
    # A module that grows past this holds two owners: split it (the README says none does).
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for package in ("eventlog", "projections")
        for path in (ROOT / package).rglob("*.py")
    }
    assert len(sizes) > 100
    assert {name: n for name, n in sizes.items() if n > 600} == {}
