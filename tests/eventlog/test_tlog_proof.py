"""C2SP tlog-proof bundles: written for a record against a signed checkpoint, checked offline
(by chatledger and by an RFC 6962 verifier written here), edits and wrong keys rejected."""

from __future__ import annotations

import base64
import dataclasses
import hashlib

import pytest

from eventlog import InMemoryEventStore
from eventlog.note import generate_key
from eventlog.testing.records import batch
from eventlog.tlog_proof import TLOG_PROOF_HEADER, parse_tlog_proof, tlog_proof, verify_tlog_proof

ORIGIN = "example.com/chatledger/test"


def _ledger():
    store = InMemoryEventStore()
    store.append("u1", batch("a", "b"))
    store.append("u2", batch("x", "y", "z"))
    store.append("u1", batch("c"))
    return store


def _rfc6962_root(leaf: bytes, index: int, size: int, path: list[bytes]) -> bytes:
    """RFC 9162 section 2.1.3.2, written from the RFC (not eventlog.merkle)."""
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            raise ValueError
        if fn & 1 or fn == sn:
            r = hashlib.sha256(b"\x01" + p + r).digest()
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = hashlib.sha256(b"\x01" + r + p).digest()
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ValueError
    return r


def test_a_bundle_has_the_c2sp_shape_and_verifies_offline():
    store = _ledger()
    signer, verifier = generate_key("example.com/log")
    note = store.sign_checkpoint(ORIGIN, signer)
    store.append("u3", batch("after the checkpoint"))  # proved against the checkpoint's size
    for memory, seq in [("u1", 1), ("u2", 2), ("u1", 3)]:
        text = tlog_proof(store, memory, seq, note)
        lines = text.split("\n")
        (record,) = store.read(memory, gt=seq - 1, lte=seq)
        assert lines[0] == TLOG_PROOF_HEADER
        assert lines[1] == "extra " + base64.b64encode(bytes.fromhex(record.hash)).decode()
        index = int(lines[2].removeprefix("index "))
        assert text.endswith("\n\n" + note)
        bundle = parse_tlog_proof(text)
        assert bundle.to_text() == text and bundle.index == index
        unterminated = dataclasses.replace(bundle, checkpoint=note.removesuffix("\n"))
        assert unterminated.to_text() == text
        # Check with chatledger, then with the RFC's algorithm on the bundle's lines alone.
        assert verify_tlog_proof(text, verifier, record_hash=record.hash, origin=ORIGIN)
        assert verify_tlog_proof(text.encode(), verifier.to_text())
        path = [base64.b64decode(line) for line in lines[3 : lines.index("")]]
        leaf = hashlib.sha256(b"\x00" + bytes.fromhex(record.hash)).digest()
        size, root = int(note.split("\n")[1]), base64.b64decode(note.split("\n")[2])
        assert _rfc6962_root(leaf, index, size, path) == root


def test_edited_bundles_wrong_keys_and_other_records_are_rejected():
    store = _ledger()
    signer, verifier = generate_key("example.com/log")
    _, stranger = generate_key("example.com/log")
    note = store.sign_checkpoint(ORIGIN, signer)
    text = tlog_proof(store, "u2", 1, note)
    lines = text.split("\n")
    (other,) = store.read("u2", gt=1, lte=2)
    bad_index = "\n".join([*lines[:2], "index 3", *lines[3:]])
    bad_path = "\n".join([*lines[:3], base64.b64encode(b"\x07" * 32).decode(), *lines[4:]])
    edited_note = text.replace(f"\n{ORIGIN}\n6\n", f"\n{ORIGIN}\n7\n")
    assert edited_note != text
    cases = {
        "wrong key": verify_tlog_proof(text, stranger),
        "other origin": verify_tlog_proof(text, verifier, origin="other"),
        "another record": verify_tlog_proof(text, verifier, record_hash=other.hash),
        "index": verify_tlog_proof(bad_index, verifier),
        "path": verify_tlog_proof(bad_path, verifier),
        "checkpoint edited": verify_tlog_proof(edited_note, verifier),
        "no leaf at all": verify_tlog_proof("\n".join([lines[0], *lines[2:]]), verifier),
        "garbage": verify_tlog_proof(b"\xff\xfe", verifier),
    }
    assert not any(cases.values()), cases
    # Check a bundle without the extra line verifies given the record hash.
    plain = "\n".join([lines[0], *lines[2:]])
    (record,) = store.read("u2", lte=1)
    assert verify_tlog_proof(plain, verifier, record_hash=record.hash)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("nope\n\nx", "the first line must be"),
        (f"{TLOG_PROOF_HEADER}\nindex 01\n\n", "no 'index N' line"),
        (f"{TLOG_PROOF_HEADER}\nextra !!\nindex 0\n\n", "extra line '!!' is not canonical"),
        (f"{TLOG_PROOF_HEADER}\nindex 0\nAAAA\n\n", "is not a 32-byte hash"),
        (f"{TLOG_PROOF_HEADER}\nextra \nindex 0\n\n", "extra line '' is not canonical base64"),
        # A long line is named by its first 50 characters.
        (f"{TLOG_PROOF_HEADER}\nextra {'!' * 60}\nindex 0\n\n", "extra line '!{50}' is not"),
        (f"{TLOG_PROOF_HEADER}\nindex 0\n{'A' * 64}\n\n", "proof line 'A{50}' is not a 32-byte"),
        (f"{TLOG_PROOF_HEADER}\nindex 0\n\norigin\n1\n", "no blank line before its signatures"),
    ],
)
def test_malformed_bundles_are_named(text, match):
    with pytest.raises(ValueError, match=match):
        parse_tlog_proof(text)


def test_a_checkpoint_of_another_ledger_or_before_the_record_is_refused():
    store = _ledger()
    signer, _ = generate_key("example.com/log")
    note = store.sign_checkpoint(ORIGIN, signer)
    other = InMemoryEventStore()
    other.append("u1", batch("different"))
    with pytest.raises(ValueError, match="is not an extension"):
        tlog_proof(other, "u1", 1, note)
    store.append("u9", batch("later"))
    with pytest.raises(ValueError, match="appended after the digest"):
        tlog_proof(store, "u9", 1, note)
