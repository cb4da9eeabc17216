"""PostgreSQL without a global write lock: memories write in parallel, tailers stay exact.

Appends to one memory queue on that memory's advisory lock; appends to different memories never
wait for each other. The global order is still safe to tail: positions come from transaction
ids and ``read_all`` returns records only below the oldest transaction still running.
"""

from __future__ import annotations

import itertools
import multiprocessing
import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from eventlog import verify_inclusion
from eventlog.ids import memory_key
from eventlog.postgres import PostgresEventStore
from eventlog.recorders.postgres_sql import stream_lock_key
from eventlog.testing.records import added, batch, settled, texts
from tests.conftest import PG_DSN
from tests.eventlog.test_postgres import _drop, _pg  # noqa: F401 - _pg is a fixture

pytestmark = pytest.mark.usefixtures("_pg")


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        _drop(name)


def _held_append(store: PostgresEventStore, conn: psycopg.Connection, memory_id: str, text: str):
    """Begin, on ``conn``, the transaction a store's append runs (the memory's lock, the chained
    insert), without committing it: a writer stalled between its insert and its COMMIT."""
    key = memory_key(memory_id)
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (stream_lock_key(store._schema, key),))
    rows = store._build(key, store.head(memory_id), batch(text), store._now())
    ((_, position),) = conn.execute(*store._insert_query(rows)).fetchall()
    return position


def test_a_transaction_held_open_on_memory_a_does_not_delay_memory_b(schema):
    with (
        PostgresEventStore(PG_DSN, schema=schema) as writer,
        PostgresEventStore(PG_DSN, schema=schema) as tailer,
    ):
        writer.append("A", batch("a1"))
        # From the append itself: a tailer's read_all withholds records while any older
        # transaction of the server is open (another client's), so it may not show b1 yet.
        (b1,) = writer.append("B", batch("b1"))
        start = b1.position
        seen: list[int] = []
        a_done = threading.Event()
        with psycopg.connect(PG_DSN) as stalled:
            pending = _held_append(writer, stalled, "A", "a2 (commits late)")
            held_at = time.monotonic()

            def append_a() -> None:
                writer.append("A", batch("a3"))  # queues behind the stalled transaction
                a_done.set()

            other = threading.Thread(target=append_a)
            other.start()
            latencies: list[float] = []
            while time.monotonic() - held_at < 5:
                t0 = time.monotonic()
                writer.append("B", batch(f"b{len(latencies) + 2}"))
                latencies.append(time.monotonic() - t0)
                page = tailer.read_all(gt=seen[-1] if seen else start)
                seen.extend(r.position for r in page)
            # Check memory B kept writing while A's transaction was open for 5 s, each append
            # far from waiting for it, and A's own writer did wait.
            assert len(latencies) >= 20
            assert max(latencies) < 1.0
            assert not a_done.is_set()
            # Check the tailer did not move past the open transaction's position: B's records
            # committed after it, but a tailer reading them would skip A's row forever.
            assert all(p < pending for p in seen)
            stalled.commit()
        other.join(timeout=10)
        assert a_done.is_set()
        # Check the tailer, going on from where it stopped, gets A's late record first and
        # then everything else, and misses nothing (once no other client's older transaction
        # holds the records back: polled, as a tailer would).
        expected = 2 + len(latencies)  # a2, a3 and B's appends after b1
        deadline = time.monotonic() + 60
        while len(seen) < expected and time.monotonic() < deadline:
            seen.extend(r.position for r in tailer.read_all(gt=seen[-1] if seen else start))
            if len(seen) < expected:
                time.sleep(0.05)
        everything = [r.position for r in tailer.read_all(gt=start)]
        assert seen == everything
        assert everything[0] == pending
        assert texts(tailer.read("A")) == ["a1", "a2 (commits late)", "a3"]
        assert len(tailer.read("B")) == len(latencies) + 1
        assert tailer.verify().ok


def test_read_all_waits_for_the_stores_own_append_behind_an_older_transaction(schema):
    with (
        PostgresEventStore(PG_DSN, schema=schema) as store,
        psycopg.connect(PG_DSN) as older,
    ):
        store.append("u1", batch("a"))
        older.execute("SELECT pg_current_xact_id()")  # an older writing transaction, still open
        (mine,) = store.append("u2", batch("b"))
        threading.Timer(0.3, older.rollback).start()
        # Check read_all and digest() include the store's own append once the older
        # transaction ends (they wait for it), and a proof of it verifies.
        t0 = time.monotonic()
        assert store.read_all()[-1].position == mine.position
        assert 0.2 < time.monotonic() - t0 < 2.0
        digest = store.digest()
        assert digest.size == 2
        assert verify_inclusion(store.prove("u2", 1), digest)


def test_read_all_gives_up_waiting_and_stays_exact(schema, monkeypatch):
    from eventlog.recorders import postgres_reads

    # 2 s: long enough that a second wait would stand out from a slow query on a loaded machine.
    monkeypatch.setattr(postgres_reads, "_SETTLE_WAIT", 2.0)
    with (
        PostgresEventStore(PG_DSN, schema=schema) as store,
        psycopg.connect(PG_DSN) as older,
    ):
        (first,) = store.append("u1", batch("a"))
        older.execute("SELECT pg_current_xact_id()")
        store.append("u1", batch("b"))
        # Check a read while an older transaction stays open returns the part below it, after
        # a bounded wait, and the next read does not wait again for the same record.
        t0 = time.monotonic()
        assert [r.position for r in store.read_all()] == [first.position]
        assert 1.9 < time.monotonic() - t0 < 20
        t0 = time.monotonic()
        assert [r.position for r in store.read_all()] == [first.position]
        assert time.monotonic() - t0 < 1.0
        older.rollback()
        assert texts(store.read_all()) == ["a", "b"]


