"""MessageWindowChatMemory and TokenWindowChatMemory: LangChain4j's memories over the log."""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, Final, Self

from eventlog.aio import off_loop
from eventlog.errors import ChainIntegrityError, ConcurrencyError
from eventlog.hashing import GENESIS
from eventlog.ids import MemoryId
from eventlog.memory import InMemoryEventStore
from eventlog.messages import MESSAGE_TYPES, SystemMessage, ToolExecutionResultMessage
from eventlog.messages import ChatMessage as _ChatMessage
from eventlog.models import LoggedEvent, MessageRetracted, NewRecord, Record
from eventlog.serialization import (
    added_record,
    cleared_record,
    encode_event,
    logged_event,
    set_record,
)
from eventlog.store import EventStore
from eventlog.vouch import REMEDY
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
from projections.validity import INTERRUPTED, profile_of, unanswered_results, valid_view
from projections.window import (
    Departure,
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


class _Default(enum.Enum):
    """The type of :data:`DEFAULT` (an enum member, so type checkers can narrow it)."""

    DEFAULT = enum.auto()


DEFAULT: Final = _Default.DEFAULT
"""``messages(valid_for=DEFAULT)``: use the memory's own ``valid_for``."""


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
    def workers(self) -> object:
        return self._store

    async def amessages(self, *, valid_for: str | _Default | None = DEFAULT) -> list[_ChatMessage]:
        """:meth:`messages`, awaited without blocking the event loop."""
        return await off_loop(self._store, self.messages, valid_for=valid_for)

    async def aas_of(
        self,
        *,
        seq: int | None = None,
        at: datetime | None = None,
        valid_for: str | _Default | None = DEFAULT,
    ) -> list[_ChatMessage]:
        """:meth:`as_of`, awaited without blocking the event loop."""
        return await off_loop(self._store, self.as_of, seq=seq, at=at, valid_for=valid_for)

    async def apop(
        self, check: Callable[[_ChatMessage], object] | None = None
    ) -> _ChatMessage | None:
        """:meth:`pop`, awaited without blocking the event loop."""
        return await off_loop(self._store, self.pop, check)

    async def arepair(self, text: str = INTERRUPTED) -> list[ToolExecutionResultMessage]:
        """:meth:`repair`, awaited without blocking the event loop."""
        return await off_loop(self._store, self.repair, text)

    async def awhat_if(
        self,
        policy: WindowPolicy,
        *,
        seq: int | None = None,
        at: datetime | None = None,
        valid_for: str | None = None,
    ) -> list[_ChatMessage]:
        """:meth:`what_if`, awaited without blocking the event loop."""
        return await off_loop(
            self._store, self.what_if, policy, seq=seq, at=at, valid_for=valid_for
        )

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

    def _move_to(self, record: Record, entries: list[Entry]) -> None:
        self._settle(entries, record.seq, record.hash)
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
        self._move_to(record, self._recorded(record, {}))

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
        self._move_to(tail[-1], self._recorded(tail[-1], known))

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
                deadline = deadline or now + _RETRY_FOR
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
        entries: list[Entry],
        limit: int | None,
        tokens: int | list[int] | None = None,
        identity: str | None = None,
    ) -> str:
        """The window record text for an event this memory writes."""
        summary, through = self._summary_fields()
        return WindowMeta.of(
            entries,
            limit,
            tokens,
            identity,
            evict_permille=self._policy.evict_permille,
            summary=summary,
            through=through,
        ).encode()

    def _summary_fields(self) -> tuple[int | None, int | None]:
        """``(summary, through)`` of the window record (a summarizing memory's summary)."""
        return None, None

    # ------------------------------------------------------------------ ChatMemory

    def messages(self, *, valid_for: str | _Default | None = DEFAULT) -> list[_ChatMessage]:
        """The window as LangChain4j shows it, or a provider-valid view of it.

        Args:
            valid_for: ``"openai"``, ``"anthropic"`` or ``"gemini"``: a view that provider's
                chat API accepts (see :mod:`projections.validity`); None: LangChain4j's window
                exactly. Default: the memory's own ``valid_for``.

        Raises:
            ValueError: A dynamic limit returned a value <= 0, or an unknown profile.
        """
        with self._lock:
            limit = self._policy.limit_for(self._id)  # before touching the store, as LC4j
            self._sync()
            # A limit that shrank since the last write trims the view only; the log is written
            # at the next add/set, exactly like LangChain4j's store.
            view = self._view([e.message for e in self._window.view(limit)])
        return self._valid(view, valid_for)

    def _view(self, window: list[_ChatMessage]) -> list[_ChatMessage]:
        """What the memory shows for ``window`` (a summarizing memory adds its summary)."""
        return window

    def _valid(
        self, view: list[_ChatMessage], valid_for: str | _Default | None
    ) -> list[_ChatMessage]:
        profile = self._valid_for if isinstance(valid_for, _Default) else valid_for
        return view if profile is None else valid_view(view, profile)

    @property
    def valid_for(self) -> str | None:
        """The provider profile ``messages()`` applies by default (None: LangChain4j's view)."""
        return self._valid_for

    def add(self, *messages: Any) -> None:
        items = _as_list(messages, "add")
        if not items:
            return
        with self._lock:
            self._add(lambda _window: items)

    def _add(self, pick: Callable[[Window], list[_ChatMessage]]) -> list[Departure]:
        """Append one ``message_added`` event per message ``pick(window)`` returns for the
        window in hand (called again after a lost race), with LangChain4j's full ``add`` for
        each; returns what left the window, and why."""
        policy = self._policy
        identity = policy.identity if isinstance(policy, TokenWindowPolicy) else None
        counted: dict[int, int | None] = {}
        departed: list[Departure] = []

        def limit() -> int:
            return policy.limit_for(self._id)

        def build(current: Window, seq: int) -> tuple[list[NewRecord], Window]:
            items = pick(current)
            work = current.copy()
            records: list[NewRecord] = []
            departed.clear()
            for message in items:
                # Each message counted once, before writing (and not again on a retry).
                if id(message) not in counted:
                    counted[id(message)] = policy.count(message)
                tokens = counted[id(message)]
                entry = Entry(message, (seq + len(records) + 1, 0), tokens)
                left = work.add(entry, limit)
                if left is None:
                    continue  # the same system message again: LangChain4j writes nothing
                departed.extend(left)
                meta = self._meta(work.entries, work.limit, tokens, identity)
                records.append(added_record(message, meta))
            return records, work

        self._write(build)
        return departed

    def repair(self, text: str = INTERRUPTED) -> list[ToolExecutionResultMessage]:
        """Answer the tool calls left unanswered at the end of the window, by appending.

        A run that was interrupted (a crash between the call and its result, a cancelled
        request) leaves an AI message whose tool calls have no results; every provider
        rejects such a window once anything follows it. ``repair`` appends one tool result
        per unanswered call of the last AI message (only tool results may follow it), saying
        the call was interrupted: compensating events, in ``history()`` and ``diff`` like
        any other, never an edit of the log.

        Args:
            text: The result text the model will read.

        Returns:
            The results appended (empty when nothing was unanswered).
        """
        appended: list[ToolExecutionResultMessage] = []

        def pick(window: Window) -> list[_ChatMessage]:
            appended[:] = unanswered_results(
                [e.message for e in window.entries if not isinstance(e.message, SystemMessage)],
                text,
            )
            return list(appended)

        with self._lock:
            self._sync()
            self._add(pick)
        return appended

    def set(self, *messages: Any) -> None:
        if not messages:
            msg = "set() needs the new messages: set(m1, m2), set([m1, m2]) or set([]) to empty it"
            raise ValueError(msg)
        items = _as_list(messages, "set")
        policy = self._policy
        counts = [policy.count(m) for m in items]
        token_window = isinstance(policy, TokenWindowPolicy)
        departed: list[Departure] = []

        def build(current: Window, seq: int) -> tuple[list[NewRecord], Window]:
            work = current.copy()
            entries = [
                Entry(m, (seq + 1, i), t)
                for i, (m, t) in enumerate(zip(items, counts, strict=True))
            ]
            departed[:] = work.set(entries, policy.limit_for(self._id))
            meta = self._meta(
                work.entries,
                work.limit,
                [c or 0 for c in counts] if token_window else None,
                policy.identity if token_window else None,
            )
            return [set_record(items, meta)], work

        with self._lock:
            self._write(build)
            self._after_set(departed)

    def _after_set(self, departed: list[Departure]) -> None:
        """Subclass hook after a ``set`` landed (a summarizing memory folds what it evicted)."""

    def clear(self) -> None:
        def build(current: Window, seq: int) -> tuple[list[NewRecord], Window]:
            work = current.copy()
            work.clear()
            return [cleared_record(self._cleared_meta(seq + 1))], work

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

    def pop(self, check: Callable[[_ChatMessage], object] | None = None) -> _ChatMessage | None:
        """Take back the newest message of the window (an OpenAI Agents session's
        ``pop_item``): one ``message_retracted`` event; the history keeps the message.

        Args:
            check: Called with the message before anything is written; if it raises, nothing
                is written and the exception propagates (e.g. authenticate an encrypted item
                before removing it).

        Returns:
            The message taken back, or None when the window is empty (nothing written).
        """
        taken: list[_ChatMessage] = []

        def build(current: Window, seq: int) -> tuple[list[NewRecord], Window]:
            taken.clear()
            if not current.entries:
                return [], current
            work = current.copy()
            newest = max(work.entries, key=lambda e: e.ref)
            if check is not None:
                check(newest.message)
            work.retract(newest.ref)
            taken.append(newest.message)
            event = MessageRetracted(seq=newest.ref[0], index=newest.ref[1])
            return [encode_event(event, self._meta(work.entries, work.limit))], work

        with self._lock:
            self._write(build)
        return taken[0] if taken else None

    def _cleared_meta(self, seq: int) -> str:
        """The window record of a clear written at ``seq``."""
        return _CLEARED_META

    def as_of(
        self,
        *,
        seq: int | None = None,
        at: datetime | None = None,
        valid_for: str | _Default | None = DEFAULT,
    ) -> list[_ChatMessage]:
        target = resolve_seq(self._store, self._key, seq=seq, at=at)
        with self._lock:
            if target == self._seq:
                return self._valid(self._view([e.message for e in self._window.entries]), valid_for)
        view = [e.message for e in view_at(self._store, self._key, target)]
        return self._valid(self._view_at(target, view), valid_for)

    def _view_at(self, seq: int, window: list[_ChatMessage]) -> list[_ChatMessage]:
        """What the memory showed after event ``seq``, whose window was ``window``."""
        return window

    def what_if(
        self,
        policy: WindowPolicy,
        *,
        seq: int | None = None,
        at: datetime | None = None,
        valid_for: str | None = None,
    ) -> list[_ChatMessage]:
        return what_if(self._store, self._key, policy, seq=seq, at=at, valid_for=valid_for)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self._id!r}, store={type(self._store).__name__})"


