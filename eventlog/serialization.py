"""Typed events <-> stored records: the sole owner of the payload format.

A ``message_added`` payload is exactly the message's LangChain4j JSON, and a ``messages_set``
payload is the LangChain4j JSON array, so a Java service (or plain SQL) can read the log.
Projection bookkeeping goes in the separate ``meta`` text. Both are canonical - the same event
always gives the same bytes - which the hash chain relies on. Stored text is never rewritten:
a format change bumps ``schema_version`` and registers an upcaster that runs on read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from eventlog.errors import SchemaVersionError
from eventlog.formats.lc4j_json import (
    message_from_json,
    message_to_json,
    messages_from_json,
    messages_to_json,
)
from eventlog.keyring import KeyUnavailableError, is_sealed, sealed_key_id
from eventlog.messages import ChatMessage
from eventlog.models import (
    CURRENT_SCHEMA_VERSION,
    CompactionRun,
    ContentErased,
    ContextSent,
    Event,
    LoggedEvent,
    MemoryCleared,
    MemoryErased,
    MemoryPurged,
    MessageAdded,
    MessageRetracted,
    MessagesSet,
    NewRecord,
    Record,
    RecordQuarantined,
    SummaryRecorded,
)
from eventlog.validation import Checked

__all__ = [
    "UPCASTERS",
    "added_record",
    "cleared_record",
    "decode_event",
    "decode_meta",
    "encode_event",
    "encode_meta",
    "logged_event",
    "set_record",
]

UPCASTERS: dict[int, Callable[[str, str], tuple[str, str]]] = {}
"""``version -> f(kind, payload) -> (kind, payload)`` lifting a record one version up.

Empty while version 1 is the only format; the mechanism is here so that the first change to
the format is an addition, never a rewrite of stored bytes."""

_dumps = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode


def encode_meta(meta: Mapping[str, Any] | None) -> str:
    """Canonical JSON text of projection meta ("" for none)."""
    return _dumps(meta) if meta else ""


def decode_meta(record: Record) -> dict[str, Any]:
    """The meta of a record as a dict ({} when it has none)."""
    if not record.meta:
        return {}
    value = json.loads(record.meta)
    if not isinstance(value, dict):
        msg = f"record {record.stream_id}#{record.seq} has meta that is not a JSON object"
        raise ValueError(msg)
    return value


def encode_event(event: Event, meta: Mapping[str, Any] | str | None = None) -> NewRecord:
    """Convert a typed event (and optional projection meta: a mapping, or text already
    canonical) to a record to append."""
    if isinstance(event, MessageAdded):
        payload = message_to_json(event.message)
    elif isinstance(event, MessagesSet):
        payload = messages_to_json(event.messages)
    elif isinstance(event, MemoryCleared):
        payload = "{}"
    elif isinstance(
        event,
        MemoryPurged
        | MemoryErased
        | CompactionRun
        | SummaryRecorded
        | MessageRetracted
        | RecordQuarantined
        | ContextSent,
    ):
        # Fields added later are left out when unset, so an event without them keeps the
        # payload it always had (and so its hash): a tombstone's leaves, a call's history limit.
        omit = {"kind"}
        if isinstance(event, MemoryPurged) and event.leaves is None:
            omit.add("leaves")
        if isinstance(event, ContextSent) and event.history_limit is None:
            omit.add("history_limit")
        payload = _dumps(event.model_dump(mode="json", exclude=omit))
    else:
        msg = (
            f"encode_event: {type(event).__name__} is not an event; expected one of the event kinds"
        )
        raise TypeError(msg)
    text = meta if isinstance(meta, str) else encode_meta(meta)
    return Checked(kind=event.kind, payload=payload, meta=text)


def added_record(message: ChatMessage, meta: str = "") -> NewRecord:
    """Fast path of ``encode_event(MessageAdded(message=message), meta)`` for the hot ``add``:
    the same bytes, without building the event model first. ``meta`` is canonical meta text
    (the projections own what it says)."""
    return Checked("message_added", message_to_json(message), meta)


def set_record(messages: Sequence[ChatMessage], meta: str = "") -> NewRecord:
    """Same as ``encode_event(MessagesSet(messages=...), meta)``; ``meta`` is canonical text."""
    return Checked("messages_set", messages_to_json(messages), meta)


def cleared_record(meta: str = "") -> NewRecord:
    """Same as ``encode_event(MemoryCleared(), meta)``; ``meta`` is canonical text."""
    return Checked("memory_cleared", "{}", meta)


def require_opened(record: Record) -> None:
    """Refuse a record whose payload is still encrypted (the store had no keyring holding its
    key: destroyed by an erasure, or not given).

    Raises:
        KeyUnavailableError: The payload is sealed.
    """
    if is_sealed(record.payload):
        where = f"decode of {record.stream_id} seq {record.seq}"
        raise KeyUnavailableError(where, sealed_key_id(record.payload), keyring_given=None)


def _upcast(record: Record) -> tuple[str, str]:
    require_opened(record)
    kind, payload, version = record.kind, record.payload, record.schema_version
    if version > CURRENT_SCHEMA_VERSION:
        what = f"record {record.stream_id}#{record.seq}"
        raise SchemaVersionError(what, version, CURRENT_SCHEMA_VERSION)
    while version < CURRENT_SCHEMA_VERSION:
        kind, payload = UPCASTERS[version](kind, payload)
        version += 1
    return kind, payload


def decode_event(record: Record) -> Event | ContentErased:
    """Convert a stored record back to its typed event; a record whose content was erased
    (:attr:`Record.erased`) gives :class:`ContentErased` naming its kind.

    Raises:
        SchemaVersionError: The record was written by a newer chatledger.
        ValueError: The record's kind is unknown or its payload is malformed.
    """
    if record.erased:
        return ContentErased(erased_kind=record.kind)
    kind, payload = _upcast(record)
    if kind == "message_added":
        return MessageAdded(message=message_from_json(payload))
    if kind == "messages_set":
        return MessagesSet(messages=tuple(messages_from_json(payload)))
    if kind == "memory_cleared":
        return MemoryCleared()
    if kind == "memory_purged":
        return MemoryPurged.model_validate_json(payload)
    if kind == "memory_erased":
        return MemoryErased.model_validate_json(payload)
    if kind == "compaction_run":
        return CompactionRun.model_validate_json(payload)
    if kind == "summary_recorded":
        return SummaryRecorded.model_validate_json(payload)
    if kind == "message_retracted":
        return MessageRetracted.model_validate_json(payload)
    if kind == "record_quarantined":
        return RecordQuarantined.model_validate_json(payload)
    if kind == "context_sent":
        return ContextSent.model_validate_json(payload)
    msg = f"record {record.stream_id}#{record.seq} has unknown kind {kind!r}"
    raise ValueError(msg)


def logged_event(record: Record) -> LoggedEvent:
    """A record as a :class:`LoggedEvent` (typed event plus seq, position, time, memory id)."""
    return LoggedEvent(
        memory_id=record.memory_id,
        seq=record.seq,
        position=record.position,
        recorded_at=record.recorded_at,
        event=decode_event(record),
    )
