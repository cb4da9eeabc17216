"""Digest and proof JSON version 2 (base64 hashes, leaf hash), version 1 still read, and
proofs that carry a commitment instead of the content (disclose=False)."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from eventlog import InMemoryEventStore
from eventlog.hashing import commit
from eventlog.ledger import digest, prove, verify_inclusion
from eventlog.ledger_models import InclusionProof, LedgerDigest, ProvenRecord
from eventlog.merkle import leaf_hash
from eventlog.models import Record
from eventlog.testing.records import batch, user_payload
from tests.eventlog.test_ledger import _fill

# Written by chatledger before format 2 (commit 1219ccf): these files must keep verifying.
V1_DIGEST = (
    '{"format":"chatledger.ledger-digest/1","size":8,"root":"c777ce752009a1f55637d0e56ec4621a063'
    '9253000d4db4a3e1973acbcf49e5b","last_position":8,"recorded_at":"2026-11-25T17:27:33.477042Z"}'
)
V1_PROOF = (
    '{"format":"chatledger.inclusion-proof/1","record":{"stream_id":"u2","seq":2,"kind":"message_'
    'added","schema_version":1,"recorded_at":"2026-11-25T17:27:33.476477Z","payload":"{\\"conten'
    'ts\\":[{\\"text\\":\\"y\\",\\"type\\":\\"TEXT\\"}],\\"type\\":\\"USER\\"}","meta":"","prev_h'
    'ash":"8dfcf9b48a4bef15886e46010af98c9cd27b47dd15d47c9cbac4af7f400dfa79","hash":"9c676936797e'
    'ca1c1db93888c5bb2a05ca565799a362f222d56ae598e1f7dcbb","salt":"cf4982b68ac75fa09efa6e3d33709c'
    '63","commitment":"224d91009a376959a8d87225f5709ebf18f5219e271987fb6a25bc2fe6b16aac","format"'
    ':2},"leaf_index":3,"tree_size":8,"root":"c777ce752009a1f55637d0e56ec4621a0639253000d4db4a3e1'
    '973acbcf49e5b","audit_path":"pH2GMiQ3JfaV4jeviR5S813smZNbzg98AVNZUEVNAr+dTGOCqkmMtFyeE2V3OK2'
    '8wz3c+N0zbvWz9ttH7s9Fyemghdux8vmMLJbsmw5t2FLxVhTPSlNihce/rFjrpkwi"}'
)


def test_version_1_files_are_read_upcast_and_verify():
    d = LedgerDigest.from_json(V1_DIGEST)
    proof = InclusionProof.from_json(V1_PROOF)
    assert d.format == "chatledger.ledger-digest/2" and proof.format.endswith("/2")
    assert d.root == "c777ce752009a1f55637d0e56ec4621a0639253000d4db4a3e1973acbcf49e5b"
    assert proof.leaf_hash == leaf_hash(bytes.fromhex(proof.record.hash))
    assert verify_inclusion(proof, d)
    # Check they come back out as version 2 and read back unchanged.
    assert LedgerDigest.from_json(d.to_json()) == d
    assert InclusionProof.from_json(proof.to_json()) == proof
    assert json.loads(d.to_json())["format"] == "chatledger.ledger-digest/2"


def test_version_2_json_writes_base64_hashes_and_the_leaf_hash():
    store = InMemoryEventStore()
    _fill(store)
    d = digest(store)
    proof = prove(store, "u1", 2, digest=d)
    data = json.loads(proof.to_json())
    assert data["format"] == "chatledger.inclusion-proof/2"
    assert base64.b64decode(data["root"]).hex() == d.root
    assert json.loads(d.to_json())["root"] == data["root"]
    # Check the leaf hash is RFC 9162's SHA-256(0x00 || record hash bytes), in base64.
    expected = hashlib.sha256(b"\x00" + bytes.fromhex(proof.record.hash)).digest()
    assert base64.b64decode(data["leaf_hash"]) == expected
    assert [base64.b64decode(h).hex() for h in data["audit_path"]] == list(proof.audit_path)


def test_a_leaf_hash_that_is_not_the_records_does_not_verify():
    store = InMemoryEventStore()
    _fill(store)
    d = digest(store)
    data = json.loads(prove(store, "u1", 2, digest=d).to_json())
    data["leaf_hash"] = base64.b64encode(b"\x07" * 32).decode()
    assert not verify_inclusion(InclusionProof.from_json(json.dumps(data)), d)


def test_malformed_base64_hashes_are_clear_value_errors():
    data = json.loads(V1_DIGEST)
    for bad in ("!" * 44, "AAAA"):
        with pytest.raises(ValueError, match="root: String should match pattern"):
            LedgerDigest.from_json(json.dumps({**data, "root": bad}))


# ---------------------------------------------------------------- disclose=False


def test_a_proof_without_disclosure_carries_the_commitment_only(backend, store):
    store.append("u1", batch("I agree to the terms.", "Please ship it."))
    store.append("u2", batch("other"))
    d = digest(store)
    open_proof = store.prove("u1", 1, digest=d)
    sealed = store.prove("u1", 1, digest=d, disclose=False)
    # Check it holds no payload and no salt, keeps the commitment, and verifies the same way.
    assert (sealed.record.payload, sealed.record.salt) == ("", "")
    assert sealed.record.commitment == open_proof.record.commitment
    assert sealed.record.hash == open_proof.record.hash
    assert not sealed.record.discloses and open_proof.record.discloses
    carried = InclusionProof.from_json(sealed.to_json())
    assert "agree" not in sealed.to_json()
    assert verify_inclusion(carried, LedgerDigest.from_json(d.to_json()))
    # Check a guessed text cannot be confirmed: without the salt no commitment matches it.
    guess = user_payload("I agree to the terms.")
    assert commit(b"", guess) != carried.record.commitment
    assert hashlib.sha256(guess.encode()).hexdigest() != carried.record.commitment
    # Check putting a guess back in does not verify either (there is no salt to commit it).
    guessed = carried.model_copy(
        update={"record": carried.record.model_copy(update={"payload": guess})}
    )
    assert not verify_inclusion(guessed, d)


def test_a_keyed_proof_without_disclosure_verifies_with_the_key():
    key = b"k" * 32
    store = InMemoryEventStore(chain_key=key)
    _fill(store)
    d = digest(store)
    proof = prove(store, "u2", 3, digest=d, disclose=False)
    assert proof.record.format == 3 and not proof.record.discloses
    assert verify_inclusion(proof, d, chain_key=key)
    assert not verify_inclusion(proof, d)


def test_an_erased_record_proves_with_or_without_disclosure():
    store = InMemoryEventStore()
    _fill(store)
    store.erase("u1", reason="request")
    d = digest(store)
    for disclose in (True, False):
        proof = prove(store, "u1", 1, digest=d, disclose=disclose)
        assert not proof.record.discloses
        assert verify_inclusion(proof, d)


def test_a_format_1_record_cannot_be_proven_without_its_content():
    record = Record(7, "u1", 1, "2026-01-01T00:00:00.000000Z", "message_added", 1, "{}", "",
                    "0" * 64, "a" * 64)  # fmt: skip
    assert ProvenRecord.of(record).discloses
    with pytest.raises(ValueError, match="format 1 record, whose hash covers the payload itself"):
        ProvenRecord.of(record, disclose=False)


@pytest.mark.parametrize(
    ("path", "names"),
    [
        (7, "audit_path"),
        (base64.b64encode(b"\x00" * 31).decode(), "not a whole number of 32-byte hashes"),
        ("!!!!", "neither a list of hex hashes nor base64"),
    ],
)
def test_malformed_version_1_audit_paths_are_clear_value_errors(path, names):
    data = {**json.loads(V1_PROOF), "audit_path": path}
    with pytest.raises(ValueError, match=names):
        InclusionProof.from_json(json.dumps(data))
