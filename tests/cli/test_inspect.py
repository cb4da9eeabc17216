"""The read-only commands, in-process, checked against the Python API (as_of, what_if, verify)."""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
from datetime import UTC, timedelta

import pytest

from eventlog import (
    AiMessage,
    CustomMessage,
    ImageContent,
    SQLiteEventStore,
    TextContent,
    ToolExecutionResultMessage,
    UserMessage,
)
from eventlog.formats.lc4j_json import message_from_obj, message_to_obj
from eventlog.ids import StreamKey
from projections import (
    MessageWindowChatMemory,
    MessageWindowPolicy,
    OpenAiTokenCountEstimator,
    TokenWindowPolicy,
    what_if,
)
from projections import readmodel as model
from projections.replay import replay_views
from tests.cli.conftest import json_lines, memory, shown_messages
from tests.factories import a_message


def test_ids_lists_memories_with_counts_and_activity(ok, ledger, store):
    MessageWindowChatMemory(id="second", max_messages=2, store=store).add(a_message("user"))
    table = ok("ids", "--db", ledger).stdout
    assert "conv" in table
    assert "second" in table
    assert "2026-01-01 10:" in table
    rows = json_lines(ok("ids", "--db", ledger, "--json").stdout)
    assert [(r["memory"], r["events"], r["last_seq"]) for r in rows] == [
        ("conv", 11, 11),
        ("second", 1, 1),
    ]
    first, last = (r.recorded_at_text for r in store.read("conv") if r.seq in (1, 11))
    assert (rows[0]["first_recorded_at"], rows[0]["last_recorded_at"]) == (first, last)


def test_history_json_has_one_object_per_event(ok, ledger, store):
    events = json_lines(ok("history", "conv", "--db", ledger, "--json").stdout)
    records = store.read("conv")
    assert [(e["seq"], e["kind"], e["recorded_at"]) for e in events] == [
        (r.seq, r.kind, r.recorded_at_text) for r in records
    ]
    assert events[1]["message"] == json.loads(records[1].payload)
    assert len(events[8]["messages"]) == 6
    assert [e["window_size"] for e in events] == [1, 2, 3, 4, 4, 3, 3, 4, 3, 0, 1]
    table = ok("history", "conv", "--db", ledger, "--from", 9, "--to", 10).stdout
    assert "messages_set" in table
    assert "memory_cleared" in table
    assert "What is 2+2?" not in table
    full = ok("history", "conv", "--db", ledger).stdout
    assert "history of conv (11 events)" in full
    assert "6 messages: start over" in full
    assert "(window emptied)" in full


def test_counts_are_singular_for_one(ok, tmp_path):
    path = tmp_path / "one.db"
    with SQLiteEventStore(path) as store:
        MessageWindowChatMemory(id="one", max_messages=3, store=store).add(a_message("user", "hi"))
        MessageWindowChatMemory(id="set", max_messages=3, store=store).set([a_message("user")])
    assert "history of one (1 event)" in ok("history", "one", "--db", path).stdout
    assert "(recorded view, 1 message)" in ok("show", "one", "--db", path).stdout
    assert "1 message: " in ok("history", "set", "--db", path).stdout
    assert "OK 1 hash chain intact, 1 record checked" in ok("verify", "one", "--db", path).stdout
    assert "2 hash chains intact, 2 records checked" in ok("verify", "--db", path).stdout


def test_show_as_of_and_at_equal_time_travel(ok, ledger, store):
    mem = memory(store)
    head = shown_messages(ok("show", "conv", "--db", ledger, "--json").stdout)
    assert head == mem.messages() == mem.as_of(seq=11)
    six = shown_messages(ok("show", "conv", "--db", ledger, "--as-of", 6, "--json").stdout)
    assert six == mem.as_of(seq=6)
    # A naive time is UTC: between seq 5 and 6, so the view after seq 5.
    at = store.read("conv")[4].recorded_at + timedelta(seconds=1)
    naive = at.astimezone(UTC).replace(tzinfo=None).isoformat()
    shown = ok("show", "conv", "--db", ledger, "--at", naive, "--json").stdout
    assert shown_messages(shown) == mem.as_of(at=at) == mem.as_of(seq=5)
    table = ok("show", "conv", "--db", ledger, "--as-of", 6).stdout
    assert "conv after seq 6 of 11 (recorded view, 3 messages)" in table
    assert "Be brief." in table


