"""Store contract: hash-chain verification and tamper detection, on every backend."""

from __future__ import annotations

import pytest

import eventlog.ledger_verify
from eventlog import ConcurrencyError
from eventlog.errors import ChainIntegrityError
from eventlog.hashing import RANGE_ROW_FIELDS, commit, record_hash
from eventlog.ids import SYSTEM_PREFIX, StreamKey
from eventlog.models import MemoryPurged, Record
from eventlog.testing.records import batch, texts, user_payload


def _forge(backend, store, stream_id, at, **changes):
    """Edit one stored record with plain SQL and store its recomputed hash too, so the record
    is self-consistent on its own - what an attacker who knows the hash recipe would do."""
    (record,) = store.read(StreamKey(stream_id), gt=at - 1, lte=at)
    if "payload" in changes and record.format != 1:
        # The forger knows the salt too (it sits beside the payload), so it commits anew.
        changes["commitment"] = commit(bytes.fromhex(record.salt), changes["payload"])
    forged = record._replace(**changes)
    forged = forged._replace(hash=record_hash(forged))
    for column, value in changes.items():
        backend.tamper(store, stream_id, at, column, value)
    backend.tamper(store, stream_id, forged.seq, "hash", forged.hash)
    return forged


def _rows(records):
    """Records as read_verified_rows gives them (eventlog.hashing.RANGE_ROW_FIELDS)."""
    return [tuple(getattr(r, f) for f in RANGE_ROW_FIELDS) for r in records]


def _outcome(read):
    """What ``read()`` did: the seqs served, or the refusal's seq and message."""
    try:
        return [r.seq if isinstance(r, Record) else r[0] for r in read()]
    except ChainIntegrityError as e:
        return e.seq, str(e)


def _delete(backend, store, stream_id, seq):
    """Delete one stored record behind the store's back."""
    backend.delete_record(store, stream_id, seq)


