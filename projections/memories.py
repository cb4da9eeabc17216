"""MessageWindowChatMemory and TokenWindowChatMemory: LangChain4j's memories over the log."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, Self

from eventlog.errors import ConcurrencyError
from eventlog.hashing import GENESIS
from eventlog.ids import MemoryId, StreamKey, memory_key
from eventlog.memory import InMemoryEventStore
from eventlog.messages import MESSAGE_TYPES
from eventlog.messages import ChatMessage as _ChatMessage
from eventlog.models import LoggedEvent, NewRecord, Record
from eventlog.serialization import added_record, cleared_record, logged_event, set_record
from eventlog.store import EventStore
from projections.base import ChatMemory
from projections.meta import WindowMeta
from projections.replay import (
    materialize,
    origin_entries,
    read_checked,
    records,
    resolve_seq,
    view_at,
    what_if,
    window_refs,
)
from projections.tokens import TokenCountEstimator
from projections.window import (
    Entry,
    Limit,
    MessageWindowPolicy,
    TokenWindowPolicy,
    Window,
    WindowPolicy,
)

__all__ = ["MessageWindowChatMemory", "TokenWindowChatMemory"]

_MESSAGE_TYPES = tuple(MESSAGE_TYPES.values())
_CATCH_UP_READ = 64  # events behind: read them all at once rather than head + lookups
_EXACT_TYPES = frozenset(_MESSAGE_TYPES)
_RETRY_FOR = 30.0  # seconds of optimistic-concurrency retries before giving up
_CLEARED_META = WindowMeta([]).encode()
_HISTORY_PAGE = 1_000  # events decoded per read while walking a history
_log = logging.getLogger("chatledger.memories")


def _as_list(args: tuple[Any, ...], operation: str) -> list[_ChatMessage]:
    """``add(m)``, ``add(m1, m2)`` and ``add([m1, m2])`` -> a checked list (nothing written yet)."""
    if len(args) == 1 and type(args[0]) in _EXACT_TYPES:  # the common add(message)
        return [args[0]]
    if len(args) == 1 and not isinstance(args[0], _MESSAGE_TYPES) and isinstance(args[0], Iterable):
        if isinstance(args[0], str | bytes | dict):
            items: list[Any] = [args[0]]
        else:
            items = list(args[0])
    else:
        items = list(args)
    for i, item in enumerate(items):
        if not isinstance(item, _MESSAGE_TYPES):
            msg = (
                f"{operation}: item {i} is {type(item).__name__} {item!r:.60}, not a chat message; "
                "wrap text in UserMessage(...), AiMessage(...) or SystemMessage(...) "
                "(nothing was written)"
            )
            raise TypeError(msg)
    return items


def _check_page(page: object) -> None:
    if isinstance(page, bool) or not isinstance(page, int) or page < 1:
        msg = f"iter_history(page={page!r}): page must be an int >= 1 (events per read)"
        raise ValueError(msg)


class _WindowChatMemory(ChatMemory):
    """The shared machinery: a cached window kept in step with the log.

    The object holds the window as of ``seq`` (the last event it has seen). Every call first
    asks the store for the head - one cheap indexed lookup, often answered from the store's
    cache - and, if another object or process appended, rebuilds the window from the head
    event (O(window), never a replay). Writes append with ``expected_seq=seq``; losing a
    race raises ConcurrencyError inside, and the add is recomputed on the new state and retried.
    """

    def __init__(self, memory_id: MemoryId, policy: WindowPolicy, store: EventStore | None) -> None:
        if memory_id is None:
            msg = "id cannot be None; pass a str, int, UUID or tuple memory id"
            raise ValueError(msg)
        # StreamKey: the stored key, passed through as is (the store would encode it again).
        self._key = StreamKey(memory_key(memory_id))  # TypeError for unsupported id types
        self._id = memory_id
        self._policy = policy
        policy.limit_for(memory_id)  # LangChain4j validates a dynamic provider once at build
        self._store: EventStore = store if store is not None else InMemoryEventStore()
        self._lock = threading.RLock()
        self._window = Window(policy)
        self._seq = -1  # nothing loaded yet
        self._hash = ""  # hash of event self._seq: a head with the same seq but another hash
        # means the history changed under this object (a failover lost a commit, a restore)

    # ------------------------------------------------------------------ properties

    @property
    def id(self) -> MemoryId:
        """The memory id."""
        return self._id

    @property
    def store(self) -> EventStore:
        """The event store holding this memory's history."""
        return self._store

    @property
    def policy(self) -> WindowPolicy:
        """The window rules (limit, counting, system-message flag)."""
        return self._policy

    @property
    def seq(self) -> int:
        """Seq of the last event reflected in the window (0: empty history)."""
        with self._lock:
            self._sync()
            return self._seq

    # ------------------------------------------------------------------ keeping in step

    def _sync(self) -> None:
        head = self._store.head(self._key)
        if head is None:
            if self._seq > 0:
                self._changed_under_us("it has no events now")
            self._settle([], 0, "")
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
        self._window = Window(self._policy)  # nothing cached is trusted any more
        self._seq, self._hash = -1, ""

    def _load(self, head_seq: int) -> None:
        behind = head_seq - self._seq
        if 0 < behind <= _CATCH_UP_READ and self._seq >= 0:
            # A few events by another writer: one read brings the head event and every
            # message it can add to the window (the rest is already in hand).
            tail = read_checked(self._store, self._key, gt=self._seq, lte=head_seq)
            if tail and tail[0].prev_hash == self._hash and tail[-1].seq == head_seq:
                self._apply_tail(tail)
                return
        if self._seq >= 0:
            self._changed_under_us(f"the head is now seq {head_seq}, not a continuation")
        (record,) = read_checked(self._store, self._key, gt=head_seq - 1, lte=head_seq)
        self._settle(self._recorded(record, {}), head_seq, record.hash)

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
        self._settle(self._recorded(tail[-1], known), tail[-1].seq, tail[-1].hash)

    def _recorded(self, record: Record, known: dict[tuple[int, int], Entry]) -> list[Entry]:
        """The window ``record`` recorded, reading only the messages not ``known``."""
        return materialize(
            self._store,
            self._key,
            window_refs(record),
            identity=self._policy.identity,
            known=known,
        )

    def _settle(self, entries: list[Entry], seq: int, head_hash: str) -> None:
        if isinstance(self._policy, TokenWindowPolicy):
            # Counts recorded under another estimator are not ours: count those once now.
            entries = [
                e
                if e.tokens is not None
                else Entry(e.message, e.ref, self._policy.count(e.message))
                for e in entries
            ]
        self._window = Window(self._policy, entries)
        self._seq = seq
        self._hash = head_hash

    def _write(self, build: Any) -> None:
        """Run ``build(window, seq) -> (records, new_window)`` and append, retrying on a lost
        race until the append lands or the retry time is used up."""
        deadline = 0.0  # set at the first lost race: the common path never reads the clock
        if self._seq < 0:
            self._sync()
        while True:
            # No head check first: the append names the seq it expects, so a write by
            # anyone else since our last call fails it, and only then do we catch up.
            records, window = build(self._window, self._seq)
            if not records:
                return
            try:
                # The hash too, not only the seq: a head lost in a failover and replaced by
                # another writer at the same seq must not be continued from our copy.
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
                self._catch_up()
                continue
            self._window = window
            self._seq = stored[-1].seq
            self._hash = stored[-1].hash
            return

    # ------------------------------------------------------------------ ChatMemory

    def messages(self) -> list[_ChatMessage]:
        with self._lock:
            limit = self._policy.limit_for(self._id)  # before touching the store, as LC4j
            self._sync()
            # A limit that shrank since the last write trims the view only; the log is written
            # at the next add/set, exactly like LangChain4j's store.
            return [e.message for e in self._window.view(limit)]

    def add(self, *messages: Any) -> None:
        items = _as_list(messages, "add")
        if not items:
            return
        policy = self._policy
        counts = [policy.count(m) for m in items]  # each message counted once, before writing
        identity = policy.identity if isinstance(policy, TokenWindowPolicy) else None

        def limit() -> int:
            return policy.limit_for(self._id)

        def build(current: Window, seq: int) -> tuple[list[NewRecord], Window]:
            work = current.copy()
            records: list[NewRecord] = []
            for message, tokens in zip(items, counts, strict=True):
                entry = Entry(message, (seq + len(records) + 1, 0), tokens)
                if work.add(entry, limit) is None:
                    continue  # the same system message again: LangChain4j writes nothing
                meta = WindowMeta.of(work.entries, work.limit, tokens, identity)
                records.append(added_record(message, meta.encode()))
            return records, work

        with self._lock:
            self._write(build)

    def set(self, *messages: Any) -> None:
        if not messages:
            msg = "set() needs the new messages: set(m1, m2), set([m1, m2]) or set([]) to empty it"
            raise ValueError(msg)
        items = _as_list(messages, "set")
        policy = self._policy
        counts = [policy.count(m) for m in items]
        token_window = isinstance(policy, TokenWindowPolicy)

        def build(current: Window, seq: int) -> tuple[list[NewRecord], Window]:
            work = current.copy()
            entries = [
                Entry(m, (seq + 1, i), t)
                for i, (m, t) in enumerate(zip(items, counts, strict=True))
            ]
            work.set(entries, policy.limit_for(self._id))
            meta = WindowMeta.of(
                work.entries,
                work.limit,
                [c or 0 for c in counts] if token_window else None,
                policy.identity if token_window else None,
            )
            return [set_record(items, meta.encode())], work

        with self._lock:
            self._write(build)

    def clear(self) -> None:
        def build(current: Window, seq: int) -> tuple[list[NewRecord], Window]:
            work = current.copy()
            work.clear()
            return [cleared_record(_CLEARED_META)], work

        with self._lock:
            self._write(build)

    def history(self, *, gt: int | None = None, lte: int | None = None) -> list[LoggedEvent]:
        return list(self.iter_history(gt=gt, lte=lte))

    def iter_history(
        self, *, gt: int | None = None, lte: int | None = None, page: int = _HISTORY_PAGE
    ) -> Iterator[LoggedEvent]:
        _check_page(page)
        # Paged and linked by records(): a million events cost one page of memory, and
        # each page is chained to the last record of the one before.
        for record in records(self._store, self._key, gt=gt or 0, lte=lte, page=page):
            yield logged_event(record)

    def as_of(self, *, seq: int | None = None, at: datetime | None = None) -> list[_ChatMessage]:
        target = resolve_seq(self._store, self._key, seq=seq, at=at)
        with self._lock:
            if target == self._seq:
                return [e.message for e in self._window.entries]
        return [e.message for e in view_at(self._store, self._key, target)]

    def what_if(
        self, policy: WindowPolicy, *, seq: int | None = None, at: datetime | None = None
    ) -> list[_ChatMessage]:
        return what_if(self._store, self._key, policy, seq=seq, at=at)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self._id!r}, store={type(self._store).__name__})"


