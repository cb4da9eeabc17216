"""Erasure in a SQLite ledger: purge and erase, and the WAL checkpoint that takes the erased
content out of the -wal file too."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence

from eventlog.erasure import content_subject, erasure_record, purged, shred, tombstone
from eventlog.errors import ConcurrencyError, PersistenceError
from eventlog.hashing import RECEIPT_KINDS
from eventlog.ids import MemoryId, memory_id_from_key
from eventlog.keyring import SEALED_PREFIX
from eventlog.models import ErasureReceipt, Record, StreamHead
from eventlog.recorders.sqlite_base import SQLiteBase
from eventlog.recorders.sqlite_sql import (
    BLANK,
    DROP_NAME,
    FIRST_SEALED,
    INSERT,
    SEAL_ERASURE,
    TO_ERASE,
    TREE_BUMP,
    TREE_DROP,
)

__all__ = ["CLEANUP_WAIT", "SQLiteErasure"]

# How long an erase or purge waits for readers to let its WAL checkpoint run, in seconds.
CLEANUP_WAIT = 0.5


class SQLiteErasure(SQLiteBase):
    """:class:`~eventlog.sqlite.SQLiteEventStore`'s purge, erase and WAL checkpoint."""

    _cleanup_pending = False  # an erase's WAL checkpoint that readers blocked

    def purge(self, memory_id: MemoryId, *, expected_seq: int, reason: str) -> Record:
        key = self._stream_key(memory_id, "purge")
        self._writable("purge", self._where)
        subject = content_subject(self, key, "purge")  # before the names row goes

        def work(conn: sqlite3.Connection) -> Record:
            self._heads.pop(key, None)  # rare and destructive: decide on the stored head
            head = self._head_locked(conn, key)
            if head is None:
                msg = f"purge of {key}: the stream is empty; nothing to erase"
                raise ValueError(msg)
            if head.seq != expected_seq:
                raise ConcurrencyError(key, expected_seq, head.seq)
            leaves = conn.execute(
                "SELECT position, hash FROM events WHERE stream_id = ?", (key,)
            ).fetchall()
            now = self._now()
            tomb = tombstone(head, leaves, reason, now)
            (row,) = self._build(key, head, [tomb], now)
            # Tombstone first, then delete: see the note on the position column (in
            # eventlog.recorders.sqlite_schema). Sealed as erased through the tombstone, so purged
            # records put back from a backup are refused although each is genuine.
            mac = self._seal_of(key, row[1], row[8], row[1])
            cursor = conn.execute(INSERT, (*row, mac))
            record = Record(cursor.lastrowid or 0, *row)
            conn.execute(SEAL_ERASURE, (record.seq, key))
            conn.execute("DELETE FROM events WHERE stream_id = ? AND seq < ?", (key, record.seq))
            conn.execute("DELETE FROM snapshots WHERE stream_id = ?", (key,))
            if self._names is not None:
                conn.execute(DROP_NAME, (key,))  # the id goes with the content, as in _erase
            if self._tree_table:
                conn.execute(TREE_DROP)  # their records are gone: the next digest rebuilds
                conn.execute(TREE_BUMP)  # and a tree read before this must not be saved
            shred(self, key, subject)  # before the commit: see erasure._erase_then
            return record

        record = self._write("purge", work)
        self._heads[key] = StreamHead(record.seq, record.hash, record.recorded_at_text)
        self._erased[key] = record.seq
        self._ends_cache.pop(key, None)
        # secure_delete zeroed the freed pages, but the WAL still holds copies of them until
        # it is checkpointed and truncated - which readers in other connections can delay
        # (then cleanup_pending says so, and the next erase, purge or checkpoint finishes it).
        self._clean_files("purge")
        purged(self, key)
        return record

    def _first_sealed(self, key: str) -> int | None:
        params = (key, *RECEIPT_KINDS, len(SEALED_PREFIX), SEALED_PREFIX)
        row = self._read("read", lambda conn: conn.execute(FIRST_SEALED, params).fetchone())
        return None if row is None or row[0] is None else int(row[0])

    def _erase(
        self,
        keys: Sequence[str],
        reason: str,
        expected_seq: int | None,
        before_commit: Callable[[], None] | None = None,
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
                    conn.execute(DROP_NAME, (key,))
                pending = conn.execute(TO_ERASE, (key, *RECEIPT_KINDS)).fetchall()
                now = self._now()
                built = erasure_record(key, [(r[0], r[1]) for r in pending], reason, now)
                if built is None:
                    continue
                item, event = built
                (row,) = self._build(key, head, [item], now)
                conn.execute(BLANK, (key, *RECEIPT_KINDS))
                conn.execute("DELETE FROM snapshots WHERE stream_id = ?", (key,))
                # Everything before the receipt is now empty: sealed, so content put back into
                # those records later (from a backup) is refused although it matches.
                mac = self._seal_of(key, row[1], row[8], row[1])
                cursor = conn.execute(INSERT, (*row, mac))
                record = Record(cursor.lastrowid or 0, *row)
                conn.execute(SEAL_ERASURE, (record.seq, key))
                done.append((record, ErasureReceipt(memory_id_from_key(key), event, record)))
            if before_commit is not None:
                before_commit()  # holding the write lock: see erasure._erase_then
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
