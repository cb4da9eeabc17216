"""Ledger digests and inclusion proofs, on every backend: tampering, growth, purges, JSON."""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from eventlog import ChainIntegrityError, InMemoryEventStore, ledger
from eventlog.hashing import commit, record_hash
from eventlog.ids import StreamKey
from eventlog.ledger import verify_inclusion
from eventlog.ledger_models import DigestReport, InclusionProof, LedgerDigest
from eventlog.merkle import EMPTY_ROOT, MerkleTree
from eventlog.store import EventStore
from eventlog.testing.records import batch, settled, user_payload
from tests.conftest import PG_DSN


# On PostgreSQL the tree reads the global order, which holds back records above the oldest
# transaction running anywhere on the server (another test run's too): these wait for it to
# show every record committed so far, so such a transaction delays a test instead of failing
# it. ledger.prove itself where a test holds a transaction open on purpose.
def digest(store: EventStore) -> LedgerDigest:
    return ledger.digest(settled(store))


def prove(store: EventStore, *args: Any, **kwargs: Any) -> InclusionProof:
    return ledger.prove(settled(store), *args, **kwargs)


def verify_digest(store: EventStore, d: LedgerDigest) -> DigestReport:
    return ledger.verify_digest(settled(store), d)


def _fill(store):
    """Three memories whose records interleave in the global order."""
    store.append("u1", batch("a", "b"))
    store.append("u2", batch("x", "y", "z"))
    store.append("u1", batch("c", "d"))
    store.append("u3", batch("solo"))


def _delete(backend, store, stream_id, *seqs):
    """Delete stored records behind the store's back."""
    if backend.name == "memory":
        stream = store._streams[stream_id]
        for victim in [r for r in stream if r.seq in seqs]:
            stream.remove(victim)
            store._all.remove(victim)
        if not stream:
            del store._streams[stream_id]
    elif backend.name == "sqlite":
        with sqlite3.connect(backend.path) as conn:
            conn.executemany(
                "DELETE FROM events WHERE stream_id = ? AND seq = ?",
                [(stream_id, seq) for seq in seqs],
            )
    else:
        import psycopg
        from psycopg import sql

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            for seq in seqs:
                conn.execute(
                    sql.SQL("DELETE FROM {}.events WHERE stream_id = %s AND seq = %s").format(
                        sql.Identifier(backend.schema)
                    ),
                    (stream_id, seq),
                )


def _forge_and_rehash(backend, store, stream_id, seq, payload):
    """Edit one payload and recompute its hash and every later hash of its stream with the
    public hash function: every chain still verifies, only a digest can tell."""
    prev = None
    for record in store.read(StreamKey(stream_id), gt=seq - 1):
        forged = record._replace(payload=payload) if record.seq == seq else record
        if forged.salt:  # the salt is stored beside the payload: the forger recommits
            forged = forged._replace(commitment=commit(bytes.fromhex(forged.salt), forged.payload))
        if prev is not None:
            forged = forged._replace(prev_hash=prev)
        forged = forged._replace(hash=record_hash(forged))
        for column in ("payload", "commitment", "prev_hash", "hash"):
            backend.tamper(store, stream_id, record.seq, column, getattr(forged, column))
        prev = forged.hash
    backend.reseal(store, stream_id)  # an unkeyed head seal is a plain SHA-256 too


def test_digest_of_an_empty_store(store):
    d = digest(store)
    assert (d.size, d.root, d.last_position) == (0, EMPTY_ROOT, 0)
    assert d.recorded_at.tzinfo is UTC
    assert LedgerDigest.from_json(d.to_json()) == d
    report = verify_digest(store, d)
    assert report.ok, report.message
    # Check every later log extends the empty one.
    _fill(store)
    assert verify_digest(store, d).ok


def test_digest_is_the_merkle_root_of_every_record_hash_in_global_order(store):
    _fill(store)
    d = digest(store)
    records = store.read_all()
    assert d.size == len(records) == 8
    assert d.last_position == records[-1].position
    assert d.root == MerkleTree.from_leaves(r.hash for r in records).root()


