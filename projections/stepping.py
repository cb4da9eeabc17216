"""Stepping through a memory's history: the exact view after each event, and why it changed.

:func:`walk` folds the same :class:`~projections.window.Window` the live memory used, with the
limit each event recorded, into one :class:`Step` per event (what entered the view, what left
and why). It is separate from :mod:`projections.audit` because it is the fold everything else
reads from - the diffs and ``explain`` there, the inspector's views, the read model and the
summarizing memory - while the audit functions are answers built on top of it. ``walk`` and
``Step`` are still importable from :mod:`projections.audit`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from eventlog.ids import MemoryId, StreamKey
from eventlog.messages import ChatMessage, SystemMessage
from eventlog.models import Record
from eventlog.store import EventStore
from eventlog.validation import shown
from projections.meta import EMPTYING_KINDS, WindowMeta, encode_refs
from projections.replay import (
    WindowRefs,
    apply,
    brought,
    materialize,
    read_checked,
    records,
    window_meta,
    window_refs,
)
from projections.window import (
    Departure,
    Entry,
    MessageWindowPolicy,
    Reason,
    TokenWindowPolicy,
    Window,
    WindowPolicy,
)

__all__ = ["Step", "walk"]


# ---------------------------------------------------------------------------- stepping


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """One event of a memory's history with the view right after it.

    Attributes:
        record: The event's stored record.
        view: The exact view after the event (what ``as_of(seq=record.seq)`` returns).
        entered: Entries that are in ``view`` but were not in the view before the event.
        departures: Entries that left at this event, in the order they stood in the window.
            Messages the event brought but the window did not keep (a set larger than the
            window, a message over the token budget) are included: they entered and left at
            once.
        replayed: True when folding the window rules with the event's recorded limit gave
            exactly the recorded window, so every reason is the one the rules gave. False
            when they did not (part of the window was counted by another estimator, or the
            event was written by something other than a chatledger memory): the recorded
            window is shown, and what left it is named by the event kind alone.
    """

    record: Record
    view: tuple[Entry, ...]
    entered: tuple[Entry, ...]
    departures: tuple[Departure, ...]
    replayed: bool = True

    @property
    def seq(self) -> int:
        """The event's seq."""
        return self.record.seq


class _Uncounted(Exception):
    """The recorded counts cannot reproduce a token window's total (see _RecordedCounts)."""


class _RecordedCounts:
    """A token estimator that knows only what the log recorded: each message's count (carried
    by its entry) and the list overhead, which for the OpenAI estimator follows from the model
    in its identity (``openai:<model>:...``: 2 for models starting with "o", else 3; the rule
    lives in :class:`~projections.tokens.OpenAiTokenCountEstimator`). Anything else raises, and
    the step falls back to the recorded window."""

    def __init__(self, identity: str) -> None:
        self.identity = identity
        parts = identity.split(":")
        self.messages_overhead: int | None = None
        if len(parts) > 2 and parts[0] == "openai":
            self.messages_overhead = 2 if parts[1].startswith("o") else 3

    def estimate_token_count_in_text(self, text: str | None) -> int:
        raise _Uncounted

    def estimate_token_count_in_message(self, message: ChatMessage) -> int:
        raise _Uncounted

    def estimate_token_count_in_messages(self, messages: object) -> int:
        raise _Uncounted