def test_a_batch_larger_than_a_position_can_number_is_refused(schema, monkeypatch):
    from eventlog.recorders import postgres_sql

    monkeypatch.setattr(postgres_sql, "MAX_ROWS_PER_TRANSACTION", 3)
    with PostgresEventStore(PG_DSN, schema=schema) as store:
        with pytest.raises(ValueError, match=r"append of 4 records to u1.*at most 3.*split"):
            store.append("u1", batch("a", "b", "c", "d"))
        assert store.read("u1") == []
        assert len(store.append("u1", batch("a", "b", "c"))) == 3


def test_max_connections_must_be_positive():
    with pytest.raises(ValueError, match="max_connections=0"):
        PostgresEventStore(PG_DSN, max_connections=0)


def test_erase_of_several_memories_numbers_its_receipts_within_one_transaction(schema):
    with PostgresEventStore(PG_DSN, schema=schema) as store:
        for name in (("s", "a"), ("s", "b"), ("s", "c")):
            store.append(name, batch("x", "y"))
        receipts = store.erase_subject(("s",), reason="test")
        positions = [r.record.position for r in receipts]
        # Check one transaction wrote three receipts at consecutive positions, all readable in
        # the global order, and the log still verifies.
        assert len(positions) == 3
        assert positions == list(range(positions[0], positions[0] + 3))
        assert [r.position for r in store.read_all()][-3:] == positions
        assert store.verify().ok


# ------------------------------------------------------------------ tailer under load


def _mixed_writer(args: tuple[str, int, int]) -> None:
    schema, writer, count = args
    with PostgresEventStore(PG_DSN, schema=schema, create_schema=False) as s:
        for i in range(count):
            # Own memories and one shared by all writers, batches of one to three.
            memory_id = "shared" if i % 4 == 0 else f"w{writer}-{i % 3}"
            s.append(memory_id, batch(*[f"{writer}:{i}:{k}" for k in range(1 + i % 3)]))


@pytest.mark.slow
def test_a_tailer_under_four_concurrent_writers_misses_and_repeats_nothing(schema):
    writers, count = 4, 120
    with PostgresEventStore(PG_DSN, schema=schema) as tailer:
        seen: list[int] = []
        done = threading.Event()

        def tail() -> None:
            last = 0
            while True:
                finished = done.is_set()
                page = tailer.read_all(gt=last, limit=50)
                seen.extend(r.position for r in page)
                if page:
                    last = page[-1].position
                elif finished:
                    return

        reader = threading.Thread(target=tail)
        reader.start()
        try:
            with multiprocessing.get_context("spawn").Pool(writers) as pool:
                pool.map(_mixed_writer, [(schema, w, count) for w in range(writers)])
            # The tailer may stop at its next empty page: first wait until the global order
            # shows every record (another session's transaction can hold the last ones back).
            settled(tailer)
        finally:
            done.set()
            reader.join()
        # Check the tailer saw each record once, in order, and nothing it skipped showed later.
        everything = tailer.read_all()
        assert seen == [r.position for r in everything]
        assert all(a < b for a, b in itertools.pairwise(seen))
        assert len(seen) == writers * sum(1 + i % 3 for i in range(count))
        shared = tailer.read("shared")
        assert [r.seq for r in shared] == list(range(1, len(shared) + 1))
        assert tailer.verify().ok


# ------------------------------------------------------------------ concurrent writers


def _write_concurrently(store: PostgresEventStore, memories: list[str], each: int) -> None:
    """One thread per entry of ``memories``, each appending ``each`` records to it, all at once."""
    go = threading.Event()
    errors: list[BaseException] = []

    def write(memory: str, writer: int) -> None:
        go.wait()
        try:
            for n in range(each):
                store.append(memory, [added(f"w{writer}.{n}")])
        except BaseException as e:  # any failure fails the test below, not a silent thread
            errors.append(e)

    threads = [threading.Thread(target=write, args=(m, i)) for i, m in enumerate(memories)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.slow
def test_eight_writers_on_eight_memories_or_on_one_land_every_append_once_in_order(schema):
    # Throughput ratios - 8 writers against one, goals 2x on 8 memories and 0.7x on one - are
    # the benchmark's (scripts/bench.py SC.par8, SC.same8): on a shared 2-core host they move
    # too much for a test (one CI run measured 1.15x against a 1.3x bound). What a test holds
    # for certain: every append of 8 concurrent writers lands exactly once, in gapless order,
    # on 8 memories and on one. That no memory ever waits for another memory's lock (no
    # global lock) is test_postgres.py's test_an_append_behind_its_append_lock_... .
    each = 25
    with PostgresEventStore(PG_DSN, schema=schema) as store:
        _write_concurrently(store, [f"m{i}" for i in range(8)], each)
        _write_concurrently(store, ["shared"] * 8, each)
        for i in range(8):
            assert texts(store.read(f"m{i}")) == [f"w{i}.{n}" for n in range(each)]
        shared = store.read("shared")
        assert [r.seq for r in shared] == list(range(1, 8 * each + 1))
        by_writer = sorted(texts(shared), key=lambda t: tuple(map(int, t[1:].split("."))))
        assert by_writer == [f"w{w}.{n}" for w in range(8) for n in range(each)]
        # Each writer's own appends stay in its order.
        for w in range(8):
            mine = [t for t in texts(shared) if t.startswith(f"w{w}.")]
            assert mine == [f"w{w}.{n}" for n in range(each)]
        assert store.verify().ok
