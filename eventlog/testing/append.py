"""Store contract: appending. Runs on every backend (memory, sqlite, postgres)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time

from eventlog import ConcurrencyError
from eventlog.hashing import GENESIS
from eventlog.testing.records import added, batch, texts


class AppendContract:
    """The append part of the store contract."""

    def test_first_append_starts_at_seq_1_chained_to_genesis(self, store):
        # Check seqs are 1.. and the first record chains to GENESIS.
        records = store.append("u1", batch("a", "b", "c"))
        assert [r.seq for r in records] == [1, 2, 3]
        assert records[0].prev_hash == GENESIS
        assert [r.prev_hash for r in records[1:]] == [r.hash for r in records[:-1]]
        # Check positions strictly increase and records come back as stored.
        assert records[0].position < records[1].position < records[2].position
        assert texts(store.read("u1")) == ["a", "b", "c"]
        assert store.read("u1") == records

    def test_empty_append_writes_nothing(self, store):
        assert store.append("u1", []) == []
        assert store.read("u1") == []
        assert store.head("u1") is None
        assert store.streams() == []

    def test_expected_seq_conflict_raises_and_writes_nothing(self, store):
        store.append("u1", batch("a", "b"), expected_seq=0)
        # Check a stale writer (thinks head is 1) is refused with the facts.
        with pytest.raises(ConcurrencyError) as info:
            store.append("u1", batch("stale"), expected_seq=1)
        assert info.value.expected == 1
        assert info.value.actual == 2
        assert "u1" in str(info.value)
        # Check nothing of the refused batch landed; the right expectation succeeds.
        assert texts(store.read("u1")) == ["a", "b"]
        assert [r.seq for r in store.append("u1", batch("c"), expected_seq=2)] == [3]

    def test_expected_seq_zero_on_existing_stream_conflicts(self, store):
        store.append("u1", batch("a"))
        with pytest.raises(ConcurrencyError):
            store.append("u1", batch("b"), expected_seq=0)

    def test_batch_with_bad_item_is_atomic(self, store):
        store.append("u1", batch("a"))
        # Check a batch whose last item is not a record writes none of its items.
        with pytest.raises(TypeError, match="item 1"):
            store.append("u1", [added("b"), "not a record"])
        # Check a batch with a naive timestamp fails whole too.
        with pytest.raises(ValueError, match="timezone"):
            store.append("u1", [added("c"), added("d")._replace(recorded_at=datetime(2026, 1, 1))])
        assert texts(store.read("u1")) == ["a"]
        assert store.head("u1").seq == 1

    def test_streams_are_isolated(self, store):
        store.append("u1", batch("a1", "a2"))
        store.append("u2", batch("b1"))
        store.append("u1", batch("a3"))
        # Check each id has its own gapless seqs and sees only its own records.
        assert [r.seq for r in store.read("u1")] == [1, 2, 3]
        assert texts(store.read("u1")) == ["a1", "a2", "a3"]
        assert [r.seq for r in store.read("u2")] == [1]
        assert texts(store.read("u2")) == ["b1"]
        # Check the chains are separate: u2 starts at GENESIS.
        assert store.read("u2")[0].prev_hash == GENESIS

    @pytest.mark.parametrize(
        "memory_id",
        [
            "",
            "user-1",
            "~tilde",
            "nul\x00inside",
            42,
            -7,
            uuid.UUID(int=5),
            ("user", 3),
            ("a", ("b", uuid.UUID(int=1))),
        ],
        ids=["empty", "str", "tilde", "nul", "int", "negative", "uuid", "tuple", "nested"],
    )
    def test_memory_id_types_map_to_one_key(self, store, memory_id):
        store.append(memory_id, batch("x"))
        # Check the same id value reads it back, and the listing returns the original id.
        assert texts(store.read(memory_id)) == ["x"]
        assert [info.memory_id for info in store.streams()] == [memory_id]
        assert store.read(memory_id)[0].memory_id == memory_id

    def test_distinct_ids_never_share_a_stream(self, store):
        for memory_id in ("1", 1, ("1",), (1,), "~i:1"):
            store.append(memory_id, batch(repr(memory_id)))
        assert len(store.streams()) == 5
        assert texts(store.read(1)) == ["1"]
        assert texts(store.read("1")) == ["'1'"]

    @pytest.mark.parametrize("bad", [1.5, True, None, b"x", ["a"], {"a": 1}])
    def test_unsupported_memory_id_type_is_a_type_error(self, store, bad):
        with pytest.raises(TypeError, match="memory id"):
            store.append(bad, batch("x"))

    def test_recorded_at_is_utc_and_never_goes_backwards(self, store):
        with freeze_time("2026-03-01 12:00:00"):
            first = store.append("u1", batch("a"))[0]
        # Check the store's clock stepping back does not make time order disagree with seq order.
        with freeze_time("2026-02-01 12:00:00"):
            second = store.append("u1", batch("b"))[0]
        assert first.recorded_at == datetime(2026, 3, 1, 12, tzinfo=UTC)
        assert second.recorded_at == first.recorded_at
        assert second.recorded_at.tzinfo is not None

    def test_explicit_recorded_at_is_kept_and_must_be_in_order(self, store):
        t0 = datetime(2025, 5, 5, 5, 5, 5, 123456, tzinfo=UTC)
        rec = store.append("u1", [added("a")._replace(recorded_at=t0)])[0]
        assert rec.recorded_at == t0
        with pytest.raises(ValueError, match="earlier"):
            store.append("u1", [added("b")._replace(recorded_at=t0 - timedelta(seconds=1))])
        assert len(store.read("u1")) == 1
