"""A framework session's item list, read by index: the cost of a call is what it returns.

An OpenAI Agents SDK session and a LangChain history are lists: every item added since the last
clear, minus the ones taken back. They are stored as the memories' events (``message_added``,
``message_retracted``, ``memory_cleared``), and each event records in its meta, like every event
a memory writes, the list right after it (:class:`~projections.meta.WindowMeta`): its refs
run-length encoded - ``[[1, 20000]]`` for twenty thousand adds - plus the refs of its system
messages (``"sys"``), so a window policy applied over the list needs no scan to find them.

So nothing is ever searched for:

* the newest event says what the list is, clears and retractions included: a clear empties it,
  a retraction drops the ref, an add extends the last run;
* ``newest(k)`` is one verified read of the newest ``k`` events, newest first: in the common
  case (no retraction among them) those are the items; otherwise the refs name exactly the
  events still to read, in as few range reads as they have gaps;
* ``add(n)`` writes ``n`` events in one append whose expected seq and hash are the object's
  (a lost race reloads the newest event and retries), each meta costing O(runs): one run per
  ``pop`` followed by an add, whatever the list's length;
* a cold object costs one read of the newest event plus what it returns.

Every read goes through :meth:`~eventlog.store.EventStore.read_verified` (each record's hash and
commitment, the links inside the range, the memory's sealed head and first record) - the
items' pages through its twin :meth:`~eventlog.store.EventStore.read_verified_rows`, the same
checks over bare rows - and a read of everything in pages links each page to the one before:
nothing is served that the chain does not vouch for, at a cost independent of the history's
length.

The object remembers the seq and hash of the newest event it saw. When it next sees the memory,
history only counts as changed under it (a restore, a failover that lost commits, a rewrite)
when that event is no longer there with that hash: a head behind it, or another record at its
seq. Any continuation, of any length, by any number of writers, is normal and silent.

``replace_newest`` (the Agents SDK's Responses compaction) checks that the newest items are
still the ones a read returned and, in the same append, retracts them and adds what replaces
them; ``replace_all`` is a clear and adds in one append. Either way the history keeps every
item.

A session written before this module (no ``"sys"`` in its meta) has its system messages found
once, by reading the list, the first time an object writes to it.

A ``context_sent`` event - what one model call was sent (:meth:`ItemList.record_sent`,
:meth:`ItemList.sent`) - keeps the list in its meta like every other event, so a head that
records a model call still says what the list is. A record acknowledged
as damaged (:meth:`~eventlog.store.EventStore.quarantine`) is left out of the list where it
is read, and ``newest(k)`` takes as many more from before it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar

from pydantic_core import from_json

from eventlog.errors import ChainIntegrityError, ConcurrencyError
from eventlog.formats.lc4j_json import message_from_obj
from eventlog.hashing import GENESIS, RANGE_ROW_FIELDS
from eventlog.ids import MemoryId, StreamKey
from eventlog.keyring import is_sealed
from eventlog.messages import ChatMessage, CustomMessage, SystemMessage
from eventlog.models import ContextSent, MessageRetracted, NewRecord, Record
from eventlog.serialization import (
    added_record,
    cleared_record,
    decode_event,
    encode_event,
    require_opened,
)
from eventlog.store import EventStore
from projections.meta import EMPTYING_KINDS, UNBOUNDED_LIMIT, WindowMeta
from projections.replay import (
    erased_error,
    quarantined_seqs,
    read_checked,
    read_checked_rows,
    window_meta,
)
from projections.window import TokenWindowPolicy, WindowPolicy

__all__ = [
    "CHUNK",
    "LANGCHAIN_KEY",
    "UNBOUNDED",
    "ItemList",
    "Ref",
    "describe",
    "is_system",
    "loads",
    "tail",
]

UNBOUNDED = UNBOUNDED_LIMIT
"""The limit a session's events record: a session keeps every item (its list never evicts)."""

LANGCHAIN_KEY = "langchain.message"
"""The attribute carrying a LangChain message (see :mod:`projections.adapters.langchain`)."""

