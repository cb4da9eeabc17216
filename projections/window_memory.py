"""The ChatMemory API shared by the window memories, over a :class:`LoggedWindow`.

:class:`_WindowChatMemory` owns what a caller sees of a window memory: ``messages`` (and the
provider-valid views), ``add``, ``set``, ``clear``, ``pop``, ``repair``, history, time travel,
``what_if`` and the async twins, plus the checks on their arguments. It is separate from
:mod:`projections.logged_window`, which keeps the cached window in step with the log, and from
:mod:`projections.memories`, which holds LangChain4j's two public memories built on it (and
:mod:`projections.summarizing`'s memory is another).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, Final

from eventlog.aio import off_loop
from eventlog.ids import MemoryId
from eventlog.messages import MESSAGE_TYPES, SystemMessage, ToolExecutionResultMessage
from eventlog.messages import ChatMessage as _ChatMessage
from eventlog.models import LoggedEvent, MessageRetracted, NewRecord
from eventlog.serialization import (
    added_record,
    cleared_record,
    encode_event,
    logged_event,
    set_record,
)
from eventlog.store import EventStore
from projections.base import ChatMemory
from projections.counterfactual import what_if
from projections.logged_window import LoggedWindow
from projections.meta import WindowMeta
from projections.replay import records, resolve_seq, view_at
from projections.validity import INTERRUPTED, unanswered_results, valid_view
from projections.window import Departure, Entry, TokenWindowPolicy, Window, WindowPolicy

__all__ = ["DEFAULT"]

_MESSAGE_TYPES = tuple(MESSAGE_TYPES.values())
_EXACT_TYPES = frozenset(_MESSAGE_TYPES)
_CLEARED_META = WindowMeta([]).encode()
_HISTORY_PAGE = 1_000  # events decoded per read while walking a history


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


class _WindowChatMemory(LoggedWindow, ChatMemory):
    """The ChatMemory methods of the window memories; :class:`LoggedWindow` keeps the window."""

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
                meta = self._meta(work, tokens, identity)
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
                work,
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
            return [encode_event(event, self._meta(work))], work

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
            # In step first: the cached window is the answer only while its event is still the
            # head as stored (not erased, restored or failed over since this object saw it).
            self._sync()
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
