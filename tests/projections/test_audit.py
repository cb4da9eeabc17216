"""projections.audit: step-by-step views, diffs with reasons, explain, fork, export and import.

Every test runs on every backend (the `store` fixture); export/import also crosses backends
(whatever `store` is -> a fresh SQLite file). The conversations are built with the real window
memories, so the diffs are checked against what LangChain4j's rules actually did.
"""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from freezegun import freeze_time

from eventlog import SQLiteEventStore, SystemMessage
from eventlog.formats.jsonl import FORMAT, export_jsonl, import_jsonl
from eventlog.hashing import GENESIS
from eventlog.ids import StreamKey
from eventlog.serialization import added_record, cleared_record, decode_meta
from projections import (
    MessageWindowChatMemory,
    MessageWindowPolicy,
    OpenAiTokenCountEstimator,
    TokenWindowChatMemory,
    what_if,
)
from projections.audit import Change, diff, explain, fork, walk
from projections.meta import WindowMeta
from projections.replay import view_at
from tests.factories import a_cut_export, a_message, a_tool_exchange

ESTIMATOR = OpenAiTokenCountEstimator("gpt-4o-mini")


def story(store, memory_id="conv"):
    """A conversation that makes a message leave the view for every reason, by seq.

    Returns the memory and the messages by name.
    """
    memory = MessageWindowChatMemory(id=memory_id, max_messages=4, store=store)
    m = {
        "sys1": SystemMessage("Be brief."),
        "q1": a_message("user", "What is 2+2?"),
        "q2": a_message("user", "And 3+3?"),
        "sys2": SystemMessage("Be verbose."),
        "a2": a_message("ai", "3+3 is 6."),
        "s1": a_message("user", "start over"),
        "s2": a_message("ai", "sure"),
        "s5": a_message("user", "last of the set"),
        "after": a_message("user", "after clear"),
    }
    m["call"], m["result"] = a_tool_exchange(call_id="1", result="4")
    m["a1"] = a_message("ai", "2+2 is 4.")
    m["s3"], m["s4"] = a_tool_exchange(call_id="2", result="9")
    memory.add(m["sys1"])  # 1
    memory.add(m["q1"])  # 2
    memory.add(m["call"])  # 3
    memory.add(m["result"])  # 4
    memory.add(m["a1"])  # 5: [sys1 call result a1], q1 evicted
    memory.add(m["q2"])  # 6: [sys1 a1 q2], call evicted, result orphaned
    memory.add(m["sys2"])  # 7: [a1 q2 sys2], sys1 replaced
    memory.add(m["a2"])  # 8: [a1 q2 sys2 a2]
    # 9: a set of 6 that keeps 3: s1 evicted, then s3 (a tool call) with its result s4 orphaned
    memory.set([m["s1"], m["s3"], m["s4"], m["s2"], m["s5"], m["q1"]])
    memory.clear()  # 10
    memory.add(m["after"])  # 11
    return memory, m


def _refs(entries):
    return {e.ref for e in entries}


# ---------------------------------------------------------------------------- walk


def test_walk_views_are_the_recorded_views(store):
    memory, _ = story(store)
    steps = list(walk(store, "conv"))
    # Check every step's view is what time travel returns, seq by seq.
    assert [s.seq for s in steps] == list(range(1, 12))
    for step in steps:
        assert [e.message for e in step.view] == memory.as_of(seq=step.seq)
    # Check a walk can start in the middle and stop early.
    middle = list(walk(store, "conv", after=5, upto=7))
    assert [s.seq for s in middle] == [6, 7]
    assert middle[0].view == steps[5].view


def test_walk_rejects_seqs_outside_the_history(store):
    story(store)
    with pytest.raises(ValueError, match="pick a seq from 0 to 11"):
        list(walk(store, "conv", after=12))
    with pytest.raises(ValueError, match="upto=99"):
        list(walk(store, "conv", upto=99))


# ---------------------------------------------------------------------------- diff