Ref = tuple[int, int]
Row = tuple[Any, ...]  # a range row (eventlog.hashing.RANGE_ROW_FIELDS)
_SEQ, _KIND, _PAYLOAD, _PREV, _HASH = (
    RANGE_ROW_FIELDS.index(f) for f in ("seq", "kind", "payload", "prev_hash", "hash")
)
_T = TypeVar("_T")
Run = tuple[int, ...]

_GAP = 64  # read the events between two wanted ones rather than issue another query
_PAGE = 4_096  # events per read when the whole list is wanted: bounded memory per step
CHUNK = 512
"""Items per step of :meth:`ItemList.chunks`: a few milliseconds of work, so an async caller
gives the event loop back well within the interpreter's 5 ms thread switch interval."""
_RETRY_FOR = 30.0  # seconds of optimistic-concurrency retries before giving up
_CLEARED_META = WindowMeta([]).encode()
_BRINGING = frozenset(("message_added", "messages_set"))  # the kinds whose payload is an item
_log = logging.getLogger("chatledger.sessions")


def is_system(message: ChatMessage) -> bool:
    """True for a message a window policy treats as a system message: a chatledger one, or a
    LangChain system message stored by the LangChain adapter (a custom message)."""
    if isinstance(message, SystemMessage):
        return True
    if isinstance(message, CustomMessage):
        stored = message.attributes.get(LANGCHAIN_KEY)
        return isinstance(stored, dict) and stored.get("type") == "system"
    return False


def _extend(runs: list[Run], seq: int) -> None:
    last = runs[-1] if runs else None
    if last is not None and len(last) == 2 and last[1] == seq - 1:
        runs[-1] = (last[0], seq)
    else:
        runs.append((seq, seq))


def _drop_last(runs: list[Run]) -> Ref:
    """Remove the newest ref of ``runs`` (not empty) and return it."""
    last = runs[-1]
    if len(last) == 2:
        a, b = last
        ref = (b, 0)
        if a == b:
            runs.pop()
        else:
            runs[-1] = (a, b - 1)
        return ref
    s, i, j = last
    if i == j:
        runs.pop()
    else:
        runs[-1] = (s, i, j - 1)
    return (s, j)


def tail(runs: Sequence[Run], count: int | None) -> list[Ref]:
    """The newest ``count`` refs (all of them for None), oldest first, in O(runs + count)."""
    picked: list[Ref] = []
    for run in reversed(runs):
        want = None if count is None else count - len(picked)
        if want is not None and want <= 0:
            break
        lo, hi = run[-2], run[-1]
        if want is not None:
            lo = max(lo, hi - want + 1)
        if len(run) == 2:
            picked.extend((s, 0) for s in range(hi, lo - 1, -1))
        else:
            picked.extend((run[0], i) for i in range(hi, lo - 1, -1))
    picked.reverse()
    return picked


def _oldest(runs: Sequence[Run], skip: int = 0) -> Iterator[Ref]:
    """The refs of ``runs``, oldest first, lazily, after the oldest ``skip`` (skipped a run
    at a time: the newest k of a long list cost O(runs + k), not O(list))."""
    for run in runs:
        lo, hi = run[-2], run[-1]
        if skip > hi - lo:
            skip -= hi - lo + 1
            continue
        lo, skip = lo + skip, 0
        if len(run) == 2:
            yield from ((s, 0) for s in range(lo, hi + 1))
        else:
            yield from ((run[0], i) for i in range(lo, hi + 1))


def _remove(runs: list[Run], ref: Ref) -> None:
    """Take ``ref`` out of ``runs`` wherever it is (splitting its run), in O(runs)."""
    seq, index = ref
    for at in range(len(runs) - 1, -1, -1):  # the newest runs first: that is where it usually is
        run = runs[at]
        pieces: list[Run]
        if len(run) == 2:
            if index != 0 or not run[0] <= seq <= run[1]:
                continue
            pieces = [(run[0], seq - 1), (seq + 1, run[1])]
        else:
            if run[0] != seq or not run[1] <= index <= run[2]:
                continue
            pieces = [(seq, run[1], index - 1), (seq, index + 1, run[2])]
        runs[at : at + 1] = [p for p in pieces if p[-2] <= p[-1]]
        return
    msg = f"ref {ref} is not in the list; it was changed under this object - run verify()"
    raise ValueError(msg)


