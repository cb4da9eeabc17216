"""Consistency proofs between two digests, on every backend, checked with no database."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import pytest

from eventlog import ConsistencyProof, InMemoryEventStore, verify_consistency
from eventlog.consistency import evidence_json, prove_consistency, read_evidence
from eventlog.ledger_models import LedgerDigest
from eventlog.merkle import EMPTY_ROOT, MerkleTree
from eventlog.testing.records import batch, user_payload
from tests.eventlog.test_ledger import _delete, _fill, _forge_and_rehash, digest
from tests.eventlog.test_merkle import ref_mth, ref_proof

_T = datetime(2026, 1, 1, tzinfo=UTC)


def _flip(hex_hash: str) -> str:
    return ("0" if hex_hash[0] != "0" else "1") + hex_hash[1:]


def test_a_grown_ledger_proves_it_extends_an_old_digest(backend, store):
    _fill(store)
    old = digest(store)
    store.append("u2", batch("later", "later still"))
    store.append("u4", batch("new memory"))
    new = digest(store)
    proof = store.prove_consistency(old, digest=new)
    # Check the proof names both trees and travels as JSON with the new digest.
    assert (proof.old_size, proof.new_size) == (old.size, new.size) == (8, 11)
    assert (proof.old_root, proof.new_root) == (old.root, new.root)
    carried_new, carried = read_evidence(evidence_json(new, proof))
    kept = LedgerDigest.from_json(old.to_json())
    backend.cleanup()  # no database from here on
    assert carried == proof and carried_new == new
    assert verify_consistency(kept, carried_new, carried)


def test_without_a_digest_the_proof_is_to_the_log_now(store):
    _fill(store)
    old = digest(store)
    store.append("u1", batch("more"))
    proof = prove_consistency(store, old)
    new = digest(store)
    assert (proof.new_size, proof.new_root) == (new.size, new.root)
    assert verify_consistency(old, new, proof)


def test_trivial_cases_need_no_hashes(store):
    empty = digest(store)
    _fill(store)
    now = digest(store)
    # Check from the empty log, and from a digest to itself: an empty proof, still checked.
    for old in (empty, now):
        proof = store.prove_consistency(old)
        assert proof.hashes == ()
        assert verify_consistency(old, now, proof)
    assert empty.root == EMPTY_ROOT


def test_altered_proofs_and_wrong_sizes_are_rejected():
    store = InMemoryEventStore()
    for i in range(37):
        store.append(f"m{i % 5}", batch(f"message {i}"))
    old = digest(store)
    for i in range(29):
        store.append(f"m{i % 3}", batch(f"later {i}"))
    new = digest(store)
    proof = store.prove_consistency(old, digest=new)
    assert verify_consistency(old, new, proof)
    hashes = list(proof.hashes)
    forged = [
        proof.model_copy(update={"hashes": (_flip(hashes[0]), *hashes[1:])}),
        proof.model_copy(update={"hashes": tuple(hashes[:-1])}),
        proof.model_copy(update={"hashes": (*hashes, hashes[0])}),
        proof.model_copy(update={"hashes": tuple(reversed(hashes))}),
        proof.model_copy(update={"old_size": old.size - 1}),
        proof.model_copy(update={"new_size": new.size + 1}),
        proof.model_copy(update={"old_root": _flip(old.root)}),
        proof.model_copy(update={"new_root": _flip(new.root)}),
    ]
    for bad in forged:
        assert not verify_consistency(old, new, bad)
    # Check digests that do not match the proof are rejected, even when internally sound.
    assert not verify_consistency(old.model_copy(update={"size": old.size - 1}), new, proof)
    assert not verify_consistency(old, new.model_copy(update={"size": new.size - 1}), proof)
    assert not verify_consistency(old, new.model_copy(update={"root": _flip(new.root)}), proof)
    assert not verify_consistency(old, new.model_copy(update={"last_position": 1}), proof)
    # Check the sizes cannot be moved together: the proof of (37, 66) is not one of (36, 65).
    shifted_old = old.model_copy(update={"size": 36})
    shifted_new = new.model_copy(update={"size": 65})
    shifted = proof.model_copy(update={"old_size": 36, "new_size": 65})
    assert not verify_consistency(shifted_old, shifted_new, shifted)
    # Check a verifier never raises, whatever it is given.
    assert not verify_consistency(old, new, "not a proof")  # type: ignore[arg-type]
    assert not verify_consistency(None, new, proof)  # type: ignore[arg-type]


def test_the_proof_is_the_rfc_proof_and_verifies_by_an_independent_recursion():
    # An independent check of RFC 9162 2.1.4: from the proof alone, rebuild both roots with
    # the recursion over (m, n) instead of the iterative verifier.
    leaves = [hashlib.sha256(f"leaf {i}".encode()).digest() for i in range(70)]
    tree = MerkleTree.from_leaves(leaves)
    for n in range(1, 71):
        for m in range(1, n):
            proof = tree.consistency_proof(m, n)
            assert proof == [h.hex() for h in ref_proof(m, leaves[:n])]
            old_root, new_root = _roots_from_proof(m, n, ref_mth(leaves[:m]), proof)
            assert (old_root.hex(), new_root.hex()) == (tree.root(m), tree.root(n))


def _roots_from_proof(m: int, n: int, old_root: bytes, proof: list[str]) -> tuple[bytes, bytes]:
    """SUBPROOF(m, D[0:n], True) read backwards: consume the proof from its end."""
    nodes = [bytes.fromhex(h) for h in proof]

    def node(a: bytes, b: bytes) -> bytes:
        return hashlib.sha256(b"\x01" + a + b).digest()

    def walk(m: int, n: int, whole: bool) -> tuple[bytes, bytes]:
        # Returns (MTH of the first m leaves of this range, MTH of the range).
        if m == n:
            if whole:
                return old_root, old_root
            own = nodes.pop(0)
            return own, own
        k = 1
        while k * 2 < n:
            k *= 2
        right = nodes.pop()
        if m <= k:
            old, left = walk(m, k, whole)
            return old, node(left, right)
        old, sub = walk(m - k, n - k, False)
        return node(right, old), node(right, sub)

    result = walk(m, n, True)
    assert not nodes
    return result


def _same_leaf_store(n: int) -> tuple[MerkleTree, bytes]:
    """A real tree of n identical leaves in O(log n) memory: every node of a level is equal."""
    level = [hashlib.sha256(b"\x00" + b"x" * 32).digest()]
    for _ in range(n.bit_length()):
        level.append(hashlib.sha256(b"\x01" + level[-1] + level[-1]).digest())

    class Store:
        def get(self, lv: int, index: int) -> bytes | None:
            return level[lv] if index < n >> lv else None

        def put(self, lv: int, index: int, node: bytes) -> None:
            raise NotImplementedError

        def put_many(self, lv: int, start: int, nodes: object) -> None:
            raise NotImplementedError

    return MerkleTree(Store(), size=n), level[0]


def test_a_proof_at_a_million_records_is_small():
    n = 1_000_000
    tree, _ = _same_leaf_store(n)
    new = LedgerDigest(size=n, root=tree.root(), last_position=n, recorded_at=_T)
    longest = 0
    for m in [1, 2, 3, 1000, 2**19, 2**19 + 1, 654_321, 786_433, 999_999, *range(5, n, 99_991)]:
        old = LedgerDigest(size=m, root=tree.root(m), last_position=m, recorded_at=_T)
        hashes = tuple(tree.consistency_proof(m))
        proof = ConsistencyProof(
            old_size=m, old_root=old.root, new_size=n, new_root=new.root, hashes=hashes
        )
        assert verify_consistency(old, new, proof)
        # Check O(log n) hashes and, with the new digest beside it, at most 2 KB of JSON.
        assert len(hashes) <= 2 * (n - 1).bit_length()
        assert len(evidence_json(new, proof).encode()) <= 2048
        longest = max(longest, len(evidence_json(new, proof).encode()))
    assert longest > 1000  # the bound is tight enough to mean something


def test_prove_refuses_a_ledger_behind_or_beside_the_old_digest(backend, store):
    _fill(store)
    old = digest(store)
    elsewhere = InMemoryEventStore()
    elsewhere.append("u9", batch(*"abcdefghij"))
    with pytest.raises(ValueError, match="not an extension of it; pass a digest of this store"):
        prove_consistency(store, old, digest=digest(elsewhere))
    with pytest.raises(ValueError, match="does not extend it"):
        prove_consistency(elsewhere, old)
    # Check a rolled-back ledger (the newest records gone) is named as such.
    _delete(backend, store, "u3", 1)
    auditor = backend.open()
    with pytest.raises(ValueError, match=r"holds 7 records, behind the digest: rolled back\?"):
        prove_consistency(auditor, old)


@pytest.mark.skip_backend("memory")  # a memory store cannot be reopened without its tree
def test_a_rewritten_history_cannot_be_proven_consistent(backend, store):
    _fill(store)
    old = digest(store)
    _forge_and_rehash(backend, store, "u1", 2, user_payload("rewritten"))
    store.append("u1", batch("after"))
    auditor = backend.open()
    with pytest.raises(ValueError, match="history changed, or another store's digest"):
        auditor.prove_consistency(old)


@pytest.mark.parametrize(
    ("change", "names"),
    [
        ({"old_size": 5, "new_size": 4}, "old_size 5 is above new_size 4"),
        ({"hashes": ["zz"]}, "hashes.0"),
        ({"old_root": "AB" * 32}, "old_root"),
        ({"format": "other"}, "format"),
    ],
)
def test_malformed_proof_json_is_a_clear_value_error(change, names):
    store = InMemoryEventStore()
    _fill(store)
    old = digest(store)
    store.append("u1", batch("more"))
    data = json.loads(store.prove_consistency(old).to_json())
    # Check the JSON carries base64 hashes, as C2SP/CT tools write them.
    assert all(len(h) == 44 for h in data["hashes"]) and len(data["old_root"]) == 44
    data.update(change)
    with pytest.raises(ValueError, match="read a consistency proof from JSON") as info:
        ConsistencyProof.from_json(json.dumps(data))
    assert names in str(info.value)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("not json", "not JSON"),
        ("[]", "exactly the keys digest and proof"),
        ('{"digest": {}}', "exactly the keys digest and proof"),
        ('{"digest": {}, "proof": {}}', "read a ledger digest from JSON"),
    ],
)
def test_malformed_evidence_is_a_clear_value_error(text, names):
    with pytest.raises(ValueError, match=names):
        read_evidence(text)


def test_hex_hashes_are_read_too():
    store = InMemoryEventStore()
    _fill(store)
    old = digest(store)
    store.append("u1", batch("more"))
    proof = store.prove_consistency(old)
    as_hex = {**json.loads(proof.to_json()), "hashes": list(proof.hashes)}
    as_hex["old_root"] = proof.old_root
    assert ConsistencyProof.from_json(json.dumps(as_hex)) == proof


def test_an_empty_store_is_consistent_with_the_empty_digest():
    store = InMemoryEventStore()
    empty = digest(store)
    proof = store.prove_consistency(empty)
    assert proof.hashes == () and verify_consistency(empty, empty, proof)


@pytest.mark.parametrize("hashes", ["!" * 44, 7])
def test_hashes_that_are_not_a_list_of_hashes_are_refused(hashes):
    store = InMemoryEventStore()
    _fill(store)
    data = {**json.loads(store.prove_consistency(digest(store)).to_json()), "hashes": hashes}
    if isinstance(hashes, str):
        data["hashes"] = [hashes]
    with pytest.raises(ValueError, match="read a consistency proof from JSON: hashes"):
        ConsistencyProof.from_json(json.dumps(data))


def test_a_running_process_notices_its_newest_leaf_is_gone(backend, store):
    # The tree this process absorbed ends with a record that is then deleted behind its back
    # (an older copy of the database restored under it): the proof is of what is stored now.
    _fill(store)
    old = digest(store)
    _delete(backend, store, "u3", 1)
    with pytest.raises(ValueError, match=r"holds 7 records, behind the digest: rolled back\?"):
        prove_consistency(store, old)


def test_a_tree_whose_newest_leaf_is_still_stored_is_not_rebuilt(store, monkeypatch):
    from eventlog.ledger_tree import LedgerTree

    _fill(store)
    old = digest(store)
    store.append("u1", batch("e"))
    rebuilds = []
    rebuild = LedgerTree.rebuild

    def counted(self, s):
        rebuilds.append(s)
        rebuild(self, s)

    monkeypatch.setattr(LedgerTree, "rebuild", counted)
    proof = prove_consistency(store, old)
    assert verify_consistency(old, digest(store), proof)
    # Check the tree was extended, not read again from the first record (O(new), not O(n)).
    assert rebuilds == []


def test_a_long_list_of_problems_names_the_first_three():
    with pytest.raises(ValueError, match="read a consistency proof from JSON") as e:
        ConsistencyProof.from_json("{}")
    # Check six missing fields are named three at a time: an error stays one readable line.
    assert str(e.value).count("Field required") == 3
