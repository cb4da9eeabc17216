"""Reading a framework session's item list: verified reads of exactly the items asked for.

:class:`ItemListReader` is the read side of :class:`~projections.adapters.item_list.ItemList`
(see that module for the design): it loads the list from the newest event's meta, checks that
history only went forward under it, and reads the items the refs name in as few verified range
reads as they have gaps. The writer adds appends on top of the state kept here.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar

from pydantic_core import from_json

from eventlog.errors import ChainIntegrityError
from eventlog.formats.lc4j_json import message_from_obj
from eventlog.hashing import RANGE_ROW_FIELDS
from eventlog.ids import MemoryId, StreamKey
from eventlog.keyring import is_sealed
from eventlog.messages import ChatMessage
from eventlog.models import ContextSent, Record
from eventlog.serialization import decode_event, require_opened
from eventlog.store import EventStore
from projections.adapters.item_list_runs import Ref, Run, length, oldest, tail
from projections.checked import quarantined_seqs, read_checked, read_checked_rows
from projections.meta import EMPTYING_KINDS
from projections.replay import erased_error, window_meta

__all__ = ["CHUNK", "ItemListReader", "loads"]

Row = tuple[Any, ...]  # a range row (eventlog.hashing.RANGE_ROW_FIELDS)
_SEQ, _KIND, _PAYLOAD, _PREV, _HASH = (
    RANGE_ROW_FIELDS.index(f) for f in ("seq", "kind", "payload", "prev_hash", "hash")
)
_T = TypeVar("_T")

_GAP = 64  # read the events between two wanted ones rather than issue another query
_PAGE = 4_096  # events per read when the whole list is wanted: bounded memory per step
CHUNK = 512
"""Items per step of :meth:`ItemListReader.chunks`: a few milliseconds of work, so an async caller
gives the event loop back well within the interpreter's 5 ms thread switch interval."""
_BRINGING = frozenset(("message_added", "messages_set"))  # the kinds whose payload is an item
_log = logging.getLogger("chatledger.sessions")


class ItemListReader:
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

    def newest_refs(
        self, count: int | None = None, *, runs_out: list[Run] | None = None
    ) -> tuple[list[Any], list[Ref]]:
        """:meth:`newest` and the refs of what it returns; ``runs_out`` receives the runs of
        the list they were read from (what a recorded call chose from: see
        :meth:`~projections.adapters.item_list.ItemList.record_sent`)."""
        if count is not None and count <= 0:
            with self._lock:
                self._load()
                if runs_out is not None:
                    runs_out[:] = self._runs
            return [], []
        with self._lock:
            batch = self._verified(desc=True, limit=1 if count is None else count)
            if runs_out is not None:
                runs_out.clear()  # an empty list: no event, or an emptying one
            if not batch:
                self._settle(None)
                return [], []
            self._settle(batch[0], batch)
            if runs_out is not None:
                runs_out[:] = self._runs
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
        runs_out: list[Run] | None = None,
    ) -> Iterator[list[_T]]:
        """:meth:`newest` in chunks of ``size`` items, each item passed through ``convert``: an
        async caller runs one step at a time on a worker (``off_loop(store, next, it, None)``)
        and gives the event loop back between steps, however long the list is. The list is
        the one of the newest event when the first step runs; each chunk is verified and
        chained to the one before it. ``runs_out`` receives that list's runs at the first step.

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
        if runs_out is not None:
            runs_out[:] = runs
        have = {r.seq: r for r in batch}
        # The refs a chunk at a time: a list of a million items never holds a million refs.
        refs = oldest(runs, 0 if count is None else max(length(runs) - count, 0))
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

    def newest_snapshot(self, count: int) -> tuple[list[Any], list[Ref], bool]:
        """:meth:`newest_refs` of ``count`` and whether they are the whole list (nothing
        older is in it), as of one newest event."""
        with self._lock:
            objects, refs = self.newest_refs(count)
            first = next(oldest(self._runs), None)
            whole = first is None or (bool(refs) and refs[0] == first)
            return objects, refs, whole

    def sent(self, seq: int) -> list[tuple[str, Any]]:
        """What the model call recorded at event ``seq`` was sent, in order: ``("ref", stored
        object)`` for a message of the log, ``("new", item)`` for input kept in the event.

        Raises:
            ValueError: Event ``seq`` is not a ``context_sent`` event ("no window recorded").
            ContentErasedError: It is one, whose content was erased (naming when and why).
            ChainIntegrityError: A record read does not verify.
        """
        if isinstance(seq, bool) or not isinstance(seq, int):
            msg = (
                f"sent({seq!r}): a seq is an int (the context_sent event's), not "
                f"{type(seq).__name__}"
            )
            raise TypeError(msg)
        found = self._verified(gt=seq - 1, lte=seq) if seq >= 1 else []
        if not found:
            msg = f"sent({seq}): {self._id!r} has no event {seq}"
            raise ValueError(msg)
        if found[0].erased and found[0].kind == "context_sent":
            # A model call whose content an erasure deleted: say when and why, as as_of does.
            raise erased_error(self._store, found[0])
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
