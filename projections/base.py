"""The ChatMemory interface and the Clock protocol users can plug in."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from eventlog.aio import off_loop
from eventlog.ids import MemoryId
from eventlog.messages import ChatMessage
from eventlog.models import LoggedEvent

__all__ = ["ChatMemory", "Clock"]


@runtime_checkable
class Clock(Protocol):
    """A source of aware UTC datetimes (the provider's TTL and compaction use one)."""

    def __call__(self) -> datetime:
        """The current time."""
        ...


class ChatMemory(ABC):
    """LangChain4j's ``ChatMemory``, plus what an event log makes possible (history, time travel).

    Every change goes to the memory's event stream first; the window is a projection of it.
    """

    @property
    @abstractmethod
    def id(self) -> MemoryId:
        """The memory id."""

    @abstractmethod
    def add(self, *messages: Any) -> None:
        """Add one message, several (``add(m1, m2)``), or an iterable of them, atomically.

        Each message goes through LangChain4j's full ``add`` (system-message rules, eviction)
        and is appended as one ``message_added`` event; a batch is all or nothing.

        Raises:
            TypeError: An element is not a chat message (nothing is written).
            ValueError: A dynamic limit returned a value <= 0 (nothing is written).
        """

    @abstractmethod
    def messages(self) -> list[ChatMessage]:
        """The window as LangChain4j shows it: a new list on every call; never writes.

        Raises:
            ValueError: A dynamic limit returned a value <= 0.
        """

    @abstractmethod
    def set(self, *messages: Any) -> None:
        """Replace the content (``set(m1, m2)``, ``set([m1, m2])``, ``set([])`` empties it).

        One ``messages_set`` event keeps the full list; the window trims it without system rules.

        Raises:
            ValueError: Called with no arguments, or a dynamic limit returned a value <= 0.
            TypeError: An element is not a chat message (nothing is written).
        """

    @abstractmethod
    def clear(self) -> None:
        """Empty the window; one ``memory_cleared`` event records it (history keeps all)."""

    @abstractmethod
    def history(self, *, gt: int | None = None, lte: int | None = None) -> list[LoggedEvent]:
        """Every event of this memory in order (optionally seqs in ``(gt, lte]``), as a list.

        It holds the whole range at once: for a long history pass bounds, or walk it with
        :meth:`iter_history`.

        Raises:
            ChainIntegrityError: A record does not verify or does not chain to the one before.
        """

    @abstractmethod
    def iter_history(
        self, *, gt: int | None = None, lte: int | None = None, page: int = 1_000
    ) -> Iterator[LoggedEvent]:
        """The events of :meth:`history`, read ``page`` at a time: memory use stays at one
        page whatever the history's length, and the first events arrive after one read.

        Every record is checked as :meth:`history` checks it, and each page's first record
        must chain to the previous page's last.

        Raises:
            ValueError: ``page`` is not an int >= 1 (raised at the first ``next()``).
            ChainIntegrityError: A record does not verify or does not chain to the one before.
        """

    @abstractmethod
    def as_of(self, *, seq: int | None = None, at: datetime | None = None) -> list[ChatMessage]:
        """What ``messages()`` returned right after event ``seq``, or after the last event
        recorded at or before ``at``. O(window): reads that event and those it refers to.

        Raises:
            ValueError: Neither or both given, or ``seq`` beyond the history.
        """

    # ------------------------------------------------------------------ async

    @property
    def workers(self) -> object:
        """Whose worker threads run the async methods: the memory's store (see
        :mod:`eventlog.aio`), so one SQLite file's calls run on one thread, in order."""
        return self

    async def aadd(self, *messages: Any) -> None:
        """:meth:`add`, awaited without blocking the event loop."""
        await off_loop(self.workers, self.add, *messages)

    async def amessages(self) -> list[ChatMessage]:
        """:meth:`messages`, awaited without blocking the event loop."""
        return await off_loop(self.workers, self.messages)

    async def aset(self, *messages: Any) -> None:
        """:meth:`set`, awaited without blocking the event loop."""
        await off_loop(self.workers, self.set, *messages)

    async def aclear(self) -> None:
        """:meth:`clear`, awaited without blocking the event loop."""
        await off_loop(self.workers, self.clear)

    async def ahistory(self, *, gt: int | None = None, lte: int | None = None) -> list[LoggedEvent]:
        """:meth:`history`, awaited without blocking the event loop."""
        return await off_loop(self.workers, self.history, gt=gt, lte=lte)

    async def aiter_history(
        self, *, gt: int | None = None, lte: int | None = None, page: int = 1_000
    ) -> AsyncIterator[LoggedEvent]:
        """:meth:`iter_history` as an async iterator: each page is read (and checked) on a
        worker, ``page`` events at a time."""
        events = self.iter_history(gt=gt, lte=lte, page=page)
        done = object()
        while True:
            batch = await off_loop(self.workers, _take, events, page, done)
            for event in batch:
                if event is done:
                    return
                yield event

    async def aas_of(
        self, *, seq: int | None = None, at: datetime | None = None
    ) -> list[ChatMessage]:
        """:meth:`as_of`, awaited without blocking the event loop."""
        return await off_loop(self.workers, self.as_of, seq=seq, at=at)


def _take(events: Iterator[Any], count: int, done: object) -> list[Any]:
    """Up to ``count`` items of ``events``, ``done`` appended when it ran out."""
    batch: list[Any] = []
    for event in events:
        batch.append(event)
        if len(batch) == count:
            return batch
    batch.append(done)
    return batch
