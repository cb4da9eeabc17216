"""PostgresEventStore against what operators and database users do to it by hand: derived
tables dropped, connections terminated in the middle of an erasure, session settings that
refuse or cancel its statements (real PostgreSQL, no mocks; each test in its own schema,
dropped afterwards)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from eventlog.testing.records import batch, settled
from tests.conftest import PG_DSN, require_pg

pytestmark = pytest.mark.usefixtures("_pg")


@pytest.fixture
def _pg() -> None:
    require_pg()


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        _admin(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _admin(query: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        cur = conn.execute(query.encode(), params)
        return cur.fetchall() if cur.description else []


def _blocks(schema: str) -> int | None:
    """Rows of the schema's ledger_blocks table, None when the table is missing."""
    (exists,) = _admin("SELECT to_regclass(%s) IS NOT NULL", (f'"{schema}".ledger_blocks',))[0]
    if not exists:
        return None
    (count,) = _admin(f'SELECT count(*) FROM "{schema}".ledger_blocks')[0]
    assert isinstance(count, int)
    return count


def _same(a: object, b: object) -> bool:
    """Two digests of one log (their ``recorded_at`` says when each was taken)."""
    return [getattr(a, f) for f in ("size", "root", "last_position")] == [
        getattr(b, f) for f in ("size", "root", "last_position")
    ]


# ------------------------------------------------------------------ derived data dropped


@pytest.mark.parametrize("chain_key", [None, b"k" * 32], ids=["unkeyed", "keyed"])
def test_ledger_blocks_dropped_by_hand_is_rebuilt_from_the_records(schema, chain_key):
    from eventlog import verify_inclusion
    from eventlog.postgres import PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema, chain_key=chain_key) as store:
        for i in range(600):
            store.append(f"m{i % 3}", batch(f"x{i}"))
        before = settled(store).digest()
    assert _blocks(schema) == 2
    _admin(f'DROP TABLE "{schema}".ledger_blocks')
    # Check a read-only open and an open that may not migrate take the tree from the records
    # (the table is derived data): the same digest, proofs that verify against it, a purge.
    with PostgresEventStore(PG_DSN, schema=schema, chain_key=chain_key, read_only=True) as ro:
        assert _same(ro.digest(), before)
        assert verify_inclusion(ro.prove("m1", 7), before, chain_key=chain_key)
    with PostgresEventStore(PG_DSN, schema=schema, chain_key=chain_key, create_schema=False) as s:
        assert _same(s.digest(), before)
        assert verify_inclusion(s.prove("m2", 3), before, chain_key=chain_key)
        s.purge("m2", expected_seq=200, reason="retention")
        assert settled(s).digest().size == 401
        assert s.verify().ok
    assert _blocks(schema) is None  # neither of them created a table
    # Check a writable open (the default, which applies migrations) puts the table back and
    # the next digest stores its blocks there again.
    with PostgresEventStore(PG_DSN, schema=schema, chain_key=chain_key) as store:
        assert _blocks(schema) == 0
        after = settled(store).digest()
        assert after.size == 401
        assert store.verify(digest=after).ok
    assert _blocks(schema) == 1


def test_ledger_blocks_dropped_while_a_store_is_open_does_not_break_it(schema):
    from eventlog.postgres import PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema) as store:
        for i in range(300):
            store.append(f"m{i % 2}", batch(f"x{i}"))
        settled(store)
        _admin(f'DROP TABLE "{schema}".ledger_blocks')
        # Check digest (its first, so the tree is loaded now), a purge and a later digest of a
        # store opened before the drop still work.
        assert store.digest().size == 300
        store.purge("m1", expected_seq=150, reason="retention")
        assert settled(store).digest().size == 151
        assert store.verify().ok


# ------------------------------------------------------------------ another session's transaction


@pytest.fixture
def held_transaction() -> Iterator[None]:
    """Another session of the server holds a transaction that wrote (it has a transaction id)
    open: the global order's watermark stays below it until it ends."""
    import psycopg

    with psycopg.connect(PG_DSN) as other:
        other.execute("SELECT pg_current_xact_id()")
        yield
        other.rollback()


