"""What the inspector shows, computed from the log: no HTML here, nothing written.

Each page is one of these reads. Stepping costs O(window), whatever the history's length: the
view at a seq is read from that event's window record and what changed at it from one audit
step (:func:`projections.audit.walk` over one event). The timeline is a page of events around
the seq, never the whole history. Verifying a memory reads all of its records, so its result
is cached per head (same seq and hash: same answer) and stepping does not pay for it again.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from datetime import datetime
from typing import Any

from eventlog.ids import StreamKey, memory_id_from_key
from eventlog.messages import (
    AiMessage,
    ChatMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolExecutionResultMessage,
    UserMessage,
)
from eventlog.models import Record, SummaryRecorded
from eventlog.serialization import decode_event
from eventlog.store import EventStore
from projections.audit import diff, walk
from projections.cli.args import PolicySpec, parse_policy
from projections.cli.model import make_policy, reason_text, summary_at
from projections.cli.render import describe, record_summary
from projections.meta import WindowMeta
from projections.replay import read_checked, what_if
from projections.window import Entry

__all__ = [
    "EventDetail",
    "MemoryRow",
    "Shown",
    "StepView",
    "VerifyCache",
    "event_detail",
    "memory_rows",
    "step_view",
]

TIMELINE_PAGE = 40  # events listed around the current seq


@dataclasses.dataclass(frozen=True, slots=True)
class Shown:
    """One message as a page shows it (all text is escaped by the templates)."""

    role: str
    text: str
    ref: str = ""
    tokens: int | None = None
    calls: tuple[tuple[str, str, str], ...] = ()  # (id, name, arguments)
    images: tuple[str, ...] = ()  # links, never loaded by the page
    note: str = ""  # why it left, for departures


def show(message: ChatMessage, entry: Entry | None = None, note: str = "") -> Shown:
    """A message for a page: role, its whole text, tool calls with arguments, image links."""
    role, text = describe(message)
    calls: tuple[tuple[str, str, str], ...] = ()
    images: tuple[str, ...] = ()
    if isinstance(message, AiMessage):
        text = message.text or ""
        calls = tuple(
            (r.id or "", r.name or "", r.arguments or "") for r in message.tool_execution_requests
        )
        if message.thinking:
            text = f"{text}\n[thinking] {message.thinking}".strip()
    elif isinstance(message, UserMessage | ToolExecutionResultMessage):
        parts = [c.text for c in message.contents if isinstance(c, TextContent)]
        images = tuple(
            c.url or "(inline image data)" for c in message.contents if isinstance(c, ImageContent)
        )
        text = "\n".join(parts)
        if isinstance(message, ToolExecutionResultMessage):
            head = f"{message.tool_name or 'tool'} (call {message.id})"
            text = f"{head}{' [error]' if message.is_error else ''}: {text}"
        elif message.name:
            text = f"{message.name}: {text}"
    elif isinstance(message, SystemMessage):
        text = message.text
    ref = "" if entry is None else _ref_text(entry.ref)
    tokens = None if entry is None else entry.tokens
    return Shown(role, text, ref, tokens, calls, images, note)


def _ref_text(ref: tuple[int, int]) -> str:
    return str(ref[0]) if ref[1] == 0 else f"{ref[0]}.{ref[1]}"


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryRow:
    """One memory on the list page."""

    key: str
    label: str
    events: int
    last_activity: datetime
    verified: bool
    bad_seq: int | None


class VerifyCache:
    """``store.verify(key)`` per head: stepping through a memory verifies it once."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._results: dict[str, tuple[tuple[int, str], tuple[int, str] | None]] = {}

    def first_bad(self, key: str) -> tuple[int, str] | None:
        """``(seq, reason)`` of the first record that does not verify, or None."""
        head = self.store.head(StreamKey(key))
        stamp = (0, "") if head is None else (head.seq, head.hash)
        with self._lock:
            cached = self._results.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        report = self.store.verify(StreamKey(key))
        failure = report.failures.get(key)
        with self._lock:
            self._results[key] = (stamp, failure)
        return failure


def memory_rows(store: EventStore, cache: VerifyCache, needle: str = "") -> list[MemoryRow]:
    """Every memory whose id contains ``needle``, newest activity first, with its badge."""
    rows = []
    for info in store.streams():
        label = _label(info.stream_id)
        if needle and needle.lower() not in label.lower():
            continue
        bad = cache.first_bad(info.stream_id)
        rows.append(
            MemoryRow(
                info.stream_id,
                label,
                info.event_count,
                info.last_recorded_at,
                bad is None,
                None if bad is None else bad[0],
            )
        )
    rows.sort(key=lambda r: r.last_activity, reverse=True)
    return rows


def _label(key: str) -> str:
    memory_id = memory_id_from_key(key)
    return memory_id if isinstance(memory_id, str) else json.dumps(memory_id, default=str)


@dataclasses.dataclass(frozen=True, slots=True)
class TimelineEvent:
    """One line of the timeline."""

    seq: int
    kind: str
    summary: str
    when: str
    broken: bool


@dataclasses.dataclass(frozen=True, slots=True)
class StepView:
    """One memory at one seq: everything the memory page shows."""

    key: str
    label: str
    seq: int
    head: int
    kind: str
    when: str
    window: tuple[Shown, ...]
    entered: tuple[Shown, ...]
    left: tuple[Shown, ...]
    tokens: int | None
    limit: int | None
    summary: str | None
    timeline: tuple[TimelineEvent, ...]
    bad: tuple[int, str] | None
    digest_root: str
    digest_size: int
    what_if: tuple[Shown, ...] | None = None
    policy: str = ""
    diff_from: int | None = None
    diff: tuple[Shown, ...] = ()


