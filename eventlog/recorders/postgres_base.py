"""The connections under :class:`~eventlog.postgres.PostgresEventStore`: its pool, its
transactions and reads, the one place psycopg errors are translated, and the cached stream heads
every write chains to (with the INSERT that checks them).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar

import psycopg
import psycopg.errors
import psycopg_pool
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from eventlog.errors import (
    ConcurrencyError,
    OutcomeUnknownError,
    PersistenceError,
    StoreClosedError,
)
from eventlog.hashing import GENESIS
from eventlog.models import Record, StreamHead
from eventlog.recorders import postgres_sql as pgsql
from eventlog.recorders.postgres_waits import waited_on
from eventlog.store import EventStore
from eventlog.vouch import records_gone

if TYPE_CHECKING:
    from psycopg.rows import TupleRow

    Conn = psycopg.Connection[TupleRow]
    Row = tuple[str, int, str, str, int, str, str, str, str, str, str, int]

__all__ = ["EMPTY_HEAD", "PostgresBase", "connection_lost", "pool_params"]

_T = TypeVar("_T")

_CONNECT_TIMEOUT = 5  # seconds, for each connection attempt and for opening the pool
_CHECKOUT_TIMEOUT = 10.0  # seconds to wait for a free pooled connection
_POOL_MIN = 1
_CONTENDED_FOR = 1.0  # seconds a memory's appends read its head first after a conflict
_HEADS_MAX = 10_000  # cached stream heads per store; the oldest entry goes first
EMPTY_HEAD = StreamHead(0, GENESIS, "")  # cached head of an empty stream (what _build chains to)
_RESOLVE_WAIT = 2.0  # seconds to wait for a lost commit's transaction before terminating it
_RESOLVE_DEADLINE = 30.0  # seconds to keep asking the server whether a lost commit landed
_HANDOFF = "chatledger_handoff"  # pool kwarg carrying the connection the store opened itself


def pool_params(pool: psycopg_pool.ConnectionPool[Conn] | None) -> dict[str, Any]:
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


def connection_lost(e: psycopg.Error) -> bool:
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


class PostgresBase(EventStore):
    """What every part of :class:`~eventlog.postgres.PostgresEventStore` runs on; the store's
    ``__init__`` sets these attributes (see there for what each holds)."""

    _max_connections: int
    _closed: bool
    _schema: str
    _timeout: float | None
    _read_retries: int
    _password: str
    _where: str
    _name: str
    _q: dict[str, bytes]
    _ident: sql.Identifier
    _setup_key: int
    _heads: dict[str, StreamHead]
    _erased: dict[str, int]
    _heads_lock: threading.Lock
    _contended: dict[str, float]
    _own_last: int
    _pipelined: bool
    _pool: psycopg_pool.ConnectionPool[Conn]

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
        elif isinstance(e, psycopg.errors.ReadOnlySqlTransaction):
            remedy = (
                "the server accepts no writes here (a hot standby, or default_transaction_read_only"
                " on the role, database or session): connect to the primary to write, or open the "
                "store with read_only=True to read"
            )
        elif _login_refused(e):
            remedy = "the server refused the login; check user and password"
        elif connection_lost(e):
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
        events table against every insert): commit on success, else roll back.

        Raises:
            OutcomeUnknownError: The connection was lost during the COMMIT: the client cannot
                know whether it landed (an erasure's caller must look before acting on it).
        """
        committing = False
        try:
            with self._transaction(operation, conflict, keys, whole_log) as conn:
                yield conn
                committing = True
        except PersistenceError as e:
            cause = e.__cause__
            if not (committing and isinstance(cause, psycopg.Error) and connection_lost(cause)):
                raise
            which = ", ".join(f"head({key!r:.80})" for key in keys) or "the store"
            why = str(e).removeprefix(f"{operation} failed: ")
            msg = (
                f"the connection was lost during its COMMIT, so whether it landed is unknown "
                f"({why}); check {which} before acting on it (an erase run again erases only "
                "what is left; a purge with the same expected_seq is refused once it landed)"
            )
            raise OutcomeUnknownError(operation, msg) from cause

    @contextlib.contextmanager
    def _transaction(
        self,
        operation: str,
        conflict: Callable[[], ConcurrencyError] | None,
        keys: Sequence[str],
        whole_log: bool,
    ) -> Iterator[Conn]:
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
                lost = isinstance(e.__cause__, psycopg.Error) and connection_lost(e.__cause__)
                if not lost or attempt >= self._read_retries or self._closed:
                    raise
            attempt += 1
            # Drop every broken idle connection at once (a server restart breaks them all),
            # then back off a little before the next attempt.
            with contextlib.suppress(Exception):
                self._pool.check()
            time.sleep(0.02 * 4 ** (attempt - 1))

    # ------------------------------------------------------------ cached heads

    def _head(self, conn: Conn, key: str) -> StreamHead | None:
        row = conn.execute(self._q["head"], (key,)).fetchone()
        if row is None:
            # No records: a seal there means they were deleted (see vouch.records_gone).
            sealed = conn.execute(self._q["head_seal"], (key,)).fetchone()
            if sealed is not None:
                # Read again first: each statement sees what committed before it, and another
                # writer's first record (committed with its seal) may have landed in between.
                row = conn.execute(self._q["head"], (key,)).fetchone()
                if row is None:
                    raise records_gone(key, sealed[0])
        self._note_erased(key, 0 if row is None else int(row[3]))
        return None if row is None else StreamHead(row[0], row[1], row[2])

    def _note_erased(self, key: str, erased_through: int) -> None:
        # Cached beside the head, and as trustworthy: it changes only with an erasure, whose
        # receipt moves the head, so a stale value makes the insert's head check refuse it.
        if len(self._erased) >= 2 * _HEADS_MAX:
            self._erased.clear()  # bounded; an append without it reads the head under the lock
        self._erased[key] = erased_through

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

    def _contend(self, key: str) -> None:
        """Another writer of this memory got in first: for a while, read the head under the
        lock instead of sending a cached head that is likely stale (each stale one costs a
        refused statement and a second attempt while the other writers queue)."""
        with self._heads_lock:
            if len(self._contended) >= _HEADS_MAX:
                self._contended.clear()  # bounded; forgetting costs one conflict per memory
            self._contended[key] = time.monotonic() + _CONTENDED_FOR

    def _wrote(self, position: int) -> None:
        with self._heads_lock:
            self._own_last = max(self._own_last, position)

    @property
    def _tree_key(self) -> int:
        return pgsql.lock_key("ledger-tree", self._schema)

    @property
    def _tree_table(self) -> str:
        """The quoted name of the ledger tree's table, for ``to_regclass``."""
        return f"{self._ident.as_string()}.ledger_blocks"

    def _has_tree(self, conn: Conn) -> bool:
        """Whether the ledger tree's table exists: derived data, which a hand may drop (then
        the tree lives in memory, rebuilt from the records, as on a store that keeps none)."""
        row = conn.execute(pgsql.TABLE_EXISTS, (self._tree_table,)).fetchone()
        return bool(row and row[0])

    def _landed(
        self, key: str, rows: list[Row], pid: int, action: str = "append"
    ) -> list[Record] | None:
        """The records of an append (or of the erase or purge ``action`` names) whose connection
        was lost, if its commit landed; None if it did not (nothing of it is stored).

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
        operation = f"{action} (resolving a lost connection)"
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
                lost = isinstance(e.__cause__, psycopg.Error) and connection_lost(e.__cause__)
                if not lost or time.monotonic() > deadline or self._closed:
                    msg = (
                        f"{action} {'to' if action == 'append' else 'of'} {key} at seq {seqs[0]}: "
                        "the connection was lost around "
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
