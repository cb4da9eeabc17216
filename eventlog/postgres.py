"""PostgresEventStore: the shared-server backend, one row per event in a PostgreSQL table.

psycopg is the ``[postgres]`` extra: from your chatledger clone, ``pip install -e '.[postgres]'``.
Import the store from here; :mod:`eventlog` itself never imports psycopg. The SQL it runs, and
its migrations, live in :mod:`eventlog.postgres_sql`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self, TypeVar

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
from psycopg import pq, sql
from psycopg.conninfo import conninfo_to_dict

from eventlog import postgres_sql as pgsql
from eventlog.erasure import brings_erasure, erased_after, erasure_record, tombstone
from eventlog.errors import (
    ConcurrencyError,
    OutcomeUnknownError,
    PersistenceError,
    SchemaVersionError,
    StoreClosedError,
)
from eventlog.hashing import GENESIS, RECEIPT_KINDS
from eventlog.ids import MemoryId, memory_id_from_key
from eventlog.keycheck import settle_keys
from eventlog.keyring import Keyring
from eventlog.ledger_tree import TreeBlock
from eventlog.models import (
    ErasureReceipt,
    HeadSeal,
    NewRecord,
    Record,
    Snapshot,
    StreamHead,
    format_time,
    parse_time,
)
from eventlog.names import settle_ids
from eventlog.postgres_open import PostgresLedgerTx as _Tx
from eventlog.postgres_sql import MIGRATIONS
from eventlog.postgres_waits import waited_on
from eventlog.store import EventStore, LedgerTx
from eventlog.validation import check_at, check_range, check_tail

if TYPE_CHECKING:
    from psycopg.rows import TupleRow

    from eventlog.witness import Witness

    Conn = psycopg.Connection[TupleRow]
    Row = tuple[str, int, str, str, int, str, str, str, str, str, str, int]

__all__ = ["MIGRATIONS", "PostgresEventStore"]

_T = TypeVar("_T")

_NO_UPPER = 1 << 62
_CONNECT_TIMEOUT = 5  # seconds, for each connection attempt and for opening the pool
_CHECKOUT_TIMEOUT = 10.0  # seconds to wait for a free pooled connection
_POOL_MIN = 1
DEFAULT_MAX_CONNECTIONS = 8
"""Connections the store's own pool may open; a thread waits for a free one beyond that."""
_STALE_HEAD_RETRIES = 3
DEFAULT_STATEMENT_TIMEOUT = 30.0
"""Seconds a statement (an append waiting for the append lock included) may run by default."""
_LOST_RETRIES = 3  # appends retried after a dead connection when nothing of them landed
_RESOLVE_WAIT = 2.0  # seconds to wait for a lost append's transaction before terminating it
_RESOLVE_DEADLINE = 30.0  # seconds to keep asking the server whether a lost append landed
_CONTENDED_FOR = 1.0  # seconds a memory's appends read its head first after a conflict
_SETTLE_WAIT = 2.0  # seconds read_all waits for the store's own appends to pass the watermark
_HEADS_MAX = 10_000  # cached stream heads per store; the oldest entry goes first
_EMPTY = StreamHead(0, GENESIS, "")  # cached head of an empty stream (what _build chains to)
_HANDOFF = "chatledger_handoff"  # pool kwarg carrying the connection the store opened itself


def _pool_params(pool: psycopg_pool.ConnectionPool[Conn] | None) -> dict[str, Any]:
    """The pool's connection parameters, for messages (a callable conninfo is not called)."""
    conninfo = "" if pool is None or not isinstance(pool.conninfo, str) else pool.conninfo
    kwargs = pool.kwargs if pool is not None and isinstance(pool.kwargs, dict) else {}
    return conninfo_to_dict(conninfo, **kwargs)


def _login_refused(e: psycopg.Error) -> bool:
    """The server rejected the user or password. libpq reports a failed login with no SQLSTATE,
    so this matches the server's text, in English unless lc_messages says otherwise."""
    if e.sqlstate not in (None, "28000", "28P01"):
        return False
    text = str(e)
    return any(s in text for s in ("authentication failed", "no password supplied")) or (
        "role " in text and "does not exist" in text  # a missing role, e.g. under trust auth
    )


def _connection_lost(e: psycopg.Error) -> bool:
    """The connection broke (client-side failure, class 08, or the server shutting down)."""
    if isinstance(e, psycopg_pool.PoolTimeout | psycopg_pool.PoolClosed):
        return False
    state = e.sqlstate
    return isinstance(e, psycopg.OperationalError) and (
        state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")
    )


class _PoolConnection(psycopg.Connection["TupleRow"]):
    """The connections of the store's own pool. The pool's first ``connect`` adopts the
    connection the store opened itself, so opening costs one handshake, not two."""

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
        handoff: list[Self] = kwargs.pop(_HANDOFF, None) or []
        with contextlib.suppress(IndexError):
            return handoff.pop()
        return super().connect(conninfo, **kwargs)


