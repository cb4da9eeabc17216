"""Store contract: erase() deletes content but keeps chains, digests and proofs valid."""

from __future__ import annotations

import pytest

from eventlog import ChainKeyError
from eventlog.ledger import verify_inclusion
from eventlog.models import ContentErased, ErasureReceipt, MemoryErased
from eventlog.serialization import decode_event, encode_event, logged_event
from eventlog.testing._base import reopens
from eventlog.testing.records import added, batch, settled, texts

KEY = b"k" * 32


class EraseContract:
    """The erase part of the store contract."""

    def test_erase_blanks_content_and_keeps_everything_else(self, store):
        store.append(("alice", "s1"), batch("secret one", "secret two"))
        store.append(("bob", "s1"), batch("kept"))
        before = store.read(("alice", "s1"))
        digest = settled(store).digest()

        receipt = store.erase(("alice", "s1"), reason="GDPR request 7")

        # Check the receipt names the range, count, reason and is the new head.
        assert isinstance(receipt, ErasureReceipt)
        assert receipt.memory_id == ("alice", "s1")
        assert (receipt.event.first_seq, receipt.event.last_seq) == (1, 2)
        assert receipt.event.record_count == 2
        assert receipt.event.reason == "GDPR request 7"
        assert receipt.record.seq == 3
        assert receipt.record.kind == "memory_erased"
        assert receipt.record.prev_hash == before[-1].hash
        assert decode_event(receipt.record) == receipt.event
        head = store.head(("alice", "s1"))
        assert head is not None
        assert head.seq == 3
        # Check payload and salt are gone, and every other column is untouched.
        after = store.read(("alice", "s1"))
        for old, new in zip(before, after[:2], strict=True):
            assert new.erased
            assert (new.payload, new.salt) == ("", "")
            assert new._replace(payload=old.payload, salt=old.salt) == old
        assert not after[2].erased
        # Check the global order shows the same blanked records.
        assert [r for r in settled(store).read_all() if r.stream_id == before[0].stream_id] == after
        # Check chains, the earlier digest and proofs of other memories still verify.
        assert store.verify().ok
        assert store.verify(digest=digest).ok
        now = settled(store).digest()
        assert verify_inclusion(store.prove(("bob", "s1"), 1), now)
        assert verify_inclusion(store.prove(("alice", "s1"), 1), now)
        assert texts(store.read(("bob", "s1"))) == ["kept"]

    def test_erased_records_decode_as_content_erased(self, store):
        store.append("u1", batch("a"))
        store.erase("u1", reason="r")
        first, receipt = store.read("u1")
        # Check the history representation: a typed placeholder naming the erased kind.
        event = logged_event(first)
        assert event.erased
        assert event.event == ContentErased(erased_kind="message_added")
        assert event.kind == "content_erased"
        assert event.message is None
        assert not logged_event(receipt).erased
        assert isinstance(logged_event(receipt).event, MemoryErased)

    def test_erase_deletes_snapshots(self, store):
        store.append("u1", batch("a"))
        store.save_snapshot("u1", "window", 1, '{"secret": true}')
        store.erase("u1", reason="r")
        assert store.load_snapshot("u1", "window") is None

    def test_erase_again_erases_only_what_came_after(self, store):
        store.append("u1", batch("a", "b"))
        store.erase("u1", reason="first")
        # Check a second erase with nothing new is a clear error that writes nothing.
        with pytest.raises(ValueError, match="nothing to erase"):
            store.erase("u1", reason="again")
        assert store.head("u1").seq == 3
        # Check new content after a receipt is erased by the next erase; receipts are kept.
        store.append("u1", batch("c"))
        receipt = store.erase("u1", reason="second")
        assert (receipt.event.first_seq, receipt.event.last_seq, receipt.event.record_count) == (
            4,
            4,
            1,
        )
        kinds = [(r.kind, r.erased) for r in store.read("u1")]
        assert kinds == [
            ("message_added", True),
            ("message_added", True),
            ("memory_erased", False),
            ("message_added", True),
            ("memory_erased", False),
        ]
        assert store.verify().ok

    def test_erase_of_unknown_memory_is_refused(self, store):
        with pytest.raises(ValueError, match="nothing to erase"):
            store.erase("nobody", reason="r")
        assert store.read("nobody") == []

    def test_erase_refuses_format_1_records_and_changes_nothing(self, store):
        store.append("u1", [added("a")._replace(format=1), added("b")])
        before = store.read("u1")
        with pytest.raises(ValueError, match=r"format 1.*use purge\(\)"):
            store.erase("u1", reason="r")
        assert store.read("u1") == before
        assert store.verify().ok

    def test_erase_after_purge_keeps_the_tombstone(self, store):
        store.append("u1", batch("a"))
        store.purge("u1", expected_seq=1, reason="idle")
        with pytest.raises(ValueError, match="nothing to erase"):
            store.erase("u1", reason="r")
        store.append("u1", batch("b"))
        receipt = store.erase("u1", reason="r")
        assert receipt.event.record_count == 1
        assert not store.read("u1")[0].erased  # the tombstone holds no message
        assert store.verify().ok

    def test_erase_subject_erases_every_matching_memory(self, store):
        store.append(("alice", "s1"), batch("a1"))
        store.append(("alice", "s2"), batch("a2"))
        store.append(("alice", "s3"), batch("a3"))
        store.append(("alicia", "s1"), batch("x"))
        store.append(("bob", "s1"), batch("b"))
        store.append("alice", batch("plain id, not a tuple"))
        store.erase(("alice", "s3"), reason="earlier")
        digest = settled(store).digest()

        receipts = store.erase_subject(("alice",), reason="subject request")

        # Check only ("alice", *) memories with content left are erased, in key order.
        assert [r.memory_id for r in receipts] == [("alice", "s1"), ("alice", "s2")]
        assert all(r.event.reason == "subject request" for r in receipts)
        assert texts(store.read(("alicia", "s1"))) == ["x"]
        assert texts(store.read(("bob", "s1"))) == ["b"]
        assert texts(store.read("alice")) == ["plain id, not a tuple"]
        assert store.verify().ok
        assert store.verify(digest=digest).ok
        # Check a full-id prefix works, and a second run finds nothing.
        assert store.erase_subject(("alice", "s1"), reason="again") == []

    @pytest.mark.parametrize(
        ("prefix", "error", "match"),
        [
            ((), ValueError, "would erase every memory"),
            ("alice", TypeError, "must be a tuple"),
        ],
    )
    def test_erase_subject_refuses_bad_prefixes(self, store, prefix, error, match):
        store.append(("alice", "s1"), batch("a"))
        with pytest.raises(error, match=match):
            store.erase_subject(prefix, reason="r")
        assert not store.read(("alice", "s1"))[0].erased

    def test_keyed_store_erases_and_verifies(self, backend):
        store = backend.open(chain_key=KEY)
        store.append("u1", batch("a", "b"))
        digest = settled(store).digest()
        receipt = store.erase("u1", reason="r")
        assert receipt.record.format == 3
        assert store.verify().ok
        assert store.verify(digest=digest).ok

    @reopens
    def test_erase_without_the_key_is_refused(self, backend):
        keyed = backend.open(chain_key=KEY)
        keyed.append("u1", batch("a"))
        keyless = backend.open()
        with pytest.raises(ChainKeyError):
            keyless.erase("u1", reason="r")
        with pytest.raises(ChainKeyError):
            keyless.erase_subject(("u1",), reason="r")
        assert not keyed.read("u1")[0].erased

    def test_receipt_round_trips_through_serialization(self, store):
        event = MemoryErased(
            first_seq=1,
            last_seq=2,
            record_count=2,
            erased_at=store._now(),
            reason="r",
        )
        (record,) = store.append("u1", [encode_event(event)])
        assert decode_event(record) == event

    def test_erase_with_expected_seq_refuses_a_moved_head_and_changes_nothing(self, store):
        from eventlog import ConcurrencyError

        store.append("u1", batch("a", "b"))
        # Check a stale expected seq is a conflict and nothing is blanked or appended.
        with pytest.raises(ConcurrencyError):
            store.erase("u1", reason="retention", expected_seq=1)
        assert texts(store.read("u1")) == ["a", "b"]
        assert store.head("u1").seq == 2
        # Check the current one erases.
        receipt = store.erase("u1", reason="retention", expected_seq=2)
        assert receipt.record.seq == 3
        assert all(r.erased for r in store.read("u1", lte=2))

    @pytest.mark.parametrize("reason", ["", "   ", None])
    def test_erase_without_a_reason_is_refused(self, store, reason):
        store.append(("alice", "s1"), batch("a"))
        with pytest.raises(ValueError, match="reason must be a non-empty string"):
            store.erase(("alice", "s1"), reason=reason)
        with pytest.raises(ValueError, match="reason must be a non-empty string"):
            store.erase_subject(("alice",), reason=reason)
        assert not store.read(("alice", "s1"))[0].erased

    @pytest.mark.parametrize("size", [0, -1, True, 2.0])
    def test_erase_subject_refuses_a_bad_batch_size(self, store, size):
        store.append(("alice", "s1"), batch("a"))
        with pytest.raises(ValueError, match="batch must be an int >= 1"):
            store.erase_subject(("alice",), reason="r", batch=size)
        assert not store.read(("alice", "s1"))[0].erased

    def test_erase_subject_in_small_batches_erases_each_memory_once(self, store):
        ids = [("carol", f"s{i}") for i in range(7)]
        for mid in ids:
            store.append(mid, batch("x", "y"))
        store.append(("dave", "s1"), batch("kept"))
        digest = settled(store).digest()

        receipts = store.erase_subject(("carol",), reason="request 12", batch=3)

        # Check every memory got exactly one receipt, as its last record, covering seq 1..2.
        assert [r.memory_id for r in receipts] == sorted(ids)
        for mid in ids:
            records = store.read(mid)
            assert [r.kind for r in records][-1] == "memory_erased"
            assert sum(r.kind == "memory_erased" for r in records) == 1
            assert all(r.erased for r in records[:-1])
        assert texts(store.read(("dave", "s1"))) == ["kept"]
        assert store.verify().ok
        assert store.verify(digest=digest).ok
        # Check a rerun writes nothing.
        assert store.erase_subject(("carol",), reason="request 12", batch=3) == []
        assert store.head(ids[0]).seq == 3

    def test_erase_subject_batch_is_all_or_nothing_on_a_format_1_memory(self, store):
        store.append(("erin", "a"), batch("one"))
        store.append(("erin", "b"), [added("legacy")._replace(format=1)])
        store.append(("erin", "c"), batch("three"))
        with pytest.raises(ValueError, match=r"format 1.*use purge\(\)"):
            store.erase_subject(("erin",), reason="r", batch=10)
        # Check the batch with the format 1 memory changed nothing, not even the memory before it.
        assert texts(store.read(("erin", "a"))) == ["one"]
        assert texts(store.read(("erin", "c"))) == ["three"]
        assert store.verify().ok
        # Check with batches of one, the memory before it stays erased, and it is named.
        with pytest.raises(ValueError, match=r"erase of .*erin.*b"):
            store.erase_subject(("erin",), reason="r", batch=1)
        assert all(r.erased for r in store.read(("erin", "a"))[:-1])
        assert texts(store.read(("erin", "c"))) == ["three"]