def test_show_policy_equals_what_if(ok, ledger, store):
    shown = ok("show", "conv", "--db", ledger, "--as-of", 8, "--policy", "messages:2", "--json")
    assert shown_messages(shown.stdout) == what_if(store, "conv", MessageWindowPolicy(2), seq=8)
    estimator = OpenAiTokenCountEstimator("gpt-4o-mini")
    shown = ok("show", "conv", "--db", ledger, "--policy", "tokens:40:gpt-4o-mini", "--json")
    expected = what_if(store, "conv", TokenWindowPolicy(40, estimator), seq=None)
    assert shown_messages(shown.stdout) == expected
    assert ok("show", "conv", "--db", ledger, "--as-of", 0, "--policy", "messages:2").stdout


def _brought(store, ref):
    seq, index = ref
    payload = json.loads(store.read("conv", gt=seq - 1, lte=seq)[0].payload)
    return message_from_obj(payload if index == 0 and isinstance(payload, dict) else payload[index])


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 10])
def test_what_if_refs_name_the_event_that_brought_each_message(store, limit):
    policy = MessageWindowPolicy(limit)
    for seq in range(12):
        view = model.what_if_view(store, StreamKey("conv"), policy, seq)
        assert [m for _, m in view] == what_if(store, "conv", policy, seq=seq)
        assert len({ref for ref, _ in view}) == len(view)
        for ref, message in view:
            assert ref[0] <= seq
            assert _brought(store, ref) == message


def test_show_policy_fills_the_event_column(ok, ledger):
    table = ok("show", "conv", "--db", ledger, "--as-of", 9, "--policy", "messages:3").stdout
    # Piped, a table is columns two spaces apart: "#  event  role  text".
    rows = [line for line in table.splitlines() if re.match(r"\d", line)]
    assert [row.split()[1] for row in rows] == ["9.3", "9.4", "9.5"]
    table = ok("show", "conv", "--db", ledger, "--as-of", 8, "--policy", "messages:3").stdout
    rows = [line for line in table.splitlines() if re.match(r"\d", line)]
    assert [row.split()[1] for row in rows] == ["6", "7", "8"]


def test_diff_reports_every_reason(ok, ledger):
    result = json.loads(ok("diff", "conv", 0, 11, "--db", ledger, "--json").stdout)
    reasons = {
        tuple(c["ref"]): (c["entered_at"], c["left_at"], c["reason"]) for c in result["changes"]
    }
    assert reasons[(1, 0)] == (1, 7, "system_replaced")
    assert reasons[(2, 0)] == (2, 5, "evicted")
    assert reasons[(4, 0)] == (4, 6, "orphan")
    assert reasons[(5, 0)] == (5, 9, "set")
    assert reasons[(9, 2)] == (9, 9, "orphan")
    assert reasons[(9, 5)][:2] == (9, 10)
    assert reasons[(11, 0)] == (11, None, None)
    table = ok("diff", "conv", 4, 9, "--db", ledger).stdout
    assert "conv: seq 4 → 9: 3 entered, 4 left, 7 came and went" in table
    assert "orphan (its tool call left)" in table
    assert "system message replaced" in table
    assert "set (content replaced)" in table
    assert "cleared" in ok("diff", "conv", 9, 10, "--db", ledger).stdout


def test_reason_text_covers_every_reason():
    for reason in ("evicted", "orphan", "system_replaced", "set", "cleared"):
        assert model.reason_text(reason) != reason or reason == "cleared"
    assert model.reason_text(None) == ""


def test_explain_says_when_a_message_entered_and_why_it_left(ok, ledger):
    db = ("--db", ledger)
    assert (
        "entered the view at seq 4; left it at seq 6: orphan"
        in ok("explain", "conv", 4, *db).stdout
    )
    out = ok("explain", "conv", 9, "--index", 2, *db).stdout
    assert "brought by seq 9 but not kept: orphan" in out
    out = ok("explain", "conv", 11, *db).stdout
    assert "entered the view at seq 11; still in it at seq 11 (head)" in out
    explained = json.loads(ok("explain", "conv", 2, "--json", *db).stdout)
    assert (explained["ref"], explained["left_at"], explained["reason"]) == ([2, 0], 5, "evicted")


def test_every_message_kind_has_a_one_line_preview(ok, tmp_path):
    kinds = tmp_path / "kinds.db"
    with SQLiteEventStore(kinds) as other:
        MessageWindowChatMemory(id="kinds", max_messages=9, store=other).add(
            UserMessage(
                name="ann", contents=[TextContent("look"), ImageContent(url="http://x/y.png")]
            ),
            AiMessage("thinking done", thinking="hmm"),
            ToolExecutionResultMessage(id="7", tool_name=None, text="bare result"),
            CustomMessage({"role": "critic", "score": 3}),
        )
    out = ok("show", "kinds", "--db", kinds).stdout
    for text in ("ann: look [image]", "thinking done", "bare result", '"role": "critic"'):
        assert text in out