class PostgresEventStore(EventStore):
    """Event store in a PostgreSQL schema, safe for many threads and many processes.

    Appends to one memory queue on that memory's transaction-scoped advisory lock; appends to
    different memories never wait for each other. Positions come from transaction ids and
    :meth:`read_all` returns records only below the oldest transaction still running, so a
    tailing reader never skips a record that commits late (see ``_Q_READ_ALL`` in
    :mod:`eventlog.postgres_sql`). Reads run concurrently and
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
        key: Chain key, at least 16 bytes (see :class:`~eventlog.store.EventStore`): new
            records are format 3, HMAC-SHA256 under it. Keep it outside the database.
        read_only: Never write: no migration, no key check, no seal; appends, erasures, purges
            and snapshots raise :class:`~eventlog.errors.ReadOnlyError`.
        adopt_key: Key a schema that holds unkeyed records, sealing them as they are; without
            it such an open with ``key=`` raises :class:`ChainKeyError`.
        witness: A file path, a ``postgresql://`` URL of another database, or a
            :class:`~eventlog.witness.Witness`, kept outside the database: the open refuses a
            ledger behind or diverging from it, and appends and close move it forward (see
            :mod:`eventlog.witness`). Default: none.

    Raises:
        RollbackError: The ledger is behind its witness or diverges from it.
        ChainKeyError: ``key`` does not match the schema's key check value, or is given for
            an unkeyed schema holding records without ``adopt_key=True``.
        ValueError: Not exactly one of ``dsn`` and ``pool``, ``dsn`` cannot be parsed, or
            ``key`` is shorter than 16 bytes.
        PersistenceError: The server is unreachable or the schema is not set up.
        SchemaVersionError: A newer chatledger migrated the schema.
    """

    _cleanup_pending = False  # an erase or purge left dead row versions: see vacuum()

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
        key: bytes | None = None,
        keyring: Keyring | None = None,
        read_only: bool = False,
        adopt_key: bool = False,
        witness: str | os.PathLike[str] | Witness | None = None,
        erasable_ids: bool = False,
    ) -> None:
        self._open_modes(
            key, keyring, read_only=read_only, adopt_key=adopt_key, erasable_ids=erasable_ids
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
        if max_connections < 1:
            msg = f"PostgresEventStore: max_connections={max_connections!r}; pass 1 or more"
            raise ValueError(msg)
        self._max_connections = max_connections
        self._closed = False
        self._close_lock = threading.Lock()
        self._schema = schema
        self._timeout = statement_timeout if pool is None else None
        self._read_retries = max(read_retries, 0)
        try:
            params = conninfo_to_dict(dsn) if dsn is not None else _pool_params(pool)
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

    def _open_pool(self, dsn: str, params: dict[str, Any]) -> psycopg_pool.ConnectionPool[Conn]:
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params:
            kwargs["connect_timeout"] = _CONNECT_TIMEOUT
        # The first connection is made here, not by the pool's worker: an unreachable server
        # fails in milliseconds with libpq's reason, where the pool would keep retrying
        # quietly until its timeout. The pool then adopts it (see _PoolConnection).
        with self._errors("connect"):
            first = _PoolConnection.connect(dsn, **kwargs)
        pool = psycopg_pool.ConnectionPool(
            dsn,
            connection_class=_PoolConnection,
            kwargs={**kwargs, _HANDOFF: [first]},
            min_size=_POOL_MIN,
            max_size=max(self._max_connections, _POOL_MIN),
            open=False,
            configure=self._configure if self._timeout is not None else None,
            name=f"chatledger-{self._schema}",
            timeout=_CHECKOUT_TIMEOUT,
            num_workers=1,  # it only opens the rare extra connection
        )
        try:
            with self._errors("connect"):
                pool.open(wait=True, timeout=_CONNECT_TIMEOUT)
        except BaseException:
            pool.close()
            first.close()  # no-op once adopted: the pool closed it
            raise
        # It only ever holds _PoolConnections, which are Conns.
        return pool  # type: ignore[return-value]

    def _configure(self, conn: Conn) -> None:
        # Runs on every new pooled connection (autocommit, so the setting sticks).
        millis = max(1, round((self._timeout or 0) * 1000))  # 0 would mean "no timeout"
        conn.execute("SELECT set_config('statement_timeout', %s, false)", (f"{millis}ms",))

    # ------------------------------------------------------------ schema

    def setup(self) -> None:
        """Create the schema and apply pending :data:`MIGRATIONS`; idempotent.

        Safe when several processes call it at once: they queue on an advisory lock, and each
        applies only the versions missing from ``eventlog_migrations`` when its turn comes.

        Raises:
            SchemaVersionError: The schema was migrated by a newer chatledger.
            PersistenceError: The database refused (e.g. no CREATE privilege).
        """
        if self._up_to_date("setup"):
            return
        with self._guard("setup") as conn, conn.transaction():
            conn.execute(pgsql.LOCK, (self._setup_key,))
            # Check first: CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege on the
            # database even when the schema exists.
            if conn.execute(pgsql.SCHEMA_EXISTS, (self._schema,)).fetchone() is None:
                conn.execute(self._q["create_schema"])
            conn.execute(self._q["create_migrations"])
            applied = {row[0] for row in conn.execute(self._q["versions"])}
            self._check_version(applied)
            for version, ddl in enumerate(MIGRATIONS):
                if version not in applied:
                    conn.execute(pgsql.render(ddl, self._ident))
                    conn.execute(self._q["record_version"], (version,))

    def _up_to_date(self, operation: str) -> bool:
        """Whether every migration is applied, in one round trip and without the setup lock
        (a store opens far more often than a schema changes)."""
        with self._guard(operation) as conn:
            try:
                row = conn.execute(self._q["version"]).fetchone()
            except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
                # Not an error to translate but the answer "not set up yet"; the slow path
                # creates the schema or reports what is missing.
                conn.rollback()
                return False
        count, newest = row if row is not None else (0, None)
        if newest is None:
            return False
        self._check_version({newest})
        return bool(count == len(MIGRATIONS) and newest == len(MIGRATIONS) - 1)

    def _check_schema(self) -> None:
        if self._up_to_date("open"):
            return
        with self._guard("open") as conn:
            table = f"{self._ident.as_string()}.eventlog_migrations"
            row = conn.execute(pgsql.MIGRATIONS_EXIST, (table,)).fetchone()
            applied = (
                set()
                if not row or not row[0]
                else {r[0] for r in conn.execute(self._q["versions"])}
            )
        self._check_version(applied)
        missing = sorted(set(range(len(MIGRATIONS))) - applied)
        if missing:
            msg = (
                f"schema {self._schema!r} at {self._where} lacks eventlog migrations {missing}; "
                "call store.setup() once (or open with create_schema=True), or apply "
                "eventlog.postgres.MIGRATIONS with your migration tool"
            )
            operation = "open"
            raise PersistenceError(operation, msg)

    def _check_version(self, applied: set[int]) -> None:
        newest = max(applied, default=-1)
        if newest >= len(MIGRATIONS):
            what = f"PostgreSQL schema {self._schema!r} at {self._where}"
            raise SchemaVersionError(what, newest, len(MIGRATIONS) - 1)

    def _load_key_check(self, witness: str | os.PathLike[str] | Witness | None) -> None:
        """Settle the chain key and head seals (see ``eventlog.keycheck.settle_keys``), then check
        the witness (see ``EventStore._attach_witness``)."""
        where = f"schema {self._schema!r} at {self._where}"

        def read(fn: Callable[[LedgerTx], bool]) -> bool:
            return self._read("open", lambda conn: fn(_Tx(conn, self._q)))

        def write(fn: Callable[[LedgerTx], bool]) -> bool:
            # With the events table locked against inserts: two first opens with different
            # keys are serialized, and no append moves what is being sealed.
            with self._write("open", whole_log=True) as conn:
                return fn(_Tx(conn, self._q))

        settle_keys(self, where, read, write)
        settle_ids(self, where, read, write)
        self._attach_witness(witness, where)

    # ------------------------------------------------------------ error choke point

    @contextlib.contextmanager
    def _errors(
        self,
        operation: str,
        conflict: Callable[[], ConcurrencyError] | None = None,
        keys: Sequence[str] = (),
    ) -> Iterator[None]:
        """The one place psycopg errors become EventLogErrors, so every operation reports a
        driver failure the same way and no caller needs to know psycopg."""
        try:
            yield
        except psycopg.errors.UniqueViolation as e:
            if conflict is not None and e.diag.constraint_name == pgsql.UNIQUE_SEQ:
                raise conflict() from e
            raise PersistenceError(operation, self._detail(e, operation, keys)) from e
        except psycopg.errors.SerializationFailure as e:
            # A one-statement append under a SERIALIZABLE default isolation reports a
            # concurrent writer of the same seq this way instead of as a unique violation.
            if conflict is not None:
                raise conflict() from e
            raise PersistenceError(operation, self._detail(e, operation, keys)) from e
        except psycopg_pool.PoolClosed as e:
            if self._closed:
                raise StoreClosedError(operation, self._name) from e
            raise PersistenceError(operation, self._detail(e, operation, keys)) from e
        except psycopg.Error as e:
            raise PersistenceError(operation, self._detail(e, operation, keys)) from e

    def _detail(self, e: psycopg.Error, operation: str = "", keys: Sequence[str] = ()) -> str:
        text = str(e).strip()
        if self._password:
            text = text.replace(self._password, "***")
        if isinstance(e, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
            remedy = self._timed_out(e, operation, keys)
        elif isinstance(e, psycopg_pool.PoolTimeout):
            remedy = "no pooled connection became free or could be opened; is the server up?"
        elif _login_refused(e):
            remedy = "the server refused the login; check user and password"
        elif _connection_lost(e):
            remedy = "check that the server is running and reachable"
        else:
            remedy = ""
        return f"PostgreSQL {self._where} (schema {self._schema!r}): {text}" + (
            f"; {remedy}" if remedy else ""
        )

    def _timed_out(self, e: psycopg.Error, operation: str, keys: Sequence[str]) -> str:
        """What a cancelled statement waited for (asked of the server on another pooled
        connection: the lock it wanted and who holds it) and the setting that bounds it."""
        if isinstance(e, psycopg.errors.LockNotAvailable):
            setting, bound = "lock_timeout", "lock_timeout (the server's or role's setting)"
        elif self._timeout is None:
            setting = "statement_timeout"
            bound = "the server's statement_timeout (or a pg_cancel_backend)"
        else:
            setting = "PostgresEventStore(statement_timeout=...)"
            bound = f"statement_timeout={self._timeout} s"
        try:
            with self._pool.connection(timeout=1.0) as conn, conn.transaction():
                conn.execute("SET LOCAL statement_timeout = 1000")
                waited, pid = waited_on(conn, self._schema, operation, keys)
        except (psycopg.Error, psycopg_pool.PoolTimeout, psycopg_pool.PoolClosed):
            waited, pid = "a lock (the server could not be asked which)", None
        end = (
            f"find pid {pid} in pg_stat_activity and end its transaction or session "
            f"(SELECT pg_terminate_backend({pid}))"
            if pid is not None
            else "find the long transaction in pg_stat_activity"
        )
        what = operation or "the statement"
        return f"{what} waited longer than {bound} for {waited}; {end}, or raise {setting}"

    @contextlib.contextmanager
    def _guard(
        self,
        operation: str,
        conflict: Callable[[], ConcurrencyError] | None = None,
        keys: Sequence[str] = (),
    ) -> Iterator[Conn]:
        """A pooled connection; with our own pool it is in autocommit mode. ``keys``: the
        memories whose append locks the operation takes (named when it times out)."""
        if self._closed:
            raise StoreClosedError(operation, self._name)
        with self._errors(operation, conflict, keys), self._pool.connection() as conn:
            yield conn

    @contextlib.contextmanager
    def _write(
        self,
        operation: str,
        conflict: Callable[[], ConcurrencyError] | None = None,
        *,
        keys: Sequence[str] = (),
        whole_log: bool = False,
    ) -> Iterator[Conn]:
        """One transaction holding the append locks of ``keys`` (or, with ``whole_log``, the
        events table against every insert): commit on success, else roll back."""
        with self._guard(operation, conflict, keys) as conn, conn.transaction():
            # READ COMMITTED whatever the server's default: each statement then takes a new
            # snapshot, so what runs *after* a lock is granted (a head read, the insert's check
            # of the record it chains to) sees the previous writer's commit; under REPEATABLE
            # READ the snapshot would date from before the lock wait.
            conn.execute(pgsql.SET_READ_COMMITTED)
            # Sorted, so two operations locking several memories cannot deadlock (an append
            # holds one). Advisory locks rather than row or table locks: nothing else in the
            # database (VACUUM, ANALYZE, readers) conflicts with them.
            for lock in sorted({self._stream_lock(key) for key in keys}):
                conn.execute(pgsql.LOCK, (lock,))
            if whole_log:
                conn.execute(self._q["lock_events_share"])
            yield conn

    def _stream_lock(self, key: str) -> int:
        return pgsql.stream_lock_key(self._schema, key)

    def _read(self, operation: str, fn: Callable[[Conn], _T]) -> _T:
        """Run a read, retrying transient connection errors (reads are safe to repeat)."""
        attempt = 0
        while True:
            try:
                with self._guard(operation) as conn:
                    return fn(conn)
            except PersistenceError as e:
                lost = isinstance(e.__cause__, psycopg.Error) and _connection_lost(e.__cause__)
                if not lost or attempt >= self._read_retries or self._closed:
                    raise
            attempt += 1
            # Drop every broken idle connection at once (a server restart breaks them all),
            # then back off a little before the next attempt.
            with contextlib.suppress(Exception):
                self._pool.check()
            time.sleep(0.02 * 4 ** (attempt - 1))

    def _head(self, conn: Conn, key: str) -> StreamHead | None:
        row = conn.execute(self._q["head"], (key,)).fetchone()
        # Cached beside the head, and as trustworthy: it changes only with an erasure, whose
        # receipt moves the head, so a stale value makes the insert's head check refuse it.
        if len(self._erased) >= 2 * _HEADS_MAX:
            self._erased.clear()  # bounded; an append without it reads the head under the lock
        self._erased[key] = 0 if row is None else int(row[3])
        return None if row is None else StreamHead(row[0], row[1], row[2])

    def _insert_query(
        self,
        rows: list[Row],
        *,
        before: int = 0,
        after_purge: bool = False,
        lock: int | None = None,
        erased_through: int | None = None,
    ) -> tuple[bytes, Any]:
        """The INSERT of ``rows`` and its parameters: it inserts nothing unless the stored head
        is the record the first row chains to (see pgsql._Q_INSERT). ``before`` counts the rows
        this transaction inserted already (a position numbers rows within its transaction). A
        tombstone chains to the last record it erased, so there the emptied stream counts as
        that record. With ``lock``, the statement takes that append lock itself (autocommit
        only: the lock lasts until the statement's commit)."""
        first, last = rows[0], rows[-1]
        link = (first[0], first[7] if after_purge else GENESIS, first[7])
        erased = self._erased.get(last[0], 0) if erased_through is None else erased_through
        seal = (last[0], last[1], last[8], self._seal_of(last[0], last[1], last[8], erased))
        locked = () if lock is None else (lock,)
        suffix = "" if lock is None else "_locked"
        if len(rows) == 1:  # the common case; scalars cost less to send than arrays
            return self._q["insert_one" + suffix], (*locked, before, *first, *link, *seal)
        columns = [list(column) for column in zip(*rows, strict=True)]
        return self._q["insert" + suffix], (*locked, before, *columns, *link, *seal)

    def _pipeline(self, conn: Conn) -> contextlib.AbstractContextManager[Any]:
        return conn.pipeline() if self._pipelined else contextlib.nullcontext()

    def _remember(self, key: str, head: StreamHead) -> None:
        with self._heads_lock:
            known = self._heads.get(key)
            if known is None and len(self._heads) >= _HEADS_MAX:
                del self._heads[next(iter(self._heads))]  # bounded: a miss costs one read
            # Forward only: a thread finishing late must not put back an older head.
            if known is None or head.seq > known.seq:
                self._heads[key] = head

    def _forget(self, key: str) -> None:
        with self._heads_lock:
            self._heads.pop(key, None)

    # ------------------------------------------------------------ writing

    def append(
        self,
        memory_id: MemoryId,
        items: Sequence[NewRecord],
        *,
        expected_seq: int | None = None,
        expected_hash: str | None = None,
    ) -> list[Record]:
        key = self._stream_key(memory_id, "append")
        self._check_items(items, memory_id, key)
        operation = "append"
        if self._closed:
            raise StoreClosedError(operation, self._name)
        if not items:
            return []
        if len(items) > pgsql.MAX_ROWS_PER_TRANSACTION:
            msg = (
                f"append of {len(items):,} records to {key}: PostgreSQL appends at most "
                f"{pgsql.MAX_ROWS_PER_TRANSACTION:,} records at once (a position numbers the "
                "records of one transaction in 20 bits); split the batch (nothing was written)"
            )
            raise ValueError(msg)
        self._writable(operation, self._name)
        # Threads of this store writing one memory take turns here, so each chains to the head
        # the previous one wrote (a one-statement append) instead of racing for the same seq on
        # the server and retrying with a head read.
        with self._memory_lock(key):
            return self._append_locked(key, items, expected_seq, expected_hash)

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
    ) -> list[Record]:
        stale = lost = 0
        while True:
            sent: list[tuple[list[Row], int]] = []
            try:
                records = self._append(
                    key,
                    items,
                    expected_seq,
                    expected_hash,
                    cached=stale == lost == 0 and self._contended.get(key, 0.0) < time.monotonic(),
                    sent=sent,
                )
                break
            except ConcurrencyError as e:
                # actual None: the insert met a writer our cached head missed. With no
                # expectation that is ours to fix: retry, reading the head under the lock.
                stale += 1
                if e.actual is not None or expected_seq is not None:
                    raise
                if stale >= _STALE_HEAD_RETRIES:
                    raise
            except PersistenceError as e:
                if not (isinstance(e.__cause__, psycopg.Error) and _connection_lost(e.__cause__)):
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
        return self._revealed(records, items)

    def _append(
        self,
        key: str,
        items: Sequence[NewRecord],
        expected_seq: int | None,
        expected_hash: str | None,
        *,
        cached: bool,
        sent: list[tuple[list[Row], int]],
    ) -> list[Record]:
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
                    cursor = conn.execute(*self._insert_query(rows, lock=lock))
                else:
                    cursor = self._append_in_transaction(
                        conn, key, items, expected_seq, expected_hash, rows, lock, sent, name
                    )
                    chained_to = sent[-1][0][0][1] - 1
                positions: dict[int, int] = dict(cursor.fetchall())
                if not positions:
                    # The head is not the one we chained to (another writer appended, a purge,
                    # a restored database): nothing was inserted.
                    raise conflict()
        except ConcurrencyError as e:
            if e.actual is None:
                self._contend(key)
                self._forget(key)
            raise
        except BaseException:
            self._forget(key)  # e.g. the connection broke around COMMIT: did it land?
            raise
        return [Record(positions[row[1]], *row) for row in sent[-1][0]]

    def _contend(self, key: str) -> None:
        """Another writer of this memory got in first: for a while, read the head under the
        lock instead of sending a cached head that is likely stale (each stale one costs a
        refused statement and a second attempt while the other writers queue)."""
        with self._heads_lock:
            if len(self._contended) >= _HEADS_MAX:
                self._contended.clear()  # bounded; forgetting costs one conflict per memory
            self._contended[key] = time.monotonic() + _CONTENDED_FOR

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
            conn.execute(pgsql.LOCK, (lock,))
            if rows is None:
                fresh = self._head(conn, key)  # under the lock: the real head
                actual = 0 if fresh is None else fresh.seq
                if self._heads.get(key) != (fresh or _EMPTY):
                    self._contend(key)  # another writer appended since our last append
                self._remember(key, fresh or _EMPTY)
                if expected_seq is not None and expected_seq != actual:
                    raise ConcurrencyError(key, expected_seq, actual)
                mismatch = self._hash_conflict(key, fresh, expected_hash)
                if mismatch is not None:
                    raise mismatch
                rows = self._build(key, fresh, items, self._now())
            if name is not None:
                conn.execute(self._q["put_name"], name)
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

    def _landed(self, key: str, rows: list[Row], pid: int) -> list[Record] | None:
        """The records of an append whose connection was lost, if its commit landed; None if
        it did not (nothing of it is stored).

        The lost transaction held its memory's append lock until it ended, so taking that lock
        waits for its outcome. A backend that never learns its client is gone (a network
        partition) would hold it for long: after ``_RESOLVE_WAIT`` it is terminated, but only
        if it is that pid and still holds the lock.

        Raises:
            OutcomeUnknownError: The server could not be asked (it stayed unreachable for
                ``_RESOLVE_DEADLINE``); the message says how to check the outcome.
        """
        seqs = [row[1] for row in rows]
        hashes = [row[8] for row in rows]
        lock = self._stream_lock(key)
        operation = "append (resolving a lost connection)"
        # Persistent, within a bound: giving up here leaves the caller an unknown outcome,
        # the one state in which its retry could store the message twice.
        deadline = time.monotonic() + _RESOLVE_DEADLINE
        attempt = 0
        while True:
            attempt += 1
            try:
                with self._guard(operation) as conn, conn.transaction():
                    conn.execute(pgsql.SET_LOCK_TIMEOUT, (f"{round(_RESOLVE_WAIT * 1000)}ms",))
                    try:
                        with conn.transaction():  # a savepoint: a lock timeout aborts only it
                            conn.execute(pgsql.LOCK, (lock,))
                    except psycopg.errors.LockNotAvailable:
                        conn.execute(self._q["terminate_holder"], (5000, pid, lock))
                        conn.execute(pgsql.LOCK, (lock,))
                    found = dict(conn.execute(self._q["landed"], (key, seqs, hashes)).fetchall())
            except PersistenceError as e:
                lost = isinstance(e.__cause__, psycopg.Error) and _connection_lost(e.__cause__)
                if not lost or time.monotonic() > deadline or self._closed:
                    msg = (
                        f"append to {key} at seq {seqs[0]}: the connection was lost around "
                        f"COMMIT and the server could not be asked whether it landed ({e}); "
                        f"check with head({key!r}): seq {seqs[-1]} with hash {hashes[-1]} "
                        "means it did"
                    )
                    raise OutcomeUnknownError(operation, msg) from e
                with contextlib.suppress(Exception):
                    self._pool.check()
                time.sleep(min(0.01 * 2**attempt, 0.5))
                continue
            if not found:
                return None
            return [Record(found[row[1]], *row) for row in rows]  # a transaction lands whole

    def purge(self, memory_id: MemoryId, *, expected_seq: int, reason: str) -> Record:
        """See :meth:`EventStore.purge`.

        The deleted rows vanish for every reader at commit, but PostgreSQL erases nothing
        physically then: the old row versions stay in the table files as dead tuples until
        ``VACUUM`` removes them (call :meth:`vacuum`, or wait for autovacuum), and the WAL,
        WAL archives, replicas' WAL and base backups keep copies until they are recycled or
        expire. Physical erasure therefore needs ``vacuum(full=True)`` (plain VACUUM only
        marks the space reusable) plus your WAL and backup retention.
        """
        key = self._stream_key(memory_id, "purge")
        self._writable("purge", self._name)
        conflict = lambda: ConcurrencyError(key, expected_seq, None)  # noqa: E731
        with self._write("purge", conflict, keys=[key]) as conn:
            head = self._head(conn, key)
            if head is None:
                msg = f"purge of {key}: the stream is empty; nothing to erase"
                raise ValueError(msg)
            if head.seq != expected_seq:
                raise ConcurrencyError(key, expected_seq, head.seq)
            count = conn.execute(self._q["delete_events"], (key,)).rowcount
            conn.execute(self._q["delete_snapshots"], (key,))
            # The erased records are in the ledger tree's blocks: drop them (the next digest
            # rebuilds), under the lock savers take, so none slips stale blocks back in.
            conn.execute(pgsql.LOCK, (self._tree_key,))
            conn.execute(self._q["tree_drop"])
            conn.execute(self._q["tree_bump"])  # a tree read before this must not be saved
            now = self._now()
            tomb = tombstone(head, count, reason, now)
            rows = self._build(key, head, [tomb], now)
            # Sealed as erased through the tombstone: purged records put back from a backup
            # are refused although each is genuine.
            query = self._insert_query(rows, after_purge=True, erased_through=rows[0][1])
            ((_, position),) = conn.execute(*query).fetchall()
            conn.execute(self._q["seal_erasure"], (rows[0][1], key))
        record = Record(position, *rows[0])
        self._erased[key] = record.seq
        self._remember(key, StreamHead(record.seq, record.hash, record.recorded_at_text))
        self._wrote(record.position)
        self._cleanup_pending = True  # the deleted rows stay in the files until a vacuum
        return record

    def _erase(
        self, keys: Sequence[str], reason: str, expected_seq: int | None
    ) -> list[ErasureReceipt]:
        """See :meth:`EventStore.erase`. As with :meth:`purge`, the old row versions (with the
        erased text) stay in the table and TOAST files as dead tuples: :meth:`vacuum` makes
        their space reusable but their bytes can remain until overwritten, ``vacuum(full=True)``
        rewrites the files without them. The WAL and backups keep copies until recycled."""
        kinds = list(RECEIPT_KINDS)
        done: list[tuple[Record, ErasureReceipt]] = []
        with self._write("erase", keys=keys) as conn:
            for key in keys:
                head = self._head(conn, key)
                seq = 0 if head is None else head.seq
                if expected_seq is not None and seq != expected_seq:
                    raise ConcurrencyError(key, expected_seq, seq)
                if self._names is not None:
                    # The id goes with the content (also when only the id was left: a rerun).
                    conn.execute(self._q["drop_name"], (key,))
                pending = conn.execute(self._q["to_erase"], (key, kinds)).fetchall()
                now = self._now()
                built = erasure_record(key, [(r[0], r[1]) for r in pending], reason, now)
                if built is None:
                    continue
                item, event = built
                rows = self._build(key, head, [item], now)
                conn.execute(self._q["blank"], (key, kinds))
                conn.execute(self._q["delete_snapshots"], (key,))
                # Everything before the receipt is now empty: sealed, so content put back into
                # those records later (from a backup) is refused although it matches.
                query = self._insert_query(rows, before=len(done), erased_through=rows[0][1])
                ((_, position),) = conn.execute(*query).fetchall()
                record = Record(position, *rows[0])
                conn.execute(self._q["seal_erasure"], (record.seq, key))
                done.append((record, ErasureReceipt(memory_id_from_key(key), event, record)))
        for record, _ in done:
            self._erased[record.stream_id] = record.seq
            self._remember(
                record.stream_id, StreamHead(record.seq, record.hash, record.recorded_at_text)
            )
            self._wrote(record.position)
        return [receipt for _, receipt in done]

    def _clean_files(self, operation: str) -> bool:
        # Dead row versions with the erased text stay in the table files until a vacuum; do
        # not run one implicitly (it scans the whole table): say so, and let vacuum() do it.
        self._cleanup_pending = True
        return False

    @property
    def cleanup_pending(self) -> bool:
        return self._cleanup_pending

    def vacuum(self, *, full: bool = False) -> None:
        """Run ``VACUUM`` on the events and snapshots tables, e.g. after an erase or purge.

        Plain VACUUM removes the dead rows a purge left behind and makes their space reusable
        without blocking readers or writers; their bytes may still sit in the data files until
        that space is reused. ``full=True`` runs ``VACUUM FULL``, which rewrites both tables
        into new files but holds an exclusive lock (every read and append waits) while it runs.
        Either way the WAL and backups keep their own copies until they are recycled.
        """
        with self._guard("vacuum") as conn:
            autocommit = conn.autocommit
            conn.autocommit = True  # VACUUM cannot run inside a transaction block
            try:
                conn.execute(self._q["vacuum_full" if full else "vacuum"])
                self._cleanup_pending = self._cleanup_pending and not full
            finally:
                if conn.info.transaction_status == pq.TransactionStatus.IDLE:  # not broken
                    conn.autocommit = autocommit

    def save_snapshot(self, memory_id: MemoryId, name: str, seq: int, state: str) -> None:
        key = self._stream_key(memory_id, "save_snapshot")
        # Under the memory's append lock, so a purge cannot slip between the check and the
        # insert and leave a snapshot of erased messages behind.
        conflict = lambda: ConcurrencyError(key, seq, None)  # noqa: E731
        with self._write("save_snapshot", conflict, keys=[key]) as conn:
            if conn.execute(self._q["event_exists"], (key, seq)).fetchone() is None:
                msg = f"save_snapshot of {key} at seq {seq}: no such event (purged?)"
                raise ValueError(msg)
            conn.execute(
                self._q["save_snapshot"], (key, name, seq, state, format_time(self._now()))
            )
            conn.execute(self._q["prune_snapshots"], (key, name, seq))

    # ------------------------------------------------------------ reading

    def read(
        self,
        memory_id: MemoryId,
        *,
        gt: int | None = None,
        lte: int | None = None,
        limit: int | None = None,
        desc: bool = False,
    ) -> list[Record]:
        check_range("read", gt, lte, limit, desc)
        key = self._stream_key(memory_id, "read")
        # One statement shape per direction (absent bounds become ones that match every
        # seq, LIMIT NULL is no limit), so psycopg's automatic prepare reuses its plan.
        params = (
            key,
            0 if gt is None else gt,
            _NO_UPPER if lte is None else lte,
            None if limit is None else max(limit, 0),
        )
        query = self._q["read_desc" if desc else "read"]
        return self._opened(
            self._read("read", lambda conn: [Record(*r) for r in conn.execute(query, params)])
        )

    def _range_rows(self, key: str, gt: int, lte: int | None) -> list[tuple[Any, ...]]:
        params = (key, gt, _NO_UPPER if lte is None else lte)
        query = self._q["range_rows"]
        return self._read("read", lambda conn: conn.execute(query, params).fetchall())

    def read_all(self, *, gt: int = 0, limit: int | None = None) -> list[Record]:
        """See :meth:`EventStore.read_all`. Returns records only below the oldest transaction
        still running anywhere on the server (see ``_Q_READ_ALL``): a record committed while
        an older transaction is open shows once that transaction ends. Records this store
        object appended itself are waited for (up to ``_SETTLE_WAIT``), so an append followed
        by ``read_all`` or ``digest()`` sees it."""
        check_tail("read_all", gt, limit)
        params = (gt, None if limit is None else max(limit, 0))
        query = self._q["read_all"]
        deadline = None
        while True:
            records = self._opened(
                self._read(
                    "read_all", lambda conn: [Record(*r) for r in conn.execute(query, params)]
                )
            )
            seen = records[-1].position if records else gt
            full = limit is not None and len(records) >= limit
            own = self._own_last
            if full or own <= seen:
                return records
            now = time.monotonic()
            if deadline is None:
                deadline = now + _SETTLE_WAIT
            elif now > deadline or self._closed:
                # Our record did not show (a purge by another process deleted it, or a long
                # transaction holds the watermark back): what is returned is still exact, only
                # shorter; stop waiting for that record next time.
                with self._heads_lock:
                    if self._own_last == own:
                        self._own_last = seen
                return records
            time.sleep(0.002)

    def _wrote(self, position: int) -> None:
        with self._heads_lock:
            self._own_last = max(self._own_last, position)

    def head(self, memory_id: MemoryId) -> StreamHead | None:
        key = self._stream_key(memory_id, "head")
        # Always asks the server (other processes append too); what it learns feeds the next
        # append's cached head, which a memory's add() then chains to without a read.
        head = self._read("head", lambda conn: self._head(conn, key))
        self._remember(key, head or _EMPTY)
        return head

    def _ends(self, key: str) -> tuple[HeadSeal | None, Record | None, Record | None]:
        def run(conn: Conn) -> tuple[HeadSeal | None, Record | None, Record | None]:
            seal = first = last = None
            for tag, *row in conn.execute(self._q["ends"], (key, key, key)):
                if tag == "s":
                    seal = HeadSeal(int(row[0]), row[1], row[3], int(row[2]))
                elif tag == "f":
                    first = Record(*row)
                else:
                    last = Record(*row)
            return seal, first, last

        seal, first, last = self._read("read", run)
        opened = self._opened([r for r in (first, last) if r is not None])
        return seal, opened[0] if first else None, opened[-1] if last else None

    @property
    def _tree_key(self) -> int:
        return pgsql.lock_key("ledger-tree", self._schema)

    def _generation_in(self, conn: Conn) -> int:
        row = conn.execute(self._q["tree_gen"]).fetchone()
        return int(row[0]) if row is not None else 0

    def _tree_generation(self) -> int:
        return self._read("read the ledger tree", self._generation_in)

    def _tree_blocks(self) -> tuple[int, list[TreeBlock]]:
        def run(conn: Conn) -> tuple[int, list[TreeBlock]]:
            generation = self._generation_in(conn)
            rows = conn.execute(self._q["tree_read"]).fetchall()
            return generation, [
                TreeBlock(int(b), int(first), int(last), bytes(node), bytes(mac))
                for b, first, last, node, mac in rows
            ]

        return self._read("read the ledger tree", run)

    def _save_tree_blocks(
        self, rows: Sequence[TreeBlock], *, replace: bool, generation: int
    ) -> bool | None:
        if self._read_only:
            return None
        with self._write("save the ledger tree") as conn:
            # Savers (other processes too) and purges queue here, so what is read below still
            # holds when the rows go in.
            conn.execute(pgsql.LOCK, (self._tree_key,))
            if self._generation_in(conn) != generation:
                return False  # a purge since the rows' records were read: rebuild instead
            if replace:
                conn.execute(self._q["tree_drop"])
            row = conn.execute(self._q["tree_count"]).fetchone()
            count = int(row[0]) if row else 0
            if rows and rows[0].block > count:
                return False
            new = [r for r in rows if r.block >= count]
            if new:
                conn.execute(
                    self._q["tree_insert"],
                    (
                        [r.block for r in new],
                        [r.first_position for r in new],
                        [r.last_position for r in new],
                        [r.node for r in new],
                        [r.mac for r in new],
                    ),
                )
            return True

    def _head_seal(self, key: str) -> HeadSeal | None:
        def run(conn: Conn) -> HeadSeal | None:
            row = conn.execute(self._q["head_seal"], (key,)).fetchone()
            return None if row is None else HeadSeal(row[0], row[1], row[2], row[3])

        return self._read("read", run)

    def seq_at(self, memory_id: MemoryId, at: datetime) -> int | None:
        check_at("seq_at", at)
        params = (self._stream_key(memory_id, "seq_at"), format_time(at))

        def run(conn: Conn) -> int | None:
            row = conn.execute(self._q["seq_at"], params).fetchone()
            return None if row is None else int(row[0])

        return self._read("seq_at", run)

    def load_snapshot(
        self, memory_id: MemoryId, name: str, *, lte: int | None = None
    ) -> Snapshot | None:
        check_range("load_snapshot", None, lte, None)
        params = (
            self._stream_key(memory_id, "load_snapshot"),
            name,
            _NO_UPPER if lte is None else lte,
        )

        def run(conn: Conn) -> Snapshot | None:
            row = conn.execute(self._q["load_snapshot"], params).fetchone()
            return (
                None
                if row is None
                else Snapshot(row[0], row[1], row[2], row[3], parse_time(row[4]))
            )

        return self._read("load_snapshot", run)

    def _name_rows(self) -> dict[str, str]:
        if self._names is None:
            return {}
        return self._read("names", lambda conn: dict(conn.execute(self._q["names"]).fetchall()))

    def _stream_rows(self) -> list[tuple[str, int, int, str, str]]:
        def run(conn: Conn) -> list[tuple[str, int, int, str, str]]:
            return [
                (r[0], int(r[1]), int(r[2]), r[3], r[4]) for r in conn.execute(self._q["streams"])
            ]

        return self._read("streams", run)

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
