"""The ledger over a recorder, written once for every backend: :class:`EventStore`.

It composes three mixins, each in its own module: the rows an append writes (hash chains,
commitments, sealing under the keyring, head seals: :mod:`eventlog.ledger_rows`), stream keys,
erasable ids and the keyring (:mod:`eventlog.ledger_names`), and verification, verified reads
and quarantine (:mod:`eventlog.ledger_verify`). This module keeps what is left of the store:
the state settled at open, erasure, streams, digests and proofs, checkpoints, the witness, the
async twins and ``with``. The backend contract itself is :class:`eventlog.recorder.Recorder`.
Erasure is in :mod:`eventlog.erasure`, and settling the chain key and head seals at open in
:mod:`eventlog.keycheck`."""

from __future__ import annotations

import os
import typing
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Self

from eventlog import erasure
from eventlog.aio import off_loop
from eventlog.errors import ChainIntegrityError
from eventlog.hashing import RECEIPT_KINDS
from eventlog.ids import SYSTEM_PREFIX, MemoryId, StreamKey, memory_id_from_key, memory_key
from eventlog.keycheck import HEADS_SEALED, KEY_CHECK, MIN_KEY_BYTES, valid_key
from eventlog.ledger import InclusionProof, LedgerDigest
from eventlog.ledger import digest as _digest
from eventlog.ledger import prove as _prove
from eventlog.ledger_names import LedgerNames
from eventlog.ledger_rows import LedgerRows
from eventlog.ledger_verify import LedgerVerify
from eventlog.models import (
    ErasureReceipt,
    NewRecord,
    Record,
    StreamHead,
    StreamInfo,
    VerifyReport,
)
from eventlog.names import is_pseudonym
from eventlog.recorder import LedgerTx
from eventlog.validation import shown

if typing.TYPE_CHECKING:
    # Only for the checkpoint methods' annotations: importing them would load cryptography
    # on `import eventlog`.
    from eventlog.checkpoint import CheckpointReport
    from eventlog.consistency import ConsistencyProof
    from eventlog.note import Signer, Verifier
    from eventlog.witness import Witness

# The constants are re-exported: they were defined here, and projections import
# RECEIPT_KINDS from here.
__all__ = ["HEADS_SEALED", "KEY_CHECK", "MIN_KEY_BYTES", "RECEIPT_KINDS", "EventStore", "LedgerTx"]


def _or_key(memory_id: MemoryId | None, key: str) -> MemoryId:
    """``memory_id``, or when its id is gone (erased, or sealed beyond reach) the stream key."""
    return StreamKey(key) if memory_id is None else memory_id


