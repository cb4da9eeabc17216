"""PostgresEventStore's edges the mutation run of its recorder modules found untested (real
PostgreSQL, no mocks; each test in its own schema, dropped afterwards)."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator

import pytest

from eventlog.testing.records import batch, texts
from tests.conftest import PG_DSN, require_pg

pytestmark = pytest.mark.usefixtures("_pg")


@pytest.fixture
def _pg() -> None:
    require_pg()


@pytest.fixture
def schema() -> Iterator[str]:
    import psycopg
    from psycopg import sql

    name = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def test_one_connection_is_enough(schema):
    from eventlog.postgres import PostgresEventStore

    # Check max_connections=1 is accepted (0 is not) and serves appends and reads.
    with PostgresEventStore(PG_DSN, schema=schema, max_connections=1) as store:
        store.append("u1", batch("a", "b"))
        assert texts(store.read("u1")) == ["a", "b"]
        assert store.verify().ok
    with pytest.raises(ValueError, match="max_connections=0"):
        PostgresEventStore(PG_DSN, schema=schema, max_connections=0)


def _admin(query: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        cur = conn.execute(query.encode(), params)
        return cur.fetchall() if cur.description else []


def test_a_schema_one_version_newer_is_refused(schema):
    from eventlog import SchemaVersionError
    from eventlog.postgres import MIGRATIONS, PostgresEventStore

    PostgresEventStore(PG_DSN, schema=schema).close()
    newer = len(MIGRATIONS)  # the first version this chatledger does not know
    _admin(f'INSERT INTO "{schema}".eventlog_migrations (version) VALUES (%s)', (newer,))
    for create in (True, False):
        with pytest.raises(SchemaVersionError, match=str(newer)) as info:
            PostgresEventStore(PG_DSN, schema=schema, create_schema=create)
        # Check the error names the newest version this chatledger reads.
        assert (info.value.found, info.value.supported) == (newer, newer - 1)


def test_a_ledger_from_before_seals_is_sealed_by_a_writable_open(schema):
    from eventlog.keycheck import HEADS_SEALED
    from eventlog.postgres import PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema) as store:
        store.append("u1", batch("a", "b", "c"))
    # What migration 3 leaves on a ledger written before head seals: blank seals, and no
    # setting saying the heads were ever sealed.
    _admin(f"UPDATE \"{schema}\".heads SET mac = ''")
    _admin(f'DELETE FROM "{schema}".settings WHERE name = %s', (HEADS_SEALED,))
    with PostgresEventStore(PG_DSN, schema=schema, read_only=True) as reader:
        assert texts(reader.read("u1")) == ["a", "b", "c"]  # a read-only open seals nothing
    assert _admin(f'SELECT mac FROM "{schema}".heads') == [("",)]
    # Check the first writable open seals every head and says so.
    with PostgresEventStore(PG_DSN, schema=schema) as store:
        assert store.verify().ok
    ((mac,),) = _admin(f'SELECT mac FROM "{schema}".heads')
    assert mac != ""
    setting = f'SELECT value FROM "{schema}".settings WHERE name = %s'
    assert _admin(setting, (HEADS_SEALED,)) != []
    # Check the seal now guards the tail: a deleted newest record is refused.
    _admin(f"DELETE FROM \"{schema}\".events WHERE stream_id = 'u1' AND seq = 3")
    with PostgresEventStore(PG_DSN, schema=schema) as store:
        assert store.verify("u1").first_bad_seq("u1") is not None


def test_an_empty_migrations_table_is_not_taken_for_an_up_to_date_schema(schema):
    from eventlog import PersistenceError
    from eventlog.postgres import MIGRATIONS, PostgresEventStore

    # A schema someone prepared by hand: the migrations table exists, with no version in it.
    _admin(f'CREATE SCHEMA "{schema}"')
    _admin(
        f'CREATE TABLE "{schema}".eventlog_migrations (version integer PRIMARY KEY, '
        "applied_at timestamptz NOT NULL DEFAULT now())"
    )
    missing = str(list(range(len(MIGRATIONS))))
    with pytest.raises(PersistenceError, match=rf"lacks eventlog migrations {re.escape(missing)}"):
        PostgresEventStore(PG_DSN, schema=schema, create_schema=False)
    # Check setup applies every migration and the store works.
    with PostgresEventStore(PG_DSN, schema=schema) as store:
        store.append("u1", batch("a"))
        assert texts(store.read("u1")) == ["a"]
    rows = _admin(f'SELECT version FROM "{schema}".eventlog_migrations ORDER BY version')
    assert [r[0] for r in rows] == list(range(len(MIGRATIONS)))


def test_a_missing_middle_migration_is_found_although_the_newest_is_applied(schema):
    from eventlog import PersistenceError
    from eventlog.postgres import MIGRATIONS, PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema) as store:
        store.append("u1", batch("a"))
    # Migration 4 (the ledger tree's blocks) undone: the newest version is still recorded.
    _admin(f'DROP TABLE "{schema}".ledger_blocks')
    _admin(f'DELETE FROM "{schema}".eventlog_migrations WHERE version = 4')
    assert len(MIGRATIONS) > 5
    with pytest.raises(PersistenceError, match=r"lacks eventlog migrations \[4\]"):
        PostgresEventStore(PG_DSN, schema=schema, create_schema=False)
    # Check setup applies just that one again, and the digest (which stores blocks) works.
    with PostgresEventStore(PG_DSN, schema=schema) as store:
        assert store.digest()
        assert texts(store.read("u1")) == ["a"]
    rows = _admin(f'SELECT version FROM "{schema}".eventlog_migrations ORDER BY version')
    assert [r[0] for r in rows] == list(range(len(MIGRATIONS)))


def test_a_first_keyed_open_waits_for_an_insert_in_flight(schema):
    import psycopg

    from eventlog import PersistenceError
    from eventlog.postgres import PostgresEventStore

    key = b"k" * 32
    PostgresEventStore(PG_DSN, schema=schema).close()  # set up, unkeyed and empty
    # Another writer is inside a transaction that may insert into the events table.
    with psycopg.connect(PG_DSN) as writer:
        writer.execute(f'LOCK TABLE "{schema}".events IN ROW EXCLUSIVE MODE'.encode())
        # Check the open that writes the key check waits for it (here: until its timeout),
        # instead of keying a ledger a record may still land in unkeyed.
        with pytest.raises(PersistenceError, match="statement_timeout") as info:
            PostgresEventStore(PG_DSN, schema=schema, chain_key=key, statement_timeout=0.3)
        assert info.value.operation == "open"
        writer.rollback()
    with PostgresEventStore(PG_DSN, schema=schema, chain_key=key) as store:
        store.append("u1", batch("a"))
        assert store.verify().ok


def test_cleanup_is_pending_after_an_erase_or_purge_until_a_full_vacuum(schema):
    from eventlog.postgres import PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema) as store:
        store.append("u1", batch("a"))
        assert not store.cleanup_pending
        store.vacuum()
        assert not store.cleanup_pending  # nothing was pending: a plain vacuum leaves it so
        receipt = store.erase("u1", reason="asked")
        # Check an erasure says its dead row versions are still in the table files...
        assert receipt.cleanup_pending and store.cleanup_pending
        store.vacuum()
        assert store.cleanup_pending  # ...which a plain VACUUM does not rewrite...
        store.vacuum(full=True)
        assert not store.cleanup_pending  # ...and VACUUM FULL does.
    with PostgresEventStore(PG_DSN, schema=schema) as store:
        store.append("u2", batch("b"))
        store.purge("u2", expected_seq=1, reason="retention")
        assert store.cleanup_pending  # a purge's deleted rows too
        store.vacuum(full=True)
        assert not store.cleanup_pending


def test_erasing_an_empty_memory_at_seq_0_is_nothing_to_erase_not_a_conflict(schema):
    from eventlog import ConcurrencyError
    from eventlog.postgres import PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema) as store:
        # Check the empty memory's seq is 0: the caller who expects that is right, and told
        # there is nothing to erase; one who expects a record is told of the conflict.
        with pytest.raises(ValueError, match="nothing to erase"):
            store.erase("nobody", reason="asked", expected_seq=0)
        with pytest.raises(ConcurrencyError) as info:
            store.erase("nobody", reason="asked", expected_seq=1)
        assert (info.value.expected, info.value.actual) == (1, 0)


@pytest.mark.parametrize("expected_seq", [0, 2], ids=["behind", "ahead"])
def test_an_expectation_other_than_the_cached_head_is_refused(schema, expected_seq):
    from eventlog import ConcurrencyError
    from eventlog.postgres import PostgresEventStore
    from eventlog.recorders.postgres_base import _CONTENDED_FOR

    with PostgresEventStore(PG_DSN, schema=schema) as store:
        store.append("u1", batch("a"))  # the store now caches head 1
        # The first append of a memory marks it contended for a while (its cache was empty);
        # past that, appends chain to the cached head in one statement.
        time.sleep(_CONTENDED_FOR * 1.2)
        # Check a caller expecting another head is told the real one, and nothing lands -
        # the cached head is not chained to against the caller's expectation.
        with pytest.raises(ConcurrencyError) as info:
            store.append("u1", batch("b"), expected_seq=expected_seq)
        assert (info.value.expected, info.value.actual) == (expected_seq, 1)
        assert texts(store.read("u1")) == ["a"]


def test_the_contended_memories_and_erased_marks_are_bounded(schema, monkeypatch):
    import eventlog.recorders.postgres_base
    from eventlog.postgres import PostgresEventStore

    monkeypatch.setattr(eventlog.recorders.postgres_base, "_HEADS_MAX", 2)
    with PostgresEventStore(PG_DSN, schema=schema) as store:
        for key in ("u1", "u2", "u3"):
            store.append(key, batch(key))
        # Check the memories marked contended (another writer got in first) are bounded: the
        # third finds the bound reached and starts over.
        store._contended.clear()
        for key in ("u1", "u2", "u3"):
            store._contend(key)
            assert len(store._contended) <= 2
        assert list(store._contended) == ["u3"]
        # Check the erased marks beside the heads stay within twice the bound too.
        for key in ("u4", "u5", "u6", "u7"):
            store.head(key)
            assert len(store._erased) <= 4
        assert store.append("u1", batch("again"))[0].seq == 2
        assert store.verify().ok


@pytest.mark.parametrize(("seconds", "shown"), [(2.5, "2500ms"), (7, "7s")])
def test_statement_timeout_is_set_on_the_stores_connections(schema, seconds, shown):
    from eventlog.postgres import PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema, statement_timeout=seconds) as store:
        # Check the store's own connections carry it, in milliseconds.
        row = store._read("read", lambda conn: conn.execute("SHOW statement_timeout").fetchone())
        assert row == (shown,)


def test_read_all_returns_at_once_when_its_own_records_are_seen(schema, monkeypatch):
    import eventlog.recorders.postgres_reads
    from eventlog.postgres import PostgresEventStore

    # A long settle wait: waiting for it at all would show.
    monkeypatch.setattr(eventlog.recorders.postgres_reads, "_SETTLE_WAIT", 30.0)
    with PostgresEventStore(PG_DSN, schema=schema) as store:
        store.append("u1", batch("a", "b"))
        started = time.monotonic()
        # Check a read_all that sees the store's own newest record does not wait for more.
        assert texts(store.read_all()) == ["a", "b"]
        assert texts(store.read_all(gt=0, limit=5)) == ["a", "b"]
        assert store.read_all(limit=0) == []  # a page of none, as read(limit=0)
        assert time.monotonic() - started < 10


def test_read_all_waits_for_its_own_append_held_back_by_an_older_transaction(schema, monkeypatch):
    import threading

    import psycopg

    import eventlog.recorders.postgres_reads
    from eventlog.postgres import PostgresEventStore

    monkeypatch.setattr(eventlog.recorders.postgres_reads, "_SETTLE_WAIT", 30.0)
    with PostgresEventStore(PG_DSN, schema=schema) as store, psycopg.connect(PG_DSN) as older:
        # A transaction with an id, begun before the append: read_all's watermark stays below
        # it, so the append's record is not returned until that transaction ends.
        older.execute("SELECT pg_current_xact_id()")
        (record,) = store.append("u1", batch("a"))
        ender = threading.Timer(0.3, older.commit)
        ender.start()
        try:
            # Check read_all waits for the store's own record (within _SETTLE_WAIT) rather
            # than return without it.
            assert [r.position for r in store.read_all()] == [record.position]
        finally:
            ender.join()


def test_a_timed_out_read_does_not_blame_a_lock_only_writes_wait_for(schema):
    import psycopg

    from eventlog.postgres import PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema, statement_timeout=0.3) as s:
        canceled = psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
        with psycopg.connect(PG_DSN) as holder:
            holder.execute(f'LOCK TABLE "{schema}".events IN SHARE MODE'.encode())
            # Check a SHARE lock (which blocks inserts, not reads) is named for a write only.
            assert f"a Share lock on table {schema}.events" in s._detail(canceled, "append", ["u1"])
            read = s._detail(canceled, "read", ())
            assert "Share lock" not in read
            assert "no lock is held against it now" in read
            holder.rollback()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"statement_timeout": -1}, ValueError, r"statement_timeout must be seconds in \(0, "),
        ({"statement_timeout": 0}, ValueError, "pass None for no timeout"),
        ({"statement_timeout": float("nan")}, ValueError, "not nan"),
        ({"statement_timeout": float("inf")}, ValueError, "not inf"),
        ({"statement_timeout": "5"}, TypeError, "not str '5'"),
        ({"statement_timeout": True}, TypeError, "not bool True"),
        ({"schema": ""}, ValueError, "1 to 63 bytes"),
        ({"schema": "s" * 64}, ValueError, "1 to 63 bytes"),
        ({"schema": "\x00"}, ValueError, "no NUL"),
        ({"schema": None}, TypeError, "schema must be a str, not NoneType"),
        ({"read_retries": -1}, ValueError, "read_retries=-1; pass an int >= 0"),
        ({"max_connections": "8"}, ValueError, "max_connections='8'; pass an int >= 1"),
    ],
    ids=["timeout-negative", "timeout-zero", "timeout-nan", "timeout-inf", "timeout-str",
         "timeout-bool", "schema-empty", "schema-64", "schema-nul", "schema-none",
         "retries-negative", "connections-str"],
)  # fmt: skip
def test_arguments_the_store_cannot_use_are_refused_before_connecting(kwargs, error, match):
    """Before: a nan, inf, str or huge timeout made every pooled connection fail for 5 s and
    then read "connect failed"; -1 and 0 became a 1 ms timeout on every statement; a schema
    name past 63 bytes was cut by PostgreSQL (two stores sharing the first 63 bytes shared
    one schema); an empty one failed as SQL; read_retries=-1 was taken as 0."""
    from eventlog.postgres import PostgresEventStore

    started = time.monotonic()
    with pytest.raises(error, match=match):
        PostgresEventStore(PG_DSN, **kwargs)
    assert time.monotonic() - started < 4  # refused, not after the pool's 5 s wait


def test_two_long_schema_names_that_share_63_bytes_are_not_one_schema() -> None:
    from eventlog.postgres import PostgresEventStore

    base = f"t_{uuid.uuid4().hex}" + "x" * 40
    assert len(base) == 74
    with pytest.raises(ValueError, match="1 to 63 bytes"):
        PostgresEventStore(PG_DSN, schema=base + "a")
    try:
        with PostgresEventStore(PG_DSN, schema=base[:63]) as store:  # at the limit: as given
            store.append("u1", batch("a"))
            assert texts(store.read("u1")) == ["a"]
        assert _admin("SELECT 1 FROM pg_namespace WHERE nspname = %s", (base[:63],)) == [(1,)]
    finally:
        _admin(f'DROP SCHEMA IF EXISTS "{base[:63]}" CASCADE')
