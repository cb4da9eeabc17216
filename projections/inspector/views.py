"""What the inspector shows, computed from the log: no HTML here, nothing written.

Each page is one of these reads, and each is bounded whatever the URL asks: a page is made
on a worker thread while other pages are served, so one request must not be able to take
minutes or megabytes. Stepping costs O(window), whatever the history's length: the view at a
seq is read from that event's window record and what changed at it from one audit step
(:func:`projections.audit.walk` over one event). The timeline is a page of events around the
seq, never the whole history. A diff covers at most :data:`DIFF_PAGE` events per page (with a
link to the next), a what-if replays at most :data:`WHAT_IF_MAX_EVENTS` events (beyond, the page
says to narrow the range), and no list shows more than :data:`SHOWN_MAX` messages. The badge is
computed for the page (:mod:`projections.inspector.badges`).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from itertools import islice
from typing import Any

from eventlog.contents import ImageContent, TextContent
from eventlog.errors import ChainIntegrityError, EventLogError
from eventlog.formats.lc4j_json import message_to_obj
from eventlog.ids import StreamKey, memory_id_from_key
from eventlog.messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    ToolExecutionResultMessage,
    UserMessage,
)
from eventlog.models import Record, SummaryRecorded
from eventlog.serialization import decode_event
from eventlog.store import EventStore
from projections.audit import diff, walk
from projections.grammar import PolicySpec, parse_policy
from projections.inspector.badges import (
    FULL_VERIFY_MAX,
    INDEX_VERIFY_BUDGET,
    UNCHECKED,
    Badge,
    memory_badge,
    records_badge,
)
from projections.inspector.text import link_target
from projections.meta import UNBOUNDED_LIMIT, WindowMeta
from projections.readmodel import (
    call_names,
    describe,
    erased_id_label,
    event_line,
    make_policy,
    reason_text,
    shown_key,
    summary_at,
)
from projections.replay import brought, read_checked, what_if
from projections.window import Entry

__all__ = [
    "DIFF_PAGE",
    "INDEX_PAGE",
    "SHOWN_MAX",
    "SORTS",
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
    "step_view",
]

TIMELINE_PAGE = 40  # events listed around the current seq
DIFF_PAGE = 500
"""Events one diff page walks (about 30 ms); the page links to the next."""
WHAT_IF_MAX_EVENTS = 2_000
"""Events a what-if may replay for one page (0.2 s for a message window, 1.2 s for a token
window on the 2-core CI machine); beyond, the page says to narrow the range."""
SHOWN_MAX = 200
"""Messages one list shows (a window, a what-if page, a diff page, an event's messages)."""
INDEX_PAGE = 200
"""Memories the list page shows; it links to the next."""
TEXT_MAX = 100_000
"""Characters of an event's payload or window record shown on its page."""


@dataclasses.dataclass(frozen=True, slots=True)
class Shown:
    """One message as a page shows it (all text is escaped by the templates)."""

    role: str
    text: str
    ref: str = ""
    tokens: int | None = None
    calls: tuple[tuple[str, str, str], ...] = ()  # (id, name, arguments)
    images: tuple[tuple[str, str | None], ...] = ()  # (text, http(s) href or None): never loaded
    note: str = ""  # why it left, for departures


def show(
    message: ChatMessage,
    entry: Entry | None = None,
    note: str = "",
    names: dict[str, str] | None = None,
) -> Shown:
    """A message for a page: role, its whole text, tool calls with arguments, image links;
    ``names`` (call id -> tool name, :func:`tool_names`) names the tool of a result that does
    not carry it (the Agents SDK's outputs)."""
    role, text = describe(message, None if names is None else dict(names))
    calls: tuple[tuple[str, str, str], ...] = ()
    images: tuple[tuple[str, str | None], ...] = ()
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
            (c.url, link_target(c.url)) if c.url else ("(inline image data)", None)
            for c in message.contents
            if isinstance(c, ImageContent)
        )
        text = "\n".join(parts)
        if isinstance(message, ToolExecutionResultMessage):
            name = message.tool_name or (names or {}).get(message.id or "")
            head = f"{name or 'tool'} (call {message.id})"
            text = f"{head}{' [error]' if message.is_error else ''}: {text}"
        elif message.name:
            text = f"{message.name}: {text}"
    elif isinstance(message, SystemMessage):
        text = message.text
    ref = "" if entry is None else _ref_text(entry.ref)
    tokens = None if entry is None else entry.tokens
    return Shown(role, text, ref, tokens, calls, images, note)


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


def _ref_text(ref: tuple[int, int]) -> str:
    return str(ref[0]) if ref[1] == 0 else f"{ref[0]}.{ref[1]}"


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
class Listing:
    """Up to :data:`SHOWN_MAX` messages of a longer list, and how many were left out."""

    items: tuple[Shown, ...] = ()
    more: int = 0

    def __iter__(self) -> Iterator[Shown]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def _listing(shown: Iterable[Shown], total: int) -> Listing:
    items = tuple(islice(shown, SHOWN_MAX))
    return Listing(items, total - len(items))


@dataclasses.dataclass(frozen=True, slots=True)
class WhatIf:
    """One page of a what-if window: messages ``part * SHOWN_MAX`` on, of ``total``."""

    policy: str
    messages: Listing = Listing()
    total: int = 0
    part: int = 0
    next_part: int | None = None
    refused: str = ""  # why it was not computed: the range to narrow
    only: int = 0  # messages of the what-if window the recorded one lacks (marked by note)
    dropped: frozenset[str] = frozenset()  # refs of recorded messages the what-if drops