def test_a_receipt_is_found_while_another_session_holds_a_transaction(schema, held_transaction):
    from eventlog import find_receipt
    from eventlog.postgres import PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema) as store:
        store.append(("alice", "s1"), batch("hello", "secret"))
        receipt = store.erase(("alice", "s1"), reason="GDPR request")
        # Check the receipt's id finds it at once, in this store and in a new store object,
        # though read_all still holds it back (the id names its position and hash).
        assert store.read_all() == []
        for where in (store, PostgresEventStore(PG_DSN, schema=schema, read_only=True)):
            found = find_receipt(where, receipt.id)
            assert (found.id, found.event) == (receipt.id, receipt.event)
            with pytest.raises(LookupError, match="no such receipt"):
                find_receipt(where, f"{receipt.record.position}-{'0' * 64}")
            where.close()


def test_verify_of_an_adopted_key_is_not_fooled_by_another_sessions_transaction(
    schema, held_transaction
):
    from eventlog.postgres import PostgresEventStore

    key = b"k" * 32
    with PostgresEventStore(PG_DSN, schema=schema) as store:
        store.append("u1", batch("a", "b"))
    with PostgresEventStore(PG_DSN, schema=schema, chain_key=key, adopt_key=True) as keyed:
        keyed.append("u1", batch("c"))
    # Check verify() finds the sealed legacy prefix (committed, though the global order still
    # holds it back) instead of reporting it removed by someone without the key.
    with PostgresEventStore(PG_DSN, schema=schema, chain_key=key) as store:
        report = store.verify()
        assert report.ledger_problems == ()
        assert report.ok and report.legacy_records == 2
        # Check an unkeyed record forged in anyway is still reported.
        _admin(
            f'INSERT INTO "{schema}".events (position, stream_id, seq, recorded_at, kind, '
            "schema_version, payload, meta, prev_hash, hash) SELECT 1, 'x', 1, recorded_at, "
            f'kind, schema_version, payload, meta, prev_hash, hash FROM "{schema}".events '
            "WHERE stream_id = 'u1' AND seq = 1"
        )
        (problem,) = store.verify().ledger_problems
        assert "3 found, 2 sealed" in problem


# ------------------------------------------------------------------ schema names


