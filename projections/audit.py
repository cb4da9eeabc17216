"""Auditing a memory's history: step-by-step views, diffs with reasons, forks.

This is the Python API behind the ``chatledger`` command line (:mod:`projections.cli`); each
command is a thin layer over one function here, so scripts and tests use the same code:

* :func:`walk` - the exact view after each event, with what entered and what left and why;
* :func:`diff` - which messages entered and left the view between two seqs, with reasons;
* :func:`explain` - the life of one message: when it entered the view and why it left;
* :func:`fork` - a new memory id whose state starts as another's view at a seq.

JSON Lines export and import are log operations: :mod:`eventlog.formats.jsonl`.

:func:`walk` and :class:`Step` live in :mod:`projections.stepping` (the fold the others read
from) and are imported here, so ``from projections.audit import walk`` keeps working.

Every step folds the same :class:`~projections.window.Window` the live memory used, with the
limit the event recorded, so the reason a message left (:data:`~projections.window.Reason`) is
the one the rules gave when it left, not a guess made afterwards.
"""

from __future__ import annotations

import dataclasses
import itertools
from array import array
from collections.abc import Iterator

from eventlog.ids import MemoryId, StreamKey, memory_id_from_key
from eventlog.messages import ChatMessage
from eventlog.models import MessagesSet, Record
from eventlog.serialization import encode_event
from eventlog.store import EventStore
from eventlog.validation import shown
from projections.meta import ForkOrigin, WindowMeta
from projections.replay import (
    brought,
    materialize,
    missing_event,
    read_checked,
    view_at,
    window_meta,
)
from projections.stepping import Step, _check_seq, _head_seq, walk
from projections.window import Entry, Reason, set_system_refs

__all__ = [
    "Change",
    "DiffStream",
    "Step",
    "ViewDiff",
    "diff",
    "diff_stream",
    "explain",
    "fork",
    "walk",
]


# ---------------------------------------------------------------------------- diff / explain


@dataclasses.dataclass(frozen=True, slots=True)
class Change:
    """A message whose presence in the view changed between two seqs.

    Attributes:
        entry: The message, with the ref ``(seq, index)`` of the event that brought it.
        entered_at: The seq at which it entered the view (None: it was in the view already).
        left_at: The seq at which it left the view (None: it is still in the view).
        reason: Why it left (None while it is still in the view).
    """

    entry: Entry
    entered_at: int | None
    left_at: int | None
    reason: Reason | None

    @property
    def message(self) -> ChatMessage:
        """The message."""
        return self.entry.message


@dataclasses.dataclass(frozen=True, slots=True)
class ViewDiff:
    """How the view of a memory changed from seq ``start`` to seq ``end``.

    Attributes:
        memory_id: The memory id.
        start: The view compared from (after this seq).
        end: The view compared to (after this seq).
        changes: Every message that entered or left, in conversation order (by ref).
    """

    memory_id: MemoryId
    start: int
    end: int
    changes: tuple[Change, ...]

    @property
    def entered(self) -> tuple[Change, ...]:
        """Messages in the view at ``end`` that were not in it at ``start``."""
        return tuple(c for c in self.changes if c.entered_at is not None and c.left_at is None)

    @property
    def left(self) -> tuple[Change, ...]:
        """Messages in the view at ``start`` that are not in it at ``end``."""
        return tuple(c for c in self.changes if c.entered_at is None and c.left_at is not None)

    @property
    def passed(self) -> tuple[Change, ...]:
        """Messages that entered after ``start`` and left again by ``end`` (or never stayed)."""
        return tuple(c for c in self.changes if c.entered_at is not None and c.left_at is not None)


def _check_range(store: EventStore, key: StreamKey, start: int, end: int) -> None:
    last = _head_seq(store, key)
    _check_seq("start", start, last, key)
    _check_seq("end", end, last, key)
    if start > end:
        msg = (
            f"diff of {key!r} from seq {start} to {end}: the first seq must not be after the second"
        )
        raise ValueError(msg)


def _final_changes(store: EventStore, key: StreamKey, start: int, end: int) -> Iterator[Change]:
    """Every change of :func:`diff` once it is final, in the order that happens: a message
    when it leaves, then those still in the view at ``end``. A ref comes again when it
    re-entered after leaving (only a foreign writer's window does that): the last one holds.

    Only the messages in the view are held, so a walk over a million events stays small.
    """
    pending: dict[tuple[int, int], Change] = {}  # entered after start, still in the view
    for step in walk(store, key, after=start, upto=end):
        for entry in step.entered:
            pending[entry.ref] = Change(entry, step.seq, None, None)
        for gone in step.departures:
            ref = gone.entry.ref
            came = pending.pop(ref, None)
            if came is not None:
                entered_at = came.entered_at
            else:  # in the view at start, or brought by this event and not kept
                entered_at = step.seq if ref[0] == step.seq else None
            yield Change(gone.entry, entered_at, step.seq, gone.reason)
    yield from pending.values()