def test_later_digests_read_only_what_was_committed_since(store, monkeypatch):
    _fill(store)
    first = digest(store)
    calls = []
    read_all = store.read_all

    def spy(*, gt=0, limit=None):
        calls.append(gt)
        return read_all(gt=gt, limit=limit)

    monkeypatch.setattr(store, "read_all", spy)
    store.append("u2", batch("w"))
    settled(store)  # reads through the spy: not the digest's reads
    calls.clear()
    second = ledger.digest(store)
    # Check the second digest asked only for records after the first one's last position.
    assert calls == [first.last_position]
    assert second.size == first.size + 1
    assert second.root == MerkleTree.from_leaves(r.hash for r in read_all()).root()


def test_appending_keeps_an_old_digest_valid(backend, store):
    _fill(store)
    old = digest(store)
    store.append("u1", batch("e"))
    store.append("u4", batch("new memory"))
    for s in (store, backend.open()):
        report = verify_digest(s, old)
        assert report.ok, report.message
        assert report.size == old.size + 2
        assert report.chain is None


def test_an_edited_payload_fails_the_digest_and_the_chain(backend, store):
    _fill(store)
    d = digest(store)
    backend.tamper(store, "u1", 2, "payload", user_payload("I never said that"))
    fresh = verify_digest(backend.open(), d)
    # Check the stored hash no longer matches the content: the digest and the chain both fail.
    assert not fresh.ok
    assert fresh.first_difference == ("u1", 2)
    assert fresh.chain is not None
    assert fresh.chain.first_bad_seq("u1") == 2
    assert "chain of u1 breaks at seq 2" in fresh.message


def test_a_forged_and_rehashed_history_passes_the_chain_but_not_the_digest(backend, store):
    _fill(store)
    d = digest(store)
    _forge_and_rehash(backend, store, "u1", 2, user_payload("I never said that"))
    reopened = backend.open()
    assert reopened.verify().ok
    # Check a fresh process sees the changed root, though no chain says where.
    report = verify_digest(reopened, d)
    assert not report.ok
    assert f"the first {d.size} records hash to root" in report.message
    assert "history was changed" in report.message
    # Check the process that took the digest also names the first changed record.
    located = verify_digest(store, d)
    assert not located.ok
    assert located.first_difference == ("u1", 2)
    assert "u1 seq 2" in located.message


def test_deleting_the_last_records_of_a_memory_fails_the_digest(backend, store):
    _fill(store)
    d = digest(store)
    _delete(backend, store, "u1", 3, 4)
    backend.reseal(store, "u1")  # a forger of an unkeyed ledger moves the seal back too
    reopened = backend.open()
    # Check the chain of u1 still verifies (its tail is simply gone), but the digest does not.
    assert reopened.verify().ok
    report = verify_digest(reopened, d)
    assert not report.ok
    assert report.missing == 2
    assert "2 records are missing" in report.message
    # Check more appends do not hide the hole: the records up to last_position are counted.
    reopened.append("u2", batch("p", "q", "r"))
    later = verify_digest(backend.open(), d)
    assert not later.ok
    assert later.missing == 2
    assert f"2 of the digest's 8 records (positions up to {d.last_position})" in later.message


def test_deleting_a_whole_memory_fails_the_digest(backend, store):
    _fill(store)
    d = digest(store)
    _delete(backend, store, "u2", 1, 2, 3)
    reopened = backend.open()
    # Its head seal, left behind, tells verify() too (deleted with it, only the digest does).
    assert reopened.verify().failures == {
        "u2": (3, "its records are gone, but its head seal says seq 3")
    }
    report = verify_digest(reopened, d)
    assert not report.ok
    assert report.missing == 3
    located = verify_digest(store, d)
    assert "is gone" in located.message


