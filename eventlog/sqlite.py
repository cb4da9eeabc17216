"""SQLiteEventStore: the embedded default, one row per event in a WAL-mode SQLite file."""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Literal

import sqlite_utils

from eventlog.errors import ConcurrencyError, PersistenceError, StoreClosedError
from eventlog.ids import MemoryId, memory_key
from eventlog.models import NewRecord, Record, Snapshot, StreamHead, format_time, parse_time
from eventlog.store import EventStore

__all__ = ["MIGRATIONS", "SQLiteEventStore"]

MIGRATIONS = sqlite_utils.Migrations("eventlog")


@MIGRATIONS()
def m001_events(db: sqlite_utils.Database) -> None:
    """Events, one row each, plus derived snapshots. IF NOT EXISTS makes a concurrent first
    open by two processes harmless."""
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS events (
            -- AUTOINCREMENT: a purge deletes rows, and a reused position would make a
            -- tailing reader (read_all(gt=last_seen)) skip or repeat records.
            position INTEGER PRIMARY KEY AUTOINCREMENT,
            stream_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            recorded_at TEXT NOT NULL,
            kind TEXT NOT NULL,
            schema_version INTEGER NOT NULL,
            payload TEXT NOT NULL,
            meta TEXT NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL,
            UNIQUE (stream_id, seq)
        );
        CREATE TABLE IF NOT EXISTS snapshots (
            stream_id TEXT NOT NULL,
            name TEXT NOT NULL,
            seq INTEGER NOT NULL,
            state TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (stream_id, name, seq)
        ) WITHOUT ROWID;
        """
    )


_COLUMNS = (
    "position, stream_id, seq, recorded_at, kind, schema_version, payload, meta, prev_hash, hash"
)
_INSERT = (
    "INSERT INTO events (stream_id, seq, recorded_at, kind, schema_version, payload, meta, "
    "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_HEAD = "SELECT seq, hash, recorded_at FROM events WHERE stream_id = ? ORDER BY seq DESC LIMIT 1"
_SEQ_AT = (
    "SELECT seq FROM events WHERE stream_id = ? AND recorded_at <= ? ORDER BY seq DESC LIMIT 1"
)
_READ_ALL = f"SELECT {_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?"
_STREAMS = (
    "SELECT stream_id, count(*), max(seq), min(recorded_at), max(recorded_at) "
    "FROM events GROUP BY stream_id"
)
_SAVE_SNAPSHOT = "INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?, ?, ?)"
_LOAD_SNAPSHOT = (
    "SELECT stream_id, name, seq, state, created_at FROM snapshots "
    "WHERE stream_id = ? AND name = ? AND seq <= ? ORDER BY seq DESC LIMIT 1"
)

_NO_LIMIT = -1  # SQLite's LIMIT -1 means "no limit"
_MISSING = StreamHead(-1, "", "")  # cached "this stream is empty"


class SQLiteEventStore(EventStore):
    """Event store in a SQLite file, safe for many threads and several processes.

    Writes run in ``BEGIN IMMEDIATE`` transactions, so a writer takes the file's write lock
    before it reads the head it chains to; waiting for the lock is bounded by ``busy_timeout``
    and retried, and "database is locked" never reaches a caller before that time is up.

    Args:
        path: A file path, or a ``sqlite_utils.Database`` you already opened (its connection
            must not be shared with other threads outside this store).
        synchronous: ``"NORMAL"`` (default: a commit survives an application crash, and
            WAL keeps the file consistent on power loss, but the last commits may be lost
            then) or ``"FULL"`` (every commit is fsynced before it returns).
        busy_timeout: Seconds to wait for another writer's lock before giving up with
            :class:`PersistenceError`.
        create_schema: Apply the schema migrations on open (default). Pass False for a
            database whose schema is managed elsewhere.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | sqlite_utils.Database,
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout: float = 30.0,
        create_schema: bool = True,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            msg = f"SQLiteEventStore: synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}"
            raise ValueError(msg)
        self._lock = threading.RLock()
        self._closed = False
        self._busy_timeout = busy_timeout
        self._where = str(path) if not isinstance(path, sqlite_utils.Database) else "Database"
        if isinstance(path, sqlite_utils.Database):
            self._db = path
        else:
            try:
                # check_same_thread=False: one connection serves every thread, serialized by
                # self._lock.
                conn = sqlite3.connect(
                    os.fspath(path), check_same_thread=False, timeout=busy_timeout
                )
            except sqlite3.Error as e:
                raise PersistenceError("open", f"cannot open SQLite file {self._where}: {e}") from e
            self._db = sqlite_utils.Database(conn)
        self._conn = self._db.conn
        # Per-stream head cache, valid while PRAGMA data_version is unchanged (it changes
        # exactly when another connection commits), so head() rarely touches the table.
        self._heads: dict[str, StreamHead] = {}
        self._version = -1
        with self._guard("open"):
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            if not self._db.memory:
                self._retry_locked(self._db.enable_wal, "open")
            self._conn.execute(f"PRAGMA synchronous = {synchronous}")
            # Purged messages must not survive in free pages of the file.
            self._conn.execute("PRAGMA secure_delete = ON")
            if create_schema:
                self._retry_locked(lambda: MIGRATIONS.apply(self._db), "migrate")

    @property
    def db(self) -> sqlite_utils.Database:
        """The underlying ``sqlite_utils.Database`` (read it freely; do not write events)."""
        return self._db

    # ------------------------------------------------------------ error choke point

    @contextlib.contextmanager
    def _guard(self, operation: str) -> Iterator[sqlite3.Connection]:
        """The one place sqlite3 errors become EventLogErrors (house style rule 8)."""
        with self._lock:
            if self._closed:
                raise StoreClosedError(operation, f"SQLiteEventStore({self._where})")
            try:
                yield self._conn
            except sqlite3.Error as e:
                if self._conn.in_transaction:
                    self._conn.rollback()
                raise PersistenceError(operation, f"SQLite {self._where}: {e}") from e

    def _retry_locked(self, fn: object, operation: str) -> None:
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                fn()  # type: ignore[operator]
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e):
                    raise
                if self._conn.in_transaction:
                    self._conn.rollback()
                if time.monotonic() > deadline:
                    raise
                time.sleep(random.uniform(0.0005, 0.005))  # noqa: S311 - jitter, not crypto

    @contextlib.contextmanager
    def _write(self, operation: str) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: commit on success, roll back on any error."""
        with self._guard(operation) as conn:
            deadline = time.monotonic() + self._busy_timeout
            delay = 0.00005
            while True:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    break
                except sqlite3.OperationalError as e:
                    if "locked" not in str(e) and "busy" not in str(e):
                        raise
                    if time.monotonic() > deadline:
                        msg = (
                            f"another process held the write lock of {self._where} for more "
                            f"than {self._busy_timeout} s; raise busy_timeout or find the "
                            "long transaction"
                        )
                        raise PersistenceError(operation, msg) from e
                    # Short, growing, jittered sleeps: a commit takes tens of microseconds,
                    # so SQLite's own millisecond back-off would waste most of the wait.
                    time.sleep(random.uniform(0, delay))  # noqa: S311 - jitter, not crypto
                    delay = min(delay * 2, 0.002)
            try:
                self._sync_version(conn)
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.rollback()
                raise

    def _sync_version(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            self._heads.clear()
            self._version = version

    def _head_locked(self, conn: sqlite3.Connection, key: str) -> StreamHead | None:
        head = self._heads.get(key)
        if head is None:
            row = conn.execute(_HEAD, (key,)).fetchone()
            head = _MISSING if row is None else StreamHead(row[0], row[1], row[2])
            self._heads[key] = head
        return None if head is _MISSING else head

    # ------------------------------------------------------------ writing

    def append(
        self,
        memory_id: MemoryId,
        items: Sequence[NewRecord],
        *,
        expected_seq: int | None = None,
    ) -> list[Record]:
        key = memory_key(memory_id)
        self._check_items(items)
        if not items:
            with self._guard("append"):
                return []
        with self._write("append") as conn:
            head = self._head_locked(conn, key)
            actual = 0 if head is None else head.seq
            if expected_seq is not None and expected_seq != actual:
                raise ConcurrencyError(key, expected_seq, actual)
            rows = self._build(key, head, items, self._now())
            records = []
            try:
                for row in rows:
                    cursor = conn.execute(_INSERT, row)
                    records.append(Record(cursor.lastrowid or 0, *row))
            except sqlite3.IntegrityError as e:
                # The unique (stream_id, seq) key caught a writer our cached head missed.
                self._heads.pop(key, None)
                raise ConcurrencyError(
                    key, actual if expected_seq is None else expected_seq, None
                ) from e
            last = rows[-1]
        self._heads[key] = StreamHead(last[1], last[8], last[2])
        return records

    def purge(self, memory_id: MemoryId, *, expected_seq: int, reason: str) -> Record:
        key = memory_key(memory_id)
        with self._write("purge") as conn:
            head = self._head_locked(conn, key)
            if head is None:
                msg = f"purge of {key}: the stream is empty; nothing to erase"
                raise ValueError(msg)
            if head.seq != expected_seq:
                raise ConcurrencyError(key, expected_seq, head.seq)
            (count,) = conn.execute(
                "SELECT count(*) FROM events WHERE stream_id = ?", (key,)
            ).fetchone()
            now = self._now()
            tomb = self._tombstone(head, count, reason, now)
            conn.execute("DELETE FROM events WHERE stream_id = ?", (key,))
            conn.execute("DELETE FROM snapshots WHERE stream_id = ?", (key,))
            (row,) = self._build(key, head, [tomb], now)
            cursor = conn.execute(_INSERT, row)
            record = Record(cursor.lastrowid or 0, *row)
        self._heads[key] = StreamHead(record.seq, record.hash, record.recorded_at_text)
        with self._guard("purge checkpoint") as conn:
            # secure_delete zeroed the freed pages, but the WAL still holds copies of them
            # until it is checkpointed and truncated.
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return record

    def save_snapshot(self, memory_id: MemoryId, name: str, seq: int, state: str) -> None:
        key = memory_key(memory_id)
        with self._write("save_snapshot") as conn:
            conn.execute(_SAVE_SNAPSHOT, (key, name, seq, state, format_time(self._now())))

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
        key = memory_key(memory_id)
        sql = f"SELECT {_COLUMNS} FROM events WHERE stream_id = ?"
        params: list[object] = [key]
        if gt is not None:
            sql += " AND seq > ?"
            params.append(gt)
        if lte is not None:
            sql += " AND seq <= ?"
            params.append(lte)
        sql += " ORDER BY seq DESC LIMIT ?" if desc else " ORDER BY seq LIMIT ?"
        params.append(_NO_LIMIT if limit is None else max(limit, 0))
        with self._guard("read") as conn:
            return [Record(*row) for row in conn.execute(sql, params)]

    def read_all(self, *, gt: int = 0, limit: int | None = None) -> list[Record]:
        with self._guard("read_all") as conn:
            rows = conn.execute(_READ_ALL, (gt, _NO_LIMIT if limit is None else max(limit, 0)))
            return [Record(*row) for row in rows]

    def head(self, memory_id: MemoryId) -> StreamHead | None:
        key = memory_key(memory_id)
        with self._guard("head") as conn:
            self._sync_version(conn)
            return self._head_locked(conn, key)

    def seq_at(self, memory_id: MemoryId, at: datetime) -> int | None:
        key = memory_key(memory_id)
        with self._guard("seq_at") as conn:
            row = conn.execute(_SEQ_AT, (key, format_time(at))).fetchone()
            return None if row is None else int(row[0])

    def load_snapshot(
        self, memory_id: MemoryId, name: str, *, lte: int | None = None
    ) -> Snapshot | None:
        key = memory_key(memory_id)
        bound = (1 << 62) if lte is None else lte
        with self._guard("load_snapshot") as conn:
            row = conn.execute(_LOAD_SNAPSHOT, (key, name, bound)).fetchone()
        if row is None:
            return None
        return Snapshot(row[0], row[1], row[2], row[3], parse_time(row[4]))

    def _stream_rows(self) -> list[tuple[str, int, int, str, str]]:
        with self._guard("streams") as conn:
            return [tuple(row) for row in conn.execute(_STREAMS)]  # type: ignore[misc]

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
