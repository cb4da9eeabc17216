"""SQLiteEventStore: the embedded default, one row per event in a WAL-mode SQLite file.

The store's parts live beside this module, one owner each: the schema and its migrations in
:mod:`eventlog.recorders.sqlite_schema`, the SQL in :mod:`eventlog.recorders.sqlite_sql`,
transactions and the sqlite3 error choke point in :mod:`eventlog.recorders.sqlite_base`, purge,
erase and the WAL checkpoint in :mod:`eventlog.recorders.sqlite_erase`, and what the ledger reads at
open in :mod:`eventlog.recorders.sqlite_open`. Import the store, and the names below, from here.
"""

from __future__ import annotations

import os
import pathlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import sqlite_utils

from eventlog.erasure import brings_erasure, erased_after, snapshot_problem
from eventlog.errors import ConcurrencyError, PersistenceError
from eventlog.hashing import GENESIS, RECEIPT_KINDS
from eventlog.ids import MemoryId
from eventlog.keycheck import chain_key_argument, settle_keys
from eventlog.keyring import Keyring
from eventlog.ledger_tree import TreeBlock
from eventlog.models import (
    HeadSeal,
    NewRecord,
    Record,
    Snapshot,
    StreamHead,
    format_time,
    parse_time,
)
from eventlog.names import settle_ids
from eventlog.recorders.sqlite_base import check_arguments
from eventlog.recorders.sqlite_erase import CLEANUP_WAIT, SQLiteErasure
from eventlog.recorders.sqlite_open import SQLiteLedgerTx as _Tx
from eventlog.recorders.sqlite_schema import (
    APPLICATION_ID,
    MIGRATIONS,
    is_ledger_file,
    owned,
)
from eventlog.recorders.sqlite_sql import (
    COLUMNS,
    ENDS_RECORDS,
    ENDS_SEAL,
    HEAD_SEAL,
    HEADS_EXIST,
    INSERT,
    INSERT_IF_HEAD,
    LOAD_SNAPSHOT,
    NAMES,
    PRUNE_SNAPSHOTS,
    PUT_NAME,
    RANGE_ROWS,
    READ,
    READ_ALL,
    SAVE_SNAPSHOT,
    SCAN_ROWS,
    SEAL_ERASURE,
    SEALS,
    SEQ_AT,
    SNAPSHOT_CHECK,
    STREAMS,
    TREE_COUNT,
    TREE_DROP,
    TREE_EXISTS,
    TREE_GEN,
    TREE_INSERT,
    TREE_READ,
)
from eventlog.store import LedgerTx
from eventlog.validation import check_at, check_range, check_snapshot, check_tail
from eventlog.vouch import NO_SEALS, Ends

if TYPE_CHECKING:
    from eventlog.witness import Witness

__all__ = [
    "APPLICATION_ID",
    "CLEANUP_WAIT",
    "MIGRATIONS",
    "SCAN_ROWS",
    "SQLiteEventStore",
    "is_ledger_file",
]

_NO_LIMIT = -1  # SQLite's LIMIT -1 means "no limit"
_NO_UPPER = 1 << 62