def test_a_record_edited_after_the_digest_fails_too(backend, store):
    _fill(store)
    d = digest(store)
    store.append("u3", batch("later"))
    backend.tamper(store, "u3", 2, "payload", user_payload("edited"))
    report = verify_digest(backend.open(), d)
    # Check the covered prefix is intact, but the log is no clean extension of it.
    assert not report.ok
    assert report.first_difference is None
    assert "chain of u3 breaks at seq 2" in report.message


def test_a_purge_rebuilds_the_cached_tree_and_is_named_by_old_digests(store):
    _fill(store)
    old = digest(store)
    store.purge("u2", expected_seq=3, reason="idle for 90 days")
    # Check the cached tree dropped the erased records: the new digest verifies.
    new = digest(store)
    assert new.root == MerkleTree.from_leaves(r.hash for r in store.read_all()).root()
    assert verify_digest(store, new).ok
    report = verify_digest(store, old)
    assert not report.ok
    assert report.missing == 3
    assert "retention purges since the digest erased records of u2" in report.message


# ---------------------------------------------------------------- proofs


def test_every_record_proves_against_a_digest_with_no_store(backend, store):
    _fill(store)
    d = digest(store)
    store.append("u1", batch("after the digest"))
    records = [r for r in store.read_all() if r.position <= d.last_position]
    proofs = [prove(store, StreamKey(r.stream_id), r.seq, digest=d) for r in records]
    kept = LedgerDigest.from_json(d.to_json())
    backend.cleanup()
    # Check each proof travels as JSON and verifies with the digest alone.
    for rank, proof in enumerate(proofs):
        carried = InclusionProof.from_json(proof.to_json())
        assert carried == proof
        assert (carried.leaf_index, carried.tree_size) == (rank, d.size)
        assert verify_inclusion(carried, kept)


def test_a_proof_without_a_digest_is_against_the_log_now(store):
    _fill(store)
    proof = prove(store, "u2", 3)
    d = digest(store)
    assert (proof.tree_size, proof.root) == (d.size, d.root)
    assert verify_inclusion(proof, d)
    assert proof.record.memory_id == "u2"
    assert proof.record.to_record()._replace(position=0) == proof.record.to_record()
    # Check a proof for another tree size does not verify against this digest.
    store.append("u2", batch("more"))
    assert not verify_inclusion(proof, digest(store))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("stream_id", "u9"),
        ("seq", 3),
        ("kind", "memory_cleared"),
        ("schema_version", 2),
        ("recorded_at", "2020-01-01T00:00:00.000000Z"),
        ("payload", user_payload("I never said that")),
        ("meta", '{"forged":true}'),
        ("prev_hash", "0" * 64),
        ("hash", "a" * 64),
    ],
)
def test_changing_any_carried_field_breaks_the_proof(field, value):
    store = InMemoryEventStore()
    _fill(store)
    d = digest(store)
    proof = prove(store, "u1", 2, digest=d)
    assert verify_inclusion(proof, d)
    data = json.loads(proof.to_json())
    assert data["record"][field] != value
    data["record"][field] = value
    assert not verify_inclusion(InclusionProof.from_json(json.dumps(data)), d)


def test_forged_proofs_and_wrong_digests_do_not_verify():
    store = InMemoryEventStore()
    _fill(store)
    d = digest(store)
    proof = prove(store, "u2", 2, digest=d)
    data = json.loads(proof.to_json())
    path = list(proof.audit_path)
    # Check the path travels as a list of base64 hashes, and hex lists are read too.
    assert isinstance(data["audit_path"], list) and len(data["audit_path"][0]) == 44
    assert InclusionProof.from_json(json.dumps({**data, "audit_path": path})) == proof
    forged_index = {**data, "leaf_index": data["leaf_index"] + 1}
    forged_path = {**data, "audit_path": ["b" * 64, *path[1:]]}
    short_path = {**data, "audit_path": path[:-1]}
    for forged in (forged_index, forged_path, short_path):
        assert not verify_inclusion(InclusionProof.from_json(json.dumps(forged)), d)
    other = d.model_copy(update={"root": "c" * 64})
    assert not verify_inclusion(proof, other)
    # Check a verifier never raises, whatever it is given.
    assert not verify_inclusion("not a proof", d)  # type: ignore[arg-type]
    assert not verify_inclusion(proof, None)  # type: ignore[arg-type]


