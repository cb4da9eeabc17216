"""PostgreSQL's append_or_rebuild: a contended memory's lost race rebuilt on the winners'
records in the round trip that lost it, and never on records the chain does not vouch for.
(The conformance kit's RebuildContract holds every backend to the contract; these tests pin
the paths only PostgreSQL has: the race without the lock, and the fall back to the lock.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from eventlog import ConcurrencyError
from eventlog.testing.rebuild import Rebuilder
from eventlog.testing.records import batch, texts
from tests.conftest import PG_DSN, require_pg

pytestmark = pytest.mark.usefixtures("_pg")


@pytest.fixture
def _pg() -> None:
    require_pg()


def _admin(query: str, params: tuple[object, ...] = ()) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(query, params)


@pytest.fixture(params=["pipelined", "sequential"])
def two_stores(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any, str]]:
    """Two store objects on one new schema (as two processes would have); `sequential` runs
    without pipeline mode (libpq < 14)."""
    from eventlog.postgres import PostgresEventStore

    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        with (
            PostgresEventStore(PG_DSN, schema=schema) as a,
            PostgresEventStore(PG_DSN, schema=schema) as b,
        ):
            for s in (a, b):
                s._pipelined = request.param == "pipelined"
            yield a, b, schema
    finally:
        _admin(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _contended(a: Any, b: Any) -> Any:
    """``b`` loses one race the plain way (which marks the memory contended for it), then
    learns the head again: its next append_or_rebuild races without taking the lock first."""
    a.append("u1", batch("a1"))
    b.head("u1")
    a.append("u1", batch("a2"))
    with pytest.raises(ConcurrencyError):
        b.append("u1", batch("lost"), expected_seq=1)
    head = b.head("u1")
    assert head is not None
    assert head.seq == 2
    return head


def test_a_contended_append_rebuilds_its_lost_race_on_the_winners_record(two_stores):
    a, b, _ = two_stores
    head = _contended(a, b)
    a.append("u1", batch("a3"))
    rebuild = Rebuilder(batch("b"))
    (record,) = b.append_or_rebuild(
        "u1", batch("stale"), expected_seq=2, expected_hash=head.hash, rebuild=rebuild
    )
    # Check the winner's record was handed over and the rebuilt record chains to it.
    assert rebuild.seen == [[3]]
    winner = a.read("u1", gt=2, lte=3)[0]
    assert (record.seq, record.prev_hash) == (4, winner.hash)
    assert texts(a.read("u1")) == ["a1", "a2", "a3", "b"]
    # Check the seal moved with it: a fresh object reads and verifies the whole memory.
    assert a.read_verified("u1")[-1].hash == record.hash
    assert a.verify().ok


def test_a_contended_append_never_rebuilds_on_a_forged_winner(two_stores):
    a, b, schema = two_stores
    head = _contended(a, b)
    a.append("u1", batch("a3"))
    # A forger without the key rewrites the winner's content.
    _admin(
        f"UPDATE {schema}.events SET payload = %s WHERE stream_id = 'u1' AND seq = 3",
        ('{"forged": true}',),
    )
    rebuild = Rebuilder(batch("b"))
    with pytest.raises(ConcurrencyError):
        b.append_or_rebuild(
            "u1", batch("stale"), expected_seq=2, expected_hash=head.hash, rebuild=rebuild
        )
    assert rebuild.seen == []
    assert [r.seq for r in a.read("u1")] == [1, 2, 3]


def test_a_writer_that_keeps_losing_waits_for_the_lock_and_lands(two_stores):
    from eventlog import postgres_races

    a, b, _ = two_stores
    head = _contended(a, b)
    a.append("u1", batch("a3"))
    calls: list[list[int]] = []

    def rebuild(newer: list[Any]) -> Any:
        calls.append([r.seq for r in newer])
        if len(calls) < postgres_races._RACES:
            a.append("u1", batch(f"faster{len(calls)}"))  # another writer wins again
        elif len(calls) == postgres_races._RACES:
            a.append("u1", batch("last"))  # wins the last race too: b then waits its turn
        return batch(f"b{len(calls)}")

    records = b.append_or_rebuild(
        "u1", batch("stale"), expected_seq=2, expected_hash=head.hash, rebuild=rebuild
    )
    # Check each lost race was rebuilt on the one record that won it, and the last rebuild
    # (under the lock, where nobody can win) landed after every winner.
    assert calls == [[3 + i] for i in range(postgres_races._RACES + 1)]
    stored = a.read("u1")
    assert [r.seq for r in records] == [stored[-1].seq]
    assert texts(stored)[-1] == f"b{postgres_races._RACES + 1}"
    assert [t for t in texts(stored) if t.startswith("b")] == [f"b{postgres_races._RACES + 1}"]
    assert a.verify().ok
