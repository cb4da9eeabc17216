"""PostgresEventStore only: migrations, pools, error translation, ordering lock, load.

Each test gets its own schema, dropped afterwards. The multi-process tests use the 'spawn'
start method, so their workers are module-level functions.
"""

from __future__ import annotations

import itertools
import multiprocessing
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from eventlog import ConcurrencyError, PersistenceError, SchemaVersionError, StoreClosedError
from eventlog.models import NewRecord, StreamHead
from eventlog.testing.records import added, batch, settled, texts
from tests.conftest import PG_DSN, require_pg

pytestmark = pytest.mark.usefixtures("_pg")


@pytest.fixture
def _pg() -> None:
    require_pg()


def _drop(schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        _drop(name)


@pytest.fixture
def store(schema: str):
    from eventlog.postgres import PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema) as s:
        yield s


def _admin(query: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        cur = conn.execute(query.encode(), params)
        return cur.fetchall() if cur.description else []


def _error_chain(e: BaseException | None) -> str:
    parts = []
    while e is not None:
        parts.append(f"{type(e).__name__}: {e}")
        e = e.__cause__ or e.__context__
    return "\n".join(parts)


# ------------------------------------------------------------------ import and schema


def test_eventlog_imports_without_psycopg():
    code = (
        "import sys, eventlog, projections; "
        "assert not any(m.startswith('psycopg') for m in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_setup_is_idempotent_and_records_versions(store, schema):
    from eventlog.postgres import MIGRATIONS, PostgresEventStore

    store.append("u1", batch("a"))
    # Check running setup again, and opening another store, change nothing.
    store.setup()
    store.setup()
    with PostgresEventStore(PG_DSN, schema=schema) as again:
        assert texts(again.read("u1")) == ["a"]
    rows = _admin(f'SELECT version FROM "{schema}".eventlog_migrations ORDER BY version')
    assert [r[0] for r in rows] == list(range(len(MIGRATIONS)))


def test_concurrent_setup_on_a_fresh_schema(schema):
    from eventlog.postgres import MIGRATIONS, PostgresEventStore

    racers = 4
    barrier = threading.Barrier(racers)
    errors: list[BaseException] = []

    def open_store() -> None:
        barrier.wait()
        try:
            PostgresEventStore(PG_DSN, schema=schema).close()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=open_store) for _ in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Check every racer succeeded and each migration was applied exactly once.
    assert errors == []
    rows = _admin(f'SELECT version FROM "{schema}".eventlog_migrations ORDER BY version')
    assert [r[0] for r in rows] == list(range(len(MIGRATIONS)))


def test_column_types_keep_payload_bytes_exact(store, schema):
    rows = _admin(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = 'events'",
        (schema,),
    )
    types = dict(rows)
    assert types["payload"] == types["meta"] == types["recorded_at"] == "text"
    assert types["position"] == types["seq"] == "bigint"
    # Check odd key order and whitespace survive byte for byte (jsonb would rewrite them).
    odd = '{"z": 1,   "a": [ 2 ]}'
    store.append("u1", [NewRecord("memory_cleared", odd, meta='{"b":1, "a":0}')])
    (record,) = store.read("u1")
    assert (record.payload, record.meta) == (odd, '{"b":1, "a":0}')
    assert store.verify().ok


def test_create_schema_false_on_an_empty_schema_fails_clearly(schema):
    from eventlog.postgres import PostgresEventStore

    # Check a missing schema and an empty one both name the remedy.
    with pytest.raises(PersistenceError, match=r"setup\(\)") as info:
        PostgresEventStore(PG_DSN, schema=schema, create_schema=False)
    assert schema in str(info.value)
    _admin(f'CREATE SCHEMA "{schema}"')
    with pytest.raises(PersistenceError, match=r"lacks eventlog migrations \[0"):
        PostgresEventStore(PG_DSN, schema=schema, create_schema=False)
    # Check it opens once the schema is set up.
    PostgresEventStore(PG_DSN, schema=schema).close()
    with PostgresEventStore(PG_DSN, schema=schema, create_schema=False) as managed:
        assert managed.append("u1", batch("a"))[0].seq == 1


def test_schema_from_a_newer_chatledger_is_refused(store, schema):
    from eventlog.postgres import PostgresEventStore

    _admin(f'INSERT INTO "{schema}".eventlog_migrations (version) VALUES (99)')
    for create in (True, False):
        with pytest.raises(SchemaVersionError, match="99"):
            PostgresEventStore(PG_DSN, schema=schema, create_schema=create)


def test_opening_an_up_to_date_schema_does_not_wait_for_the_setup_lock(store, schema):
    import psycopg

    from eventlog.postgres import PostgresEventStore
    from eventlog.recorders.postgres_sql import lock_key

    # Another process is migrating some schema under the setup lock (held, not released).
    with psycopg.connect(PG_DSN, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (lock_key("setup", schema),))
        # Check an up-to-date schema opens at once (one version query, no lock), with and
        # without create_schema, and setup() itself returns too.
        for create in (True, False):
            with PostgresEventStore(
                PG_DSN, schema=schema, create_schema=create, statement_timeout=2
            ) as s:
                s.setup()
                assert texts(s.read("u1")) == []


def test_setup_still_migrates_a_schema_that_is_behind(store, schema, monkeypatch):
    import eventlog.recorders.postgres_open
    from eventlog.postgres import MIGRATIONS, PostgresEventStore

    store.append("u1", batch("a"))
    newer = [*MIGRATIONS, "CREATE TABLE {schema}.extra (x integer);"]
    # Where setup() and the open's schema check read it.
    monkeypatch.setattr(eventlog.recorders.postgres_open, "MIGRATIONS", newer)
    # Check a managed store names the missing version instead of opening.
    with pytest.raises(PersistenceError, match=rf"lacks eventlog migrations \[{len(MIGRATIONS)}\]"):
        PostgresEventStore(PG_DSN, schema=schema, create_schema=False)
    # Check setup() applies exactly the missing migration and keeps the data.
    store.setup()
    rows = _admin(f'SELECT version FROM "{schema}".eventlog_migrations ORDER BY version')
    assert [r[0] for r in rows] == list(range(len(newer)))
    assert _admin(f'SELECT count(*) FROM "{schema}".extra') == [(0,)]
    with PostgresEventStore(PG_DSN, schema=schema, create_schema=False) as managed:
        assert texts(managed.read("u1")) == ["a"]


def test_schema_name_is_quoted_everywhere():
    from eventlog.postgres import PostgresEventStore

    odd = f'Odd "Name"; {uuid.uuid4().hex[:6]}'
    try:
        with PostgresEventStore(PG_DSN, schema=odd) as s:
            s.append("u1", batch("a", "b"))
            s.save_snapshot("u1", "w", 2, "{}")
            assert [r.seq for r in s.read("u1")] == [1, 2]
            assert s.purge("u1", expected_seq=2, reason="x").seq == 3
            s.vacuum()
            assert s.verify().ok
    finally:
        _drop(odd)


# ------------------------------------------------------------------ constructor and pools


def test_exactly_one_of_dsn_and_pool():
    from eventlog.postgres import PostgresEventStore

    with pytest.raises(ValueError, match="exactly one"):
        PostgresEventStore()


def test_store_on_a_caller_pool_leaves_it_open(schema):
    from psycopg_pool import ConnectionPool

    from eventlog.postgres import PostgresEventStore

    # A non-autocommit pool: the store must commit its own work.
    with ConnectionPool(PG_DSN, min_size=1, max_size=2, open=True) as pool:
        with pytest.raises(ValueError, match="exactly one"):
            PostgresEventStore(PG_DSN, pool=pool, schema=schema)
        with pytest.raises(ValueError, match="statement_timeout"):
            PostgresEventStore(pool=pool, schema=schema, statement_timeout=1)
        with PostgresEventStore(pool=pool, schema=schema) as s:
            s.append("u1", batch("a", "b"))
            s.purge("u1", expected_seq=2, reason="x")
            s.vacuum()
        # Check the work was committed and the pool still works after close().
        with pool.connection() as conn:
            rows = conn.execute(f'SELECT seq FROM "{schema}".events'.encode()).fetchall()
        assert rows == [(3,)]


def test_unreachable_server_fails_fast_without_the_password():
    from eventlog.postgres import PostgresEventStore

    for dsn in (
        "host=127.0.0.1 port=1 dbname=test user=alice password=secret",
        "postgresql://alice:secret@127.0.0.1:1/test",
    ):
        started = time.monotonic()
        with pytest.raises(PersistenceError) as info:
            PostgresEventStore(dsn)
        # Check it failed quickly, naming the operation and the server but not the password.
        assert time.monotonic() - started < 10
        chain = _error_chain(info.value)
        assert "127.0.0.1:1/test" in str(info.value)
        assert info.value.operation == "connect"
        assert "secret" not in chain


def test_wrong_user_says_to_check_user_and_password():
    from eventlog.postgres import PostgresEventStore

    # Under trust auth a missing role is the login failure a newcomer meets first; with
    # password auth the server says "password authentication failed" and gets the same advice.
    dsn = f"{PG_DSN} user=chatledger_no_such_user password=hunter2-secret"
    with pytest.raises(PersistenceError) as info:
        PostgresEventStore(dsn)
    # Check the message names the server and the remedy, not the password, and does not
    # send the reader looking for a server that is down.
    message = str(info.value)
    assert "check user and password" in message
    assert "127.0.0.1:5432" in message
    assert "chatledger_no_such_user" in message
    assert "server is running" not in message
    assert info.value.operation == "connect"
    assert "hunter2-secret" not in _error_chain(info.value)


def test_import_without_psycopg_names_the_extra_to_install():
    code = (
        "import sys\n"
        "sys.modules['psycopg'] = None  # as if the [postgres] extra were not installed\n"
        "from eventlog.postgres import PostgresEventStore\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: import eventlog.postgres: psycopg is missing")
    assert "pip install -e '.[postgres]'" in last


def test_unparsable_dsn_does_not_echo_the_password():
    from eventlog.postgres import PostgresEventStore

    with pytest.raises(ValueError, match="not a valid") as info:
        PostgresEventStore("host=x password=secret oops")
    assert "secret" not in _error_chain(info.value)


def test_closed_store_refuses_everything(store):
    store.close()
    store.close()  # idempotent
    for call in (
        lambda: store.append("u1", batch("a")),
        lambda: store.append("u1", []),
        lambda: store.read("u1"),
        lambda: store.head("u1"),
        lambda: store.purge("u1", expected_seq=1, reason="x"),
        lambda: store.save_snapshot("u1", "w", 1, "{}"),
        store.vacuum,
        store.setup,
    ):
        with pytest.raises(StoreClosedError, match="closed"):
            call()


# ------------------------------------------------------------------ errors and retries


def test_statement_timeout_gives_persistence_error_and_appends_nothing(schema):
    import psycopg

    from eventlog.postgres import PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema, statement_timeout=0.2) as s:
        s.append("u1", batch("a"))
        with psycopg.connect(PG_DSN) as blocker:
            blocker.execute(f'LOCK TABLE "{schema}".events IN ACCESS EXCLUSIVE MODE'.encode())
            started = time.monotonic()
            with pytest.raises(PersistenceError, match="statement_timeout") as info:
                s.append("u1", batch("b"))
            assert info.value.operation == "append"
            # Check a read is cancelled too, and not retried.
            with pytest.raises(PersistenceError, match="statement_timeout"):
                s.read("u1")
            assert time.monotonic() - started < 3
            blocker.rollback()
        # Check nothing of the cancelled append landed and the store still works.
        assert texts(s.read("u1")) == ["a"]
        assert s.append("u1", batch("c"), expected_seq=1)[0].seq == 2


