"""Rebuilding windows from the log: exact views at any seq, replay and what-if.

Every event a memory writes records, in its meta, the window as it stood right after the event
(``"w"``: references to the events the messages came from, run-length encoded) and, for token
windows, each new message's token count with the estimator's identity. Consequences:

* the view after event ``k`` is read from event ``k`` plus the events it references - O(window),
  whatever the history length, with no dependence on today's limit or tokenizer;
* a cold open is the same thing at the head, and catching up after another writer is too;
* replaying the operations (add / set / clear) through a policy - the memory's own or another
  one ("what if the window had been 20 messages?") - reuses the exact same rule functions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime

from eventlog.ids import MemoryId
from eventlog.lc4j_json import message_from_obj
from eventlog.messages import ChatMessage
from eventlog.models import Record
from eventlog.serialization import decode_meta
from eventlog.store import EventStore
from projections.windows import Entry, WindowPolicy, add_with_system_rules

__all__ = [
    "Refs",
    "decode_refs",
    "encode_refs",
    "materialize",
    "origin_entries",
    "replay_views",
    "resolve_seq",
    "view_at",
    "what_if",
]

Refs = list[list[int]]

_PAGE = 2_000
_GAP = 64  # fetch referenced events in one range query unless they are this far apart


def encode_refs(entries: Sequence[Entry]) -> Refs:
    """Run-length encode the refs of a window.

    ``[a, b]`` stands for refs ``(a, 0) .. (b, 0)`` (consecutive events, e.g. adds) and
    ``[s, i, j]`` for ``(s, i) .. (s, j)`` (items of one ``set``). A typical window is one or
    two runs, so recording it with every event costs a few bytes.
    """
    # Runs on every add, so the state lives in locals: `kind` 2 is an add-run [a, b], 3 a
    # set-run [a, b..c] (a = seq, b..c = indexes), 0 none yet.
    runs: Refs = []
    kind = a = b = c = 0
    for entry in entries:
        seq, idx = entry.ref
        if kind == 2:
            if idx == 0 and seq == b + 1:
                b = seq
                continue
            if idx == 1 and a == seq == b:  # (s, 0) then (s, 1): items of one set
                kind, b, c = 3, 0, 1
                continue
            runs.append([a, b])
        elif kind == 3:
            if seq == a and idx == c + 1:
                c = idx
                continue
            runs.append([a, b, c])
        if idx == 0:
            kind, a, b = 2, seq, seq
        else:
            kind, a, b, c = 3, seq, idx, idx
    if kind == 2:
        runs.append([a, b])
    elif kind == 3:
        runs.append([a, b, c])
    return runs


def decode_refs(runs: Refs) -> list[tuple[int, int]]:
    """Inverse of :func:`encode_refs`."""
    refs: list[tuple[int, int]] = []
    for run in runs:
        if len(run) == 2:
            refs.extend((s, 0) for s in range(run[0], run[1] + 1))
        else:
            refs.extend((run[0], i) for i in range(run[1], run[2] + 1))
    return refs


def window_refs(record: Record) -> list[tuple[int, int]]:
    """The refs of the window right after ``record`` (empty after a clear or a purge).

    Raises:
        ValueError: The record carries no window (it was not written by a chatledger memory).
    """
    if record.kind in ("memory_cleared", "memory_purged"):
        return []
    meta = decode_meta(record)
    if "w" not in meta:
        msg = (
            f"event {record.stream_id}#{record.seq} ({record.kind}) records no window; it was "
            "not written by a chatledger memory, so its view cannot be rebuilt exactly"
        )
        raise ValueError(msg)
    return decode_refs(meta["w"])


def origin_entries(record: Record, identity: str | None) -> dict[tuple[int, int], Entry]:
    """The entries an add or set event contributes, keyed by ref, with recorded counts."""
    # Meta is parsed only when its counts could be used: as_of and replay don't need them.
    meta = decode_meta(record) if identity is not None else {}
    reuse = identity is not None and meta.get("est") == identity
    payload = json.loads(record.payload)
    if record.kind == "message_added":
        tokens = meta.get("tok") if reuse else None
        return {(record.seq, 0): Entry(message_from_obj(payload), (record.seq, 0), tokens)}
    if record.kind == "messages_set":
        counts = meta.get("tok") if reuse else None
        return {
            (record.seq, i): Entry(
                message_from_obj(obj), (record.seq, i), counts[i] if counts is not None else None
            )
            for i, obj in enumerate(payload)
        }
    return {}


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
        ValueError: A referenced event is missing (purged or tampered with).
    """
    have: dict[tuple[int, int], Entry] = dict(known or {})
    needed = sorted({seq for seq, _ in refs if (seq, _) not in have})
    start = 0
    while start < len(needed):
        end = start
        while end + 1 < len(needed) and needed[end + 1] - needed[end] <= _GAP:
            end += 1
        for record in store.read(memory_id, gt=needed[start] - 1, lte=needed[end]):
            if record.seq in needed:
                have.update(origin_entries(record, identity))
        start = end + 1
    try:
        return [have[ref] for ref in refs]
    except KeyError as e:
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
        found = store.seq_at(memory_id, at)
        return 0 if found is None else found
    assert seq is not None  # noqa: S101 - narrowed by the check above
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        msg = f"as_of(seq={seq!r}): seq must be an int >= 0"
        raise ValueError(msg)
    head = store.head(memory_id)
    last = 0 if head is None else head.seq
    if seq > last:
        msg = f"as_of(seq={seq}) of {memory_id!r}: the history ends at seq {last}"
        raise ValueError(msg)
    return seq