class ChainContract:
    """The chain part of the store contract."""

    def test_intact_chains_verify(self, store):
        store.append("u1", batch("a", "b", "c"))
        store.append("u2", batch("x"))
        report = store.verify()
        assert report.ok
        assert report.records == 4
        assert set(report.checked) == {"u1", "u2"}
        assert store.verify("u1").ok
        # Check every stored hash is the recomputation of the stored fields.
        assert all(record_hash(r) == r.hash for r in store.read_all())

    @pytest.mark.parametrize(
        ("column", "value"),
        [
            ("payload", user_payload("I never said that")),
            ("recorded_at", "2020-01-01T00:00:00.000000Z"),
            ("kind", "memory_cleared"),
            ("meta", '{"forged":true}'),
        ],
    )
    def test_editing_any_stored_column_breaks_the_chain_there(self, backend, store, column, value):
        store.append("u1", batch("a", "b", "c", "d"))
        store.append("u2", batch("untouched"))
        # Check an edit made with plain SQL behind the store's back is caught at that seq.
        backend.tamper(store, "u1", 2, column, value)
        fresh = backend.open()  # a new store object: no cache can hide the edit
        report = fresh.verify()
        assert not report.ok
        assert report.first_bad_seq("u1") == 2
        assert report.first_bad_seq("u2") is None
        assert not fresh.verify("u1").ok
        assert fresh.verify("u2").ok

    def test_forged_and_rehashed_record_is_caught_by_the_next_link(self, backend, store):
        store.append("u1", batch("a", "b", "c"))
        forged = _forge(backend, store, "u1", 2, payload=user_payload("I never said that"))
        fresh = backend.open()
        # Check the edit landed and the forged record alone is consistent: its own hash passes.
        (stored,) = fresh.read("u1", gt=1, lte=2)
        assert stored == forged
        assert record_hash(stored) == stored.hash
        # Check seq 3 still names the genuine hash of seq 2, so its link exposes the forgery.
        assert fresh.verify("u1").failures == {
            "u1": (3, "prev_hash does not match the previous record's hash")
        }

    def test_forged_first_record_must_still_chain_to_genesis(self, backend, store):
        store.append("u1", batch("a"))
        _forge(backend, store, "u1", 1, prev_hash="a" * 64)
        # Check a lone first record that claims a predecessor is caught at seq 1.
        assert backend.open().verify("u1").failures == {
            "u1": (1, "prev_hash does not match the previous record's hash")
        }

    def test_deleted_first_record_is_caught(self, backend, store):
        store.append("u1", batch("a", "b", "c"))
        _delete(backend, store, "u1", 1)
        # Check a stream that starts after seq 1 without a purge tombstone is reported.
        assert backend.open().verify("u1").failures == {
            "u1": (2, "records before seq 2 are missing")
        }

    def test_deleted_middle_record_is_caught(self, backend, store):
        store.append("u1", batch("a", "b", "c"))
        _delete(backend, store, "u1", 2)
        assert backend.open().verify("u1").failures == {
            "u1": (3, "seq 2 is missing (found 3 next)")
        }

    def test_renumbered_and_rehashed_record_is_caught_by_the_seq_rule(self, backend, store):
        store.append("u1", batch("a", "b", "c"))
        # seq is hashed, so the forger rehashes; the link to seq 2 still holds, only the gap shows.
        _forge(backend, store, "u1", 3, seq=4)
        assert backend.open().verify("u1").failures == {
            "u1": (4, "seq 3 is missing (found 4 next)")
        }

    def test_a_forged_and_rehashed_last_record_is_caught_by_the_head_seal(self, backend, store):
        store.append("u1", batch("a", "b", "c"))
        _forge(backend, store, "u1", 3, payload=user_payload("I never said that"))
        fresh = backend.open()
        # Nothing follows the last record, so no link contradicts it; the head seal does (the
        # forger did not rewrite the seal too: a keyed ledger's seal is beyond their reach).
        assert fresh.verify("u1").failures == {
            "u1": (3, "the newest record is not the sealed head (seq 3)")
        }
        with pytest.raises(ChainIntegrityError, match="not the sealed head"):
            fresh.read_verified("u1")
        assert texts(fresh.read("u1")) == ["a", "b", "I never said that"]  # raw reads still see it

    def test_read_verified_rows_are_read_verified_s_records_as_rows(self, store):
        store.append("u1", batch("a", "b", "c", "d"))
        store.append("u2", batch("x"))
        # Check every kind of bounds gives read_verified's records, field for field.
        for gt, lte in [(None, None), (1, None), (None, 3), (1, 3), (4, None), (2, 2), (9, None)]:
            want = _rows(store.read_verified("u1", gt=gt, lte=lte))
            assert store.read_verified_rows("u1", gt=gt, lte=lte) == want, (gt, lte)
        assert [row[0] for row in store.read_verified_rows("u1", gt=1, lte=3)] == [2, 3]
        assert store.read_verified_rows("nobody") == []

    @pytest.mark.parametrize(
        "damage",
        [
            "payload",
            "kind",
            "meta",
            "forged-middle",
            "forged-last",
            "deleted-middle",
            "deleted-first",
            "renumbered",
        ],
    )
    def test_read_verified_rows_refuse_what_read_verified_refuses(self, backend, store, damage):
        store.append("u1", batch("a", "b", "c", "d"))
        if damage in ("payload", "kind", "meta"):
            value = {"payload": user_payload("forged"), "kind": "memory_cleared", "meta": "{}"}
            backend.tamper(store, "u1", 2, damage, value[damage])
        elif damage == "forged-middle":  # self-consistent: only the next link exposes it
            _forge(backend, store, "u1", 2, payload=user_payload("I never said that"))
        elif damage == "forged-last":  # only the head seal exposes it
            _forge(backend, store, "u1", 4, payload=user_payload("I never said that"))
        elif damage == "renumbered":
            _forge(backend, store, "u1", 4, seq=5)
        else:
            _delete(backend, store, "u1", 2 if damage == "deleted-middle" else 1)
        fresh = backend.open()
        # Check the rows are refused at the same seq, for the same reason, by every range
        # read_verified refuses (one holding the damage, or whose first record or head it
        # breaks), and served where it serves them (a lone self-consistent forged record).
        refused = 0
        for gt, lte in [(None, None), (1, None), (None, 3), (1, 2), (2, 3)]:
            want = _outcome(lambda gt=gt, lte=lte: fresh.read_verified("u1", gt=gt, lte=lte))
            got = _outcome(lambda gt=gt, lte=lte: fresh.read_verified_rows("u1", gt=gt, lte=lte))
            assert got == want, (damage, gt, lte)
            refused += isinstance(want, tuple)
        assert refused  # the whole history at least

    def test_verify_checks_every_stream_including_chatledger_s_own(self, backend, store):
        store.append("u1", batch("a"))
        store.append(StreamKey(SYSTEM_PREFIX + "runs"), batch("x", "y"))
        backend.tamper(store, SYSTEM_PREFIX + "runs", 1, "payload", user_payload("z"))
        # Check verify() with no memory id also checks ~sys: streams, which streams() hides.
        report = backend.open().verify()
        assert SYSTEM_PREFIX + "runs" in report.checked
        assert report.first_bad_seq(StreamKey(SYSTEM_PREFIX + "runs")) == 1

    def test_verify_reads_past_its_first_page(self, backend, store, monkeypatch):
        monkeypatch.setattr(eventlog.ledger_verify, "_VERIFY_PAGE", 2)
        store.append("u1", batch("a", "b", "c", "d", "e"))
        backend.tamper(store, "u1", 5, "payload", user_payload("forged"))
        # Check verify() pages through the whole stream: the edit sits on its third page.
        report = backend.open().verify("u1")
        assert report.records == 5
        assert report.first_bad_seq("u1") == 5

    def test_purge_leaves_a_verifiable_tombstone(self, store):
        erased = store.append("u1", batch("a", "b", "c"))
        store.append("u2", batch("keep"))
        store.save_snapshot("u1", "window", 3, "{}")
        # Check a purge with a stale head erases nothing.
        with pytest.raises(ConcurrencyError):
            store.purge("u1", expected_seq=2, reason="test")
        assert len(store.read("u1")) == 3
        tomb = store.purge("u1", expected_seq=3, reason="idle for 90 days")
        # Check only the tombstone remains, chained to the last erased hash, and verify passes.
        remaining = store.read("u1")
        assert remaining == [tomb]
        assert (tomb.seq, tomb.kind) == (4, "memory_purged")
        assert store.load_snapshot("u1", "window") is None
        assert store.verify().ok
        # Check the tombstone lists what it erased, for a witness to put back (witness_purges).
        event = MemoryPurged.model_validate_json(tomb.payload)
        assert event.leaves == tuple((r.position, r.hash) for r in erased)
        assert event.event_count == 3
        assert texts(store.read("u2")) == ["keep"]
        # Check the id can live on after the purge and its chain continues from the tombstone.
        store.append("u1", batch("back again"), expected_seq=4)
        assert store.verify("u1").ok
        assert [r.seq for r in store.read("u1")] == [4, 5]

    def test_purge_of_empty_stream_is_an_error(self, store):
        with pytest.raises(ValueError, match="empty"):
            store.purge("nobody", expected_seq=0, reason="x")