class MessageWindowChatMemory(_WindowChatMemory):
    """LangChain4j's ``MessageWindowChatMemory``, with every change kept in the event log.

    Args:
        id: The memory id (str, int, UUID or a tuple of those). Default ``"default"``.
        max_messages: Window size, or a callable ``memory_id -> size`` consulted on every call.
        store: Where the log lives; default: a new :class:`InMemoryEventStore`.
        always_keep_system_message_first: Insert a replacement system message first.
        evict_to: Opt-in chunked eviction: when over the limit, evict down to this fraction
            of it (e.g. 0.7), so the sent prefix stays stable for many turns.
        valid_for: ``"openai"``, ``"anthropic"`` or ``"gemini"``: ``messages()`` returns a
            view that provider accepts (see :mod:`projections.validity`).

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
        *,
        evict_to: float | None = None,
        valid_for: str | None = None,
    ) -> None:
        policy = MessageWindowPolicy(
            max_messages,
            always_keep_system_message_first=always_keep_system_message_first,
            evict_to=evict_to,
        )
        super().__init__(id, policy, store, valid_for)

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
        evict_to: Opt-in chunked eviction (see :class:`MessageWindowChatMemory`).
        valid_for: A provider profile for ``messages()`` (see :class:`MessageWindowChatMemory`).

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
        *,
        evict_to: float | None = None,
        valid_for: str | None = None,
    ) -> None:
        policy = TokenWindowPolicy(
            max_tokens,
            token_count_estimator,
            always_keep_system_message_first=always_keep_system_message_first,
            evict_to=evict_to,
        )
        super().__init__(id, policy, store, valid_for)

    @property
    def token_count_estimator(self) -> TokenCountEstimator:
        """The estimator counting this window's tokens."""
        assert isinstance(self._policy, TokenWindowPolicy)  # noqa: S101 - set in __init__
        return self._policy.estimator

    @classmethod
    def with_max_tokens(cls, max_tokens: Limit, token_count_estimator: TokenCountEstimator) -> Self:
        """A memory with id ``"default"`` on its own in-memory store."""
        return cls(max_tokens=max_tokens, token_count_estimator=token_count_estimator)
