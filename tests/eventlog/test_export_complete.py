"""An export says how many records it wrote, so a file cut at a line boundary (a copy
interrupted, a disk that filled, ``head -n``) is refused whole instead of importing a shorter
history as if it were all. Real SQLite files and the real PostgreSQL server, as targets."""

from __future__ import annotations

import base64
import io
import json
import random
from pathlib import Path

import pytest

from eventlog import InMemoryEventStore, SQLiteEventStore, UserMessage
from eventlog.contents import PdfFileContent, TextContent
from eventlog.formats.jsonl import export_jsonl, import_jsonl
from eventlog.serialization import cleared_record
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


def _with_header(lines: list[str], **fields: object) -> list[str]:
    header = json.loads(lines[0])
    header.update(fields)
    return [json.dumps(header) + "\n", *lines[1:]]


def _refused(store: EventStore, lines: list[str], match: str) -> None:
    with pytest.raises(ValueError, match=match) as caught:
        import_jsonl(store, lines, source="x.jsonl", check=check_window_record)
    assert str(caught.value).startswith("import of x.jsonl refused, nothing was written: ")
    assert "\n" not in str(caught.value)
    assert store.streams(include_system=True) == []


@pytest.mark.parametrize("cut", [1, 4], ids=["a-record", "a-whole-memory"])
def test_an_export_cut_at_a_line_boundary_is_refused_whole(store: EventStore, cut: int) -> None:
    # Before, every record left was a valid chain, so the file imported as a history one
    # record (or one memory) shorter than the ledger it came from, and nothing said so.
    lines = _export(_source())
    _refused(store, lines[:-cut], rf"holds {7 - cut} records, but its header says .* 7: it was cut")


def test_an_export_with_a_record_more_than_its_header_says_is_refused(store: EventStore) -> None:
    lines = _export(_source())
    _refused(store, _with_header(lines, records=6), r"holds 7 records, .* added to it by hand")


def test_a_complete_export_and_an_incremental_one_import(store: EventStore) -> None:
    source = _source()
    lines = _export(source)
    assert json.loads(lines[0])["records"] == 7
    assert import_jsonl(store, lines, check=check_window_record).records == 7
    MessageWindowChatMemory(id="second", max_messages=3, store=source).add(UserMessage("more"))
    more = _export(source, memory_id="second", after=4)
    assert json.loads(more[0])["records"] == 1
    assert import_jsonl(store, more, check=check_window_record).records == 1
    # Nothing after --after: the header announces none, and the file imports nothing.
    none = _export(source, memory_id="second", after=5)
    assert json.loads(none[0])["records"] == 0
    assert import_jsonl(store, none, check=check_window_record).records == 0
    assert store.verify().ok


def test_a_purged_memory_is_counted_from_its_tombstone(store: EventStore) -> None:
    source = _source()
    source.purge("first", expected_seq=3, reason="retention")
    lines = _export(source)
    assert json.loads(lines[0])["records"] == len(lines) - 1
    report = import_jsonl(store, lines, check=check_window_record, skip_purged=True)
    assert report.skipped == ("first",) and report.records == 4
    one = _export(source, memory_id="first", after=1)
    assert json.loads(one[0])["records"] == len(one) - 1 == 1


def test_an_export_written_before_the_header_counted_still_imports(store: EventStore) -> None:
    lines = _export(_source())
    header = json.loads(lines[0])
    del header["records"]
    assert import_jsonl(store, [json.dumps(header) + "\n", *lines[1:-1]]).records == 6


@pytest.mark.parametrize("records", ["7", True, -1, 7.0, None])
def test_a_malformed_count_in_the_header_is_refused(store: EventStore, records: object) -> None:
    lines = _export(_source())
    _refused(store, _with_header(lines, records=records), r"header's \"records\" must be")


def test_the_header_of_a_ledger_of_many_memories_stays_a_line_import_reads() -> None:
    # Before, the header listed every memory key: a ledger of some 200,000 UUID-keyed memories
    # exported a first line over the import's 8 MiB bound, and its own export was refused
    # ("line 1 is longer than ..."; the command line has no way to raise the bound). Here the
    # same with a bound of 1 MiB (max_line) and 25,000 memories of 40-character keys.
    source = InMemoryEventStore()
    for i in range(25_000):
        source.append(f"{i:040d}", [cleared_record()])
    lines = _export(source)
    target = InMemoryEventStore()
    report = import_jsonl(target, lines, max_line=2**20)
    assert report.records == 25_000
    assert len(target.streams()) == 25_000
    assert len(lines[0]) < 1_000
    assert "memories" not in json.loads(lines[0])
    # A small export still lists them.
    assert json.loads(_export(_source())[0])["memories"] == ["first", "second"]


def test_a_message_holding_a_large_pdf_exports_and_imports(tmp_path: Path) -> None:
    # Append takes a 7 MB PDF (9.3 MB as base64, what a provider accepts); its export was one
    # 9.3 MB line, which the import refused as "longer than 8388608 characters, far beyond
    # any chatledger record" - with no option of the command line to raise the bound.
    source = SQLiteEventStore(tmp_path / "a.db")
    pdf = base64.b64encode(random.Random(7).randbytes(7_000_000)).decode()
    message = UserMessage(contents=[TextContent("summarize"), PdfFileContent(base64_data=pdf)])
    MessageWindowChatMemory(id="doc", max_messages=4, store=source).add(message)
    lines = _export(source)
    assert len(lines[1]) > 9_000_000
    target = SQLiteEventStore(tmp_path / "b.db")
    assert import_jsonl(target, io.StringIO("".join(lines)), check=check_window_record).records == 1
    assert MessageWindowChatMemory(id="doc", max_messages=4, store=target).messages() == [message]