def step_view(
    store: EventStore,
    cache: VerifyCache,
    key: str,
    seq: int | None,
    *,
    policy: str = "",
    diff_from: int | None = None,
) -> StepView:
    """The memory page at ``seq`` (None: the head).

    Raises:
        LookupError: The memory has no events.
        ValueError: ``seq``, ``diff_from`` or ``policy`` is not valid (the message says why).
    """
    stream = StreamKey(key)
    head = store.head(stream)
    if head is None:
        msg = f"no memory {_label(key)!r} in this ledger"
        raise LookupError(msg)
    at = head.seq if seq is None else seq
    if not 1 <= at <= head.seq:
        msg = f"seq {at} is outside this memory's history (1..{head.seq})"
        raise ValueError(msg)
    (step,) = walk(store, stream, after=at - 1, upto=at)
    meta = WindowMeta.decode(step.record.meta)
    tokens = None
    if meta is not None and meta.estimator is not None:
        counted = [e.tokens for e in step.view if e.tokens is not None]
        tokens = sum(counted) if len(counted) == len(step.view) else None
    summary = summary_at(store, stream, at)
    bad = cache.first_bad(key)
    digest = store.digest()
    spec = parse_policy(policy) if policy else None
    shown_what_if = None if spec is None else _what_if(store, stream, spec, at)
    changes: tuple[Shown, ...] = ()
    if diff_from is not None:
        if not 0 <= diff_from <= head.seq:
            msg = f"diff from seq {diff_from}: pick a seq from 0 to {head.seq}"
            raise ValueError(msg)
        low, high = sorted((diff_from, at))
        changes = tuple(
            show(
                c.message,
                c.entry,
                "entered" if c.left_at is None else f"left at {c.left_at}: {reason_text(c.reason)}",
            )
            for c in diff(store, stream, low, high).changes
        )
    return StepView(
        key=key,
        label=_label(key),
        seq=at,
        head=head.seq,
        kind=step.record.kind,
        when=step.record.recorded_at_text,
        window=tuple(show(e.message, e) for e in step.view),
        entered=tuple(show(e.message, e) for e in step.entered),
        left=tuple(show(d.entry.message, d.entry, reason_text(d.reason)) for d in step.departures),
        tokens=tokens,
        limit=None if meta is None else meta.limit,
        summary=None if summary is None else summary[1],
        timeline=_timeline(store, stream, at, head.seq, bad),
        bad=bad,
        digest_root=digest.root,
        digest_size=digest.size,
        what_if=shown_what_if,
        policy=policy,
        diff_from=diff_from,
        diff=changes,
    )


def _what_if(store: EventStore, key: StreamKey, spec: PolicySpec, seq: int) -> tuple[Shown, ...]:
    policy = make_policy(spec.kind, spec.limit, spec.model, False, evict_to=spec.evict_to)
    return tuple(show(m) for m in what_if(store, key, policy, seq=seq, valid_for=spec.valid_for))


def _timeline(
    store: EventStore, key: StreamKey, seq: int, head: int, bad: tuple[int, str] | None
) -> tuple[TimelineEvent, ...]:
    start = max(0, min(seq - TIMELINE_PAGE // 2, head - TIMELINE_PAGE))
    # Plain reads: a broken record must still be listed (in red), not refused.
    events = store.read(key, gt=start, limit=TIMELINE_PAGE)
    first_bad = None if bad is None else bad[0]
    return tuple(
        TimelineEvent(
            r.seq,
            r.kind,
            _summary(r),
            r.recorded_at_text[:19].replace("T", " "),
            first_bad is not None and r.seq >= first_bad,
        )
        for r in events
    )


def _summary(record: Record) -> str:
    try:
        return record_summary(record)[0].plain
    except Exception:
        return "(does not decode)"


@dataclasses.dataclass(frozen=True, slots=True)
class EventDetail:
    """One event in full."""

    key: str
    label: str
    seq: int
    kind: str
    when: str
    hash: str
    prev_hash: str
    messages: tuple[Shown, ...]
    payload: str
    meta: str


def event_detail(store: EventStore, key: str, seq: int) -> EventDetail:
    """Event ``seq`` of memory ``key``, verified, with every message it brought.

    Raises:
        LookupError: No such event.
        ChainIntegrityError: The record does not verify.
    """
    records = read_checked(store, StreamKey(key), gt=seq - 1, lte=seq)
    if not records:
        msg = f"memory {_label(key)!r} has no event {seq}"
        raise LookupError(msg)
    (record,) = records
    event = decode_event(record)
    messages: list[ChatMessage] = []
    if record.kind == "message_added":
        messages = [event.message]  # type: ignore[union-attr]
    elif record.kind == "messages_set":
        messages = list(event.messages)  # type: ignore[union-attr]
    shown = tuple(show(m) for m in messages)
    if isinstance(event, SummaryRecorded):
        shown = (Shown("summary", event.summary),)
    payload = _pretty(record.payload)
    return EventDetail(
        key,
        _label(key),
        record.seq,
        record.kind,
        record.recorded_at_text,
        record.hash,
        record.prev_hash,
        shown,
        payload,
        _pretty(record.meta),
    )


def _pretty(text: str) -> str:
    try:
        value: Any = json.loads(text)
    except ValueError:
        return text
    return json.dumps(value, indent=2, ensure_ascii=False)
