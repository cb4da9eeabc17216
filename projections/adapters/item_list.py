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

import time
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any

from eventlog.errors import ChainIntegrityError, ConcurrencyError
from eventlog.formats.lc4j_json import message_from_obj
from eventlog.hashing import GENESIS
from eventlog.ids import MemoryId, StreamKey
from eventlog.messages import ChatMessage, CustomMessage, SystemMessage
from eventlog.models import ContextSent, MessageRetracted, NewRecord, Record
from eventlog.serialization import added_record, cleared_record, encode_event
from projections.adapters.item_list_reader import CHUNK, ItemListReader, loads
from projections.adapters.item_list_runs import (
    Ref,
    Run,
    drop_last,
    extend,
    length,
    oldest,
    remove,
    tail,
)
from projections.checked import quarantined_seqs
from projections.logged_window import RETRY_FOR
from projections.meta import EMPTYING_KINDS, UNBOUNDED_LIMIT, WindowMeta
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

_CLEARED_META = WindowMeta([]).encode()


def is_system(message: ChatMessage) -> bool:
    """True for a message a window policy treats as a system message: a chatledger one, or a
    LangChain system message stored by the LangChain adapter (a custom message)."""
    if isinstance(message, SystemMessage):
        return True
    if isinstance(message, CustomMessage):
        stored = message.attributes.get(LANGCHAIN_KEY)
        return isinstance(stored, dict) and stored.get("type") == "system"
    return False


class ItemList(ItemListReader):
    """The list of one memory (items after the last clear, minus retractions), read by index
    (:class:`~projections.adapters.item_list_reader.ItemListReader`) and appended to.

    Thread-safe; every method does blocking I/O (adapters call them off the event loop).

    Args:
        store: The ledger.
        memory_id: The memory id.
    """

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
            drop_last(runs)
            if ref in found:
                found.remove(ref)
            taken.append(obj)
            event = MessageRetracted(seq=ref[0], index=ref[1])
            return [encode_event(event, self._meta(runs, found))]

        with self._lock:
            self._load()  # a pop takes what is newest now, not what this object saw
            self._write(build, need_system=True)
        return taken[0] if taken else None

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
                remove(runs, ref)
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
            extend(runs, seq)
            if system[offset]:
                found.append((seq, 0))
            records.append(added_record(message, self._meta(runs, found)))
        return records

    def _prunable(self, runs: list[Run], keep: int, prune: Callable[[Any], bool]) -> list[Ref]:
        """The oldest refs of ``runs``, before its newest ``keep``, that ``prune`` accepts, up
        to the first it refuses; read a chunk at a time (it usually stops in the first)."""
        left = length(runs) - keep
        refs = oldest(runs)
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

    def record_sent(
        self, event: ContextSent, *, chosen_from: Sequence[Run] | None = None
    ) -> Record:
        """Append a ``context_sent`` event (what one model call was sent), one append; its
        meta keeps the list, so the list is still read from the newest event.

        Args:
            event: The call.
            chosen_from: The list the call chose from (its runs; None: the current list). The
                event keeps that list, which the audit re-runs the policy over: when another
                writer changed it, nothing is written and the caller chooses again.

        Raises:
            ConcurrencyError: The list is no longer ``chosen_from``.
        """
        with self._lock:
            (stored,) = self._write(
                lambda _base, runs, found: [encode_event(event, self._meta(runs, found))],
                need_system=True,
                same_list=chosen_from,
            )
            return stored

    @staticmethod
    def _meta(runs: Sequence[Run], system: Sequence[Ref] | None) -> str:
        return WindowMeta(
            [list(run) for run in runs],
            UNBOUNDED,
            system=None if system is None else [[s, i] for s, i in system],
        ).encode()

    def _write(
        self,
        build: Callable[[int, list[Run], list[Ref]], list[NewRecord]],
        *,
        need_system: bool,
        same_list: Sequence[Run] | None = None,
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
            if same_list is not None and runs != list(same_list):
                raise ConcurrencyError(self._key, self._seq, None)
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
                deadline = deadline or now + RETRY_FOR
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
