"""history and diff on long memories: the table shows one page and counts the rest; JSON
gives everything; import writes a long memory in several appends, exactly as one."""

from __future__ import annotations

import io
import json
import re

import pytest

from eventlog import InMemoryEventStore, SQLiteEventStore
from eventlog.formats import jsonl as jsonl_module
from eventlog.formats.jsonl import export_jsonl, import_jsonl
from projections import MessageWindowChatMemory
from projections.audit import diff
from projections.cli.inspect import SHOWN
from projections.meta import check_window_record
from tests.cli.conftest import json_lines
from tests.factories import a_message

EVENTS = SHOWN + 25


@pytest.fixture
def long_ledger(tmp_path):
    path = tmp_path / "long.db"
    with SQLiteEventStore(path) as store:
        memory = MessageWindowChatMemory(id="long", max_messages=5, store=store)
        memory.add(a_message("system", "rules"))
        memory.add([a_message("user" if i % 2 else "ai") for i in range(EVENTS - 1)])
    return path


def _seqs(table):
    return [int(m.group(1)) for m in re.finditer(r"^(\d+)  ", table, re.MULTILINE)]


def test_history_table_shows_a_page_and_how_to_see_the_rest(ok, long_ledger):
    table = ok("history", "long", "--db", long_ledger).stdout
    # Check one page of rows, the total in the title, and the command for the next page.
    assert _seqs(table) == list(range(1, SHOWN + 1))
    assert f"history of long ({EVENTS} events)" in table
    assert f"… 25 more events: chatledger history long --from {SHOWN + 1} --db" in table
    following = ok("history", "long", "--from", SHOWN + 1, "--db", long_ledger).stdout
    assert _seqs(following) == list(range(SHOWN + 1, EVENTS + 1))
    assert "more event" not in following
    # Check --to bounds the count and is carried into the hint.
    bounded = ok("history", "long", "--from", 3, "--to", SHOWN + 4, "--db", long_ledger).stdout
    assert (
        f"… 2 more events: chatledger history long --from {SHOWN + 3} --to {SHOWN + 4}" in bounded
    )
    # Check JSON lines still list every event.
    events = json_lines(ok("history", "long", "--json", "--db", long_ledger).stdout)
    assert [e["seq"] for e in events] == list(range(1, EVENTS + 1))


def test_diff_table_shows_a_page_and_counts_every_change(ok, long_ledger):
    with SQLiteEventStore(long_ledger) as store:
        expected = diff(store, "long", 0, EVENTS)
    table = ok("diff", "long", 0, EVENTS, "--db", long_ledger).stdout
    rows = [line for line in table.splitlines() if re.match(r"[+±-]  ", line)]
    assert len(rows) == SHOWN
    heading = (
        f"long: seq 0 → {EVENTS}: {len(expected.entered)} entered, {len(expected.left)} left, "
        f"{len(expected.passed)} came and went"
    )
    assert heading in table
    more = len(expected.changes) - SHOWN
    assert f"… {more} more changes: add --json to list every one" in table
    # Check the JSON is the one object it always was, every change in diff()'s order.
    result = json.loads(ok("diff", "long", 0, EVENTS, "--json", "--db", long_ledger).stdout)
    assert result["memory"] == "long"
    assert (result["from"], result["to"]) == (0, EVENTS)
    assert [tuple(c["ref"]) for c in result["changes"]] == [c.entry.ref for c in expected.changes]


def test_diff_json_of_no_change_is_an_empty_list(ok, long_ledger):
    out = ok("diff", "long", 3, 3, "--json", "--db", long_ledger).stdout
    assert out == '{"memory": "long", "from": 3, "to": 3, "changes": [], "model_calls": []}\n'


def _long_export():
    store = InMemoryEventStore()
    memory = MessageWindowChatMemory(id="a", max_messages=3, store=store)
    other = MessageWindowChatMemory(id="b", max_messages=3, store=store)
    for i in range(7):
        memory.add(a_message("user", f"a{i}"))
        other.add(a_message("user", f"b{i}"))
    out = io.StringIO()
    export_jsonl(store, out)
    return store, out.getvalue()


def test_import_in_several_appends_equals_one(monkeypatch):
    source, text = _long_export()
    monkeypatch.setattr(jsonl_module, "_WRITE_CHUNK", 3)
    target = InMemoryEventStore()
    calls = []
    real_append = target.append

    def counting_append(key, items, **kwargs):
        calls.append((key, len(items)))
        return real_append(key, items, **kwargs)

    target.append = counting_append  # type: ignore[method-assign,assignment]
    progress: list[int] = []
    report = import_jsonl(target, text.splitlines(keepends=True), progress=progress.append,
                          check=check_window_record)  # fmt: skip
    # Check each memory went in appends of at most 3, and the result is the same ledger.
    assert calls == [("a", 3), ("a", 3), ("a", 1), ("b", 3), ("b", 3), ("b", 1)]
    assert progress == [3, 6, 7, 10, 13, 14]
    assert report.imported == {"a": (1, 7), "b": (1, 7)}
    assert report.records == 14
    for key in ("a", "b"):
        assert [r[1:] for r in target.read(key)] == [r[1:] for r in source.read(key)]
    assert target.verify().ok


def test_import_refuses_records_out_of_order_and_writes_nothing():
    _, text = _long_export()
    header, *lines = text.splitlines(keepends=True)
    lines[2], lines[3] = lines[3], lines[2]
    target = InMemoryEventStore()
    with pytest.raises(ValueError, match=r"jump from seq 2 to 4 \(line 4\).*export it again"):
        import_jsonl(target, [header, *lines])
    assert target.streams() == []


def test_import_refuses_a_bad_last_record_before_writing_the_first(monkeypatch):
    _, text = _long_export()
    monkeypatch.setattr(jsonl_module, "_WRITE_CHUNK", 2)
    lines = text.splitlines(keepends=True)
    last = json.loads(lines[-1])
    last["payload"] = last["payload"].replace("b6", "b7")
    lines[-1] = json.dumps(last) + "\n"
    target = InMemoryEventStore()
    with pytest.raises(ValueError, match="nothing was written"):
        import_jsonl(target, lines)
    assert target.streams() == []
