"""The ledger over a recorder: hash chains, commitments, head seals, the chain key, the
keyring, erasable ids, verification and digests, written once for every backend. The backend
contract itself is :class:`eventlog.recorder.Recorder`. Erasure is in :mod:`eventlog.erasure`,
and settling the chain key and head seals at open in :mod:`eventlog.keycheck`."""

from __future__ import annotations

import os
import typing
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import datetime
from hashlib import sha256
from types import TracebackType
from typing import Any, Self, overload

from eventlog import clock, erasure, validation
from eventlog.aio import off_loop
from eventlog.errors import ChainKeyError, ConcurrencyError, ReadOnlyError
from eventlog.hashing import (
    FORMATS,
    GENESIS,
    RECEIPT_KINDS,
    chain_hash,
    chain_hash_v2,
    check_stream,
    commit,
    head_mac,
    new_salt,
    stored_record_problem,
    verifies,
)
from eventlog.ids import (
    PSEUDONYM_PREFIX,
    SYSTEM_PREFIX,
    MemoryId,
    StreamKey,
    memory_id_from_key,
    memory_key,
)
from eventlog.keycheck import HEADS_SEALED, KEY_CHECK, MIN_KEY_BYTES, legacy_seal, valid_key
from eventlog.keyring import (
    Keyring,
    KeyUnavailableError,
    SealBrokenError,
    is_sealed,
    open_sealed,
    seal,
    subject_of,
)
from eventlog.ledger import (
    DigestReport,
    InclusionProof,
    LedgerDigest,
    verify_digest,
)
from eventlog.ledger import digest as _digest
from eventlog.ledger import prove as _prove
from eventlog.models import (
    ErasureReceipt,
    NewRecord,
    Record,
    RecordQuarantined,
    StreamHead,
    StreamInfo,
    VerifyReport,
    format_time,
)
from eventlog.names import IdKeyring, is_pseudonym
from eventlog.recorder import LedgerTx, Recorder

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

_VERIFY_PAGE = 5_000
_Row = tuple[str, int, str, str, int, str, str, str, str, str, str, int]
_BELOW_EVERY_SEQ = -(1 << 63)  # the smallest 64-bit integer: "seq > it" bounds nothing


def _aad(key: str, seq: int, kind: str) -> bytes:
    """What a sealed payload is bound to: a ciphertext copied into another row fails to open."""
    return f"{len(key)}:{key}\x1f{seq}\x1f{kind}".encode()


def _or_key(memory_id: MemoryId | None, key: str) -> MemoryId:
    """``memory_id``, or when its id is gone (erased, or sealed beyond reach) the stream key."""
    return StreamKey(key) if memory_id is None else memory_id


