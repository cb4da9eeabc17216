"""Typed events, stored records and the small value objects stores return.

Two layers (house style rule 1): typed events (pydantic, what users and projections handle) and
:class:`Record` (what stores keep and return: canonical text plus seq, position and hash fields).
:mod:`eventlog.serialization` converts between them; stores never serialize.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, NamedTuple, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from eventlog.ids import MemoryId, memory_id_from_key
from eventlog.messages import ChatMessage

__all__ = [
    "CURRENT_SCHEMA_VERSION",
    "CompactionRun",
    "Event",
    "LoggedEvent",
    "MemoryCleared",
    "MemoryPurged",
    "MessageAdded",
    "MessagesSet",
    "NewRecord",
    "Record",
    "Snapshot",
    "StreamHead",
    "StreamInfo",
    "VerifyReport",
    "format_time",
    "parse_time",
]

CURRENT_SCHEMA_VERSION = 1
"""Version of the payload format written by this code; older versions are upcast on read."""

_FROZEN = ConfigDict(frozen=True, extra="forbid")


def format_time(moment: datetime) -> str:
    """Return the canonical stored text of a timestamp: UTC, microseconds, fixed width.

    Fixed width makes text order equal time order, so stores can compare the stored text.

    Raises:
        ValueError: If ``moment`` is naive (no timezone): its instant would be a guess.
    """
    if moment.tzinfo is UTC:  # the hot path: the stores' own clock
        return moment.isoformat(timespec="microseconds")[:26] + "Z"
    if moment.tzinfo is None or moment.utcoffset() is None:
        msg = f"timestamp {moment.isoformat()} has no timezone; pass an aware datetime (UTC)"
        raise ValueError(msg)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """Inverse of :func:`format_time`."""
    return datetime.fromisoformat(text)


class MessageAdded(BaseModel):
    """One message was added to a memory (``memory.add``)."""

    model_config = _FROZEN
    kind: Literal["message_added"] = "message_added"
    message: ChatMessage


class MessagesSet(BaseModel):
    """The memory's content was replaced by ``messages`` (``memory.set``); all are kept here."""

    model_config = _FROZEN
    kind: Literal["messages_set"] = "messages_set"
    messages: tuple[ChatMessage, ...]


class MemoryCleared(BaseModel):
    """The memory was cleared (``memory.clear``)."""

    model_config = _FROZEN
    kind: Literal["memory_cleared"] = "memory_cleared"


class MemoryPurged(BaseModel):
    """Tombstone left where a retention policy erased a memory's events.

    Attributes:
        last_seq: Seq of the last erased event.
        last_hash: Hash of the last erased event (the chain continues from it).
        event_count: How many events were erased.
        purged_at: When the purge ran.
        reason: Why (e.g. ``"idle for 90 days"``).
    """

    model_config = _FROZEN
    kind: Literal["memory_purged"] = "memory_purged"
    last_seq: int
    last_hash: str
    event_count: int
    purged_at: datetime
    reason: str


class CompactionRun(BaseModel):
    """One compaction run, logged in the store's own ``~sys:compaction`` stream.

    Attributes:
        started_at: When the run started.
        duration_ms: How long it took.
        idle_for_s: The idleness threshold for snapshots, in seconds.
        purge_idle_for_s: The idleness threshold for purges, in seconds (None: no purging).
        compacted: Stream keys that got a snapshot.
        purged: Stream keys that were erased (each left a tombstone).
        skipped: Stream keys left alone because a writer was active during the run.
        errors: One line per stream that failed.
    """

    model_config = _FROZEN
    kind: Literal["compaction_run"] = "compaction_run"
    started_at: datetime
    duration_ms: float
    idle_for_s: float
    purge_idle_for_s: float | None = None
    compacted: tuple[str, ...] = ()
    purged: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


Event: TypeAlias = Annotated[
    MessageAdded | MessagesSet | MemoryCleared | MemoryPurged | CompactionRun,
    Field(discriminator="kind"),
]


