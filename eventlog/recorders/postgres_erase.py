"""Erasure in a PostgreSQL ledger: purge and erase, and the VACUUM that takes the dead row
versions out of the table files."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from psycopg import pq

from eventlog.erasure import content_subject, erasure_record, purged, shred, tombstone
from eventlog.errors import ConcurrencyError, OutcomeUnknownError, PersistenceError
from eventlog.hashing import RECEIPT_KINDS
from eventlog.ids import MemoryId, memory_id_from_key
from eventlog.keyring import SEALED_PREFIX
from eventlog.models import ErasureReceipt, Record, StreamHead
from eventlog.recorders import postgres_sql as pgsql
from eventlog.recorders.postgres_base import PostgresBase

if TYPE_CHECKING:
    from eventlog.recorders.postgres_base import Row

__all__ = ["PostgresErasure"]


class PostgresErasure(PostgresBase):
    """:class:`~eventlog.postgres.PostgresEventStore`'s purge, erase and vacuum."""

    _cleanup_pending = False  # an erase or purge left dead row versions: see vacuum()

    def purge(self, memory_id: MemoryId, *, expected_seq: int, reason: str) -> Record:
        """See :meth:`EventStore.purge`.

        The deleted rows vanish for every reader at commit, but PostgreSQL erases nothing
        physically then: the old row versions stay in the table files as dead tuples until
        ``VACUUM`` removes them (call :meth:`vacuum`, or wait for autovacuum), and the WAL,
        WAL archives, replicas' WAL and base backups keep copies until they are recycled or
        expire. Physical erasure therefore needs ``vacuum(full=True)`` (plain VACUUM only
        marks the space reusable) plus your WAL and backup retention.
        """
        key = self._stream_key(memory_id, "purge")
        self._writable("purge", self._name)
        subject = content_subject(self, key, "purge")  # before the names row goes
        conflict = lambda: ConcurrencyError(key, expected_seq, None)  # noqa: E731
        sent: list[tuple[list[Row], int]] = []  # the tombstone, once its commit may land
        try:
            record = self._purge_in(key, expected_seq, reason, subject, conflict, sent)
        except OutcomeUnknownError:
            if not sent:
                raise
            landed = self._landed(key, *sent[0], action="purge")  # ask the server
            if landed is None:
                msg = (
                    f"purge of {key}: the connection was lost during its COMMIT and the server "
                    "says it did not land: the records are still stored; run it again"
                )
                operation = "purge"
                raise PersistenceError(operation, msg) from None
            (record,) = landed
        self._erased[key] = record.seq
        self._remember(key, StreamHead(record.seq, record.hash, record.recorded_at_text))
        self._wrote(record.position)
        self._cleanup_pending = True  # the deleted rows stay in the files until a vacuum
        purged(self, key)
        return record

    def _purge_in(  # noqa: PLR0917 - private; purge's transaction
        self,
        key: str,
        expected_seq: int,
        reason: str,
        subject: tuple[str, bool] | None,
        conflict: Callable[[], ConcurrencyError],
        sent: list[tuple[list[Row], int]],
    ) -> Record:
        with self._write("purge", conflict, keys=[key]) as conn:
            head = self._head(conn, key)
            if head is None:
                msg = f"purge of {key}: the stream is empty; nothing to erase"
                raise ValueError(msg)
            if head.seq != expected_seq:
                raise ConcurrencyError(key, expected_seq, head.seq)
            leaves = conn.execute(self._q["delete_events"], (key,)).fetchall()
            conn.execute(self._q["delete_snapshots"], (key,))
            if self._names is not None:
                conn.execute(self._q["drop_name"], (key,))  # the id goes, as in _erase
            # The erased records are in the ledger tree's blocks: drop them (the next digest
            # rebuilds), under the lock savers take, so none slips stale blocks back in.
            conn.execute(pgsql.LOCK, (self._tree_key,))
            if self._has_tree(conn):
                conn.execute(self._q["tree_drop"])
            conn.execute(self._q["tree_bump"])  # a tree read before this must not be saved
            now = self._now()
            tomb = tombstone(head, leaves, reason, now)
            rows = self._build(key, head, [tomb], now)
            # Sealed as erased through the tombstone: purged records put back from a backup
            # are refused although each is genuine.
            query = self._insert_query(rows, after_purge=True, erased_through=rows[0][1])
            ((_, position),) = conn.execute(*query).fetchall()
            conn.execute(self._q["seal_erasure"], (rows[0][1], key))
            shred(self, key, subject)  # before the commit: see erasure._erase_then
            sent.append((rows, conn.info.backend_pid))
        return Record(position, *rows[0])

    def _first_sealed(self, key: str) -> int | None:
        params = (key, list(RECEIPT_KINDS), len(SEALED_PREFIX), SEALED_PREFIX)

        def run(conn: Any) -> Any:
            return conn.execute(self._q["first_sealed"], params).fetchone()

        row = self._read("read", run)
        return None if row is None or row[0] is None else int(row[0])

    def _erase(
        self,
        keys: Sequence[str],
        reason: str,
        expected_seq: int | None,
        before_commit: Callable[[], None] | None = None,
    ) -> list[ErasureReceipt]:
        """See :meth:`EventStore.erase`. As with :meth:`purge`, the old row versions (with the
        erased text) stay in the table and TOAST files as dead tuples: :meth:`vacuum` makes
        their space reusable but their bytes can remain until overwritten, ``vacuum(full=True)``
        rewrites the files without them. The WAL and backups keep copies until recycled."""
        done: list[tuple[Record, ErasureReceipt]] = []
        sent: list[tuple[list[Row], int]] = []  # the first receipt, once the commit may land
        try:
            self._erase_in(keys, reason, expected_seq, before_commit, done, sent)
        except OutcomeUnknownError:
            if not sent:
                raise
            # One transaction: the first receipt landed exactly when all of them did.
            if self._landed(sent[0][0][0][0], *sent[0], action="erase") is None:
                msg = (
                    "the connection was lost during its COMMIT and the server says it did not "
                    "land: nothing was erased in the database; run it again"
                )
                operation = "erase"
                raise PersistenceError(operation, msg) from None
        for record, _ in done:
            self._erased[record.stream_id] = record.seq
            self._remember(
                record.stream_id, StreamHead(record.seq, record.hash, record.recorded_at_text)
            )
            self._wrote(record.position)
        return [receipt for _, receipt in done]

    def _erase_in(  # noqa: PLR0917 - private; erase's transaction
        self,
        keys: Sequence[str],
        reason: str,
        expected_seq: int | None,
        before_commit: Callable[[], None] | None,
        done: list[tuple[Record, ErasureReceipt]],
        sent: list[tuple[list[Row], int]],
    ) -> None:
        kinds = list(RECEIPT_KINDS)
        with self._write("erase", keys=keys) as conn:
            for key in keys:
                head = self._head(conn, key)
                seq = 0 if head is None else head.seq
                if expected_seq is not None and seq != expected_seq:
                    raise ConcurrencyError(key, expected_seq, seq)
                if self._names is not None:
                    # The id goes with the content (also when only the id was left: a rerun).
                    conn.execute(self._q["drop_name"], (key,))
                pending = conn.execute(self._q["to_erase"], (key, kinds)).fetchall()
                now = self._now()
                built = erasure_record(key, [(r[0], r[1]) for r in pending], reason, now)
                if built is None:
                    continue
                item, event = built
                rows = self._build(key, head, [item], now)
                conn.execute(self._q["blank"], (key, kinds))
                conn.execute(self._q["delete_snapshots"], (key,))
                # Everything before the receipt is now empty: sealed, so content put back into
                # those records later (from a backup) is refused although it matches.
                query = self._insert_query(rows, before=len(done), erased_through=rows[0][1])
                ((_, position),) = conn.execute(*query).fetchall()
                record = Record(position, *rows[0])
                conn.execute(self._q["seal_erasure"], (record.seq, key))
                done.append((record, ErasureReceipt(memory_id_from_key(key), event, record)))
                if not sent:
                    sent.append((rows, conn.info.backend_pid))
            if before_commit is not None:
                before_commit()  # holding the memories' locks: see erasure._erase_then

    def _clean_files(self, operation: str) -> bool:
        # Dead row versions with the erased text stay in the table files until a vacuum; do
        # not run one implicitly (it scans the whole table): say so, and let vacuum() do it.
        self._cleanup_pending = True
        return False

    @property
    def cleanup_pending(self) -> bool:
        return self._cleanup_pending

    def vacuum(self, *, full: bool = False) -> None:
        """Run ``VACUUM`` on the events and snapshots tables, e.g. after an erase or purge.

        Plain VACUUM removes the dead rows a purge left behind and makes their space reusable
        without blocking readers or writers; their bytes may still sit in the data files until
        that space is reused. ``full=True`` runs ``VACUUM FULL``, which rewrites both tables
        into new files but holds an exclusive lock (every read and append waits) while it runs.
        Either way the WAL and backups keep their own copies until they are recycled.
        """
        with self._guard("vacuum") as conn:
            autocommit = conn.autocommit
            conn.autocommit = True  # VACUUM cannot run inside a transaction block
            try:
                conn.execute(self._q["vacuum_full" if full else "vacuum"])
                self._cleanup_pending = self._cleanup_pending and not full
            finally:
                if conn.info.transaction_status == pq.TransactionStatus.IDLE:  # not broken
                    conn.autocommit = autocommit