class EventStore(LedgerRows, LedgerVerify, LedgerNames):
    """An append-only log of records, one stream per memory id, hash-chained per stream.

    Every method that takes a ``memory_id`` accepts a str, int, uuid.UUID or a tuple of those
    (see :mod:`eventlog.ids`); any other type raises ``TypeError``. There is no update and no
    delete, except :meth:`purge`, which a retention policy calls explicitly and which leaves a
    tombstone. Stores are thread-safe and usable as context managers (``with`` closes them).

    A store opened with ``chain_key=`` (at least 16 bytes) writes format 3 records, whose chain
    is an HMAC-SHA256 under the key, so write access to the database alone cannot forge history. The
    database keeps a key check value, written by the first keyed open: opening it with another
    key raises :class:`ChainKeyError`, and a store opened without the key reads it but refuses
    to append and reports keyed records as unverifiable.
    """

    # Set at open (eventlog.keycheck.settle_keys); class defaults mean "unkeyed, writable".
    _key: bytes | None = None
    _keyed_since = 0  # records at positions after this must be format 3 (keyed stores)
    _keyed_db = False  # the database has a key check: appends need the key
    _legacy: tuple[int, str] | None = None  # (count, root) of the sealed legacy prefix
    _read_only = False  # opened with read_only=True: nothing is ever written
    _adopt_key = False  # adopt_key=True: key an unkeyed ledger that holds records
    _seals_required = False  # every head has been sealed: a missing seal is an edit
    _adopting = False  # settle_keys' read pass found records a key is about to vouch for

    # ---------------------------------------------------------------- writing

    def erase(
        self, memory_id: MemoryId, *, reason: str, expected_seq: int | None = None
    ) -> ErasureReceipt:
        """Delete the content of every record of a memory and append a receipt, atomically.

        Each record keeps its seq, kind, time, meta, commitment and hashes; only its payload
        and salt become empty (:attr:`Record.erased`). The chain hash covers the commitment,
        not the payload, so :meth:`verify` and ``verify(digest=...)`` of a digest taken before
        keep passing, as do inclusion proofs. Snapshots of the memory are deleted (they hold
        its messages). The ``memory_erased`` receipt (:class:`MemoryErased`) records the seq
        range, count, time and reason and leaves the memory's window empty, so the same id
        keeps working for new messages. Receipts (``memory_erased``, ``memory_purged``) are
        never erased: they hold no message.

        With a keyring, the memory's content key is destroyed in the same transaction, just
        before the commit, holding the lock appends to the memory take: a message another
        writer adds meanwhile lands before (erased with the rest) or after, under a new key.
        A keyring that fails to destroy rolls the erasure back.

        After the commit the backend cleans its files (:meth:`_clean_files`): SQLite
        checkpoints and truncates its WAL (``secure_delete`` zeroed the old bytes). A reader
        that holds an old snapshot open (a backup) keeps that from running: the erase waits
        for it half a second at most (``eventlog.recorders.sqlite_erase.CLEANUP_WAIT``), then
        returns with the receipt saying ``cleanup_pending``, and later erasures do not wait
        again until a cleanup succeeds (:meth:`finish_cleanup`, the next erase or purge,
        ``checkpoint()``, or the next scheduled compaction). PostgreSQL keeps dead row versions
        in its files until ``vacuum(full=True)``, so its receipts always say ``cleanup_pending``.

        Args:
            memory_id: The memory id.
            reason: Why, recorded in the receipt (non-empty).
            expected_seq: Erase only if the memory's head is still this seq (a retention job
                erasing what it judged idle); None erases whatever is there.

        Returns:
            The receipt.

        Raises:
            ValueError: The memory has no records, nothing is left to erase (it was erased
                already and nothing was added since), ``reason`` is empty, or it holds
                format 1 (legacy) records, whose hash covers the payload itself: erasing them
                would break the chain, so nothing is erased (use :meth:`purge` for such a
                memory).
            ConcurrencyError: ``expected_seq`` is given and the head moved; nothing erased.
            ChainKeyError: The database is keyed and this store was opened without the key.
            KeyringError: The memory's content is sealed under a keyring and this store was
                opened without one, or with one that neither holds its key nor records
                destroying it (it could not destroy the key); nothing erased.
            PersistenceError: The database failed; nothing was erased. The memory's content
                key is destroyed inside the erasure's transaction, just before the commit
                (so no append lands sealed under it): a commit that fails after it leaves the
                content unreadable but not blanked, with no receipt; run the erase again.
            StoreClosedError: The store is closed.
        """
        return erasure.erase(self, memory_id, reason=reason, expected_seq=expected_seq)

    def erase_subject(
        self, prefix: tuple[object, ...], *, reason: str, batch: int = 500
    ) -> list[ErasureReceipt]:
        """:meth:`erase` every memory whose tuple id starts with ``prefix`` (e.g. ``(user_id,)``
        for every session of a user). Memories with nothing left to erase are skipped, so a
        rerun after a crash finishes the job without a second receipt for any memory.

        Memories are erased ``batch`` to a transaction (each memory is untouched or fully
        erased with its receipt, whatever happens), and the files are cleaned once at the end.
        With a keyring, the content keys go in the last batch's transaction, just before its
        commit (as in :meth:`erase`): under a one-element prefix every key of the subject,
        under a longer one each erased memory's own key (content sealed under the
        subject's key, from before memories had keys of their own, goes only with the former).

        Args:
            prefix: A non-empty tuple; ids ``(user_id, session_id)`` match ``(user_id,)``.
            reason: Why, recorded in every receipt (non-empty).
            batch: Memories per transaction (>= 1).

        Returns:
            The receipts, in stream key order (``cleanup_pending`` as for :meth:`erase`).

        Raises:
            ValueError: ``prefix`` or ``reason`` is empty, ``batch`` < 1, a matching
                memory holds format 1 records (memories of earlier batches stay erased), or
                (erasable ids) a memory holding records after its last erasure has lost its
                ``names`` row (nothing erased).
            TypeError: ``prefix`` is not a tuple, or holds what no memory id holds (a bool,
                a float, ...); nothing erased.
            KeyringError: A matching memory's content is sealed and this store's keyring
                (none, or another) cannot destroy its key, or (erasable ids) some memory's
                id is sealed under a key this store's keyring cannot read; nothing erased.
        """
        erasure.check_reason("erase_subject", reason)
        if isinstance(prefix, tuple) and prefix:
            try:
                # Matching compares with ==: (True,) and (1.0,) matched the ids of user 1,
                # and a key destruction that then failed on the prefix left the earlier
                # batches erased with their keys alive.
                memory_key(prefix)
            except (TypeError, ValueError) as e:
                msg = f"erase_subject: prefix {prefix!r} is not the start of a memory id ({e})"
                raise type(e)(msg) from e
            self._refuse_unreadable_names("erase_subject", prefix)
        return erasure.erase_subject(self, prefix, reason=reason, batch=batch)

    # ---------------------------------------------------------------- open modes

    def _open_modes(
        self,
        key: bytes | None,
        keyring: object,
        *,
        read_only: bool,
        adopt_key: bool,
        erasable_ids: bool = False,
    ) -> None:
        """Backends call this first in ``__init__`` with their ``chain_key=``, ``keyring=``,
        ``read_only=``, ``adopt_key=`` and ``erasable_ids=`` arguments (validated here, once
        for all)."""
        self._key = valid_key(key)
        self._use_keyring(keyring)
        self._read_only = bool(read_only)
        self._adopt_key = bool(adopt_key)
        if not isinstance(erasable_ids, bool):
            msg = f"erasable_ids must be True or False, not {shown(erasable_ids)}"
            raise TypeError(msg)
        self._want_erasable_ids = erasable_ids

    # ---------------------------------------------------------------- appending
    # The row builder backends call inside their write transaction is eventlog.ledger_rows.

    def _revealed(self, records: list[Record], items: Sequence[NewRecord]) -> list[Record]:
        """Appended ``records`` with the plaintext of ``items`` where they were sealed: the
        writer knows it, so it is not decrypted again."""
        if self._witness is not None:  # every backend's append ends here
            self._witness.appended(self, self._witness_where, records[-1] if records else None)
        if self._keyring is None:
            return records
        # Built with tuple.__new__ rather than _replace: this is on every encrypted append.
        return [
            tuple.__new__(Record, (*r[:6], item.payload, *r[7:13], r.payload))
            if r.payload is not item.payload
            else r
            for r, item in zip(records, items, strict=True)
        ]

    def append_or_rebuild(
        self,
        memory_id: MemoryId,
        items: Sequence[NewRecord],
        *,
        expected_seq: int,
        expected_hash: str,
        rebuild: Callable[[list[Record]], Sequence[NewRecord] | None],
    ) -> list[Record]:
        """:meth:`append`, where a backend can settle a lost race inside the append: if
        others appended since ``expected_seq``, ``rebuild`` gets their records (vouched for as
        :meth:`read_verified` vouches, the first one chained to ``expected_hash``) and returns
        what to append after them instead, or None to give up with the
        :class:`~eventlog.errors.ConcurrencyError` :meth:`append` raises.

        A writer of a contended memory thus gets the other writers' records with the news
        that it lost, folds them and sends again, instead of reading them itself and trying
        again. ``rebuild`` may be called more than once (once per lost race), never while the
        store holds a connection or a server lock; it may read, but not append to the same
        memory through the same store object (whose threads take turns on each memory). This
        default is :meth:`append` (the caller catches up itself);
        :class:`~eventlog.postgres.PostgresEventStore` settles the race in the append.
        """
        return self.append(memory_id, items, expected_seq=expected_seq, expected_hash=expected_hash)

    # ---------------------------------------------------------------- reading

    def streams(
        self,
        *,
        include_system: bool = False,
        on_damage: Callable[[ChainIntegrityError], object] | None = None,
    ) -> list[StreamInfo]:
        """List memory ids with their event count and first and last activity.

        Args:
            include_system: Also list chatledger's own ``~sys:`` streams (compaction runs).
            on_damage: Called with the error of each stream whose rows no store writes (a
                time or key edited by hand), which is then left out of the list; None
                (default): the first such stream raises it. For jobs that go over every
                memory (compaction): one damaged memory must not stop the work on the others.

        Returns:
            One entry per stream that has records, ordered by stream key.

        Raises:
            ChainIntegrityError: A stream's rows are no store's (only without ``on_damage``).
        """
        from eventlog.models import parse_time
        from eventlog.vouch import REMEDY

        def refuse(key: object, seq: object, what: str) -> ChainIntegrityError:
            # A row edited by hand: named with the remedy, never a bare ValueError. Not
            # listed as anything else either: retention decides by these times.
            return ChainIntegrityError(
                str(key), seq if type(seq) is int else 0, f"streams: {what}; {REMEDY}"
            )

        def checked(row: tuple[Any, ...]) -> tuple[Any, ...]:
            key, _count, last_seq, first, last = row
            if type(key) is not str:
                raise refuse(key, last_seq, f"its stream key is {shown(key)}, not text")
            try:
                times = parse_time(first), parse_time(last)
                if not is_pseudonym(key):
                    memory_id_from_key(key)
            except (ValueError, TypeError) as e:
                raise refuse(key, last_seq, f"a row no store writes ({e})") from None
            return (*row[:3], *times)

        rows = []
        for row in sorted(self._stream_rows(), key=lambda r: (type(r[0]) is not str, str(r[0]))):
            if include_system or type(row[0]) is not str or not row[0].startswith(SYSTEM_PREFIX):
                try:
                    rows.append(checked(row))
                except ChainIntegrityError as e:
                    if on_damage is None:
                        raise
                    on_damage(e)
        stored = self._name_rows() if self._names is not None else {}
        named = self._named((row[0] for row in rows), stored)
        return [
            StreamInfo(
                memory_id=_or_key(named[key], key),
                stream_id=key,
                event_count=count,
                last_seq=last_seq,
                first_recorded_at=first,
                last_recorded_at=last,
                # A plain ledger has no names: a pseudonym imported into it (from a ledger
                # with erasable ids) is listed by its key, its id unknown here, not erased.
                id_erased=self._names is not None and is_pseudonym(key) and key not in stored,
            )
            for key, count, last_seq, first, last in rows
        ]

    # ---------------------------------------------------------------- lifecycle

    def digest(self) -> LedgerDigest:
        """The size and Merkle root (RFC 9162 shape) of every record in the global order.

        Keep it outside the database; ``verify(digest=d)`` later says whether the log is still
        an append-only extension of it. Incremental: after the first call on this object, only
        the records appended since are read.

        Raises:
            StoreClosedError: The store is closed.
            PersistenceError: The database failed.
        """
        return _digest(self)

    def prove(
        self,
        memory_id: MemoryId,
        seq: int,
        *,
        digest: LedgerDigest | None = None,
        disclose: bool = True,
    ) -> InclusionProof:
        """An inclusion proof of one record, checkable with ``verify_inclusion(proof, d)`` and
        no database.

        Args:
            memory_id: The memory id.
            seq: The record's seq.
            digest: Prove against this digest's size (default: the log's current size).
            disclose: False carries the salted commitment instead of the payload and its
                salt, so the holder cannot read or confirm the content (see
                :func:`eventlog.ledger.prove`).

        Raises:
            LookupError: There is no such record.
            ValueError: ``digest`` is not of this log, or was taken before the record; or
                ``disclose`` is False for a format 1 record.
            ChainIntegrityError: The stored record does not verify; it is not proved.
        """
        return _prove(self, memory_id, seq, digest=digest, disclose=disclose)

    # ------------------------------------------------------------------ async

    async def aappend(
        self,
        memory_id: MemoryId,
        items: Sequence[NewRecord],
        *,
        expected_seq: int | None = None,
        expected_hash: str | None = None,
    ) -> list[Record]:
        """:meth:`append`, awaited without blocking the event loop."""
        return await off_loop(
            self,
            self.append,
            memory_id,
            items,
            expected_seq=expected_seq,
            expected_hash=expected_hash,
        )

    async def aread(
        self,
        memory_id: MemoryId,
        *,
        gt: int | None = None,
        lte: int | None = None,
        limit: int | None = None,
        desc: bool = False,
    ) -> list[Record]:
        """:meth:`read`, awaited without blocking the event loop."""
        return await off_loop(self, self.read, memory_id, gt=gt, lte=lte, limit=limit, desc=desc)

    async def aread_all(self, *, gt: int = 0, limit: int | None = None) -> list[Record]:
        """:meth:`read_all`, awaited without blocking the event loop."""
        return await off_loop(self, self.read_all, gt=gt, limit=limit)

    async def ahead(self, memory_id: MemoryId) -> StreamHead | None:
        """:meth:`head`, awaited without blocking the event loop."""
        return await off_loop(self, self.head, memory_id)

    async def averify(self, memory_id: MemoryId | None = None) -> VerifyReport:
        """:meth:`verify` of one memory or all, awaited without blocking the event loop."""
        return await off_loop(self, self.verify, memory_id)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---------------------------------------------------------------- checkpoints
    # Thin delegations to eventlog.consistency and eventlog.checkpoint, kept last in the class.

    def prove_consistency(
        self, old: LedgerDigest, *, digest: LedgerDigest | None = None
    ) -> ConsistencyProof:
        """The RFC 9162 proof that the ledger now (or at ``digest``) extends ``old``, checkable
        with ``verify_consistency(old, new, proof)`` and no database.

        Raises:
            ValueError: The ledger is behind ``old`` or does not extend it.
        """
        from eventlog.consistency import prove_consistency

        return prove_consistency(self, old, digest=digest)

    def sign_checkpoint(self, origin: str, signing_key: str | Signer) -> str:
        """A C2SP checkpoint (origin, size, root) of the ledger now, signed with
        ``signing_key`` (``PRIVATE+KEY+...`` text or a :class:`~eventlog.note.Signer`).

        Raises:
            ValueError: The origin is not one line, or the key is not a signer key.
        """
        from eventlog.checkpoint import sign_checkpoint

        return sign_checkpoint(self, origin, signing_key)

    def verify_checkpoint(
        self, note: str | bytes, verifier_key: str | Verifier, *, origin: str | None = None
    ) -> CheckpointReport:
        """Check a signed checkpoint and that the ledger is its tree or extends it.

        Returns:
            A report with ``.ok`` and ``.reason`` (``.behind`` when the ledger is smaller
            than the checkpoint: rolled back?).

        Raises:
            ValueError: The verifier key is malformed.
        """
        from eventlog.checkpoint import verify_checkpoint

        return verify_checkpoint(self, note, verifier_key, origin=origin)

    # ---------------------------------------------------------------- witness
    # Hooks for eventlog.witness: backends call _attach_witness last in __init__ and
    # _close_witness first in close(); _revealed (the end of every append) ticks it.

    _witness: Witness | None = None
    _witness_where = ""

    def _attach_witness(self, witness: str | os.PathLike[str] | Witness | None, where: str) -> None:
        """Check the ledger against ``witness`` (creating its file on a writable open) and keep
        it for appends and close.

        Raises:
            RollbackError: The ledger is behind the witness or diverges from it.
            PersistenceError: The witness file cannot be read or written.
        """
        if witness is None:
            return
        from eventlog.witness import as_witness

        witness = as_witness(witness)
        witness.check(self, where, write=not self._read_only)
        self._witness, self._witness_where = witness, where

    def _close_witness(self) -> None:
        """Move the witness to the ledger as it is at close (a read-only store never writes it)."""
        witness, self._witness = self._witness, None
        if witness is not None and not self._read_only:
            witness.move(self, "close", self._witness_where)
