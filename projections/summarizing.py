"""SummarizingChatMemory: what leaves the window is folded into a running summary, kept in the log.

The window is LangChain4j's, exactly (message or token window, its eviction rules, optional
chunked eviction). What the rules evict is handed to ``summarizer(evicted, previous_summary)``
- in real use an LLM call - and the text it returns is appended as a ``summary_recorded``
event naming the messages it covers. Every later event records which summary is in force
(``"sum"`` in its window record), so ``as_of``, replay and what-if read summaries from the log
and never call the summarizer again.

Failure is cheap by design: the message is written before the summarizer runs, so a summarizer
that raises, a summary the store cannot take (a lock held too long, a closed store), or a
process that dies meanwhile leaves the window LangChain4j-exact and the
evicted messages pending; every event records how far the summary reaches (``"sth"``), and the
next eviction folds everything evicted since, in one call. A tool call and its results are
never split: a call whose results have not left the window yet waits (``deferred``) for them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeAlias

from eventlog.aio import caller_loop
from eventlog.errors import ConcurrencyError, EventLogError
from eventlog.hashing import GENESIS
from eventlog.ids import MemoryId
from eventlog.messages import AiMessage, ChatMessage, SystemMessage
from eventlog.models import Record, SummaryRecorded
from eventlog.serialization import decode_event, encode_event
from eventlog.store import EventStore
from eventlog.validation import shown, text_problem
from projections.audit import walk
from projections.meta import EMPTYING_KINDS, WindowMeta
from projections.replay import erased_error, materialize, read_checked, window_meta
from projections.tokens import TokenCountEstimator
from projections.validity import answers
from projections.window import (
    Departure,
    Entry,
    Limit,
    MessageWindowPolicy,
    TokenWindowPolicy,
    Window,
    WindowPolicy,
)
from projections.window_memory import _WindowChatMemory

__all__ = ["Summarizer", "SummarizingChatMemory"]

Summarizer: TypeAlias = Callable[[list[ChatMessage], "str | None"], "str | Awaitable[str]"]
"""``summarizer(evicted_messages, previous_summary) -> new summary`` (sync or async)."""

_FOLDED = ("evicted", "orphan")  # what the rules evicted; set and clear are the app's choice
_ATTEMPTS = 3  # lost races before the summary waits for the next eviction
_LOOK_BACK = 256  # events read per page looking back for the summary in force
_LOOP_CHECK = 0.25  # seconds between checks that the loop running an async summarizer runs
_log = logging.getLogger("chatledger.summarizing")


def default_summary_message(summary: str) -> ChatMessage:
    """The summary as the model sees it: a system message."""
    return SystemMessage(f"Summary of the earlier conversation:\n{summary}")


def _run(awaitable: Awaitable[str]) -> str:
    """The result of an async summarizer, from sync code, even inside a running event loop
    (then on a thread of its own: the caller's loop is not ours to block on).

    Reached from an ``aadd`` (a worker runs the add), it runs on the loop that awaited it:
    the app's async clients (an AsyncOpenAI, an httpx pool) keep connections bound to that
    loop, and a private loop per call, closed after it, failed every call that reused one.
    """

    async def wait() -> str:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        # No loop on this thread: a worker running an aadd, or plain sync code.
        loop = caller_loop()
        if loop is not None and loop.is_running():
            return _on_loop(wait(), loop)
        return asyncio.run(wait())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, wait()).result()


def _on_loop(coroutine: Coroutine[Any, Any, str], loop: asyncio.AbstractEventLoop) -> str:
    """``coroutine`` run on ``loop`` (another thread's), waited for from this worker."""
    future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    while True:
        try:
            return future.result(timeout=_LOOP_CHECK)
        except concurrent.futures.TimeoutError:
            if loop.is_running():
                continue
            # The app's loop stopped (asyncio.run returned) while the add was not awaited
            # to its end: nothing will run the summarizer; fail it like any summarizer error.
            if not loop.is_closed():
                future.cancel()
            msg = (
                "the event loop that awaited this add stopped before the async summarizer "
                "finished; the evicted messages are folded at the next eviction"
            )
            raise RuntimeError(msg) from None


def _split(batch: list[Entry]) -> tuple[list[Entry], list[Entry]]:
    """``(fold now, defer)``: a tool call whose results are not all in ``batch`` waits, with
    the results that are, so a call and its results are always summarized together."""
    waiting: set[tuple[int, int]] = set()
    for i, entry in enumerate(batch):
        message = entry.message
        if not isinstance(message, AiMessage) or not message.tool_execution_requests:
            continue
        partners, unanswered = answers(message, [(e.ref, e.message) for e in batch[i + 1 :]])
        if unanswered:
            waiting.add(entry.ref)
            waiting.update(ref for ref, _ in partners)
    fold = [e for e in batch if e.ref not in waiting]
    defer = [e for e in batch if e.ref in waiting]
    return fold, defer


class SummarizingChatMemory(_WindowChatMemory):
    """A LangChain4j window plus a running summary of everything that left it.

    ``messages()`` is the summary (by default a system message placed after the app's own
    system message, or first) followed by the window.

    Args:
        id: The memory id. Default ``"default"``.
        max_messages: A message window of this size (or a callable ``memory_id -> size``).
        max_tokens: Or a token window of this budget (with ``token_count_estimator``).
        token_count_estimator: Counts tokens for ``max_tokens``.
        summarizer: ``summarizer(evicted_messages, previous_summary) -> str``, sync or async.
        store: Where the log lives; default: a new in-memory store.
        always_keep_system_message_first: Insert a replacement system message first.
        evict_to: Opt-in chunked eviction (fewer, larger summaries; a stable prefix).
        valid_for: A provider profile for ``messages()`` (see :mod:`projections.validity`).
        summary_message: Turns the summary text into the message the model sees.

    Raises:
        ValueError: Not exactly one of ``max_messages`` and ``max_tokens``, a limit <= 0, or
            no summarizer.
    """

    def __init__(
        self,
        id: MemoryId = "default",
        *,
        max_messages: Limit | None = None,
        max_tokens: Limit | None = None,
        token_count_estimator: TokenCountEstimator | None = None,
        summarizer: Summarizer | None = None,
        store: EventStore | None = None,
        always_keep_system_message_first: bool = False,
        evict_to: float | None = None,
        valid_for: str | None = None,
        summary_message: Callable[[str], ChatMessage] = default_summary_message,
    ) -> None:
        if (max_messages is None) == (max_tokens is None):
            msg = (
                "SummarizingChatMemory needs exactly one of max_messages= and max_tokens= "
                f"(got max_messages={max_messages!r}, max_tokens={max_tokens!r})"
            )
            raise ValueError(msg)
        if not callable(summarizer):
            msg = (
                f"summarizer must be a callable (evicted_messages, previous_summary) -> str, "
                f"but is: {summarizer!r}"
            )
            raise ValueError(msg)
        policy: WindowPolicy
        if max_messages is not None:
            policy = MessageWindowPolicy(
                max_messages,
                always_keep_system_message_first=always_keep_system_message_first,
                evict_to=evict_to,
            )
        else:
            policy = TokenWindowPolicy(
                max_tokens,
                token_count_estimator,
                always_keep_system_message_first=always_keep_system_message_first,
                evict_to=evict_to,
            )
        self._summarizer = summarizer
        self._summary_message = summary_message
        self._summary_seq: int | None = None  # the summary event in force
        self._summary: SummaryRecorded | None = None
        self._through = 0  # evictions up to this seq are summarized (or deferred)
        self._followed = False  # whether _through and the summary were read from a head
        self.last_error: BaseException | None = None
        """The exception of the last summarizer call that failed (None after a success)."""
        super().__init__(id, policy, store, valid_for)

    # ------------------------------------------------------------------ the summary

    @property
    def summary(self) -> str | None:
        """The running summary in force (None: nothing summarized since the last clear)."""
        with self._lock:
            self._sync()
            return None if self._summary is None else self._summary.summary

    def _observe(self, head: Record | None) -> None:
        if head is None:
            self._summary_seq, self._summary, self._through = None, None, 0
            self._followed = False
            return
        meta = window_meta(head)
        if meta.through is not None:
            through, summary = meta.through, meta.summary
        elif head.kind in EMPTYING_KINDS:
            # A clear: start afresh. (Another history under us was forgotten before this
            # call, see _changed_under_us: nothing kept from it names its events.)
            through, summary = head.seq, None
        elif self._followed:
            # Written by a memory that does not summarize (another process on the same id):
            # what it evicted is folded at our next eviction, the summary stays in force.
            through, summary = self._through, self._summary_seq
        else:
            # The same, seen by an object just opened (or reloaded): the summary in force is
            # the one the newest summarizing event before it names, not none.
            through, summary = self._in_force(head)
        if summary != self._summary_seq:
            # Read before anything is set: a failed read leaves the old state whole.
            text = None if summary is None else self._read_summary(summary)
            self._summary_seq, self._summary = summary, text
        self._through = through
        self._followed = True

    def _read_summary(self, seq: int) -> SummaryRecorded:
        (record,) = read_checked(self._store, self._key, gt=seq - 1, lte=seq)
        event = decode_event(record)
        if record.erased:
            raise erased_error(self._store, record)
        if not isinstance(event, SummaryRecorded):
            msg = (
                f"the window record of {self._key!r} names event {seq} as its summary, but it "
                f"is a {record.kind}; it was not written by a chatledger memory - run verify()"
            )
            raise ValueError(msg)
        return event

    def _summary_fields(self) -> tuple[int | None, int | None]:
        return self._summary_seq, self._through

    def _cleared_meta(self, seq: int) -> str:
        return WindowMeta([], through=seq).encode()  # a clear ends the summary too

    def _with_summary(self, window: list[ChatMessage], summary: str | None) -> list[ChatMessage]:
        if summary is None:
            return window
        at = 1 if window and isinstance(window[0], SystemMessage) else 0
        message = self._summary_message(summary)
        if not isinstance(message, ChatMessage):
            msg = (
                f"summary_message returned {type(message).__name__} {shown(message)}, not a "
                "ChatMessage; return e.g. SystemMessage(text) from it"
            )
            raise TypeError(msg)
        return [*window[:at], message, *window[at:]]

    def _view(self, window: list[ChatMessage]) -> list[ChatMessage]:
        return self._with_summary(window, None if self._summary is None else self._summary.summary)

    def _view_at(self, seq: int, window: list[ChatMessage]) -> list[ChatMessage]:
        if seq == 0:
            return window  # before the first event: no record, no summary
        (record,) = read_checked(self._store, self._key, gt=seq - 1, lte=seq)
        _, at = self._in_force(record)
        return self._with_summary(window, None if at is None else self._read_summary(at).summary)

    def _in_force(self, record: Record) -> tuple[int, int | None]:
        """``(through, summary)`` in force after ``record``: its own window record's, or, for
        an event written by a memory that does not summarize, those of the newest event
        before it that records them (read back a page at a time; a clear starts afresh)."""
        batch = [record]
        while True:
            for event in batch:  # newest first
                meta = window_meta(event)
                if meta.through is not None:
                    return meta.through, meta.summary
                if event.kind in EMPTYING_KINDS:
                    return event.seq, None
            oldest = batch[-1].seq
            if oldest <= 1:
                return 0, None
            batch = read_checked(
                self._store, self._key, lte=oldest - 1, desc=True, limit=_LOOK_BACK
            )
            if not batch:
                return 0, None

    # ------------------------------------------------------------------ writing

    def _add(self, pick: Callable[[Window], list[ChatMessage]]) -> list[Departure]:
        departed = super()._add(pick)
        if any(d.reason in _FOLDED for d in departed):
            self._summarize()
        return departed

    def _after_set(self, departed: list[Departure]) -> None:
        if any(d.reason in _FOLDED for d in departed):
            self._summarize()

    def _pending(self) -> tuple[list[Entry], list[Entry]]:
        """``(fold now, defer)``: what left the window by eviction since the summary's reach,
        plus what the summary deferred."""
        batch: list[Entry] = []
        if self._summary is not None and self._summary.deferred:
            batch += materialize(self._store, self._key, list(self._summary.deferred))
        if self._through < self._seq:
            for step in walk(self._store, self._key, after=self._through, upto=self._seq):
                batch += [d.entry for d in step.departures if d.reason in _FOLDED]
        return _split(batch)

    def _summarize(self) -> None:
        """Fold what is pending into the summary and append it; a failure is logged and
        left for the next eviction."""
        for _ in range(_ATTEMPTS):
            try:
                fold, defer = self._pending()
            except (EventLogError, ValueError) as e:
                # The add itself landed; what it evicted stays pending (its coverage mark did
                # not move) and is folded once the log reads again.
                self.last_error = e
                _log.warning(
                    "memory %r: could not read what left the window (%s: %s); summarizing at "
                    "the next eviction",
                    self._key,
                    type(e).__name__,
                    e,
                )
                return
            if not fold:
                return
            previous = None if self._summary is None else self._summary.summary
            seen = (self._seq, self._hash)
            try:
                text = self._unlocked(self._call, [e.message for e in fold], previous)
            except Exception as e:
                self.last_error = e
                _log.warning(
                    "memory %r: summarizer failed (%s: %s); the window is unchanged and the "
                    "%d evicted messages are folded at the next eviction",
                    self._key,
                    type(e).__name__,
                    e,
                    len(fold),
                )
                return
            self.last_error = None
            if (self._seq, self._hash) != seen:
                continue  # this object moved on meanwhile: fold again from where it is now
            try:
                if self._append_summary(text, fold, defer, previous_seq=self._summary_seq):
                    return
            except (EventLogError, ValueError) as e:
                # The add itself landed: raising would have the caller retry, and duplicate,
                # a message already in the log. The summary stays pending (its coverage mark
                # did not move), as when the summarizer fails.
                self.last_error = e
                _log.warning(
                    "memory %r: could not append the summary (%s: %s); the message was added "
                    "and the %d evicted messages are folded at the next eviction",
                    self._key,
                    type(e).__name__,
                    e,
                    len(fold),
                )
                return
        _log.warning(
            "memory %r: summary lost %d races; left for the next eviction", self._key, _ATTEMPTS
        )

    def _unlocked(self, fn: Callable[[list[ChatMessage], str | None], str], *args: Any) -> str:
        """``fn(*args)`` without holding this object's lock: a summarizer is an LLM call of
        seconds, and other calls on the memory (a plain ``messages()`` on the event loop an
        async summarizer needs) must not wait for it. The add that wrote the eviction has
        landed, so the object is consistent meanwhile; what moves it is checked after."""
        self._lock.release()
        try:
            return fn(*args)
        finally:
            self._lock.acquire()

    def _call(self, messages: list[ChatMessage], previous: str | None) -> str:
        result: Any = self._summarizer(messages, previous)
        if inspect.isawaitable(result):
            result = _run(result)
        if not isinstance(result, str):
            msg = f"summarizer returned {type(result).__name__} {shown(result)}, not a str"
            raise TypeError(msg)
        problem = text_problem(result)
        if problem is not None:  # the log would refuse it, after the add landed
            msg = f"summarizer returned text that {problem}"
            raise ValueError(msg)
        return result

    def _append_summary(
        self, text: str, fold: Sequence[Entry], defer: Sequence[Entry], *, previous_seq: int | None
    ) -> bool:
        """Append the summary event on top of the head it was computed for; False when
        another writer got there first (the caller folds again from the new head)."""
        head = self._seq
        event = SummaryRecorded(
            summary=text,
            covers=tuple(e.ref for e in fold),
            deferred=tuple(e.ref for e in defer),
            previous=previous_seq,
        )
        meta = WindowMeta.of(
            self._window.entries,
            self._window.limit,
            evict_permille=self._policy.evict_permille,
            summary=head + 1,
            through=head,
            system=self._window.system_refs(),
        )
        record = encode_event(event, meta.encode())
        try:
            stored = self._store.append(
                self._key, [record], expected_seq=head, expected_hash=self._hash or GENESIS
            )
        except ConcurrencyError:
            self._catch_up()
            return False
        self._seq, self._hash = stored[-1].seq, stored[-1].hash
        self._summary_seq, self._summary, self._through = head + 1, event, head
        return True
