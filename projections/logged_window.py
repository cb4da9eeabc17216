"""A memory's window cached in the object and kept in step with its event stream.

:class:`LoggedWindow` owns the coherence of the cached window with the log: it follows the
head (catching up on a few events, reloading from the head event after a change under it),
and writes by appending with the expected seq and hash, folding in what others appended when
a race is lost. It is separate from :mod:`projections.window_memory`, the ChatMemory API built
on it, because this state machine is the part every window memory shares unchanged, and it
knows nothing of messages' validity, views or the async twins.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from eventlog.errors import ChainIntegrityError, ConcurrencyError
from eventlog.hashing import GENESIS
from eventlog.ids import MemoryId
from eventlog.models import NewRecord, Record
from eventlog.recorders.memory import InMemoryEventStore
from eventlog.store import EventStore
from eventlog.vouch import REMEDY
from projections.meta import EMPTYING_KINDS, WindowMeta
from projections.replay import (
    WindowRefs,
    materialize,
    origin_entries,
    read_checked,
    window_meta,
)
from projections.validity import profile_of
from projections.window import Entry, TokenWindowPolicy, Window, WindowPolicy

__all__ = ["RETRY_FOR", "LoggedWindow"]

_CATCH_UP_READ = 64  # events behind: read them all at once rather than head + lookups
RETRY_FOR = 30.0
"""Seconds of lost races (optimistic-concurrency retries) before a write gives up: the memories'
and every framework adapter's, so all writers of one ledger give up alike."""
_log = logging.getLogger("chatledger.memories")


