"""The README's shell blocks that are not install lines run too: each runs after the python
block before it (in a fresh directory), and each command's output matches its comment, where
``...`` stands for anything."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent

# (python block before it, shell block) for every ```bash block that is not an install line.
PAIRS = [
    (python, shell)
    for python, shell in re.findall(
        r"```python\n((?:(?!```).)*?)```\s*\n```bash\n(.*?)```", README, flags=re.DOTALL
    )
    if "pip install" not in shell
]


def _expected(comment: str) -> re.Pattern[str]:
    """The comment as a pattern over the output with its whitespace collapsed."""
    parts = (re.escape(" ".join(part.split())) for part in comment.split("..."))
    return re.compile(".*".join(parts))


def test_the_readme_has_shell_blocks_to_run():
    assert PAIRS


@pytest.mark.parametrize(("python", "shell"), PAIRS, ids=[f"shell{i}" for i in range(len(PAIRS))])
def test_shell_block_output_matches_its_comments(python, shell, tmp_path):
    subprocess.run(
        [sys.executable, "-c", python], cwd=tmp_path, check=True, timeout=300, capture_output=True
    )
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    for line in shell.strip().splitlines():
        command, _, comment = line.partition("#")
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{command}: {done.stderr}"
        if comment.strip():
            pattern = _expected(comment)
            assert pattern.search(" ".join(done.stdout.split())), (command, comment, done.stdout)