def test_proof_json_is_small():
    store = InMemoryEventStore()
    for i in range(300):
        store.append(f"m{i % 7}", batch(f"message {i}"))
    proof = prove(store, "m3", 20)
    assert len(proof.audit_path) == 9  # ceil(log2(300))
    # The goal is 2 KB; the record's text dominates (format 2 adds the leaf hash).
    assert len(proof.to_json()) < 1200


@pytest.mark.skip_backend("memory", "sqlite")
def test_a_record_a_transaction_held_open_keeps_out_of_the_tree_is_not_called_tampered(store):
    import psycopg

    store.append("u1", batch("a"))
    with psycopg.connect(PG_DSN) as other:
        other.execute("SELECT pg_current_xact_id()")  # an id: it counts as still running
        store.append("u1", batch("b"))
        # Check the record, whole and chained, is "not in the tree yet", never tampered with.
        with pytest.raises(LookupError, match="not in the ledger tree yet") as caught:
            ledger.prove(store, "u1", 2)
        assert not isinstance(caught.value, ChainIntegrityError)
        other.rollback()
    assert verify_inclusion(prove(store, "u1", 2), digest(store))


def test_prove_refuses_what_it_cannot_prove(backend, store):
    _fill(store)
    d = digest(store)
    with pytest.raises(LookupError, match="prove u1 seq 9: no such record"):
        prove(store, "u1", 9)
    with pytest.raises(LookupError, match="no such record"):
        prove(store, "u1", 0)
    store.append("u1", batch("after"))
    with pytest.raises(ValueError, match="appended after the digest; take a new digest"):
        prove(store, "u1", 5, digest=d)
    elsewhere = InMemoryEventStore()
    elsewhere.append("u1", batch("a", "b", "c", "d", "e", "f", "g", "h"))
    with pytest.raises(ValueError, match="is not an extension of it"):
        prove(store, "u1", 1, digest=digest(elsewhere))
    # Check a record edited behind the store's back is refused, not proved.
    backend.tamper(store, "u2", 1, "payload", user_payload("edited"))
    with pytest.raises(ChainIntegrityError, match="does not match the record's content"):
        prove(store, "u2", 1)
    _forge_and_rehash(backend, store, "u3", 1, user_payload("rehashed"))
    with pytest.raises(ChainIntegrityError, match="changed after the ledger tree absorbed it"):
        prove(store, "u3", 1)


# ---------------------------------------------------------------- JSON input


def _digest_json(**changes):
    data = {
        "format": "chatledger.ledger-digest/1",
        "size": 2,
        "root": "ab" * 32,
        "last_position": 5,
        "recorded_at": "2025-01-02T03:04:05.000006Z",
    }
    data.update(changes)
    return json.dumps({k: v for k, v in data.items() if v is not ...})


def test_digest_json_round_trips_and_normalizes_time():
    d = LedgerDigest.from_json(_digest_json(recorded_at="2025-01-02T05:04:05.000006+02:00"))
    assert d.recorded_at == datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert json.loads(d.to_json())["recorded_at"] == "2025-01-02T03:04:05.000006Z"
    assert LedgerDigest.from_json(d.to_json()) == d


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("not json", "Invalid JSON"),
        ("[1, 2]", "text: Input should be an object"),
        (_digest_json(size=...), "size: Field required"),
        (_digest_json(size="2"), "size: Input should be a valid integer"),
        (_digest_json(size=True), "size: Input should be a valid integer"),
        (_digest_json(size=-1), "size: Input should be greater than or equal to 0"),
        (_digest_json(root="AB" * 32), "root: String should match pattern"),
        (_digest_json(root="ab" * 31), "root: String should match pattern"),
        (_digest_json(root="ab" * 32 + "\n"), "root: String should match pattern"),
        (_digest_json(format="qldb"), "format: Input should be"),
        (_digest_json(extra=1), "extra: Extra inputs are not permitted"),
        (_digest_json(recorded_at="2025-01-02T03:04:05"), "recorded_at: Input should have"),
        (_digest_json(recorded_at="yesterday"), "recorded_at: Input should be a valid"),
        (_digest_json(last_position=1), "last_position 1 is below size 2"),
        (_digest_json(size=0, last_position=0), "size 0 must have the empty root"),
    ],
)
def test_malformed_digest_json_is_a_clear_value_error(text, names):
    with pytest.raises(ValueError, match="read a ledger digest from JSON") as info:
        LedgerDigest.from_json(text)
    assert names in str(info.value)
    assert info.value.__cause__ is None
    assert "pass the text its to_json() produced" in str(info.value)