class SQLiteEventStore(SQLiteErasure):
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
        chain_key: Chain key, at least 16 bytes (see :class:`~eventlog.store.EventStore`):
            new records are format 3, HMAC-SHA256 under it. Keep it outside the database.
        read_only: Never write: no migration, no journal mode change, no key check or seal;
            appends, erasures, purges and snapshots raise :class:`ReadOnlyError`.
        adopt_key: Key a database that holds unkeyed records (sealing them as they are);
            without it such an open with ``chain_key=`` raises :class:`ChainKeyError`.
        witness: A file path, a ``postgresql://`` URL of another database, or a
            :class:`~eventlog.witness.Witness`, kept outside the database: the open refuses a
            ledger behind or diverging from it, and appends and close move it forward (see
            :mod:`eventlog.witness`). Default: none.
        key: Deprecated name of ``chain_key`` (a :class:`DeprecationWarning`).

    Raises:
        RollbackError: The ledger is behind its witness or diverges from it.
        ChainKeyError: ``chain_key`` does not match the database's key check value, or is given
            for an unkeyed database holding records without ``adopt_key=True``.
        ValueError: ``chain_key`` is shorter than 16 bytes.
        TypeError: Both ``chain_key`` and the deprecated ``key`` are given.
        PersistenceError: The file cannot be opened.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | sqlite_utils.Database,
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout: float = 30.0,
        create_schema: bool = True,
        chain_key: bytes | None = None,
        keyring: Keyring | None = None,
        read_only: bool = False,
        adopt_key: bool = False,
        witness: str | os.PathLike[str] | Witness | None = None,
        erasable_ids: bool = False,
        key: bytes | None = None,
    ) -> None:
        self._open_modes(
            chain_key_argument("SQLiteEventStore", chain_key, key),
            keyring,
            read_only=read_only,
            adopt_key=adopt_key,
            erasable_ids=erasable_ids,
        )
        check_arguments(path, synchronous, busy_timeout)
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
            # (A file whose tables clash with ours is refused here, before anything changes.)
            ours = owned(self._conn, self._where, create_schema=create_schema, read_only=read_only)
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
            self._sealed_schema = self._conn.execute(HEADS_EXIST).fetchone() is not None
            self._tree_table = self._conn.execute(TREE_EXISTS).fetchone() is not None

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
                # Checked again under the write lock: an erasure by another process between
                # the check above and here destroyed the key the cached row is sealed under,
                # and a row put back so would name nobody (erase_subject of anyone would then
                # take this memory's new messages for a leftover of an erasure).
                conn.execute(PUT_NAME, self._name_row(key) or name)
            try:
                for row in rows:
                    mac = seal if row is rows[-1] else ""
                    if expected_hash is None or records:
                        cursor = conn.execute(INSERT, (*row, mac))
                    else:
                        cursor = conn.execute(INSERT_IF_HEAD, (*row, mac, key, GENESIS, row[7]))
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
                conn.execute(SEAL_ERASURE, (moved, key))
            return records

        try:
            # A names row to make sure of is a second statement, so the transaction (as on
            # PostgreSQL): a refused INSERT must not leave a name for a memory with no record.
            records = self._write(
                "append", work, one_insert=len(items) == 1 and not imports and name is None
            )
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

    def save_snapshot(self, memory_id: MemoryId, name: str, seq: int, state: str) -> None:
        check_snapshot("save_snapshot", name, seq, state)
        key = self._stream_key(memory_id, "save_snapshot")
        row = (key, name, seq, self._sealed_state(key, name, seq, state), format_time(self._now()))

        def work(conn: sqlite3.Connection) -> None:
            # In the write transaction, so a purge cannot erase the stream in between and
            # leave a snapshot of erased messages behind.
            found, erased_at = conn.execute(
                SNAPSHOT_CHECK, (key, seq, key, seq, *RECEIPT_KINDS)
            ).fetchone()
            problem = snapshot_problem(key, seq, found is not None, erased_at)
            if problem is not None:
                raise ValueError(problem)
            conn.execute(SAVE_SNAPSHOT, row)
            conn.execute(PRUNE_SNAPSHOTS, (key, name, seq))

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
        sql = READ[gt is not None, lte is not None, desc]
        return self._opened(
            self._read("read", lambda conn: [Record(*row) for row in conn.execute(sql, params)])
        )

    def read_all(self, *, gt: int = 0, limit: int | None = None) -> list[Record]:
        check_tail("read_all", gt, limit)
        params = (gt, _NO_LIMIT if limit is None else max(limit, 0))
        return self._opened(
            self._read(
                "read_all", lambda conn: [Record(*row) for row in conn.execute(READ_ALL, params)]
            )
        )

    def _range_rows(self, key: str, gt: int, lte: int | None) -> list[tuple[Any, ...]]:
        params = (key, gt, _NO_UPPER if lte is None else lte)
        return self._read("read", lambda conn: conn.execute(RANGE_ROWS, params).fetchall())

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
        row = self._read("seq_at", lambda conn: conn.execute(SEQ_AT, params).fetchone())
        return None if row is None else int(row[0])

    def _ends(self, key: str) -> Ends:
        sql = ENDS_RECORDS.format(cols=COLUMNS) + (ENDS_SEAL if self._sealed_schema else "")
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
        row = conn.execute(TREE_GEN).fetchone()
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
            return generation, [TreeBlock(*row) for row in conn.execute(TREE_READ)]

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
                conn.execute(TREE_DROP)
            (count,) = conn.execute(TREE_COUNT).fetchone()
            if rows and rows[0].block > count:
                return False
            conn.executemany(TREE_INSERT, [row for row in rows if row.block >= count])
            return True

        return self._write("save the ledger tree", work)

    def _head_seal(self, key: str) -> HeadSeal | None:
        if not self._sealed_schema:
            return NO_SEALS
        row = self._read("read", lambda conn: conn.execute(HEAD_SEAL, (key,)).fetchone())
        return None if row is None else HeadSeal(*row)

    def _sealed_keys(self) -> list[str]:
        if not self._sealed_schema:
            return []
        return self._read("streams", lambda conn: [r[0] for r in conn.execute(SEALS)])

    def load_snapshot(
        self, memory_id: MemoryId, name: str, *, lte: int | None = None
    ) -> Snapshot | None:
        check_range("load_snapshot", None, lte, None)
        check_snapshot("load_snapshot", name)
        key = self._stream_key(memory_id, "load_snapshot")
        bound = (1 << 62) if lte is None else lte
        params = (key, name, bound)
        row = self._read("load_snapshot", lambda c: c.execute(LOAD_SNAPSHOT, params).fetchone())
        if row is None:
            return None
        return self._opened_state(Snapshot(row[0], row[1], row[2], row[3], parse_time(row[4])))

    def _name_rows(self) -> dict[str, str]:
        if self._names is None:
            return {}
        return self._read("names", lambda conn: dict(conn.execute(NAMES).fetchall()))

    def _stream_rows(self) -> list[tuple[str, int, int, str, str]]:
        return self._read(
            "streams", lambda conn: [(r[0], r[1], r[2], r[3], r[4]) for r in conn.execute(STREAMS)]
        )

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                try:
                    self._close_witness()
                finally:
                    self._closed = True
                    self._conn.close()
