"""PostgreSQL under real faults: connections terminated by the server while appends run.

An append whose connection dies around COMMIT has an unknown outcome on the client; the store
resolves it by asking the server for its records' hashes, so every append lands exactly once or
raises with nothing stored, and a caller's plain retry never duplicates a message.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

import pytest
from psycopg.conninfo import make_conninfo

from eventlog import PersistenceError
from eventlog.errors import OutcomeUnknownError
from eventlog.testing.records import batch, texts
from tests.conftest import PG_DSN
from tests.eventlog.test_postgres import _drop, _pg  # noqa: F401 - _pg is a fixture

pytestmark = pytest.mark.usefixtures("_pg")


def _terminate(app: str) -> int:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (app,),
        ).fetchall()
    return sum(1 for (done,) in rows if done)


def test_connections_killed_every_50_ms_never_duplicate_or_lose_an_append():
    from eventlog.postgres import PostgresEventStore

    app = f"chatledger-faults-{uuid.uuid4().hex[:8]}"
    schema = f"t_{uuid.uuid4().hex[:12]}"
    store = PostgresEventStore(make_conninfo(PG_DSN, application_name=app), schema=schema)
    stop = threading.Event()
    killed = 0

    def killer() -> None:
        nonlocal killed
        while not stop.is_set():
            killed += _terminate(app)
            time.sleep(0.05)

    ok: list[str] = []
    unknown: list[str] = []
    errors: list[tuple[str, str]] = []
    caller_retries = 0
    thread = threading.Thread(target=killer, daemon=True)
    try:
        thread.start()
        # Until 300 appends landed or 20 s passed: a loaded machine makes fewer in that time.
        deadline = time.monotonic() + 20.0
        i = 0
        while time.monotonic() < deadline and len(ok) < 300:
            text = f"m{i}"
            for _ in range(50):  # the caller's usual retry: append again after an error
                try:
                    store.append("conv", batch(text))
                except OutcomeUnknownError:
                    unknown.append(text)  # the store says: do not retry blindly
                    break
                except PersistenceError as e:
                    caller_retries += 1
                    errors.append((text, str(e)[-400:]))
                    continue
                ok.append(text)
                break
            i += 1
        stop.set()
        thread.join()
        stored = texts(store.read("conv"))
        # Check every message the caller saw succeed is stored exactly once, nothing else is
        # stored, the chain is intact, and the kills really hit (not a quiet run).
        counts = Counter(stored)
        dups = [t for t, n in counts.items() if n > 1]
        assert dups == [], [e for e in errors if e[0] in dups]
        # Every OK append is stored once, in order; the only others are appends whose outcome
        # the store said it could not learn (the server killed every connection it opened).
        assert [t for t in stored if t not in unknown] == ok
        assert len(unknown) <= 2, unknown
        assert store.verify().ok
        assert killed >= 10, killed
        assert len(ok) >= 10, len(ok)
    finally:
        stop.set()
        store.close()
        _drop(schema)


def test_every_wait_is_bounded_by_default_and_the_error_names_the_append_lock():
    import psycopg

    from eventlog.ids import memory_key
    from eventlog.postgres import DEFAULT_STATEMENT_TIMEOUT, PostgresEventStore
    from eventlog.recorders.postgres_sql import stream_lock_key

    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        # Check a store opened with defaults bounds its statements (the server default is 0).
        with PostgresEventStore(PG_DSN, schema=schema) as store:
            shown = store._read("test", lambda c: c.execute("SHOW statement_timeout").fetchone())
            assert shown == (f"{round(DEFAULT_STATEMENT_TIMEOUT)}s",)
        # Check an append behind a stalled transaction holding the append lock gives up, says
        # what it waited for, and stores nothing.
        with PostgresEventStore(PG_DSN, schema=schema, statement_timeout=0.3) as store:
            store.append("u1", batch("a"))
            with psycopg.connect(PG_DSN) as stalled:
                lock = stream_lock_key(schema, memory_key("u1"))
                stalled.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
                started = time.monotonic()
                with pytest.raises(PersistenceError, match=r"append lock.*pg_stat_activity"):
                    store.append("u1", batch("b"))
                assert time.monotonic() - started < 3
                stalled.rollback()
            assert texts(store.read("u1")) == ["a"]
    finally:
        _drop(schema)


def test_appends_succeed_right_after_every_pooled_connection_died():
    # What a server restart or a failover does to a client: every pooled connection is gone.
    # The server itself is never restarted here (other tests and jobs share it): the server
    # terminates each of this store's connections, as a restart would.
    from eventlog.postgres import PostgresEventStore

    app = f"chatledger-faults-{uuid.uuid4().hex[:8]}"
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        conninfo = make_conninfo(PG_DSN, application_name=app)
        with PostgresEventStore(conninfo, schema=schema) as store:
            # Four pooled connections open, as a busy store has them.
            threads = [
                threading.Thread(target=lambda i=i: store.append(f"m{i}", batch("a")))
                for i in range(4)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert _terminate(app) >= 2  # the pool kept more than one
            # Check each of the next appends succeeds at once, though every pooled connection
            # died, and each landed exactly once.
            for i in range(4):
                store.append(f"m{i}", batch("b"))
            for i in range(4):
                assert texts(store.read(f"m{i}")) == ["a", "b"]
            assert store.verify().ok
    finally:
        _drop(schema)