class MessageWindowChatMemory(_WindowChatMemory):
    """LangChain4j's ``MessageWindowChatMemory``, with every change kept in the event log.

    Args:
        id: The memory id (str, int, UUID or a tuple of those). Default ``"default"``.
        max_messages: Window size, or a callable ``memory_id -> size`` consulted on every call.
        store: Where the log lives; default: a new :class:`InMemoryEventStore`.
        always_keep_system_message_first: Insert a replacement system message first.

    Raises:
        ValueError: ``max_messages`` is None or <= 0
            (``"max_messages must be greater than zero, but is: 0"``).
        TypeError: ``id`` has an unsupported type.
    """

    def __init__(
        self,
        id: MemoryId = "default",
        max_messages: Limit | None = None,
        store: EventStore | None = None,
        always_keep_system_message_first: bool = False,
    ) -> None:
        policy = MessageWindowPolicy(
            max_messages,
            always_keep_system_message_first=always_keep_system_message_first,
        )
        super().__init__(id, policy, store)

    @classmethod
    def with_max_messages(cls, max_messages: Limit) -> Self:
        """A memory with id ``"default"`` on its own in-memory store."""
        return cls(max_messages=max_messages)


class TokenWindowChatMemory(_WindowChatMemory):
    """LangChain4j's ``TokenWindowChatMemory``, with every change kept in the event log.

    Args:
        id: The memory id. Default ``"default"``.
        max_tokens: Token budget, or a callable ``memory_id -> budget``.
        token_count_estimator: E.g. ``OpenAiTokenCountEstimator("gpt-4o-mini")``.
        store: Where the log lives; default: a new :class:`InMemoryEventStore`.
        always_keep_system_message_first: Insert a replacement system message first.

    Raises:
        ValueError: ``max_tokens`` is None or <= 0, or the estimator is None.
    """

    def __init__(
        self,
        id: MemoryId = "default",
        max_tokens: Limit | None = None,
        token_count_estimator: TokenCountEstimator | None = None,
        store: EventStore | None = None,
        always_keep_system_message_first: bool = False,
    ) -> None:
        policy = TokenWindowPolicy(
            max_tokens,
            token_count_estimator,
            always_keep_system_message_first=always_keep_system_message_first,
        )
        super().__init__(id, policy, store)

    @property
    def token_count_estimator(self) -> TokenCountEstimator:
        """The estimator counting this window's tokens."""
        assert isinstance(self._policy, TokenWindowPolicy)  # noqa: S101 - set in __init__
        return self._policy.estimator

    @classmethod
    def with_max_tokens(cls, max_tokens: Limit, token_count_estimator: TokenCountEstimator) -> Self:
        """A memory with id ``"default"`` on its own in-memory store."""
        return cls(max_tokens=max_tokens, token_count_estimator=token_count_estimator)
