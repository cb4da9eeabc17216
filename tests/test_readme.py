"""The README is a test: every python block runs, and its commands are the ones CI runs."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
# "```python notest" blocks are shown, not run (they need a server the reader configures).
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_python_block_runs(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "README.md", "exec"), {"__name__": "__readme__"})  # noqa: S102


def test_ci_runs_the_readme_test_command():
    bash = re.findall(r"```bash\n(.*?)```", README, flags=re.DOTALL)
    test_command = next(b.strip() for b in bash if "scripts/test" in b)
    assert test_command in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_every_python_block_runs_again_in_the_same_directory(tmp_path, monkeypatch):
    # A reader runs the blocks one after the other where they stand, and runs them again: no
    # block may depend on a file another block (or its own earlier run) left behind.
    monkeypatch.chdir(tmp_path)
    for run in (1, 2):
        for i, block in enumerate(BLOCKS):
            try:
                exec(compile(block, f"README.md block{i}", "exec"), {"__name__": "__readme__"})  # noqa: S102
            except Exception as e:
                pytest.fail(f"run {run}, block{i}: {type(e).__name__}: {e}")