class LoggedWindow:
    """The shared machinery: a cached window kept in step with the log.

    The object holds the window as of ``seq`` (the last event it has seen). Every call first
    asks the store for the head - one cheap indexed lookup, often answered from the store's
    cache - and, if another object or process appended, rebuilds the window from the head
    event (O(window), never a replay). Writes append with ``expected_seq=seq``; losing a
    race raises ConcurrencyError inside, and the add is recomputed on the new state and retried.
    """

    def __init__(
        self,
        memory_id: MemoryId,
        policy: WindowPolicy,
        store: EventStore | None,
        valid_for: str | None = None,
    ) -> None:
        if memory_id is None:
            msg = "id cannot be None; pass a str, int, UUID or tuple memory id"
            raise ValueError(msg)
        self._store: EventStore = store if store is not None else InMemoryEventStore()
        # StreamKey: the stored key, passed through as is (the store would encode it again).
        self._key = self._store.stream_key(memory_id)  # TypeError for unsupported id types
        self._id = memory_id
        self._policy = policy
        policy.limit_for(memory_id)  # LangChain4j validates a dynamic provider once at build
        self._valid_for = None if valid_for is None else profile_of(valid_for).name
        self._lock = threading.RLock()
        self._broken: ChainIntegrityError | None = None  # set when a read found the chain broken
        self._window = Window(policy)
        self._seq = -1  # nothing loaded yet
        self._hash = ""  # hash of event self._seq: a head with the same seq but another hash
        # means the history changed under this object (a failover lost a commit, a restore)

    # ------------------------------------------------------------------ keeping in step

    def _sync(self) -> None:
        try:
            self._follow()
        except ChainIntegrityError as e:
            # Its chain broke under it: never append onto a history that does not verify.
            self._broken = e
            raise

    def _follow(self) -> None:
        head = self._store.head(self._key)
        if head is None:
            if self._seq > 0:
                self._changed_under_us("it has no events now")
            self._settle([], 0, "")
            self._observe(None)
        elif type(head.seq) is not int:
            # A row no store writes (a seq stored as text by hand): damage, not a TypeError.
            msg = f"its newest row holds seq {head.seq!r}, not an integer; {REMEDY}"
            raise ChainIntegrityError(self._key, 0, msg)
        elif head.seq != self._seq or head.hash != self._hash:
            self._load(head.seq)

    def _changed_under_us(self, what: str) -> None:
        _log.warning(
            "memory %r: history changed under this object (it held seq %d, %s); reloading "
            "from the store - run verify() if nothing restored or failed over the database",
            self._key,
            self._seq,
            what,
        )
        self._forget_cached()

    def _forget_cached(self) -> None:
        self._window = Window(self._policy)  # nothing cached is trusted any more
        self._seq, self._hash = -1, ""
        self._observe(None)  # nor what a subclass kept from the old history's window record

    def _move_to(self, record: Record, known: dict[tuple[int, int], Entry]) -> None:
        """Adopt the window ``record`` recorded, reading only the messages not ``known``."""
        meta = window_meta(record)  # decoded once: the refs and the system messages' state
        entries = materialize(
            self._store,
            self._key,
            WindowRefs(meta.runs, meta.size),
            identity=self._policy.identity,
            known=known,
        )
        # The system messages stay settled only while every event says so (``sys`` recorded);
        # a history written before that was recorded is settled again by a clear or a set.
        settled = record.kind in EMPTYING_KINDS or meta.system is not None
        self._settle(entries, record.seq, record.hash, system_settled=settled)
        try:
            self._observe(record)
        except BaseException:
            # What a subclass keeps from the head (a summary) could not be read: trust
            # nothing cached, so the next call reloads it all rather than go on without it.
            self._forget_cached()
            raise

    def _load(self, head_seq: int) -> None:
        behind = head_seq - self._seq
        if 0 < behind <= _CATCH_UP_READ and self._seq >= 0:
            # A few events by another writer: one read brings the head event and every
            # message it can add to the window (the rest is already in hand).
            tail = read_checked(self._store, self._key, gt=self._seq, lte=head_seq)
            if tail and tail[0].prev_hash == self._hash and tail[-1].seq == head_seq:
                self._apply_tail(tail)
                return
        if self._seq > 0 and not self._still_holds(head_seq):
            self._changed_under_us(f"the head is now seq {head_seq}, not a continuation")
        found = read_checked(self._store, self._key, gt=head_seq - 1, lte=head_seq)
        if not found:
            # The newest record is acknowledged as damaged (store.quarantine), which only a
            # framework session's item list can step over: a window lives in that record.
            raise ChainIntegrityError(
                self._key,
                head_seq,
                "the newest record is acknowledged as damaged (quarantined) and holds this "
                "memory's window; a window memory cannot go on past it - restore the database "
                "from a backup, or read the history (iter_history) to rebuild the memory",
            )
        (record,) = found
        self._move_to(record, {})

    def _still_holds(self, head_seq: int) -> bool:
        """True when the event this object last saw is still in the log, with its hash: the
        head moved on by a continuation (of any length, by any number of writers), so
        nothing went backwards. One record read; only a head behind ours, or another record
        at our seq (a restore, a failover that lost commits, a rewrite), is a change."""
        if head_seq < self._seq:
            return False
        mine = read_checked(self._store, self._key, gt=self._seq - 1, lte=self._seq)
        return bool(mine) and mine[0].hash == self._hash

    def _catch_up(self) -> None:
        """After a lost race: what others appended since our seq, in one query."""
        if self._seq >= 0:
            tail = read_checked(self._store, self._key, gt=self._seq, limit=_CATCH_UP_READ)
            if 0 < len(tail) < _CATCH_UP_READ and tail[0].prev_hash == self._hash:
                self._apply_tail(tail)
                return
        self._sync()

    def _apply_tail(self, tail: list[Record]) -> None:
        known = {e.ref: e for e in self._window.entries}
        for record in tail:
            known.update(origin_entries(record, self._policy.identity))
        self._move_to(tail[-1], known)

    def _settle(
        self, entries: list[Entry], seq: int, head_hash: str, *, system_settled: bool = True
    ) -> None:
        if isinstance(self._policy, TokenWindowPolicy):
            # Counts recorded under another estimator are not ours: count those once now.
            entries = [
                e
                if e.tokens is not None
                else Entry(e.message, e.ref, self._policy.count(e.message))
                for e in entries
            ]
        self._window = Window(self._policy, entries, system_settled=system_settled)
        self._seq = seq
        self._hash = head_hash

    def _write(self, build: Any) -> None:
        """Run ``build(window, seq) -> (records, new_window)`` and append, retrying on a lost
        race until the append lands or the retry time is used up."""
        deadline = 0.0  # set at the first lost race: the common path never reads the clock
        if self._broken is not None:
            broken = self._broken
            raise ChainIntegrityError(
                broken.stream_id,
                broken.seq,
                f"{broken.reason}; this memory object stopped appending when it found the break "
                "(open a new one once the ledger is repaired)",
            )
        if self._seq < 0:
            self._sync()
        rebuilt: list[Window] = []

        def rebuild(newer: list[Record]) -> list[NewRecord] | None:
            # Called by the store's append each time it loses the race (PostgreSQL), with the
            # records others appended since our head (vouched for, chained to our hash): fold
            # them in and build again, so a lost race costs no read and no second call.
            if newer[0].prev_hash != (self._hash or GENESIS) or newer[0].seq != self._seq + 1:
                return None
            try:
                self._apply_tail(newer)
            except ChainIntegrityError as e:
                self._broken = e
                raise
            again: list[NewRecord]
            again, window = build(self._window, self._seq)
            rebuilt.append(window)
            return again

        while True:
            # No head check first: the append names the seq it expects, so a write by
            # anyone else since our last call fails it, and only then do we catch up.
            records, window = build(self._window, self._seq)
            if not records:
                return
            rebuilt.clear()
            try:
                # The hash too, not only the seq: a head lost in a failover and replaced by
                # another writer at the same seq must not be continued from our copy.
                stored = self._store.append_or_rebuild(
                    self._key,
                    records,
                    expected_seq=self._seq,
                    expected_hash=self._hash or GENESIS,
                    rebuild=rebuild,
                )
            except ConcurrencyError:
                now = time.monotonic()
                deadline = deadline or now + RETRY_FOR
                if now > deadline:
                    raise
                try:
                    self._catch_up()
                except ChainIntegrityError as e:
                    self._broken = e
                    raise
                continue
            self._window = rebuilt[-1] if rebuilt else window
            self._seq = stored[-1].seq
            self._hash = stored[-1].hash
            self._observe(stored[-1])
            return

    def _observe(self, head: Record | None) -> None:
        """Called with the head record whenever the object moves to it (None: no events);
        subclasses read what they keep in the window record."""

    def _meta(
        self,
        window: Window,
        tokens: int | list[int] | None = None,
        identity: str | None = None,
    ) -> str:
        """The window record text for an event this memory writes, leaving ``window``."""
        summary, through = self._summary_fields()
        return WindowMeta.of(
            window.entries,
            window.limit,
            tokens,
            identity,
            evict_permille=self._policy.evict_permille,
            summary=summary,
            through=through,
            system=window.system_refs(),
        ).encode()

    def _summary_fields(self) -> tuple[int | None, int | None]:
        """``(summary, through)`` of the window record (a summarizing memory's summary)."""
        return None, None
