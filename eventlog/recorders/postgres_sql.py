"""The SQL of :class:`~eventlog.postgres.PostgresEventStore`: its migrations and statements.

Kept apart from the store's logic so each file reads as one thing. Statements are templates with
a ``{schema}`` placeholder, rendered once per schema by :func:`statements` with the identifier
quoted by psycopg.
"""

from __future__ import annotations

import functools
import hashlib

from psycopg import sql

__all__ = [
    "BEGIN",
    "COMMIT",
    "LOCK",
    "MAX_ROWS_PER_TRANSACTION",
    "MIGRATIONS",
    "MIGRATIONS_EXIST",
    "SCHEMA_EXISTS",
    "SET_READ_COMMITTED",
    "TABLE_EXISTS",
    "TREE_MIGRATION",
    "UNIQUE_SEQ",
    "lock_key",
    "render",
    "statements",
    "stream_lock_key",
]

MIGRATIONS: list[str] = [
    # 0: events and snapshots. ``{schema}`` is replaced by the quoted schema identifier.
    """
    CREATE TABLE {schema}.events (
        -- An identity is never reused: a purge deletes rows, and a reused position would
        -- make a tailing reader (read_all(gt=last_seen)) skip or repeat records.
        position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        stream_id text COLLATE "C" NOT NULL,
        seq bigint NOT NULL,
        -- Canonical fixed-width UTC text, exactly what is hashed; "C" makes text order
        -- equal time order whatever the database's default collation is.
        recorded_at text COLLATE "C" NOT NULL,
        kind text NOT NULL,
        schema_version integer NOT NULL,
        -- text, not jsonb: jsonb rewrites key order and whitespace, and the hash covers the
        -- exact stored bytes.
        payload text NOT NULL,
        meta text NOT NULL,
        prev_hash text NOT NULL,
        hash text NOT NULL,
        CONSTRAINT events_stream_seq UNIQUE (stream_id, seq)
    );
    CREATE TABLE {schema}.snapshots (
        stream_id text COLLATE "C" NOT NULL,
        name text NOT NULL,
        seq bigint NOT NULL,
        state text NOT NULL,
        created_at text NOT NULL,
        PRIMARY KEY (stream_id, name, seq)
    );
    """,
    # 1: record formats 2/3 (salted payload commitments, keyed chains). Existing rows keep the
    # defaults, which say what they are: format 1, no salt or commitment. A constant default
    # makes ADD COLUMN a catalog change, not a table rewrite. The settings table holds a keyed
    # store's key check value.
    """
    ALTER TABLE {schema}.events
        ADD COLUMN salt text NOT NULL DEFAULT '',
        ADD COLUMN commitment text NOT NULL DEFAULT '',
        ADD COLUMN format integer NOT NULL DEFAULT 1;
    CREATE TABLE {schema}.settings (
        name text PRIMARY KEY,
        value text NOT NULL
    );
    """,
    # 2: positions from transaction ids, so appends to different memories never wait for each
    # other (until now every append took one advisory lock per schema). A position is
    # (xid8 of the inserting transaction << 20) + the row's index in that transaction, given by
    # the store in its INSERT; readers of the global order stop below the oldest transaction
    # still running (see _Q_READ_ALL). The check refuses a table whose identity positions
    # already reach the new range, where new records could sort before old ones.
    """
    ALTER TABLE {schema}.events ALTER COLUMN position DROP IDENTITY IF EXISTS;
    DO $check$ BEGIN
        IF (SELECT COALESCE(max(position), 0) FROM {schema}.events)
                >= (pg_current_xact_id()::text::bigint << 20) THEN
            RAISE EXCEPTION 'chatledger migration 2: positions already reach the range of '
                'transaction-id positions; contact the maintainers before upgrading';
        END IF;
    END $check$;
    """,
    # 3: head seals (see eventlog.hashing.head_mac): one row per memory naming its newest
    # record, set by every append in the same statement (see _SEAL), so reads refuse a
    # truncated tail. Existing memories get blank seals the next writable open fills in.
    """
    CREATE TABLE {schema}.heads (
        stream_id text COLLATE "C" PRIMARY KEY,
        seq bigint NOT NULL,
        hash text NOT NULL,
        mac text NOT NULL,
        erased_through bigint NOT NULL DEFAULT 0
    );
    INSERT INTO {schema}.heads (stream_id, seq, hash, mac, erased_through)
    SELECT DISTINCT ON (e.stream_id) e.stream_id, e.seq, e.hash, '',
        COALESCE((SELECT max(r.seq) FROM {schema}.events r
                  WHERE r.stream_id = e.stream_id AND r.kind = 'memory_erased'), 0)
    FROM {schema}.events e ORDER BY e.stream_id, e.seq DESC;
    """,
    # 4: the ledger tree's stored blocks (see eventlog.ledger_tree): derived data, so the
    # first digest of a process reads a few thousand rows instead of every record.
    """
    CREATE TABLE {schema}.ledger_blocks (
        block bigint PRIMARY KEY,
        first_position bigint NOT NULL,
        last_position bigint NOT NULL,
        node bytea NOT NULL,
        mac bytea NOT NULL
    );
    """,
    # 5: erasable ids (see eventlog.names): the id of each pseudonymous stream, in a row an
    # erasure deletes. Empty on ledgers created without erasable ids.
    """
    CREATE TABLE {schema}.names (
        stream_id text COLLATE "C" PRIMARY KEY,
        name text NOT NULL
    );
    """,
]
"""Schema migrations, index = version. A shipped entry is never edited; a wrong one becomes
``"SELECT 1"`` (with a comment) and a new entry fixes it."""

