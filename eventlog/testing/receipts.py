"""Store contract: erasure receipts have ids, are found by them, and check offline."""

from __future__ import annotations

import json

import pytest

from eventlog.ledger_models import LedgerDigest
from eventlog.receipts import check_receipt, find_receipt, receipt_bundle
from eventlog.testing._base import reopens
from eventlog.testing.records import batch, settled

KEY = b"k" * 32


def _erased(store):
    store.append(("alice", "s1"), batch("secret one", "secret two"))
    store.append(("bob", "s1"), batch("kept"))
    receipt = store.erase(("alice", "s1"), reason="request #7")
    store.append(("bob", "s1"), batch("later"))
    return receipt


class ReceiptsContract:
    """The receipts part of the store contract."""

    def test_a_receipt_is_found_by_its_id_in_a_new_store_object(self, store, reopen):
        receipt = _erased(store)
        position, _, digest = receipt.id.partition("-")
        assert (int(position), digest) == (receipt.record.position, receipt.record.hash)
        found = find_receipt(reopen(), receipt.id)
        assert (found.id, found.memory_id, found.event) == (
            receipt.id,
            ("alice", "s1"),
            receipt.event,
        )

    @pytest.mark.parametrize("bad", ["", "12", "x-" + "a" * 64, "1-" + "A" * 64, "1-abc"])
    def test_a_malformed_receipt_id_is_refused_with_where_to_find_one(self, store, bad):
        with pytest.raises(ValueError, match=r"<position>-<64 hex digits>.*erase output"):
            find_receipt(store, bad)

    def test_an_id_of_another_record_or_ledger_is_not_a_receipt(self, store):
        receipt = _erased(store)
        first = store.read(("bob", "s1"))[0]
        with pytest.raises(LookupError, match="no such receipt"):
            find_receipt(store, f"{receipt.record.position}-{'0' * 64}")  # the hash says no
        with pytest.raises(LookupError, match="not a receipt"):
            find_receipt(store, f"{first.position}-{first.hash}")

    def test_a_record_is_found_by_its_hash_alone_and_a_made_up_hash_is_not(self, store):
        # What find_receipt asks when an id misses, to tell a moved receipt from a missing one.
        receipt = _erased(store)
        records = store.read_all()
        again = store
        assert [again._position_of(r.hash) for r in records] == [r.position for r in records]
        assert again._position_of(receipt.record.hash) == receipt.record.position
        assert again._position_of("0" * 64) is None
        with pytest.raises(LookupError, match=r"record \d+ is another receipt"):
            # The id's place holds a receipt, but not this one: said, as a forger's edit would be.
            find_receipt(again, f"{receipt.record.position}-{'0' * 64}")

    def test_a_receipt_file_checks_offline_against_the_trusted_digest(self, store):
        receipt = _erased(store)
        trusted = settled(store).digest()
        text = receipt_bundle(store, receipt)
        check = check_receipt(text, LedgerDigest.from_json(trusted.to_json()))
        assert check.ok, check.reason
        assert check.receipt["reason"] == "request #7"
        assert (check.receipt["first_seq"], check.receipt["last_seq"]) == (1, 2)
        assert "secret" not in text  # the receipt carries no erased message

    @pytest.mark.parametrize(
        ("edit", "reason"),
        [
            (lambda d: d["receipt"].update(reason="routine cleanup"), "shows reason other than"),
            (lambda d: d["receipt"].update(last_seq=1), "shows last_seq other than"),
            (lambda d: d["receipt"].update(memory='~t:["carol","s1"]'), "shows memory other than"),
            (lambda d: d["proof"]["record"].update(payload="{}"), "not in the ledger"),
            (lambda d: d.update(format="something else"), "not a chatledger-erasure-receipt"),
            (lambda d: d.pop("proof"), "not a chatledger erasure receipt"),
        ],
    )
    def test_an_edited_receipt_file_does_not_check(self, store, edit, reason):
        receipt = _erased(store)
        trusted = settled(store).digest()
        doc = json.loads(receipt_bundle(store, receipt))
        edit(doc)
        check = check_receipt(json.dumps(doc), trusted)
        assert not check.ok
        assert reason in check.reason

    def test_a_receipt_against_another_digest_says_which_to_ask_for(self, store):
        receipt = _erased(store)
        older = settled(store).digest()
        store.append(("bob", "s1"), batch("even later"))
        newer_file = receipt_bundle(settled(store), receipt)  # against the log now
        check = check_receipt(newer_file, older)
        assert not check.ok and "--digest FILE" in check.reason
        # Asked against the trusted digest, it checks.
        assert check_receipt(receipt_bundle(store, receipt, digest=older), older).ok

    @reopens
    def test_a_keyed_ledgers_receipt_needs_its_key_to_tie_the_record(self, backend):
        store = backend.open(chain_key=KEY)
        receipt = _erased(store)
        trusted = settled(store).digest()
        text = receipt_bundle(store, receipt)
        without = check_receipt(text, trusted)
        assert not without.ok and "keyed ledger" in without.reason
        assert check_receipt(text, trusted, chain_key=KEY).ok
        assert not check_receipt(text, trusted, chain_key=b"j" * 32).ok
