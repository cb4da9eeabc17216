"""PostgreSQL's append_or_rebuild: a contended memory's lost race rebuilt on the winners'
records, read right after the insert that lost it, and never on records the chain does not
vouch for. (The conformance kit's RebuildContract holds every backend to the contract; these
tests pin the paths only PostgreSQL has: the race without the lock, and the fall back to the
lock.)"""

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


@pytest.fixture
def schema_name() -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        _admin(f"DROP SCHEMA IF EXISTS {name} CASCADE")


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


def test_a_contended_append_that_wins_sends_only_its_insert(two_stores, monkeypatch):
    import psycopg

    a, b, _ = two_stores
    head = _contended(a, b)
    sent: list[object] = []
    execute = psycopg.Connection.execute

    def spy(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(query)
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", spy)
    rebuild = Rebuilder(batch("b"))
    (record,) = b.append_or_rebuild(
        "u1", batch("won"), expected_seq=2, expected_hash=head.hash, rebuild=rebuild
    )
    # Check the race was won with the one insert: the read of the winners' records is sent
    # only after an insert that lost (sent with every insert, it made each win wait for it).
    assert record.seq == 3
    assert rebuild.seen == []
    assert len(sent) == 1
    assert sent[0] == b._q["insert_one_locked"]
    # Check a lost race still reads the winners' records and rebuilds on them.
    a.append("u1", batch("a4"))
    sent.clear()
    (again,) = b.append_or_rebuild(
        "u1", batch("stale"), expected_seq=3, expected_hash=record.hash, rebuild=rebuild
    )
    assert rebuild.seen == [[4]]
    assert b._q["since"] in sent
    assert (again.seq, texts(a.read("u1"))[-1]) == (5, "b")


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


def test_a_writer_that_keeps_losing_hands_the_race_back_to_its_caller(two_stores):
    from eventlog.recorders import postgres_races

    a, b, _ = two_stores
    head = _contended(a, b)
    a.append("u1", batch("a3"))
    calls: list[list[int]] = []

    def rebuild(newer: list[Any]) -> Any:
        calls.append([r.seq for r in newer])
        a.append("u1", batch(f"faster{len(calls)}"))  # another writer wins again
        return batch(f"b{len(calls)}")

    with pytest.raises(ConcurrencyError):
        b.append_or_rebuild(
            "u1", batch("stale"), expected_seq=2, expected_hash=head.hash, rebuild=rebuild
        )
    # Check each lost race was rebuilt on the one record that won it, up to RACES of them,
    # and none of the rebuilt records landed: the caller catches up and builds again.
    assert calls == [[3 + i] for i in range(postgres_races.RACES)]
    assert not [t for t in texts(a.read("u1")) if t.startswith("b")]
    assert a.verify().ok


def test_rebuild_may_read_even_from_a_store_with_one_connection(schema_name):
    from eventlog.postgres import PostgresEventStore

    with (
        PostgresEventStore(PG_DSN, schema=schema_name) as a,
        PostgresEventStore(PG_DSN, schema=schema_name, max_connections=1) as b,
    ):
        head = _contended(a, b)
        a.append("u1", batch("a3"))
        seen: list[list[str]] = []

        def rebuild(newer: list[Any]) -> Any:
            # A fold that reads (a summarizing memory reads its summary): the append holds
            # no connection now, so the store's only one is free.
            seen.append(texts(b.read_verified("u1")))
            return batch("b")

        (record,) = b.append_or_rebuild(
            "u1", batch("stale"), expected_seq=2, expected_hash=head.hash, rebuild=rebuild
        )
        assert seen == [["a1", "a2", "a3"]]
        assert record.seq == 4
        assert a.verify().ok


@pytest.mark.parametrize("mine", [("b5",), ("b5", "b6")], ids=["one record", "a batch"])
def test_an_insert_that_waited_for_the_lock_lands_whole_or_not_at_all(schema_name, mine):
    import threading
    import time

    import psycopg
    from psycopg.conninfo import make_conninfo

    from eventlog.postgres import PostgresEventStore

    app = f"chatledger-test-{uuid.uuid4().hex[:8]}"
    with (
        PostgresEventStore(PG_DSN, schema=schema_name) as a,
        PostgresEventStore(make_conninfo(PG_DSN, application_name=app), schema=schema_name) as b,
    ):
        a.append("u1", batch("a1", "a2", "a3", "a4"))
        assert b.head("u1").seq == 4  # b's next append is the one-statement insert
        outcome: list[BaseException | None] = []
        with psycopg.connect(PG_DSN) as winner:
            # Another writer holds the memory's append lock and has inserted seq 5, not yet
            # committed, exactly as its own append would.
            winner.execute("SELECT pg_advisory_xact_lock(%s)", (a._stream_lock("u1"),))
            winner.execute(*a._insert_query(a._build("u1", a.head("u1"), batch("w5"), a._now())))

            def ours() -> None:
                try:
                    b.append("u1", batch(*mine), expected_seq=4)
                    outcome.append(None)
                except BaseException as e:
                    outcome.append(e)

            writer = threading.Thread(target=ours)
            writer.start()
            # Wait until b's statement (its head check's snapshot taken) waits for the lock.
            deadline = time.monotonic() + 30
            while True:
                with psycopg.connect(PG_DSN, autocommit=True) as admin:
                    waiting = admin.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE application_name = %s "
                        "AND wait_event_type = 'Lock'",
                        (app,),
                    ).fetchall()
                if waiting:
                    break
                assert time.monotonic() < deadline, "b's append never waited for the lock"
            winner.commit()
            writer.join()
        # Check b's append is a conflict and nothing of it landed, not even a batch's later
        # records (which no taken seq blocks): the chain and its seal stay whole.
        (error,) = outcome
        assert isinstance(error, ConcurrencyError)
        assert texts(a.read("u1")) == ["a1", "a2", "a3", "a4", "w5"]
        assert a.read_verified("u1")[-1].seq == 5
        assert a.verify().ok


