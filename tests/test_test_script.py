"""``scripts/test`` leaves no files behind, and no test kills a child that coverage measures."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PYPROJECT = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.coverage.run]
branch = true
source = ["pkg"]
parallel = true

[tool.coverage.report]
fail_under = 0
"""

_TEST = """
import subprocess
import sys


def test_a_measured_child_then_a_failure():
    subprocess.run([sys.executable, "-c", "import pkg; pkg.one()"], check=True)
    # What a child killed while it wrote its data leaves: not a database.
    with open(".coverage.killed.1.1", "wb") as f:
        f.write(b"SQLite format 3\\x00" + bytes(200))
    assert False
"""


def test_a_failing_run_combines_and_removes_every_per_process_file(tmp_path):
    # Check on a small project that uses scripts/test as this one does.
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "test", tmp_path / "scripts" / "test")
    (tmp_path / "pyproject.toml").write_text(_PYPROJECT, encoding="utf-8")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("def one():\n    return 1\n", encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_child.py").write_text(textwrap.dedent(_TEST), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE")}
    result = subprocess.run(
        ["bash", "scripts/test", "-q"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert sorted(p.name for p in tmp_path.glob(".coverage*")) == [".coverage"]
    # The killed child's file is named once, and coverage has no such file to warn about.
    assert "1 subprocess data file(s) empty or partial" in result.stdout
    output = result.stdout + result.stderr
    assert "isn't a coverage data file" not in output and "malformed" not in output


def test_every_test_that_kills_a_child_starts_it_unmeasured():
    killers = [
        path
        for path in (ROOT / "tests").rglob("test_*.py")
        if re.search(r"SIGKILL|\.kill\(\)", path.read_text(encoding="utf-8"))
        and path.name != Path(__file__).name
    ]
    assert killers
    assert [p.name for p in killers if "env=unmeasured_env()" not in p.read_text()] == []