def test_a_read_behind_a_table_lock_names_the_lock_its_holder_and_the_setting(schema):
    import psycopg

    from eventlog.postgres import PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema, statement_timeout=0.3) as s:
        s.append("u1", batch("a"))
        with psycopg.connect(PG_DSN) as blocker:
            blocker.execute(f'LOCK TABLE "{schema}".events IN ACCESS EXCLUSIVE MODE'.encode())
            pid = blocker.info.backend_pid
            # Before: "an append waits for its memory's append lock", for a read.
            for operation, call in (("read", lambda: s.read("u1")), ("read_all", s.read_all)):
                with pytest.raises(PersistenceError) as info:
                    call()
                text = str(info.value)
                assert info.value.operation == operation
                assert f"{operation} waited longer than statement_timeout=0.3 s" in text
                assert f"for an AccessExclusive lock on table {schema}.events" in text
                assert f"held by backend pid {pid} (idle in transaction since" in text
                assert f"SELECT pg_terminate_backend({pid})" in text
                assert "raise PostgresEventStore(statement_timeout=...)" in text
                assert "append lock" not in text
            blocker.rollback()
        assert texts(s.read("u1")) == ["a"]


def test_an_append_behind_its_append_lock_names_the_memory_and_the_holder(schema):
    import psycopg

    from eventlog.ids import memory_key
    from eventlog.postgres import PostgresEventStore
    from eventlog.recorders.postgres_sql import stream_lock_key

    with PostgresEventStore(PG_DSN, schema=schema, statement_timeout=0.3) as s:
        s.append(("user", 7), batch("a"))
        with psycopg.connect(PG_DSN, autocommit=True) as holder:
            lock = stream_lock_key(schema, memory_key(("user", 7)))
            holder.execute("SELECT pg_advisory_lock(%s)", (lock,))
            pid = holder.info.backend_pid
            with pytest.raises(PersistenceError) as info:
                s.append(("user", 7), batch("b"))
            text = str(info.value)
            assert "append waited longer than statement_timeout=0.3 s" in text
            assert """for the append lock of memory '~t:["user",7]', held by backend pid""" in text
            assert f"pid {pid} (idle, last query 'SELECT pg_advisory_lock" in text
            # Check other memories' appends and reads do not wait for it.
            s.append("u2", batch("c"))
            holder.execute("SELECT pg_advisory_unlock(%s)", (lock,))
        assert texts(s.read(("user", 7))) == ["a"]
        assert s.append(("user", 7), batch("d"))[0].seq == 2


