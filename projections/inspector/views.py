"""What the inspector shows, computed from the log: no HTML here, nothing written.

Each page is one of these reads, and each is bounded whatever the URL asks: a page is made
on a worker thread while other pages are served, so one request must not be able to take
minutes or megabytes. Stepping costs O(window), whatever the history's length: the view at a
seq is read from that event's window record and what changed at it from one audit step
(:func:`projections.audit.walk` over one event). The timeline is a page of events around the
seq, never the whole history. A diff covers at most :data:`DIFF_PAGE` events per page (with a
link to the next), a what-if replays or reads at most :data:`WHAT_IF_MAX_EVENTS` events
(beyond, the page says to narrow the range), and no list shows more than :data:`SHOWN_MAX`
messages. The badge is computed for the page (:mod:`projections.inspector.badges`).

How a message and a capped list of them appear is :mod:`projections.inspector.shown`; the memory
page's timeline, diff and what-if panels are :mod:`projections.inspector.step_panels`. Their
names are importable from here too.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from eventlog.errors import EventLogError
from eventlog.ids import StreamKey
from eventlog.ledger import digest as ledger_digest
from eventlog.messages import ChatMessage, ToolExecutionResultMessage
from eventlog.models import SummaryRecorded
from eventlog.serialization import decode_event
from eventlog.store import EventStore
from projections.audit import walk
from projections.grammar import parse_policy
from projections.inspector.badges import (
    FULL_VERIFY_MAX,
    INDEX_VERIFY_BUDGET,
    UNCHECKED,
    Badge,
    memory_badge,
)
from projections.inspector.shown import SHOWN_MAX, Listing, Shown, _label, _listing, show

# TIMELINE_PAGE and ONLY_WHAT_IF were defined here before the split: still importable.
from projections.inspector.step_panels import (
    DIFF_PAGE,
    ONLY_WHAT_IF,
    TIMELINE_PAGE,
    WHAT_IF_MAX_EVENTS,
    DiffPage,
    TimelineEvent,
    WhatIf,
    _diff_page,
    _timeline,
    _what_if,
)
from projections.meta import UNBOUNDED_LIMIT, WindowMeta
from projections.readmodel import call_names, erased_id_label, reason_text, shown_key, summary_at
from projections.replay import brought, read_checked

__all__ = [
    "DIFF_PAGE",
    "INDEX_PAGE",
    "ONLY_WHAT_IF",
    "SHOWN_MAX",
    "SORTS",
    "TIMELINE_PAGE",
    "WHAT_IF_MAX_EVENTS",
    "DiffPage",
    "EventDetail",
    "IndexPage",
    "Listing",
    "MemoryRow",
    "Shown",
    "StepView",
    "WhatIf",
    "event_detail",
    "memory_label",
    "memory_rows",
    "show",
    "step_view",
]

INDEX_PAGE = 200
"""Memories the list page shows; it links to the next."""
TEXT_MAX = 100_000
"""Characters of an event's payload or window record shown on its page."""


# How far back a page looks for the calls its tool results answer: the call is almost always a
# few events before its result, and a page must not cost the memory's whole history.
CALL_LOOKBACK = 200


def tool_names(
    store: EventStore, key: StreamKey, seq: int, messages: Iterable[ChatMessage]
) -> dict[str, str]:
    """Call id -> tool name for the tool results among ``messages``: from the calls among them,
    else from the calls of the ``CALL_LOOKBACK`` events up to ``seq`` (verified reads)."""
    shown = list(messages)
    names = call_names(shown)
    wanted = {
        m.id
        for m in shown
        if isinstance(m, ToolExecutionResultMessage) and not m.tool_name and m.id
    } - names.keys()
    if wanted:
        try:
            records = read_checked(store, key, gt=max(0, seq - CALL_LOOKBACK), lte=seq)
            names |= call_names(e.message for r in records if not r.erased for e in brought(r))
        except (EventLogError, ValueError):
            pass  # a name is a courtesy: the page shows what it verified, the call id stays
    return names


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryRow:
    """One memory on the list page."""

    key: str
    label: str
    events: int
    last_activity: datetime
    badge: Badge


@dataclasses.dataclass(frozen=True, slots=True)
class IndexPage:
    """The list page: up to :data:`INDEX_PAGE` memories, and where the next page starts."""

    rows: tuple[MemoryRow, ...]
    total: int
    offset: int
    next_offset: int | None


SORTS = ("activity", "size", "id")
"""The list page's orders: newest activity first, most events first, ids A to Z."""


