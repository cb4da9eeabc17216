"""Store contract: hash-chain verification and tamper detection, on every backend."""

from __future__ import annotations

import pytest

from eventlog import ConcurrencyError
from eventlog.hashing import record_hash

from .records import batch, texts, user_payload


def test_intact_chains_verify(store):
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
def test_editing_any_stored_column_breaks_the_chain_there(backend, store, column, value):
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


def test_rewriting_hash_too_breaks_the_next_link(backend, store):
    records = store.append("u1", batch("a", "b", "c"))
    # Check an attacker who also recomputes the edited record's hash is caught by seq 3's link.
    forged = "f" * 64
    backend.tamper(store, "u1", 2, "hash", forged)
    assert backend.open().verify("u1").first_bad_seq("u1") in (2, 3)
    assert records[2].prev_hash != forged


def test_purge_leaves_a_verifiable_tombstone(store):
    store.append("u1", batch("a", "b", "c"))
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
    assert texts(store.read("u2")) == ["keep"]
    # Check the id can live on after the purge and its chain continues from the tombstone.
    store.append("u1", batch("back again"), expected_seq=4)
    assert store.verify("u1").ok
    assert [r.seq for r in store.read("u1")] == [4, 5]


def test_purge_of_empty_stream_is_an_error(store):
    with pytest.raises(ValueError, match="empty"):
        store.purge("nobody", expected_seq=0, reason="x")
