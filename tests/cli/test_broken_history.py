"""A broken chain shows the intact part of a history and marks the break (exit status 1), rather
than hiding every event behind the error."""

from __future__ import annotations

import contextlib
import sqlite3

import pytest

from tests.cli.conftest import json_lines


@pytest.fixture
def broken(ledger):
    # The story's seq 5 is "2+2 is 4."; the edit leaves its stored hash stale.
    with contextlib.closing(sqlite3.connect(ledger, isolation_level=None)) as conn:
        conn.execute("UPDATE events SET payload = replace(payload, '4.', '5.') WHERE seq = 5")
    return ledger


def test_history_shows_the_events_before_the_break_then_marks_it(cli, broken):
    result = cli("history", "conv", "--db", broken)
    assert result.returncode == 1
    rows = result.stdout.splitlines()[2:]
    assert [row.split()[0] for row in rows] == ["1", "2", "3", "4", "5"]
    assert rows[-1].split()[1] == "BROKEN"
    assert "the events above verify" in rows[-1]
    assert "breaks at seq 5" in result.stderr
    assert "chatledger verify" in result.stderr


def test_history_json_streams_the_intact_lines_then_fails_on_stderr(cli, broken):
    result = cli("history", "conv", "--db", broken, "--json")
    assert result.returncode == 1
    assert [line["seq"] for line in json_lines(result.stdout)] == [1, 2, 3, 4]
    assert "breaks at seq 5" in result.stderr


def test_a_range_before_the_break_is_whole_and_ok(ok, broken):
    out = ok("history", "conv", "--db", broken, "--to", 4).stdout
    assert "BROKEN" not in out
    assert out.splitlines()[-1].split()[0] == "4"


def test_replay_shows_the_steps_before_the_break_then_marks_it(cli, broken):
    result = cli("replay", "conv", "--db", broken, "--no-pager")
    assert result.returncode == 1
    headings = [line for line in result.stdout.splitlines() if line.startswith("── ")]
    assert [h.split()[2] for h in headings] == ["1", "2", "3", "4", "5"]
    assert "BROKEN · chain broken here" in headings[-1]
    assert "breaks at seq 5" in result.stderr
    streamed = cli("replay", "conv", "--db", broken, "--json")
    assert streamed.returncode == 1
    assert [line["seq"] for line in json_lines(streamed.stdout)] == [1, 2, 3, 4]
    what_if = cli("replay", "conv", "--db", broken, "--policy", "messages:2", "--no-pager")
    assert (what_if.returncode, what_if.stdout.count("── seq ")) == (1, 5)
