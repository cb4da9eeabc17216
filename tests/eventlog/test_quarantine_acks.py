"""An acknowledgement (``store.quarantine``) excuses the damage it saw, and only that: the
record must still be damaged and its row must still hold the hash acknowledged. An import
brings no acknowledgement for a memory the file does not bring."""

from __future__ import annotations

import io
from typing import Any

import pytest

from eventlog import ChainIntegrityError, InMemoryEventStore, export_jsonl, import_jsonl
from eventlog.models import RecordQuarantined
from eventlog.quarantine import QUARANTINE_STREAM
from eventlog.serialization import encode_event
from eventlog.testing.records import batch, user_payload
from projections.checked import read_checked
from tests.eventlog.test_forger import Db

OTHER_HASH = "ab" * 32


def _conv(backend: Any) -> tuple[Any, Db, dict[int, str]]:
    """``conv`` with six records, reopened, SQL access to it, and its hashes by seq."""
    store = backend.open()
    stored = store.append("conv", batch(*[f"m{i}" for i in range(1, 7)]))
    store.close()
    return backend.open(), Db(backend), {r.seq: r.hash for r in stored}


def _set(db: Db, seq: int, column: str, value: str) -> None:
    db.run(f"UPDATE {{events}} SET {column} = ? WHERE stream_id = 'conv' AND seq = ?", value, seq)


def _seqs(records: Any) -> list[int]:
    return [r.seq for r in records]


@pytest.mark.skip_backend("memory")  # the damage is done with SQL
def test_an_acknowledgement_stops_excusing_a_record_whose_row_was_restored(backend) -> None:
    # Before the fix an acknowledgement excused its seq whatever the row held: restored
    # from a backup, seq 4 stayed hidden behind seq 5's damage.
    store, db, hashes = _conv(backend)
    _set(db, 4, "hash", OTHER_HASH)  # its own check fails, and seq 5 no longer chains to it
    _set(db, 5, "payload", user_payload("damaged"))
    store.quarantine("conv", 4, reason="hash overwritten")
    store.quarantine("conv", 5, reason="disk fault")
    acks = store.quarantined("conv")
    assert set(acks) == {4, 5} and acks[4].found_hash == OTHER_HASH
    assert _seqs(read_checked(store, "conv")) == [1, 2, 3, 6]
    _set(db, 4, "hash", hashes[4])  # restored
    # Check the read path serves seq 4 again, and only seq 5 is acknowledged now.
    assert set(store.quarantined("conv")) == {5}
    assert _seqs(read_checked(store, "conv")) == [1, 2, 3, 4, 6]
    # Check the acknowledgements read before the restore excuse nothing they did not see.
    assert _seqs(store.read_verified_excluding("conv", acks)) == [1, 2, 3, 4, 6]
    # Check damage of another hash at seq 4 is not excused by the old acknowledgement, and a
    # new acknowledgement can be made for it.
    _set(db, 4, "hash", "cd" * 32)
    with pytest.raises(ChainIntegrityError) as caught:
        store.read_verified_excluding("conv", acks)
    assert caught.value.seq == 4
    assert set(store.quarantined("conv")) == {5}
    again = store.quarantine("conv", 4, reason="overwritten again")
    assert set(store.quarantined("conv")) == {4, 5}
    assert store.quarantined("conv")[4].found_hash == "cd" * 32
    assert again.seq == 3  # a third acknowledgement, not the first one returned
    assert _seqs(read_checked(store, "conv")) == [1, 2, 3, 6]


@pytest.mark.skip_backend("memory")  # the damage is done with SQL
def test_an_acknowledged_record_that_is_intact_again_is_served(backend) -> None:
    # Damage that left the hash column alone: the acknowledged hash is the record's own, so
    # only "is it still damaged" tells a restored record from a damaged one.
    store, db, _ = _conv(backend)
    (original,) = [r["payload"] for r in db.rows("conv") if r["seq"] == 4]
    for seq in (4, 5):
        _set(db, seq, "payload", user_payload("damaged"))
        store.quarantine("conv", seq, reason="disk fault")
    assert _seqs(read_checked(store, "conv")) == [1, 2, 3, 6]
    _set(db, 4, "payload", original)
    assert set(store.quarantined("conv")) == {5}
    assert _seqs(read_checked(store, "conv")) == [1, 2, 3, 4, 6]


def _ack(memory: str, seq: int, found_hash: str) -> Any:
    store = InMemoryEventStore()
    event = RecordQuarantined(
        memory=memory,
        seq=seq,
        found="made up",
        found_hash=found_hash,
        quarantined_at=store._now(),
        reason="made up",
    )
    return encode_event(event)


def _export(store: Any) -> list[str]:
    out = io.StringIO()
    export_jsonl(store, out, include_system=True)
    return out.getvalue().splitlines()


def test_an_import_brings_no_acknowledgement_for_a_memory_the_file_does_not_bring() -> None:
    # Before the fix the acknowledgement was imported, naming the target's own memory.
    target = InMemoryEventStore()
    (victim,) = target.append("victim", batch("consent withdrawn"))
    source = InMemoryEventStore()
    source.append(QUARANTINE_STREAM, [_ack("victim", 1, victim.hash)])
    source.append("other", batch("hello"))
    with pytest.raises(
        ValueError, match=r"acknowledges damage to 'victim' seq 1.*--include-system"
    ):
        import_jsonl(target, _export(source))
    # Check nothing was written: neither the acknowledgement nor the other memory.
    assert target.read(QUARANTINE_STREAM) == [] and target.read("other") == []
    # Check one for a memory the file brings is imported with it (it excuses nothing while
    # the record is intact).
    source = InMemoryEventStore()
    (record,) = source.append("kept", batch("hello"))
    source.append(QUARANTINE_STREAM, [_ack("kept", 1, record.hash)])
    import_jsonl(target, _export(source))
    assert len(target.read(QUARANTINE_STREAM)) == 1
    assert target.quarantined("kept") == {}
    assert [r.seq for r in read_checked(target, "kept")] == [1]