def view_at(
    store: EventStore, memory_id: MemoryId, seq: int, *, identity: str | None = None
) -> list[Entry]:
    """The exact window right after event ``seq`` (``[]`` for seq 0)."""
    if seq == 0:
        return []
    records = store.read(memory_id, gt=seq - 1, lte=seq)
    if not records:
        msg = f"event {seq} of {memory_id!r} is not in the store (purged?)"
        raise ValueError(msg)
    return materialize(store, memory_id, window_refs(records[0]), identity=identity)


class _Simulation:
    """Runs a policy over the logged operations, as a live memory with that policy would."""

    def __init__(self, policy: WindowPolicy, memory_id: MemoryId) -> None:
        self.policy = policy
        self.memory_id = memory_id
        self.entries: list[Entry] = []

    def apply(self, record: Record) -> None:
        policy, kind = self.policy, record.kind
        if kind == "message_added":
            (entry,) = origin_entries(record, None).values()
            entry = Entry(entry.message, entry.ref, policy.count(entry.message))
            work = list(self.entries)
            policy.ensure_capacity(work, policy.limit_for(self.memory_id))
            changed, _ = add_with_system_rules(
                work, entry, keep_system_first=policy.always_keep_system_message_first
            )
            if changed:
                policy.ensure_capacity(work, policy.limit_for(self.memory_id))
                self.entries = work
        elif kind == "messages_set":
            work = [
                Entry(e.message, e.ref, policy.count(e.message))
                for e in origin_entries(record, None).values()
            ]
            policy.ensure_capacity(work, policy.limit_for(self.memory_id))
            self.entries = work
        elif kind in ("memory_cleared", "memory_purged"):
            self.entries = []

    def view(self) -> list[ChatMessage]:
        work = list(self.entries)
        self.policy.ensure_capacity(work, self.policy.limit_for(self.memory_id))
        return [e.message for e in work]


def _records(store: EventStore, memory_id: MemoryId, lte: int | None) -> Iterator[Record]:
    """The history's records, read in pages so memory use stays bounded."""
    after = 0
    while True:
        page = store.read(memory_id, gt=after, lte=lte, limit=_PAGE)
        yield from page
        if len(page) < _PAGE:
            return
        after = page[-1].seq


def replay_views(
    store: EventStore, memory_id: MemoryId, policy: WindowPolicy, *, lte: int | None = None
) -> Iterator[tuple[Record, list[ChatMessage]]]:
    """Replay the history through ``policy``, yielding each event with the view after it."""
    sim = _Simulation(policy, memory_id)
    for record in _records(store, memory_id, lte):
        sim.apply(record)
        yield record, sim.view()


def what_if(
    store: EventStore,
    memory_id: MemoryId,
    policy: WindowPolicy,
    *,
    seq: int | None = None,
    at: datetime | None = None,
) -> list[ChatMessage]:
    """What a memory with ``policy`` would have shown after event ``seq`` (or at time ``at``).

    Nothing is written. With neither ``seq`` nor ``at``, the answer is for the head.

    Args:
        store: The store holding the history.
        memory_id: The memory id.
        policy: E.g. ``MessageWindowPolicy(20)`` or ``TokenWindowPolicy(2000, estimator)``.
        seq: The event after which to look.
        at: Or a time: the last event recorded at or before it.
    """
    target = None if seq is None and at is None else resolve_seq(store, memory_id, seq=seq, at=at)
    if target == 0:
        return []
    sim = _Simulation(policy, memory_id)
    for record in _records(store, memory_id, target):
        sim.apply(record)
    return sim.view()