def test_schema_names_postgresql_would_truncate_are_refused_not_merged(schema):
    from eventlog.postgres import PostgresEventStore

    # PostgreSQL cuts identifiers to 63 bytes: these two names would be one schema, and two
    # stores meant to stay apart would read and write each other's memories.
    long_a, long_b = schema + "x" * 60 + "A", schema + "x" * 60 + "B"
    try:
        for name in (long_a, long_b, "é" * 32, ""):
            with pytest.raises(ValueError, match=r"schema .* 1 to 63 bytes") as caught:
                PostgresEventStore(PG_DSN, schema=name)
            assert repr(name)[:40] in str(caught.value)
        found = _admin("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (schema + "%",))
        assert found == []
        # Check 63 bytes is accepted, and two such schemas stay apart.
        a, b = schema + "a" * (63 - len(schema)), schema + "b" * (63 - len(schema))
        with PostgresEventStore(PG_DSN, schema=a) as sa, PostgresEventStore(PG_DSN, schema=b) as sb:
            sa.append("m", batch("from a"))
            sb.append("m", batch("from b"))
            assert [r.seq for r in sa.read("m")] == [1]
            assert [r.seq for r in sb.read("m")] == [1]
    finally:
        for (name,) in _admin(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (schema + "_%",)
        ):
            _admin(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


# ------------------------------------------------------------------ session settings


def test_a_read_only_session_says_so_and_how_to_write_or_read(schema):
    from psycopg.conninfo import make_conninfo

    from eventlog import PersistenceError
    from eventlog.postgres import PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema) as store:
        store.append("m", batch("a"))
    # What a replica-like connection gives: the server refuses every write of the session.
    replica = make_conninfo(PG_DSN, options="-c default_transaction_read_only=on")
    remedy = r"accepts no writes.*primary.*read_only=True"
    # Check an append and a first open that must migrate name the remedy, and store nothing.
    with (
        PostgresEventStore(replica, schema=schema) as store,
        pytest.raises(PersistenceError, match=r"append failed.*" + remedy),
    ):
        store.append("m", batch("b"))
    with PostgresEventStore(PG_DSN, schema=schema, read_only=True) as reader:
        assert [r.seq for r in reader.read("m")] == [1]
    with pytest.raises(PersistenceError, match=r"setup failed.*" + remedy):
        PostgresEventStore(replica, schema=schema + "_new")
    # Check a read-only store reads there.
    with PostgresEventStore(replica, schema=schema, read_only=True) as reader:
        assert [r.seq for r in reader.read("m")] == [1]


# ------------------------------------------------------------------ connections lost


def _stall_commits(schema: str) -> None:
    """Make every commit that moves a head seal take a second (a deferred constraint trigger
    sleeping at COMMIT), so a test can terminate the backend while it commits."""
    _admin(
        f'CREATE FUNCTION "{schema}".stall() RETURNS trigger LANGUAGE plpgsql '
        "AS $$ BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$"
    )
    _admin(
        f'CREATE CONSTRAINT TRIGGER stall AFTER INSERT OR UPDATE ON "{schema}".heads '
        f'DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "{schema}".stall()'
    )


@pytest.mark.parametrize("operation", ["erase", "purge"])
def test_an_erasure_whose_connection_dies_in_its_commit_asks_the_server_if_it_landed(
    schema, operation
):
    import threading
    import time

    from psycopg.conninfo import make_conninfo

    from eventlog.errors import OutcomeUnknownError, PersistenceError
    from eventlog.postgres import PostgresEventStore

    app = f"chatledger-op-{uuid.uuid4().hex[:8]}"
    with PostgresEventStore(make_conninfo(PG_DSN, application_name=app), schema=schema) as store:
        store.append("m", batch("secret", "more"))
        _stall_commits(schema)

        def terminate() -> None:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if _admin(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s AND wait_event = 'PgSleep'",
                    (app,),
                ):
                    return
                time.sleep(0.01)

        killer = threading.Thread(target=terminate)
        killer.start()
        # Check the store asked the server (as for a lost append) instead of leaving the
        # caller an unknown outcome: here it did not land, and the error says so and that a
        # plain retry is the remedy.
        with pytest.raises(PersistenceError, match=r"during its COMMIT.*did not land") as lost:
            if operation == "erase":
                store.erase("m", reason="GDPR request")
            else:
                store.purge("m", expected_seq=2, reason="retention")
        assert not isinstance(lost.value, OutcomeUnknownError)
        assert "run it again" in str(lost.value)
        killer.join()
        _admin(f'DROP TRIGGER stall ON "{schema}".heads')
        # Check nothing is half-written (here it did not land), and running it again finishes it.
        assert [(r.seq, r.erased) for r in store.read("m")] == [(1, False), (2, False)]
        if operation == "erase":
            assert store.erase("m", reason="GDPR request").record.seq == 3
        else:
            assert store.purge("m", expected_seq=2, reason="retention").seq == 3
        assert store.verify().ok


def test_a_receipt_id_a_forger_made_up_for_a_copied_row_is_not_found(schema):
    from eventlog import find_receipt
    from eventlog.errors import ChainIntegrityError
    from eventlog.postgres import PostgresEventStore

    key = b"k" * 32
    with PostgresEventStore(PG_DSN, schema=schema, chain_key=key) as store:
        store.append("alice", batch("hello", "secret"))
        receipt = store.erase("alice", reason="GDPR request")
        # A forger without the key drops the one-row-per-seq constraint and copies the genuine
        # receipt's row to a new position under a hash of their own: an id the ledger never
        # issued. Check find_receipt does not vouch for it with the genuine receipt: the
        # memory's read refuses the second row at that seq.
        _admin(f'ALTER TABLE "{schema}".events DROP CONSTRAINT events_stream_seq')
        fake = "f" * 64
        (position,) = _admin(
            f'INSERT INTO "{schema}".events (position, stream_id, seq, recorded_at, kind, '
            "schema_version, payload, meta, prev_hash, hash, salt, commitment, format) "
            "OVERRIDING SYSTEM VALUE SELECT position + 1, stream_id, seq, "
            "recorded_at, kind, schema_version, payload, meta, prev_hash, %s, salt, commitment, "
            f'format FROM "{schema}".events WHERE position = %s RETURNING position',
            (fake, receipt.record.position),
        )[0]
        with pytest.raises(ChainIntegrityError, match="hash chain of alice breaks"):
            find_receipt(store, f"{position}-{fake}")
