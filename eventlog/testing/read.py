"""Store contract: reading by memory id, by global position, head, listing, time lookup."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from freezegun import freeze_time

from eventlog.testing.records import batch, settled


def _five(store):
    store.append("u1", batch("1", "2", "3", "4", "5"))


class ReadContract:
    """The read part of the store contract."""

    def test_gt_is_exclusive_and_lte_inclusive(self, store):
        _five(store)
        assert [r.seq for r in store.read("u1", gt=2)] == [3, 4, 5]
        assert [r.seq for r in store.read("u1", lte=2)] == [1, 2]
        # Check "snapshot, then tail up to a point" is gt=snap, lte=target.
        assert [r.seq for r in store.read("u1", gt=1, lte=4)] == [2, 3, 4]
        assert store.read("u1", gt=5) == []
        assert store.read("u1", gt=3, lte=3) == []

    def test_limit_and_desc(self, store):
        _five(store)
        assert [r.seq for r in store.read("u1", limit=2)] == [1, 2]
        # Check desc+limit gives the newest ones, newest first.
        assert [r.seq for r in store.read("u1", desc=True, limit=2)] == [5, 4]
        assert [r.seq for r in store.read("u1", lte=3, desc=True, limit=1)] == [3]
        assert [r.seq for r in store.read("u1", desc=True)] == [5, 4, 3, 2, 1]
        assert store.read("u1", limit=0) == []

    def test_unknown_id_reads_empty(self, store):
        assert store.read("nobody") == []
        assert store.head("nobody") is None
        assert store.seq_at("nobody", datetime.now(UTC)) is None

    def test_read_all_is_global_order_and_tailable(self, store):
        store.append("a", batch("a1"))
        store.append("b", batch("b1", "b2"))
        store.append("a", batch("a2"))
        everything = settled(store).read_all()
        assert [(r.stream_id, r.seq) for r in everything] == [
            ("a", 1),
            ("b", 1),
            ("b", 2),
            ("a", 2),
        ]
        # Check a tailing reader that remembers the last position sees exactly the new records.
        last = everything[-1].position
        assert store.read_all(gt=last) == []
        store.append("c", batch("c1"))
        assert [(r.stream_id, r.seq) for r in settled(store).read_all(gt=last)] == [("c", 1)]
        assert [r.position for r in store.read_all(gt=everything[0].position, limit=2)] == [
            everything[1].position,
            everything[2].position,
        ]

    def test_hash_at_and_purges_after_see_every_committed_record(self, store):
        # The witness's anchor checks (eventlog.witness): a backend that overrides them must
        # agree with the default, which reads through read_all.
        records = store.append("u1", batch("a", "b"))
        store.append("u2", batch("c"))
        for record in records:
            assert store._hash_at(record.position) == record.hash
        assert store._hash_at(records[-1].position + 10**9) is None
        assert store._purges_after(0, 10) == []
        tombstone = store.purge("u1", expected_seq=2, reason="retention")
        assert store._hash_at(records[0].position) is None  # deleted by the purge
        assert store._purges_after(records[-1].position, 10) == [tombstone]
        assert store._purges_after(tombstone.position, 10) == []

    def test_head_follows_appends(self, store):
        assert store.head("u1") is None
        records = store.append("u1", batch("a", "b"))
        head = store.head("u1")
        assert (head.seq, head.hash, head.recorded_at) == (
            2,
            records[1].hash,
            records[1].recorded_at,
        )

    def test_streams_list_ids_with_activity(self, store):
        with freeze_time("2026-01-01 10:00:00"):
            store.append("u1", batch("a"))
        with freeze_time("2026-01-02 10:00:00"):
            store.append("u2", batch("b", "c"))
        with freeze_time("2026-01-03 10:00:00"):
            store.append("u1", batch("d"))
        infos = {i.memory_id: i for i in store.streams()}
        assert set(infos) == {"u1", "u2"}
        assert infos["u1"].event_count == 2
        assert infos["u1"].last_seq == 2
        assert infos["u1"].first_recorded_at == datetime(2026, 1, 1, 10, tzinfo=UTC)
        assert infos["u1"].last_recorded_at == datetime(2026, 1, 3, 10, tzinfo=UTC)
        assert infos["u2"].event_count == 2

    def test_seq_at_finds_last_event_at_or_before(self, store):
        for day in (1, 2, 3):
            with freeze_time(f"2026-01-0{day} 10:00:00"):
                store.append("u1", batch(str(day)))
        assert store.seq_at("u1", datetime(2025, 12, 31, tzinfo=UTC)) is None
        assert store.seq_at("u1", datetime(2026, 1, 1, 10, tzinfo=UTC)) == 1  # inclusive
        assert store.seq_at("u1", datetime(2026, 1, 2, 23, tzinfo=UTC)) == 2
        assert store.seq_at("u1", datetime(2027, 1, 1, tzinfo=UTC)) == 3

    def test_snapshots_newest_at_or_before(self, store):
        store.append("u1", batch("1", "2", "3", "4"))
        store.save_snapshot("u1", "window", 2, '{"s":2}')
        store.save_snapshot("u1", "other", 3, '{"o":3}')
        assert store.load_snapshot("u1", "window", lte=3).state == '{"s":2}'
        store.save_snapshot("u1", "window", 4, '{"s":4}')
        assert store.load_snapshot("u1", "window").seq == 4
        # Check a newer snapshot replaces older ones of its name (no growth), not other names.
        assert store.load_snapshot("u1", "window", lte=3) is None
        assert store.load_snapshot("u1", "other").state == '{"o":3}'
        assert store.load_snapshot("u1", "window", lte=1) is None
        assert store.load_snapshot("u2", "window") is None
        # Check snapshots are not part of the history.
        assert len(store.read("u1")) == 4
        # Check a snapshot of an event that does not exist (e.g. purged meanwhile) is refused.
        with pytest.raises(ValueError, match="no such event"):
            store.save_snapshot("u1", "window", 9, "{}")
        with pytest.raises(ValueError, match="no such event"):
            store.save_snapshot("nobody", "window", 1, "{}")

    @pytest.mark.parametrize(
        ("name", "seq", "state", "error"),
        [
            (5, 1, "{}", TypeError),
            ("w", 1, 5, TypeError),
            ("w", 1, b"{}", TypeError),
            ("w", "1", "{}", TypeError),
            ("w", None, "{}", TypeError),
            ("w", True, "{}", TypeError),
            ("w", -1, "{}", ValueError),
            ("\ud800", 1, "{}", ValueError),
            ("w", 1, "\x00", ValueError),
            ("w", 1, "\udfff", ValueError),
        ],
        ids=["name-int", "state-int", "state-bytes", "seq-str", "seq-none", "seq-bool",
             "seq-negative", "name-surrogate", "state-nul", "state-surrogate"],
    )  # fmt: skip
    def test_a_bad_snapshot_is_refused_the_same_everywhere(self, store, name, seq, state, error):
        """Snapshots are text every backend keeps, or nothing is saved: before, SQLite kept an
        int name, an int or bytes state and a str seq, the memory store failed comparing the
        str seq, and SQLite a lone surrogate with a raw UnicodeEncodeError."""
        store.append("u1", batch("1"))
        with pytest.raises(error, match="save_snapshot: "):
            store.save_snapshot("u1", name, seq, state)
        assert store.load_snapshot("u1", "w") is None
        if not isinstance(name, str):
            with pytest.raises(TypeError, match="load_snapshot: the snapshot name must be a str"):
                store.load_snapshot("u1", name)

    def test_context_manager_closes(self, store):
        from eventlog import StoreClosedError

        with store as s:
            s.append("u1", batch("a"))
        try:
            store.read("u1")
        except StoreClosedError as e:
            assert "closed" in str(e)
        else:  # pragma: no cover - the assertion below explains
            raise AssertionError("a closed store must refuse reads")
