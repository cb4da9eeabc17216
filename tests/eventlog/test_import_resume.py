"""Finishing an interrupted import (``import_jsonl(resume=True)``, ``chatledger import --resume``).

An import writes each memory whole (past 5,000 records, in whole chunks), so an interruption
leaves every memory at some seq of the file. Resuming appends the rest, never a record twice,
and refuses a target whose history is not the file's.
"""

from __future__ import annotations

import io
import sqlite3

import pytest

from eventlog import SQLiteEventStore, UserMessage, export_jsonl, import_jsonl
from eventlog.keyring import MemoryKeyring
from projections import MessageWindowChatMemory
from projections.meta import check_window_record


class _Interrupted(Exception):
    """Stands for Ctrl-C arriving after some appends."""


def _export(store: SQLiteEventStore, *, allow_damaged: bool = False) -> str:
    out = io.StringIO()
    export_jsonl(store, out, allow_damaged=allow_damaged)
    return out.getvalue()


def _source(tmp_path, memories: dict[str, int]) -> str:
    with SQLiteEventStore(tmp_path / "source.db") as store:
        for name, count in memories.items():
            memory = MessageWindowChatMemory(name, 10, store)
            memory.add([UserMessage(f"{name} {i}") for i in range(count)])
        return _export(store)


def _rows(store: SQLiteEventStore) -> list[tuple[str, int, str]]:
    return sorted((r.stream_id, r.seq, r.hash) for r in store.read_all())


def _interrupted_import(target: SQLiteEventStore, dump: str, after: int) -> int:
    """Import ``dump`` into ``target``, stopping once ``after`` records were written."""

    def stop(written: int) -> None:
        if written >= after:
            raise _Interrupted

    with pytest.raises(_Interrupted):
        import_jsonl(target, io.StringIO(dump), progress=stop, check=check_window_record)
    return len(target.read_all())


def test_resume_finishes_an_interrupted_import_and_writes_nothing_twice(tmp_path):
    # Three memories; the one of 12,000 records is written in chunks of 5,000.
    dump = _source(tmp_path, {"a": 30, "big": 12_000, "c": 20})
    with SQLiteEventStore(tmp_path / "source.db") as source:
        want = _rows(source)
    with SQLiteEventStore(tmp_path / "target.db") as target:
        written = _interrupted_import(target, dump, after=5_030)
        assert written == 5_030  # "a" whole and the first chunk of "big"; "c" not at all
        # Without resume the rerun is refused, naming the remedy.
        with pytest.raises(ValueError, match=r"already has events 1\.\.30.*--resume"):
            import_jsonl(target, io.StringIO(dump))
        report = import_jsonl(target, io.StringIO(dump), resume=True, check=check_window_record)
        assert report.imported == {"big": (5_001, 12_000), "c": (1, 20)}
        assert report.already == {"a": 30, "big": 5_000}
        assert report.records == 7_020
        assert _rows(target) == want
        assert target.verify().ok
        # A second resume finds everything there and writes nothing.
        again = import_jsonl(target, io.StringIO(dump), resume=True)
        assert (again.records, again.imported) == (0, {})
        assert again.already == {"a": 30, "big": 12_000, "c": 20}
        assert _rows(target) == want
        last = MessageWindowChatMemory("big", 10, target).messages()[-1]
        assert last == UserMessage("big 11999")


def test_resume_refuses_a_target_whose_history_is_not_the_files(tmp_path):
    dump = _source(tmp_path, {"a": 5})
    with SQLiteEventStore(tmp_path / "target.db") as target:
        # The same id, another conversation: same seqs, other hashes.
        MessageWindowChatMemory("a", 10, target).add([UserMessage("other") for _ in range(3)])
        before = _rows(target)
        with pytest.raises(ValueError, match=r"'a' in the target is not this file's history"):
            import_jsonl(target, io.StringIO(dump), resume=True)
        assert _rows(target) == before


