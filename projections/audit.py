"""Auditing a memory's history: step-by-step views, diffs with reasons, forks, JSONL export/import.

This is the Python API behind the ``chatledger`` command line (:mod:`projections.cli`); each
command is a thin layer over one function here, so scripts and tests use the same code:

* :func:`walk` - the exact view after each event, with what entered and what left and why;
* :func:`diff` - which messages entered and left the view between two seqs, with reasons;
* :func:`explain` - the life of one message: when it entered the view and why it left;
* :func:`fork` - a new memory id whose state starts as another's view at a seq;
* :func:`export_jsonl` / :func:`import_jsonl` - a ledger as JSON Lines that keep seqs, times and
  hashes, so an imported ledger verifies and time-travels exactly like the original.

Reasons a message leaves the view (:data:`LeaveReason`): ``"evicted"`` (window eviction),
``"orphan"`` (a tool result whose AI request was evicted), ``"system_replaced"`` (a new system
message replaced it), ``"set"`` (``memory.set`` replaced the content), ``"clear"``
(``memory.clear``, or a retention purge).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import IO, Any, Literal, TypeAlias

from eventlog.hashing import GENESIS, record_hash
from eventlog.ids import MemoryId, StreamKey, memory_id_from_key, memory_key
from eventlog.lc4j_json import message_from_obj
from eventlog.messages import AiMessage, ChatMessage, SystemMessage, ToolExecutionResultMessage
from eventlog.models import MessagesSet, NewRecord, Record, format_time, parse_time
from eventlog.serialization import decode_meta, encode_event
from eventlog.store import EventStore
from projections.replay import materialize, view_at, window_refs
from projections.windows import Entry

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "Change",
    "Departure",
    "ImportReport",
    "LeaveReason",
    "Step",
    "ViewDiff",
    "diff",
    "explain",
    "export_jsonl",
    "fork",
    "import_jsonl",
    "walk",
]

LeaveReason: TypeAlias = Literal["evicted", "orphan", "system_replaced", "set", "clear"]
"""Why a message left the view (see the module docstring)."""

FORMAT = "chatledger-jsonl"
"""The ``format`` named in the header line of an export."""

FORMAT_VERSION = 1
"""The export format version this code writes and reads."""

_PAGE = 2_000
_RECORD_FIELDS = frozenset(
    {
        "memory",
        "seq",
        "recorded_at",
        "kind",
        "schema_version",
        "payload",
        "meta",
        "prev_hash",
        "hash",
    }
)
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


# ---------------------------------------------------------------------------- stepping


@dataclasses.dataclass(frozen=True, slots=True)
class Departure:
    """A message that left the view at an event, and why.

    Attributes:
        entry: The message with the ref of the event that brought it.
        reason: Why it left.
    """

    entry: Entry
    reason: LeaveReason


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
    """

    record: Record
    view: tuple[Entry, ...]
    entered: tuple[Entry, ...]
    departures: tuple[Departure, ...]

    @property
    def seq(self) -> int:
        """The event's seq."""
        return self.record.seq


def _pages(store: EventStore, key: StreamKey, gt: int, lte: int | None) -> Iterator[Record]:
    """The stream's records in (gt, lte], read in pages so memory use stays bounded."""
    while True:
        page = store.read(key, gt=gt, lte=lte, limit=_PAGE)
        yield from page
        if len(page) < _PAGE:
            return
        gt = page[-1].seq


def _brought(record: Record) -> list[Entry]:
    """The entries an add or set event brings, in order (none for other kinds)."""
    if record.kind == "message_added":
        return [Entry(message_from_obj(json.loads(record.payload)), (record.seq, 0))]
    if record.kind == "messages_set":
        return [
            Entry(message_from_obj(obj), (record.seq, i))
            for i, obj in enumerate(json.loads(record.payload))
        ]
    return []


def _requests_tools(message: ChatMessage) -> bool:
    return isinstance(message, AiMessage) and bool(message.tool_execution_requests)


def _classify(
    order: list[Entry], gone: set[tuple[int, int]], replaced: tuple[int, int] | None
) -> list[Departure]:
    """Give each entry of ``order`` whose ref is in ``gone`` its reason.

    ``order`` is the window the eviction loop worked on. LangChain4j's loop removes a tool result
    only right after evicting the AI message that requested it (or a sibling result), so a gone
    tool result directly behind a gone tool-requesting AI message (or orphan) is an orphan.
    """
    departures: list[Departure] = []
    previous: Departure | None = None
    for entry in order:
        if entry.ref not in gone:
            previous = None
            continue
        reason: LeaveReason = "evicted"
        if entry.ref == replaced:
            reason = "system_replaced"
        elif (
            isinstance(entry.message, ToolExecutionResultMessage)
            and previous is not None
            and (_requests_tools(previous.entry.message) or previous.reason == "orphan")
        ):
            reason = "orphan"
        previous = Departure(entry, reason)
        departures.append(previous)
    return departures