def test_ids_of_an_empty_ledger(ok, tmp_path):
    empty = tmp_path / "empty.db"
    SQLiteEventStore(empty).close()
    assert ok("ids", "--db", empty).stdout.strip() == f"no memories in {empty}"


def test_replay_json_gives_the_view_after_every_event(ok, ledger, store):
    mem = memory(store)
    steps = json_lines(ok("replay", "conv", "--db", ledger, "--json").stdout)
    assert [s["seq"] for s in steps] == list(range(1, 12))
    for step in steps:
        assert step["view"] == [message_to_obj(m) for m in mem.as_of(seq=step["seq"])]
    assert steps[5]["left"][1]["reason"] == "orphan"
    replayed = json_lines(
        ok("replay", "conv", "--policy", "messages:2", "--json", "--db", ledger).stdout
    )
    expected = replay_views(store, "conv", MessageWindowPolicy(2))
    assert [s["view"] for s in replayed] == [[message_to_obj(m) for m in v] for _, v in expected]


def test_replay_pages_when_not_a_terminal(ok, ledger):
    out = ok("replay", "conv", "--db", ledger, "--from", 5, "--page-size", 2).stdout
    assert "seq 5 " in out
    assert "seq 6 " in out
    assert "seq 7 " not in out
    assert "← orphan (its tool call left)" in out
    more = out.splitlines()[-1]
    assert more == f"… 5 more events: chatledger replay conv --from 7 --page-size 2 --db {ledger}"
    assert "seq 7 " in ok(*shlex.split(more.split(": ", 1)[1])[1:]).stdout
    out = ok("replay", "conv", "--db", ledger, "--from", 10, "--page-size", 1).stdout
    assert "1 more event: chatledger replay conv --from 11" in out
    policy = ok("replay", "conv", "--db", ledger, "--policy", "messages:2", "--to", 3).stdout
    assert "seq 3 " in policy
    args = ("replay", "conv", "--policy", "messages:2", "--keep-system-first", "--to", 4)
    paged = ok(*args, "--page-size", 3, "--db", ledger).stdout.splitlines()[-1]
    assert "--from 4 --to 4 --page-size 3 --policy messages:2 --keep-system-first --db" in paged


def test_verify_passes_then_names_a_tampered_row(ok, cli, ledger):
    assert "1 hash chain intact, 11 records checked" in ok("verify", "--db", ledger).stdout
    with sqlite3.connect(ledger) as conn:
        conn.execute(
            "UPDATE events SET payload = ? WHERE stream_id = 'conv' AND seq = 5",
            ('{"text":"2+2 is 5.","type":"AI"}',),
        )
    broken = cli("verify", "--db", ledger)
    assert broken.returncode == 1
    assert "memory 'conv': first bad seq 5: stored hash does not match" in broken.stdout
    assert "1 of 1 hash chain is broken (11 records checked)" in broken.stdout
    report = cli("verify", "conv", "--db", ledger, "--json")
    assert report.returncode == 1
    assert json.loads(report.stdout)["failures"] == [
        {"memory": "conv", "seq": 5, "reason": "stored hash does not match the record's content"}
    ]


def test_piped_output_is_never_wrapped(cli, tmp_path):
    path = tmp_path / "long.db"
    long_id = "a-rather-long-memory-id-" * 6
    with SQLiteEventStore(path) as store:
        MessageWindowChatMemory(id=long_id, max_messages=3, store=store).add(a_message("user"))
        MessageWindowChatMemory(id="b", max_messages=3, store=store).add(a_message("user"))
    replay = cli("replay", long_id, "--db", path).stdout
    assert any(line.startswith("── seq 1 · ") and len(line) < 200 for line in replay.splitlines())
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET recorded_at = '2020-01-01T00:00:00.000000Z'")
    out = cli("verify", "--db", path).stdout
    broken = [line for line in out.splitlines() if line.startswith("BROKEN")]
    assert any(line.startswith(f"BROKEN memory {long_id!r}: first bad seq 1: ") for line in broken)
    assert all(line.endswith("content") for line in broken)  # the reason is on the same line
    assert out.count("BROKEN") == 2
    assert "2 of 2 hash chains are broken (2 records checked)" in out
    # Check a tampered memory is not replayed: one line names it and the bad seq.
    refused = cli("replay", long_id, "--db", path)
    assert refused.returncode == 1 and "not served" in refused.stderr
    assert refused.stderr.count("\n") == 1 and long_id in refused.stderr
