"""The panels of a memory page around its view: the timeline, the diff and the what-if.

This module owns what the page computes next to the view at a seq: the page of events around
it (:data:`TIMELINE_PAGE`), the changes from another seq (at most :data:`DIFF_PAGE` events per
page) and the window another policy would have kept (at most :data:`WHAT_IF_MAX_EVENTS` events
replayed), each bounded like every page. It is separate from :mod:`projections.inspector.views`,
which assembles the page (:func:`~projections.inspector.views.step_view`) and holds the other
pages, because each panel is its own bounded read of the log; the names stay importable from
``views``.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterable, Sequence

from eventlog.errors import ChainIntegrityError
from eventlog.formats.lc4j_json import message_to_obj
from eventlog.ids import StreamKey
from eventlog.messages import ChatMessage
from eventlog.models import Record
from eventlog.store import EventStore
from projections.audit import diff
from projections.counterfactual import what_if, what_if_newest
from projections.grammar import PolicySpec
from projections.inspector.badges import FULL_VERIFY_MAX, Badge, memory_badge, records_badge
from projections.inspector.shown import SHOWN_MAX, Listing, _listing, _ref_text, show
from projections.readmodel import event_line, make_policy, reason_text
from projections.window import Entry

__all__ = [
    "DIFF_PAGE",
    "TIMELINE_PAGE",
    "WHAT_IF_MAX_EVENTS",
    "DiffPage",
    "TimelineEvent",
    "WhatIf",
]

TIMELINE_PAGE = 40  # events listed around the current seq
DIFF_PAGE = 500
"""Events one diff page walks (about 30 ms); the page links to the next."""
WHAT_IF_MAX_EVENTS = 2_000
"""Events a what-if may replay for one page (0.2 s for a message window, 1.2 s for a token
window on the 2-core CI machine); beyond, a window without ``evict_to`` reads at most that
many of the newest events, and the page says to narrow the range when they do not settle it
(or for chunked eviction)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TimelineEvent:
    """One line of the timeline."""

    seq: int
    kind: str
    summary: str
    when: str
    broken: bool


@dataclasses.dataclass(frozen=True, slots=True)
class WhatIf:
    """One page of a what-if window: messages ``part * SHOWN_MAX`` on, of ``total``."""

    policy: str
    messages: Listing = Listing()  # noqa: RUF009 - a frozen dataclass (from shown.py)
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
    # replay cannot start midway without the state it would have had there) - unless the
    # newest events settle it (a window without evict_to: see counterfactual).
    window: list[ChatMessage] | None = None
    if seq <= WHAT_IF_MAX_EVENTS or spec.evict_to is None:
        policy = make_policy(spec.kind, spec.limit, spec.model, False, evict_to=spec.evict_to)
        window = (
            what_if(store, key, policy, seq=seq, valid_for=spec.valid_for)
            if seq <= WHAT_IF_MAX_EVENTS
            else what_if_newest(
                store, key, policy, seq=seq, most=WHAT_IF_MAX_EVENTS, valid_for=spec.valid_for
            )
        )
    if window is None:
        refused = (
            f"what-if at seq {seq} would replay {seq} events, more than the "
            f"{WHAT_IF_MAX_EVENTS} one page may: narrow the range - pick a seq up to "
            f"{WHAT_IF_MAX_EVENTS}, or run `chatledger show ID --as-of {seq} --policy {text}`"
        )
        return WhatIf(text, refused=refused)
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