def _step(store: EventStore, key: StreamKey, before: tuple[Entry, ...], record: Record) -> Step:
    refs = window_refs(record)
    brought = _brought(record)
    known = {e.ref: e for e in before}
    known.update((e.ref, e) for e in brought)
    missing = [ref for ref in refs if ref not in known]
    if missing:
        # Not written by an add/set on the previous window (a foreign writer): read them.
        known.update((e.ref, e) for e in materialize(store, key, missing))
    view = tuple(known[ref] for ref in refs)
    kept = set(refs)
    had = {e.ref for e in before}
    entered = tuple(e for e in view if e.ref not in had)
    if record.kind in ("memory_cleared", "memory_purged"):
        departures = [Departure(e, "clear") for e in before if e.ref not in kept]
    elif record.kind == "messages_set":
        departures = [Departure(e, "set") for e in before if e.ref not in kept]
        departures += _classify(brought, {e.ref for e in brought} - kept, None)
    else:
        order = [*before, *brought]
        replaced = None
        if brought and isinstance(brought[0].message, SystemMessage):
            # add() replaces the FIRST system message of the window; others can only be evicted.
            replaced = next((e.ref for e in before if isinstance(e.message, SystemMessage)), None)
        departures = _classify(order, {e.ref for e in order} - kept, replaced)
    return Step(record, view, entered, tuple(departures))


def _head_seq(store: EventStore, key: StreamKey) -> int:
    head = store.head(key)
    return 0 if head is None else head.seq


def _check_seq(name: str, seq: object, last: int, key: str) -> int:
    if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= last:
        msg = f"{name}={seq!r} for memory {key!r}: pick a seq from 0 to {last} (the head)"
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
    key = StreamKey(memory_key(memory_id))
    last = _head_seq(store, key)
    _check_seq("after", after, last, key)
    if upto is not None:
        _check_seq("upto", upto, last, key)
    view = tuple(view_at(store, key, after))
    for record in _pages(store, key, after, upto):
        step = _step(store, key, view, record)
        view = step.view
        yield step


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
    reason: LeaveReason | None

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
    key = StreamKey(memory_key(memory_id))
    last = _head_seq(store, key)
    _check_seq("start", start, last, key)
    _check_seq("end", end, last, key)
    if start > end:
        msg = (
            f"diff of {key!r} from seq {start} to {end}: the first seq must not be after the second"
        )
        raise ValueError(msg)
    changes: dict[tuple[int, int], Change] = {}
    for step in walk(store, key, after=start, upto=end):
        for entry in step.entered:
            changes[entry.ref] = Change(entry, step.seq, None, None)
        for gone in step.departures:
            ref = gone.entry.ref
            entered_at: int | None = step.seq if ref[0] == step.seq else None
            if ref in changes:
                entered_at = changes[ref].entered_at
            changes[ref] = Change(gone.entry, entered_at, step.seq, gone.reason)
    ordered = tuple(changes[ref] for ref in sorted(changes))
    return ViewDiff(memory_id_from_key(key), start, end, ordered)


def explain(store: EventStore, memory_id: MemoryId, seq: int, index: int = 0) -> Change:
    """The life of one message in the view: when it entered and when and why it left.

    Args:
        store: The store holding the history.
        memory_id: The memory id.
        seq: The event that brought the message (a ``message_added`` or ``messages_set``).
        index: Its position in a ``messages_set`` list (0 for an add).

    Returns:
        A :class:`Change` with ``entered_at=seq`` (a message is in the view right after the
        event that brought it, unless the window could not keep it: then ``left_at=seq`` too),
        and ``left_at``/``reason`` None while it is still in the view at the head.

    Raises:
        ValueError: Event ``seq`` is outside the history, or brought no message at ``index``.
    """
    key = StreamKey(memory_key(memory_id))
    last = _head_seq(store, key)
    if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= last:
        msg = f"explain event {seq!r} of memory {key!r}: pick a seq from 1 to {last} (the head)"
        raise ValueError(msg)
    ref = (seq, index)
    entered: Entry | None = None
    for step in walk(store, key, after=seq - 1):
        if step.seq == seq:
            brought = {e.ref: e for e in _brought(step.record)}
            if ref not in brought:
                msg = (
                    f"event {seq} of memory {key!r} is a {step.record.kind} that brought "
                    f"{len(brought)} message(s), none at index {index}; pick an add or set event "
                    "(see `chatledger history`)"
                )
                raise ValueError(msg)
            entered = brought[ref]
        for gone in step.departures:
            if gone.entry.ref == ref:
                return Change(gone.entry, seq, step.seq, gone.reason)
    assert entered is not None  # noqa: S101 - the walk starts at event seq, which exists
    return Change(entered, seq, None, None)


