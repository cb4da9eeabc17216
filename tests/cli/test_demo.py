"""scripts/demo.py: the README's main job, and the commands it suggests next, run as printed."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from projections.readmodel import reason_text
from tests.cli.conftest import EXE, run

DEMO = Path(__file__).resolve().parents[2] / "scripts" / "demo.py"


@pytest.fixture
def demo():
    spec = importlib.util.spec_from_file_location("demo", DEMO)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not EXE.exists(), reason=f"{EXE} missing: pip install -e . in the venv")
def test_the_suggested_commands_run_as_printed(tmp_path):
    # As in the README: the venv's python runs the demo, the venv is not on PATH.
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    shown = subprocess.run(
        [sys.executable, str(DEMO)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    lines = shown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Next, from the shell"))
    commands = [line.strip() for line in lines[start + 1 :] if line.startswith("  ")]
    assert len(commands) == 5
    assert commands[1] == f"""{EXE} history '~t:["demo",1]'"""
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, f"{command}: {done.stderr}"
        assert done.stdout


def test_the_command_is_relative_to_the_current_directory(demo, tmp_path, monkeypatch):
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "chatledger").touch()
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    assert demo.cli_command() == ".venv/bin/chatledger"
    assert demo.next_commands('~t:["demo",3]', Path("x y.db"))[1] == (
        """.venv/bin/chatledger history '~t:["demo",3]' --db 'x y.db'"""
    )
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert demo.cli_command() == str(bin_dir / "chatledger")
    monkeypatch.setenv("PATH", str(bin_dir))
    (bin_dir / "chatledger").chmod(0o755)
    assert demo.cli_command() == "chatledger"


def test_the_demo_says_why_a_message_left_in_the_words_of_diff_and_the_inspector(tmp_path):
    shown = subprocess.run(
        [sys.executable, str(DEMO)],
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    rows = {
        int(cells[0]): cells[-1]
        for line in shown.splitlines()
        if (cells := [c.strip() for c in line.strip("│ ").split("│")])[0].isdigit()
        and len(cells) == 4
    }
    diff = run("diff", "--tuple-id", "demo/1", "0", "16", "--db", tmp_path / "chatledger.db").stdout
    # The replaced system prompt is not "evicted": demo, diff and inspector share reason_text.
    assert rows[1] == reason_text("system_replaced") == "system message replaced"
    assert rows[2] == reason_text("evicted")
    assert rows[6] == reason_text("orphan")
    assert rows[16] == "yes"
    for reason in ("system message replaced", "evicted (window full)", "orphan (its tool call"):
        assert reason in diff
