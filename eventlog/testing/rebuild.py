"""Ledger contract: ``append_or_rebuild``, a lost race settled inside the append. A backend may
settle it (hand the winners' records to ``rebuild`` and append what it returns after them) or
report it (:class:`~eventlog.ConcurrencyError`, ``rebuild`` never called); either way
``rebuild`` sees only records the chain vouches for, and nothing half-written is left."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from eventlog import ConcurrencyError
from eventlog.hashing import GENESIS
from eventlog.models import NewRecord, Record
from eventlog.testing._base import reopens
from eventlog.testing.records import added, batch, texts


class Rebuilder:
    """A ``rebuild`` callback that records the seqs it was handed and answers ``answer``."""

    def __init__(self, answer: Sequence[Any] | None) -> None:
        self.answer = answer
        self.seen: list[list[int]] = []

    def __call__(self, newer: list[Record]) -> Sequence[NewRecord] | None:
        self.seen.append([r.seq for r in newer])
        return self.answer


def _lose_a_race(store: Any, reopen: Any, *wins: Sequence[str]) -> tuple[Any, Record]:
    """A second store object (the loser) that has already lost one race on memory ``u1``
    (the plain way, so a backend that settles the races of a contended memory now does) and
    caught up to seq 2, then the records of ``wins`` appended by ``store``, each in one
    append (default: one record, ``a3``). Returns the loser and the head it believes in."""
    store.append("u1", batch("a1"))
    loser = reopen()
    known = loser.head("u1")
    store.append("u1", batch("a2"))
    with pytest.raises(ConcurrencyError):
        loser.append("u1", batch("lost"), expected_seq=known.seq, expected_hash=known.hash)
    assert loser.head("u1").seq == 2
    believed = loser.read("u1", gt=1, lte=2)[0]
    for texts_ in wins or (("a3",),):
        store.append("u1", batch(*texts_))
    return loser, believed


class RebuildContract:
    """The ``append_or_rebuild`` part of the ledger's contract."""

    def test_append_or_rebuild_without_a_race_is_an_append(self, store):
        rebuild = Rebuilder(batch("never"))
        (one,) = store.append("u1", batch("a"))
        records = store.append_or_rebuild(
            "u1", batch("b"), expected_seq=1, expected_hash=one.hash, rebuild=rebuild
        )
        # Check it appended the records given, and never called rebuild.
        assert [r.seq for r in records] == [2]
        assert texts(store.read("u1")) == ["a", "b"]
        assert rebuild.seen == []

    @reopens
    def test_a_lost_race_is_rebuilt_after_the_winners_or_reported(self, store, reopen):
        loser, believed = _lose_a_race(store, reopen)
        rebuild = Rebuilder(batch("rebuilt"))
        try:
            records = loser.append_or_rebuild(
                "u1", batch("stale"), expected_seq=2, expected_hash=believed.hash, rebuild=rebuild
            )
        except ConcurrencyError:
            # Check a backend that reports the race never called rebuild and wrote nothing.
            assert rebuild.seen == []
            assert texts(store.read("u1")) == ["a1", "a2", "a3"]
        else:
            # Check a backend that settles it handed over exactly the winner's record and
            # appended the rebuilt records after it, chained to it, not the stale ones.
            assert rebuild.seen == [[3]]
            winner = store.read("u1", gt=2)[0]
            assert [(r.seq, r.prev_hash) for r in records] == [(4, winner.hash)]
            assert texts(store.read("u1")) == ["a1", "a2", "a3", "rebuilt"]
        assert store.verify().ok

    @reopens
    def test_a_writer_several_records_behind_gets_them_all_in_order(self, store, reopen):
        loser, believed = _lose_a_race(store, reopen, ("a3", "a4"), ("a5",))
        rebuild = Rebuilder(batch("rebuilt"))
        try:
            records = loser.append_or_rebuild(
                "u1", batch("stale"), expected_seq=2, expected_hash=believed.hash, rebuild=rebuild
            )
        except ConcurrencyError:
            assert rebuild.seen == []
            assert texts(store.read("u1")) == ["a1", "a2", "a3", "a4", "a5"]
        else:
            # Check every winner's record came, oldest first, and the rebuilt one follows.
            assert rebuild.seen == [[3, 4, 5]]
            assert [(r.seq, r.prev_hash) for r in records] == [(6, store.read("u1")[4].hash)]
            assert texts(store.read("u1")) == ["a1", "a2", "a3", "a4", "a5", "rebuilt"]

    @reopens
    def test_rebuild_never_sees_a_record_the_chain_does_not_vouch_for(self, backend, store):
        loser, believed = _lose_a_race(store, backend.open)
        # A forger without the key rewrites the winner's content.
        backend.tamper(store, "u1", 3, "payload", '{"forged": true}')
        rebuild = Rebuilder(batch("rebuilt"))
        with pytest.raises(ConcurrencyError):
            loser.append_or_rebuild(
                "u1", batch("stale"), expected_seq=2, expected_hash=believed.hash, rebuild=rebuild
            )
        # Check the forged record never reached rebuild and nothing was appended.
        assert rebuild.seen == []
        assert [r.seq for r in store.read("u1")] == [1, 2, 3]

    @reopens
    def test_winners_that_do_not_continue_the_expected_hash_are_a_plain_conflict(
        self, store, reopen
    ):
        loser, _ = _lose_a_race(store, reopen)
        rebuild = Rebuilder(batch("rebuilt"))
        # The loser's idea of seq 2 is another record (a restored or failed-over database).
        with pytest.raises(ConcurrencyError):
            loser.append_or_rebuild(
                "u1", batch("stale"), expected_seq=2, expected_hash="0" * 64, rebuild=rebuild
            )
        assert rebuild.seen == []
        assert [r.seq for r in store.read("u1")] == [1, 2, 3]

    @reopens
    def test_rebuild_giving_up_is_the_conflict_append_raises(self, store, reopen):
        loser, believed = _lose_a_race(store, reopen)
        answers: tuple[list[Any] | None, ...] = (None, [])
        for answer in answers:
            with pytest.raises(ConcurrencyError):
                loser.append_or_rebuild(
                    "u1",
                    batch("stale"),
                    expected_seq=2,
                    expected_hash=believed.hash,
                    rebuild=Rebuilder(answer),
                )
        assert [r.seq for r in store.read("u1")] == [1, 2, 3]

    @reopens
    def test_rebuilt_records_are_checked_as_any_append_and_land_whole_or_not_at_all(
        self, store, reopen
    ):
        loser, believed = _lose_a_race(store, reopen)
        rebuild = Rebuilder([added("fine"), "not a record"])
        with pytest.raises((TypeError, ConcurrencyError)):
            loser.append_or_rebuild(
                "u1", batch("stale"), expected_seq=2, expected_hash=believed.hash, rebuild=rebuild
            )
        # Check none of the rebuilt batch landed.
        assert texts(store.read("u1")) == ["a1", "a2", "a3"]

    def test_a_race_on_an_empty_memory_chains_to_genesis(self, store):
        rebuild = Rebuilder(batch("never"))
        records = store.append_or_rebuild(
            "u1", batch("first"), expected_seq=0, expected_hash=GENESIS, rebuild=rebuild
        )
        assert [(r.seq, r.prev_hash) for r in records] == [(1, GENESIS)]
        assert rebuild.seen == []