class _Replay:
    """Folds a memory's events into a Window with the limits they recorded."""

    def __init__(self, store: EventStore, key: StreamKey, start: list[Entry]) -> None:
        self.store = store
        self.key = key
        self.view = tuple(start)
        self.policies: dict[tuple[str | None, bool, int | None], WindowPolicy] = {}

    def _policy(self, estimator: str | None, keep_first: bool, evict: int | None) -> WindowPolicy:
        # The limits come from each event's record; the one given here is never used.
        policy = self.policies.get((estimator, keep_first, evict))
        if policy is None:
            evict_to = None if evict is None else evict / 1000
            if estimator is None:
                policy = MessageWindowPolicy(
                    1, always_keep_system_message_first=keep_first, evict_to=evict_to
                )
            else:
                policy = TokenWindowPolicy(
                    1,
                    _RecordedCounts(estimator),
                    always_keep_system_message_first=keep_first,
                    evict_to=evict_to,
                )
            self.policies[(estimator, keep_first, evict)] = policy
        return policy

    def _fold(
        self, record: Record, meta: WindowMeta, new: list[Entry], keep_first: bool
    ) -> tuple[Window, list[Departure]] | None:
        """The window rules applied to the event with its recorded limit, or None when they
        do not give the recorded window."""
        window = Window(self._policy(meta.estimator, keep_first, meta.evict_permille), self.view)
        limit = meta.limit
        try:
            departures = apply(window, record, new, None if limit is None else lambda: limit)
        except (_Uncounted, ValueError):
            return None
        # Compared encoded: a hostile run is never expanded here (materialize checks it).
        if encode_refs(window.entries) != meta.runs:
            return None
        return window, departures

    def step(self, record: Record) -> Step:
        before = self.view
        meta = window_meta(record)
        new = brought(record, meta.estimator) if meta.estimator else brought(record)
        # Where a replacement system message goes (first or last) is a memory setting the log
        # does not record: the recorded window tells which one was in force.
        folded = self._fold(record, meta, new, keep_first=False)
        if folded is None and new and isinstance(new[0].message, SystemMessage):
            folded = self._fold(record, meta, new, keep_first=True)
        if folded is not None:
            entries, departures, replayed = folded[0].entries, folded[1], True
        else:
            # Not what a memory with these rules writes (another estimator counted part of
            # the window, or a foreign writer): the recorded window is the truth, and what is
            # gone from it left for the only reason the event kind can tell.
            entries = self._materialize(before, new, window_refs(record))
            departures = self._recorded_departures(record, before, new, entries)
            replayed = False
        self.view = tuple(entries)
        had = {e.ref for e in before}
        entered = tuple(e for e in self.view if e.ref not in had)
        return Step(record, self.view, entered, tuple(departures), replayed)

    def _materialize(
        self, before: tuple[Entry, ...], new: list[Entry], refs: WindowRefs
    ) -> list[Entry]:
        known = {e.ref: e for e in (*before, *new)}
        return materialize(self.store, self.key, refs, known=known)

    @staticmethod
    def _recorded_departures(
        record: Record, before: tuple[Entry, ...], new: list[Entry], kept_entries: list[Entry]
    ) -> list[Departure]:
        kept = {e.ref for e in kept_entries}
        reason: Reason = "evicted"
        if record.kind in EMPTYING_KINDS:
            reason = "cleared"
        elif record.kind == "message_retracted":
            reason = "retracted"
        elif record.kind == "messages_set":
            reason = "set"
        gone = [Departure(e, reason) for e in before if e.ref not in kept]
        return gone + [Departure(e, "evicted") for e in new if e.ref not in kept]


def _head_seq(store: EventStore, key: StreamKey) -> int:
    head = store.head(key)
    return 0 if head is None else head.seq


def _check_seq(name: str, seq: object, last: int, key: str) -> int:
    if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= last:
        msg = f"{name}={shown(seq)} for memory {key!r}: pick a seq from 0 to {last} (the head)"
        raise ValueError(msg)
    return seq


def walk(
    store: EventStore, memory_id: MemoryId, *, after: int = 0, upto: int | None = None
) -> Iterator[Step]:
    """Step through a memory's events, yielding the exact view after each one.

    The views are the recorded ones (what ``memory.as_of(seq=...)`` returns), rebuilt
    incrementally: the view at ``after`` is read once, then every event costs only itself.

    Args:
        store: The store holding the history.
        memory_id: The memory id.
        after: Start after this seq (0: from the first event).
        upto: Stop after this seq (None: at the head).

    Yields:
        One :class:`Step` per event in ``(after, upto]``.

    Raises:
        ValueError: ``after`` or ``upto`` is outside the history, or an event records no
            window (it was not written by a chatledger memory).
    """
    key = store.stream_key(memory_id)
    last = _head_seq(store, key)
    _check_seq("after", after, last, key)
    if upto is not None:
        _check_seq("upto", upto, last, key)
    found = read_checked(store, key, gt=after - 1, lte=after) if after else []
    if after and not found:
        # Left out by reads (acknowledged damage, purged): from the newest event read before
        # it, as the walk steps over such an event in the middle of a history.
        found = read_checked(store, key, lte=after, desc=True, limit=1)
    start = (
        materialize(store, key, window_refs(found[0]), identity=window_meta(found[0]).estimator)
        if found
        else []
    )
    replay = _Replay(store, key, start)
    for record in records(store, key, gt=after, lte=upto):
        yield replay.step(record)