def diff(store: EventStore, memory_id: MemoryId, start: int, end: int) -> ViewDiff:
    """Which messages entered and which left the view between seq ``start`` and ``end``.

    Walks the events ``start+1 .. end`` comparing the window before and after each one, so a
    message that entered and left in between is reported too, with both seqs.

    Args:
        store: The store holding the history.
        memory_id: The memory id.
        start: The earlier seq (0: before the first event).
        end: The later seq, ``start <= end <= head``.

    Returns:
        The changes, with the reason for each departure.

    Raises:
        ValueError: A seq is outside the history, or ``start > end``.
    """
    key = store.stream_key(memory_id)
    _check_range(store, key, start, end)
    changes = {change.entry.ref: change for change in _final_changes(store, key, start, end)}
    ordered = tuple(changes[ref] for ref in sorted(changes))
    return ViewDiff(memory_id_from_key(key), start, end, ordered)


_REASONS: tuple[Reason, ...] = (
    "evicted",
    "orphan",
    "system_replaced",
    "set",
    "cleared",
    "retracted",
)
_NONE = -1  # stands for None in the int arrays of DiffStream


class DiffStream:
    """The changes of :func:`diff`, in the same order, without holding their messages.

    Made by :func:`diff_stream`, which walks the events once and keeps five numbers per
    change (about 30 bytes, against kilobytes for a decoded message); iterating reads the
    messages back a page at a time. A million changes cost tens of megabytes, not
    gigabytes, and :meth:`counts` needs no message at all.

    Changes become final in the order they leave the view, which is almost ref order:
    those that arrive in order go to flat arrays, the few that do not (a system message
    kept for the whole walk) to a list sorted once at the end.
    """

    def __init__(self, store: EventStore, key: StreamKey, start: int, end: int) -> None:
        self.store = store
        self.key = key
        self.start = start
        self.end = end
        self._seq = array("q")
        self._index = array("q")
        self._entered = array("q")
        self._left = array("q")
        self._reason = bytearray()
        # Out of ref order, with their arrival number: equal refs keep the last arrival.
        self._late: list[tuple[tuple[int, int], int, int, int, int]] = []
        for change in _final_changes(store, key, start, end):
            self._keep(change)
        self._late.sort()

    def _keep(self, change: Change) -> None:
        ref = change.entry.ref
        entered = _NONE if change.entered_at is None else change.entered_at
        left = _NONE if change.left_at is None else change.left_at
        reason = _NONE if change.reason is None else _REASONS.index(change.reason)
        if not self._seq or ref > (self._seq[-1], self._index[-1]):
            self._seq.append(ref[0])
            self._index.append(ref[1])
            self._entered.append(entered)
            self._left.append(left)
            self._reason.append(reason + 1)
        else:
            self._late.append((ref, len(self._late), entered, left, reason))

    def _facts(self) -> Iterator[tuple[tuple[int, int], int, int, int]]:
        """(ref, entered, left, reason) in ref order, one per ref: a late arrival beats an
        in-order one with the same ref (it came later)."""
        late = [
            fact
            for i, fact in enumerate(self._late)
            if i + 1 == len(self._late) or self._late[i + 1][0] != fact[0]
        ]
        at = 0
        for i in range(len(self._seq)):
            ref = (self._seq[i], self._index[i])
            while at < len(late) and late[at][0] < ref:
                yield _fact(late[at])
                at += 1
            if at < len(late) and late[at][0] == ref:
                yield _fact(late[at])  # arrived later: it holds
                at += 1
                continue
            yield ref, self._entered[i], self._left[i], self._reason[i] - 1
        for fact in late[at:]:
            yield _fact(fact)

    def counts(self) -> tuple[int, int, int]:
        """How many entered (and stayed), left, and came and went: the sizes of
        :attr:`ViewDiff.entered`, :attr:`ViewDiff.left` and :attr:`ViewDiff.passed`."""
        entered = left = passed = 0
        for _, came, went, _ in self._facts():
            if went == _NONE:
                entered += came != _NONE
            elif came == _NONE:
                left += 1
            else:
                passed += 1
        return entered, left, passed

    def __len__(self) -> int:
        return sum(1 for _ in self._facts())

    def __iter__(self) -> Iterator[Change]:
        facts = self._facts()
        while page := list(itertools.islice(facts, _DIFF_PAGE)):
            # Read back as the view showed them: checked records, the erased refused.
            entries = materialize(self.store, self.key, [ref for ref, *_ in page])
            for entry, (_, came, went, reason) in zip(entries, page, strict=True):
                yield Change(
                    entry,
                    None if came == _NONE else came,
                    None if went == _NONE else went,
                    None if reason == _NONE else _REASONS[reason],
                )


_DIFF_PAGE = 500


def _fact(
    late: tuple[tuple[int, int], int, int, int, int],
) -> tuple[tuple[int, int], int, int, int]:
    ref, _, entered, left, reason = late
    return ref, entered, left, reason


