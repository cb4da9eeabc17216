"""JSON Lines export/import of record formats 1, 2 and 3."""

from __future__ import annotations

import io
import json

import pytest

from eventlog import InMemoryEventStore, SQLiteEventStore
from eventlog.formats.jsonl import export_jsonl, import_jsonl
from eventlog.testing.records import added, batch, user_payload

KEY = b"k" * 32


def _export(store) -> list[str]:
    out = io.StringIO()
    export_jsonl(store, out)
    return out.getvalue().splitlines()


def _edit(lines, seq, **changes):
    edited = list(lines)
    for i, line in enumerate(edited[1:], 1):
        obj = json.loads(line)
        if obj["seq"] == seq:
            obj.update(changes)
            edited[i] = json.dumps(obj)
    return edited


def _mixed():
    store = InMemoryEventStore()
    store.append("u1", [added("old")._replace(format=1)])
    store.append("u1", batch("new", "newer"))
    return store


def test_export_writes_the_format_fields_and_import_reproduces_every_record(tmp_path):
    store = _mixed()
    lines = _export(store)
    first, second = json.loads(lines[1]), json.loads(lines[2])
    assert (first["format"], first["salt"], first["commitment"]) == (1, "", "")
    assert second["format"] == 2
    assert len(second["salt"]) == 32
    with SQLiteEventStore(tmp_path / "copy.db") as copy:
        import_jsonl(copy, lines)
        # Check every field survives, salts and commitments included, and the copy verifies.
        assert [r[1:] for r in copy.read("u1")] == [r[1:] for r in store.read("u1")]
        assert copy.verify().ok


def test_lines_written_before_format_2_import_as_format_1(tmp_path):
    store = InMemoryEventStore()
    store.append("u1", [added(t)._replace(format=1) for t in ("a", "b")])
    old_lines = [lines for lines in _export(store)]
    for i, line in enumerate(old_lines[1:], 1):
        obj = json.loads(line)
        for name in ("salt", "commitment", "format"):
            del obj[name]
        old_lines[i] = json.dumps(obj)
    with SQLiteEventStore(tmp_path / "copy.db") as copy:
        import_jsonl(copy, old_lines)
        assert [r.format for r in copy.read("u1")] == [1, 1]
        assert [r.hash for r in copy.read("u1")] == [r.hash for r in store.read("u1")]
        assert copy.verify().ok


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"payload": user_payload("forged")}, "breaks at seq 2: the stored hash"),
        ({"salt": "ab" * 16}, "breaks at seq 2: the stored hash"),
        ({"commitment": "ab" * 32}, "breaks at seq 2: the stored hash"),
        ({"salt": ""}, "breaks at seq 2: salt missing"),
        ({"format": 1}, "breaks at seq 2: the stored hash"),
        ({"format": 4}, "format must be 1, 2 or 3"),
        ({"format": True}, "format must be 1, 2 or 3"),
        ({"salt": 7}, "salt must be a string"),
    ],
)
def test_import_recomputes_commitments_and_hashes_before_writing(tmp_path, changes, message):
    lines = _edit(_export(_mixed()), 2, **changes)
    with SQLiteEventStore(tmp_path / "copy.db") as copy:
        with pytest.raises(ValueError, match=message):
            import_jsonl(copy, lines)
        assert copy.streams() == []


def test_keyed_exports_import_only_with_the_same_key(tmp_path):
    keyed = InMemoryEventStore(chain_key=KEY)
    keyed.append("u1", batch("a", "b"))
    lines = _export(keyed)
    # Check without the key, or with another, the file is refused; with it, it verifies.
    with (
        SQLiteEventStore(tmp_path / "plain.db") as plain,
        pytest.raises(ValueError, match="keyed chain: open the store with chain_key="),
    ):
        import_jsonl(plain, lines)
    with (
        SQLiteEventStore(tmp_path / "other.db", chain_key=b"o" * 32) as other,
        pytest.raises(ValueError, match="breaks at seq 1: the stored hash"),
    ):
        import_jsonl(other, lines)
    with SQLiteEventStore(tmp_path / "same.db", chain_key=KEY) as same:
        import_jsonl(same, lines)
        assert [r[1:] for r in same.read("u1")] == [r[1:] for r in keyed.read("u1")]
        assert same.verify().ok
    # Check an unkeyed export cannot be imported into a keyed store (it would be unguarded).
    with (
        SQLiteEventStore(tmp_path / "keyed.db", chain_key=KEY) as target,
        pytest.raises(ValueError, match=r"unkeyed record \(format 1\) in a keyed store"),
    ):
        import_jsonl(target, _export(_mixed()))