def test_a_timeout_with_no_lock_left_says_what_it_may_have_waited_for(schema):
    import psycopg

    from eventlog.postgres import PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema, statement_timeout=0.3) as s:
        canceled = psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
        # Check the operation decides what is named when nothing holds a lock any more.
        read = s._detail(canceled, "read", ())
        assert "read waited longer than statement_timeout=0.3 s" in read
        assert "narrow it with limit=" in read
        write = s._detail(canceled, "purge", ["u1"])
        assert "purge waited longer than statement_timeout=0.3 s for the append lock of memory" in (
            write
        )
        assert "pg_stat_activity" in write
        lock = psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")
        assert "longer than lock_timeout" in s._detail(lock, "erase", [])
        s.close()
        # Check a store that cannot ask the server still names the setting.
        assert "statement_timeout=0.3 s for a lock (the server could not be asked" in (
            s._detail(canceled, "read", ())
        )
    with PostgresEventStore(PG_DSN, schema=schema, statement_timeout=None) as s:
        assert "the server's statement_timeout" in s._detail(canceled, "head", ())


@pytest.mark.parametrize("mine", [("c",), ("c", "d")], ids=["one record", "a batch"])
def test_unique_violation_from_a_writer_that_skipped_the_lock_is_a_conflict(schema, mine):
    import psycopg
    from psycopg.conninfo import make_conninfo

    from eventlog.postgres import PostgresEventStore

    app = f"chatledger-test-{uuid.uuid4().hex[:8]}"
    with PostgresEventStore(make_conninfo(PG_DSN, application_name=app), schema=schema) as s:
        s.append("u1", batch("a", "b"))
        rogue_row = batch("rogue")[0]
        outcome: list[BaseException | None] = []
        with psycopg.connect(PG_DSN) as rogue:
            # A writer that bypasses the append lock inserts seq 3 and has not committed: our
            # append's head check cannot see it, so only the unique key can stop it.
            rogue.execute(
                f'INSERT INTO "{schema}".events (position, stream_id, seq, recorded_at, kind, '
                "schema_version, payload, meta, prev_hash, hash) "
                "VALUES (pg_current_xact_id()::text::bigint << 20, 'u1', 3, '9999', %s, 1, %s, "
                "'', 'x', 'y')".encode(),
                (rogue_row.kind, rogue_row.payload),
            )

            def ours() -> None:
                try:
                    s.append("u1", batch(*mine), expected_seq=2)
                    outcome.append(None)
                except BaseException as e:
                    outcome.append(e)

            writer = threading.Thread(target=ours)
            writer.start()
            # Wait until our insert is blocked on the rogue's uncommitted seq 3.
            deadline = time.monotonic() + 10
            while not _admin(
                "SELECT 1 FROM pg_stat_activity WHERE application_name = %s "
                "AND wait_event_type = 'Lock'",
                (app,),
            ):
                assert time.monotonic() < deadline, "our append never waited on the key"
            rogue.commit()
            writer.join()
        # Check it is a conflict naming the stream, and nothing of ours was written: not even
        # a batch's later records, which the taken seq does not block (all or nothing).
        (error,) = outcome
        assert isinstance(error, ConcurrencyError)
        assert (error.stream_id, error.expected) == ("u1", 2)
        assert texts(s.read("u1")) == ["a", "b", "rogue"]