def test_malformed_proof_json_is_a_clear_value_error():
    store = InMemoryEventStore()
    _fill(store)
    data = json.loads(prove(store, "u1", 1).to_json())
    for bad in (
        {**data, "leaf_index": data["tree_size"]},
        {**data, "audit_path": "ab"},
        {**data, "record": {**data["record"], "seq": 0}},
        {k: v for k, v in data.items() if k != "record"},
    ):
        with pytest.raises(ValueError, match="read an inclusion proof from JSON"):
            InclusionProof.from_json(json.dumps(bad))


def test_digests_taken_while_writers_append_all_verify(backend, store):
    # Check the cached tree stays consistent when digests and proofs race with appends.
    def write(name):
        for i in range(20):
            store.append(name, batch(f"{name} {i}", f"{name} {i}b"))

    writers = [threading.Thread(target=write, args=(f"w{k}",)) for k in range(3)]
    for t in writers:
        t.start()
    taken = [digest(store)]
    while any(t.is_alive() for t in writers):
        taken.append(digest(store))
    for t in writers:
        t.join()
    final = digest(store)
    assert final.size == 120
    auditor = backend.open()
    for d in taken:
        assert verify_digest(auditor, d).ok
    first = store.read("w0", lte=1)[0]
    covering = [d for d in taken if d.last_position >= first.position]
    for d in covering:
        assert verify_inclusion(prove(store, "w0", 1, digest=d), d)


def test_a_long_list_of_json_problems_is_cut_short():
    with pytest.raises(ValueError, match=r"\(and 1 more\)"):
        LedgerDigest.from_json("{}")


def test_a_keyed_record_is_proven_only_with_the_key():
    key = b"k" * 32
    store = InMemoryEventStore(chain_key=key)
    _fill(store)
    d = digest(store)
    proof = prove(store, "u2", 2, digest=d)
    assert proof.record.format == 3
    # Check without the key the content cannot be tied to the hash; with the wrong one neither.
    assert not verify_inclusion(proof, d)
    assert not verify_inclusion(proof, d, chain_key=b"x" * 32)
    assert verify_inclusion(proof, d, chain_key=key)
    assert verify_digest(store, d).ok


def test_a_proof_carries_the_salted_commitment():
    store = InMemoryEventStore()
    _fill(store)
    d = digest(store)
    proof = prove(store, "u1", 1, digest=d)
    assert proof.record.format == 2 and len(proof.record.salt) == 32
    assert verify_inclusion(proof, d)
    # Check a payload swapped under the same commitment does not verify.
    forged = proof.model_copy(
        update={"record": proof.record.model_copy(update={"payload": user_payload("no")})}
    )
    assert not verify_inclusion(forged, d)


def test_the_store_methods_are_the_ledger_functions(store):
    _fill(store)
    d = settled(store).digest()
    assert (d.size, d.root) == (digest(store).size, digest(store).root)  # recorded_at differs
    assert store.verify(digest=d).ok
    proof = store.prove("u1", 2, digest=d)
    assert verify_inclusion(proof, d)
    store.append("u1", batch("e"))
    assert store.verify(digest=d).ok and not store.verify(digest=settled(store).digest()).missing
    with pytest.raises(ValueError, match="leave out the memory id"):
        store.verify("u1", digest=d)
