"""[windows] through the command line and the log: chunked eviction is recorded and replayed
exactly, --policy takes evict_to and valid_for, and summaries survive export and import."""

from __future__ import annotations

import json

import pytest

from eventlog import (
    AiMessage,
    SQLiteEventStore,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from projections import (
    MessageWindowChatMemory,
    MessageWindowPolicy,
    SummarizingChatMemory,
    check_valid,
    walk,
    what_if,
)
from tests.cli.conftest import shown_messages


def test_chunked_eviction_trims_to_the_low_water_mark_and_replays_exactly(tmp_path):
    store = SQLiteEventStore(tmp_path / "c.db")
    memory = MessageWindowChatMemory("c", max_messages=10, store=store, evict_to=0.5)
    memory.add(SystemMessage("sys"))
    sizes = []
    for i in range(30):
        memory.add(UserMessage(f"u{i}"))
        sizes.append(len(memory.messages()))
    # Over 10: down to 5 at once, then it grows again - the prefix stays for 5 adds.
    assert sizes[:12] == [2, 3, 4, 5, 6, 7, 8, 9, 10, 5, 6, 7]
    steps = list(walk(store, "c"))
    assert all(step.replayed for step in steps)  # the audit's fold reproduces each window
    evictions = [s for s in steps if s.departures]
    assert [len(s.departures) for s in evictions] == [6] * len(evictions)
    assert {d.reason for s in evictions for d in s.departures} == {"evicted"}
    # The log records the low-water mark: a memory reopened without evict_to= still shows
    # the recorded windows in time travel.
    plain = MessageWindowChatMemory("c", max_messages=10, store=store)
    for step in steps:
        assert plain.as_of(seq=step.seq) == [e.message for e in step.view]
    assert what_if(store, "c", MessageWindowPolicy(10, evict_to=0.5)) == memory.messages()


def test_evict_to_is_checked():
    for bad in (0, 1, 1.0, -0.2, "0.5", True):
        with pytest.raises(ValueError, match="evict_to must be"):
            MessageWindowChatMemory(max_messages=3, evict_to=bad)  # type: ignore[arg-type]


@pytest.fixture
def tools_db(tmp_path):
    path = tmp_path / "t.db"
    with SQLiteEventStore(path) as store:
        memory = MessageWindowChatMemory("t", max_messages=50, store=store)
        memory.add(SystemMessage("sys"))
        for i in range(8):
            request = ToolExecutionRequest(id=f"c{i}", name="calc", arguments="{}")
            memory.add(
                UserMessage(f"u{i}"),
                AiMessage(tool_execution_requests=[request]),
                ToolExecutionResultMessage(f"c{i}", "calc", f"r{i}"),
                AiMessage(f"a{i}"),
            )
    return path


def test_policy_accepts_evict_to_and_valid_for(ok, tools_db):
    with SQLiteEventStore(tools_db) as store:
        expected = what_if(store, "t", MessageWindowPolicy(7), valid_for="anthropic")
        raw = what_if(store, "t", MessageWindowPolicy(7))
        chunked = what_if(store, "t", MessageWindowPolicy(7, evict_to=0.6), valid_for="openai")
    spec = "messages:7:valid_for=anthropic"
    view = shown_messages(ok("show", "t", "--db", tools_db, "--policy", spec, "--json").stdout)
    assert view == expected
    assert view != raw  # the profile changed something: the raw window starts with an AI turn
    assert check_valid(view, "anthropic") == []
    spec = "messages:7:evict_to=0.6:valid_for=openai"
    view = shown_messages(ok("show", "t", "--db", tools_db, "--policy", spec, "--json").stdout)
    assert view == chunked
    table = ok("show", "t", "--db", tools_db, "--policy", "messages:7:valid_for=gemini").stdout
    assert "what-if messages:7:valid_for=gemini" in table
    lines = ok(
        "replay",
        "t",
        "--db",
        tools_db,
        "--from",
        1,
        "--policy",
        "messages:5:evict_to=0.6",
        "--json",
    ).stdout.splitlines()
    assert max(len(json.loads(line)["view"]) for line in lines) <= 5


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("messages:5:evict_to=2", "evict_to='2': write a fraction between 0 and 1"),
        ("messages:5:valid_for=azure", "valid_for must be one of anthropic, gemini, openai"),
        ("messages:5:colour=red", "is not a policy"),
    ],
)
def test_bad_policy_options_are_usage_errors(cli, tools_db, spec, error):
    result = cli("show", "t", "--db", tools_db, "--policy", spec)
    assert result.returncode == 2
    assert error in result.stderr


def test_summaries_show_in_history_and_survive_export_and_import(ok, tmp_path):
    source = tmp_path / "s.db"
    with SQLiteEventStore(source) as store:
        memory = SummarizingChatMemory(
            "s", max_messages=2, store=store, summarizer=lambda m, p: f"{p or ''}[{len(m)}]"
        )
        for i in range(5):
            memory.add(UserMessage(f"u{i}"))
        views = {seq: memory.as_of(seq=seq) for seq in range(1, memory.seq + 1)}
    shown = ok("show", "s", "--db", source, "--as-of", 4).stdout
    assert "with the summary of event 4: [1]" in shown
    history = ok("history", "s", "--db", source).stdout
    assert "summary_recorded" in history
    assert "summary of 1 evicted message: [1]" in history
    exported = tmp_path / "s.jsonl"
    ok("export", "s", "--db", source, "--out", exported)
    target = tmp_path / "copy.db"
    ok("import", exported, "--db", target)
    with SQLiteEventStore(target) as store:
        copy = SummarizingChatMemory("s", max_messages=2, store=store, summarizer=_never)
        assert {seq: copy.as_of(seq=seq) for seq in views} == views
        assert copy.summary == "[1][1][1]"
    assert ok("verify", "--db", target).returncode == 0


def _never(messages: object, previous: object) -> str:
    raise AssertionError("time travel must not summarize")
