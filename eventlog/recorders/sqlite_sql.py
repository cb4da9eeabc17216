"""The SQL of :class:`~eventlog.sqlite.SQLiteEventStore`: its statements, built once as
constants (the schema they run on is :mod:`eventlog.recorders.sqlite_schema`'s)."""

from __future__ import annotations

__all__ = [
    "ANY_RECORDS",
    "BLANK",
    "COLUMNS",
    "DROP_NAME",
    "ENDS_RECORDS",
    "ENDS_SEAL",
    "EVENTS_EXIST",
    "FIRST_SEALED",
    "GET_SETTING",
    "HEAD",
    "HEADS_EXIST",
    "HEAD_SEAL",
    "HEAD_SEALED",
    "INSERT",
    "INSERT_COLUMNS",
    "INSERT_IF_HEAD",
    "KEYED_RECORDS",
    "LAST_POSITION",
    "LEGACY_HASHES",
    "LOAD_SNAPSHOT",
    "NAMES",
    "PRUNE_SNAPSHOTS",
    "PUT_NAME",
    "PUT_SEAL",
    "PUT_SETTING",
    "RANGE_ROWS",
    "READ",
    "READ_ALL",
    "SAVE_SNAPSHOT",
    "SCAN_ROWS",
    "SEALS",
    "SEAL_ERASURE",
    "SELECT",
    "SEQ_AT",
    "SETTINGS_EXIST",
    "SNAPSHOT_CHECK",
    "STREAMS",
    "TO_ERASE",
    "TREE_BUMP",
    "TREE_COUNT",
    "TREE_DROP",
    "TREE_EXISTS",
    "TREE_GEN",
    "TREE_INSERT",
    "TREE_READ",
]