class LoggedEvent(BaseModel):
    """An event as read back from the log, with where and when it was recorded.

    Attributes:
        memory_id: The memory id of the stream.
        seq: Position within the memory's stream (1, 2, 3, ...).
        position: Position in the store's global order.
        recorded_at: When the store recorded it (aware, UTC).
        event: The typed event.
    """

    model_config = _FROZEN
    memory_id: Any
    seq: int
    position: int
    recorded_at: datetime
    event: Event

    @property
    def kind(self) -> str:
        """The event kind: ``message_added``, ``messages_set``, ``memory_cleared``, ..."""
        return self.event.kind

    @property
    def message(self) -> ChatMessage | None:
        """The added message of a ``message_added`` event, else None."""
        return self.event.message if isinstance(self.event, MessageAdded) else None

    @property
    def messages(self) -> tuple[ChatMessage, ...] | None:
        """The full list given to ``set`` for a ``messages_set`` event, else None."""
        return self.event.messages if isinstance(self.event, MessagesSet) else None


class NewRecord(NamedTuple):
    """A record to append: kind and canonical text; the store adds seq, time and hashes.

    Attributes:
        kind: Event kind.
        payload: Canonical JSON text of the event (a message's LangChain4j JSON for adds).
        meta: Canonical JSON text of projection bookkeeping ("" when none).
        schema_version: Version of the payload format.
        recorded_at: Keep this time instead of the store's clock (imports); None means now.
    """

    kind: str
    payload: str
    meta: str = ""
    schema_version: int = CURRENT_SCHEMA_VERSION
    recorded_at: datetime | None = None


class Record(NamedTuple):
    """A stored record. An immutable named tuple, not pydantic: stores build thousands per read
    from trusted rows, and validation (or even a frozen dataclass's __init__) would cost more
    than the query.

    Attributes:
        position: Global order across all streams of the store (gapless is not promised).
        stream_id: Canonical key of the memory id (see :mod:`eventlog.ids`).
        seq: 1, 2, 3, ... gapless within the stream.
        recorded_at_text: Canonical UTC timestamp text (what is hashed).
        kind: Event kind.
        schema_version: Payload format version.
        payload: Stored payload text.
        meta: Stored meta text.
        prev_hash: Hash of the previous record of the stream (GENESIS for seq 1).
        hash: SHA-256 of this record chained to ``prev_hash``.
    """

    position: int
    stream_id: str
    seq: int
    recorded_at_text: str
    kind: str
    schema_version: int
    payload: str
    meta: str
    prev_hash: str
    hash: str

    @property
    def recorded_at(self) -> datetime:
        """When the record was stored (aware, UTC)."""
        return parse_time(self.recorded_at_text)

    @property
    def memory_id(self) -> MemoryId:
        """The memory id the stream key was made from."""
        return memory_id_from_key(self.stream_id)


class StreamHead(NamedTuple):
    """The last record of a stream: what an append chains to."""

    seq: int
    hash: str
    recorded_at_text: str

    @property
    def recorded_at(self) -> datetime:
        """When the last record was stored."""
        return parse_time(self.recorded_at_text)


@dataclasses.dataclass(frozen=True, slots=True)
class StreamInfo:
    """One memory id of a store with its activity.

    Attributes:
        memory_id: The memory id.
        stream_id: Its stored key.
        event_count: Records currently stored for it (a purge leaves 1, the tombstone).
        last_seq: Seq of its newest record.
        first_recorded_at: Time of its oldest stored record.
        last_recorded_at: Time of its newest record (its last activity).
    """

    memory_id: MemoryId
    stream_id: str
    event_count: int
    last_seq: int
    first_recorded_at: datetime
    last_recorded_at: datetime


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    """A projection's state saved at a seq, so a cold open reads it and the tail only."""

    stream_id: str
    name: str
    seq: int
    state: str
    created_at: datetime


@dataclasses.dataclass(frozen=True, slots=True)
class VerifyReport:
    """Result of :meth:`EventStore.verify`.

    Attributes:
        checked: Memory ids (stream keys) checked, in order.
        records: Number of records whose hash was recomputed.
        failures: Stream key -> ``(first bad seq, reason)`` for every broken chain.
    """

    checked: tuple[str, ...]
    records: int
    failures: dict[str, tuple[int, str]]

    @property
    def ok(self) -> bool:
        """True when every checked chain is intact."""
        return not self.failures

    def first_bad_seq(self, memory_id: MemoryId) -> int | None:
        """The first seq that does not verify for ``memory_id``, or None if intact."""
        from eventlog.ids import memory_key

        failure = self.failures.get(memory_key(memory_id))
        return None if failure is None else failure[0]