UNIQUE_SEQ = "events_stream_seq"  # the constraint a conflicting append violates

# SQL templates; {schema} is filled with the quoted identifier once per store (see _TEMPLATES).
LOCK = "SELECT pg_advisory_xact_lock(%s)"
# Waits for every running append and keeps new ones out until commit (SHARE conflicts with the
# ROW EXCLUSIVE lock an INSERT takes, not with readers or VACUUM): for the rare operation that
# must see the whole log still, such as recording a key check value.
_Q_LOCK_EVENTS_SHARE = "LOCK TABLE {schema}.events IN SHARE MODE"
BEGIN = b"BEGIN ISOLATION LEVEL READ COMMITTED"
# A connection that is not in autocommit mode has begun its transaction itself.
SET_READ_COMMITTED = b"SET TRANSACTION ISOLATION LEVEL READ COMMITTED"
COMMIT = b"COMMIT"
# The head, and what its seal covers besides (erased_through), for the next append to seal.
_Q_HEAD = (
    "SELECT e.seq, e.hash, e.recorded_at, COALESCE(h.erased_through, 0) FROM {schema}.events e "
    "LEFT JOIN {schema}.heads h ON h.stream_id = e.stream_id WHERE e.stream_id = %s "
    "ORDER BY e.seq DESC LIMIT 1"
)
# Both inserts write all rows, or none unless the stream's stored head is the record they were
# chained to (its hash covers its seq; an empty stream's "hash" is the fallback parameter).
# A stale cached head therefore inserts nothing - no gap, no broken link, and no aborted
# transaction to roll back; the unique (stream_id, seq) key still stops a writer that skipped
# the stream's lock. The position is this transaction's id shifted left by 20 bits plus the
# row's index in the transaction (the first parameter: rows the transaction inserted before).
_Q_INSERT_ONE = (
    "INSERT INTO {schema}.events (position, stream_id, seq, recorded_at, kind, schema_version, "
    "payload, meta, prev_hash, hash, salt, commitment, format) "
    "SELECT (pg_current_xact_id()::text::bigint << 20) + %s::bigint + 1, %s::text, "
    "%s::bigint, %s::text, %s::text, %s::integer, %s::text, %s::text, %s::text, %s::text, "
    "%s::text, %s::text, %s::integer WHERE COALESCE((SELECT hash FROM {schema}.events "
    "WHERE stream_id = %s ORDER BY seq DESC LIMIT 1), %s) = %s RETURNING seq, position"
)
_Q_INSERT = (
    "INSERT INTO {schema}.events (position, stream_id, seq, recorded_at, kind, schema_version, "
    "payload, meta, prev_hash, hash, salt, commitment, format) "
    "SELECT (pg_current_xact_id()::text::bigint << 20) + %s::bigint + r.n, r.s, r.q, r.t, "
    "r.k, r.v, r.p, r.m, r.ph, r.h, r.sa, r.c, r.f FROM unnest(%s::text[], %s::bigint[], "
    "%s::text[], %s::text[], %s::integer[], %s::text[], %s::text[], %s::text[], %s::text[], "
    "%s::text[], %s::text[], %s::integer[]) WITH ORDINALITY "
    "AS r(s, q, t, k, v, p, m, ph, h, sa, c, f, n) "
    "WHERE COALESCE((SELECT hash FROM {schema}.events WHERE stream_id = %s "
    "ORDER BY seq DESC LIMIT 1), %s) = %s RETURNING seq, position"
)
# The same inserts as one autocommit statement that takes the memory's append lock itself (the
# first parameter), held until the statement's own commit: one statement for the server to
# parse, plan and commit instead of four (BEGIN, lock, insert, COMMIT). Its head check may run
# on a snapshot from before the lock was granted; a writer that got in meanwhile then holds the
# seq this insert tries, so the unique key refuses it (a conflict, retried with a fresh head).
_LOCKED = "WITH l AS MATERIALIZED (SELECT pg_advisory_xact_lock(%s)) "
_Q_INSERT_ONE_LOCKED = _LOCKED + _Q_INSERT_ONE.replace(
    "%s::integer WHERE COALESCE", "%s::integer FROM l WHERE COALESCE"
)
_Q_INSERT_LOCKED = _LOCKED + _Q_INSERT.replace("FROM unnest(", "FROM l, unnest(")
# One record whose seq was taken meanwhile inserts nothing rather than failing: the same
# conflict (no rows come back), but no error, so append_or_rebuild goes on to read the records
# that won and settles the race in the append (an error would end it as a ConcurrencyError).
# Never for a batch: its later rows would land after a gap (all or nothing is the unique key's
# error, which aborts the whole statement).
_Q_INSERT_ONE_LOCKED = _Q_INSERT_ONE_LOCKED.replace(
    " RETURNING", f" ON CONFLICT ON CONSTRAINT {UNIQUE_SEQ} DO NOTHING RETURNING"
)
# Every insert also moves the memory's head seal, in the same statement (a data-modifying CTE:
# one round trip still, and the seal lands if and only if the rows do). Its four parameters
# (stream key, seq, hash, seal) come last.
_SEAL = (
    "), h AS (INSERT INTO {schema}.heads (stream_id, seq, hash, mac) "
    "SELECT %s::text, %s::bigint, %s::text, %s::text WHERE EXISTS (SELECT 1 FROM ins) "
    "ON CONFLICT (stream_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash, "
    "mac = EXCLUDED.mac) SELECT seq, position FROM ins"
)


