"""Erasure receipts (:mod:`eventlog.receipts`) tried by someone who hands out a receipt file
without holding the secret a part of it relies on: a genuine proof of another record, a receipt
proven with its payload withheld. ``check_receipt`` must say no, and never raise."""

from __future__ import annotations

import json
from typing import Any

import pytest

from eventlog import InMemoryEventStore
from eventlog.ledger import prove
from eventlog.receipts import check_receipt, receipt_bundle
from eventlog.testing.records import batch


def _erased() -> tuple[InMemoryEventStore, Any]:
    store = InMemoryEventStore()
    store.append(("alice", "s1"), batch("secret one", "secret two"))
    store.append(("bob", "s1"), batch("kept"))
    receipt = store.erase(("alice", "s1"), reason="request #7")
    return store, receipt


@pytest.mark.parametrize("disclose", [True, False], ids=["a-message", "a-withheld-receipt"])
def test_a_genuine_proof_of_what_is_no_receipt_does_not_check(disclose: bool) -> None:
    store, receipt = _erased()
    trusted = store.digest()
    doc = json.loads(receipt_bundle(store, receipt))
    # A proof that verifies against the trusted digest: of bob's message, or of the receipt
    # itself with its payload withheld (only the salted commitment: nothing to show).
    memory, seq = (("bob", "s1"), 1) if disclose else (receipt.memory_id, receipt.record.seq)
    proof = prove(store, memory, seq, digest=trusted, disclose=disclose)
    doc["proof"] = json.loads(proof.to_json())
    check = check_receipt(json.dumps(doc), trusted)
    assert not check.ok
    assert "not a receipt" in check.reason


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda d: d.update(version=2), "not a chatledger-erasure-receipt version 1 file"),
        (lambda d: d.update(receipt=["a", "list"]), "not a chatledger-erasure-receipt version 1"),
        (lambda d: d.update(receipt="text"), "not a chatledger-erasure-receipt version 1 file"),
        (lambda d: d.pop("receipt"), "not a chatledger erasure receipt"),
        (lambda d: d.update(digest={"size": "many"}), "not a chatledger erasure receipt"),
    ],
)
def test_a_receipt_file_of_the_wrong_shape_does_not_check_and_never_raises(
    edit: Any, reason: str
) -> None:
    store, receipt = _erased()
    trusted = store.digest()
    doc = json.loads(receipt_bundle(store, receipt))
    edit(doc)
    check = check_receipt(json.dumps(doc).encode(), trusted)
    assert not check.ok
    assert reason in check.reason


def test_a_receipt_file_shows_its_text_as_written() -> None:
    store = InMemoryEventStore()
    store.append("anna", batch("a"))
    receipt = store.erase("anna", reason="Löschantrag nach Art. 17 DSGVO")
    text = receipt_bundle(store, receipt)
    # Read by people as well as by check_receipt: the reason as written, not \u escapes.
    assert "Löschantrag" in text
    assert check_receipt(text, store.digest()).receipt["reason"] == receipt.event.reason