def test_diff_names_every_reason(store):
    _, m = story(store)
    result = diff(store, "conv", 0, 11)
    by_ref = {c.entry.ref: c for c in result.changes}
    # Check each message's entry and exit seq and the reason, against the story's comments.
    expected = {
        (1, 0): (1, 7, "system_replaced"),
        (2, 0): (2, 5, "evicted"),
        (3, 0): (3, 6, "evicted"),
        (4, 0): (4, 6, "orphan"),
        (5, 0): (5, 9, "set"),
        (6, 0): (6, 9, "set"),
        (7, 0): (7, 9, "set"),
        (8, 0): (8, 9, "set"),
        (9, 0): (9, 9, "evicted"),  # set items the window could not keep: in and out at once
        (9, 1): (9, 9, "evicted"),
        (9, 2): (9, 9, "orphan"),
        (9, 3): (9, 10, "cleared"),
        (9, 4): (9, 10, "cleared"),
        (9, 5): (9, 10, "cleared"),
        (11, 0): (11, None, None),
    }
    assert {ref: (c.entered_at, c.left_at, c.reason) for ref, c in by_ref.items()} == expected
    assert by_ref[(4, 0)].message == m["result"]
    assert by_ref[(9, 2)].message == m["s4"]
    assert [c.entry.ref for c in result.entered] == [(11, 0)]
    assert result.left == ()
    assert len(result.passed) == 14


def test_diff_between_two_points_splits_entered_left_and_passed(store):
    story(store)
    result = diff(store, "conv", 5, 8)
    # Check: at 5 the view is [sys1 call result a1]; at 8 it is [a1 q2 sys2 a2].
    assert {c.entry.ref: c.reason for c in result.left} == {
        (1, 0): "system_replaced",
        (3, 0): "evicted",
        (4, 0): "orphan",
    }
    assert [(c.entry.ref, c.entered_at) for c in result.entered] == [
        ((6, 0), 6),
        ((7, 0), 7),
        ((8, 0), 8),
    ]
    assert result.passed == ()
    assert diff(store, "conv", 4, 4).changes == ()


def test_diff_agrees_with_the_views_for_every_pair_of_seqs(store):
    story(store)
    views = {0: set()} | {s.seq: _refs(s.view) for s in walk(store, "conv")}
    for a in views:
        for b in views:
            if a > b:
                continue
            result = diff(store, "conv", a, b)
            # Check the diff is exactly the set difference of the two views ...
            assert {c.entry.ref for c in result.entered} == views[b] - views[a]
            assert {c.entry.ref for c in result.left} == views[a] - views[b]
            # ... and that what passed through was in neither, entering and leaving inside.
            for change in result.passed:
                assert change.entry.ref not in views[a] | views[b]
                assert change.entered_at is not None
                assert change.left_at is not None
                assert a < change.entered_at <= change.left_at <= b


def test_diff_token_window_reports_a_message_it_could_not_keep(store):
    memory = TokenWindowChatMemory(
        id="tok", max_tokens=20, token_count_estimator=ESTIMATOR, store=store
    )
    memory.add(a_message("user", "hi"))
    memory.add(a_message("user", "word " * 40))  # alone over the budget: evicted at once
    result = diff(store, "tok", 0, 2)
    assert [(c.entry.ref, c.entered_at, c.left_at, c.reason) for c in result.changes] == [
        ((1, 0), 1, 2, "evicted"),
        ((2, 0), 2, 2, "evicted"),
    ]


def test_diff_rejects_bad_ranges(store):
    story(store)
    with pytest.raises(ValueError, match="must not be after"):
        diff(store, "conv", 5, 3)
    with pytest.raises(ValueError, match="end=12"):
        diff(store, "conv", 0, 12)


# ---------------------------------------------------------------------------- explain


@pytest.mark.parametrize(
    ("seq", "index", "expected"),
    [
        (4, 0, (4, 6, "orphan")),
        (1, 0, (1, 7, "system_replaced")),
        (9, 2, (9, 9, "orphan")),
        (9, 5, (9, 10, "cleared")),
        (11, 0, (11, None, None)),
    ],
)
def test_explain_follows_one_message(store, seq, index, expected):
    story(store)
    change = explain(store, "conv", seq, index)
    assert isinstance(change, Change)
    assert (change.entered_at, change.left_at, change.reason) == expected
    assert change.entry.ref == (seq, index)