def _sealed(insert: str) -> str:
    """``insert`` (optionally after the lock CTE) as the ``ins`` CTE of a sealing statement."""
    if insert.startswith(_LOCKED):
        return _LOCKED.rstrip() + ", ins AS (" + insert[len(_LOCKED) :] + _SEAL
    return "WITH ins AS (" + insert + _SEAL


_Q_INSERT_ONE, _Q_INSERT, _Q_INSERT_ONE_LOCKED, _Q_INSERT_LOCKED = (
    _sealed(q) for q in (_Q_INSERT_ONE, _Q_INSERT, _Q_INSERT_ONE_LOCKED, _Q_INSERT_LOCKED)
)
MAX_ROWS_PER_TRANSACTION = (1 << 20) - 1  # what the 20 low bits of a position can number
_Q_SELECT = (
    "SELECT position, stream_id, seq, recorded_at, kind, schema_version, payload, meta, "
    "prev_hash, hash, salt, commitment, format FROM {schema}.events "
)
_Q_READ = _Q_SELECT + "WHERE stream_id = %s AND seq > %s AND seq <= %s ORDER BY seq LIMIT %s"
_Q_READ_DESC = _Q_READ.replace("ORDER BY seq", "ORDER BY seq DESC")
# _range_rows(): eventlog.hashing.RANGE_ROW_FIELDS' order.
_Q_RANGE_ROWS = (
    "SELECT seq, recorded_at, kind, schema_version, payload, meta, prev_hash, hash, salt, "
    "commitment, format, position FROM {schema}.events "
    "WHERE stream_id = %s AND seq > %s AND seq <= %s ORDER BY seq"
)
# The global order is safe to tail without a global write lock: positions are allocated when
# a row is inserted, not when its transaction commits, so a plain "position > last seen" could
# read position 11 (committed) before 10 (still running) and never see 10. Rows are returned
# only below the oldest transaction id still running (pg_snapshot_xmin of the statement's
# snapshot): every transaction below it has ended, so no row can appear there later, and every
# later row has a higher transaction id, hence a higher position. This is the xid8 watermark
# of PostgreSQL's "Transaction ID and Snapshot Information Functions" docs, as used by the
# transactional outbox of eugene-khyst/postgresql-event-sourcing ("reliable transactional
# outbox" / "polling with pg_snapshot_xmin"). A writing transaction left open anywhere in the
# cluster holds the watermark back until it ends; it never delays appends.
_Q_READ_ALL = _Q_SELECT + (
    "WHERE position > %s AND position < "
    "(pg_snapshot_xmin(pg_current_snapshot())::text::bigint << 20) ORDER BY position LIMIT %s"
)
# The witness's anchors (eventlog.witness): any committed record, also above the watermark.
_Q_HASH_AT = "SELECT hash FROM {schema}.events WHERE position = %s"
_Q_RECORD_AT = _Q_SELECT + "WHERE position = %s"
_Q_POSITION_OF = "SELECT position FROM {schema}.events WHERE hash = %s ORDER BY position LIMIT 1"
_Q_PURGES_AFTER = _Q_SELECT + (
    "WHERE position > %s AND kind = 'memory_purged' ORDER BY position LIMIT %s"
)
_Q_WATERMARK = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint << 20"
# Which of an append's records landed (their hashes were computed before sending): resolves an
# append whose connection was lost around COMMIT.
_Q_LANDED = (
    "SELECT seq, position FROM {schema}.events WHERE stream_id = %s AND seq = ANY(%s) "
    "AND hash = ANY(%s)"
)
# Terminates the backend of a lost append that still holds its memory's lock (and only then: a
# pid alone could have been recycled); PostgreSQL 14+ waits up to the timeout (ms) for it to
# exit, which releases the lock with its transaction rolled back. pg_locks splits the bigint
# key into two oids; the shift puts it back (two's complement).
_Q_TERMINATE_HOLDER = (
    "SELECT pg_terminate_backend(pid, %s) FROM pg_locks WHERE locktype = 'advisory' "
    "AND granted AND pid = %s AND ((classid::bigint << 32) | objid::bigint) = %s"
)
SET_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %s, true)"
_Q_SEQ_AT = (
    "SELECT seq FROM {schema}.events WHERE stream_id = %s AND recorded_at <= %s "
    "ORDER BY seq DESC LIMIT 1"
)
_Q_STREAMS = (
    "SELECT stream_id, count(*), max(seq), min(recorded_at), max(recorded_at) "
    "FROM {schema}.events GROUP BY stream_id"
)
_Q_DELETE_EVENTS = "DELETE FROM {schema}.events WHERE stream_id = %s RETURNING position, hash"
# Records erase() must blank (format 1 always counts: it cannot be blanked), and the blanking.
_Q_FIRST_SEALED = (
    "SELECT min(seq) FROM {schema}.events WHERE stream_id = %s AND kind <> ALL(%s) "
    "AND left(payload, %s) = %s"
)
_Q_TO_ERASE = (
    "SELECT seq, format FROM {schema}.events WHERE stream_id = %s AND kind <> ALL(%s) "
    "AND (format = 1 OR salt <> '' OR payload <> '') ORDER BY seq"
)
_Q_BLANK = (
    "UPDATE {schema}.events SET payload = '', salt = '' WHERE stream_id = %s "
    "AND kind <> ALL(%s) AND (salt <> '' OR payload <> '')"
)
_Q_DELETE_SNAPSHOTS = "DELETE FROM {schema}.snapshots WHERE stream_id = %s"
_Q_SAVE_SNAPSHOT = (
    "INSERT INTO {schema}.snapshots (stream_id, name, seq, state, created_at) "
    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (stream_id, name, seq) "
    "DO UPDATE SET state = EXCLUDED.state, created_at = EXCLUDED.created_at"
)
_Q_PRUNE_SNAPSHOTS = (
    "DELETE FROM {schema}.snapshots WHERE stream_id = %s AND name = %s AND seq < %s"
)
# (event seq exists, the first erasure receipt or purge tombstone after it): see
# eventlog.erasure.snapshot_problem. Params: key, seq, key, seq, the receipt kinds.
_Q_SNAPSHOT_CHECK = (
    "SELECT (SELECT 1 FROM {schema}.events WHERE stream_id = %s AND seq = %s), (SELECT min(seq) "
    "FROM {schema}.events WHERE stream_id = %s AND seq > %s AND kind = ANY(%s))"
)
_Q_LOAD_SNAPSHOT = (
    "SELECT stream_id, name, seq, state, created_at FROM {schema}.snapshots "
    "WHERE stream_id = %s AND name = %s AND seq <= %s ORDER BY seq DESC LIMIT 1"
)
_Q_GET_SETTING = "SELECT value FROM {schema}.settings WHERE name = %s"
_Q_PUT_SETTING = (
    "INSERT INTO {schema}.settings (name, value) VALUES (%s, %s) "
    "ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value"
)
_Q_ANY_RECORDS = "SELECT EXISTS (SELECT 1 FROM {schema}.events)"
_Q_LEGACY_HASHES = (
    "SELECT hash FROM {schema}.events WHERE format <> 3 AND position <= %s ORDER BY position"
)
_Q_SEALS = "SELECT stream_id, seq, hash, erased_through FROM {schema}.heads"
_Q_PENDING_SEALS = _Q_SEALS + " WHERE mac = ''"
_Q_PUT_SEAL = "UPDATE {schema}.heads SET mac = %s WHERE stream_id = %s"
_Q_HEAD_SEAL = "SELECT seq, hash, mac, erased_through FROM {schema}.heads WHERE stream_id = %s"
# The read path's ends of a memory (first record, newest record, seal) in one statement, so one
# snapshot: tagged rows; the seal's columns placed where their types match a record's.
_Q_ENDS = (
    "(SELECT 'f'::text, position, stream_id, seq, recorded_at, kind, schema_version, payload, "
    "meta, prev_hash, hash, salt, commitment, format FROM {schema}.events WHERE stream_id = %s "
    "ORDER BY seq LIMIT 1) UNION ALL "
    "(SELECT 'l'::text, position, stream_id, seq, recorded_at, kind, schema_version, payload, "
    "meta, prev_hash, hash, salt, commitment, format FROM {schema}.events WHERE stream_id = %s "
    "ORDER BY seq DESC LIMIT 1) UNION ALL "
    "(SELECT 's'::text, seq, hash, erased_through, mac, NULL::text, NULL::integer, NULL::text, "
    "NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::integer "
    "FROM {schema}.heads WHERE stream_id = %s)"
)
# The ends and the records after a seq (tagged 'r'), in one statement so one snapshot: what
# append_or_rebuild reads with its insert when other writers may have won the race.
_Q_SINCE = _Q_ENDS + (  # noqa: S608 - constants only, no user text
    " UNION ALL (SELECT 'r'::text, position, stream_id, seq, recorded_at, kind, schema_version, "
    "payload, meta, prev_hash, hash, salt, commitment, format FROM {schema}.events "
    "WHERE stream_id = %s AND seq > %s ORDER BY seq LIMIT %s)"
)
_Q_SEAL_ERASURE = "UPDATE {schema}.heads SET erased_through = %s WHERE stream_id = %s"
_Q_KEYED_RECORDS = "SELECT EXISTS (SELECT 1 FROM {schema}.events WHERE format = 3)"
_Q_LAST_POSITION = "SELECT COALESCE(max(position), 0) FROM {schema}.events"
_Q_TREE_READ = (
    "SELECT block, first_position, last_position, node, mac FROM {schema}.ledger_blocks "
    "ORDER BY block"
)
_Q_TREE_GEN = "SELECT value FROM {schema}.settings WHERE name = 'ledger_tree_generation'"
_Q_TREE_BUMP = (
    "INSERT INTO {schema}.settings (name, value) VALUES ('ledger_tree_generation', '1') "
    "ON CONFLICT (name) DO UPDATE SET value = (settings.value::bigint + 1)::text"
)
_Q_TREE_COUNT = "SELECT count(*) FROM {schema}.ledger_blocks"
_Q_TREE_DROP = "DELETE FROM {schema}.ledger_blocks"
_Q_TREE_INSERT = (
    "INSERT INTO {schema}.ledger_blocks (block, first_position, last_position, node, mac) "
    "SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bytea[], %s::bytea[]) "
    "ON CONFLICT (block) DO NOTHING"
)
_Q_VACUUM = "VACUUM {schema}.events, {schema}.snapshots, {schema}.names"
_Q_VACUUM_FULL = "VACUUM FULL {schema}.events, {schema}.snapshots, {schema}.names"
SCHEMA_EXISTS = "SELECT 1 FROM pg_namespace WHERE nspname = %s"
_Q_CREATE_SCHEMA = "CREATE SCHEMA IF NOT EXISTS {schema}"
_Q_CREATE_MIGRATIONS = (
    "CREATE TABLE IF NOT EXISTS {schema}.eventlog_migrations "
    "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
)
MIGRATIONS_EXIST = "SELECT to_regclass(%s) IS NOT NULL"
TABLE_EXISTS = MIGRATIONS_EXIST  # param: the schema-qualified, quoted table name
TREE_MIGRATION = 4  # creates ledger_blocks: derived data, created again if dropped by hand
_Q_VERSIONS = "SELECT version FROM {schema}.eventlog_migrations"
# And whether ledger_blocks is there (the parameter: its quoted name): see PostgresSchema.setup.
_Q_VERSION = (
    "SELECT count(*), max(version), to_regclass(%s) IS NOT NULL FROM {schema}.eventlog_migrations"
)
_Q_RECORD_VERSION = "INSERT INTO {schema}.eventlog_migrations (version) VALUES (%s)"