def test_resume_takes_a_target_ahead_of_the_file_only_if_it_holds_the_files_records(tmp_path):
    dump = _source(tmp_path, {"a": 5})
    with SQLiteEventStore(tmp_path / "target.db") as target:
        import_jsonl(target, io.StringIO(dump))
        MessageWindowChatMemory("a", 10, target).add(UserMessage("written after the import"))
        report = import_jsonl(target, io.StringIO(dump), resume=True)
        assert (report.records, report.already) == (0, {"a": 5})
        assert len(target.read("a")) == 6
    # The same shape where the target's records differ from the file's: refused.
    with SQLiteEventStore(tmp_path / "other.db") as other:
        MessageWindowChatMemory("a", 10, other).add([UserMessage(f"x{i}") for i in range(8)])
        with pytest.raises(ValueError, match=r"its seq 5 differs from the file's"):
            import_jsonl(other, io.StringIO(dump), resume=True)


def test_resume_continues_from_an_older_copy_with_a_newer_export(tmp_path):
    # The target holds seqs 1..3 of "a" (an import stopped there); the source has moved on
    # since, and its new export still starts with those records: the rest is appended.
    dump = _source(tmp_path, {"a": 3})
    with SQLiteEventStore(tmp_path / "target.db") as target:
        import_jsonl(target, io.StringIO(dump))
    with SQLiteEventStore(tmp_path / "source.db") as source:
        MessageWindowChatMemory("a", 10, source).add([UserMessage("more"), UserMessage("again")])
        newer, want = _export(source), _rows(source)
    with SQLiteEventStore(tmp_path / "target.db") as target:
        report = import_jsonl(target, io.StringIO(newer), resume=True, check=check_window_record)
        assert report.imported == {"a": (4, 5)} and report.already == {"a": 3}
        assert _rows(target) == want


def test_resume_refuses_a_file_whose_held_part_was_changed(tmp_path):
    # A forger edits a record the target already holds and re-hashes the file's chain onward:
    # every link in the file checks, but its record at the target's head no longer has the
    # target's hash, so nothing is appended after a history that is not the target's.
    dump = _source(tmp_path, {"a": 3})
    with SQLiteEventStore(tmp_path / "target.db") as target:
        import_jsonl(target, io.StringIO(dump))  # the target holds seqs 1..3
    with SQLiteEventStore(tmp_path / "source.db") as source:
        MessageWindowChatMemory("a", 10, source).add([UserMessage(f"b {i}") for i in range(3)])
        with sqlite3.connect(tmp_path / "source.db") as conn:
            conn.execute("UPDATE events SET payload = replace(payload, 'a 1', 'a X') WHERE seq = 2")
        forged = _forge_rehash(source)
    assert '"a X"' in forged or "a X" in forged
    with SQLiteEventStore(tmp_path / "target.db") as target:
        before = _rows(target)
        with pytest.raises(ValueError, match=r"not this file's history: its seq 3"):
            import_jsonl(target, io.StringIO(forged), resume=True)
        assert _rows(target) == before


def _forge_rehash(store: SQLiteEventStore) -> str:
    """An export of ``store`` whose records were re-hashed from the first on (an unkeyed
    chain can be recomputed by anyone), so every record and link in it verifies."""
    import json

    from eventlog.hashing import chain_hash_v2, commit

    lines = _export(store, allow_damaged=True).splitlines()  # re-hashed below
    prev = None
    out = [lines[0]]
    for line in lines[1:]:
        record = json.loads(line)
        if prev is not None:
            record["prev_hash"] = prev
        record["commitment"] = commit(bytes.fromhex(record["salt"]), record["payload"])
        record["hash"] = chain_hash_v2(
            record["prev_hash"],
            record["memory"],
            record["seq"],
            record["kind"],
            record["schema_version"],
            record["recorded_at"],
            record["commitment"],
            record["meta"],
        )
        prev = record["hash"]
        out.append(json.dumps(record))
    return "\n".join(out) + "\n"