def test_explain_refuses_events_without_that_message(store):
    story(store)
    with pytest.raises(ValueError, match="memory_cleared that brought 0"):
        explain(store, "conv", 10)
    with pytest.raises(ValueError, match="none at index 6"):
        explain(store, "conv", 9, 6)
    with pytest.raises(ValueError, match="from 1 to 11"):
        explain(store, "conv", 0)


# ---------------------------------------------------------------------------- fork


def test_fork_starts_a_new_memory_from_a_past_view(store):
    memory, m = story(store)
    head_before = store.head("conv")
    record = fork(store, "conv", "conv-b", seq=6)
    source = store.read("conv", gt=5, lte=6)[0]
    meta = decode_meta(record)
    # Check the fork is one set event whose window keeps every message of the past view ...
    assert (record.seq, record.kind) == (1, "messages_set")
    assert meta["w"] == [[1, 0, 2]]
    assert meta["forked_from"] == {"memory": "conv", "seq": 6, "hash": source.hash}
    branch = MessageWindowChatMemory(id="conv-b", max_messages=4, store=store)
    assert branch.messages() == memory.as_of(seq=6) == [m["sys1"], m["a1"], m["q2"]]
    # ... that continues under the window rules, while the original is untouched.
    branch.add(a_message("ai", "on the branch"))
    branch.add(a_message("user", "more"))
    assert branch.messages()[0] == m["sys1"]
    assert len(branch.messages()) == 4
    assert store.head("conv") == head_before


def test_fork_of_a_token_window_carries_the_counts(store):
    memory = TokenWindowChatMemory(
        id="tok", max_tokens=500, token_count_estimator=ESTIMATOR, store=store
    )
    memory.add(SystemMessage("Be brief."))
    memory.add(a_message("user", "hello there"))
    record = fork(store, "tok", "tok-b")
    meta = decode_meta(record)
    assert meta["tok"] == [ESTIMATOR.estimate_token_count_in_message(m) for m in memory.messages()]
    assert meta["est"] == ESTIMATOR.identity
    branch = TokenWindowChatMemory(
        id="tok-b", max_tokens=500, token_count_estimator=ESTIMATOR, store=store
    )
    assert branch.messages() == memory.messages()


def test_fork_refuses_a_used_target_and_bad_seqs(store):
    story(store)
    fork(store, "conv", "used", seq=1)
    with pytest.raises(ValueError, match="'used' already has 1 event"):
        fork(store, "conv", "used")
    with pytest.raises(ValueError, match="from 1 to 11"):
        fork(store, "conv", "other", seq=12)
    with pytest.raises(ValueError, match="has no events"):
        fork(store, "nobody", "other")
    assert store.head("other") is None


def test_fork_of_an_empty_view(store):
    story(store)
    record = fork(store, "conv", "empty", seq=10)  # right after the clear
    assert json.loads(record.payload) == []
    assert decode_meta(record)["w"] == []
    assert MessageWindowChatMemory(id="empty", max_messages=3, store=store).messages() == []


# ---------------------------------------------------------------------------- export / import


def _export(store, **kwargs):
    out = io.StringIO()
    count = export_jsonl(store, out, **kwargs)
    return out.getvalue(), count


