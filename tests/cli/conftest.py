"""Fixtures for the CLI tests: a ledger with the audit story, and two ways to run the command.

``cli`` calls ``main([...])`` in this process and captures stdout and stderr: fast, measured by
coverage, and what most tests use. ``run`` starts the installed console script as a real
process: for the few smoke tests of the command as a user runs it (tests/cli/test_process.py).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from freezegun import freeze_time

from eventlog import SQLiteEventStore
from projections import MessageWindowChatMemory
from projections.cli import main
from tests.projections.test_audit import story

EXE = Path(sys.executable).with_name("chatledger")
STARTED = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)


@dataclasses.dataclass(frozen=True)
class Result:
    """What one command run gave: exit status, stdout and stderr."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def ledger(tmp_path):
    """tmp_path/ledger.db with the audit story under "conv", one event a minute from STARTED."""
    path = tmp_path / "ledger.db"
    with (
        freeze_time(STARTED, auto_tick_seconds=60),
        SQLiteEventStore(path) as store,
    ):
        story(store)
    return path


@pytest.fixture
def store(ledger):
    with SQLiteEventStore(ledger) as store:
        yield store


def memory(store, memory_id="conv"):
    """A memory object on the story's id with the story's window."""
    return MessageWindowChatMemory(id=memory_id, max_messages=4, store=store)


@pytest.fixture
def cli(capsys, monkeypatch):
    """``cli(*args, stdin=None)`` runs ``main`` in-process and returns a :class:`Result`."""

    def call(*args, stdin=None):
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        status = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return Result(status, out, err)

    return call


@pytest.fixture
def ok(cli):
    """Like ``cli``, asserting exit status 0 and no traceback."""

    def call(*args, **kwargs):
        result = cli(*args, **kwargs)
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        return result

    return call


def run(*args, cwd=None, stdin=None, env=None):
    """Run the installed command as a real process, its output piped."""
    return subprocess.run(
        [str(EXE), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        check=False,
    )


def json_lines(text):
    return [json.loads(line) for line in text.splitlines()]


def shown_messages(text):
    """The messages of a ``show --json`` report."""
    from eventlog.formats.lc4j_json import message_from_obj

    return [message_from_obj(obj) for obj in json.loads(text)["messages"]]