# ---------------------------------------------------------------------------- fork


def fork(
    store: EventStore, memory_id: MemoryId, new_id: MemoryId, *, seq: int | None = None
) -> Record:
    """Start memory ``new_id`` as a copy of ``memory_id``'s view at ``seq``.

    ``new_id`` gets one ``messages_set`` event holding the view's messages, with a window
    (meta ``"w"``) that keeps all of them, so a memory opened on ``new_id`` shows exactly that
    view and continues from it; the meta's ``"forked_from"`` names the source memory, seq and
    that event's hash. Token counts recorded by a token window are carried over. The source
    is not touched.

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
    key = StreamKey(memory_key(memory_id))
    new_key = StreamKey(memory_key(new_id))
    last = _head_seq(store, key)
    if last == 0:
        msg = f"fork of memory {key!r}: it has no events; fork an id listed by `chatledger ids`"
        raise ValueError(msg)
    target = last if seq is None else seq
    if isinstance(target, bool) or not isinstance(target, int) or not 1 <= target <= last:
        msg = f"fork of memory {key!r} at seq {target!r}: pick a seq from 1 to {last} (the head)"
        raise ValueError(msg)
    new_head = _head_seq(store, new_key)
    if new_head:
        msg = (
            f"fork of {key!r} to {new_key!r}: {new_key!r} already has {new_head} event(s); "
            "a fork starts a new memory, so pick an unused id"
        )
        raise ValueError(msg)
    (source,) = store.read(key, gt=target - 1, lte=target)
    identity = decode_meta(source).get("est")
    entries = view_at(store, key, target, identity=identity if isinstance(identity, str) else None)
    messages = tuple(e.message for e in entries)
    meta: dict[str, Any] = {
        "w": [[1, 0, len(messages) - 1]] if messages else [],
        "forked_from": {"memory": str(key), "seq": target, "hash": source.hash},
    }
    if entries and isinstance(identity, str) and all(e.tokens is not None for e in entries):
        meta["tok"] = [e.tokens for e in entries]
        meta["est"] = identity
    # expected_seq=0 makes "new_id is empty" part of the atomic append, not just the check above.
    (written,) = store.append(
        new_key, [encode_event(MessagesSet(messages=messages), meta)], expected_seq=0
    )
    return written


# ---------------------------------------------------------------------------- export / import


def _record_line(record: Record) -> str:
    return _dumps(
        {
            "memory": record.stream_id,
            "seq": record.seq,
            "recorded_at": record.recorded_at_text,
            "kind": record.kind,
            "schema_version": record.schema_version,
            "payload": record.payload,
            "meta": record.meta,
            "prev_hash": record.prev_hash,
            "hash": record.hash,
        }
    )


def export_jsonl(
    store: EventStore,
    out: IO[str],
    *,
    memory_id: MemoryId | None = None,
    after: int = 0,
    include_system: bool = False,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Write a ledger (or one memory) as JSON Lines that keep seqs, times and hashes.

    The first line is a header ``{"format": "chatledger-jsonl", "version": 1, ...}``; then one
    object per record, stream by stream in seq order, with the stored text of every hashed
    field: ``memory`` (the stored key), ``seq``, ``recorded_at``, ``kind``, ``schema_version``,
    ``payload``, ``meta``, ``prev_hash`` and ``hash``.

    Args:
        store: The store to read.
        out: A text stream to write to.
        memory_id: Export only this memory (None: every memory).
        after: With ``memory_id``: only records after this seq (an incremental export that
            :func:`import_jsonl` appends to a copy whose head is ``after``).
        include_system: Also export chatledger's own ``~sys:`` streams (compaction runs).
        progress: Called with the number of records written after each page.

    Returns:
        The number of records written.
    """
    if memory_id is not None:
        keys = [memory_key(memory_id)]
    else:
        if after:
            msg = "export after= needs a memory_id: seqs are per memory"
            raise ValueError(msg)
        keys = [info.stream_id for info in store.streams(include_system=include_system)]
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "exported_at": format_time(datetime.now(UTC)),
        "memories": keys,
    }
    out.write(_dumps(header) + "\n")
    count = 0
    for key in keys:
        gt = after
        while True:
            page = store.read(StreamKey(key), gt=gt, limit=_PAGE)
            out.writelines(_record_line(r) + "\n" for r in page)
            count += len(page)
            if progress is not None and page:
                progress(count)
            if len(page) < _PAGE:
                break
            gt = page[-1].seq
    return count