def _size(runs: Sequence[Run]) -> int:
    return sum(run[-1] - run[-2] + 1 for run in runs)


class ItemList:
    """The list of one memory (items after the last clear, minus retractions), read by index.

    Thread-safe; every method does blocking I/O (adapters call them off the event loop).

    Args:
        store: The ledger.
        memory_id: The memory id.
    """

    def __init__(self, store: EventStore, memory_id: MemoryId) -> None:
        if memory_id is None:
            msg = "id cannot be None; pass a str, int, UUID or tuple memory id"
            raise ValueError(msg)
        self._key = store.stream_key(memory_id)  # TypeError for unsupported id types
        self._id = memory_id
        self._store = store
        self._lock = threading.RLock()
        self._seq = -1  # nothing seen yet
        self._hash = ""
        self._runs: list[Run] = []
        self._system: list[Ref] | None = []  # None: the newest event did not record them
        self._broken: ChainIntegrityError | None = None

    @property
    def id(self) -> MemoryId:
        """The memory id."""
        return self._id

    @property
    def key(self) -> StreamKey:
        """The memory's stream key."""
        return self._key

    @property
    def store(self) -> EventStore:
        """The ledger."""
        return self._store

    # ------------------------------------------------------------------ reading

    def newest(self, count: int | None = None) -> list[Any]:
        """The newest ``count`` items (all for None), oldest first, as stored JSON objects.
        (:meth:`newest_refs` also gives their refs.)

        Raises:
            ChainIntegrityError: A record read does not verify (nothing is served).
            ContentErasedError: An item's content was erased.
            ValueError: The newest event records no list (not written by a chatledger memory),
                or names an event that is not there.
        """
        return self.newest_refs(count)[0]

    def newest_refs(self, count: int | None = None) -> tuple[list[Any], list[Ref]]:
        """:meth:`newest` and the refs of what it returns."""
        if count is not None and count <= 0:
            return [], []
        with self._lock:
            batch = self._verified(desc=True, limit=1 if count is None else count)
            if not batch:
                self._settle(None)
                return [], []
            self._settle(batch[0], batch)
            have = {r.seq: r for r in batch}
            if count is None:
                return self._objects_refs(tail(self._runs, None), have)
            want = count
            while True:
                refs = tail(self._runs, want)
                got, kept = self._objects_refs(refs, have)
                # Acknowledged damage left out: take as many more from before it.
                if len(got) >= count or len(refs) < want:
                    return got[-count:], kept[-count:]
                want += count - len(got)

    def chunks(
        self,
        count: int | None,
        convert: Callable[[Any], _T],
        size: int = CHUNK,
        refs_out: list[Ref] | None = None,
    ) -> Iterator[list[_T]]:
        """:meth:`newest` in chunks of ``size`` items, each item passed through ``convert``: an
        async caller runs one step at a time on a worker (``off_loop(store, next, it, None)``)
        and gives the event loop back between steps, however long the list is. The list is
        the one of the newest event when the first step runs; each chunk is verified and
        chained to the one before it.

        ``convert`` takes one stored object and runs as soon as its (verified) event is
        decoded, so the decoded JSON is dropped item by item rather than held (and walked by
        the garbage collector) until the chunk ends.
        """
        if count is not None and count <= 0:
            return
        with self._lock:
            batch = self._verified(desc=True, limit=1 if count is None else min(count, size))
            self._settle(batch[0] if batch else None, batch)
            runs = list(self._runs)
        have = {r.seq: r for r in batch}
        # The refs a chunk at a time: a list of a million items never holds a million refs.
        refs = _oldest(runs, 0 if count is None else max(_size(runs) - count, 0))
        anchor: list[Row] = []  # the last row read: the next chunk must chain to it
        while chunk := list(islice(refs, size)):
            got, kept = self._objects_refs(chunk, have, anchor, convert)
            if refs_out is not None:
                refs_out.extend(kept)
            yield got

    def snapshot(self) -> tuple[list[Run], list[Ref] | None]:
        """The list as of the newest event: its runs and system refs (None: not recorded).

        Raises:
            ChainIntegrityError: The newest event does not verify.
        """
        with self._lock:
            self._load()
            return list(self._runs), None if self._system is None else list(self._system)

    def objects(self, refs: Sequence[Ref]) -> list[Any]:
        """The stored JSON objects of ``refs``, read in as few verified reads as they have gaps.

        Raises:
            ChainIntegrityError: A record read does not verify.
            ValueError: A ref names an event that is not an add or set, or is not there.
        """
        with self._lock:
            return self._objects(refs, {})

    def messages(self, refs: Sequence[Ref]) -> list[ChatMessage]:
        """The chatledger messages of ``refs`` (see :meth:`objects`)."""
        return [message_from_obj(obj) for obj in self.objects(refs)]

    def _verified(self, **bounds: Any) -> list[Record]:
        try:
            return read_checked(self._store, self._key, **bounds)
        except ChainIntegrityError as e:
            self._broken = e  # never append onto a history that does not verify
            raise

    def _load(self) -> Record | None:
        batch = self._verified(desc=True, limit=1)
        self._settle(batch[0] if batch else None, batch)
        return batch[0] if batch else None

    def _settle(self, head: Record | None, batch: Sequence[Record] = ()) -> None:
        """Adopt ``head`` (None: the memory has no events) as the list, after checking that it
        continues what this object saw before."""
        if self._seq > 0:
            self._check_continuation(head, batch)
        if head is None:
            self._seq, self._hash, self._runs, self._system = 0, "", [], []
            return
        if head.kind in EMPTYING_KINDS:
            runs: list[Run] = []
            system: list[Ref] | None = []
        else:
            meta = window_meta(head)  # ValueError: an event no chatledger memory wrote
            runs = [tuple(run) for run in meta.runs]
            system = None
            if meta.system is not None:
                system = [(s, i) for s, i in meta.system]
                if not all(meta.holds(ref) for ref in system):
                    msg = (
                        f"event {head.stream_id}#{head.seq} names system messages outside its "
                        "list; it was not written by a chatledger session - run verify()"
                    )
                    raise ValueError(msg)
        self._seq, self._hash, self._runs, self._system = head.seq, head.hash, runs, system

    def _check_continuation(self, head: Record | None, batch: Sequence[Record]) -> None:
        """Warn when the event this object last saw is gone or replaced: only then did history
        go backwards. Costs nothing when the head is still it, or ``batch`` holds it; one read
        of one record otherwise."""
        seq, known = self._seq, self._hash
        if head is None:
            self._changed(f"the memory has no events now (this object held seq {seq})")
            return
        if head.seq < seq:
            self._changed(f"the head is seq {head.seq}, behind seq {seq} this object held")
            return
        mine = next((r for r in batch if r.seq == seq), None)
        if mine is None:
            found = self._verified(gt=seq - 1, lte=seq)
            mine = found[0] if found else None
        if mine is None or mine.hash != known:
            self._changed(f"seq {seq}, which this object held, is another record now")

    def _changed(self, what: str) -> None:
        _log.warning(
            "memory %r: history changed under this object (%s); reloading from the store - "
            "run verify() if nothing restored or failed over the database",
            self._key,
            what,
        )

    def _objects(
        self, refs: Sequence[Ref], have: dict[int, Record], anchor: list[Row] | None = None
    ) -> list[Any]:
        return self._objects_refs(refs, have, anchor)[0]

    def _objects_refs(
        self,
        refs: Sequence[Ref],
        have: dict[int, Record],
        anchor: list[Row] | None = None,
        convert: Callable[[Any], Any] | None = None,
    ) -> tuple[list[Any], list[Ref]]:
        """The stored JSON objects of ``refs`` (each passed through ``convert`` when given)
        and the refs they are (acknowledged damage is left out), reading (verified) the events
        not in ``have``.

        Each page of records is decoded and dropped before the next is read: a list of a
        million items holds a page of records at a time, not a million."""
        # seq -> the position of its first ref; the rare further refs to one seq (items of a
        # messages_set) in ``more``. No list per seq: a whole-history read would create one
        # per item, objects that outlive young collections and bring on full ones.
        wanted: dict[int, int] = {}
        more: dict[int, list[int]] = {}
        for position, ref in enumerate(refs):
            seq = ref[0]
            if seq in wanted:
                more.setdefault(seq, []).append(position)
            else:
                wanted[seq] = position
        out: list[Any] = [None] * len(refs)
        pop, decoded = wanted.pop, self._decoded

        # One loop per page, not a call per record: this runs once per item of every
        # whole-history read.
        def place(rows: Iterable[Row]) -> None:
            for row in rows:
                first = pop(row[_SEQ], None)
                if first is None:
                    continue
                payload = row[_PAYLOAD]
                # The common row inline (what _decoded tests first): an add or a set whose
                # payload is plaintext JSON (neither erased nor sealed).
                if row[_KIND] in _BRINGING and payload[:1] == "{":
                    try:
                        obj = from_json(payload)
                    except (ValueError, TypeError):
                        obj = loads(payload)
                else:
                    obj = decoded(row)
                for position in (first, *more.pop(row[_SEQ], ())) if more else (first,):
                    index = refs[position][1]
                    item = obj if index == 0 and not isinstance(obj, list) else _item(obj, index)
                    out[position] = item if convert is None else convert(item)

        place([have[seq].range_row(have[seq].payload) for seq in wanted if seq in have])
        for page in self._pages(sorted(wanted), anchor if anchor is not None else []):
            place(page)
        if wanted and wanted.keys() <= quarantined_seqs(self._store, self._key):
            # Acknowledged damage (store.quarantine): those items are left out of the list.
            gone = {p for seq, first in wanted.items() for p in (first, *more.get(seq, ()))}
            kept = [p for p in range(len(refs)) if p not in gone]
            return [out[p] for p in kept], [refs[p] for p in kept]
        if wanted:
            seq = min(wanted)
            msg = (
                f"the list of {self._id!r} refers to event {seq}, which is not in the store "
                "(purged or altered); run verify()"
            )
            raise ValueError(msg)
        return out, list(refs)

    def _pages(self, needed: list[int], anchor: list[Row]) -> Iterator[list[Row]]:
        """Verified reads covering ``needed`` (sorted seqs): one per run of seqs closer than
        ``_GAP``, in pages of ``_PAGE``; each page chained to the one before it, the first to
        ``anchor`` (the last row of an earlier call, kept there for the next one)."""
        start = 0
        previous: Row | None = anchor[-1] if anchor else None
        while start < len(needed):
            end = start
            while (
                end + 1 < len(needed)
                and needed[end + 1] - needed[end] <= _GAP
                and needed[end + 1] - needed[start] < _PAGE
            ):
                end += 1
            page = self._rows(needed[start] - 1, needed[end])
            if (
                previous is not None
                and page
                and page[0][_SEQ] == previous[_SEQ] + 1
                and page[0][_PREV] != previous[_HASH]
            ):
                raise ChainIntegrityError(
                    self._key,
                    page[0][_SEQ],
                    f"it does not chain to seq {previous[_SEQ]} read before it (a record was "
                    "removed or replaced); not served (run verify())",
                )
            previous = page[-1] if page else None
            anchor[:] = [] if previous is None else [previous]
            yield page
            start = end + 1

    def _rows(self, gt: int, lte: int) -> list[Row]:
        """The verified rows ``gt < seq <= lte`` (:meth:`EventStore.read_verified_rows`: every
        row checked, no record built), acknowledged damage left out as :func:`read_checked`
        leaves it out."""
        try:
            return read_checked_rows(self._store, self._key, gt=gt, lte=lte)[0]
        except ChainIntegrityError as e:
            self._broken = e  # never append onto a history that does not verify
            raise

    def _decoded(self, row: Row) -> Any:
        seq, kind, payload = row[_SEQ], row[_KIND], row[_PAYLOAD]
        # The common record first, in one test per condition: an add or a set, with content
        # (not erased), in plaintext (not sealed); anything else is refused below.
        if kind in _BRINGING and payload and not is_sealed(payload):
            return loads(payload)
        if kind not in _BRINGING:
            msg = (
                f"the list of {self._id!r} refers to event {seq}, a {kind} that brings "
                "no message; it was not written by a chatledger memory - run verify()"
            )
            raise ValueError(msg)
        # Erased, or sealed under a key this store cannot open: the record says which.
        (record,) = self._verified(gt=seq - 1, lte=seq)
        if record.erased:
            raise erased_error(self._store, record)
        require_opened(record)
        return loads(record.payload)

    # ------------------------------------------------------------------ writing

    def add(self, messages: Sequence[ChatMessage]) -> list[Record]:
        """Append one ``message_added`` event per message, in one atomic append.

        Raises:
            ChainIntegrityError: This object found the chain broken earlier.
            ConcurrencyError: Other writers kept winning for 30 seconds.
        """
        system = [is_system(m) for m in messages]

        def build(base: int, runs: list[Run], found: list[Ref]) -> list[NewRecord]:
            return self._added([], messages, system, base, runs, found)

        if not messages:
            return []
        with self._lock:
            return self._write(build, need_system=True)

    def pop(self, check: Callable[[Any], object] | None = None) -> Any | None:
        """Take back the newest item: one ``message_retracted`` event.

        Args:
            check: Called with the item's stored object before anything is written; if it
                raises, nothing is written.

        Returns:
            The stored object taken back, or None when the list is empty (nothing written).
        """
        taken: list[Any] = []

        def build(base: int, runs: list[Run], found: list[Ref]) -> list[NewRecord]:
            taken.clear()
            if not runs:
                return []
            ref = tail(runs, 1)[0]
            (obj,) = self._objects([ref], {})
            if check is not None:
                check(obj)
            _drop_last(runs)
            if ref in found:
                found.remove(ref)
            taken.append(obj)
            event = MessageRetracted(seq=ref[0], index=ref[1])
            return [encode_event(event, self._meta(runs, found))]

        with self._lock:
            self._load()  # a pop takes what is newest now, not what this object saw
            self._write(build, need_system=True)
        return taken[0] if taken else None

    def newest_snapshot(self, count: int) -> tuple[list[Any], list[Ref], bool]:
        """:meth:`newest_refs` of ``count`` and whether they are the whole list (nothing
        older is in it), as of one newest event."""
        with self._lock:
            objects, refs = self.newest_refs(count)
            first = next(_oldest(self._runs), None)
            whole = first is None or (bool(refs) and refs[0] == first)
            return objects, refs, whole

    def replace_newest(
        self,
        expected: Sequence[Ref],
        messages: Sequence[ChatMessage],
        prune: Callable[[Any], bool] | None = None,
    ) -> bool:
        """Replace the newest items by ``messages`` if they are still exactly ``expected``
        (refs an earlier read returned): in one append, a ``message_retracted`` per item
        replaced (oldest first), then a ``message_added`` per message. The history keeps
        every item; a concurrent writer either lands first (then this returns False) or
        makes this append lose its expected head, which re-checks and returns False.

        Args:
            expected: The refs of the newest items, oldest first (not empty).
            messages: What replaces them.
            prune: Called with the stored object of each older item, oldest first: those it
                accepts, up to the first it refuses, are retracted in the same append (the
                SDK's expired encrypted items).

        Returns:
            False, with nothing written, when the newest items are not ``expected`` any more
            (something was added, popped or cleared since the read), or ``expected`` is empty.

        Raises:
            ChainIntegrityError: This object found the chain broken earlier.
            ConcurrencyError: Other writers kept winning for 30 seconds.
        """
        wanted = list(expected)
        if not wanted:
            return False
        system = [is_system(m) for m in messages]
        stale: list[bool] = []

        def build(base: int, runs: list[Run], found: list[Ref]) -> list[NewRecord]:
            stale.clear()
            if tail(runs, len(wanted)) != wanted:
                stale.append(True)
                return []
            older = self._prunable(runs, len(wanted), prune) if prune is not None else []
            records = []
            for ref in [*older, *wanted]:
                _remove(runs, ref)
                if ref in found:
                    found.remove(ref)
                event = MessageRetracted(seq=ref[0], index=ref[1])
                records.append(encode_event(event, self._meta(runs, found)))
            return self._added(records, messages, system, base, runs, found)

        with self._lock:
            self._load()  # checked against what is newest now, not what this object saw
            self._write(build, need_system=True)
        return not stale

    def _added(  # noqa: PLR0917 - the build callbacks' own state, passed through
        self,
        records: list[NewRecord],
        messages: Sequence[ChatMessage],
        system: list[bool],
        base: int,
        runs: list[Run],
        found: list[Ref],
    ) -> list[NewRecord]:
        """``records`` and then one ``message_added`` per message, numbered on from ``base``
        (the head's seq), with ``runs`` and ``found`` (the system messages' refs) kept up to
        date for each one's meta: what every build of an append of messages ends with."""
        for offset, message in enumerate(messages):
            seq = base + len(records) + 1
            _extend(runs, seq)
            if system[offset]:
                found.append((seq, 0))
            records.append(added_record(message, self._meta(runs, found)))
        return records

    def _prunable(self, runs: list[Run], keep: int, prune: Callable[[Any], bool]) -> list[Ref]:
        """The oldest refs of ``runs``, before its newest ``keep``, that ``prune`` accepts, up
        to the first it refuses; read a chunk at a time (it usually stops in the first)."""
        left = _size(runs) - keep
        refs = _oldest(runs)
        taken: list[Ref] = []
        while left > 0:
            page = list(islice(refs, min(CHUNK, left)))
            left -= len(page)
            objects, kept = self._objects_refs(page, {})
            for ref, obj in zip(kept, objects, strict=True):
                if not prune(obj):
                    return taken
                taken.append(ref)
        return taken

    def replace_all(self, messages: Sequence[ChatMessage]) -> list[Record]:
        """Empty the list and add ``messages``, in one append: a ``memory_cleared`` then a
        ``message_added`` per message (what :meth:`clear` then :meth:`add` write, with no
        moment in between). The history keeps every item.

        Raises:
            ChainIntegrityError: This object found the chain broken earlier.
            ConcurrencyError: Other writers kept winning for 30 seconds.
        """
        system = [is_system(m) for m in messages]

        def build(base: int, runs: list[Run], found: list[Ref]) -> list[NewRecord]:
            runs.clear()
            found.clear()
            records = [cleared_record(_CLEARED_META)]
            return self._added(records, messages, system, base, runs, found)

        with self._lock:
            return self._write(build, need_system=False)

    def clear(self) -> Record:
        """Empty the list: one ``memory_cleared`` event (the history keeps every item)."""
        with self._lock:
            stored = self._write(lambda *_: [cleared_record(_CLEARED_META)], need_system=False)
            return stored[-1]

    def record_sent(self, event: ContextSent) -> Record:
        """Append a ``context_sent`` event (what one model call was sent), one append; its
        meta keeps the list, so the list is still read from the newest event."""
        with self._lock:
            (stored,) = self._write(
                lambda _base, runs, found: [encode_event(event, self._meta(runs, found))],
                need_system=True,
            )
            return stored

    def sent(self, seq: int) -> list[tuple[str, Any]]:
        """What the model call recorded at event ``seq`` was sent, in order: ``("ref", stored
        object)`` for a message of the log, ``("new", item)`` for input kept in the event.

        Raises:
            ValueError: Event ``seq`` is not a ``context_sent`` event ("no window recorded").
            ChainIntegrityError: A record read does not verify.
        """
        found = self._verified(gt=seq - 1, lte=seq) if seq >= 1 else []
        if not found:
            msg = f"sent({seq}): {self._id!r} has no event {seq}"
            raise ValueError(msg)
        event = decode_event(found[0])
        if not isinstance(event, ContextSent):
            msg = (
                f"no window recorded at seq {seq} of {self._id!r} (a {found[0].kind} event): "
                "only model calls made through window_callback() or a history with window= "
                "record what was sent"
            )
            raise ValueError(msg)
        refs = [_sent_ref(entry, seq) for entry in event.sent if "ref" in entry]
        stored = iter(self.objects(refs))
        return [
            ("ref", next(stored)) if "ref" in entry else ("new", entry["new"])
            for entry in event.sent
        ]

    @staticmethod
    def _meta(runs: Sequence[Run], system: Sequence[Ref] | None) -> str:
        return WindowMeta(
            [list(run) for run in runs],
            UNBOUNDED,
            system=None if system is None else [[s, i] for s, i in system],
        ).encode()

    def _write(
        self, build: Callable[[int, list[Run], list[Ref]], list[NewRecord]], *, need_system: bool
    ) -> list[Record]:
        if self._broken is not None:
            broken = self._broken
            raise ChainIntegrityError(
                broken.stream_id,
                broken.seq,
                f"{broken.reason}; this session object stopped appending when it found the "
                "break (open a new one once the ledger is repaired)",
            )
        deadline = 0.0  # set at the first lost race: the common path never reads the clock
        if self._seq < 0:
            self._load()
        while True:
            if need_system and self._system is None:
                self._system = self._find_system()
            runs = list(self._runs)
            found = list(self._system or [])
            records = build(self._seq, runs, found)
            if not records:
                return []
            try:
                stored = self._store.append(
                    self._key,
                    records,
                    expected_seq=self._seq,
                    expected_hash=self._hash or GENESIS,
                )
            except ConcurrencyError:
                now = time.monotonic()
                deadline = deadline or now + _RETRY_FOR
                if now > deadline:
                    raise
                self._load()
                self._past_damage()
                continue
            last = stored[-1]
            self._seq, self._hash = last.seq, last.hash
            self._runs = [] if last.kind in EMPTYING_KINDS else runs
            self._system = [] if last.kind in EMPTYING_KINDS else found
            return stored

    def _past_damage(self) -> None:
        """After a lost race: when every record after the list's newest readable event is
        acknowledged as damaged (store.quarantine: the newest write was torn, say), append
        after them - their chain goes on - with the list as it was before them. Only on this
        path: reads never pay for it."""
        top = self._store.head(StreamKey(self._key))
        if top is None or top.seq <= self._seq:
            return
        skip = quarantined_seqs(self._store, self._key)
        if all(s in skip for s in range(self._seq + 1, top.seq + 1)):
            self._seq, self._hash = top.seq, top.hash

    def _find_system(self) -> list[Ref]:
        """The system messages of a list whose newest event did not record them (written
        before item lists): read once, then recorded by every event this object writes."""
        refs = tail(self._runs, None)
        found = []
        for ref, obj in zip(refs, self._objects(refs, {}), strict=True):
            if is_system(message_from_obj(obj)):
                found.append(ref)
        return found


