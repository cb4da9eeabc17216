"""PostgresEventStore: the shared-server backend, one row per event in a PostgreSQL table.

psycopg is the ``[postgres]`` extra: from your chatledger clone, ``pip install -e '.[postgres]'``.
Import the store from here; :mod:`eventlog` itself never imports psycopg. The SQL it runs, and its
migrations, live in :mod:`eventlog.recorders.postgres_sql`. The store's other parts live beside this
module, one owner each: the pool, transactions, the psycopg error choke point and the cached heads
in :mod:`eventlog.recorders.postgres_base`, schema setup and what the ledger reads at open in
:mod:`eventlog.recorders.postgres_open`, reads in :mod:`eventlog.recorders.postgres_reads`, purge,
erase and vacuum in :mod:`eventlog.recorders.postgres_erase`; a contended memory's lost races
settled inside the append in :mod:`eventlog.recorders.postgres_races`; what a timed-out statement
waited for in :mod:`eventlog.recorders.postgres_waits`. This module keeps the store's constructor
and its appends.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

try:
    import psycopg
    import psycopg.errors
    import psycopg_pool
except ImportError as e:
    msg = (
        f"import eventlog.postgres: psycopg is missing ({e}); install the [postgres] extra "
        "from your chatledger clone: pip install -e '.[postgres]'"
    )
    raise ImportError(msg) from e
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from eventlog.erasure import brings_erasure, erased_after, snapshot_problem
from eventlog.errors import (
    ConcurrencyError,
    PersistenceError,
    StoreClosedError,
)
from eventlog.hashing import RECEIPT_KINDS
from eventlog.ids import MemoryId
from eventlog.keycheck import chain_key_argument
from eventlog.keyring import Keyring
from eventlog.models import NewRecord, Record, StreamHead, format_time
from eventlog.recorders import postgres_sql as pgsql
from eventlog.recorders.postgres_base import EMPTY_HEAD, connection_lost, pool_params
from eventlog.recorders.postgres_erase import PostgresErasure
from eventlog.recorders.postgres_open import PostgresSchema
from eventlog.recorders.postgres_races import RACES, LostRace, PostgresRaces, check_batch
from eventlog.recorders.postgres_sql import MIGRATIONS
from eventlog.validation import check_snapshot, pg_name, shown

if TYPE_CHECKING:
    from eventlog.recorders.postgres_base import Conn, Row
    from eventlog.witness import Witness

__all__ = ["MIGRATIONS", "PostgresEventStore"]

DEFAULT_MAX_CONNECTIONS = 8
"""Connections the store's own pool may open; a thread waits for a free one beyond that."""
_STALE_HEAD_RETRIES = 3
DEFAULT_STATEMENT_TIMEOUT = 30.0
"""Seconds a statement (an append waiting for the append lock included) may run by default."""
_LOST_RETRIES = 3  # appends retried after a dead connection when nothing of them landed


# PostgreSQL's statement_timeout is an int of milliseconds.
_MAX_TIMEOUT = (2**31 - 1) // 1000


