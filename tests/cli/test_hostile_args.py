"""Ids, numbers and durations an operator pasted from somewhere hostile: each is a one-line
usage error (exit status 2), never a traceback."""

from __future__ import annotations

import os

import pytest

DEEP = "[" * 100_000
LONG_INT = "9" * 5000


@pytest.mark.parametrize(
    "args",
    [
        ["history", "--id-json", DEEP],
        ["history", "--id-json", "[" * 900 + "1" + "]" * 900],
        ["history", "--id-json", '"\\ud800"'],
        ["history", "--id-json", '["a", "\\udfff"]'],
        ["history", "--tuple-id", f"{LONG_INT}/1"],
        ["history", f"{LONG_INT}/1"],
        ["history", "~t:" + DEEP],
        ["fork", "conv", "--to", "~t:" + DEEP],
        ["fork", "conv", "--to", f"{LONG_INT}/1"],
        ["compact", "--idle-for", "100000000000w"],
        ["compact", "--purge-idle-for", "99999999999999999999d"],
    ],
    ids=[
        "deep-id-json",
        "deep-id-json-that-parses",
        "surrogate-id-json",
        "surrogate-in-tuple",
        "long-int-tuple-id",
        "long-int-slash-id",
        "deep-key",
        "deep-new-id",
        "long-int-new-id",
        "duration-past-timedelta",
        "purge-duration-past-timedelta",
    ],
)
def test_a_hostile_id_is_a_one_line_usage_error(cli, ledger, args):
    result = cli("--db", ledger, *args)
    assert result.returncode == 2, result.stderr[-300:]
    assert result.stderr.startswith("chatledger: error: ")
    assert result.stderr.count("\n") == 1
    assert len(result.stderr) < 1000


def test_an_empty_db_is_a_usage_error_not_the_default_file(cli, ledger, tmp_path, monkeypatch):
    # `--db "$LEDGER"` with the variable unset used to be --db ./chatledger.db: an import
    # created and wrote that file in whatever directory the command ran in.
    monkeypatch.chdir(tmp_path)
    export = tmp_path / "x.jsonl"
    cli("--db", ledger, "export", "-o", export)
    for args in (["ids"], ["import", "x.jsonl"]):
        result = cli("--db", "", *args)
        assert result.returncode == 2, result.stderr
        assert result.stderr == (
            "chatledger: error: --db is empty; pass the path of a chatledger SQLite database "
            "(or leave --db out for ./chatledger.db)\n"
        )
    assert not (tmp_path / "chatledger.db").exists()


def test_a_db_that_is_no_file_is_named_for_what_it_is(cli, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path, what in ((fifo, "not a regular file"), (tmp_path, "a directory")):
        result = cli("--db", path, "ids")
        assert result.returncode == 1
        assert result.stderr == (
            f"chatledger: error: --db {path} is {what}; "
            "pass the path of a chatledger SQLite database\n"
        )
