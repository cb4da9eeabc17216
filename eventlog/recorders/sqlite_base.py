"""The connection under :class:`~eventlog.sqlite.SQLiteEventStore`: its transactions, the
waits for another connection's lock, the one place sqlite3 errors are translated, and the
cached stream heads every write chains to."""

from __future__ import annotations

import contextlib
import math
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import sqlite_utils

from eventlog.errors import PersistenceError, StoreClosedError
from eventlog.models import StreamHead
from eventlog.recorders.sqlite_sql import HEAD, HEAD_SEAL, HEAD_SEALED, POSITION_OF
from eventlog.store import EventStore
from eventlog.validation import shown
from eventlog.vouch import Ends, records_gone, seal_not_int

__all__ = ["SQLiteBase", "check_arguments"]

_T = TypeVar("_T")
# Longest sleep between attempts to take the write lock. A commit holds it for tens of
# microseconds, so waking more often costs little; 2 ms left two processes on one
# conversation at 0.4-0.8x the rate of one.
_MAX_BACKOFF = 0.0003
_MISSING = StreamHead(-1, "", "")  # cached "this stream is empty"


def _is_busy(error: BaseException | None) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED: another connection holds a lock; worth waiting for."""
    return isinstance(error, sqlite3.OperationalError) and (
        "locked" in str(error) or "busy" in str(error)
    )


class SQLiteBase(EventStore):
    """What every part of :class:`~eventlog.sqlite.SQLiteEventStore` runs on; the store's
    ``__init__`` sets these attributes (see there for what each holds)."""

    _lock: threading.RLock
    _closed: bool
    _busy_timeout: float
    _where: str
    _db: sqlite_utils.Database
    _conn: sqlite3.Connection
    _heads: dict[str, StreamHead]
    _erased: dict[str, int]
    _ends_cache: dict[str, Ends]
    _version: int
    _sealed_schema: bool
    _tree_table: bool

    # ------------------------------------------------------------ error choke point

    @contextlib.contextmanager
    def _guard(self, operation: str) -> Iterator[sqlite3.Connection]:
        """The one place sqlite3 errors become EventLogErrors, so every operation reports a
        driver failure the same way and no caller needs to know sqlite3."""
        with self._lock:
            if self._closed:
                raise StoreClosedError(operation, f"SQLiteEventStore({self._where})")
            try:
                yield self._conn
            except sqlite3.Error as e:
                if self._conn.in_transaction:
                    self._conn.rollback()
                raise PersistenceError(operation, f"SQLite {self._where}: {e}") from e

    def _retry_locked(self, fn: Callable[[], object], operation: str) -> None:
        """Run ``fn`` (open, migrate), retrying while another connection holds a lock."""
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                fn()
                return
            except sqlite3.OperationalError as e:
                if not _is_busy(e):
                    raise
                if self._conn.in_transaction:
                    self._conn.rollback()
                if time.monotonic() > deadline:
                    raise
                time.sleep(random.uniform(0.0005, 0.005))  # noqa: S311 - jitter, not crypto

    def _read(self, operation: str, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run a read, retrying while SQLite reports the file busy (WAL recovery, a
        checkpoint), up to ``busy_timeout``."""
        deadline = 0.0
        delay = 0.00005
        while True:
            try:
                with self._guard(operation) as conn:
                    return work(conn)
            except PersistenceError as e:
                if not _is_busy(e.__cause__):
                    raise
                now = time.monotonic()
                deadline = deadline or now + self._busy_timeout
                if now > deadline:
                    raise
                time.sleep(random.uniform(0, delay))  # noqa: S311 - jitter, not crypto
                delay = min(delay * 2, 0.002)

    def _until_free(self, operation: str, statement: Callable[[], _T]) -> _T:
        """Run one statement, retrying while another connection holds the write lock, with
        short, growing, jittered sleeps (a commit takes tens of microseconds), for up to
        ``busy_timeout``."""
        deadline = 0.0
        delay = 0.00005
        while True:
            try:
                return statement()
            except sqlite3.OperationalError as e:
                if not _is_busy(e):
                    raise
                now = time.monotonic()
                deadline = deadline or now + self._busy_timeout
                if now > deadline:
                    msg = (
                        f"another connection held the write lock of {self._where} for more "
                        f"than busy_timeout={self._busy_timeout} s; raise busy_timeout or "
                        "find the long transaction"
                    )
                    raise PersistenceError(operation, msg) from e
                time.sleep(random.uniform(0, delay))  # noqa: S311 - jitter, not crypto
                delay = min(delay * 2, _MAX_BACKOFF)

    def _write(
        self,
        operation: str,
        work: Callable[[sqlite3.Connection], _T],
        *,
        one_insert: bool = False,
    ) -> _T:
        """Run ``work`` in a ``BEGIN IMMEDIATE`` transaction; commit, or roll back on any error.

        With ``one_insert`` (work writes a single row) on our own autocommit connection, the
        INSERT is its own transaction: atomic by itself, ordered by SQLite's single write lock,
        and checked by the unique (stream_id, seq) key - one statement instead of three, which
        is most of what an append costs beyond SQLite's own work.

        Spelled out rather than built on ``_guard``: this is the append hot path, and a
        generator-based context manager costs a noticeable share of an append.
        """
        with self._lock:
            if self._closed:
                raise StoreClosedError(operation, f"SQLiteEventStore({self._where})")
            conn = self._conn
            try:
                if one_insert and conn.isolation_level is None:
                    return self._until_free(operation, lambda: work(conn))
                self._until_free(operation, lambda: conn.execute("BEGIN IMMEDIATE"))
                try:
                    result = work(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.rollback()
                    raise
            except sqlite3.Error as e:
                raise PersistenceError(operation, f"SQLite {self._where}: {e}") from e
            return result

    def _sync_version(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            self._heads.clear()
            self._erased.clear()
            self._ends_cache.clear()
            self._version = version

    def _position_of(self, digest: str) -> int | None:
        row = self._read("read", lambda conn: conn.execute(POSITION_OF, (digest,)).fetchone())
        return None if row is None else int(row[0])

    def _head_locked(self, conn: sqlite3.Connection, key: str) -> StreamHead | None:
        head = self._heads.get(key)
        if head is None:
            row = conn.execute(HEAD_SEALED if self._sealed_schema else HEAD, (key,)).fetchone()
            if row is None and self._sealed_schema:
                # No records: a seal there means they were deleted (never cached: refused
                # each time, and the append that would re-seal over the loss with them).
                sealed = conn.execute(HEAD_SEAL, (key,)).fetchone()
                if sealed is not None:
                    # Read again first: outside a transaction, another writer's first record
                    # (it and its seal commit together) may have landed between the two reads.
                    row = conn.execute(HEAD_SEALED, (key,)).fetchone()
                    if row is None:
                        raise records_gone(key, sealed[0])
            erased = 0 if row is None or len(row) < 4 else row[3]
            if type(erased) is not int:
                raise seal_not_int(key, row[0], erased)  # row is not None: erased is row[3]
            head = _MISSING if row is None else StreamHead(row[0], row[1], row[2])
            self._heads[key] = head
            self._erased[key] = erased
        return None if head is _MISSING else head


_MAX_BUSY_TIMEOUT = 10**12  # seconds; above it (31,000 years) pass math.inf


def check_arguments(path: object, synchronous: object, busy_timeout: object) -> None:
    """Refuse, before anything is opened, arguments the store cannot use."""
    if synchronous not in ("NORMAL", "FULL"):
        msg = f"SQLiteEventStore: synchronous must be 'NORMAL' or 'FULL', not {shown(synchronous)}"
        raise ValueError(msg)
    if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float):
        msg = (
            "SQLiteEventStore: busy_timeout must be a number of seconds (int or float), not "
            f"{type(busy_timeout).__name__} {shown(busy_timeout)}"
        )
        raise TypeError(msg)
    if (
        # nan too (a nan deadline never passes: a lock would be waited for forever), and
        # an int too large to add to a clock reading
        not (0 <= busy_timeout <= _MAX_BUSY_TIMEOUT or busy_timeout == math.inf)
    ):
        msg = (
            "SQLiteEventStore: busy_timeout must be the seconds to wait for another "
            f"process's lock, >= 0 (math.inf: no limit), not {shown(busy_timeout)}"
        )
        raise ValueError(msg)
    if not isinstance(path, str | bytes | os.PathLike | sqlite_utils.Database):
        msg = (
            "SQLiteEventStore: path must be a file path (str or os.PathLike) or a "
            f"sqlite_utils.Database, not {type(path).__name__}"
        )
        raise TypeError(msg)