def test_every_exported_record_carries_its_global_position():
    store = InMemoryEventStore()
    store.append("u1", batch("a"))
    store.append("u2", batch("b", "c"))
    store.append("u1", batch("d"))
    lines = [json.loads(line) for line in _export(store)[1:]]
    # Check the positions are the store's, so sorting by them gives the global order.
    by_key = {(r.stream_id, r.seq): r.position for r in store.read_all()}
    assert {(o["memory"], o["seq"]): o["position"] for o in lines} == by_key
    ordered = sorted(lines, key=lambda o: o["position"])
    assert [o["hash"] for o in ordered] == [r.hash for r in store.read_all()]
    # Check an export from before positions still imports, and a bad position is refused.
    text = _export(store)
    old = [
        text[0],
        *(
            json.dumps({k: v for k, v in json.loads(t).items() if k != "position"})
            for t in text[1:]
        ),
    ]
    report = import_jsonl(InMemoryEventStore(), io.StringIO("\n".join(old) + "\n"))
    assert report.records == 4
    bad = _edit(text, 1, position=0)
    with pytest.raises(ValueError, match="position must be an integer >= 1, not 0"):
        import_jsonl(InMemoryEventStore(), io.StringIO("\n".join(bad) + "\n"))


# -- found by the mutation run ------------------------------------------------------------


def test_export_reads_every_page_and_counts_what_it_wrote(monkeypatch):
    import eventlog.formats.jsonl

    monkeypatch.setattr(eventlog.formats.jsonl, "_PAGE", 2)
    store = InMemoryEventStore()
    store.append("u1", batch("a", "b", "c", "d", "e"))
    store.append("u2", batch("x", "y"))  # exactly one full page
    out, seen = io.StringIO(), list[int]()
    assert export_jsonl(store, out, progress=seen.append) == 7
    lines = out.getvalue().splitlines()
    assert [(json.loads(x)["memory"], json.loads(x)["seq"]) for x in lines[1:]] == [
        *(("u1", seq) for seq in range(1, 6)),
        ("u2", 1),
        ("u2", 2),
    ]
    assert seen == [2, 4, 5, 7]


def test_a_header_of_another_format_is_refused_whatever_its_version():
    lines = _export(_mixed())
    header = json.dumps({**json.loads(lines[0]), "format": "other-jsonl"})
    for first in (header, "[]", "null"):
        with pytest.raises(ValueError, match="not a chatledger export"):
            import_jsonl(InMemoryEventStore(), [first, *lines[1:]])


def test_a_forged_first_record_not_chained_to_genesis_is_refused():
    from eventlog.hashing import record_hash
    from eventlog.models import Record

    lines = _export(_mixed())
    obj = json.loads(lines[1])
    obj["prev_hash"] = "ab" * 32
    fields = {k: obj[k] for k in ("kind", "schema_version", "payload", "meta", "prev_hash")}
    record = Record(
        position=0,
        stream_id=obj["memory"],
        seq=obj["seq"],
        recorded_at_text=obj["recorded_at"],
        hash="",
        salt=obj["salt"],
        commitment=obj["commitment"],
        format=obj["format"],
        **fields,
    )
    obj["hash"] = record_hash(record)  # the hash agrees: only the link is forged
    with pytest.raises(ValueError, match="breaks at seq 1: prev_hash is not genesis"):
        import_jsonl(InMemoryEventStore(), [lines[0], json.dumps(obj)])


def test_a_memory_purged_after_one_record_is_refused_or_skipped_by_name():
    store = InMemoryEventStore()
    store.append("u1", batch("a"))
    store.purge("u1", expected_seq=1, reason="retention")
    store.append("u2", batch("x"))
    lines = _export(store)
    assert [json.loads(x)["seq"] for x in lines[1:] if json.loads(x)["memory"] == "u1"] == [2]
    with pytest.raises(ValueError, match="starts with a memory_purged tombstone at seq 2"):
        import_jsonl(InMemoryEventStore(), lines)
    copy = InMemoryEventStore()
    report = import_jsonl(copy, lines, skip_purged=True)
    assert (report.skipped, report.records) == (("u1",), 1)


def test_an_incremental_file_from_a_fork_is_refused_though_it_continues_the_seqs():
    target, fork = InMemoryEventStore(), InMemoryEventStore()
    target.append("u1", batch("a", "b"))
    fork.append("u1", batch("a", "B", "c"))  # same seqs, another history
    out = io.StringIO()
    export_jsonl(fork, out, memory_id="u1", after=2)
    with pytest.raises(ValueError, match="import never overwrites"):
        import_jsonl(target, out.getvalue().splitlines())
    assert len(target.read("u1")) == 2


def test_a_memory_longer_than_a_write_chunk_is_written_in_chunks_of_that_size(monkeypatch):
    import eventlog.formats.jsonl

    store = InMemoryEventStore()
    store.append("u1", batch("a", "b", "c", "d", "e"))
    lines = _export(store)
    monkeypatch.setattr(eventlog.formats.jsonl, "_WRITE_CHUNK", 2)
    written = list[int]()
    report = import_jsonl(InMemoryEventStore(), lines, progress=written.append)
    assert (report.records, written[-3:]) == (5, [2, 4, 5])
    assert report.imported == {"u1": (1, 5)}
