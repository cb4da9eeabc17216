"""Checking the ledger, and reads that are refused unless it vouches for them.

Owns :meth:`~LedgerVerify.check` of one record, :meth:`~LedgerVerify.verify` of one memory, every
stream or the whole log against a digest, the verified reads (:mod:`eventlog.vouch` holds their
rules) and the acknowledgement of damaged records (:mod:`eventlog.quarantine`).
:class:`~eventlog.store.EventStore` inherits it.
"""

from __future__ import annotations

import typing
from collections.abc import Collection, Iterator, Mapping
from typing import Any, cast, overload

from eventlog import validation
from eventlog.hashing import check_stream, stored_record_problem, verifies
from eventlog.ids import PSEUDONYM_PREFIX, SYSTEM_PREFIX, MemoryId, StreamKey
from eventlog.keycheck import legacy_seal
from eventlog.ledger import DigestReport, LedgerDigest, verify_digest
from eventlog.ledger_names import LedgerNames
from eventlog.models import Record, RecordQuarantined, VerifyReport

if typing.TYPE_CHECKING:
    from eventlog.store import EventStore

_VERIFY_PAGE = 5_000
_BELOW_EVERY_SEQ = -(1 << 63)  # the smallest 64-bit integer: "seq > it" bounds nothing


class LedgerVerify(LedgerNames):
    """Verification, verified reads and quarantine (a mixin of
    :class:`~eventlog.store.EventStore`).

    The module functions it calls take the whole store, which every instance is: ``self`` is
    cast to :class:`~eventlog.store.EventStore` for them.
    """

    # Set at open (EventStore._open_modes, eventlog.keycheck.settle_keys); the class defaults
    # are on EventStore.
    _key: bytes | None
    _keyed_since: int
    _keyed_db: bool
    _legacy: tuple[int, str] | None

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
            return verify_digest(cast("EventStore", self), digest)
        return self._verify_streams(memory_id)

    def _verify_streams(self, memory_id: MemoryId | None) -> VerifyReport:
        from eventlog.vouch import erased_bound, head_problem, restored

        keys = (
            [self._stream_key(memory_id, "verify")]
            if memory_id is not None
            # A sealed memory with no rows left is a deletion to report, not nothing to check.
            # (a key stored as a BLOB by hand, bytes, sorts last: reported, never a TypeError)
            else sorted(
                {row[0] for row in self._stream_rows()} | set(self._sealed_keys()),
                key=lambda k: (type(k) is not str, str(k)),
            )
        )
        failures: dict[str, tuple[int, str]] = {}
        bad_rows: list[tuple[str, int, str]] = []
        count = 0
        for key in keys:
            seal = self._head_seal(key)
            erased = erased_bound(seal)

            def problem(record: Record, erased: int | None = erased) -> str | None:
                return self._safe_check(record) or restored(record, erased)

            moved = self._moved_rows(key)
            counted = _Counter(self._pages(key) if moved is None else iter(moved))
            failure, odd = check_stream(counted, problem, full=True)
            count += counted.n
            bad_rows.extend((key, seq, reason) for seq, reason in odd)
            if failure is None:
                last = (
                    self.read(StreamKey(key), desc=True, limit=1) if moved is None else moved[-1:]
                )
                failure = head_problem(
                    cast("EventStore", self), key, last[0] if last else None, seal
                )
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
        # Every committed one: not through read_all, which on PostgreSQL holds back records
        # above the oldest running transaction (a false "removed" while one is open).
        count, root = legacy_seal(self._unkeyed_hashes())
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
        vouch(cast("EventStore", self), key, found, ends, gt=gt, lte=lte, limit=limit, desc=desc)
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
        if not vouch_rows(cast("EventStore", self), key, rows, ends, gt=gt, lte=lte):
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
            The acknowledgement record (the existing one if this damage - ``seq`` with the
            same hash in its row - was acknowledged before).

        Raises:
            ValueError: The record is intact (nothing to quarantine), the seq is past the head,
                or the reason is empty.
            ChainKeyError: The ledger is keyed and this store was opened without the key.
            ReadOnlyError: The store was opened read-only.
        """
        from eventlog.quarantine import quarantine

        return quarantine(cast("EventStore", self), memory_id, seq, reason=reason)

    def quarantined(self, memory_id: MemoryId) -> dict[int, RecordQuarantined]:
        """The acknowledged damaged records of a memory, by seq (see :meth:`quarantine`): those
        still damaged, their rows holding the hash acknowledged (one for a record restored or
        damaged anew since excuses nothing).

        Raises:
            ChainIntegrityError: The acknowledgements themselves do not verify.
        """
        from eventlog.quarantine import quarantined

        return quarantined(cast("EventStore", self), memory_id)

    def read_verified_excluding(
        self,
        memory_id: MemoryId,
        skip: Collection[int] | Mapping[int, RecordQuarantined],
        *,
        gt: int | None = None,
        lte: int | None = None,
        limit: int | None = None,
        desc: bool = False,
    ) -> list[Record]:
        """:meth:`read_verified` with the records ``skip`` names (acknowledged damage, see
        :meth:`quarantined`) left out: not checked, not returned; the rest vouched for as usual.
        Given :meth:`quarantined`'s acknowledgements, a record is left out only while its row
        holds the hash acknowledged (:func:`eventlog.quarantine.read_excluding`).

        Raises:
            ChainIntegrityError: Something else does not verify.
        """
        from eventlog.quarantine import read_excluding

        return read_excluding(
            cast("EventStore", self), memory_id, skip, gt=gt, lte=lte, limit=limit, desc=desc
        )

    def _safe_check(self, record: Record) -> str | None:
        # verify() never raises for bad data; malformed() has already vetted each row, so
        # this only guards against a kind of bad text nobody foresaw.
        try:
            return self.check(record)
        except (ValueError, TypeError, AttributeError) as e:
            return f"malformed record: {e}"

    def _moved_rows(self, key: str) -> list[Record] | None:
        """The records stored under ``key``, as stored, when :meth:`read` would read another
        stream for it - a clear key in a ledger with erasable ids, which no store writes (rows
        moved there by hand: read() looks up the id's pseudonym instead) - else None."""
        if self._names is None or key.startswith((PSEUDONYM_PREFIX, SYSTEM_PREFIX)):
            return None
        rows = self._range_rows(key, _BELOW_EVERY_SEQ, None)
        return [Record.from_range_row(key, row) for row in rows]

    def _pages(self, key: str) -> Iterator[Record]:
        from eventlog.ids import StreamKey

        after: int | None = None  # no lower bound: a row forged at seq 0 or below is seen
        while True:
            page = self.read(StreamKey(key), gt=after, limit=_VERIFY_PAGE)
            yield from page
            if len(page) < _VERIFY_PAGE:
                return
            after = page[-1].seq


class _Counter:
    """Iterator wrapper that counts what passes through (for VerifyReport.records)."""

    def __init__(self, inner: Iterator[Record]) -> None:
        self._inner = inner
        self.n = 0

    def __iter__(self) -> Iterator[Record]:
        for record in self._inner:
            self.n += 1
            yield record
