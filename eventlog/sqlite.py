"""SQLiteEventStore: the embedded default, one row per event in a WAL-mode SQLite file."""

from __future__ import annotations

import contextlib
import os
import pathlib
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import sqlite_utils

from eventlog.erasure import brings_erasure, erased_after, erasure_record, tombstone
from eventlog.errors import ConcurrencyError, PersistenceError, StoreClosedError
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
from eventlog.store import EventStore, LedgerTx
from eventlog.validation import check_at, check_range, check_tail
from eventlog.vouch import NO_SEALS, Ends

if TYPE_CHECKING:
    from eventlog.witness import Witness

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SQLiteEventStore", "is_ledger_file"]

MIGRATIONS = sqlite_utils.Migrations("eventlog")


@MIGRATIONS()
def m001_events(db: sqlite_utils.Database) -> None:
    """Events, one row each, plus derived snapshots. IF NOT EXISTS makes a concurrent first
    open by two processes harmless."""
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS events (
            -- No AUTOINCREMENT (it costs a third of an append): positions are never reused
            -- because purge() inserts its tombstone before deleting, so the largest
            -- position always survives and new rows keep counting up from it.
            position INTEGER PRIMARY KEY,
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


@MIGRATIONS()
def m002_record_format(db: sqlite_utils.Database) -> None:
    """Record format 2/3: salted payload commitments and the format of each record. Rows
    written before keep the defaults, which say what they are: format 1, no salt or commitment.
    Plus the settings table, which holds a keyed store's key check value."""
    # ALTER TABLE has no IF NOT EXISTS; checking first keeps a re-run harmless, as m001 is.
    have = {row[1] for row in db.execute("PRAGMA table_info(events)").fetchall()}
    for name, ddl in (
        ("salt", "salt TEXT NOT NULL DEFAULT ''"),
        ("commitment", "commitment TEXT NOT NULL DEFAULT ''"),
        ("format", "format INTEGER NOT NULL DEFAULT 1"),
    ):
        if name not in have:
            db.execute(f"ALTER TABLE events ADD COLUMN {ddl}")
    db.execute(
        "CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL) "
        "WITHOUT ROWID"
    )


@MIGRATIONS()
def m003_head_seals(db: sqlite_utils.Database) -> None:
    """Head seals: one row per memory saying which record is its newest (see
    eventlog.hashing.head_mac), so reads refuse a truncated tail. An append sets it in the same
    statement as its INSERT: the row carries the seal in ``head_mac`` and a trigger moves it
    into ``heads`` and blanks it, so no record keeps a seal an attacker could put back after
    deleting the records after it. Existing memories get blank seals, which the next writable
    open fills in (``eventlog.keycheck.settle_keys``)."""
    have = {row[1] for row in db.execute("PRAGMA table_info(events)").fetchall()}
    if "head_mac" not in have:
        db.execute("ALTER TABLE events ADD COLUMN head_mac TEXT NOT NULL DEFAULT ''")
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS heads (
            stream_id TEXT PRIMARY KEY,
            seq INTEGER NOT NULL,
            hash TEXT NOT NULL,
            mac TEXT NOT NULL,
            erased_through INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID;
        INSERT OR IGNORE INTO heads (stream_id, seq, hash, mac, erased_through)
            SELECT e.stream_id, e.seq, e.hash, '',
                coalesce((SELECT max(r.seq) FROM events r WHERE r.stream_id = e.stream_id
                          AND r.kind = 'memory_erased'), 0)
            FROM events e
            WHERE e.seq = (SELECT max(seq) FROM events m WHERE m.stream_id = e.stream_id);
        CREATE TRIGGER IF NOT EXISTS events_seal_head AFTER INSERT ON events
        WHEN NEW.head_mac != ''
        BEGIN
            INSERT INTO heads (stream_id, seq, hash, mac)
                VALUES (NEW.stream_id, NEW.seq, NEW.hash, NEW.head_mac)
                ON CONFLICT (stream_id) DO UPDATE
                SET seq = excluded.seq, hash = excluded.hash, mac = excluded.mac;
            UPDATE events SET head_mac = '' WHERE position = NEW.position;
        END;
        """
    )


# "CHLG": the SQLite header's application_id (offset 68), set when chatledger creates or
# migrates a ledger, so a file is recognised as ours by its header - never by a table name -
# without SQLite opening it (opening a WAL file read-only creates -wal/-shm files beside it).
APPLICATION_ID = 0x43484C47
_HEADER = b"SQLite format 3\x00"
# How long an erase or purge waits for readers to let its WAL checkpoint run, in seconds.
CLEANUP_WAIT = 0.5


@MIGRATIONS()
def m004_marker(db: sqlite_utils.Database) -> None:
    """Mark the file as a chatledger ledger in its header (see APPLICATION_ID)."""
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")


@MIGRATIONS()
def m005_ledger_tree(db: sqlite_utils.Database) -> None:
    """The ledger tree's stored blocks (see eventlog.ledger_tree): derived data, so the first
    digest of a process reads a few thousand rows instead of every record."""
    db.execute(
        """
        CREATE TABLE IF NOT EXISTS ledger_blocks (
            block INTEGER PRIMARY KEY,
            first_position INTEGER NOT NULL,
            last_position INTEGER NOT NULL,
            node BLOB NOT NULL,
            mac BLOB NOT NULL
        )
        """
    )


@MIGRATIONS()
def m006_names(db: sqlite_utils.Database) -> None:
    """Erasable ids (see eventlog.names): the id of each pseudonymous stream, in a row an
    erasure deletes. Empty on ledgers created without erasable ids."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS names (stream_id TEXT PRIMARY KEY, name TEXT NOT NULL) "
        "WITHOUT ROWID"
    )


def is_ledger_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a SQLite file chatledger created or migrated, read from its header
    alone (100 bytes; the file is not opened as a database, so nothing beside it is created)."""
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError:
        return False
    if len(header) < 100 or not header.startswith(_HEADER):
        return False
    # Until a checkpoint copies it into the file, the newest first page (with the header) of a
    # database in WAL mode is in the WAL: a ledger created moments ago by a running writer.
    page = _newest_first_page(f"{os.fspath(path)}-wal") or header
    return int.from_bytes(page[68:72], "big") == APPLICATION_ID


def _newest_first_page(wal_path: str) -> bytes | None:
    """The newest copy of page 1 in a WAL file (format: sqlite.org/fileformat2.html#walformat),
    or None: frames of the current WAL generation only (their salts match the header's)."""
    try:
        with open(wal_path, "rb") as f:
            head = f.read(32)
            if len(head) < 32 or int.from_bytes(head[:4], "big") not in (0x377F0682, 0x377F0683):
                return None
            size = int.from_bytes(head[8:12], "big")
            salts = head[16:24]
            newest = None
            while True:
                frame = f.read(24 + size)
                if len(frame) < 24 + size:
                    return newest
                if frame[8:16] == salts and int.from_bytes(frame[:4], "big") == 1:
                    newest = frame[24:124]
    except OSError:
        return None


_COLUMNS = (
    "position, stream_id, seq, recorded_at, kind, schema_version, payload, meta, prev_hash, hash, "
    "salt, commitment, format"
)
_INSERT_COLUMNS = (
    "INSERT INTO events (stream_id, seq, recorded_at, kind, schema_version, payload, meta, "
    "prev_hash, hash, salt, commitment, format, head_mac) "
)
_INSERT = _INSERT_COLUMNS + "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
# With expected_hash: inserts nothing unless the STORED head is the record the row chains to
# (the cached head may predate a head replaced at the same seq, which the unique key cannot see).
_INSERT_IF_HEAD = (
    _INSERT_COLUMNS + "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE coalesce((SELECT hash "
    "FROM events WHERE stream_id = ? ORDER BY seq DESC LIMIT 1), ?) = ?"
)
_SETTINGS_EXIST = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'settings'"
_HEADS_EXIST = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'heads'"
_TREE_EXISTS = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ledger_blocks'"
_TREE_READ = (
    "SELECT block, first_position, last_position, node, mac FROM ledger_blocks ORDER BY block"
)
_TREE_GEN = "SELECT value FROM settings WHERE name = 'ledger_tree_generation'"
_TREE_BUMP = (
    "INSERT INTO settings (name, value) VALUES ('ledger_tree_generation', '1') "
    "ON CONFLICT (name) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)"
)
_TREE_COUNT = "SELECT count(*) FROM ledger_blocks"
_TREE_DROP = "DELETE FROM ledger_blocks"
_TREE_INSERT = (
    "INSERT OR IGNORE INTO ledger_blocks (block, first_position, last_position, node, mac) "
    "VALUES (?, ?, ?, ?, ?)"
)
_GET_SETTING = "SELECT value FROM settings WHERE name = ?"
_PUT_SETTING = "INSERT OR REPLACE INTO settings (name, value) VALUES (?, ?)"
_KEYED_RECORDS = "SELECT 1 FROM events WHERE format = 3 LIMIT 1"
_ANY_RECORDS = "SELECT 1 FROM events LIMIT 1"
_LAST_POSITION = "SELECT coalesce(max(position), 0) FROM events"
_LEGACY_HASHES = "SELECT hash FROM events WHERE format != 3 AND position <= ? ORDER BY position"
_SEALS = "SELECT stream_id, seq, hash, erased_through FROM heads"
_PUT_SEAL = "UPDATE heads SET mac = ? WHERE stream_id = ?"
_HEAD_SEAL = "SELECT seq, hash, mac, erased_through FROM heads WHERE stream_id = ?"
# The read path's ends of a memory (first record, newest record, seal) in one statement, so one
# snapshot: tagged rows, the seal padded to a record's width.
_ENDS_RECORDS = (
    "SELECT 'f', * FROM (SELECT {cols} FROM events WHERE stream_id = ? ORDER BY seq LIMIT 1) "
    "UNION ALL SELECT 'l', * FROM (SELECT {cols} FROM events WHERE stream_id = ? "
    "ORDER BY seq DESC LIMIT 1)"
)
_ENDS_SEAL = (
    " UNION ALL SELECT 's', seq, hash, mac, erased_through, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL FROM heads WHERE stream_id = ?"
)
_SEAL_ERASURE = "UPDATE heads SET erased_through = ? WHERE stream_id = ?"
# The head and what its seal covers besides (erased_through), for appends to seal the next.
_HEAD_SEALED = (
    "SELECT e.seq, e.hash, e.recorded_at, coalesce(h.erased_through, 0) FROM events e "
    "LEFT JOIN heads h ON h.stream_id = e.stream_id WHERE e.stream_id = ? "
    "ORDER BY e.seq DESC LIMIT 1"
)
_HEAD = "SELECT seq, hash, recorded_at FROM events WHERE stream_id = ? ORDER BY seq DESC LIMIT 1"
_PUT_NAME = "INSERT OR IGNORE INTO names (stream_id, name) VALUES (?, ?)"
_DROP_NAME = "DELETE FROM names WHERE stream_id = ?"
_NAMES = "SELECT stream_id, name FROM names"
_SEQ_AT = (
    "SELECT seq FROM events WHERE stream_id = ? AND recorded_at <= ? ORDER BY seq DESC LIMIT 1"
)
_SELECT = f"SELECT {_COLUMNS} FROM events WHERE "  # noqa: S608 - constants only, no user text
_READ_ALL = _SELECT + "position > ? ORDER BY position LIMIT ?"
# Rows for verify(digest=)'s pass, Record-shaped (an empty `sealed` last): run by this store and
# by that pass's worker process, on its own read-only connection (eventlog.ledger_scan).
SCAN_ROWS = f"SELECT {_COLUMNS}, '' FROM events WHERE position > ? ORDER BY position LIMIT ?"  # noqa: S608
# _range_rows(): RANGE_ROW_FIELDS' order; no upper bound is _NO_UPPER, past every seq.
_RANGE_ROWS = (
    "SELECT seq, recorded_at, kind, schema_version, payload, meta, prev_hash, hash, salt, "
    "commitment, format, position FROM events WHERE stream_id = ? AND seq > ? AND seq <= ? "
    "ORDER BY seq"
)
# read() with every combination of bounds, built once: (has gt, has lte, desc) -> SQL.
_READ = {
    (gt, lte, desc): _SELECT
    + "stream_id = ?"
    + (" AND seq > ?" if gt else "")
    + (" AND seq <= ?" if lte else "")
    + (" ORDER BY seq DESC LIMIT ?" if desc else " ORDER BY seq LIMIT ?")
    for gt in (False, True)
    for lte in (False, True)
    for desc in (False, True)
}
_STREAMS = (
    "SELECT stream_id, count(*), max(seq), min(recorded_at), max(recorded_at) "
    "FROM events GROUP BY stream_id"
)
# Records erase() must blank: content left (format 1 always counts: it cannot be blanked).
_TO_ERASE = (
    "SELECT seq, format FROM events WHERE stream_id = ? AND kind NOT IN (?, ?) "
    "AND (format = 1 OR salt != '' OR payload != '') ORDER BY seq"
)
_BLANK = (
    "UPDATE events SET payload = '', salt = '' WHERE stream_id = ? AND kind NOT IN (?, ?) "
    "AND (salt != '' OR payload != '')"
)
_EVENT_EXISTS = "SELECT 1 FROM events WHERE stream_id = ? AND seq = ?"
_EVENTS_EXIST = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'"
_PRUNE_SNAPSHOTS = "DELETE FROM snapshots WHERE stream_id = ? AND name = ? AND seq < ?"
_SAVE_SNAPSHOT = "INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?, ?, ?)"
_LOAD_SNAPSHOT = (
    "SELECT stream_id, name, seq, state, created_at FROM snapshots "
    "WHERE stream_id = ? AND name = ? AND seq <= ? ORDER BY seq DESC LIMIT 1"
)

_T = TypeVar("_T")
# Longest sleep between attempts to take the write lock. A commit holds it for tens of
# microseconds, so waking more often costs little; 2 ms left two processes on one
# conversation at 0.4-0.8x the rate of one.
_MAX_BACKOFF = 0.0003
_NO_LIMIT = -1  # SQLite's LIMIT -1 means "no limit"
_NO_UPPER = 1 << 62
_MISSING = StreamHead(-1, "", "")  # cached "this stream is empty"


class _Tx:
    """The ledger's view of one SQLite transaction at open (see ``LedgerTx``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        # create_schema=False on a database migrated by an older version: no such tables.
        self._settings = conn.execute(_SETTINGS_EXIST).fetchone() is not None
        self._heads = conn.execute(_HEADS_EXIST).fetchone() is not None

    def sealable(self) -> bool:
        return self._heads

    def setting(self, name: str) -> str | None:
        if not self._settings:
            return None
        row = self._conn.execute(_GET_SETTING, (name,)).fetchone()
        return None if row is None else str(row[0])

    def put_setting(self, name: str, value: str) -> None:
        self._conn.execute(_PUT_SETTING, (name, value))

    def facts(self) -> tuple[bool, bool, int]:
        return (
            self._conn.execute(_ANY_RECORDS).fetchone() is not None,
            self._conn.execute(_KEYED_RECORDS).fetchone() is not None,
            int(self._conn.execute(_LAST_POSITION).fetchone()[0]),
        )

    def legacy_hashes(self, upto: int | None) -> Iterator[str]:
        bound = (1 << 62) if upto is None else upto
        for (value,) in self._conn.execute(_LEGACY_HASHES, (bound,)):
            yield str(value)

    def seals(self, *, pending: bool) -> list[tuple[str, int, str, int]]:
        if not self._heads:
            return []
        sql = _SEALS + (" WHERE mac = ''" if pending else "")
        return [(r[0], r[1], r[2], r[3]) for r in self._conn.execute(sql)]

    def put_seals(self, rows: Sequence[tuple[str, str]]) -> None:
        self._conn.executemany(_PUT_SEAL, rows)


def _is_busy(error: BaseException | None) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED: another connection holds a lock; worth waiting for."""
    return isinstance(error, sqlite3.OperationalError) and (
        "locked" in str(error) or "busy" in str(error)
    )


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
        key: Chain key, at least 16 bytes (see :class:`~eventlog.store.EventStore`): new
            records are format 3, HMAC-SHA256 under it. Keep it outside the database.
        read_only: Never write: no migration, no journal mode change, no key check or seal;
            appends, erasures, purges and snapshots raise :class:`ReadOnlyError`.
        adopt_key: Key a database that holds unkeyed records (sealing them as they are);
            without it such an open with ``key=`` raises :class:`ChainKeyError`.
        witness: A file path, a ``postgresql://`` URL of another database, or a
            :class:`~eventlog.witness.Witness`, kept outside the database: the open refuses a
            ledger behind or diverging from it, and appends and close move it forward (see
            :mod:`eventlog.witness`). Default: none.

    Raises:
        RollbackError: The ledger is behind its witness or diverges from it.
        ChainKeyError: ``key`` does not match the database's key check value, or is given
            for an unkeyed database holding records without ``adopt_key=True``.
        ValueError: ``key`` is shorter than 16 bytes.
        PersistenceError: The file cannot be opened.
    """

    _cleanup_pending = False  # an erase's WAL checkpoint that readers blocked

    def __init__(
        self,
        path: str | os.PathLike[str] | sqlite_utils.Database,
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout: float = 30.0,
        create_schema: bool = True,
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
            if read_only and not is_ledger_file(path):
                # Refused before SQLite opens it: a read never changes a file that is not ours.
                operation = "open"
                detail = (
                    f"{self._where} is not a chatledger ledger (no chatledger marker in its "
                    "SQLite header); pass the path of a ledger, or - for one written by a "
                    "chatledger before the marker - open it once without read_only"
                )
                raise PersistenceError(operation, detail)
            try:
                # check_same_thread=False: one connection serves every thread, serialized by
                # self._lock. timeout=0: SQLite's own busy handler sleeps 1, 2, 5, 10 ms ...
                # while another writer's commit takes ~20 us; two processes appending then got
                # 0.6x the rate of one. _until_free() and _read() wait with short jittered sleeps.
                # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE), and a
                # one-record append is a single autocommit INSERT (see _write).
                # read_only: SQLite's own read-only mode, which never writes the file - not even
                # the checkpoint a read-write connection runs when it is the last to close.
                target, uri = (
                    (pathlib.Path(path).resolve().as_uri() + "?mode=ro", True)
                    if read_only
                    else (os.fspath(path), False)
                )
                conn = sqlite3.connect(
                    target, check_same_thread=False, timeout=0, isolation_level=None, uri=uri
                )
            except sqlite3.Error as e:
                operation, detail = "open", f"cannot open SQLite file {self._where}: {e}"
                raise PersistenceError(operation, detail) from e
            self._db = sqlite_utils.Database(conn)
        self._conn = self._db.conn
        # Per-stream head cache. head() trusts it while PRAGMA data_version is unchanged (it
        # changes exactly when another connection commits); append() trusts it outright,
        # because chaining to a stale head makes the INSERT hit the unique (stream_id, seq) key.
        self._heads: dict[str, StreamHead] = {}
        # Beside each cached head, the seq its memory is erased through (its seal covers it);
        # kept, dropped and refreshed with the head.
        self._erased: dict[str, int] = {}
        # The read path's ends per memory (see _ends), trusted like the heads: while
        # data_version is unchanged, and dropped for a memory this store writes to.
        self._ends_cache: dict[str, Ends] = {}
        self._version = -1

        def prepare() -> None:
            self._conn.execute("PRAGMA busy_timeout = 0")  # for a Database passed in, too
            # Apps may open a store per request, so opening must stay cheap: change the journal
            # mode and run the migration machinery only when needed; both are cheap reads when
            # nothing is to do.
            mode = self._conn.execute("PRAGMA journal_mode").fetchone()[0]
            # Switching to WAL rewrites the file header: never do it to a file that is not
            # ours (create_schema=False on another app's database must change nothing).
            ours = create_schema or self._conn.execute(_EVENTS_EXIST).fetchone() is not None
            if read_only:
                # Belt and braces: SQLite itself refuses any write on this connection.
                self._conn.execute("PRAGMA query_only = ON")
            elif ours and not self._db.memory and str(mode).lower() != "wal":
                self._db.enable_wal()
            self._conn.execute(f"PRAGMA synchronous = {synchronous}")
            # Purged messages must not survive in free pages of the file.
            self._conn.execute("PRAGMA secure_delete = ON")
            if create_schema and not read_only and MIGRATIONS.pending(self._db):
                MIGRATIONS.apply(self._db)
            self._sealed_schema = self._conn.execute(_HEADS_EXIST).fetchone() is not None
            self._tree_table = self._conn.execute(_TREE_EXISTS).fetchone() is not None

        with self._guard("open"):
            # Another process may be writing or migrating: wait as for any lock.
            self._retry_locked(prepare, "open")
        self._file_id = self._identify(path)
        try:
            self._load_key_check()
            self._attach_witness(witness, self._where)
        except BaseException:
            self.close()
            raise

    def _load_key_check(self) -> None:
        """Settle the chain key and head seals (see ``eventlog.keycheck.settle_keys``)."""

        def read(fn: Callable[[LedgerTx], bool]) -> bool:
            return self._read("open", lambda conn: fn(_Tx(conn)))

        def write(fn: Callable[[LedgerTx], bool]) -> bool:
            return self._write("open", lambda conn: fn(_Tx(conn)))

        settle_keys(self, self._where, read, write)
        settle_ids(self, self._where, read, write)

    @property
    def db(self) -> sqlite_utils.Database:
        """The underlying ``sqlite_utils.Database`` (read it freely; do not write events)."""
        return self._db

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

    def _head_locked(self, conn: sqlite3.Connection, key: str) -> StreamHead | None:
        head = self._heads.get(key)
        if head is None:
            row = conn.execute(_HEAD_SEALED if self._sealed_schema else _HEAD, (key,)).fetchone()
            head = _MISSING if row is None else StreamHead(row[0], row[1], row[2])
            self._heads[key] = head
            self._erased[key] = 0 if row is None or len(row) < 4 else int(row[3])
        return None if head is _MISSING else head

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
        if not items:
            with self._guard("append"):
                return []
        self._writable("append", self._where)
        name = self._name_row(key)

        imports = brings_erasure(items)  # rare: an import may move erased_through

        def work(conn: sqlite3.Connection) -> list[Record]:
            head = self._expected_head(conn, key, expected_seq, expected_hash)
            actual = 0 if head is None else head.seq
            records: list[Record] = []
            rows = self._build(key, head, items, self._now())
            seal, moved = self._sealing(key, rows, imports=imports)
            if name is not None:
                conn.execute(_PUT_NAME, name)
            try:
                for row in rows:
                    mac = seal if row is rows[-1] else ""
                    if expected_hash is None or records:
                        cursor = conn.execute(_INSERT, (*row, mac))
                    else:
                        cursor = conn.execute(_INSERT_IF_HEAD, (*row, mac, key, GENESIS, row[7]))
                        if cursor.rowcount == 0:  # the stored head is not the cached one
                            self._heads.pop(key, None)
                            raise ConcurrencyError(key, actual, None)
                    records.append(Record(cursor.lastrowid or 0, *row))
            except sqlite3.IntegrityError as e:
                if e.sqlite_errorcode != sqlite3.SQLITE_CONSTRAINT_UNIQUE:
                    # Another constraint (a trigger or CHECK someone added) refused the row:
                    # a failure to report, not a lost race to retry (rolled back below).
                    raise
                # The unique (stream_id, seq) key caught a writer the cached head missed:
                # exactly the optimistic-concurrency check, without a read per append.
                self._heads.pop(key, None)
                raise ConcurrencyError(key, actual, None) from e
            if moved is not None:
                conn.execute(_SEAL_ERASURE, (moved, key))
            return records

        try:
            records = self._write("append", work, one_insert=len(items) == 1 and not imports)
        except ConcurrencyError as e:
            # With no expectation, a stale cached head is ours to fix: once more, reading the
            # head inside a BEGIN IMMEDIATE transaction, where no other writer can move it.
            # (expected_hash is checked against the head read there, so it stays enforced.)
            if expected_seq is not None or e.actual is not None:
                raise
            records = self._write("append", work)
        last = records[-1]
        if imports:
            self._heads.pop(key, None)  # erased_through may have moved: read both again
        else:
            self._heads[key] = StreamHead(last.seq, last.hash, last.recorded_at_text)
        self._ends_cache.pop(key, None)
        return self._revealed(records, items)

    def _expected_head(
        self,
        conn: sqlite3.Connection,
        key: str,
        expected_seq: int | None,
        expected_hash: str | None,
    ) -> StreamHead | None:
        """The head an append chains to, as the caller expects it.

        Raises:
            ConcurrencyError: The stored head is not the expected one.
        """
        head = self._head_locked(conn, key)
        actual = 0 if head is None else head.seq
        if (expected_seq is not None and expected_seq != actual) or self._hash_conflict(
            key, head, expected_hash
        ):
            # The cached head may be behind (another connection appended); look again
            # before calling it a conflict.
            self._heads.pop(key, None)
            head = self._head_locked(conn, key)
            actual = 0 if head is None else head.seq
            if expected_seq is not None and expected_seq != actual:
                raise ConcurrencyError(key, expected_seq, actual)
            conflict = self._hash_conflict(key, head, expected_hash)
            if conflict is not None:
                raise conflict
        return head

    def _sealing(
        self, key: str, rows: list[tuple[Any, ...]], *, imports: bool
    ) -> tuple[str, int | None]:
        """The head seal for ``rows``, and the memory's new erased_through when an import
        (``imports``: see :func:`eventlog.erasure.brings_erasure`) moves it (None when it
        stays, the hot path: no second statement)."""
        erased = self._erased.get(key, 0)
        after = erased_after(key, rows, erased) if imports else erased
        return self._seal_of(key, rows[-1][1], rows[-1][8], after), (
            None if after == erased else after
        )

    def purge(self, memory_id: MemoryId, *, expected_seq: int, reason: str) -> Record:
        key = self._stream_key(memory_id, "purge")
        self._writable("purge", self._where)

        def work(conn: sqlite3.Connection) -> Record:
            self._heads.pop(key, None)  # rare and destructive: decide on the stored head
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
            tomb = tombstone(head, count, reason, now)
            (row,) = self._build(key, head, [tomb], now)
            # Tombstone first, then delete: see the note on the position column. Sealed as
            # erased through the tombstone, so purged records put back from a backup are
            # refused although each is genuine.
            mac = self._seal_of(key, row[1], row[8], row[1])
            cursor = conn.execute(_INSERT, (*row, mac))
            record = Record(cursor.lastrowid or 0, *row)
            conn.execute(_SEAL_ERASURE, (record.seq, key))
            conn.execute("DELETE FROM events WHERE stream_id = ? AND seq < ?", (key, record.seq))
            conn.execute("DELETE FROM snapshots WHERE stream_id = ?", (key,))
            if self._tree_table:
                conn.execute(_TREE_DROP)  # their records are gone: the next digest rebuilds
                conn.execute(_TREE_BUMP)  # and a tree read before this must not be saved
            return record

        record = self._write("purge", work)
        self._heads[key] = StreamHead(record.seq, record.hash, record.recorded_at_text)
        self._erased[key] = record.seq
        self._ends_cache.pop(key, None)
        # secure_delete zeroed the freed pages, but the WAL still holds copies of them until
        # it is checkpointed and truncated - which readers in other connections can delay
        # (then cleanup_pending says so, and the next erase, purge or checkpoint finishes it).
        self._clean_files("purge")
        return record

    def _erase(
        self, keys: Sequence[str], reason: str, expected_seq: int | None
    ) -> list[ErasureReceipt]:
        def work(conn: sqlite3.Connection) -> list[tuple[Record, ErasureReceipt]]:
            done = []
            for key in keys:
                self._heads.pop(key, None)  # rare and destructive: decide on the stored head
                head = self._head_locked(conn, key)
                if expected_seq is not None and (0 if head is None else head.seq) != expected_seq:
                    raise ConcurrencyError(key, expected_seq, 0 if head is None else head.seq)
                if self._names is not None:
                    # The id goes with the content (also when only the id was left: a rerun).
                    conn.execute(_DROP_NAME, (key,))
                pending = conn.execute(_TO_ERASE, (key, *RECEIPT_KINDS)).fetchall()
                now = self._now()
                built = erasure_record(key, [(r[0], r[1]) for r in pending], reason, now)
                if built is None:
                    continue
                item, event = built
                (row,) = self._build(key, head, [item], now)
                conn.execute(_BLANK, (key, *RECEIPT_KINDS))
                conn.execute("DELETE FROM snapshots WHERE stream_id = ?", (key,))
                # Everything before the receipt is now empty: sealed, so content put back into
                # those records later (from a backup) is refused although it matches.
                mac = self._seal_of(key, row[1], row[8], row[1])
                cursor = conn.execute(_INSERT, (*row, mac))
                record = Record(cursor.lastrowid or 0, *row)
                conn.execute(_SEAL_ERASURE, (record.seq, key))
                done.append((record, ErasureReceipt(memory_id_from_key(key), event, record)))
            return done

        try:
            done = self._write("erase", work)
        except BaseException:
            self._heads.clear()  # the heads read inside the rolled-back transaction
            self._ends_cache.clear()
            raise
        for record, _ in done:
            self._heads[record.stream_id] = StreamHead(
                record.seq, record.hash, record.recorded_at_text
            )
            self._ends_cache.pop(record.stream_id, None)
            self._erased[record.stream_id] = record.seq
        return [receipt for _, receipt in done]

    def _clean_files(self, operation: str) -> bool:
        # secure_delete zeroed the old cells in the pages written by the erase, but the WAL
        # still holds the earlier versions of those pages until it is checkpointed and
        # truncated - which a reader holding an old snapshot (a backup) prevents. Wait for it
        # a moment, not for busy_timeout: the erasure is committed either way, and a retention
        # run erasing memory after memory would otherwise wait that long for each. Once
        # readers blocked a cleanup, later ones try once without waiting until one succeeds.
        wait = 0.0 if self._cleanup_pending else min(CLEANUP_WAIT, self._busy_timeout)
        self._cleanup_pending = not self._checkpoint(operation, strict=False, wait=wait)
        return not self._cleanup_pending

    @property
    def cleanup_pending(self) -> bool:
        return self._cleanup_pending

    def finish_cleanup(self) -> bool:
        return self._clean_files("finish the cleanup") if self._cleanup_pending else True

    def _checkpoint(
        self, operation: str, *, strict: bool = True, wait: float | None = None
    ) -> bool:
        """``wal_checkpoint(TRUNCATE)``, retried while readers block it, for ``wait`` seconds
        (default ``busy_timeout``; it is tried once whatever the wait). Returns whether it
        completed; not ``strict``, False when readers blocked it throughout.

        Raises:
            PersistenceError: ``strict`` and readers kept it busy past the wait; any later
                erase, purge or ``checkpoint()`` completes erasure.
        """
        wait = self._busy_timeout if wait is None else wait
        deadline = time.monotonic() + wait
        while True:
            busy = self._read(
                operation, lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            )
            if not busy:
                self._cleanup_pending = False
                return True
            if time.monotonic() > deadline:
                if not strict:
                    return False
                msg = (
                    f"WAL checkpoint of {self._where} stayed blocked by readers for "
                    f"{wait} s; erased or purged rows may remain in the -wal file until "
                    "checkpoint() succeeds: end the long reader (a backup?) and call it again"
                )
                raise PersistenceError(operation, msg)
            time.sleep(0.001)

    def checkpoint(self) -> None:
        """Copy the WAL into the database file and truncate it (completes a purge's erasure)."""
        self._checkpoint("checkpoint")

    def save_snapshot(self, memory_id: MemoryId, name: str, seq: int, state: str) -> None:
        key = self._stream_key(memory_id, "save_snapshot")
        row = (key, name, seq, state, format_time(self._now()))

        def work(conn: sqlite3.Connection) -> None:
            # In the write transaction, so a purge cannot erase the stream in between and
            # leave a snapshot of erased messages behind.
            if conn.execute(_EVENT_EXISTS, (key, seq)).fetchone() is None:
                msg = f"save_snapshot of {key} at seq {seq}: no such event (purged?)"
                raise ValueError(msg)
            conn.execute(_SAVE_SNAPSHOT, row)
            conn.execute(_PRUNE_SNAPSHOTS, (key, name, seq))

        self._write("save_snapshot", work)

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
        params: list[object] = [key]
        if gt is not None:
            params.append(gt)
        if lte is not None:
            params.append(lte)
        params.append(_NO_LIMIT if limit is None else max(limit, 0))
        sql = _READ[gt is not None, lte is not None, desc]
        return self._opened(
            self._read("read", lambda conn: [Record(*row) for row in conn.execute(sql, params)])
        )

    def read_all(self, *, gt: int = 0, limit: int | None = None) -> list[Record]:
        check_tail("read_all", gt, limit)
        params = (gt, _NO_LIMIT if limit is None else max(limit, 0))
        return self._opened(
            self._read(
                "read_all", lambda conn: [Record(*row) for row in conn.execute(_READ_ALL, params)]
            )
        )

    def _range_rows(self, key: str, gt: int, lte: int | None) -> list[tuple[Any, ...]]:
        params = (key, gt, _NO_UPPER if lte is None else lte)
        return self._read("read", lambda conn: conn.execute(_RANGE_ROWS, params).fetchall())

    def _scan_rows(self, gt: int, limit: int) -> list[tuple[Any, ...]]:
        params = (gt, limit)
        return self._read("read_all", lambda conn: conn.execute(SCAN_ROWS, params).fetchall())

    def head(self, memory_id: MemoryId) -> StreamHead | None:
        key = self._stream_key(memory_id, "head")

        def work(conn: sqlite3.Connection) -> StreamHead | None:
            self._sync_version(conn)
            return self._head_locked(conn, key)

        return self._read("head", work)

    def seq_at(self, memory_id: MemoryId, at: datetime) -> int | None:
        check_at("seq_at", at)
        key = self._stream_key(memory_id, "seq_at")
        params = (key, format_time(at))
        row = self._read("seq_at", lambda conn: conn.execute(_SEQ_AT, params).fetchone())
        return None if row is None else int(row[0])

    def _ends(self, key: str) -> Ends:
        sql = _ENDS_RECORDS.format(cols=_COLUMNS) + (_ENDS_SEAL if self._sealed_schema else "")
        params = (key, key, key) if self._sealed_schema else (key, key)

        def work(conn: sqlite3.Connection) -> Ends:
            self._sync_version(conn)
            cached = self._ends_cache.get(key)
            if cached is not None:
                return cached
            seal: HeadSeal | None = None if self._sealed_schema else NO_SEALS
            first = last = None
            for tag, *row in conn.execute(sql, params):
                if tag == "s":
                    seal = HeadSeal(row[0], row[1], row[2], row[3])
                elif tag == "f":
                    first = Record(*row)
                else:
                    last = Record(*row)
            ends = (seal, first, last)
            if len(self._ends_cache) > 10_000:
                self._ends_cache.clear()  # bounded; a miss costs one statement
            self._ends_cache[key] = ends
            return ends

        seal, first, last = self._read("read", work)
        opened = self._opened([r for r in (first, last) if r is not None])
        if first is not None:
            first = opened[0]
        if last is not None:
            last = opened[-1]
        return seal, first, last

    def _identify(
        self, path: str | os.PathLike[str] | sqlite_utils.Database
    ) -> tuple[str, int, int] | None:
        """Which file this is, resolved at open (see _reopen_path)."""
        if isinstance(path, sqlite_utils.Database) or self._db.memory:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        return os.path.abspath(path), st.st_dev, st.st_ino

    def _reopen_path(self) -> tuple[str, int, int] | None:
        # The file this store opened, if its path still names it: a relative path after a
        # chdir, or a file renamed over it, would have a worker check another ledger.
        if self._file_id is None:
            return None
        try:
            st = os.stat(self._file_id[0])
        except OSError:
            return None
        return self._file_id if self._file_id[1:] == (st.st_dev, st.st_ino) else None

    @staticmethod
    def _generation_in(conn: sqlite3.Connection) -> int:
        row = conn.execute(_TREE_GEN).fetchone()
        return int(row[0]) if row is not None else 0

    def _tree_generation(self) -> int:
        if not self._tree_table:
            return 0
        return self._read("read the ledger tree", self._generation_in)

    def _tree_blocks(self) -> tuple[int, list[TreeBlock]]:
        if not self._tree_table:
            return 0, []

        def work(conn: sqlite3.Connection) -> tuple[int, list[TreeBlock]]:
            generation = self._generation_in(conn)
            return generation, [TreeBlock(*row) for row in conn.execute(_TREE_READ)]

        return self._read("read the ledger tree", work)

    def _save_tree_blocks(
        self, rows: Sequence[TreeBlock], *, replace: bool, generation: int
    ) -> bool | None:
        if self._read_only or not self._tree_table:
            return None

        def work(conn: sqlite3.Connection) -> bool:
            if self._generation_in(conn) != generation:
                return False  # a purge since the rows' records were read: rebuild instead
            if replace:
                conn.execute(_TREE_DROP)
            (count,) = conn.execute(_TREE_COUNT).fetchone()
            if rows and rows[0].block > count:
                return False
            conn.executemany(_TREE_INSERT, [row for row in rows if row.block >= count])
            return True

        return self._write("save the ledger tree", work)

    def _head_seal(self, key: str) -> HeadSeal | None:
        if not self._sealed_schema:
            return NO_SEALS
        row = self._read("read", lambda conn: conn.execute(_HEAD_SEAL, (key,)).fetchone())
        return None if row is None else HeadSeal(*row)

    def load_snapshot(
        self, memory_id: MemoryId, name: str, *, lte: int | None = None
    ) -> Snapshot | None:
        check_range("load_snapshot", None, lte, None)
        key = self._stream_key(memory_id, "load_snapshot")
        bound = (1 << 62) if lte is None else lte
        params = (key, name, bound)
        row = self._read("load_snapshot", lambda c: c.execute(_LOAD_SNAPSHOT, params).fetchone())
        if row is None:
            return None
        return Snapshot(row[0], row[1], row[2], row[3], parse_time(row[4]))

    def _name_rows(self) -> dict[str, str]:
        if self._names is None:
            return {}
        return self._read("names", lambda conn: dict(conn.execute(_NAMES).fetchall()))

    def _stream_rows(self) -> list[tuple[str, int, int, str, str]]:
        return self._read(
            "streams", lambda conn: [(r[0], r[1], r[2], r[3], r[4]) for r in conn.execute(_STREAMS)]
        )

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                try:
                    self._close_witness()
                finally:
                    self._closed = True
                    self._conn.close()