@dataclasses.dataclass(frozen=True, slots=True)
class ImportReport:
    """What :func:`import_jsonl` wrote.

    Attributes:
        imported: Stored key -> ``(first seq, last seq)`` written, per memory.
        records: Total records written.
        skipped: Stored keys left out because their history starts with a purge tombstone
            (only with ``skip_purged=True``).
    """

    imported: dict[str, tuple[int, int]]
    records: int
    skipped: tuple[str, ...] = ()


def _refuse(source: str, detail: str) -> ValueError:
    return ValueError(f"import of {source} refused, nothing was written: {detail}")


def _parse_header(line: str, source: str) -> None:
    try:
        header = json.loads(line)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise _refuse(
            source,
            f"it is not a chatledger export (the first line must be a {FORMAT!r} header; "
            "write one with `chatledger export`)",
        )
    version = header.get("version")
    if version != FORMAT_VERSION:
        raise _refuse(
            source,
            f"format version {version!r} is not {FORMAT_VERSION}; use the chatledger that "
            "wrote it, or a newer one",
        )


def _parse_record(line: str, number: int, source: str) -> Record:
    where = f"line {number}"
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise _refuse(source, f"{where} is not JSON ({e})") from e
    if not isinstance(obj, dict) or set(obj) != _RECORD_FIELDS:
        got = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        raise _refuse(
            source, f"{where} is not a record: expected fields {sorted(_RECORD_FIELDS)}, got {got}"
        )
    for name in ("memory", "recorded_at", "kind", "payload", "meta", "prev_hash", "hash"):
        if not isinstance(obj[name], str):
            raise _refuse(source, f"{where}: {name} must be a string")
    for name in ("seq", "schema_version"):
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _refuse(source, f"{where}: {name} must be an integer >= 1, not {value!r}")
    try:
        canonical = format_time(parse_time(obj["recorded_at"]))
        memory_id_from_key(obj["memory"])
    except ValueError as e:
        raise _refuse(source, f"{where}: {e}") from e
    if canonical != obj["recorded_at"]:
        raise _refuse(
            source, f"{where}: recorded_at {obj['recorded_at']!r} is not canonical UTC text"
        )
    return Record(
        position=number,
        stream_id=obj["memory"],
        seq=obj["seq"],
        recorded_at_text=obj["recorded_at"],
        kind=obj["kind"],
        schema_version=obj["schema_version"],
        payload=obj["payload"],
        meta=obj["meta"],
        prev_hash=obj["prev_hash"],
        hash=obj["hash"],
    )


def _parse(lines: Iterable[str], source: str) -> dict[str, list[Record]]:
    """Every record of an export, by stream key; raises on anything that is not one."""
    streams: dict[str, list[Record]] = {}
    header_seen = False
    try:
        for number, raw in enumerate(lines, 1):
            line = raw.strip()
            if not line:
                continue
            if not header_seen:
                _parse_header(line, source)
                header_seen = True
                continue
            record = _parse_record(line, number, source)
            streams.setdefault(record.stream_id, []).append(record)
    except UnicodeDecodeError as e:
        raise _refuse(source, f"it is not UTF-8 text, so not a chatledger export ({e})") from e
    if not header_seen:
        raise _refuse(source, "it is empty, not a chatledger export")
    return streams