def diff_stream(store: EventStore, memory_id: MemoryId, start: int, end: int) -> DiffStream:
    """:func:`diff` for long ranges: the same changes, in the same order, with memory for a
    few numbers per change instead of every message (see :class:`DiffStream`).

    Raises:
        ValueError: A seq is outside the history, or ``start > end``.
    """
    key = store.stream_key(memory_id)
    _check_range(store, key, start, end)
    return DiffStream(store, key, start, end)


def explain(store: EventStore, memory_id: MemoryId, seq: int, index: int = 0) -> Change:
    """The life of one message in the view: when it entered and when and why it left.

    Args:
        store: The store holding the history.
        memory_id: The memory id.
        seq: The event that brought the message (a ``message_added`` or ``messages_set``).
        index: Its index in a ``messages_set`` list (0 for an add).

    Returns:
        A :class:`Change` with ``entered_at=seq`` (a message is in the view right after the
        event that brought it, unless the window could not keep it: then ``left_at=seq`` too),
        and ``left_at``/``reason`` None while it is still in the view at the head.

    Raises:
        ValueError: Event ``seq`` is outside the history, or brought no message at ``index``.
    """
    key = store.stream_key(memory_id)
    last = _head_seq(store, key)
    if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= last:
        msg = (
            f"explain event {shown(seq)} of memory {key!r}: pick a seq from 1 to {last} (the head)"
        )
        raise ValueError(msg)
    ref = (seq, index)
    entered: Entry | None = None
    for step in walk(store, key, after=seq - 1):
        if entered is None and step.seq != seq:
            break  # event seq is not read: acknowledged damage, or purged
        if step.seq == seq:
            came = {e.ref: e for e in brought(step.record)}
            if ref not in came:
                msg = (
                    f"event {seq} of memory {key!r} is a {step.record.kind} that brought "
                    f"{len(came)} message(s), none at index {shown(index)}; pick an add or set "
                    "event (see `chatledger history`)"
                )
                raise ValueError(msg)
            entered = came[ref]
        for gone in step.departures:
            if gone.entry.ref == ref:
                return Change(gone.entry, seq, step.seq, gone.reason)
    if entered is None:
        raise missing_event(store, key, seq)
    return Change(entered, seq, None, None)


# ---------------------------------------------------------------------------- fork


def fork(
    store: EventStore, memory_id: MemoryId, new_id: MemoryId, *, seq: int | None = None
) -> Record:
    """Start memory ``new_id`` as a copy of ``memory_id``'s view at ``seq``.

    ``new_id`` gets one ``messages_set`` event holding the view's messages, with a recorded
    window (:class:`~projections.meta.WindowMeta`) that keeps all of them, so a memory opened
    on ``new_id`` shows exactly that view and continues from it; the record's ``forked_from``
    names the source memory, seq and that event's hash. Token counts recorded by a token
    window are carried over. The source is not touched.

    Args:
        store: The store holding both memories.
        memory_id: The source memory id.
        new_id: The new memory id; it must have no events.
        seq: The source event whose view to copy (None: the head).

    Returns:
        The ``messages_set`` record written to ``new_id``.

    Raises:
        ValueError: The source has no events, ``seq`` is outside its history, or ``new_id``
            already has events (nothing is written).
    """
    key = store.stream_key(memory_id)
    new_key = store.stream_key(new_id)
    last = _head_seq(store, key)
    if last == 0:
        msg = f"fork of memory {key!r}: it has no events; fork an id listed by `chatledger ids`"
        raise ValueError(msg)
    target = last if seq is None else seq
    if isinstance(target, bool) or not isinstance(target, int) or not 1 <= target <= last:
        msg = (
            f"fork of memory {key!r} at seq {shown(target)}: pick a seq from 1 to {last} (the head)"
        )
        raise ValueError(msg)
    new_head = _head_seq(store, new_key)
    if new_head:
        msg = (
            f"fork of {key!r} to {new_key!r}: {new_key!r} already has {new_head} event(s); "
            "a fork starts a new memory, so pick an unused id"
        )
        raise ValueError(msg)
    (source,) = read_checked(store, key, gt=target - 1, lte=target)
    identity = window_meta(source).estimator
    entries = view_at(store, key, target, identity=identity)
    messages = tuple(e.message for e in entries)
    counts = [e.tokens for e in entries]
    tokens = [t for t in counts if t is not None]
    counted = bool(entries) and identity is not None and len(tokens) == len(entries)
    copied = [Entry(e.message, (1, i)) for i, e in enumerate(entries)]
    meta = WindowMeta.of(
        copied,
        None,
        tokens if counted else None,
        identity if counted else None,
        ForkOrigin(str(key), target, source.hash),
        system=set_system_refs(copied),  # the fork's first event is a set
    )
    # expected_seq=0 makes "new_id is empty" part of the atomic append, not just the check above.
    (written,) = store.append(
        new_key, [encode_event(MessagesSet(messages=messages), meta.encode())], expected_seq=0
    )
    return written