_Q_PUT_NAME = (
    "INSERT INTO {schema}.names (stream_id, name) VALUES (%s, %s) "
    "ON CONFLICT (stream_id) DO NOTHING"
)
_Q_DROP_NAME = "DELETE FROM {schema}.names WHERE stream_id = %s"
_Q_NAMES = "SELECT stream_id, name FROM {schema}.names"

_TEMPLATES = {
    "put_name": _Q_PUT_NAME,
    "drop_name": _Q_DROP_NAME,
    "names": _Q_NAMES,
    "head": _Q_HEAD,
    "insert": _Q_INSERT,
    "insert_one": _Q_INSERT_ONE,
    "insert_locked": _Q_INSERT_LOCKED,
    "insert_one_locked": _Q_INSERT_ONE_LOCKED,
    "read": _Q_READ,
    "read_desc": _Q_READ_DESC,
    "range_rows": _Q_RANGE_ROWS,
    "read_all": _Q_READ_ALL,
    "hash_at": _Q_HASH_AT,
    "record_at": _Q_RECORD_AT,
    "position_of": _Q_POSITION_OF,
    "purges_after": _Q_PURGES_AFTER,
    "watermark": _Q_WATERMARK,
    "terminate_holder": _Q_TERMINATE_HOLDER,
    "lock_events_share": _Q_LOCK_EVENTS_SHARE,
    "seq_at": _Q_SEQ_AT,
    "landed": _Q_LANDED,
    "streams": _Q_STREAMS,
    "delete_events": _Q_DELETE_EVENTS,
    "delete_snapshots": _Q_DELETE_SNAPSHOTS,
    "first_sealed": _Q_FIRST_SEALED,
    "to_erase": _Q_TO_ERASE,
    "blank": _Q_BLANK,
    "save_snapshot": _Q_SAVE_SNAPSHOT,
    "snapshot_check": _Q_SNAPSHOT_CHECK,
    "prune_snapshots": _Q_PRUNE_SNAPSHOTS,
    "load_snapshot": _Q_LOAD_SNAPSHOT,
    "get_setting": _Q_GET_SETTING,
    "put_setting": _Q_PUT_SETTING,
    "any_records": _Q_ANY_RECORDS,
    "legacy_hashes": _Q_LEGACY_HASHES,
    "seals": _Q_SEALS,
    "pending_seals": _Q_PENDING_SEALS,
    "put_seal": _Q_PUT_SEAL,
    "head_seal": _Q_HEAD_SEAL,
    "ends": _Q_ENDS,
    "since": _Q_SINCE,
    "seal_erasure": _Q_SEAL_ERASURE,
    "keyed_records": _Q_KEYED_RECORDS,
    "last_position": _Q_LAST_POSITION,
    "tree_read": _Q_TREE_READ,
    "tree_gen": _Q_TREE_GEN,
    "tree_bump": _Q_TREE_BUMP,
    "tree_count": _Q_TREE_COUNT,
    "tree_drop": _Q_TREE_DROP,
    "tree_insert": _Q_TREE_INSERT,
    "vacuum": _Q_VACUUM,
    "vacuum_full": _Q_VACUUM_FULL,
    "create_schema": _Q_CREATE_SCHEMA,
    "create_migrations": _Q_CREATE_MIGRATIONS,
    "versions": _Q_VERSIONS,
    "version": _Q_VERSION,
    "record_version": _Q_RECORD_VERSION,
}


def render(template: str, schema: sql.Identifier) -> bytes:
    # Rendered to bytes once: identifiers are quoted by psycopg, never string-formatted.
    return sql.SQL(template).format(schema=schema).as_bytes(None)


@functools.lru_cache(maxsize=32)
def statements(schema: str) -> dict[str, bytes]:
    """Every statement of one schema, rendered once per process (a third of a millisecond,
    which a store opened per request would otherwise pay each time). Never mutated."""
    ident = sql.Identifier(schema)
    return {name: render(template, ident) for name, template in _TEMPLATES.items()}


def lock_key(purpose: str, schema: str) -> int:
    """A signed 64-bit advisory-lock key private to chatledger and to one schema."""
    digest = hashlib.blake2b(f"chatledger.eventlog.{purpose}:{schema}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def stream_lock_key(schema: str, key: str) -> int:
    """The advisory-lock key of one memory's appends in one schema. Writers of one memory queue
    on it instead of racing for the same seq; writers of different memories never meet (two
    keys colliding in 64 bits would only make them queue, never corrupt anything)."""
    return lock_key("stream", f"{schema}\x00{key}")