def _check_chain(key: str, records: list[Record], source: str) -> None:
    """Recompute every hash and link of one stream's records (file order = seq order)."""
    first = records[0]
    if first.seq == 1 and first.prev_hash != GENESIS:
        raise _refuse(
            source, f"the hash chain of {key!r} breaks at seq 1: prev_hash is not genesis"
        )
    previous: Record | None = None
    for record in records:
        if previous is not None:
            if record.seq != previous.seq + 1:
                raise _refuse(
                    source,
                    f"records of {key!r} jump from seq {previous.seq} to {record.seq} "
                    f"(line {record.position}); the export is incomplete or out of order",
                )
            if record.prev_hash != previous.hash:
                raise _refuse(
                    source,
                    f"the hash chain of {key!r} breaks at seq {record.seq}: prev_hash does "
                    "not match the previous record's hash",
                )
            if record.recorded_at_text < previous.recorded_at_text:
                raise _refuse(
                    source, f"record {key!r}#{record.seq} is earlier than the one before it"
                )
        if record_hash(record) != record.hash:
            raise _refuse(
                source,
                f"the hash chain of {key!r} breaks at seq {record.seq}: the stored hash does "
                "not match the record's content",
            )
        previous = record


def import_jsonl(
    store: EventStore,
    lines: Iterable[str],
    *,
    source: str = "the file",
    skip_purged: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Append an export written by :func:`export_jsonl`, keeping every seq, time and hash.

    Everything is checked before anything is written: the header, every record's fields, and
    every hash chain (each hash is recomputed from the record's content and link). Then, per
    memory, the target store must have no events for it - import never overwrites - unless
    the file's records for it continue exactly from the target's head (next seq, chained to the
    head's hash): those are appended, which makes incremental exports (``after=``) work. Each
    memory is written with one atomic ``append``, and the stored hashes are compared with the
    file's.

    A memory whose history starts with a ``memory_purged`` tombstone (seq > 1) cannot be
    recreated through :meth:`EventStore.append`, which starts streams at seq 1: it is refused,
    or left out and reported with ``skip_purged=True``.

    Args:
        store: The store to write to.
        lines: The file's lines (an open text file works).
        source: The file's name, for error messages.
        skip_purged: Leave out memories that start with a tombstone instead of refusing.
        progress: Called with the number of records written after each memory.

    Returns:
        What was written.

    Raises:
        ValueError: The file is not a valid export, a chain does not verify, a memory already
            has events the file does not continue, or starts with a tombstone (nothing is
            written in all these cases).
        ConcurrencyError: Another writer appended to a memory during the import; the memories
            before it were written.
    """
    streams = _parse(lines, source)
    plan: list[tuple[str, int, list[Record]]] = []
    skipped: list[str] = []
    for key, records in streams.items():
        records.sort(key=lambda r: r.seq)
        _check_chain(key, records, source)
        first = records[0]
        if first.kind == "memory_purged" and first.seq > 1:
            if skip_purged:
                skipped.append(key)
                continue
            raise _refuse(
                source,
                f"the history of {key!r} starts with a memory_purged tombstone at seq "
                f"{first.seq}, which EventStore.append cannot recreate (streams start at seq 1); "
                "import with skip_purged (--skip-purged) to leave such memories out",
            )
        head = store.head(StreamKey(key))
        if head is None and first.seq != 1:
            raise _refuse(
                source,
                f"the records of {key!r} start at seq {first.seq}, but the target has none of "
                "its earlier events; import the full export first",
            )
        if head is not None and (
            first.seq != head.seq + 1
            or first.prev_hash != head.hash
            or first.recorded_at_text < head.recorded_at_text
        ):
            raise _refuse(
                source,
                f"memory {key!r} already has events 1..{head.seq} in the target, and import "
                f"never overwrites: import into a new database or schema (or a file that "
                f"continues exactly from seq {head.seq}, see `chatledger export --after`)",
            )
        plan.append((key, 0 if head is None else head.seq, records))
    imported: dict[str, tuple[int, int]] = {}
    total = 0
    for key, head_seq, records in plan:
        items = [
            NewRecord(r.kind, r.payload, r.meta, r.schema_version, recorded_at=r.recorded_at)
            for r in records
        ]
        stored = store.append(StreamKey(key), items, expected_seq=head_seq)
        for want, got in zip(records, stored, strict=True):
            if (want.seq, want.hash) != (got.seq, got.hash):
                msg = (
                    f"import of {source}: {key!r}#{got.seq} was stored with hash {got.hash}, "
                    f"not the file's {want.hash}; the records were written - run "
                    "`chatledger verify` and report this as a bug"
                )
                raise ValueError(msg)
        imported[key] = (records[0].seq, records[-1].seq)
        total += len(records)
        if progress is not None:
            progress(total)
    return ImportReport(imported=imported, records=total, skipped=tuple(skipped))
