"""The in-memory store under attack: a forger who edits its rows and seals directly (its
"database" is the object's own lists) must be caught as on SQLite, and its write paths must
honour the contract's edges exactly (conflicts, snapshots, the ledger tree, closing)."""

from __future__ import annotations

import pathlib

import pytest

from eventlog import ChainIntegrityError, ConcurrencyError, InMemoryEventStore, SQLiteEventStore
from eventlog.ledger import digest
from eventlog.ledger_tree import BLOCK
from eventlog.store import EventStore
from eventlog.testing.records import batch

KEY = b"k" * 32


def test_a_blanked_seal_does_not_hide_a_truncated_tail() -> None:
    store = InMemoryEventStore()
    store.append("m", batch("a", "b", "c"))
    # The forger drops the newest record and blanks the seal's mac, as if the memory came from
    # before head seals: an in-memory store never had such memories, so it is refused.
    store._streams["m"].pop()
    store._all.pop()
    store._seals["m"] = store._seals["m"]._replace(mac="")
    with pytest.raises(ChainIntegrityError, match="head seal is missing"):
        store.read_verified("m")


def test_a_keyed_ledger_reports_unkeyed_records_slipped_in_below_every_position() -> None:
    store = InMemoryEventStore(chain_key=KEY)
    store.append("m", batch("a", "b"))
    # The forger, without the key, builds an unkeyed memory elsewhere and slips it in at
    # position 0: below every position a keyed append gives, so the "records after the key
    # was adopted must be keyed" rule does not reach it. A keyed in-memory ledger never had
    # unkeyed records, so its sealed legacy prefix is empty and these are not it.
    elsewhere = InMemoryEventStore()
    (forged,) = elsewhere.append("x", batch("planted"))
    forged = forged._replace(position=0)
    store._streams["x"] = [forged]
    store._all.insert(0, forged)
    store._seals["x"] = elsewhere._seals["x"]
    report = store.verify()
    assert not report.ok
    assert any(
        "not the sealed legacy prefix: 1 found, 0 sealed" in p for p in report.ledger_problems
    )


def test_positions_are_numbered_as_sqlite_numbers_them(tmp_path: pathlib.Path) -> None:
    # A tailing reader keeps the last position it saw and may move between backends (tests on
    # memory, production on SQLite): both must hand out the same positions for the same log,
    # from 1 (the first after the "nothing read yet" 0), gapless, never reused after a purge,
    # a tombstone or a receipt taking the next one.
    def positions(store: EventStore) -> list[int]:
        store.append("a", batch("a1", "a2"))
        store.append("b", batch("b1"))
        store.purge("a", expected_seq=2, reason="retention")
        store.append("b", batch("b2"))
        store.erase("b", reason="GDPR")
        store.append("c", batch("c1"))
        return [r.position for r in store.read_all()]

    with SQLiteEventStore(tmp_path / "chat.db") as sqlite_store:
        expected = positions(sqlite_store)
    assert expected == [3, 4, 5, 6, 7]
    assert positions(InMemoryEventStore()) == expected


def test_the_ledger_tree_hook_answers_as_sqlites_does(tmp_path: pathlib.Path) -> None:
    # The tree saves its blocks through _save_tree_blocks and trusts the answer: True (stored:
    # not sent again), False (a purge or a gap: rebuild). Both backends answer alike.
    def answers(store: EventStore) -> list[bool | None]:
        for i in range(0, BLOCK + 5, 50):
            store.append(f"m{i % 3}", batch(*(f"message {k}" for k in range(i, i + 50))))
        digest(store)
        generation, blocks = store._tree_blocks()
        assert [b.block for b in blocks] == [0]
        return [
            store._save_tree_blocks(blocks, replace=True, generation=generation),
            store._save_tree_blocks(blocks, replace=False, generation=generation),
            store._save_tree_blocks(blocks, replace=False, generation=generation + 1),
            store._save_tree_blocks(
                [blocks[0]._replace(block=2)], replace=False, generation=generation
            ),
        ]

    with SQLiteEventStore(tmp_path / "chat.db") as sqlite_store:
        expected = answers(sqlite_store)
    assert expected == [True, True, False, False]
    assert answers(InMemoryEventStore()) == expected


def test_an_erase_of_an_empty_memory_conflicts_as_on_sqlite(tmp_path: pathlib.Path) -> None:
    # An erase guarded by expected_seq: on a memory with no records the actual seq is 0, so
    # expected_seq=0 finds nothing to erase and any other expected_seq conflicts with 0.
    def outcomes(store: EventStore) -> list[object]:
        store.append("other", batch("x"))
        with pytest.raises(ValueError, match="nothing to erase"):
            store.erase("nobody", reason="GDPR", expected_seq=0)
        with pytest.raises(ConcurrencyError) as caught:
            store.erase("nobody", reason="GDPR", expected_seq=1)
        return [caught.value.expected, caught.value.actual, store.head("nobody")]

    with SQLiteEventStore(tmp_path / "chat.db") as sqlite_store:
        expected = outcomes(sqlite_store)
    assert expected == [1, 0, None]
    assert outcomes(InMemoryEventStore()) == expected


def test_read_all_limit_0_and_a_snapshot_at_lte_answer_as_on_sqlite(tmp_path: pathlib.Path) -> None:
    # A tailer asking for no rows gets none (not one it would then skip past), and a
    # snapshot saved at seq n is "at or before" lte=n: a projection resuming at n finds it.
    def answers(store: EventStore) -> list[object]:
        store.append("u1", batch("1", "2", "3"))
        store.save_snapshot("u1", "window", 2, '{"s":2}')
        snap = store.load_snapshot("u1", "window", lte=2)
        return [
            store.read_all(limit=0),
            store.read_all(gt=1, limit=0),
            None if snap is None else (snap.seq, snap.state),
            store.load_snapshot("u1", "window", lte=1),
        ]

    with SQLiteEventStore(tmp_path / "chat.db") as sqlite_store:
        expected = answers(sqlite_store)
    assert expected == [[], [], (2, '{"s":2}'), None]
    assert answers(InMemoryEventStore()) == expected


def test_a_memory_whose_every_record_was_dropped_fails_the_whole_ledgers_verify() -> None:
    store = InMemoryEventStore()
    store.append("gone", batch("a", "b"))
    store.append("kept", batch("c"))
    # The forger drops every record of one memory and leaves its seal.
    del store._streams["gone"]
    store._all = [r for r in store._all if r.stream_id != "gone"]
    report = store.verify()
    assert set(report.failures) == {"gone"} and report.failures["gone"][0] == 2
    assert store.verify("kept").ok