@dataclasses.dataclass(frozen=True, slots=True)
class DiffPage:
    """The changes between seq ``low`` and ``high`` (at most :data:`DIFF_PAGE` events), and
    the ``from`` of the next page when the asked range goes on."""

    low: int
    high: int
    changes: Listing
    next_from: int | None
    next_seq: int


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
    digest = store.digest()
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


ONLY_WHAT_IF = "kept only under this policy"


def _unmatched(these: Iterable[ChatMessage], others: Iterable[ChatMessage]) -> list[bool]:
    """For each of ``these``, whether ``others`` lacks it (counted, so a message said twice
    and kept once is one match)."""
    left = Counter(_identity(m) for m in others)
    marks = []
    for message in these:
        identity = _identity(message)
        marks.append(left[identity] == 0)
        left[identity] -= 1
    return marks


def _identity(message: ChatMessage) -> str:
    return json.dumps(message_to_obj(message), sort_keys=True, ensure_ascii=False)


def _what_if(
    store: EventStore,
    key: StreamKey,
    spec: PolicySpec,
    text: str,
    seq: int,
    *,
    part: int,
    recorded: Sequence[Entry] = (),
) -> WhatIf:
    # A what-if replays every event up to seq under the other policy: the one piece of a page
    # whose work grows with the history, so it is capped rather than paged by events (a
    # replay cannot start midway without the state it would have had there).
    if seq > WHAT_IF_MAX_EVENTS:
        refused = (
            f"what-if at seq {seq} would replay {seq} events, more than the "
            f"{WHAT_IF_MAX_EVENTS} one page may: narrow the range - pick a seq up to "
            f"{WHAT_IF_MAX_EVENTS}, or run `chatledger show ID --as-of {seq} --policy {text}`"
        )
        return WhatIf(text, refused=refused)
    policy = make_policy(spec.kind, spec.limit, spec.model, False, evict_to=spec.evict_to)
    window = what_if(store, key, policy, seq=seq, valid_for=spec.valid_for)
    first = part * SHOWN_MAX
    if first and first >= len(window):
        msg = f"what-if page {part}: the window has {len(window)} messages, pick a lower page"
        raise ValueError(msg)
    page = window[first : first + SHOWN_MAX]
    later = first + SHOWN_MAX < len(window)
    # What differs is marked: what only the other policy keeps, what it drops of the recorded.
    only = _unmatched(window, (e.message for e in recorded))
    dropped = _unmatched((e.message for e in recorded), window)
    return WhatIf(
        text,
        Listing(
            tuple(
                show(m, note=ONLY_WHAT_IF if mark else "")
                for m, mark in zip(page, only[first : first + SHOWN_MAX], strict=True)
            )
        ),
        len(window),
        part,
        part + 1 if later else None,
        only=sum(only),
        dropped=frozenset(_ref_text(e.ref) for e, d in zip(recorded, dropped, strict=True) if d),
    )


def _diff_page(store: EventStore, key: StreamKey, diff_from: int, seq: int) -> DiffPage:
    low, high = sorted((diff_from, seq))
    # Paged by events: the walk costs what the events between the two seqs cost, and a page
    # takes DIFF_PAGE of them; the next page starts where this one ended.
    end = min(high, low + DIFF_PAGE)
    changes = diff(store, key, low, end).changes
    shown = (
        show(
            c.message,
            c.entry,
            "entered" if c.left_at is None else f"left at {c.left_at}: {reason_text(c.reason)}",
        )
        for c in changes
    )
    return DiffPage(low, end, _listing(shown, len(changes)), end if end < high else None, high)


def _timeline(
    store: EventStore, key: StreamKey, seq: int, head: int
) -> tuple[tuple[TimelineEvent, ...], Badge]:
    """The events around ``seq`` and the page's badge: the whole chain for a small memory,
    else the events listed (and the link of the first to the one before it)."""
    start = max(0, min(seq - TIMELINE_PAGE // 2, head - TIMELINE_PAGE))
    # Plain reads: a broken record must still be listed (in red), not refused.
    before = store.read(key, gt=start - 1, lte=start) if start else []
    events = store.read(key, gt=start, limit=TIMELINE_PAGE)
    if head <= FULL_VERIFY_MAX:
        badge = memory_badge(store, key, head)
    else:
        badge = records_badge(store, [*before, *events], whole=False)
        if badge.checked and badge.first < (events[0].seq if events else 0):
            badge = dataclasses.replace(badge, first=events[0].seq)
    if badge.bad is None and head > FULL_VERIFY_MAX:
        # The listed events verified among themselves; the read path's checks add the sealed
        # head and the first record (a truncated tail, a deleted start) at the cost of a few
        # lookups, whatever the length.
        try:
            store.read_verified(key, gt=start, limit=TIMELINE_PAGE)
        except ChainIntegrityError as e:
            badge = dataclasses.replace(badge, bad=(e.seq, e.reason))
    first_bad = None if badge.bad is None else badge.bad[0]
    timeline = tuple(
        TimelineEvent(
            r.seq,
            r.kind,
            # Listed, so the break shows where it is, but never with content the chain does
            # not vouch for.
            _summary(r) if first_bad is None or r.seq < first_bad else _UNVOUCHED,
            r.recorded_at_text[:19].replace("T", " "),
            first_bad is not None and r.seq >= first_bad,
        )
        for r in events
    )
    return timeline, badge


_UNVOUCHED = "(not shown: at or after the break, the chain does not vouch for it)"


def _summary(record: Record) -> str:
    try:
        return event_line(record).plain
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
