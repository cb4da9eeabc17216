"""export_jsonl refuses a memory whose chain does not verify, before writing anything: the
import would refuse the file, and a backup found unrestorable only when it is needed is a
backup lost. Real SQLite files, tampered with sqlite3 as an attacker (or a bad disk) would."""

from __future__ import annotations

import io
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from eventlog import DamagedExportError, EventLogError, SQLiteEventStore, UserMessage
from eventlog.errors import ChainIntegrityError
from eventlog.formats.jsonl import export_jsonl, import_jsonl
from eventlog.formats.jsonl_damage import export_damage
from eventlog.ids import StreamKey
from projections import MessageWindowChatMemory
from projections.compaction import compact

KEY = b"k" * 32


def _ledger(path: Path, chain_key: bytes | None = None) -> Path:
    with SQLiteEventStore(path, chain_key=chain_key) as store:
        for memory in ("alpha", "beta"):
            chat = MessageWindowChatMemory(id=memory, max_messages=5, store=store)
            for i in range(3):
                chat.add(UserMessage(f"{memory} says {i}"))
    return path


def _tamper(path: Path, where: str, change: tuple[str, str] = ("says", "said")) -> None:
    with sqlite3.connect(path) as conn:
        changed = conn.execute(
            f"UPDATE events SET payload = replace(payload, ?, ?) WHERE {where}",
            change,
        ).rowcount
    conn.close()
    assert changed == 1


def test_a_damaged_memory_is_refused_before_anything_is_written(tmp_path):
    # Before the fix export_jsonl wrote the tampered record, and import_jsonl refused the file.
    path = _ledger(tmp_path / "ledger.db")
    _tamper(path, "stream_id = 'beta' AND seq = 2")
    with SQLiteEventStore(path) as store:
        out = io.StringIO()
        with pytest.raises(DamagedExportError) as caught:
            export_jsonl(store, out)
        # Check nothing reached out, not even the header.
        assert out.getvalue() == ""
        error = caught.value
        assert (error.stream_id, error.seq) == ("beta", 2)
        assert error.damaged == (("beta", 2, error.reason),)
        assert isinstance(error, ChainIntegrityError) and isinstance(error, EventLogError)
        message = str(error)
        assert message.startswith("export of memory 'beta' refused, nothing was written: ")
        assert "at seq 2 does not verify (" in message
        assert "store.verify() shows the damage" in message
        assert "pass allow_damaged=True" in message
        # Check the memory alone is refused too, and an intact one is exported.
        with pytest.raises(DamagedExportError, match="memory 'beta'"):
            export_jsonl(store, out, memory_id="beta")
        assert out.getvalue() == ""
        assert export_jsonl(store, out, memory_id="alpha") == 3


def test_allow_damaged_exports_the_records_as_stored(tmp_path):
    path = _ledger(tmp_path / "ledger.db")
    _tamper(path, "stream_id = 'alpha' AND seq = 3")
    with SQLiteEventStore(path) as store:
        out = io.StringIO()
        assert export_jsonl(store, out, allow_damaged=True) == 6
    assert "alpha said 2" in out.getvalue()
    # Check the file is what the refusal warned of: one that import refuses.
    with (
        SQLiteEventStore(tmp_path / "copy.db") as copy,
        pytest.raises(ValueError, match="breaks at seq 3"),
    ):
        import_jsonl(copy, out.getvalue().splitlines())


def test_several_damaged_memories_are_all_listed(tmp_path):
    path = _ledger(tmp_path / "ledger.db")
    _tamper(path, "stream_id = 'alpha' AND seq = 1")
    _tamper(path, "stream_id = 'beta' AND seq = 3")
    with SQLiteEventStore(path) as store, pytest.raises(DamagedExportError) as caught:
        export_jsonl(store, io.StringIO())
    assert [(key, seq) for key, seq, _ in caught.value.damaged] == [("alpha", 1), ("beta", 3)]
    assert "1 more memories do not verify either" in str(caught.value)


def test_damage_in_system_streams_counts_only_when_they_are_exported(tmp_path):
    path = _ledger(tmp_path / "ledger.db")
    with SQLiteEventStore(path) as store:
        compact(store, idle_for=timedelta(0))
    _tamper(path, "stream_id = '~sys:compaction'", ('"alpha"', '"gamma"'))
    with SQLiteEventStore(path) as store:
        # Check the file without ~sys: streams holds none of the damage, and imports.
        out = io.StringIO()
        assert export_jsonl(store, out) == 6
        with SQLiteEventStore(tmp_path / "copy.db") as copy:
            assert import_jsonl(copy, out.getvalue().splitlines()).records == 6
        for options in ({"include_system": True}, {"memory_id": StreamKey("~sys:compaction")}):
            refused = io.StringIO()
            with pytest.raises(DamagedExportError, match="memory '~sys:compaction'"):
                export_jsonl(store, refused, **options)
            assert refused.getvalue() == ""


def test_a_keyed_ledger_opened_without_its_key_is_exported_unchecked_not_refused(tmp_path):
    # Without the chain key verify() reports every keyed chain as uncheckable: that is not
    # damage (the CLI exports it too, with a note), and refusing it would make a keyless
    # backup of a keyed ledger impossible.
    path = _ledger(tmp_path / "keyed.db", chain_key=KEY)
    with SQLiteEventStore(path) as keyless:
        damage = export_damage(keyless)
        assert (damage.damaged, damage.unchecked) == ((), ("alpha", "beta"))
        out = io.StringIO()
        assert export_jsonl(keyless, out) == 6
    with SQLiteEventStore(tmp_path / "copy.db", chain_key=KEY) as copy:
        assert import_jsonl(copy, out.getvalue().splitlines()).records == 6
    # Check with the key, damage in a keyed chain is found and refused.
    _tamper(path, "stream_id = 'alpha' AND seq = 2")
    with (
        SQLiteEventStore(path, chain_key=KEY) as keyed,
        pytest.raises(DamagedExportError, match="memory 'alpha'"),
    ):
        export_jsonl(keyed, io.StringIO())


def test_allow_damaged_must_be_a_bool(tmp_path):
    with (
        SQLiteEventStore(_ledger(tmp_path / "ledger.db")) as store,
        pytest.raises(TypeError, match="allow_damaged must be True or False, not 'no'"),
    ):
        export_jsonl(store, io.StringIO(), allow_damaged="no")  # type: ignore[arg-type]