def test_export_import_keeps_seqs_times_hashes_and_views(store, tmp_path):
    with freeze_time("2026-01-01 10:00:00") as clock:
        memory, _ = story(store)
        clock.tick(timedelta(hours=1))
        other = MessageWindowChatMemory(id=("user", 7), max_messages=2, store=store)
        other.add(a_message("user"))
    text, count = _export(store)
    lines = text.splitlines()
    assert json.loads(lines[0])["format"] == FORMAT
    assert count == len(lines) - 1 == 12
    with SQLiteEventStore(tmp_path / "copy.db") as copy:
        blank_lines_too = [lines[0], "", *lines[1:], "   "]
        report = import_jsonl(copy, blank_lines_too, source="copy.jsonl")
        assert report.records == 12
        keys = [info.stream_id for info in store.streams()]
        assert report.imported == dict(zip(keys, [(1, 11), (1, 1)], strict=True))
        # Check the copy verifies, and holds the same records, byte for byte ...
        assert copy.verify().ok
        for key in map(StreamKey, keys):
            assert _rows(copy, key) == _rows(store, key)
        # ... so time travel by seq and by time gives the same views.
        twin = MessageWindowChatMemory(id="conv", max_messages=4, store=copy)
        for seq in range(12):
            assert twin.as_of(seq=seq) == memory.as_of(seq=seq)
        for record in store.read("conv"):
            assert twin.as_of(at=record.recorded_at) == memory.as_of(at=record.recorded_at)


def _rows(store, key):
    return [
        (r.seq, r.recorded_at_text, r.kind, r.payload, r.meta, r.prev_hash, r.hash)
        for r in store.read(key)
    ]


def test_import_appends_an_incremental_export_and_refuses_overlaps(store, tmp_path):
    story(store)
    full, _ = _export(store, memory_id="conv")
    with SQLiteEventStore(tmp_path / "copy.db") as copy:
        # Check: the first 8 events, then the rest as an export after seq 8.
        first_part = a_cut_export(full.splitlines()[:9])
        import_jsonl(copy, first_part)
        tail, count = _export(store, memory_id="conv", after=8)
        assert count == 3
        report = import_jsonl(copy, tail.splitlines())
        assert report.imported == {"conv": (9, 11)}
        assert [r.hash for r in copy.read("conv")] == [r.hash for r in store.read("conv")]
        # Check the whole file again is refused: it would overwrite, not continue.
        with pytest.raises(ValueError, match=r"already has events 1\.\.11 .* never overwrites"):
            import_jsonl(copy, full.splitlines())
        with pytest.raises(ValueError, match="already has events"):
            import_jsonl(copy, tail.splitlines())
        assert copy.head("conv").seq == 11


def _tampered(text, seq, field, value):
    lines = text.splitlines()
    for i, line in enumerate(lines[1:], 1):
        obj = json.loads(line)
        if obj["seq"] == seq:
            obj[field] = value
            lines[i] = json.dumps(obj)
    return lines


@pytest.mark.parametrize(
    "tamper",
    [
        (3, "payload", '{"text":"forged","type":"AI"}', "breaks at seq 3: the stored hash"),
        (4, "prev_hash", GENESIS, "breaks at seq 4: prev_hash"),
        (1, "prev_hash", "f" * 64, "breaks at seq 1: prev_hash is not genesis"),
        (5, "recorded_at", "2020-01-01T00:00:00Z", "not canonical"),
        (5, "recorded_at", "2020-01-01T00:00:00.000000Z", "earlier than the one before it"),
        (5, "payload", 42, "payload must be a string"),
        (6, "seq", "6", "seq must be an integer"),
        (2, "memory", "~x:nope", "not a chatledger key"),
    ],
)
def test_import_refuses_a_tampered_file_before_writing(store, tmp_path, tamper):
    seq, field, value, message = tamper
    story(store)
    # An intact memory first in the file: it must not be written either.
    MessageWindowChatMemory(id="aaa", max_messages=2, store=store).add(a_message("user"))
    text, _ = _export(store)
    with SQLiteEventStore(tmp_path / "copy.db") as copy:
        with pytest.raises(ValueError, match=message) as caught:
            import_jsonl(copy, _tampered(text, seq, field, value), source="x.jsonl")
        assert "import of x.jsonl refused, nothing was written" in str(caught.value)
        assert copy.streams() == []  # not even the intact memory was written


