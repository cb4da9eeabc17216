"""What a PostgreSQL statement that timed out was waiting for, and the setting that bounds it.

A cancelled statement (SQLSTATE 57014, ``statement_timeout``) or a lock wait given up (55P03,
``lock_timeout``) says nothing of what it waited on. Asked right after, the server usually still
knows: the memory's append lock (an advisory lock, see
:func:`eventlog.recorders.postgres_sql.stream_lock_key`) or a lock on one of the schema's tables is
held by another backend, whose pid, state and transaction start are named so an operator can end it.
When nothing is held any more, the operation tells what it could have been waiting for.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from eventlog.recorders.postgres_sql import stream_lock_key

if TYPE_CHECKING:
    import psycopg

__all__ = ["READS", "waited_on"]

READS = frozenset({"read", "read_all", "head", "seq_at", "load_snapshot", "streams"})
"""Operations that only read: under MVCC they wait only for an ACCESS EXCLUSIVE table lock."""

# Modes a read (ACCESS SHARE) or a write (ROW EXCLUSIVE) of the events table conflicts with.
_READ_BLOCKERS = ["AccessExclusiveLock"]
_WRITE_BLOCKERS = ["ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"]

_ADVISORY = """
SELECT l.pid, a.state, a.xact_start, left(a.query, 100)
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.classid = %s::bigint::oid AND l.objid = %s::bigint::oid
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.pid <> pg_backend_pid()
ORDER BY a.xact_start LIMIT 1
"""

_TABLE = """
SELECT l.pid, a.state, a.xact_start, left(a.query, 100), l.mode, c.relname
FROM pg_locks l
JOIN pg_class c ON c.oid = l.relation
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.granted AND n.nspname = %s AND l.mode = ANY(%s) AND l.pid <> pg_backend_pid()
ORDER BY a.xact_start LIMIT 1
"""


def _holder(row: Sequence[Any]) -> str:
    pid, state, started, query = row[:4]
    since = f" since {started:%Y-%m-%d %H:%M:%S%z}" if isinstance(started, datetime) else ""
    return f"held by backend pid {pid} ({state or 'unknown state'}{since}, last query {query!r})"


def waited_on(
    conn: psycopg.Connection[Any], schema: str, operation: str, keys: Sequence[str]
) -> tuple[str, int | None]:
    """``(what the operation waited for, the holder's pid or None)``, asked on ``conn``
    (a connection other than the one cancelled) right after the timeout."""
    for key in keys:
        lock = stream_lock_key(schema, key)
        row = conn.execute(_ADVISORY, ((lock >> 32) & 0xFFFFFFFF, lock & 0xFFFFFFFF)).fetchone()
        if row is not None:
            return f"the append lock of memory {key!r:.80}, {_holder(row)}", int(row[0])
    modes = _READ_BLOCKERS if operation in READS else _WRITE_BLOCKERS
    row = conn.execute(_TABLE, (schema, modes)).fetchone()
    if row is not None:
        mode = row[4].removesuffix("Lock")
        article = "an" if mode[:1] in "AEIOU" else "a"
        return f"{article} {mode} lock on table {schema}.{row[5]}, {_holder(row)}", int(row[0])
    if operation in READS:
        return (
            "no lock is held against it now: the read itself ran that long (a huge range? "
            "narrow it with limit=), or a table lock was released meanwhile",
            None,
        )
    return (
        "the append lock of "
        + (f"memory {keys[0]!r:.80}" if keys else "its memory")
        + " or a table lock, released meanwhile",
        None,
    )
