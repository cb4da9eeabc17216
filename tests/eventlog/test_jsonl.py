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
