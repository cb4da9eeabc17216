"""Every `$ command` transcript in the README runs as shown: each ```text block that holds one is
replayed in a fresh directory (scripts/story.py writes the conversation it starts from) and its
output compared with the README's, after times, hashes, keys and signatures are masked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
TRANSCRIPTS = [
    block
    for block in re.findall(r"```text\n(.*?)```", README, flags=re.DOTALL)
    if "\n$ " in block or block.startswith("$ ")
]
BIN = Path(sys.executable).parent

_MASKS = [
    (re.compile(r"\x1b\[[0-9;]*m"), ""),  # styles a terminal shows
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?Z?"), "<TIME>"),
    (re.compile(r"\+[0-9a-f]{8}\+"), "+<KEYID>+"),  # a verifier key's id
    (re.compile(r"[0-9a-f]{32,}"), "<HEX>"),
    (re.compile(r"[A-Za-z0-9+/]{40,}={0,2}"), "<B64>"),
]


def _masked(text: str) -> str:
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return "\n".join(line.rstrip() for line in text.strip("\n").split("\n"))


def _steps(block: str) -> list[tuple[str, str]]:
    """(command, the output the README shows for it)."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.rstrip("\n").split("\n"):
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return [(command, "\n".join(shown)) for command, shown in steps]


def test_the_readme_has_transcripts():
    assert len(TRANSCRIPTS) >= 3


@pytest.mark.parametrize(
    "block", TRANSCRIPTS, ids=[f"transcript{i}" for i in range(len(TRANSCRIPTS))]
)
def test_transcript_runs_as_shown(block, tmp_path):
    (tmp_path / "scripts").symlink_to(ROOT / "scripts")
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}/usr/bin{os.pathsep}/bin",
        # The README shows a terminal: tables in boxes (rich's TTY_COMPATIBLE), no colours.
        "TTY_COMPATIBLE": "1",
        "NO_COLOR": "1",
        "COLUMNS": "1000",
    }
    for command, shown in _steps(block):
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=120,
            check=False,
        )
        assert _masked(done.stdout) == _masked(shown), f"$ {command}"