def _kill_backends(app: str) -> None:
    rows = _admin(
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = %s",
        (app,),
    )
    assert rows and all(r[0] for r in rows)


def test_reads_and_writes_recover_from_a_lost_connection_exactly_once(schema):
    from psycopg.conninfo import make_conninfo

    from eventlog.postgres import PostgresEventStore

    app = f"chatledger-test-{uuid.uuid4().hex[:8]}"
    with PostgresEventStore(make_conninfo(PG_DSN, application_name=app), schema=schema) as s:
        s.append("u1", batch("a"))
        # Check a read after the server dropped our connection succeeds on a retry.
        _kill_backends(app)
        assert texts(s.read("u1")) == ["a"]
        # Check an append on a dropped connection finds it did not land and lands it once.
        _kill_backends(app)
        (record,) = s.append("u1", batch("b"), expected_seq=1)
        assert record.seq == 2
        assert texts(s.read("u1")) == ["a", "b"]
        # Check a second server-side drop of every connection (a restart) is survived too.
        _kill_backends(app)
        s.append("u1", batch("c"))
        assert texts(s.read("u1")) == ["a", "b", "c"]


def test_read_retries_zero_surfaces_the_first_failure(schema):
    from psycopg.conninfo import make_conninfo

    from eventlog.postgres import PostgresEventStore

    app = f"chatledger-test-{uuid.uuid4().hex[:8]}"
    dsn = make_conninfo(PG_DSN, application_name=app)
    with PostgresEventStore(dsn, schema=schema, read_retries=0) as s:
        s.head("u1")
        _kill_backends(app)
        with pytest.raises(PersistenceError, match="reachable") as info:
            s.head("u1")
        assert info.value.operation == "head"


