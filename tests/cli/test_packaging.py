"""A regular (non-editable) install ships the CLI package, or the console script is broken."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_directory_is_in_the_distribution():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("eventlog", "projections")
        for init in (ROOT / top).rglob("__init__.py")
    }
    # Check every package directory matches a pattern of the find configuration.
    assert all(any(fnmatch.fnmatch(name, pattern) for pattern in include) for name in found)
    assert "projections.cli" in found
