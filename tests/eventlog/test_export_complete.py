"""An export says how far each memory's records go, so a file cut at a line boundary (a copy
interrupted, a disk that filled, ``head -n``) is refused whole instead of importing a shorter
history as if it were all. Real SQLite files and the real PostgreSQL server, as targets."""

from __future__ import annotations

import io
import json

import pytest

from eventlog import InMemoryEventStore, UserMessage
from eventlog.formats.jsonl import export_jsonl, import_jsonl
from eventlog.store import EventStore
from projections import MessageWindowChatMemory
from projections.meta import check_window_record


def _source() -> InMemoryEventStore:
    source = InMemoryEventStore()
    for memory, count in (("first", 3), ("second", 4)):
        chat = MessageWindowChatMemory(id=memory, max_messages=3, store=source)
        for i in range(count):
            chat.add(UserMessage(f"{memory} {i}"))
    return source


def _export(store: EventStore, **options: object) -> list[str]:
    out = io.StringIO()
    export_jsonl(store, out, **options)  # type: ignore[arg-type]
    return out.getvalue().splitlines(keepends=True)


def _refused(store: EventStore, lines: list[str], match: str) -> None:
    with pytest.raises(ValueError, match=match) as caught:
        import_jsonl(store, lines, source="x.jsonl", check=check_window_record)
    assert str(caught.value).startswith("import of x.jsonl refused, nothing was written: ")
    assert "\n" not in str(caught.value)
    assert store.streams(include_system=True) == []


def test_an_export_cut_after_a_record_is_refused_whole(store: EventStore) -> None:
    # Before, every record left was a valid chain, so the file imported as a history one
    # record (here: 'second' seq 4) shorter than the ledger it came from, and nothing said so.
    lines = _export(_source())
    _refused(store, lines[:-1], r"'second' end at seq 3, but the export's header says 4")


def test_an_export_missing_a_whole_memory_is_refused_whole(store: EventStore) -> None:
    lines = _export(_source())
    _refused(store, lines[:4], r"'second' .* none of its records")


def test_an_export_bringing_a_memory_its_header_does_not_name_is_refused(
    store: EventStore,
) -> None:
    lines = _export(_source())
    header = json.loads(lines[0])
    del header["last"]["first"]
    edited = [json.dumps(header) + "\n", *lines[1:]]
    _refused(store, edited, r"'first', which its header does not name")


def test_a_complete_export_and_an_incremental_one_import(store: EventStore) -> None:
    source = _source()
    lines = _export(source)
    assert json.loads(lines[0])["last"] == {"first": 3, "second": 4}
    assert import_jsonl(store, lines, check=check_window_record).records == 7
    MessageWindowChatMemory(id="second", max_messages=3, store=source).add(UserMessage("more"))
    more = _export(source, memory_id="second", after=4)
    assert json.loads(more[0])["last"] == {"second": 5}
    assert import_jsonl(store, more, check=check_window_record).records == 1
    # Nothing after --after: the header names no seq to reach, and the file imports nothing.
    none = _export(source, memory_id="second", after=5)
    assert json.loads(none[0])["last"] == {}
    assert import_jsonl(store, none, check=check_window_record).records == 0
    assert store.verify().ok


def test_an_export_written_before_the_header_said_how_far_still_imports(
    store: EventStore,
) -> None:
    lines = _export(_source())
    header = json.loads(lines[0])
    del header["last"]
    assert import_jsonl(store, [json.dumps(header) + "\n", *lines[1:]]).records == 7


@pytest.mark.parametrize("last", [[], {"first": "3"}, {"first": True}, {"first": 0}, 7])
def test_a_malformed_last_in_the_header_is_refused(store: EventStore, last: object) -> None:
    lines = _export(_source())
    header = json.loads(lines[0])
    header["last"] = last
    _refused(store, [json.dumps(header) + "\n", *lines[1:]], r"header's \"last\"")