def test_import_refuses_a_gap_and_things_that_are_not_exports(store, tmp_path):
    story(store)
    text, _ = _export(store)
    lines = text.splitlines()
    with SQLiteEventStore(tmp_path / "copy.db") as copy:
        with pytest.raises(ValueError, match="jump from seq 4 to 6"):
            import_jsonl(copy, lines[:5] + lines[6:])
        with pytest.raises(ValueError, match="not a chatledger export"):
            import_jsonl(copy, lines[1:])
        with pytest.raises(ValueError, match="is empty"):
            import_jsonl(copy, [])
        with pytest.raises(ValueError, match="version 2"):
            import_jsonl(copy, [json.dumps({"format": FORMAT, "version": 2})])
        with pytest.raises(ValueError, match="line 2 is not a record"):
            import_jsonl(copy, [lines[0], '{"memory": "x"}'])
        with pytest.raises(ValueError, match="line 2 is not JSON"):
            import_jsonl(copy, [lines[0], "{oops"])
        with pytest.raises(ValueError, match="not a chatledger export"):
            import_jsonl(copy, ["{oops"])
        with pytest.raises(ValueError, match="not UTF-8 text"):
            import_jsonl(copy, io.TextIOWrapper(io.BytesIO(b"\xff\xfe{}\n"), encoding="utf-8"))
        with pytest.raises(ValueError, match="start at seq 3"):
            import_jsonl(copy, [lines[0], *lines[3:]])
        assert copy.streams() == []


def test_import_of_a_purged_memory_is_refused_or_skipped(store, tmp_path):
    story(store)
    keep = MessageWindowChatMemory(id="keep", max_messages=2, store=store)
    keep.add(a_message("user"))
    store.purge("conv", expected_seq=11, reason="idle for 90 days")
    text, _ = _export(store)
    with SQLiteEventStore(tmp_path / "copy.db") as copy:
        with pytest.raises(ValueError, match="starts with a memory_purged tombstone at seq 12"):
            import_jsonl(copy, text.splitlines())
        assert copy.streams() == []
        report = import_jsonl(copy, text.splitlines(), skip_purged=True)
        assert report.skipped == ("conv",)
        assert report.imported == {"keep": (1, 1)}


def test_export_of_one_memory_and_of_system_streams(store):
    story(store)
    MessageWindowChatMemory(id="other", max_messages=2, store=store).add(a_message("user"))
    text, count = _export(store, memory_id="other")
    assert count == 1
    assert {json.loads(line)["memory"] for line in text.splitlines()[1:]} == {"other"}
    with pytest.raises(ValueError, match="needs a memory_id"):
        _export(store, after=3)


def test_what_if_on_a_fork_matches_the_source_view(store):
    memory, _ = story(store)
    fork(store, "conv", "b", seq=8)
    assert what_if(store, "b", MessageWindowPolicy(2)) == memory.as_of(seq=8)[-2:]


def test_walk_and_export_page_through_long_histories(store):
    store.append("big", [cleared_record()] * 2_100)
    assert [s.seq for s in walk(store, "big", after=5)] == list(range(6, 2_101))
    text, count = _export(store, memory_id="big")
    assert count == 2_100
    assert [json.loads(line)["seq"] for line in text.splitlines()[1:]] == list(range(1, 2_101))


def test_walk_reads_messages_a_foreign_writer_brought_back(store):
    # Not what a chatledger memory writes (a clear empties the window for good), but a valid
    # log: event 3's window refers back to event 1, which the previous view no longer held.
    first, second = a_message("user", "first"), a_message("user", "second")
    store.append(
        "foreign",
        [
            added_record(first, WindowMeta([[1, 1]]).encode()),
            cleared_record(),
            added_record(second, WindowMeta([[1, 1], [3, 3]]).encode()),
        ],
    )
    steps = list(walk(store, "foreign"))
    # Check these events record no limit, so the rules cannot be replayed: the recorded
    # window is shown and the step says so.
    assert [s.replayed for s in steps] == [False, True, False]
    assert [e.message for e in steps[2].view] == [first, second]
    assert [e.ref for e in steps[2].entered] == [(1, 0), (3, 0)]
    assert [e.message for e in view_at(store, "foreign", 3)] == [first, second]