def test_resume_must_be_a_bool(tmp_path):
    with SQLiteEventStore(tmp_path / "t.db") as target, pytest.raises(TypeError, match="resume"):
        import_jsonl(target, io.StringIO(""), resume="yes")  # type: ignore[arg-type]


def test_resume_does_not_open_records_the_target_holds_and_erased_since(tmp_path):
    # With a keyring, erasing a memory destroys its content key. Erased in the target after
    # the interrupted import, the file's copies of its records no longer open there - but
    # the target holds them (same hashes), nothing of them is written, and the import of the
    # other memories must still finish (before the fix: refused as "malformed").
    ring = MemoryKeyring()
    with SQLiteEventStore(tmp_path / "source.db", keyring=ring) as source:
        for name in ("a", "b"):
            MessageWindowChatMemory(name, 10, source).add([UserMessage(name) for _ in range(3)])
        dump, want = _export(source), _rows(source)
    with SQLiteEventStore(tmp_path / "target.db", keyring=ring) as target:
        assert _interrupted_import(target, dump, after=3) == 3  # "a" whole, "b" not at all
        target.erase("a", reason="asked to")
        report = import_jsonl(target, io.StringIO(dump), resume=True, check=check_window_record)
        assert (report.imported, report.already) == ({"b": (1, 3)}, {"a": 3})
        assert [r for r in _rows(target) if r[0] == "b"] == [r for r in want if r[0] == "b"]
        assert target.verify().ok
        assert MessageWindowChatMemory("b", 10, target).messages() == [UserMessage("b")] * 3


def test_resume_takes_a_memory_the_target_purged_since_as_held(tmp_path):
    # Purged in the target after the interrupted import: its records are gone, but the
    # tombstone chains to the hash of the file's last one. Resume finishes the rest and
    # brings nothing of it back (before the fix: refused, "its seq 3 differs").
    dump = _source(tmp_path, {"a": 3, "b": 2})
    with SQLiteEventStore(tmp_path / "target.db") as target:
        assert _interrupted_import(target, dump, after=3) == 3
        target.purge("a", expected_seq=3, reason="asked to")
        report = import_jsonl(target, io.StringIO(dump), resume=True, check=check_window_record)
        assert (report.imported, report.already) == ({"b": (1, 2)}, {"a": 3})
        assert [r.kind for r in target.read("a")] == ["memory_purged"]
        assert target.verify().ok
    # A tombstone that chains to another history (same texts, other salts) is not the file's.
    (tmp_path / "other").mkdir()
    other = _source(tmp_path / "other", {"a": 3})
    with (
        SQLiteEventStore(tmp_path / "target.db") as target,
        pytest.raises(ValueError, match=r"'a' in the target is not this file's history"),
    ):
        import_jsonl(target, io.StringIO(other), resume=True)


def test_resume_refuses_an_erasure_receipt_over_records_the_target_holds_with_content(tmp_path):
    # The source erased the memory after the target's copy was made: its newer export holds
    # the same hashes (an erasure keeps them), emptied, then the receipt. Appending that
    # receipt claimed the target's records erased while they kept their content in clear,
    # and verify() passed (before the fix: imported). The same for export --after.
    dump = _source(tmp_path, {"a": 3})
    with SQLiteEventStore(tmp_path / "target.db") as target:
        import_jsonl(target, io.StringIO(dump))
    with SQLiteEventStore(tmp_path / "source.db") as source:
        source.erase("a", reason="asked to")
        MessageWindowChatMemory("a", 10, source).add(UserMessage("after"))
        newer = _export(source)
        tail = io.StringIO()
        export_jsonl(source, tail, memory_id="a", after=3)
    with SQLiteEventStore(tmp_path / "target.db") as target:
        before = _rows(target)
        for lines, resume in ((newer, True), (tail.getvalue(), False)):
            with pytest.raises(ValueError, match=r"'a'#4 is an erasure's receipt, but the target"):
                import_jsonl(target, io.StringIO(lines), resume=resume)
        assert _rows(target) == before
