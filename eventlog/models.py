"""Typed events, stored records and the small value objects stores return.

Two layers: typed events (pydantic, what users and projections handle) and :class:`Record`
(what stores keep and return: canonical text plus seq, position and hash fields).
:mod:`eventlog.serialization` converts between them; stores never serialize, so every backend
stores and hashes the same bytes and none needs to change when an event type does.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Annotated, Any, Literal, NamedTuple, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from eventlog.ids import MemoryId, memory_id_from_key
from eventlog.messages import ChatMessage
from eventlog.timetext import format_time, parse_time

__all__ = [
    "CURRENT_SCHEMA_VERSION",
    "CompactionRun",
    "ContentErased",
    "ContextSent",
    "ErasureReceipt",
    "Event",
    "HeadSeal",
    "LoggedEvent",
    "MemoryCleared",
    "MemoryErased",
    "MemoryPurged",
    "MessageAdded",
    "MessagesSet",
    "NewRecord",
    "Record",
    "RecordQuarantined",
    "Snapshot",
    "StreamHead",
    "StreamInfo",
    "VerifyReport",
    "format_time",
    "parse_time",
]

_Leaf: TypeAlias = tuple[
    Annotated[int, Field(ge=1)], Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
]

CURRENT_SCHEMA_VERSION = 1
"""Version of the payload format written by this code; older versions are upcast on read."""

_FROZEN = ConfigDict(
    frozen=True, extra="forbid", defer_build=True
)  # built on first use: import time


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


class SummaryRecorded(BaseModel):
    """A summarizing memory folded messages that left its window into its running summary.

    Written after the summarizer returned, so replay and time travel read the summary from
    here and never call the summarizer again.

    Attributes:
        summary: The running summary, covering everything earlier summaries covered too.
        covers: ``(seq, index)`` refs of the messages folded in by this event (index within a
            ``messages_set`` list, else 0).
        deferred: Refs that left the window but wait for their partner (a tool call whose
            results have not left yet): folded by a later summary, never split from them.
        previous: Seq of the summary this one continues (None: the first since a clear).
    """

    model_config = _FROZEN
    kind: Literal["summary_recorded"] = "summary_recorded"
    summary: str
    covers: tuple[tuple[int, int], ...]
    deferred: tuple[tuple[int, int], ...] = ()
    previous: int | None = None


class MessageRetracted(BaseModel):
    """A message was taken back (an OpenAI Agents session's ``pop_item``): it leaves the view
    from here on, and stays in the history where it was added.

    Attributes:
        seq: The event that brought the message.
        index: Its index in that event (within a ``messages_set`` list; 0 for an add).
    """

    model_config = _FROZEN
    kind: Literal["message_retracted"] = "message_retracted"
    seq: int
    index: int = 0


class MemoryPurged(BaseModel):
    """Tombstone left where a retention policy erased a memory's events.

    Attributes:
        last_seq: Seq of the last erased event.
        last_hash: Hash of the last erased event (the chain continues from it).
        event_count: How many events were erased.
        purged_at: When the purge ran.
        reason: Why (e.g. ``"idle for 90 days"``).
        leaves: ``(position, hash)`` of every erased record, in position order, so a witness
            can check that what went missing from the ledger is exactly what this purge erased
            (see :mod:`eventlog.witness`); None in tombstones written before chatledger kept it.
    """

    model_config = _FROZEN
    kind: Literal["memory_purged"] = "memory_purged"
    last_seq: int
    last_hash: str
    event_count: int
    purged_at: datetime
    reason: str
    leaves: tuple[_Leaf, ...] | None = None


class MemoryErased(BaseModel):
    """Receipt left where :meth:`EventStore.erase` deleted the content of a memory's records.

    The erased records stay in the log with their seq, kind, time, meta and hashes; only their
    payload and salt are gone, so the chain and every ledger digest still verify.

    Attributes:
        first_seq: Seq of the first record whose content was erased.
        last_seq: Seq of the last record whose content was erased.
        record_count: How many records had their content erased.
        erased_at: When the erasure ran.
        reason: Why (e.g. ``"GDPR request #123"``).
    """

    model_config = _FROZEN
    kind: Literal["memory_erased"] = "memory_erased"
    first_seq: int
    last_seq: int
    record_count: int
    erased_at: datetime
    reason: str


class ContentErased(BaseModel):
    """What :func:`~eventlog.serialization.decode_event` gives for a record whose content was
    erased: only its kind is left. Never stored, so it is not an :data:`Event` kind.

    Attributes:
        erased_kind: The kind of the erased record (``message_added``, ``messages_set``, ...).
    """

    model_config = _FROZEN
    kind: Literal["content_erased"] = "content_erased"
    erased_kind: str


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


class RecordQuarantined(BaseModel):
    """The acknowledgement of a damaged record (:meth:`EventStore.quarantine`), in the store's
    own ``~sys:quarantine`` stream: reads of the memory leave that one record out instead of
    refusing, and ``verify()`` still reports the break.

    Attributes:
        memory: The stream key of the memory holding the damaged record.
        seq: The damaged record's seq.
        found: What was wrong with it when it was acknowledged (the read path's reason).
        found_hash: The hash stored in its row then ("" when the row was gone).
        quarantined_at: When it was acknowledged.
        reason: Why, in the operator's words (e.g. ``"disk fault, ticket 42"``).
    """

    model_config = _FROZEN
    kind: Literal["record_quarantined"] = "record_quarantined"
    memory: str
    seq: int
    found: str
    found_hash: str
    quarantined_at: datetime
    reason: str


class ContextSent(BaseModel):
    """What one model call was sent, recorded by a framework session (``window_callback``, a
    LangChain history with ``window=``) in the memory's own stream, so the call's exact input
    is replayed from the log.

    Attributes:
        sent: The input in order, each ``{"ref": [seq, index]}`` (a message of this memory's
            log) or ``{"new": item}`` (input not in the log, kept exactly as sent).
        policy: The window policy that chose it (e.g. ``"messages:20"``).
        profile: The provider profile it was made valid for (None: none).
        tokens: Its token count under a token policy (None for a message window).
        adapter: Which adapter recorded it (``"openai_agents"``, ``"langchain"``).
        history_limit: The history was the newest ``history_limit`` items of the list (the
            SDK's ``get_items(limit)``), so the audit re-runs the policy over those; None: the
            whole list (and in records written before the field existed).
    """

    model_config = _FROZEN
    kind: Literal["context_sent"] = "context_sent"
    sent: tuple[dict[str, Any], ...]
    policy: str
    profile: str | None = None
    tokens: int | None = None
    adapter: str
    history_limit: Annotated[int, Field(strict=True, ge=0)] | None = None


Event: TypeAlias = Annotated[
    MessageAdded
    | MessagesSet
    | MemoryCleared
    | SummaryRecorded
    | MessageRetracted
    | MemoryPurged
    | MemoryErased
    | CompactionRun
    | RecordQuarantined
    | ContextSent,
    Field(discriminator="kind"),
]


class LoggedEvent(BaseModel):
    """An event as read back from the log, with where and when it was recorded.

    Attributes:
        memory_id: The memory id of the stream.
        seq: Position within the memory's stream (1, 2, 3, ...).
        position: Position in the store's global order.
        recorded_at: When the store recorded it (aware, UTC).
        event: The typed event, or :class:`ContentErased` when :meth:`EventStore.erase` deleted
            its content (see :attr:`erased`).
    """

    model_config = _FROZEN
    memory_id: Any
    seq: int
    position: int
    recorded_at: datetime
    event: Event | ContentErased

    @property
    def erased(self) -> bool:
        """True when the event's content was erased (``event`` is :class:`ContentErased`)."""
        return isinstance(self.event, ContentErased)

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
        format: Record format to write (imports that reproduce stored hashes); None means the
            store's own: 2 (salted SHA-256), or 3 (salted HMAC-SHA256) for a keyed store.
        salt: Hex salt of the payload commitment (imports); None draws a fresh random one.
        commitment: Hex commitment (imports, e.g. of an erased payload); None computes it
            from ``salt`` and ``payload``.
    """

    kind: str
    payload: str
    meta: str = ""
    schema_version: int = CURRENT_SCHEMA_VERSION
    recorded_at: datetime | None = None
    format: int | None = None
    salt: str | None = None
    commitment: str | None = None


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
        hash: This record's chain hash over its fields and ``prev_hash`` (see
            :mod:`eventlog.hashing`; how it is computed depends on ``format``).
        salt: Hex of the 16 random bytes salting the payload commitment ("" for format 1,
            and once the payload is erased).
        commitment: Hex SHA-256 of ``salt || payload``, which the chain hash covers instead of
            the payload ("" for format 1); it outlives an erasure of payload and salt.
        format: 1 = SHA-256 over the payload (records written before format 2), 2 = salted
            SHA-256 over the commitment, 3 = salted HMAC-SHA256 (a keyed store).
        sealed: The stored, encrypted payload when a store with a keyring decrypted it into
            ``payload`` ("" otherwise). The commitment covers this text, so chains and proofs
            verify without keys.
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
    salt: str = ""
    commitment: str = ""
    format: int = 1
    sealed: str = ""

    @property
    def stored_payload(self) -> str:
        """The payload as stored (the ciphertext when encrypted): what the commitment covers."""
        return self.sealed or self.payload

    def range_row(self, payload: str) -> tuple[Any, ...]:
        """The record as a range row (:data:`eventlog.hashing.RANGE_ROW_FIELDS`) holding
        ``payload`` (the stored text, or the opened one)."""
        return (
            self.seq, self.recorded_at_text, self.kind, self.schema_version, payload, self.meta,
            self.prev_hash, self.hash, self.salt, self.commitment, self.format, self.position,
        )  # fmt: skip

    @classmethod
    def from_range_row(cls, stream_id: str, row: tuple[Any, ...]) -> Record:
        """A range row of stream ``stream_id`` as a record (its payload as the row holds it)."""
        seq, at, kind, version, payload, meta, prev, digest, salt, commitment, fmt, pos = row
        return cls(
            pos, stream_id, seq, at, kind, version, payload, meta, prev, digest, salt,
            commitment, fmt,
        )  # fmt: skip

    @property
    def recorded_at(self) -> datetime:
        """When the record was stored (aware, UTC)."""
        return parse_time(self.recorded_at_text)

    @property
    def memory_id(self) -> MemoryId:
        """The memory id the stream key was made from."""
        return memory_id_from_key(self.stream_id)

    @property
    def erased(self) -> bool:
        """True when :meth:`EventStore.erase` deleted this record's payload and salt (only a
        format 2/3 record can be erased; its commitment keeps the chain verifiable)."""
        return self.format != 1 and not self.salt and not self.payload


class HeadSeal(NamedTuple):
    """A memory's sealed head as the store keeps it beside the records (see
    :func:`eventlog.hashing.head_mac`): reads compare the newest record against it, so a
    truncated tail is refused. ``erased_through``: every record up to this seq had its content
    erased (0: none); the seal covers it too."""

    seq: int
    hash: str
    mac: str
    erased_through: int = 0


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
        id_erased: On a ledger with erasable ids (:mod:`eventlog.names`), the memory's id was
            erased with its content: ``memory_id`` is then the stream's pseudonym.
    """

    memory_id: MemoryId
    stream_id: str
    event_count: int
    last_seq: int
    first_recorded_at: datetime
    last_recorded_at: datetime
    id_erased: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class ErasureReceipt:
    """What :meth:`EventStore.erase` did to one memory.

    Attributes:
        memory_id: The memory id.
        event: The receipt event (erased seq range, record count, time, reason).
        record: The stored ``memory_erased`` record that carries it.
        cleanup_pending: The erasure is committed and no read returns the content, but a
            reader holding an old snapshot (a backup) kept the backend from cleaning its
            files yet (SQLite: the -wal file; PostgreSQL: dead row versions until ``vacuum()``).
            The next erase, purge or ``checkpoint()`` / ``vacuum()`` finishes it.
    """

    memory_id: MemoryId
    event: MemoryErased
    record: Record
    cleanup_pending: bool = False

    @property
    def id(self) -> str:
        """The receipt's id, ``"<position>-<hash>"`` of its record: the position finds it in
        one read (``store.erasure_receipt(id)``, ``chatledger erasure-receipt``) and the hash,
        which the ledger's digests cover, says it is this record and no other."""
        return f"{self.record.position}-{self.record.hash}"


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
        records: Number of records read, including those after a stream's first break.
        failures: Stream key -> ``(first bad seq, reason)`` for every stream that does not
            verify: a broken chain, a malformed row, or a keyed record that cannot be
            checked without the key.
        malformed: ``(stream key, seq, reason)`` of every malformed row (bad text in a column
            a store never writes that way), including those after a stream's first failure.
        keyed_since: In a keyed ledger, the position after which every record must be keyed
            (records at or before it are the sealed legacy prefix); None when unkeyed.
        legacy_records: How many unkeyed records the key check sealed when the key was
            adopted (0 for a ledger keyed from its start, or unkeyed).
        ledger_problems: What is wrong with the ledger as a whole rather than one chain (the
            sealed legacy prefix altered, unkeyed records added); each makes ``ok`` False.
    """

    checked: tuple[str, ...]
    records: int
    failures: dict[str, tuple[int, str]]
    malformed: tuple[tuple[str, int, str], ...] = ()
    keyed_since: int | None = None
    legacy_records: int = 0
    ledger_problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every checked chain is intact and verifiable."""
        return not self.failures and not self.ledger_problems

    def first_bad_seq(self, memory_id: MemoryId) -> int | None:
        """The first seq that does not verify for ``memory_id``, or None if intact."""
        from eventlog.ids import memory_key

        failure = self.failures.get(memory_key(memory_id))
        return None if failure is None else failure[0]
