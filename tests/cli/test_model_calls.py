"""`replay`, `diff`, `show --as-of` and `sent` say, per recorded model call, what was sent,
what was left out and why; `sent --policy` re-runs a call under another policy."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("langchain_core", reason="the langchain extra is not installed")

from tests.calls_scenario import TOKEN_BUDGET, record_history, record_session
from tests.cli.conftest import json_lines

SECOND_LEFT = [
    {"from": [1, 0], "to": [2, 0], "count": 2, "reason": "outside the last 5 items"},
    {
        "from": [5, 0],
        "to": [5, 0],
        "count": 1,
        "reason": "tool call without its result dropped for validity for openai",
    },
    {
        "from": [7, 0],
        "to": [7, 0],
        "count": 1,
        "reason": "tool result without its call dropped for validity for openai",
    },
    {"from": [8, 0], "to": [8, 0], "count": 1, "reason": "retracted at seq 9"},
]
THIRD_LEFT = [
    {"from": [1, 0], "to": [7, 0], "count": 6, "reason": "before the last clear (seq 11)"},
    {"from": [12, 0], "to": [12, 0], "count": 1, "reason": f"over the {TOKEN_BUDGET}-token budget"},
]


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "calls.db"
    record_session(path)
    record_history(path)
    return path


def test_replay_json_carries_each_call(db, ok) -> None:
    lines = json_lines(ok("replay", "--db", db, "conv", "--json").stdout)
    calls = {line["seq"]: line["model_call"] for line in lines if "model_call" in line}
    # Check exactly the context_sent events carry a call, each with what it left out and why.
    assert sorted(calls) == [3, 10, 14]
    assert all(line["kind"] == "context_sent" for line in lines if "model_call" in line)
    assert calls[3]["left_out"] == []
    assert calls[10]["sent"] == [
        {"ref": [4, 0]},
        {"ref": [6, 0]},
        {"new": {"role": "user", "content": "q3"}},
    ]
    assert calls[10]["left_out"] == SECOND_LEFT
    assert calls[14]["left_out"] == THIRD_LEFT
    assert [calls[s]["reproduced"] for s in (3, 10, 14)] == [True, True, True]
    assert calls[14]["tokens"] == 15


def test_replay_text_says_why(db, ok) -> None:
    out = ok("replay", "--db", db, "lc", "--no-pager").stdout
    assert "model call at seq 5 (messages:3): sent 3 history items and 0 new" in out
    assert "left out event 2: outside the last 3 items" in out
    assert "left out event 1: system message replaced by a newer one" in out
    assert "left out events 2-3 (2): outside the last 3 items" in out
    assert out.count("model call at seq") == 2


def test_replay_under_a_policy_re_runs_each_call(db, ok) -> None:
    lines = json_lines(
        ok(
            "replay",
            "--db",
            db,
            "conv",
            "--from",
            "10",
            "--to",
            "10",
            "--json",
            "--policy",
            "messages:20:valid_for=openai",
        ).stdout
    )
    (line,) = lines
    call = line["model_call"]
    assert (call["what_if"], call["profile"], call["same_as_sent"]) == (
        "messages:20",
        "openai",
        False,
    )
    assert [e.get("ref") for e in call["sent"]] == [[1, 0], [2, 0], [4, 0], [6, 0], None]
    assert [g["from"][0] for g in call["left_out"]] == [5, 7, 8]


def test_diff_lists_the_calls_in_its_range(db, ok) -> None:
    report = json.loads(ok("diff", "--db", db, "conv", "9", "14", "--json").stdout)
    assert [c["seq"] for c in report["model_calls"]] == [10, 14]
    assert report["model_calls"][0]["left_out"] == SECOND_LEFT
    assert report["model_calls"][1]["left_out"] == THIRD_LEFT
    assert len(report["changes"]) == 8
    # Check a range without a call has none, and the text names the reasons.
    quiet = json.loads(ok("diff", "--db", db, "conv", "3", "9", "--json").stdout)
    assert quiet["model_calls"] == []
    text = ok("diff", "--db", db, "conv", "9", "14").stdout
    assert "left out event 8: retracted at seq 9" in text
    assert f"left out event 12: over the {TOKEN_BUDGET}-token budget" in text


def test_sent_names_what_was_left_out_and_re_runs_under_a_policy(db, ok, cli) -> None:
    shown = json.loads(ok("sent", "--db", db, "conv", "10").stdout)
    assert shown["left_out"] == SECOND_LEFT
    assert shown["reproduced"] is True
    # Check the recorded policy and profile reproduce the call exactly.
    same = json.loads(
        ok("sent", "--db", db, "conv", "10", "--policy", "messages:5:valid_for=openai").stdout
    )
    assert same["same_as_sent"] is True
    assert same["sent"] == shown["sent"]
    # Check another policy sends another input: the whole list, nothing retracted.
    wider = json.loads(ok("sent", "--db", db, "conv", "10", "--policy", "messages:20").stdout)
    assert wider["same_as_sent"] is False
    assert [item.get("content") for item in wider["sent"]] == [
        "q1",
        "a1",
        "q2",
        None,
        "checking",
        None,
        "q3",
    ]
    assert wider["left_out"] == [SECOND_LEFT[-1]]
    refused = cli("sent", "--db", db, "conv", "9", "--policy", "messages:2")
    assert refused.returncode == 1
    assert "no window recorded at seq 9" in refused.stderr