def test_purge_then_vacuum(store, schema):
    store.append("u1", batch("secret message", "b"))
    store.save_snapshot("u1", "w", 2, '{"secret":1}')
    tomb = store.purge("u1", expected_seq=2, reason="gdpr")
    store.vacuum()
    store.vacuum(full=True)
    # Check only the tombstone is left, in the table and among the snapshots.
    rows = _admin(f'SELECT seq, kind FROM "{schema}".events')
    assert rows == [(tomb.seq, "memory_purged")]
    assert _admin(f'SELECT count(*) FROM "{schema}".snapshots') == [(0,)]
    assert store.verify().ok


# ------------------------------------------------------------------ cached heads


@pytest.fixture(params=["pipelined", "sequential"])
def two_stores(request, schema):
    """Two store objects on one schema (as two processes would have), each with its own
    cached heads; `sequential` runs the append without pipeline mode (libpq < 14)."""
    from eventlog.postgres import PostgresEventStore

    with (
        PostgresEventStore(PG_DSN, schema=schema) as a,
        PostgresEventStore(PG_DSN, schema=schema) as b,
    ):
        for s in (a, b):
            s._pipelined = request.param == "pipelined"
        yield a, b


def test_stale_cached_head_is_a_conflict_then_appends_after_catching_up(two_stores):
    a, b = two_stores
    a.append("u1", batch("a"))  # a now caches head 1
    b.append("u1", batch("b"), expected_seq=1)
    # Check a's append on its stale head conflicts via the unique key and writes nothing.
    with pytest.raises(ConcurrencyError) as info:
        a.append("u1", batch("lost"), expected_seq=1)
    assert (info.value.stream_id, info.value.expected) == ("u1", 1)
    assert texts(b.read("u1")) == ["a", "b"]
    # Check the same stale expectation keeps failing (the store does not guess for the
    # caller), and that after catching up with head() the append lands on the real head.
    with pytest.raises(ConcurrencyError):
        a.append("u1", batch("lost"), expected_seq=1)
    head = a.head("u1")
    assert head is not None
    assert head.seq == 2
    (record,) = a.append("u1", batch("c"), expected_seq=head.seq)
    assert (record.seq, record.prev_hash) == (3, head.hash)
    # Check an expectation newer than the cached head is checked against the stored head.
    b.append("u1", batch("d"), expected_seq=3)
    assert a.append("u1", batch("e"), expected_seq=4)[0].seq == 5
    assert texts(a.read("u1")) == ["a", "b", "c", "d", "e"]
    assert a.verify().ok