def loads(text: str) -> Any:
    """``json.loads(text)``, three times faster: a whole-history read decodes every stored
    item, and :mod:`json` took more time than verifying them.

    pydantic-core's parser (pydantic is already a dependency) gives the same values as
    :mod:`json` for every text it accepts - big integers, floats to the last bit, ``NaN`` and
    ``Infinity``, the last of duplicate keys - and refuses the rest (a lone surrogate, nesting
    deeper than its limit), which :mod:`json` then decodes, or refuses with its own error.
    Property-tested against :func:`json.loads` on generated and mangled JSON.
    """
    try:
        return from_json(text)
    except (ValueError, TypeError):  # TypeError: a str it cannot take as UTF-8 (a surrogate)
        return json.loads(text)


def describe(policy: WindowPolicy, memory_id: MemoryId) -> str:
    """A window policy as ``chatledger``'s ``--policy`` writes it: ``messages:N`` or
    ``tokens:N:ESTIMATOR``, with ``:keep-system-first`` and ``:evict-to=0.7`` when set."""
    limit = policy.limit_for(memory_id)
    text = (
        f"tokens:{limit}:{policy.identity}"
        if isinstance(policy, TokenWindowPolicy)
        else f"messages:{limit}"
    )
    if policy.always_keep_system_message_first:
        text += ":keep-system-first"
    if policy.evict_to is not None:
        text += f":evict-to={policy.evict_to}"
    return text


def _sent_ref(entry: dict[str, Any], seq: int) -> Ref:
    ref = entry.get("ref")
    if (
        isinstance(ref, list)
        and len(ref) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ref)
        and 1 <= ref[0] < seq
    ):
        return (ref[0], ref[1])
    msg = f"context_sent event {seq} names {ref!r}, not an earlier message [seq, index]"
    raise ValueError(msg)


def _item(obj: Any, index: int) -> Any:
    if isinstance(obj, list) and 0 <= index < len(obj):
        return obj[index]
    msg = f"a list refers to item {index} of an event that did not bring it; run verify()"
    raise ValueError(msg)
