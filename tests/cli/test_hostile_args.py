"""Ids, numbers and durations an operator pasted from somewhere hostile: each is a one-line
usage error (exit status 2), never a traceback."""

from __future__ import annotations

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
