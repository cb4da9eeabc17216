"""The recorder: what a backend must do, and nothing of hashes or keys in its signatures.

:class:`~eventlog.store.EventStore` is the ledger built on this contract (hash chains,
commitments, head seals, the chain key, the keyring, erasable ids, verification, digests). A
backend subclasses it and implements the abstract methods below: store and read rows
atomically (append with an expected position, ranges, snapshots, erasure of a row's content),
plus the hooks with defaults where its storage can do better. The conformance kit
(:mod:`eventlog.testing`) holds every backend to it. The ledger hands a backend what to store
(``EventStore._build``, from :mod:`eventlog.ledger_rows`, inside the backend's write
transaction); the backend does not compute it. The ledger's other parts: stored keys and the
keyring (:mod:`eventlog.ledger_names`), verification and verified reads
(:mod:`eventlog.ledger_verify`), and :mod:`eventlog.store` itself (open modes, erasure,
digests, checkpoints, the witness).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from eventlog.ids import MemoryId, StreamKey
from eventlog.models import (
    ErasureReceipt,
    HeadSeal,
    NewRecord,
    Record,
    Snapshot,
    StreamHead,
)

if TYPE_CHECKING:
    from eventlog.ledger_tree import TreeBlock

__all__ = ["LedgerTx", "Recorder"]


class LedgerTx(Protocol):
    """What the ledger asks of a backend inside one transaction to settle its chain key and
    head seals at open (see :func:`eventlog.keycheck.settle_keys`)."""

    def sealable(self) -> bool:
        """Whether the database has head seals (False: a schema from before them, opened
        without migrating)."""

    def setting(self, name: str) -> str | None:
        """A stored setting, or None."""

    def put_setting(self, name: str, value: str) -> None:
        """Store a setting, replacing any value it had."""

    def facts(self) -> tuple[bool, bool, int]:
        """``(any records, any format 3 records, largest position or 0)``."""

    def legacy_hashes(self, upto: int | None) -> Iterable[str]:
        """Hashes of the unkeyed (format 1 and 2) records at positions <= ``upto`` (all when
        None), in global order."""

    def seals(self, *, pending: bool) -> list[tuple[str, int, str, int]]:
        """``(stream key, seq, hash, erased_through)`` of every head seal (only the blank ones
        with ``pending``)."""

    def put_seals(self, rows: Sequence[tuple[str, str]]) -> None:
        """Set ``(mac, stream key)`` of existing head seals."""


class Recorder(ABC):
    """The backend contract of :class:`~eventlog.store.EventStore` (see the module docstring)."""

    @abstractmethod
    def append(
        self,
        memory_id: MemoryId,
        items: Sequence[NewRecord],
        *,
        expected_seq: int | None = None,
        expected_hash: str | None = None,
    ) -> list[Record]:
        """Append records to a memory's stream, all or none.

        Seqs continue gaplessly from the head (the first record of a stream is seq 1).
        ``recorded_at`` is the store's clock (UTC), never earlier than the head's, so time
        order equals seq order within a stream; an item's own ``recorded_at`` is kept instead
        (imports), and must then not be earlier than the head's either.

        Args:
            memory_id: The memory id.
            items: Records to append, in order. An empty sequence writes nothing.
            expected_seq: The seq the caller believes the head is at (0 for a new stream);
                None appends after whatever the head is.
            expected_hash: The hash the caller believes the head has (:data:`GENESIS` for a
                new stream); None skips the check. Unlike ``expected_seq`` this notices a
                head *replaced* at the same seq (a failover to a replica that lost the last
                commit, then another writer): checked against the stored head, not a cache.

        Returns:
            The stored records, in order, with seq, position, time and hashes.

        Raises:
            ConcurrencyError: ``expected_seq`` is not the head seq, or ``expected_hash`` is not
                the head's hash. Enforced by the unique (stream, seq) key, so two writers can
                never both succeed.
            ChainKeyError: The database is keyed and this store was opened without the key.
            TypeError: An item is not a :class:`NewRecord` (nothing is written).
            ValueError: An item's ``recorded_at`` is naive or earlier than the head's, or its
                ``format``, ``salt`` or ``commitment`` (imports) is invalid or does not suit
                this store (a keyed store writes only format 3).
            PersistenceError: The database failed; nothing was written.
            StoreClosedError: The store is closed.
        """

    @abstractmethod
    def purge(self, memory_id: MemoryId, *, expected_seq: int, reason: str) -> Record:
        """Erase every record and snapshot of a stream and append a tombstone, atomically.

        The tombstone (kind ``memory_purged``) takes seq ``expected_seq + 1`` and chains to the
        last erased hash, so :meth:`verify` still passes and an auditor sees that the id existed.
        As :meth:`erase`, it takes the id too: on a ledger with erasable ids the memory's
        ``names`` row is deleted in the same transaction (the tombstone names the pseudonym),
        and with a keyring the memory's content key is destroyed in that transaction, just
        before the commit (holding the lock appends take), so a backup taken before yields
        neither. A backend calls :func:`eventlog.erasure.content_subject` before its
        transaction, :func:`eventlog.erasure.shred` inside it and
        :func:`eventlog.erasure.purged` after its commit.

        Args:
            memory_id: The memory id to erase.
            expected_seq: The head seq the caller decided on; if a writer appended since,
                nothing is erased.
            reason: Why, recorded in the tombstone.

        Returns:
            The tombstone record.

        Raises:
            ConcurrencyError: The head is not ``expected_seq`` (nothing is erased).
            ValueError: The stream is empty.
            KeyringError: Its content is sealed and this store's keyring (none, or another)
                cannot destroy its key (:func:`eventlog.erasure.content_subject`; nothing is
                erased).
        """

    @abstractmethod
    def _erase(
        self,
        keys: Sequence[str],
        reason: str,
        expected_seq: int | None,
        before_commit: Callable[[], None] | None = None,
    ) -> list[ErasureReceipt]:
        """Backend hook of :meth:`erase`, all ``keys`` in one write transaction: for each,
        read the head (``expected_seq`` checked against it when given), fetch the records to
        erase, build their receipt (:func:`eventlog.erasure.erasure_record`), blank payload
        and salt, delete snapshots and append the receipt. Keys with nothing to erase are
        skipped (no receipt). Then call ``before_commit`` (when given: the ledger destroys the
        content keys there), still in the transaction and holding the lock appends to those
        memories take, also when nothing was left to erase; if it raises, roll back. A
        recorder whose ``_erase`` has no ``before_commit`` parameter still works: the keys
        are then destroyed after the commit (see ``eventlog.erasure._erase_then``)."""

    def _sealed_keys(self) -> list[str]:
        """Backend hook: the stream key of every head seal, so ``verify()`` also checks a
        memory whose rows were all deleted behind the store's back while its seal stayed
        (``_stream_rows`` lists only keys that have rows). The default keeps no seals apart
        from the rows: none."""
        return []

    def _first_sealed(self, key: str) -> int | None:
        """Backend hook: the lowest seq of memory ``key`` whose stored payload is sealed
        content (:func:`eventlog.keyring.is_sealed`), receipts aside; None when none is. What
        an erasure checks its store's keyring against (:mod:`eventlog.erasure`). The
        default reads the memory's rows; the SQL stores ask in one statement."""
        from eventlog.hashing import RANGE_ROW_FIELDS, RECEIPT_KINDS
        from eventlog.keyring import is_sealed

        kind, payload = RANGE_ROW_FIELDS.index("kind"), RANGE_ROW_FIELDS.index("payload")
        head = self.head(StreamKey(key))
        page = 2_000
        for gt in range(0, 0 if head is None else head.seq, page):
            for row in self._range_rows(key, gt, gt + page):
                if row[kind] not in RECEIPT_KINDS and is_sealed(row[payload]):
                    return int(row[0])
        return None

    def _name_rows(self) -> dict[str, str]:
        """Backend hook: every ``names`` row, pseudonym -> stored name (empty when the ledger
        has no erasable ids)."""
        return {}

    @property
    def cleanup_pending(self) -> bool:
        """Whether an erase's or purge's file cleanup is still to do: SQLite's WAL checkpoint
        that a reader holding an old snapshot blocked (the erasure itself is committed and no
        read returns the content), or PostgreSQL's dead row versions until
        ``vacuum(full=True)``. :meth:`finish_cleanup` (and every scheduled compaction) tries
        again."""
        return False

    def finish_cleanup(self) -> bool:
        """Try once more, without waiting, to finish a pending file cleanup (see
        :attr:`cleanup_pending`). Returns whether none is pending afterwards. PostgreSQL's
        needs ``vacuum(full=True)``, which this never runs implicitly (it locks the tables)."""
        return not self.cleanup_pending

    def _clean_files(self, operation: str) -> bool:
        """Remove what an erase or purge left in the backend's files, as far as it can now;
        False when some of it must wait (see :meth:`erase`). The default has no files."""
        return True

    @abstractmethod
    def save_snapshot(self, memory_id: MemoryId, name: str, seq: int, state: str) -> None:
        """Save a projection's state at ``seq`` under ``name``, replacing older ones of that name.

        Only the newest snapshot per (stream, name) is kept, so repeated compaction does not
        grow the table.

        Snapshots are derived data: they are not part of the chain and never change history.

        Raises:
            ValueError: The stream has no event ``seq`` (e.g. purged meanwhile): a snapshot of
                erased messages must not outlive the purge.
            PersistenceError: The database failed.
            StoreClosedError: The store is closed.
        """

    @abstractmethod
    def read(
        self,
        memory_id: MemoryId,
        *,
        gt: int | None = None,
        lte: int | None = None,
        limit: int | None = None,
        desc: bool = False,
    ) -> list[Record]:
        """Read a memory's records in seq order.

        Args:
            memory_id: The memory id.
            gt: Only seqs strictly greater than this (exclusive lower bound).
            lte: Only seqs less than or equal to this (inclusive upper bound).
            limit: At most this many records (taken from the newest end when ``desc``).
            desc: Newest first.

        Returns:
            The records; an empty list for an unknown memory id.
        """

    @abstractmethod
    def read_all(self, *, gt: int = 0, limit: int | None = None) -> list[Record]:
        """Read records of all streams in global position order, for tailing.

        What it returns is final: no record ever appears later at or below the last position
        returned (SQLite and the in-memory store assign positions in commit order; PostgreSQL
        returns only records below its oldest running transaction). So a reader that remembers
        the last position it saw and asks for ``gt=`` that position never misses a record
        committed later. Positions increase but need not be consecutive.

        Args:
            gt: Only positions strictly greater than this.
            limit: At most this many records.
        """

    @abstractmethod
    def head(self, memory_id: MemoryId) -> StreamHead | None:
        """The newest record's seq, hash and time, or None for an empty stream.

        Cheap by contract: memories call it on every ``messages()`` to see other writers.
        """

    @abstractmethod
    def seq_at(self, memory_id: MemoryId, at: datetime) -> int | None:
        """The seq of the last record recorded at or before ``at``, or None if none was."""

    @abstractmethod
    def load_snapshot(
        self, memory_id: MemoryId, name: str, *, lte: int | None = None
    ) -> Snapshot | None:
        """The newest snapshot saved under ``name`` with seq <= ``lte`` (any seq when None)."""

    @abstractmethod
    def _stream_rows(self) -> list[tuple[str, int, int, str, str]]:
        """Backend hook: ``(key, count, last_seq, first_time, last_time)`` per stream."""

    def _ends(self, key: str) -> tuple[HeadSeal | None, Record | None, Record | None]:
        """The memory's head seal, first record and newest record, for the read path's
        checks. Backends override it to read all three in one statement (one snapshot)."""
        stream = StreamKey(key)
        seal = self._head_seal(key)
        first = self.read(stream, limit=1)
        newest = self.read(stream, desc=True, limit=1)
        return seal, first[0] if first else None, newest[0] if newest else None

    def _range_rows(self, key: str, gt: int, lte: int | None) -> Sequence[tuple[Any, ...]]:
        """Backend hook: the stored records of memory ``key`` with ``gt < seq <= lte`` (no
        upper bound for None), ascending by seq, as tuples shaped as
        :data:`eventlog.hashing.RANGE_ROW_FIELDS` - the stored payload text, never opened: the
        rows :meth:`EventStore.read_verified_rows` checks in one loop, where building a Record
        per row costs time a whole-history read does not need. One statement (one snapshot)."""
        return [r.range_row(r.stored_payload) for r in self.read(StreamKey(key), gt=gt, lte=lte)]

    def _scan_rows(self, gt: int, limit: int) -> Sequence[tuple[Any, ...]]:
        """Backend hook: up to ``limit`` stored records after global position ``gt``, as
        tuples in :class:`Record`'s field order, the stored payload text in ``sealed`` or
        ``payload`` (a backend may leave sealed payloads unopened): the rows ``verify(digest=)``
        re-hashes (:mod:`eventlog.ledger_scan`), a million at a time, where building a Record
        and opening a sealed payload per row cost time the check does not need."""
        return self.read_all(gt=gt, limit=limit)

    def _record_at(self, position: int) -> Record | None:
        """Backend hook: the record at global ``position``, None when there is none; committed
        records only, but every one of them (PostgreSQL: also above the oldest running
        transaction, which :meth:`read_all` holds back). What an erasure receipt's id names
        (see :func:`eventlog.receipts.find_receipt`)."""
        found = self.read_all(gt=position - 1, limit=1)
        return found[0] if found and found[0].position == position else None

    def _position_of(self, digest: str) -> int | None:
        """Backend hook: the global position of the committed record whose chain hash is
        ``digest`` (the lowest, should rows have been copied), None when there is none; every
        committed record, as :meth:`_record_at`. Only the miss path of
        :func:`eventlog.receipts.find_receipt` asks, to tell a moved receipt from a missing one;
        backends with an index or a fast scan do better than this page walk."""
        after = -(1 << 62)  # also rows moved below 1 by hand
        while page := self.read_all(gt=after, limit=5_000):
            for record in page:
                if record.hash == digest:
                    return record.position
            after = page[-1].position
        return None

    def _unkeyed_hashes(self) -> list[str]:
        """Backend hook: the chain hashes of every committed record not of format 3 (keyed),
        in global order, also at positions below 1 (rows moved there by hand) and, as
        :meth:`_record_at`, above PostgreSQL's oldest running transaction: what a keyed
        ledger's sealed legacy prefix is checked against."""
        hashes: list[str] = []
        after = -(1 << 62)
        while page := self.read_all(gt=after, limit=5_000):
            hashes.extend(r.hash for r in page if r.format != 3)
            after = page[-1].position
        return hashes

    def _hash_at(self, position: int) -> str | None:
        """Backend hook: the chain hash of :meth:`_record_at`'s record, None when there is
        none. What the witness checks its anchors against (see :mod:`eventlog.witness`)."""
        record = self._record_at(position)
        return None if record is None else record.hash

    def _purges_after(self, position: int, limit: int) -> list[Record]:
        """Backend hook: up to ``limit`` retention purge tombstones (``memory_purged``
        records) committed after global ``position``, in global order (every committed
        record, as :meth:`_hash_at`). The witness checks each before it excuses anything."""
        found: list[Record] = []
        after = position
        while len(found) < limit and (page := self.read_all(gt=after, limit=10_000)):
            found.extend(r for r in page if r.kind == "memory_purged")
            after = page[-1].position
        return found[:limit]

    def _reopen_path(self) -> tuple[str, int, int] | None:
        """Backend hook: ``(absolute path, st_dev, st_ino)`` of the file a worker process may
        open read-only to read this ledger in parallel (see :mod:`eventlog.ledger_scan`);
        None when there is none."""
        return None

    def _tree_generation(self) -> int:
        """Backend hook: the purge generation, which every purge bumps in its transaction (the
        ledger tree's stored blocks are dropped by it, see :mod:`eventlog.ledger_tree`)."""
        return 0

    def _tree_blocks(self) -> tuple[int, list[TreeBlock]]:
        """Backend hook: the purge generation, then the stored blocks of the ledger tree in
        block order (read in that order: blocks newer than the generation are harmless, older
        ones are not); ``(0, [])`` when the backend keeps none (the tree lives in memory)."""
        return 0, []

    def _save_tree_blocks(
        self, rows: Sequence[TreeBlock], *, replace: bool, generation: int
    ) -> bool | None:
        """Backend hook: store ``rows`` (consecutive blocks) after the stored ones, in one
        transaction; with ``replace``, drop every stored block first. Rows already stored are
        kept (another process wrote the same blocks).

        Returns:
            True when stored; False, storing nothing, when the purge generation is no longer
            ``generation`` or ``rows`` would leave a gap (a purge happened since the rows'
            records were read); None when the store keeps no blocks or is read-only.
        """
        return None

    @abstractmethod
    def _head_seal(self, key: str) -> HeadSeal | None:
        """Backend hook: the stored head seal of a memory, None when it has none, or
        :data:`eventlog.vouch.NO_SEALS` for a database from before seals read without
        migrating (only while no seal was ever written: see :data:`HEADS_SEALED`)."""

    @abstractmethod
    def close(self) -> None:
        """Release connections. Idempotent; later calls on the store raise StoreClosedError."""

    @property
    def async_workers(self) -> int:
        """Worker threads behind the async methods (:mod:`eventlog.aio`): one keeps a single
        writer's calls in order; PostgreSQL uses one per pooled connection."""
        return 1
