"""The one abstract event store, its contract, and the record-building every backend shares."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Self

from eventlog.hashing import GENESIS, chain_hash, first_break
from eventlog.ids import SYSTEM_PREFIX, MemoryId, memory_key
from eventlog.models import (
    MemoryPurged,
    NewRecord,
    Record,
    Snapshot,
    StreamHead,
    StreamInfo,
    VerifyReport,
    format_time,
)

__all__ = ["EventStore"]

_VERIFY_PAGE = 5_000


class EventStore(ABC):
    """An append-only log of records, one stream per memory id, hash-chained per stream.

    Every method that takes a ``memory_id`` accepts a str, int, uuid.UUID or a tuple of those
    (see :mod:`eventlog.ids`); any other type raises ``TypeError``. There is no update and no
    delete, except :meth:`purge`, which a retention policy calls explicitly and which leaves a
    tombstone. Stores are thread-safe and usable as context managers (``with`` closes them).
    """

    # ---------------------------------------------------------------- writing

    @abstractmethod
    def append(
        self,
        memory_id: MemoryId,
        items: Sequence[NewRecord],
        *,
        expected_seq: int | None = None,
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

        Returns:
            The stored records, in order, with seq, position, time and hashes.

        Raises:
            ConcurrencyError: ``expected_seq`` is not the head seq. Enforced by the unique
                (stream, seq) key, so two writers can never both succeed.
            TypeError: An item is not a :class:`NewRecord` (nothing is written).
            ValueError: An item's ``recorded_at`` is naive or earlier than the head's.
            PersistenceError: The database failed; nothing was written.
            StoreClosedError: The store is closed.
        """

    @abstractmethod
    def purge(self, memory_id: MemoryId, *, expected_seq: int, reason: str) -> Record:
        """Erase every record and snapshot of a stream and append a tombstone, atomically.

        The tombstone (kind ``memory_purged``) takes seq ``expected_seq + 1`` and chains to the
        last erased hash, so :meth:`verify` still passes and an auditor sees that the id existed.

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
        """

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

    # ---------------------------------------------------------------- reading

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

        Positions are assigned in commit order, so a reader that remembers the last position
        it saw and asks for ``gt=`` that position never misses a record committed later.

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

    def streams(self, *, include_system: bool = False) -> list[StreamInfo]:
        """List memory ids with their event count and first and last activity.

        Args:
            include_system: Also list chatledger's own ``~sys:`` streams (compaction runs).

        Returns:
            One entry per stream that has records, ordered by stream key.
        """
        from eventlog.ids import memory_id_from_key
        from eventlog.models import parse_time

        return [
            StreamInfo(
                memory_id=memory_id_from_key(key),
                stream_id=key,
                event_count=count,
                last_seq=last_seq,
                first_recorded_at=parse_time(first),
                last_recorded_at=parse_time(last),
            )
            for key, count, last_seq, first, last in sorted(self._stream_rows())
            if include_system or not key.startswith(SYSTEM_PREFIX)
        ]

    def verify(self, memory_id: MemoryId | None = None) -> VerifyReport:
        """Recompute the hash chain of one memory id, or of every stream.

        Args:
            memory_id: The memory id to check; None checks every stream of the store.

        Returns:
            A report with ``.ok`` and the first bad seq per broken stream.
        """
        keys = (
            [memory_key(memory_id)]
            if memory_id is not None
            else [info.stream_id for info in self.streams(include_system=True)]
        )
        failures: dict[str, tuple[int, str]] = {}
        count = 0
        for key in keys:
            counted = _Counter(self._pages(key))
            failure = first_break(counted)
            count += counted.n
            if failure is not None:
                failures[key] = failure
        return VerifyReport(checked=tuple(keys), records=count, failures=failures)

    def _pages(self, key: str) -> Iterator[Record]:
        from eventlog.ids import StreamKey

        after = 0
        while True:
            page = self.read(StreamKey(key), gt=after, limit=_VERIFY_PAGE)
            yield from page
            if len(page) < _VERIFY_PAGE:
                return
            after = page[-1].seq

    # ---------------------------------------------------------------- lifecycle

    @abstractmethod
    def close(self) -> None:
        """Release connections. Idempotent; later calls on the store raise StoreClosedError."""

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
        # datetime.now (not time.time) so freezegun moves the store's clock in tests.
        return datetime.now(UTC)

    @staticmethod
    def _check_items(items: Sequence[NewRecord]) -> None:
        for i, item in enumerate(items):
            if not isinstance(item, NewRecord):
                msg = (
                    f"append item {i} is a {type(item).__name__}, not a NewRecord; "
                    "build records with eventlog.serialization (nothing was written)"
                )
                raise TypeError(msg)

    @staticmethod
    def _build(
        key: str,
        head: StreamHead | None,
        items: Sequence[NewRecord],
        now: datetime,
    ) -> list[tuple[str, int, str, str, int, str, str, str, str]]:
        """Chain ``items`` onto ``head``: rows ``(key, seq, time, kind, version, payload,
        meta, prev_hash, hash)`` ready to insert. Pure; backends call it inside their write
        transaction, after reading the head under the same lock."""
        seq, prev, floor = (
            (0, GENESIS, "") if head is None else (head.seq, head.hash, head.recorded_at_text)
        )
        now_text = format_time(now)
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
            digest = chain_hash(
                prev, key, seq, item.kind, item.schema_version, when, item.payload, item.meta
            )
            rows.append(
                (
                    key,
                    seq,
                    when,
                    item.kind,
                    item.schema_version,
                    item.payload,
                    item.meta,
                    prev,
                    digest,
                )
            )
            prev, floor = digest, when
        return rows

    @staticmethod
    def _tombstone(head: StreamHead, count: int, reason: str, now: datetime) -> NewRecord:
        from eventlog.serialization import encode_event

        event = MemoryPurged(
            last_seq=head.seq,
            last_hash=head.hash,
            event_count=count,
            purged_at=now,
            reason=reason,
        )
        return encode_event(event)


class _Counter:
    """Iterator wrapper that counts what passes through (for VerifyReport.records)."""

    def __init__(self, inner: Iterator[Record]) -> None:
        self._inner = inner
        self.n = 0

    def __iter__(self) -> Iterator[Record]:
        for record in self._inner:
            self.n += 1
            yield record