def _check_arguments(
    schema: object, statement_timeout: object, read_retries: object, max_connections: object
) -> None:
    """Refuse, before connecting, arguments the store cannot use (before: a bad timeout
    spent 5 s failing every connection and then said "connect failed"; -1 became 1 ms)."""
    pg_name("PostgresEventStore", "schema", schema)
    if statement_timeout is not None:
        if isinstance(statement_timeout, bool) or not isinstance(statement_timeout, int | float):
            msg = (
                "PostgresEventStore: statement_timeout must be seconds (int or float) or None, "
                f"not {type(statement_timeout).__name__} {shown(statement_timeout)}"
            )
            raise TypeError(msg)
        if not 0 < statement_timeout <= _MAX_TIMEOUT:  # nan and inf too
            msg = (
                f"PostgresEventStore: statement_timeout must be seconds in (0, {_MAX_TIMEOUT}], "
                f"not {shown(statement_timeout)}; pass None for no timeout"
            )
            raise ValueError(msg)
    for name, value, low in (
        ("read_retries", read_retries, 0),
        ("max_connections", max_connections, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            msg = f"PostgresEventStore: {name}={shown(value)}; pass an int >= {low}"
            raise ValueError(msg)


class PostgresEventStore(PostgresRaces, PostgresErasure, PostgresSchema):
    """Event store in a PostgreSQL schema, safe for many threads and many processes.

    Appends to one memory queue on that memory's transaction-scoped advisory lock; appends to
    different memories never wait for each other. Positions come from transaction ids and
    :meth:`read_all` returns records only below the oldest transaction still running, so a
    tailing reader never skips a record that commits late (see ``_Q_READ_ALL`` in
    :mod:`eventlog.recorders.postgres_sql`). Reads run concurrently and
    retry transient connection failures. An append whose connection is lost asks the server
    whether its records landed (their hashes are known before sending) and, if they did not,
    tries again on a fresh connection: it returns once its records are stored exactly once,
    or raises with nothing stored.

    The store remembers the head of each stream it wrote or read, so an append chains its
    records without reading the head first (one round trip when the server supports pipeline
    mode). Another process may have appended meanwhile: the insert then finds that the stored
    head is not the record it chains to, writes nothing and raises :class:`ConcurrencyError`
    (without ``expected_seq`` the store rereads the head under the lock and tries again).

    Args:
        dsn: A libpq connection string or URL; the store opens and owns a small connection
            pool on it. Exactly one of ``dsn`` and ``pool`` is given.
        pool: A ``psycopg_pool.ConnectionPool`` you opened and will close yourself.
        schema: The schema holding the tables (created if missing when ``create_schema``).
        create_schema: Apply pending migrations on open (default). Pass False for a managed
            database: the store then only checks that the schema is up to date.
        statement_timeout: Seconds after which the server cancels a statement (each one,
            including waiting for locks), default 30: no append waits forever behind a stalled
            transaction of the same memory. None keeps the server's setting (often: no
            limit). Only with ``dsn``: configure your own pool's connections yourself.
        read_retries: How many times a read is retried after a transient connection error.
        max_connections: The most connections the store's own pool opens (default 8; it opens
            them only as threads need them). Threads appending to different memories run in
            parallel up to this many. Only with ``dsn``.
        chain_key: Chain key, at least 16 bytes (see :class:`~eventlog.store.EventStore`):
            new records are format 3, HMAC-SHA256 under it. Keep it outside the database.
        read_only: Never write: no migration, no key check, no seal; appends, erasures, purges
            and snapshots raise :class:`~eventlog.errors.ReadOnlyError`.
        adopt_key: Key a schema that holds unkeyed records, sealing them as they are; without
            it such an open with ``chain_key=`` raises :class:`ChainKeyError`.
        witness: A file path, a ``postgresql://`` URL of another database, or a
            :class:`~eventlog.witness.Witness`, kept outside the database: the open refuses a
            ledger behind or diverging from it, and appends and close move it forward (see
            :mod:`eventlog.witness`). Default: none.
        key: Deprecated name of ``chain_key`` (a :class:`DeprecationWarning`).

    Raises:
        RollbackError: The ledger is behind its witness or diverges from it.
        ChainKeyError: ``chain_key`` does not match the schema's key check value, or is given for
            an unkeyed schema holding records without ``adopt_key=True``.
        ValueError: Not exactly one of ``dsn`` and ``pool``, ``dsn`` cannot be parsed, or
            ``chain_key`` is shorter than 16 bytes.
        TypeError: Both ``chain_key`` and the deprecated ``key`` are given.
        PersistenceError: The server is unreachable or the schema is not set up.
        SchemaVersionError: A newer chatledger migrated the schema.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: psycopg_pool.ConnectionPool[Conn] | None = None,
        schema: str = "public",
        create_schema: bool = True,
        statement_timeout: float | None = DEFAULT_STATEMENT_TIMEOUT,
        read_retries: int = 3,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        chain_key: bytes | None = None,
        keyring: Keyring | None = None,
        read_only: bool = False,
        adopt_key: bool = False,
        witness: str | os.PathLike[str] | Witness | None = None,
        erasable_ids: bool = False,
        key: bytes | None = None,
    ) -> None:
        self._open_modes(
            chain_key_argument("PostgresEventStore", chain_key, key),
            keyring,
            read_only=read_only,
            adopt_key=adopt_key,
            erasable_ids=erasable_ids,
        )
        if (dsn is None) == (pool is None):
            msg = "PostgresEventStore: pass exactly one of dsn= and pool="
            raise ValueError(msg)
        if pool is not None and statement_timeout not in (None, DEFAULT_STATEMENT_TIMEOUT):
            msg = (
                "PostgresEventStore: statement_timeout= applies to the store's own pool only; set "
                "it on your pool's connections (configure= or options='-c statement_timeout=...')"
            )
            raise ValueError(msg)
        _check_arguments(schema, statement_timeout, read_retries, max_connections)
        self._max_connections = max_connections
        self._closed = False
        self._close_lock = threading.Lock()
        self._schema = schema
        self._timeout = statement_timeout if pool is None else None
        self._read_retries = max(read_retries, 0)
        try:
            params = conninfo_to_dict(dsn) if dsn is not None else pool_params(pool)
        except psycopg.Error:
            # No `from e`: the driver's parse error quotes the fragment it choked on, which
            # may be the password.
            msg = "PostgresEventStore: dsn is not a valid libpq connection string or URL"
            raise ValueError(msg) from None
        self._password = str(params.get("password") or "")
        host = params.get("host") or params.get("hostaddr") or "localhost"
        dbname = params.get("dbname") or params.get("user") or ""
        self._where = f"{host}:{params.get('port') or 5432}/{dbname}"
        self._name = f"PostgresEventStore({self._where}, schema={schema!r})"
        self._q = pgsql.statements(schema)
        self._ident = sql.Identifier(schema)
        self._setup_key = pgsql.lock_key("setup", schema)
        # Head per stream as last written or read here: never ahead of a committed head, and
        # checked by every insert (see pgsql._Q_INSERT): a stale entry costs a retry, not a gap.
        self._heads: dict[str, StreamHead] = {}
        self._erased: dict[str, int] = {}  # beside each head: see _head
        self._heads_lock = threading.Lock()
        # Memories another writer appended to lately, and until when to treat them so.
        self._contended: dict[str, float] = {}
        # One lock per memory being appended to by this object; gone when no thread holds it.
        self._memory_locks: weakref.WeakValueDictionary[str, threading.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._own_last = 0  # highest position this object appended (read_all waits for it)
        self._pipelined = psycopg.Pipeline.is_supported()  # libpq >= 14
        if pool is not None:
            self._pool, self._own_pool = pool, False
        else:
            assert dsn is not None  # noqa: S101 - narrowed by the exactly-one check
            self._pool, self._own_pool = self._open_pool(dsn, params), True
        try:
            if create_schema and not read_only:
                self.setup()
            else:
                self._check_schema()
            self._load_key_check(witness)
        except BaseException:
            self.close()
            raise

    @property
    def async_workers(self) -> int:
        """One worker per pooled connection: async calls use the pool as threads would."""
        return self._max_connections

    # ------------------------------------------------------------ writing

    def append(
        self,
        memory_id: MemoryId,
        items: Sequence[NewRecord],
        *,
        expected_seq: int | None = None,
        expected_hash: str | None = None,
    ) -> list[Record]:
        return self._append_entry(memory_id, items, expected_seq, expected_hash, None)

    def append_or_rebuild(
        self,
        memory_id: MemoryId,
        items: Sequence[NewRecord],
        *,
        expected_seq: int,
        expected_hash: str,
        rebuild: Callable[[list[Record]], Sequence[NewRecord] | None],
    ) -> list[Record]:
        """See :meth:`EventStore.append_or_rebuild`. On a memory other writers of it keep
        appending to (a recent conflict), an insert that lost its race reads the records after
        the head it chained to on the same connection at once (one statement), so the append
        settles the race without the caller reading; ``rebuild`` runs with no connection and no
        lock held (it may read),
        and the rebuilt records are sent at once. After ``postgres_races.RACES`` lost races in a
        row, or on a memory not known to be contended, a lost race is the
        :class:`~eventlog.errors.ConcurrencyError` that :meth:`append` raises."""
        return self._append_entry(memory_id, items, expected_seq, expected_hash, rebuild)

    def _append_entry(
        self,
        memory_id: MemoryId,
        items: Sequence[NewRecord],
        expected_seq: int | None,
        expected_hash: str | None,
        rebuild: Callable[[list[Record]], Sequence[NewRecord] | None] | None,
    ) -> list[Record]:
        key = self._stream_key(memory_id, "append")
        self._check_items(items, memory_id, key)
        operation = "append"
        if self._closed:
            raise StoreClosedError(operation, self._name)
        if not items:
            return []
        check_batch(key, items)
        self._writable(operation, self._name)
        # Threads of this store writing one memory take turns here, so each chains to the head
        # the previous one wrote (a one-statement append) instead of racing for the same seq on
        # the server and retrying with a head read.
        with self._memory_lock(key):
            return self._append_locked(key, items, expected_seq, expected_hash, rebuild)

    def _memory_lock(self, key: str) -> threading.Lock:
        with self._heads_lock:
            lock = self._memory_locks.get(key)
            if lock is None:
                lock = self._memory_locks[key] = threading.Lock()
            return lock

    def _append_locked(
        self,
        key: str,
        items: Sequence[NewRecord],
        expected_seq: int | None,
        expected_hash: str | None,
        rebuild: Callable[[list[Record]], Sequence[NewRecord] | None] | None,
    ) -> list[Record]:
        stale = lost = races = 0
        built = items  # what is appended: items, or what rebuild returned in their place
        # After a rebuild: the winners' head the rebuilt records chain to. Every later attempt
        # (a lost connection's too) is checked against it, so a failover that lost the winners
        # is a conflict, never the rebuilt records (their window names them) on an older head.
        expected = (expected_seq, expected_hash)
        while True:
            sent: list[tuple[list[Row], int]] = []
            try:
                records = self._append(
                    key,
                    built,
                    *expected,
                    # A contended memory's appends read the head under the lock, unless they
                    # can rebuild a lost race from the winners' records (LostRace).
                    cached=stale == lost == 0
                    and (rebuild is not None or self._contended.get(key, 0.0) < time.monotonic()),
                    sent=sent,
                    racing=rebuild is not None and expected_seq is not None,
                )
                break
            except LostRace as race:
                # Off the connection and the lock: the fold may read (a summary, say).
                races += 1
                again = None
                if rebuild is not None and races <= RACES:
                    again = self._rebuilt(key, race.seq, race.link, race.rows, rebuild)
                if again is None or brings_erasure(again[0]):
                    self._forget(key)
                    raise ConcurrencyError(key, expected_seq or 0, None) from None
                built = again[0]
                expected = (again[1].seq, again[1].hash)
            except ConcurrencyError as e:
                # actual None: the insert met a writer our cached head missed. With no
                # expectation that is ours to fix: retry, reading the head under the lock.
                stale += 1
                if e.actual is not None or expected_seq is not None:
                    raise
                if stale >= _STALE_HEAD_RETRIES:
                    raise
            except PersistenceError as e:
                if not (isinstance(e.__cause__, psycopg.Error) and connection_lost(e.__cause__)):
                    raise
                # The connection died. If the records were sent, the commit may have landed
                # (the client never heard): ask the server rather than guess, so an add either
                # lands once or not at all - a caller's retry then never duplicates it.
                landed = self._landed(key, *sent[-1]) if sent else None
                if landed is not None:
                    records = landed
                    break
                lost += 1
                if lost > _LOST_RETRIES or self._closed:
                    raise
                # Nothing landed, so the outcome is known: retry on a fresh connection (a server
                # restart breaks every pooled connection at once: drop them all first).
                with contextlib.suppress(Exception):
                    self._pool.check()
                time.sleep(0.02 * 4 ** (lost - 1))
        last = records[-1]
        self._remember(key, StreamHead(last.seq, last.hash, last.recorded_at_text))
        self._wrote(last.position)
        return self._revealed(records, built)

    def _append(
        self,
        key: str,
        items: Sequence[NewRecord],
        expected_seq: int | None,
        expected_hash: str | None,
        *,
        cached: bool,
        sent: list[tuple[list[Row], int]],
        racing: bool,
    ) -> list[Record]:
        """Append ``items``. With ``racing``, on a contended memory: raises :class:`LostRace`
        with the winners' records, read right after the insert that lost, when another writer
        got in first."""
        # A cached head is usable only with the erased_through its seal covers (see _head).
        head = self._heads.get(key) if cached and key in self._erased else None
        if head is not None and (
            (expected_seq is not None and expected_seq != head.seq)
            or (expected_hash is not None and expected_hash != head.hash)
        ):
            head = None  # the caller knows better, or not: ask before calling it a conflict
        # A cached head that matches expected_hash is still checked: the insert writes nothing
        # unless the stored head is the record it chains to (see pgsql._Q_INSERT).
        # On a cache hit everything is built before the transaction, so lock, insert and
        # commit go to the server as one statement (or, on a caller's pool that is not in
        # autocommit mode, in one pipeline): one round trip instead of five.
        rows = None if head is None else self._build(key, head, items, self._now())
        name = self._name_row(key)
        chained_to = 0
        lock = self._stream_lock(key)

        def conflict() -> ConcurrencyError:
            return ConcurrencyError(key, chained_to if expected_seq is None else expected_seq, None)

        try:
            with self._guard("append", conflict, (key,)) as conn:
                # An import of emptied records also moves the seal's erased_through: a
                # second statement, so the transaction.
                if (
                    rows is not None
                    and conn.autocommit
                    and name is None
                    and not brings_erasure(items)
                ):
                    chained_to = rows[0][1] - 1
                    sent.append((rows, conn.info.backend_pid))  # from here, it may land
                    if racing and self._contended.get(key, 0.0) >= time.monotonic():
                        found = self._insert_racing(conn, key, rows, lock)
                    else:
                        found = conn.execute(*self._insert_query(rows, lock=lock)).fetchall()
                else:
                    found = self._append_in_transaction(
                        conn, key, items, expected_seq, expected_hash, rows, lock, sent, name
                    ).fetchall()
                    chained_to = sent[-1][0][0][1] - 1
                positions: dict[int, int] = dict(found)
                if not positions:
                    # The head is not the one we chained to (another writer appended, a purge,
                    # a restored database): nothing was inserted.
                    raise conflict()
        except LostRace:
            raise  # its head is known: the rebuild remembers the winners' head
        except ConcurrencyError as e:
            if e.actual is None:
                self._contend(key)
                self._forget(key)
            raise
        except BaseException:
            self._forget(key)  # e.g. the connection broke around COMMIT: did it land?
            raise
        return [Record(positions[row[1]], *row) for row in sent[-1][0]]

    def _append_in_transaction(  # noqa: PLR0917 - private; called from _append only
        self,
        conn: Conn,
        key: str,
        items: Sequence[NewRecord],
        expected_seq: int | None,
        expected_hash: str | None,
        rows: list[Row] | None,
        lock: int,
        sent: list[tuple[list[Row], int]],
        name: tuple[str, str] | None = None,
    ) -> Any:
        """Lock, (read the head and build the rows,) insert and commit in one transaction;
        returns the insert's cursor. ``sent`` receives the rows once they may land."""
        with self._pipeline(conn):
            # READ COMMITTED and the memory's append lock, for the reasons given in _write.
            # Held through commit, so a second writer of this memory reads the head after it
            # instead of racing for the same seq (a conflict and retry).
            conn.execute(pgsql.BEGIN if conn.autocommit else pgsql.SET_READ_COMMITTED)
            locked = conn.execute(pgsql.LOCK, (lock,))
            if rows is None:
                fresh = self._head(conn, key)  # under the lock: the real head
                actual = 0 if fresh is None else fresh.seq
                if self._heads.get(key) != (fresh or EMPTY_HEAD):
                    self._contend(key)  # another writer appended since our last append
                self._remember(key, fresh or EMPTY_HEAD)
                if expected_seq is not None and expected_seq != actual:
                    raise ConcurrencyError(key, expected_seq, actual)
                mismatch = self._hash_conflict(key, fresh, expected_hash)
                if mismatch is not None:
                    raise mismatch
                rows = self._build(key, fresh, items, self._now())
            if name is not None:
                # Checked again once the lock is held (an erasure holds it until its commit;
                # in the pipeline the lock is only sent until a result is read): an erasure
                # that committed between the first check and here destroyed the key the cached
                # row is sealed under, and that row, committed with this transaction even when
                # its insert loses the race, would name nobody.
                locked.fetchall()
                conn.execute(self._q["put_name"], self._name_row(key) or name)
            erased = self._erased.get(key, 0)
            after = erased_after(key, rows, erased) if brings_erasure(items) else erased
            sent.append((rows, conn.info.backend_pid))  # from here, it may land
            cursor = conn.execute(*self._insert_query(rows, erased_through=after))
            if after != erased:
                conn.execute(self._q["seal_erasure"], (after, key))
            conn.execute(pgsql.COMMIT)
        if after != erased:
            self._erased[key] = after
        return cursor

    def save_snapshot(self, memory_id: MemoryId, name: str, seq: int, state: str) -> None:
        check_snapshot("save_snapshot", name, seq, state)
        key = self._stream_key(memory_id, "save_snapshot")
        stored = self._sealed_state(key, name, seq, state)
        # Under the memory's append lock, so a purge cannot slip between the check and the
        # insert and leave a snapshot of erased messages behind.
        conflict = lambda: ConcurrencyError(key, seq, None)  # noqa: E731
        with self._write("save_snapshot", conflict, keys=[key]) as conn:
            row = conn.execute(
                self._q["snapshot_check"], (key, seq, key, seq, list(RECEIPT_KINDS))
            ).fetchone()
            assert row is not None  # noqa: S101 - a SELECT of two subqueries has one row
            problem = snapshot_problem(key, seq, row[0] is not None, row[1])
            if problem is not None:
                raise ValueError(problem)
            conn.execute(
                self._q["save_snapshot"], (key, name, seq, stored, format_time(self._now()))
            )
            conn.execute(self._q["prune_snapshots"], (key, name, seq))

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the store; its own pool is closed, a pool passed in is left open."""
        with self._close_lock:
            if self._closed:
                return
            try:
                self._close_witness()
            finally:
                self._closed = True
        if self._own_pool:
            self._pool.close()