def memory_rows(
    store: EventStore, needle: str = "", offset: int = 0, *, sort: str = "activity"
) -> IndexPage:
    """The memories whose id contains ``needle``, in ``sort`` order (:data:`SORTS`),
    ``INDEX_PAGE`` from ``offset``, each with its badge: verified whole, now, while the page's
    budget of :data:`INDEX_VERIFY_BUDGET` events lasts (a larger memory is left unchecked)."""
    if offset < 0:
        msg = f"list offset {offset}: use 0 or more"
        raise ValueError(msg)
    if sort not in SORTS:
        msg = f"sort {sort[:40]!r}: use one of {', '.join(SORTS)}"
        raise ValueError(msg)
    labelled = (
        (info, erased_id_label(store, info) or _label(shown_key(info))) for info in store.streams()
    )
    infos = [pair for pair in labelled if needle.lower() in pair[1].lower()]
    if sort == "id":
        infos.sort(key=lambda pair: pair[1])
    elif sort == "size":
        infos.sort(key=lambda pair: (pair[0].event_count, pair[0].last_recorded_at), reverse=True)
    else:
        infos.sort(key=lambda pair: pair[0].last_recorded_at, reverse=True)
    budget = INDEX_VERIFY_BUDGET
    rows = []
    for info, label in infos[offset : offset + INDEX_PAGE]:
        badge = UNCHECKED
        if info.event_count <= min(budget, FULL_VERIFY_MAX):
            budget -= info.event_count
            badge = memory_badge(store, info.stream_id, info.event_count)
        rows.append(
            MemoryRow(info.stream_id, label, info.event_count, info.last_recorded_at, badge)
        )
    more = offset + INDEX_PAGE
    return IndexPage(tuple(rows), len(infos), offset, more if more < len(infos) else None)


def memory_label(key: str) -> str:
    """A memory's id as pages show it (a tuple as JSON)."""
    return _label(key)


@dataclasses.dataclass(frozen=True, slots=True)
class StepView:
    """One memory at one seq: everything the memory page shows."""

    key: str
    label: str
    seq: int
    head: int
    kind: str
    when: str
    window: Listing
    entered: Listing
    left: Listing
    tokens: int | None
    limit: int | None
    summary: str | None
    timeline: tuple[TimelineEvent, ...]
    badge: Badge
    digest_root: str
    digest_size: int
    what_if: WhatIf | None = None
    diff_from: int | None = None
    diff: DiffPage | None = None


def step_view(
    store: EventStore,
    key: str,
    seq: int | None,
    *,
    policy: str = "",
    diff_from: int | None = None,
    part: int = 0,
) -> StepView:
    """The memory page at ``seq`` (None: the head); ``part`` is the what-if page.

    Raises:
        LookupError: The memory has no events.
        ValueError: ``seq``, ``diff_from``, ``part`` or ``policy`` is not valid (the message
            says why).
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
    if diff_from is not None and not 0 <= diff_from <= head.seq:
        msg = f"diff from seq {diff_from}: pick a seq from 0 to {head.seq}"
        raise ValueError(msg)
    if part < 0:
        msg = f"what-if page {part}: use 0 or more"
        raise ValueError(msg)
    spec = parse_policy(policy) if policy else None
    timeline, badge = _timeline(store, stream, at, head.seq)
    (step,) = walk(store, stream, after=at - 1, upto=at)
    meta = WindowMeta.decode(step.record.meta)
    tokens = None
    if meta is not None and meta.estimator is not None:
        counted = [e.tokens for e in step.view if e.tokens is not None]
        tokens = sum(counted) if len(counted) == len(step.view) else None
    summary = summary_at(store, stream, at)
    digest = ledger_digest(store, save=False)  # the inspector writes nothing, not even a cache
    departures = step.departures
    names = tool_names(
        store,
        stream,
        at,
        [
            *(e.message for e in step.view),
            *(e.message for e in step.entered),
            *(d.entry.message for d in departures),
        ],
    )
    return StepView(
        key=key,
        label=_label(key),
        seq=at,
        head=head.seq,
        kind=step.record.kind,
        when=step.record.recorded_at_text,
        window=_listing((show(e.message, e, names=names) for e in step.view), len(step.view)),
        entered=_listing(
            (show(e.message, e, names=names) for e in step.entered), len(step.entered)
        ),
        left=_listing(
            (show(d.entry.message, d.entry, reason_text(d.reason), names) for d in departures),
            len(departures),
        ),
        tokens=tokens,
        # A session's list records no window: shown as such, never as its sentinel limit.
        limit=None if meta is None or meta.limit == UNBOUNDED_LIMIT else meta.limit,
        summary=None if summary is None else summary[1],
        timeline=timeline,
        badge=badge,
        digest_root=digest.root,
        digest_size=digest.size,
        what_if=None
        if spec is None
        else _what_if(store, stream, spec, policy, at, part=part, recorded=step.view),
        diff_from=diff_from,
        diff=None if diff_from is None else _diff_page(store, stream, diff_from, at),
    )


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
    messages: Listing
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
    shown = _listing(map(show, messages), len(messages))
    if isinstance(event, SummaryRecorded):
        shown = Listing((Shown("summary", event.summary),))
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
    """``text`` indented when it is JSON; past :data:`TEXT_MAX` characters, cut with a note
    (a set of a hundred thousand messages is megabytes: the page shows its messages)."""
    if len(text) > TEXT_MAX:
        left = len(text) - TEXT_MAX
        return f"{text[:TEXT_MAX]}\n... {left} more characters (export the memory to read them)"
    try:
        value: Any = json.loads(text)
    except ValueError:
        return text
    return json.dumps(value, indent=2, ensure_ascii=False)