COLUMNS = (
    "position, stream_id, seq, recorded_at, kind, schema_version, payload, meta, prev_hash, hash, "
    "salt, commitment, format"
)
INSERT_COLUMNS = (
    "INSERT INTO events (stream_id, seq, recorded_at, kind, schema_version, payload, meta, "
    "prev_hash, hash, salt, commitment, format, head_mac) "
)
INSERT = INSERT_COLUMNS + "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
# With expected_hash: inserts nothing unless the STORED head is the record the row chains to
# (the cached head may predate a head replaced at the same seq, which the unique key cannot see).
INSERT_IF_HEAD = (
    INSERT_COLUMNS + "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE coalesce((SELECT hash "
    "FROM events WHERE stream_id = ? ORDER BY seq DESC LIMIT 1), ?) = ?"
)
SETTINGS_EXIST = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'settings'"
HEADS_EXIST = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'heads'"
TREE_EXISTS = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ledger_blocks'"
TREE_READ = (
    "SELECT block, first_position, last_position, node, mac FROM ledger_blocks ORDER BY block"
)
TREE_GEN = "SELECT value FROM settings WHERE name = 'ledger_tree_generation'"
TREE_BUMP = (
    "INSERT INTO settings (name, value) VALUES ('ledger_tree_generation', '1') "
    "ON CONFLICT (name) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)"
)
TREE_COUNT = "SELECT count(*) FROM ledger_blocks"
TREE_DROP = "DELETE FROM ledger_blocks"
TREE_INSERT = (
    "INSERT OR IGNORE INTO ledger_blocks (block, first_position, last_position, node, mac) "
    "VALUES (?, ?, ?, ?, ?)"
)
GET_SETTING = "SELECT value FROM settings WHERE name = ?"
PUT_SETTING = "INSERT OR REPLACE INTO settings (name, value) VALUES (?, ?)"
KEYED_RECORDS = "SELECT 1 FROM events WHERE format = 3 LIMIT 1"
ANY_RECORDS = "SELECT 1 FROM events LIMIT 1"
LAST_POSITION = "SELECT coalesce(max(position), 0) FROM events"
LEGACY_HASHES = "SELECT hash FROM events WHERE format != 3 AND position <= ? ORDER BY position"
SEALS = "SELECT stream_id, seq, hash, erased_through FROM heads"
PUT_SEAL = "UPDATE heads SET mac = ? WHERE stream_id = ?"
HEAD_SEAL = "SELECT seq, hash, mac, erased_through FROM heads WHERE stream_id = ?"
# The read path's ends of a memory (first record, newest record, seal) in one statement, so one
# snapshot: tagged rows, the seal padded to a record's width.
ENDS_RECORDS = (
    "SELECT 'f', * FROM (SELECT {cols} FROM events WHERE stream_id = ? ORDER BY seq LIMIT 1) "
    "UNION ALL SELECT 'l', * FROM (SELECT {cols} FROM events WHERE stream_id = ? "
    "ORDER BY seq DESC LIMIT 1)"
)
ENDS_SEAL = (
    " UNION ALL SELECT 's', seq, hash, mac, erased_through, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL FROM heads WHERE stream_id = ?"
)
SEAL_ERASURE = "UPDATE heads SET erased_through = ? WHERE stream_id = ?"
# The head and what its seal covers besides (erased_through), for appends to seal the next.
HEAD_SEALED = (
    "SELECT e.seq, e.hash, e.recorded_at, coalesce(h.erased_through, 0) FROM events e "
    "LEFT JOIN heads h ON h.stream_id = e.stream_id WHERE e.stream_id = ? "
    "ORDER BY e.seq DESC LIMIT 1"
)
HEAD = "SELECT seq, hash, recorded_at FROM events WHERE stream_id = ? ORDER BY seq DESC LIMIT 1"
PUT_NAME = "INSERT OR IGNORE INTO names (stream_id, name) VALUES (?, ?)"
DROP_NAME = "DELETE FROM names WHERE stream_id = ?"
NAMES = "SELECT stream_id, name FROM names"
SEQ_AT = "SELECT seq FROM events WHERE stream_id = ? AND recorded_at <= ? ORDER BY seq DESC LIMIT 1"
SELECT = f"SELECT {COLUMNS} FROM events WHERE "  # noqa: S608 - constants only, no user text
READ_ALL = SELECT + "position > ? ORDER BY position LIMIT ?"
# Rows for verify(digest=)'s pass, Record-shaped (an empty `sealed` last): run by this store and
# by that pass's worker process, on its own read-only connection (eventlog.ledger_scan).
# A full scan, on purpose: only a receipt lookup that missed asks (no index on hash to keep).
POSITION_OF = "SELECT position FROM events WHERE hash = ? ORDER BY position LIMIT 1"
SCAN_ROWS = f"SELECT {COLUMNS}, '' FROM events WHERE position > ? ORDER BY position LIMIT ?"  # noqa: S608
# _range_rows(): RANGE_ROW_FIELDS' order; no upper bound is _NO_UPPER, past every seq.
RANGE_ROWS = (
    "SELECT seq, recorded_at, kind, schema_version, payload, meta, prev_hash, hash, salt, "
    "commitment, format, position FROM events WHERE stream_id = ? AND seq > ? AND seq <= ? "
    "ORDER BY seq"
)
# read() with every combination of bounds, built once: (has gt, has lte, desc) -> SQL.
READ = {
    (gt, lte, desc): SELECT
    + "stream_id = ?"
    + (" AND seq > ?" if gt else "")
    + (" AND seq <= ?" if lte else "")
    + (" ORDER BY seq DESC LIMIT ?" if desc else " ORDER BY seq LIMIT ?")
    for gt in (False, True)
    for lte in (False, True)
    for desc in (False, True)
}
STREAMS = (
    "SELECT stream_id, count(*), max(seq), min(recorded_at), max(recorded_at) "
    "FROM events GROUP BY stream_id"
)
# Records erase() must blank: content left (format 1 always counts: it cannot be blanked).
FIRST_SEALED = (
    # substr, not LIKE: LIKE treats "_" as a wildcard and, for ASCII, ignores case.
    "SELECT min(seq) FROM events WHERE stream_id = ? AND kind NOT IN (?, ?) "
    "AND substr(payload, 1, ?) = ?"
)
TO_ERASE = (
    "SELECT seq, format FROM events WHERE stream_id = ? AND kind NOT IN (?, ?) "
    "AND (format = 1 OR salt != '' OR payload != '') ORDER BY seq"
)
BLANK = (
    "UPDATE events SET payload = '', salt = '' WHERE stream_id = ? AND kind NOT IN (?, ?) "
    "AND (salt != '' OR payload != '')"
)
# (event seq exists, the first erasure receipt or purge tombstone after it): see
# eventlog.erasure.snapshot_problem. Params: key, seq, key, seq, the two receipt kinds.
SNAPSHOT_CHECK = (
    "SELECT (SELECT 1 FROM events WHERE stream_id = ? AND seq = ?), (SELECT min(seq) FROM "
    "events WHERE stream_id = ? AND seq > ? AND kind IN (?, ?))"
)
EVENTS_EXIST = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'"
PRUNE_SNAPSHOTS = "DELETE FROM snapshots WHERE stream_id = ? AND name = ? AND seq < ?"
SAVE_SNAPSHOT = "INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?, ?, ?)"
LOAD_SNAPSHOT = (
    "SELECT stream_id, name, seq, state, created_at FROM snapshots "
    "WHERE stream_id = ? AND name = ? AND seq <= ? ORDER BY seq DESC LIMIT 1"
)
