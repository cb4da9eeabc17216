"""Rebuilding windows from the log: exact views at any seq, replay and what-if.

Every event a memory writes records, in its meta, the window as it stood right after the event
(a :class:`~projections.meta.WindowMeta`: references to the events the messages came from and,
for token windows, each new message's token count with the estimator's identity). Consequences:

* the view after event ``k`` is read from event ``k`` plus the events it references - O(window),
  whatever the history length, with no dependence on today's limit or tokenizer;
* a cold open is the same thing at the head, and catching up after another writer is too;
* replaying the operations (add / set / clear) through a policy - the memory's own or another
  one ("what if the window had been 20 messages?") - folds the same
  :class:`~projections.window.Window` the live memory uses.

Every read here is a verified one (:mod:`projections.checked`); :func:`read_checked`,
:func:`records` and :func:`quarantined_seqs` stay importable from this module too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import overload

from eventlog.errors import ContentErasedError
from eventlog.formats.lc4j_json import message_from_obj
from eventlog.ids import MemoryId, StreamKey
from eventlog.messages import ChatMessage
from eventlog.models import MemoryErased, MessageRetracted, Record, format_time
from eventlog.serialization import decode_event, require_opened
from eventlog.store import EventStore
from eventlog.validation import shown
from projections.checked import (
    quarantined_seqs,
    read_checked,
    records,
    seq_at_checked,
)
from projections.meta import EMPTYING_KINDS, Refs, WindowMeta
from projections.window import (
    Departure,
    Entry,
    Window,
    WindowPolicy,
)

__all__ = [
    "ContentErasedError",
    "WindowRefs",
    "apply",
    "brought",
    "erased_error",
    "materialize",
    "missing_event",
    "origin_entries",
    "purged_before",
    "quarantined_seqs",
    "read_checked",
    "records",
    "replay",
    "replay_views",
    "resolve_seq",
    "view_at",
    "window_meta",
    "window_refs",
]

_GAP = 64  # fetch referenced events in one range query unless they are this far apart


def window_meta(record: Record) -> WindowMeta:
    """The window record of an event (empty after a clear or a purge).

    Raises:
        ValueError: The record carries no window (it was not written by a chatledger memory),
            or its window record is malformed.
    """
    if record.kind in EMPTYING_KINDS:
        return WindowMeta([])
    try:
        meta = WindowMeta.decode(record.meta)
    except ValueError as e:
        msg = f"event {record.stream_id}#{record.seq} ({record.kind}): {e}"
        raise ValueError(msg) from e
    if meta is None:
        msg = (
            f"event {record.stream_id}#{record.seq} ({record.kind}) records no window; it was "
            "not written by a chatledger memory, so its view cannot be rebuilt exactly"
        )
        raise ValueError(msg)
    # A memory's window only ever holds messages of events up to the one recording it; a run
    # reaching past it was not written by a memory, and would make readers build (and read)
    # as many refs as its hostile end says.
    for run in meta.runs:
        if not 1 <= run[0] <= record.seq or (len(run) == 2 and run[1] > record.seq):
            msg = (
                f"event {record.stream_id}#{record.seq} ({record.kind}) records a window that "
                f"refers to {_run_text(run)}, outside 1..{record.seq}; it was not written by a "
                "chatledger memory - run verify(), or re-import the memory from an export"
            )
            raise ValueError(msg)
    return meta


def _run_text(run: list[int]) -> str:
    return (
        f"events {run[0]}..{run[1]}" if len(run) == 2 else f"items {run[1]}..{run[2]} of {run[0]}"
    )


class WindowRefs(Sequence[tuple[int, int]]):
    """The refs of a recorded window, kept run-length encoded until they are used.

    :func:`materialize` checks each ``messages_set`` run against the items its event really
    brought before expanding it, so a run claiming a billion items of a three-item set costs
    nothing but a refusal. Iterating expands lazily; compares equal to the expanded list.
    """

    __slots__ = ("_runs", "_size")

    def __init__(self, runs: Refs, size: int) -> None:
        self._runs = runs
        self._size = size

    @property
    def runs(self) -> Refs:
        """The runs: ``[a, b]`` events a..b, ``[s, i, j]`` items i..j of set event s."""
        return self._runs

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for run in self._runs:
            if len(run) == 2:
                yield from ((s, 0) for s in range(run[0], run[1] + 1))
            else:
                yield from ((run[0], i) for i in range(run[1], run[2] + 1))

    @overload
    def __getitem__(self, index: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, index: slice) -> list[tuple[int, int]]: ...
    def __getitem__(self, index: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(index, slice):
            return list(self)[index]
        at = index + self._size if index < 0 else index
        if not 0 <= at < self._size:
            raise IndexError(index)
        for run in self._runs:
            length = run[-1] - run[-2] + 1
            if at < length:
                return (run[0] + at, 0) if len(run) == 2 else (run[0], run[1] + at)
            at -= length
        raise IndexError(index)  # unreachable while size is the sum of the run lengths

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which are unhashable

    def __repr__(self) -> str:
        return f"WindowRefs({self._runs!r})"

    def missing(self, have: Mapping[tuple[int, int], Entry]) -> set[int]:
        """The seqs of the events to read for the refs not in ``have``, without expanding a
        set run before one of its items is known to exist."""
        seqs: set[int] = set()
        for run in self._runs:
            if len(run) == 2:
                seqs.update(s for s in range(run[0], run[1] + 1) if (s, 0) not in have)
            else:
                s, i, j = run
                # (s, j) in hand proves j is a real index, so the loop is bounded by real items.
                if (s, j) not in have or any((s, k) not in have for k in range(i, j)):
                    seqs.add(s)
        return seqs

    def check(self, have: Mapping[tuple[int, int], Entry], memory_id: MemoryId) -> None:
        """Refuse a set run reaching past the items its event brought.

        Raises:
            ValueError: A run names an item its event did not bring.
        """
        for run in self._runs:
            if len(run) == 3 and (run[0], run[2]) not in have:
                msg = (
                    f"the window of {memory_id!r} refers to {_run_text(run)}, but event "
                    f"{run[0]} brought fewer (or is not a messages_set); it was not written by "
                    "a chatledger memory - run verify()"
                )
                raise ValueError(msg)


def window_refs(record: Record) -> WindowRefs:
    """The refs of the window right after ``record`` (empty after a clear or a purge), run
    length encoded until :func:`materialize` has checked them.

    Raises:
        ValueError: The record carries no window (it was not written by a chatledger memory),
            or its window reaches past the record.
    """
    meta = window_meta(record)
    return WindowRefs(meta.runs, meta.size)


def erased_error(store: EventStore, record: Record) -> ContentErasedError:
    """The error for needing the content of the erased ``record``, naming the erasure's time
    and reason from its ``memory_erased`` receipt (the first later one covering the seq)."""
    when = "an unknown date"
    reason = "no receipt found"
    # Paged and checked like every read here: the reason shown comes from a verified receipt.
    for later in records(store, StreamKey(record.stream_id), gt=record.seq):
        if later.kind == "memory_erased" and not later.erased:
            event = decode_event(later)
            if isinstance(event, MemoryErased) and event.first_seq <= record.seq:
                when, reason = format_time(event.erased_at), repr(event.reason)
                break
    msg = (
        f"the content of memory {record.memory_id!r} was erased on {when} (reason {reason}); "
        f"its messages cannot be shown (event {record.seq} is erased)"
    )
    return ContentErasedError(msg, record.stream_id, record.seq)


def origin_entries(record: Record, identity: str | None) -> dict[tuple[int, int], Entry]:
    """The entries an add or set event contributes, keyed by ref, with recorded counts
    (none for an erased event: whoever needs one of its messages gets the erasure error)."""
    return {} if record.erased else {e.ref: e for e in brought(record, identity)}


def brought(record: Record, identity: str | None = None) -> list[Entry]:
    """The entries an add or set event brings, in order (none for other kinds), with the
    token counts recorded under ``identity`` (None: counts are not wanted).

    Raises:
        ContentErasedError: The event's content was erased (see :func:`erased_error` for
            a message naming when and why).
    """
    kind = record.kind
    if kind not in ("message_added", "messages_set"):
        return []
    if record.erased:
        msg = f"the content of event {record.stream_id}#{record.seq} was erased"
        raise ContentErasedError(msg, record.stream_id, record.seq)
    # Meta is parsed only when its counts could be used: as_of and replay don't need them.
    meta = WindowMeta.decode(record.meta) if identity is not None else None
    counts = meta.tokens if meta is not None and meta.estimator == identity else None
    require_opened(record)
    payload = json.loads(record.payload)
    if kind == "message_added":
        tokens = counts if isinstance(counts, int) else None
        return [Entry(message_from_obj(payload), (record.seq, 0), tokens)]
    if not isinstance(counts, list) or len(counts) != len(payload):
        counts = None
    return [
        Entry(message_from_obj(obj), (record.seq, i), None if counts is None else counts[i])
        for i, obj in enumerate(payload)
    ]


def materialize(
    store: EventStore,
    memory_id: MemoryId,
    refs: Sequence[tuple[int, int]],
    *,
    identity: str | None = None,
    known: Mapping[tuple[int, int], Entry] | None = None,
) -> list[Entry]:
    """Build the entries for ``refs``, reading only the events not already ``known``.

    Args:
        store: The store.
        memory_id: The memory id.
        refs: ``(seq, index)`` pairs in window order.
        identity: Token estimator identity whose recorded counts may be reused.
        known: Entries already in hand (the current window), by ref.

    Raises:
        ValueError: A referenced event is missing (purged or tampered with), or a set run of
            :class:`WindowRefs` names items its event did not bring.
    """
    have: dict[tuple[int, int], Entry] = dict(known or {})
    erased: dict[int, Record] = {}
    if isinstance(refs, WindowRefs):
        needed = sorted(refs.missing(have))
    else:
        needed = sorted({seq for seq, _ in refs if (seq, _) not in have})
    start = 0
    while start < len(needed):
        end = start
        while end + 1 < len(needed) and needed[end + 1] - needed[end] <= _GAP:
            end += 1
        for record in read_checked(store, memory_id, gt=needed[start] - 1, lte=needed[end]):
            if record.seq in needed:
                if record.erased:
                    erased[record.seq] = record
                have.update(origin_entries(record, identity))
        start = end + 1
    if erased:
        raise erased_error(store, erased[min(erased)])
    if isinstance(refs, WindowRefs):
        refs.check(have, memory_id)  # before expanding: every set run now names real items
    try:
        return [have[ref] for ref in refs]
    except KeyError as e:
        skip = quarantined_seqs(store, memory_id) if needed else set()
        if skip and all(ref in have or ref[0] in skip for ref in refs):
            return [have[ref] for ref in refs if ref in have]  # acknowledged damage left out
        msg = (
            f"the window of {memory_id!r} refers to event {e.args[0]}, which is not in the "
            "store (purged or altered); run verify()"
        )
        raise ValueError(msg) from e


def resolve_seq(
    store: EventStore, memory_id: MemoryId, *, seq: int | None, at: datetime | None
) -> int:
    """Turn ``seq=`` or ``at=`` into a seq (0 means "before the first event").

    Raises:
        ValueError: Both or neither were given, or ``seq`` is outside the history.
    """
    if (seq is None) == (at is None):
        msg = "as_of needs exactly one of seq= or at="
        raise ValueError(msg)
    if at is not None:
        found = seq_at_checked(store, memory_id, at)
        if found is None:  # before every event read: before the memory, or purged
            purged_before(store, memory_id, 0, f"as_of(at={at.isoformat()})")
        return 0 if found is None else found
    assert seq is not None  # noqa: S101 - narrowed by the check above
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        msg = f"as_of(seq={shown(seq)}): seq must be an int >= 0"
        raise ValueError(msg)
    head = store.head(memory_id)
    last = 0 if head is None else head.seq
    if seq > last:
        msg = f"as_of(seq={shown(seq)}) of {memory_id!r}: the history ends at seq {last}"
        raise ValueError(msg)
    return seq


def purged_before(store: EventStore, memory_id: MemoryId, seq: int, asked: str) -> None:
    """Refuse a look at the view after ``seq`` (0: at a time before every event read) when a
    retention purge deleted the events up to it: the view then is unknown, not empty.

    Raises:
        ValueError: The memory's history starts with a tombstone after ``seq``.
    """
    first = store.read(memory_id, limit=1)
    if first and first[0].kind == "memory_purged" and seq < first[0].seq:
        tombstone = first[0]
        msg = (
            f"{asked} of {memory_id!r}: events 1..{tombstone.seq - 1} were deleted by a "
            f"retention purge (its tombstone is seq {tombstone.seq}, "
            f"{tombstone.recorded_at_text}), so what the memory showed then is unknown; "
            f"look at seq {tombstone.seq} or later"
        )
        raise ValueError(msg)


def view_at(
    store: EventStore, memory_id: MemoryId, seq: int, *, identity: str | None = None
) -> list[Entry]:
    """The exact window right after event ``seq`` (``[]`` for seq 0)."""
    if seq == 0:
        return []
    records = read_checked(store, memory_id, gt=seq - 1, lte=seq)
    if not records:
        raise missing_event(store, memory_id, seq)
    return materialize(store, memory_id, window_refs(records[0]), identity=identity)


def missing_event(store: EventStore, memory_id: MemoryId, seq: int) -> ValueError:
    """Why event ``seq``, within the history, is not read: a damaged record acknowledged
    with ``quarantine`` (reads leave it out), or one a retention purge deleted."""
    if seq in store.quarantined(memory_id):
        msg = (
            f"event {seq} of {memory_id!r} is a damaged record acknowledged by quarantine: "
            "reads leave it out, so it shows no view; look at the events around it "
            "(`chatledger history`), or restore the record from a backup"
        )
    else:
        first = store.read(memory_id, limit=1)
        start = first[0].seq if first else seq + 1
        msg = f"event {seq} of {memory_id!r} is not in the store" + (
            f": a retention purge deleted it (the history starts at seq {start})"
            if seq < start
            else ""
        )
    return ValueError(msg)


def apply(
    window: Window, record: Record, entries: list[Entry], limit: Callable[[], int] | None
) -> list[Departure]:
    """Fold one event into ``window``, as the memory that wrote it did.

    Args:
        window: The window before the event; changed in place.
        record: The event.
        entries: What the event brought (:func:`brought`, counted as the window counts).
        limit: Returns the limit in force (None: a set keeps everything, as a fork does).

    Returns:
        The entries that left, with their reasons (none for kinds that do not touch a window).
    """
    kind = record.kind
    if kind == "message_added":
        if limit is None:
            msg = f"event {record.stream_id}#{record.seq} adds a message but records no limit"
            raise ValueError(msg)
        return window.add(entries[0], limit) or []
    if kind == "messages_set":
        return window.set(entries, None if limit is None else limit())
    if kind in EMPTYING_KINDS:
        return window.clear()
    if kind == "message_retracted":
        event = decode_event(record)
        if isinstance(event, MessageRetracted):
            return window.retract((event.seq, event.index))
    return []


def _counted(policy: WindowPolicy, entries: list[Entry]) -> list[Entry]:
    return [Entry(e.message, e.ref, policy.count(e.message)) for e in entries]


def replay(
    store: EventStore, memory_id: MemoryId, policy: WindowPolicy, *, lte: int | None = None
) -> Iterator[tuple[Record, list[Entry], list[Departure]]]:
    """Replay the history through ``policy``: each event with the view after it (entries
    carry the refs of the events that brought them) and what left the window at it, why."""
    window = Window(policy)
    limit = _limit_of(policy, memory_id)
    for record in records(store, memory_id, lte=lte):
        departures = apply(window, record, _counted(policy, _brought(store, record)), limit)
        yield record, window.view(limit()), departures


def replay_views(
    store: EventStore, memory_id: MemoryId, policy: WindowPolicy, *, lte: int | None = None
) -> Iterator[tuple[Record, list[ChatMessage]]]:
    """Replay the history through ``policy``, yielding each event with the view after it."""
    for record, view, _ in replay(store, memory_id, policy, lte=lte):
        yield record, [e.message for e in view]


def _brought(store: EventStore, record: Record) -> list[Entry]:
    """:func:`brought`, with the receipt's time and reason when the content was erased."""
    if record.erased and record.kind in ("message_added", "messages_set"):
        raise erased_error(store, record)
    return brought(record)


def _limit_of(policy: WindowPolicy, memory_id: MemoryId) -> Callable[[], int]:
    return lambda: policy.limit_for(memory_id)