def test_records_rebuilt_on_winners_a_failover_lost_are_never_sent_on_the_old_head(schema_name):
    from psycopg.conninfo import make_conninfo

    from eventlog.postgres import PostgresEventStore

    app = f"chatledger-test-{uuid.uuid4().hex[:8]}"
    with (
        PostgresEventStore(PG_DSN, schema=schema_name) as a,
        PostgresEventStore(make_conninfo(PG_DSN, application_name=app), schema=schema_name) as b,
    ):
        head = _contended(a, b)
        seal = f"{schema_name}.heads"
        _admin(f"CREATE TABLE {schema_name}.saved AS SELECT * FROM {seal} WHERE stream_id = 'u1'")
        a.append("u1", batch("a3"))

        def rebuild(newer: list[Any]) -> Any:
            # A failover loses the winner's commit (its record and the seal it moved) and
            # every connection b had, while b rebuilds on that record.
            _admin(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (app,),
            )
            _admin(f"DELETE FROM {schema_name}.events WHERE stream_id = 'u1' AND seq = 3")
            _admin(
                f"UPDATE {seal} h SET seq = s.seq, hash = s.hash, mac = s.mac "
                f"FROM {schema_name}.saved s WHERE h.stream_id = s.stream_id"
            )
            return batch("b")

        # Check b reports the race rather than send its rebuilt record (which names the
        # lost winner in its window) onto seq 2, and the memory stays whole and verifiable.
        with pytest.raises(ConcurrencyError):
            b.append_or_rebuild(
                "u1", batch("stale"), expected_seq=2, expected_hash=head.hash, rebuild=rebuild
            )
        assert texts(a.read("u1")) == ["a1", "a2"]
        assert a.verify().ok
        (record,) = b.append("u1", batch("b again"), expected_seq=2)
        assert (record.seq, record.prev_hash) == (3, head.hash)


def test_a_race_lost_to_a_head_that_vanished_is_a_plain_conflict(schema_name):
    from eventlog.postgres import PostgresEventStore

    with (
        PostgresEventStore(PG_DSN, schema=schema_name) as a,
        PostgresEventStore(PG_DSN, schema=schema_name) as b,
    ):
        a.append("u1", batch("a1"))
        known = b.head("u1")
        seal = f"{schema_name}.heads"
        _admin(f"CREATE TABLE {schema_name}.saved AS SELECT * FROM {seal} WHERE stream_id = 'u1'")
        a.append("u1", batch("a2"))
        with pytest.raises(ConcurrencyError):  # b now races on this memory
            b.append("u1", batch("lost"), expected_seq=known.seq, expected_hash=known.hash)
        head = b.head("u1")
        # A failover loses seq 2 and its seal: the head b chains to is gone, nobody won.
        _admin(f"DELETE FROM {schema_name}.events WHERE stream_id = 'u1' AND seq = 2")
        _admin(
            f"UPDATE {seal} h SET seq = s.seq, hash = s.hash, mac = s.mac "
            f"FROM {schema_name}.saved s WHERE h.stream_id = s.stream_id"
        )
        rebuild = Rebuilder(batch("b"))
        # Check there is nothing to rebuild on: the caller gets the conflict and catches up.
        with pytest.raises(ConcurrencyError):
            b.append_or_rebuild(
                "u1", batch("stale"), expected_seq=2, expected_hash=head.hash, rebuild=rebuild
            )
        assert rebuild.seen == []
        assert texts(a.read("u1")) == ["a1"]
        assert a.verify().ok