class EventStore(Recorder):
    """An append-only log of records, one stream per memory id, hash-chained per stream.

    Every method that takes a ``memory_id`` accepts a str, int, uuid.UUID or a tuple of those
    (see :mod:`eventlog.ids`); any other type raises ``TypeError``. There is no update and no
    delete, except :meth:`purge`, which a retention policy calls explicitly and which leaves a
    tombstone. Stores are thread-safe and usable as context managers (``with`` closes them).

    A store opened with ``key=`` (at least 16 bytes) writes format 3 records, whose chain is an
    HMAC-SHA256 under the key, so write access to the database alone cannot forge history. The
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

        After the commit the backend cleans its files (:meth:`_clean_files`): SQLite
        checkpoints and truncates its WAL (``secure_delete`` zeroed the old bytes). A reader
        that holds an old snapshot open (a backup) keeps that from running: the erase waits
        for it half a second at most (``eventlog.sqlite_erase.CLEANUP_WAIT``), then returns with
        the receipt saying ``cleanup_pending``, and later erasures do not wait again until a
        cleanup succeeds (:meth:`finish_cleanup`, the next erase or purge, ``checkpoint()``,
        or the next scheduled compaction). PostgreSQL keeps dead row versions in its files
        until ``vacuum(full=True)``, so its receipts always say ``cleanup_pending``.

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
            PersistenceError: The database failed; nothing was erased.
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

        Args:
            prefix: A non-empty tuple; ids ``(user_id, session_id)`` match ``(user_id,)``.
            reason: Why, recorded in every receipt (non-empty).
            batch: Memories per transaction (>= 1).

        Returns:
            The receipts, in stream key order (``cleanup_pending`` as for :meth:`erase`).

        Raises:
            ValueError: ``prefix`` or ``reason`` is empty, ``batch`` < 1, or a matching
                memory holds format 1 records (memories of earlier batches stay erased).
            TypeError: ``prefix`` is not a tuple.
        """
        return erasure.erase_subject(self, prefix, reason=reason, batch=batch)

    # ---------------------------------------------------------------- encryption at rest

    _keyring: Keyring | None = None

    def _open_modes(
        self,
        key: bytes | None,
        keyring: object,
        *,
        read_only: bool,
        adopt_key: bool,
        erasable_ids: bool = False,
    ) -> None:
        """Backends call this first in ``__init__`` with their ``key=``, ``keyring=``,
        ``read_only=``, ``adopt_key=`` and ``erasable_ids=`` arguments (validated here, once
        for all)."""
        self._key = valid_key(key)
        self._use_keyring(keyring)
        self._read_only = bool(read_only)
        self._adopt_key = bool(adopt_key)
        if not isinstance(erasable_ids, bool):
            msg = f"erasable_ids must be True or False, not {erasable_ids!r}"
            raise TypeError(msg)
        self._want_erasable_ids = erasable_ids

    # ---------------------------------------------------------------- erasable ids

    _names: IdKeyring | None = None  # set at open for a ledger created with erasable_ids
    _want_erasable_ids = False

    @property
    def erasable_ids(self) -> bool:
        """Whether memories are stored under keyed pseudonyms, their ids in erasable rows
        (see :mod:`eventlog.names`): set when the ledger was created, for its whole life."""
        return self._names is not None

    def stream_key(self, memory_id: MemoryId) -> StreamKey:
        """The stored key of ``memory_id``'s stream, as a :class:`~eventlog.ids.StreamKey`
        every method takes in its place (encoding an id costs microseconds; objects that
        read one memory many times encode it once). Under erasable ids it is the pseudonym.

        Raises:
            TypeError: The id is not a memory id.
            ChainKeyError: Erasable ids keyed under a keyring or chain key this store was
                opened without.
        """
        return StreamKey(self._stream_key(memory_id, "find memory"))

    def _stream_key(self, memory_id: MemoryId, operation: str) -> str:
        """Where ``memory_id``'s records are stored: its :func:`~eventlog.ids.memory_key`,
        or its pseudonym on a ledger with erasable ids."""
        names = self._names
        if names is None:
            return memory_key(memory_id)
        if isinstance(memory_id, StreamKey):
            # A stored key: a pseudonym or a system key as is; a clear key (the CLI's, or one
            # an older object encoded) is the id, so it finds the same stream.
            clear = str(memory_id)
            if clear.startswith((PSEUDONYM_PREFIX, SYSTEM_PREFIX)):
                return clear
        else:
            clear = memory_key(memory_id)
        return names.pseudonym(clear, operation)

    def _name_row(self, key: str) -> tuple[str, str] | None:
        """The ``names`` row an append to ``key`` must make sure of (backends insert it, if
        absent, in the append's transaction), or None for a key that is not a pseudonym."""
        names = self._names
        if names is None or not is_pseudonym(key):
            return None
        row = self._name_rows_made.get(key)
        if row is None:
            clear = names.clear_key(key)
            if clear is None:
                msg = (
                    f"append to {key}: a pseudonym given as a stream key; append by the memory "
                    "id, so its name can be kept"
                )
                raise ValueError(msg)
            row = (key, names.stored_name(key, clear))
            self._name_rows_made[key] = row
        return row

    def _named(
        self, keys: Iterable[str], rows: dict[str, str] | None = None
    ) -> dict[str, MemoryId | None]:
        """The memory id of each stream key: the id itself, or for a pseudonym the id its
        ``names`` row holds (None when the row is gone - erased - or cannot be read here).
        ``rows``: the ``names`` rows when the caller has read them already."""
        if rows is None:
            rows = self._name_rows() if self._names is not None else {}
        out: dict[str, MemoryId | None] = {}
        for key in keys:
            if self._names is not None and is_pseudonym(key):
                stored = rows.get(key)
                out[key] = None if stored is None else self._names.read_name(key, stored)
            else:
                out[key] = memory_id_from_key(key)
        return out

    def _use_keyring(self, keyring: object) -> None:
        """Backends call this from ``__init__`` with their ``keyring=`` argument."""
        if keyring is not None and not isinstance(keyring, Keyring):
            msg = (
                f"keyring must be an eventlog.keyring.Keyring (e.g. FileKeyring(path)) or None, "
                f"not {type(keyring).__name__}"
            )
            raise TypeError(msg)
        self._keyring = keyring
        self._subjects: dict[str, str] = {}
        self._name_rows_made: dict[str, tuple[str, str]] = {}

    def _subject(self, key: str) -> str:
        """The keyring subject of a stream key (cached: parsing a key costs microseconds)."""
        cache = self._subjects
        subject = cache.get(key)
        if subject is None:
            if len(cache) > 100_000:  # a bound, not an LRU: refilling is cheap
                cache.clear()
            # A pseudonym does not say whose memory it is; its id was noted by _stream_key.
            clear = (None if self._names is None else self._names.clear_key(key)) or key
            subject = cache[key] = subject_of(memory_id_from_key(clear))
        return subject

    def _opened(self, records: list[Record]) -> list[Record]:
        """``records`` with sealed payloads decrypted (``Record.sealed`` keeps the stored
        text). One that cannot be opened stays sealed: verify, digests and exports need no
        key, and decoding it raises :class:`~eventlog.keyring.KeyUnavailableError`."""
        ring = self._keyring
        if ring is None:
            return records
        out = []
        for record in records:
            opened = record
            if is_sealed(record.payload):
                where = f"read of {record.stream_id} seq {record.seq}"
                aad = _aad(record.stream_id, record.seq, record.kind)
                try:
                    plain = open_sealed(ring, aad, record.payload, where=where)
                except (KeyUnavailableError, SealBrokenError):
                    pass  # the commitment check reports an altered row; decode a missing key
                else:
                    opened = record._replace(payload=plain, sealed=record.payload)
            out.append(opened)
        return out

    def _revealed(self, records: list[Record], items: Sequence[NewRecord]) -> list[Record]:
        """Appended ``records`` with the plaintext of ``items`` where they were sealed: the
        writer knows it, so it is not decrypted again."""
        if self._witness is not None:  # every backend's append ends here
            self._witness.appended(self, self._witness_where)
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

    def streams(self, *, include_system: bool = False) -> list[StreamInfo]:
        """List memory ids with their event count and first and last activity.

        Args:
            include_system: Also list chatledger's own ``~sys:`` streams (compaction runs).

        Returns:
            One entry per stream that has records, ordered by stream key.
        """
        from eventlog.models import parse_time

        rows = [
            row
            for row in sorted(self._stream_rows())
            if include_system or not row[0].startswith(SYSTEM_PREFIX)
        ]
        stored = self._name_rows() if self._names is not None else {}
        named = self._named((row[0] for row in rows), stored)
        return [
            StreamInfo(
                memory_id=_or_key(named[key], key),
                stream_id=key,
                event_count=count,
                last_seq=last_seq,
                first_recorded_at=parse_time(first),
                last_recorded_at=parse_time(last),
                id_erased=is_pseudonym(key) and key not in stored,
            )
            for key, count, last_seq, first, last in rows
        ]

    def check(self, record: Record) -> str | None:
        """Check one record on its own: its chain hash (keyed when the store has a key) and its
        payload commitment. Cheap (one SHA-256 or HMAC, plus one for the commitment), for
        readers that must not serve a record that does not verify. Links between records are
        :meth:`verify`'s job.

        Args:
            record: A record read from this store.

        Returns:
            None when the record verifies, else the reason (e.g. ``KEYED_CHAIN`` for a format 3
            record read without the key).
        """
        key, since = self._key, self._keyed_since
        # verifies() first: the common record in one frame, 3x cheaper than the full check,
        # and never passing what the full check refuses (property-tested); the full check
        # alone gives reasons, and handles every other record.
        try:
            if verifies(record, key, since):
                return None
            return stored_record_problem(record, key, since)
        except (TypeError, AttributeError) as e:
            # A column holding what no store writes (a BLOB, an integer or NULL put there by
            # hand): a damaged record like any other, refused by name - never a crash that
            # a caller could take for something other than damage.
            return f"a column holds a value of a type no store writes ({type(e).__name__}: {e})"

    @overload
    def verify(self, memory_id: MemoryId | None = None) -> VerifyReport: ...

    @overload
    def verify(self, *, digest: LedgerDigest) -> DigestReport: ...

    def verify(
        self, memory_id: MemoryId | None = None, *, digest: LedgerDigest | None = None
    ) -> VerifyReport | DigestReport:
        """Check the hash chain of one memory id, or of every stream, without stopping early.

        With ``digest``, check instead that the whole log is an append-only extension of a
        digest taken earlier (:meth:`digest`): every record re-read and re-hashed, the Merkle
        root of the first ``digest.size`` records recomputed (see :mod:`eventlog.ledger`).

        Every record is read and counted; every stream that fails is listed with its first bad
        seq and the reason, and every malformed row (text no store writes, such as a
        non-canonical stream key or time, or a hash that is not hex) is listed as well. Bad
        data never raises.

        Args:
            memory_id: The memory id to check; None checks every stream of the store.
            digest: A digest of this store taken earlier (not with ``memory_id``).

        Returns:
            A report with ``.ok``, the first bad seq per failing stream and malformed rows.

        Raises:
            StoreClosedError: The store is closed.
            PersistenceError: The database failed.
            ValueError: Both ``memory_id`` and ``digest`` were given.
        """
        if digest is not None:
            if memory_id is not None:
                msg = "verify(digest=...) checks the whole log; leave out the memory id"
                raise ValueError(msg)
            return verify_digest(self, digest)
        return self._verify_streams(memory_id)

    def _verify_streams(self, memory_id: MemoryId | None) -> VerifyReport:
        from eventlog.vouch import erased_bound, head_problem, restored

        keys = (
            [self._stream_key(memory_id, "verify")]
            if memory_id is not None
            else sorted(row[0] for row in self._stream_rows())
        )
        failures: dict[str, tuple[int, str]] = {}
        bad_rows: list[tuple[str, int, str]] = []
        count = 0
        for key in keys:
            seal = self._head_seal(key)
            erased = erased_bound(seal)

            def problem(record: Record, erased: int | None = erased) -> str | None:
                return self._safe_check(record) or restored(record, erased)

            counted = _Counter(self._pages(key))
            failure, odd = check_stream(counted, problem, full=True)
            count += counted.n
            bad_rows.extend((key, seq, reason) for seq, reason in odd)
            if failure is None:
                last = self.read(StreamKey(key), desc=True, limit=1)
                failure = head_problem(self, key, last[0] if last else None, seal)
            if failure is not None:
                failures[key] = failure
        problems = self._ledger_problems() if memory_id is None else ()
        return VerifyReport(
            checked=tuple(keys),
            records=count,
            failures=failures,
            malformed=tuple(bad_rows),
            keyed_since=self._keyed_since if self._keyed_db else None,
            legacy_records=0 if self._legacy is None else self._legacy[0],
            ledger_problems=problems,
        )

    def _ledger_problems(self) -> tuple[str, ...]:
        """What is wrong with the ledger as a whole: in a keyed ledger, unkeyed records that are
        not exactly the sealed legacy prefix."""
        if self._key is None or self._legacy is None:
            return ()
        hashes: list[str] = []
        after = -(1 << 62)  # below every position: rows moved to 0 or below count too
        while True:
            page = self.read_all(gt=after, limit=_VERIFY_PAGE)
            hashes.extend(r.hash for r in page if r.format != 3)
            if len(page) < _VERIFY_PAGE:
                break
            after = page[-1].position
        count, root = legacy_seal(hashes)
        want_count, want_root = self._legacy
        if (count, root) == (want_count, want_root):
            return ()
        return (
            f"the unkeyed records are not the sealed legacy prefix: {count} found, "
            f"{want_count} sealed when the key was adopted"
            + ("" if count != want_count else " (same count, different records)")
            + "; unkeyed records were added, changed or removed by someone without the key",
        )

    def read_verified(
        self,
        memory_id: MemoryId,
        *,
        gt: int | None = None,
        lte: int | None = None,
        limit: int | None = None,
        desc: bool = False,
    ) -> list[Record]:
        """:meth:`read`, refused unless the chain vouches for every record returned: each
        record's own hash and commitment, the links and seqs inside the range, the memory's
        sealed head and its first record, and no content put back after an erasure (see
        :mod:`eventlog.vouch`). Cost: the records plus two or three indexed lookups, whatever
        the history's length.

        Raises:
            ChainIntegrityError: Something does not verify; it names memory, seq and remedy.
        """
        from eventlog.vouch import vouch

        key = self._stream_key(memory_id, "read")
        ends = self._ends(key)  # first: every seq up to its seal exists when the read runs
        found = self.read(StreamKey(key), gt=gt, lte=lte, limit=limit, desc=desc)
        vouch(self, key, found, ends, gt=gt, lte=lte, limit=limit, desc=desc)
        return found

    def read_verified_rows(
        self, memory_id: MemoryId, *, gt: int | None = None, lte: int | None = None
    ) -> list[tuple[Any, ...]]:
        """:meth:`read_verified` of an ascending range, as bare rows shaped as
        :data:`eventlog.hashing.RANGE_ROW_FIELDS` (``seq``, ..., ``payload``, ``meta``,
        ``prev_hash``, ``hash``, ...) instead of records: the same checks, refusing the same
        rows with the same errors, at about half the cost per row (no record built, the
        common record checked in one loop). ``payload`` is what a record's would be: opened
        when the keyring can open it, ``""`` once erased. For reads of whole histories (a
        framework session's items).

        Raises:
            ChainIntegrityError: Something does not verify; it names memory, seq and remedy.
        """
        from eventlog.vouch import vouch_rows

        validation.check_range("read", gt, lte, None)
        key = self._stream_key(memory_id, "read")
        ends = self._ends(key)  # first, as read_verified: every seq up to its seal exists
        # No lower bound for gt=None, as read() has none: a row forged at seq 0 or below is
        # read, and refused as out of place, as read_verified refuses it.
        rows = self._range_rows(key, _BELOW_EVERY_SEQ if gt is None else gt, lte)
        if not vouch_rows(self, key, rows, ends, gt=gt, lte=lte):
            # A record the loop leaves to the full path: it refuses with the reason, or
            # accepts (erased content, format 1, a keyed ledger's unkeyed records).
            return [r.range_row(r.payload) for r in self.read_verified(memory_id, gt=gt, lte=lte)]
        if self._keyring is None:
            return list(rows)
        opened = self._opened([Record.from_range_row(key, row) for row in rows])
        return [r.range_row(r.payload) for r in opened]

    def quarantine(self, memory_id: MemoryId, seq: int, *, reason: str) -> Record:
        """Acknowledge that record ``seq`` of a memory is damaged, so reads leave it out
        instead of refusing the memory (see :mod:`eventlog.quarantine`). ``verify()`` keeps
        reporting the break; the acknowledgement is a record of the ``~sys:quarantine``
        stream, keyed when the ledger is.

        Args:
            memory_id: The memory id.
            seq: The damaged record, as ``verify()`` or the read error names it.
            reason: Why, recorded with the acknowledgement.

        Returns:
            The acknowledgement record (the existing one if ``seq`` was acknowledged before).

        Raises:
            ValueError: The record is intact (nothing to quarantine), the seq is past the head,
                or the reason is empty.
            ChainKeyError: The ledger is keyed and this store was opened without the key.
            ReadOnlyError: The store was opened read-only.
        """
        from eventlog.quarantine import quarantine

        return quarantine(self, memory_id, seq, reason=reason)

    def quarantined(self, memory_id: MemoryId) -> dict[int, RecordQuarantined]:
        """The acknowledged damaged records of a memory, by seq (see :meth:`quarantine`).

        Raises:
            ChainIntegrityError: The acknowledgements themselves do not verify.
        """
        from eventlog.quarantine import quarantined

        return quarantined(self, memory_id)

    def read_verified_excluding(
        self,
        memory_id: MemoryId,
        skip: Collection[int],
        *,
        gt: int | None = None,
        lte: int | None = None,
        limit: int | None = None,
        desc: bool = False,
    ) -> list[Record]:
        """:meth:`read_verified` with the records ``skip`` names (acknowledged damage, see
        :meth:`quarantined`) left out: not checked, not returned; the rest vouched for as usual.

        Raises:
            ChainIntegrityError: Something else does not verify.
        """
        from eventlog.quarantine import read_excluding

        return read_excluding(self, memory_id, skip, gt=gt, lte=lte, limit=limit, desc=desc)

    def _safe_check(self, record: Record) -> str | None:
        # verify() never raises for bad data; malformed() has already vetted each row, so
        # this only guards against a kind of bad text nobody foresaw.
        try:
            return self.check(record)
        except (ValueError, TypeError, AttributeError) as e:
            return f"malformed record: {e}"

    def _pages(self, key: str) -> Iterator[Record]:
        from eventlog.ids import StreamKey

        after: int | None = None  # no lower bound: a row forged at seq 0 or below is seen
        while True:
            page = self.read(StreamKey(key), gt=after, limit=_VERIFY_PAGE)
            yield from page
            if len(page) < _VERIFY_PAGE:
                return
            after = page[-1].seq

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

    # ---------------------------------------------------------------- shared by backends

    @staticmethod
    def _now() -> datetime:
        # Filtered: one reading from a clock that jumped ahead would otherwise pin every later
        # time of the memory it stamps (times never go backwards). See eventlog.clock.
        return clock.CLOCK.now()

    @staticmethod
    def _check_items(items: Sequence[NewRecord], memory_id: object, key: str) -> None:
        """Refuse, before anything is written, what export or import would not take back:
        the one definition of a valid record (:mod:`eventlog.validation`), shared with the
        import gate.

        Raises:
            TypeError: An item is not a :class:`NewRecord`.
            ValueError: The key or an item is not valid (see :mod:`eventlog.validation`).
        """
        problem = validation.key_problem(key)
        if problem is None and isinstance(memory_id, StreamKey) and key.startswith("~"):
            # A stored key used as is must be one memory_key writes, or it aliases another.
            try:
                canonical = memory_key(memory_id_from_key(key))
            except ValueError as e:
                canonical = str(e)
            if canonical != key:
                problem = f"is not a key chatledger writes (its id is stored as {canonical!r:.80})"
        if problem is not None:
            msg = f"append to memory {validation.shown(key)}: the memory id {problem}"
            raise ValueError(msg)
        for i, item in enumerate(items):
            if not isinstance(item, NewRecord):
                msg = (
                    f"append item {i} is a {type(item).__name__}, not a NewRecord; "
                    "build records with eventlog.serialization (nothing was written)"
                )
                raise TypeError(msg)
            problem = validation.item_problem(key, item)
            if problem is not None:
                msg = (
                    f"append to {validation.shown(key)}: item {i} ({validation.shown(item.kind)}) "
                    f"{problem}; nothing was written"
                )
                raise ValueError(msg)

    def _build(
        self,
        key: str,
        head: StreamHead | None,
        items: Sequence[NewRecord],
        now: datetime,
    ) -> list[_Row]:
        """Chain ``items`` onto ``head``: rows ``(key, seq, time, kind, version, payload,
        meta, prev_hash, hash, salt, commitment, format)`` ready to insert. Pure but for the
        random salts; backends call it inside their write transaction, after reading the head
        under the same lock."""
        seq, prev, floor = (
            (0, GENESIS, "") if head is None else (head.seq, head.hash, head.recorded_at_text)
        )
        now_text = format_time(now)
        chain_key = self._key
        own_format = 2 if chain_key is None else 3
        ring = self._keyring
        # System streams and receipts hold no person's message: they stay readable without keys.
        subject = None if ring is None or key.startswith(SYSTEM_PREFIX) else self._subject(key)
        rows = []
        for item in items:
            seq += 1
            if item.recorded_at is None:
                # Clamp to the head's time: a clock that steps back must not make time order
                # disagree with seq order, which as_of(at=...) relies on.
                when = now_text if now_text >= floor else floor
            else:
                when = format_time(item.recorded_at)
                if when < floor:
                    msg = (
                        f"append to {key} at seq {seq}: recorded_at {when} is earlier than the "
                        f"previous record's {floor}; keep records in time order"
                    )
                    raise ValueError(msg)
            payload = item.payload
            if item.format is None and item.salt is None and item.commitment is None:
                if subject is not None and ring is not None and item.kind not in RECEIPT_KINDS:
                    # The commitment (and so the chain) covers the ciphertext: verify, digests
                    # and proofs need no key, and destroying the key erases every copy.
                    payload = seal(ring, subject, _aad(key, seq, item.kind), payload, memory=key)
                # The hot path, spelled out: hashing.commit/new_salt cost a call each.
                raw = os.urandom(16)
                fmt, salt = own_format, raw.hex()
                commitment = sha256(raw + payload.encode()).hexdigest()
            else:
                # An import keeps the payload as exported (sealed or not): its commitment
                # covers those exact bytes.
                fmt, salt, commitment = self._imported(key, seq, item, own_format)
            if fmt == 1:
                digest = chain_hash(
                    prev, key, seq, item.kind, item.schema_version, when, item.payload, item.meta
                )
            else:
                digest = chain_hash_v2(
                    prev,
                    key,
                    seq,
                    item.kind,
                    item.schema_version,
                    when,
                    commitment,
                    item.meta,
                    chain_key,
                )
            rows.append(
                (
                    key,
                    seq,
                    when,
                    item.kind,
                    item.schema_version,
                    payload,
                    item.meta,
                    prev,
                    digest,
                    salt,
                    commitment,
                    fmt,
                )
            )
            prev, floor = digest, when
        return rows

    def _imported(
        self, key: str, seq: int, item: NewRecord, own_format: int
    ) -> tuple[int, str, str]:
        """``(format, salt, commitment)`` of an item that names its own (an import)."""
        fmt = own_format if item.format is None else item.format
        where = f"append to {key} at seq {seq}"
        if fmt not in FORMATS:
            msg = f"{where}: format {fmt!r} is unknown; use 1, 2 or 3 (or None for the store's)"
            raise ValueError(msg)
        if fmt != own_format and (fmt == 3 or self._key is not None):
            msg = f"{where}: a format {fmt} record cannot go into " + (
                "a keyed store, which writes only format 3 (import into an unkeyed store)"
                if self._key is not None
                else "a store without a key; open it with the key the records were keyed with"
            )
            raise ValueError(msg)
        if fmt == 1:
            if item.salt or item.commitment:
                msg = f"{where}: a format 1 record has no salt or commitment"
                raise ValueError(msg)
            return 1, "", ""
        salt = item.salt if item.salt is not None else new_salt().hex()
        try:
            raw = bytes.fromhex(salt)
        except ValueError:
            raw = b""
        if salt and (len(raw) != 16 or raw.hex() != salt):
            msg = f"{where}: salt {salt!r} is not 32 lowercase hex digits"
            raise ValueError(msg)
        if not salt and (item.payload or item.commitment is None):
            msg = (
                f"{where}: an empty salt is only for an erased record (empty payload, "
                "commitment given)"
            )
            raise ValueError(msg)
        commitment = commit(raw, item.payload) if salt else ""
        if item.commitment is not None and salt and item.commitment != commitment:
            msg = f"{where}: commitment {item.commitment!r} does not match the payload and salt"
            raise ValueError(msg)
        return fmt, salt, item.commitment if item.commitment is not None else commitment

    # ---------------------------------------------------------------- keys
    # Settling the key and the seals at open is eventlog.keycheck.settle_keys; the seal of
    # each append stays here, beside _build, as part of the append path of every backend.

    def _seal_of(self, key: str, seq: int, head_hash: str, erased_through: int) -> str:
        """The head seal backends store with each append (see :func:`head_mac`).
        ``erased_through`` is the memory's, as cached with its head: it changes only by an
        erasure, which appends a receipt, so a stale value comes with a stale head and the
        append is refused as any append to a moved head is."""
        return head_mac(self._key, key, seq, head_hash, erased_through)

    def _writable(self, operation: str, where: str) -> None:
        if self._read_only:
            raise ReadOnlyError(operation, where)
        if self._keyed_db and self._key is None:
            detail = (
                f"{where} is a keyed store and this store was opened without its key; "
                "open it with key= to write"
            )
            raise ChainKeyError(operation, detail)

    def _hash_conflict(
        self, key: str, head: StreamHead | None, expected_hash: str | None
    ) -> ConcurrencyError | None:
        """The error for an ``expected_hash`` the head does not have, else None."""
        actual = GENESIS if head is None else head.hash
        if expected_hash is None or expected_hash == actual:
            return None
        seq = 0 if head is None else head.seq
        return ConcurrencyError(key, seq, seq, expected_hash=expected_hash, actual_hash=actual)

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


class _Counter:
    """Iterator wrapper that counts what passes through (for VerifyReport.records)."""

    def __init__(self, inner: Iterator[Record]) -> None:
        self._inner = inner
        self.n = 0

    def __iter__(self) -> Iterator[Record]:
        for record in self._inner:
            self.n += 1
            yield record
