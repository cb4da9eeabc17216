"""The schema of a SQLite ledger: its migrations, applied on open by
:class:`~eventlog.sqlite.SQLiteEventStore`, and the header marker that tells a chatledger file
from any other SQLite file without opening it."""

from __future__ import annotations

import functools
import os
import sqlite3

import sqlite_utils

from eventlog.errors import PersistenceError, SchemaVersionError
from eventlog.recorders.sqlite_sql import EVENTS_EXIST

__all__ = ["APPLICATION_ID", "MIGRATIONS", "is_ledger_file", "owned", "refuse_foreign_tables"]

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


_TABLES = frozenset({"events", "snapshots", "settings", "heads", "ledger_blocks", "names"})
_EVENT_COLUMNS = frozenset({"stream_id", "seq", "kind", "payload", "meta", "prev_hash", "hash"})


def refuse_foreign_tables(conn: sqlite3.Connection, where: str) -> None:
    """Refuse a file with a table the migrations would create but another application made:
    one of those names, and no ``events`` table of a ledger's shape. The migrations keep an
    existing table (``IF NOT EXISTS``) and alter it, so such a file is refused before anything
    of it changes (the WAL switch, a column added to another application's table).

    Raises:
        PersistenceError: The file has such tables.
    """
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    clash = sorted(names & _TABLES)
    if not clash or (
        "events" in names
        and {row[1] for row in conn.execute("PRAGMA table_info(events)")} >= _EVENT_COLUMNS
    ):
        return
    operation, detail = (
        "open",
        (
            f"{where} is not a chatledger ledger but has tables named as chatledger's "
            f"({', '.join(clash)}); migrating would alter them - give chatledger a file of its own"
        ),
    )
    raise PersistenceError(operation, detail)


# What sqlite_utils' Migrations.applied() reads, as two plain queries: it costs ~0.1 ms per
# open through sqlite_utils' table objects, these ~0.01 ms.
_MIGRATIONS_EXIST = (
    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlite_migrations'"
)
_APPLIED = "SELECT name FROM _sqlite_migrations WHERE migration_set = 'eventlog'"


@functools.cache
def _known() -> frozenset[str]:
    """The names of the migrations this chatledger has (all pending on an empty database)."""
    return frozenset(m.name for m in MIGRATIONS.pending(sqlite_utils.Database(memory=True)))


def _refuse_newer(conn: sqlite3.Connection, where: str) -> None:
    """Refuse a ledger a newer chatledger migrated, as PostgreSQL's schema check does: its
    migrations may add what its writes rely on, which this code would neither read nor keep.

    Raises:
        SchemaVersionError: The file records an eventlog migration this code does not have.
    """
    if conn.execute(_MIGRATIONS_EXIST).fetchone() is None:
        return
    applied = {row[0] for row in conn.execute(_APPLIED)}
    if applied - _known():
        # Names written by hand may not be text (NULL, a blob): shown, never compared.
        what = f"SQLite ledger {where} (migration {min(map(str, applied - _known()))})"
        raise SchemaVersionError(what, len(applied | _known()), len(_known()))


def owned(conn: sqlite3.Connection, where: str, *, create_schema: bool, read_only: bool) -> bool:
    """Whether the file's journal mode is ours to set: the store creates its schema here, or
    the file has an ``events`` table.

    Raises:
        PersistenceError: A writable open that would migrate a file whose tables clash with
            chatledger's (:func:`refuse_foreign_tables`).
        SchemaVersionError: A newer chatledger migrated the file (:func:`_refuse_newer`).
    """
    if create_schema and not read_only:
        refuse_foreign_tables(conn, where)
    ours = create_schema or conn.execute(EVENTS_EXIST).fetchone() is not None
    if ours:
        _refuse_newer(conn, where)
    return ours


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