def test_stale_cached_head_without_expected_seq_still_appends_after_the_real_head(two_stores):
    a, b = two_stores
    a.append("u1", batch("a", "b"))
    b.append("u1", batch("c"))
    # Check one record and a batch both chain to b's record, not to a's cached head.
    (one,) = a.append("u1", batch("d"))
    assert one.seq == 4
    b.append("u1", batch("e", "f"))
    two = a.append("u1", batch("g", "h"))
    assert [r.seq for r in two] == [7, 8]
    stored = a.read("u1")
    assert texts(stored) == ["a", "b", "c", "d", "e", "f", "g", "h"]
    assert [r.prev_hash for r in stored[1:]] == [r.hash for r in stored[:-1]]
    assert [r.position for r in two] == [r.position for r in stored[-2:]]
    assert a.verify().ok


def test_cached_head_whose_record_vanished_leaves_no_gap(store, schema):
    store.append("u1", batch("a", "b", "c"))
    # Behind the store's back (a restore, a hand edit), the cached head's record goes away.
    _admin(f'DELETE FROM "{schema}".events WHERE seq = 3')
    # Check the insert refused to chain to it: seq 3 is reused, linked to the stored seq 2.
    with pytest.raises(ConcurrencyError):
        store.append("u1", batch("x"), expected_seq=3)
    (record,) = store.append("u1", batch("d"))
    stored = store.read("u1")
    assert [r.seq for r in stored] == [1, 2, 3]
    assert record.prev_hash == stored[1].hash
    assert store.verify().ok


def test_cached_heads_are_bounded(store, monkeypatch):
    import eventlog.recorders.postgres_base

    monkeypatch.setattr(eventlog.recorders.postgres_base, "_HEADS_MAX", 2)
    for key in ("u1", "u2", "u3"):
        store.append(key, batch(key))
    store.head("u4")
    # Check only the newest entries are kept, and a forgotten stream still appends right.
    assert sorted(store._heads) == ["u3", "u4"]
    assert store.append("u1", batch("again"))[0].seq == 2
    assert store.verify().ok


def test_conflicts_on_a_caller_pool_leave_its_connections_clean(schema):
    from psycopg import pq
    from psycopg_pool import ConnectionPool

    from eventlog.postgres import PostgresEventStore

    # Not autocommit, one connection: a transaction left open would show up right away.
    with ConnectionPool(PG_DSN, min_size=1, max_size=1, open=True) as pool:
        with (
            PostgresEventStore(pool=pool, schema=schema) as a,
            PostgresEventStore(pool=pool, schema=schema) as b,
        ):
            a.append("u1", batch("a"))
            b.append("u1", batch("b"))
            with pytest.raises(ConcurrencyError):
                a.append("u1", batch("x"), expected_seq=1)
            assert a.append("u1", batch("c"))[0].seq == 3
            with pool.connection() as conn:
                assert conn.info.transaction_status == pq.TransactionStatus.IDLE
        with pool.connection() as conn:
            rows = conn.execute(f'SELECT seq FROM "{schema}".events ORDER BY seq'.encode())
            assert [r[0] for r in rows] == [1, 2, 3]


def test_threads_sharing_one_store_append_gaplessly_to_one_stream(store):
    threads, each = 4, 40
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def write(t: int) -> None:
        barrier.wait()
        try:
            for i in range(each):
                store.append("shared", batch(f"{t}:{i}") if i % 2 else batch(f"{t}:{i}", "x"))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    # Check no append without expected_seq failed although they raced on one cached head.
    assert errors == []
    stored = store.read("shared")
    assert [r.seq for r in stored] == list(range(1, threads * each * 3 // 2 + 1))
    assert store.verify().ok
    assert store.head("shared") == StreamHead(
        stored[-1].seq, stored[-1].hash, stored[-1].recorded_at_text
    )


# ------------------------------------------------------------------ multi-process


def _ordering_writer(args: tuple[str, int, int]) -> list[list[int]]:
    from eventlog.postgres import PostgresEventStore

    schema, writer, batches = args
    positions = []
    with PostgresEventStore(PG_DSN, schema=schema, create_schema=False) as s:
        for i in range(batches):
            records = s.append(
                f"w{writer}-{i % 3}", batch(*[f"{writer}:{i}:{k}" for k in range(1 + i % 3)])
            )
            positions.append([r.position for r in records])
    return positions


def test_positions_commit_in_order_for_a_tailing_reader(store, schema):
    writers, batches = 2, 150
    seen: list[int] = []
    done = threading.Event()

    def tail() -> None:
        last = 0
        while True:
            finished = done.is_set()
            page = store.read_all(gt=last)
            seen.extend(r.position for r in page)
            if page:
                last = page[-1].position
            elif finished:
                return

    reader = threading.Thread(target=tail)
    reader.start()
    try:
        with multiprocessing.get_context("spawn").Pool(writers) as pool:
            results = pool.map(_ordering_writer, [(schema, w, batches) for w in range(writers)])
        # The tailer may stop at its next empty page: first wait until the global order
        # shows every record (another session's transaction can hold the last ones back).
        settled(store)
    finally:
        done.set()
        reader.join()
    # Check the tailer saw strictly increasing positions, and no gap was filled later: what
    # it saw while writers were running is everything that exists.
    assert all(a < b for a, b in itertools.pairwise(seen))
    assert seen == [r.position for r in store.read_all()]
    # Check no batch was interleaved with another writer's records.
    for positions in (p for result in results for p in result):
        assert positions == list(range(positions[0], positions[0] + len(positions)))
    assert len(seen) == writers * sum(1 + i % 3 for i in range(batches))


def _contended_writer(args: tuple[str, int, int, bool]) -> int:
    from eventlog.postgres import PostgresEventStore

    schema, writer, count, shared = args
    memory_id = "shared" if shared else f"own-{writer}"
    conflicts = 0
    with PostgresEventStore(PG_DSN, schema=schema, create_schema=False) as s:
        for i in range(count):
            while True:
                head = s.head(memory_id)
                try:
                    s.append(
                        memory_id, [added(f"{writer}:{i}")], expected_seq=head.seq if head else 0
                    )
                    break
                except ConcurrencyError:
                    conflicts += 1
    return conflicts


@pytest.mark.slow
def test_load_four_processes_shared_and_separate_streams(store, schema):
    writers, count = 4, 150
    with multiprocessing.get_context("spawn").Pool(writers * 2) as pool:
        jobs = [(schema, w, count, True) for w in range(writers)]
        jobs += [(schema, w, count, False) for w in range(writers)]
        pool.map(_contended_writer, jobs)
    # Check nothing was lost on the shared stream and its seqs are gapless.
    shared = store.read("shared")
    assert [r.seq for r in shared] == list(range(1, writers * count + 1))
    # Check every writer's records are in its own order, on the shared and its own stream.
    for w in range(writers):
        mine = [t for t in texts(shared) if t.startswith(f"{w}:")]
        assert mine == [f"{w}:{i}" for i in range(count)]
        assert texts(store.read(f"own-{w}")) == [f"{w}:{i}" for i in range(count)]
    everything = store.read_all()
    assert len(everything) == 2 * writers * count
    assert all(a.position < b.position for a, b in itertools.pairwise(everything))
    report = store.verify()
    assert report.ok
    assert report.records == 2 * writers * count


def test_appends_read_a_fresh_head_even_when_the_default_isolation_is_serializable(schema):
    from psycopg.conninfo import make_conninfo

    from eventlog.postgres import PostgresEventStore

    dsn = make_conninfo(PG_DSN, options="-c default_transaction_isolation=serializable")
    stores = [PostgresEventStore(dsn, schema=schema) for _ in range(3)]
    errors: list[BaseException] = []

    def write(s) -> None:
        try:
            for i in range(30):
                s.append("shared", batch(str(i)))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Check no append without expected_seq failed: each chained to the head committed before it.
    assert errors == []
    assert [r.seq for r in stores[0].read("shared")] == list(range(1, 91))
    for s in stores:
        s.close()


def test_tombstone_counts_the_erased_events(store):
    import json

    store.append("u1", batch("a", "b", "c"))
    tomb = store.purge("u1", expected_seq=3, reason="x")
    assert json.loads(tomb.payload)["event_count"] == 3


def test_a_format_1_schema_migrates_and_keeps_verifying(schema):
    from eventlog.hashing import GENESIS, chain_hash
    from eventlog.postgres import MIGRATIONS, PostgresEventStore

    # The schema as the format 1 code left it: migration 0 only, with format 1 rows.
    _admin(f'CREATE SCHEMA "{schema}"')
    _admin(
        f'CREATE TABLE "{schema}".eventlog_migrations (version integer PRIMARY KEY, '
        "applied_at timestamptz NOT NULL DEFAULT now())"
    )
    _admin(MIGRATIONS[0].replace("{schema}", f'"{schema}"'))
    _admin(f'INSERT INTO "{schema}".eventlog_migrations (version) VALUES (0)')
    prev = GENESIS
    for seq, text in enumerate(["a", "b"], 1):
        when = f"2025-01-01T00:00:0{seq}.000000Z"
        payload = added(text).payload
        digest = chain_hash(prev, "u1", seq, "message_added", 1, when, payload, "")
        _admin(
            f'INSERT INTO "{schema}".events (stream_id, seq, recorded_at, kind, schema_version, '
            "payload, meta, prev_hash, hash) VALUES (%s, %s, %s, %s, 1, %s, '', %s, %s)",
            ("u1", seq, when, "message_added", payload, prev, digest),
        )
        prev = digest
    with PostgresEventStore(PG_DSN, schema=schema) as store:
        # Check old rows read as format 1, verify, and the chain continues in format 2.
        assert [(r.format, r.salt, r.commitment) for r in store.read("u1")] == [(1, "", "")] * 2
        old_last = store.read_all()[-1].position
        (new,) = store.append("u1", batch("c"))
        assert new.format == 2
        # Check the positions from transaction ids (migration 2) follow the identity ones, so a
        # tailer that stopped at the last old record goes on with the new one.
        assert new.position > old_last
        assert [r.position for r in settled(store).read_all(gt=old_last)] == [new.position]
        assert store.verify().ok
        assert texts(store.read("u1")) == ["a", "b", "c"]
