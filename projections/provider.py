"""ChatMemoryProvider: one live memory object per memory id, in an LRU cache with idle expiry.

LangChain4j's ``ChatMemoryProvider`` is a function ``memoryId -> ChatMemory`` that AI services
call on every request. This one builds each memory once with the factory you give it and keeps
it while it is in use. The cache only holds objects: every message is in the event store, so
dropping a memory (LRU, idle expiry, :meth:`ChatMemoryProvider.evict`, compaction) never loses
data, and the next :meth:`ChatMemoryProvider.get` simply opens it again from the store.

There is no "fast-forward on hit" step here: the memories already check the store's head on
every call and catch up by themselves, so a cached object is never stale, also when another
process writes the same id.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

from eventlog.ids import MemoryId, memory_key
from eventlog.validation import shown
from projections.base import ChatMemory, Clock

__all__ = ["ChatMemoryProvider", "ProviderStats"]

M = TypeVar("M", bound=ChatMemory)

DEFAULT_WAIT_TIMEOUT = 60.0
"""Seconds ``get`` waits for another thread's factory of the same id, by default."""


def _utc_now() -> datetime:
    # datetime.now (not time.monotonic): freezegun moves it, so TTL tests never sleep.
    return datetime.now(UTC)


def _check_wait_timeout(wait_timeout: object) -> float | None:
    """``wait_timeout`` as ``Future.result`` takes it: None for "no limit", also for a wait
    longer than a lock can (``threading.TIMEOUT_MAX``, e.g. ``inf``), which would otherwise
    raise OverflowError the first time two threads meet on one id."""
    if wait_timeout is None:
        return None
    if isinstance(wait_timeout, bool) or not isinstance(wait_timeout, int | float):
        msg = (
            "ChatMemoryProvider: wait_timeout must be seconds (an int or float) or None, not "
            f"{type(wait_timeout).__name__} {shown(wait_timeout)}; e.g. wait_timeout=60"
        )
        raise TypeError(msg)
    if not wait_timeout > 0:  # also NaN
        msg = (
            f"ChatMemoryProvider: wait_timeout must be positive seconds or None, but is "
            f"{shown(wait_timeout)}"
        )
        raise ValueError(msg)
    return None if wait_timeout >= threading.TIMEOUT_MAX else float(wait_timeout)


@dataclasses.dataclass(frozen=True, slots=True)
class ProviderStats:
    """A consistent snapshot of a provider's counters (all counted since it was built).

    Attributes:
        size: Memories cached now.
        hits: ``get`` calls answered from the cache.
        misses: ``get`` calls that found nothing cached (``hits + misses`` = all calls); a
            call that waited for another thread creating the same id is a miss too.
        evictions: Memories dropped because the cache was full (least recently used first).
        expirations: Memories dropped because they were idle longer than ``ttl``.
        creations: Memories the factory built successfully.
    """

    size: int
    hits: int
    misses: int
    evictions: int
    expirations: int
    creations: int


@dataclasses.dataclass(slots=True)
class _Cached(Generic[M]):
    memory_id: MemoryId
    memory: M
    used_at: datetime


@dataclasses.dataclass(slots=True)
class _Creation(Generic[M]):
    """An id whose memory one thread is building; the others wait on ``future``."""

    thread: int
    future: Future[M]


class ChatMemoryProvider(Generic[M]):
    """Exactly one memory object per memory id while it is cached; LRU plus idle expiry.

    Example::

        provider = ChatMemoryProvider(
            lambda memory_id: MessageWindowChatMemory(id=memory_id, max_messages=20, store=store),
            max_size=10_000,
            ttl=timedelta(minutes=30),
        )
        memory = provider.get("user-1")

    ``get`` is thread-safe. When many threads ask for an id that is not cached, the factory
    runs once, in the first thread, and the others wait for its result; creating different ids
    runs in parallel (no lock is held while a factory runs). A factory error reaches every
    thread that waited for that creation, and nothing is cached.

    Expiry is lazy: entries idle longer than ``ttl`` are dropped when the provider is next
    used (and by :meth:`expire`), so no thread runs in the background.

    A memory dropped from the cache keeps working for whoever still holds it (it reads and
    writes the store like any other object for that id); the provider just forgets it.

    Args:
        factory: ``memory_id -> memory``; must return a :class:`ChatMemory` whose ``id`` is the
            id it was given.
        max_size: How many memories to keep; the least recently used one goes first.
        ttl: Drop a memory not fetched for longer than this; None keeps it until evicted.
        clock: Source of aware datetimes for idle times; default ``datetime.now(UTC)``.
        wait_timeout: Seconds a ``get`` waits for another thread's factory creating the same
            id before it raises :class:`TimeoutError` (default 60; None, ``inf`` or more than
            ``threading.TIMEOUT_MAX`` wait as long as the factory runs). The creating thread
            itself is never interrupted.

    Raises:
        TypeError: ``factory`` or ``clock`` is not callable, ``max_size`` is not an int,
            ``ttl`` is not a timedelta or ``wait_timeout`` is not a number.
        ValueError: ``max_size`` < 1, ``ttl`` or ``wait_timeout`` is not positive.
    """

    def __init__(
        self,
        factory: Callable[[MemoryId], M],
        *,
        max_size: int = 10_000,
        ttl: timedelta | None = None,
        clock: Clock | None = None,
        wait_timeout: float | None = DEFAULT_WAIT_TIMEOUT,
    ) -> None:
        self._wait_timeout = _check_wait_timeout(wait_timeout)
        if not callable(factory):
            msg = (
                f"ChatMemoryProvider: factory must be a callable memory_id -> ChatMemory, not "
                f"{type(factory).__name__}; e.g. lambda memory_id: MessageWindowChatMemory("
                "id=memory_id, max_messages=20, store=store)"
            )
            raise TypeError(msg)
        if isinstance(max_size, bool) or not isinstance(max_size, int):
            msg = f"ChatMemoryProvider: max_size must be an int, not {type(max_size).__name__}"
            raise TypeError(msg)
        if max_size < 1:
            msg = f"ChatMemoryProvider: max_size must be at least 1, but is {shown(max_size)}"
            raise ValueError(msg)
        if ttl is not None:
            if not isinstance(ttl, timedelta):
                msg = (
                    f"ChatMemoryProvider: ttl must be a datetime.timedelta or None, not "
                    f"{type(ttl).__name__}"
                )
                raise TypeError(msg)
            if ttl <= timedelta(0):
                msg = (
                    f"ChatMemoryProvider: ttl must be positive, but is {ttl}; pass ttl=None to "
                    "keep memories until the cache is full"
                )
                raise ValueError(msg)
        if clock is not None and not callable(clock):
            msg = f"ChatMemoryProvider: clock must be callable, not {type(clock).__name__}"
            raise TypeError(msg)
        self._factory = factory
        self._max_size = max_size
        self._ttl = ttl
        self._clock: Callable[[], datetime] = clock if clock is not None else _utc_now
        # One lock for the dict and the counters; it is never held while a factory runs.
        self._lock = threading.Lock()
        # Keyed by the stored key, so ids that are equal as stored (e.g. a UUID and the same
        # UUID object) share an entry and ids that differ (1 and "1") never do.
        self._cache: OrderedDict[str, _Cached[M]] = OrderedDict()  # oldest use first
        self._creating: dict[str, _Creation[M]] = {}
        # Thread ident -> the key whose creation it waits for: the wait-for graph in which a
        # factory that asks (through other threads' factories) for its own id is a cycle.
        self._waiting: dict[int, str] = {}
        self._hits = self._misses = self._evictions = self._expirations = self._creations = 0

    @property
    def max_size(self) -> int:
        """How many memories the cache keeps."""
        return self._max_size

    @property
    def ttl(self) -> timedelta | None:
        """Idle time after which a memory is dropped (None: never)."""
        return self._ttl

    # ------------------------------------------------------------------ the cache

    def get(self, memory_id: MemoryId) -> M:
        """The memory for ``memory_id``: the cached object, or a new one from the factory.

        Marks the memory as just used (LRU order and idle time).

        Args:
            memory_id: A str, int, uuid.UUID or tuple of those.

        Returns:
            The same object for every call while it stays cached.

        Raises:
            TypeError: ``memory_id`` has an unsupported type, or the factory returned
                something that is not a ChatMemory.
            ValueError: The factory returned a memory with another id.
            RuntimeError: The factory asked this provider for the id it is creating.
            Exception: Whatever the factory raised.
        """
        key = memory_key(memory_id)  # TypeError for unsupported id types
        with self._lock:
            now = self._now()
            self._expire_idle(now)
            cached = self._cache.get(key)
            if cached is not None and self._is_idle(cached, now):
                del self._cache[key]
                self._expirations += 1
                cached = None
            if cached is not None:
                cached.used_at = now
                self._cache.move_to_end(key)
                self._hits += 1
                return cached.memory
            self._misses += 1
            creation = self._creating.get(key)
            if creation is None:
                creation = _Creation(threading.get_ident(), Future())
                self._creating[key] = creation
                creator = True
            else:
                self._wait_for(memory_id, key, creation.thread)
                creator = False
        if not creator:
            try:
                return creation.future.result(timeout=self._wait_timeout)
            except FutureTimeout:
                msg = (
                    f"ChatMemoryProvider.get({memory_id!r}) waited {self._wait_timeout} s for "
                    "another thread's factory creating that id, which is still running; find "
                    "what the factory waits for, or raise wait_timeout"
                )
                raise TimeoutError(msg) from None
            finally:
                with self._lock:
                    del self._waiting[threading.get_ident()]
        try:
            memory = self._create(memory_id, key)
        except BaseException as e:
            with self._lock:
                del self._creating[key]
            creation.future.set_exception(e)
            raise
        with self._lock:
            del self._creating[key]
            self._creations += 1
            self._cache[key] = _Cached(memory_id, memory, self._now())
            while len(self._cache) > self._max_size:
                self._cache.popitem(last=False)
                self._evictions += 1
        creation.future.set_result(memory)
        return memory

    def _wait_for(self, memory_id: MemoryId, key: str, owner: int) -> None:
        """Register this thread as waiting for ``owner``'s creation of ``key``, unless that
        wait could never end. Called under the lock.

        Raises:
            RuntimeError: The factory asked for the id it is creating, or factories on several
                threads wait for each other in a cycle.
        """
        me = threading.get_ident()
        if owner == me:
            msg = (
                f"ChatMemoryProvider.get({memory_id!r}) was called by the factory while "
                "it was creating that same id; a factory must build the memory itself"
            )
            raise RuntimeError(msg)
        cycle = self._cycle(me, owner)
        if cycle is not None:
            msg = (
                f"ChatMemoryProvider.get({memory_id!r}) would deadlock: factories wait for "
                f"each other in a cycle ({' -> '.join(map(repr, cycle))}); a factory must not "
                "get() ids whose factories get() it back"
            )
            raise RuntimeError(msg)
        self._waiting[me] = key

    def _cycle(self, me: int, owner: int) -> list[str] | None:
        """The keys on a wait-for path from ``owner`` back to thread ``me``, or None. Called
        under the lock, so the graph cannot change while it is walked."""
        path: list[str] = []
        while owner != me:
            waited = self._waiting.get(owner)
            creation = None if waited is None else self._creating.get(waited)
            if waited is None or creation is None or len(path) > len(self._waiting):
                return None
            path.append(waited)
            owner = creation.thread
        return path

    def evict(self, memory_id: MemoryId) -> bool:
        """Drop a memory from the cache (its history stays in the store).

        Not counted in :attr:`ProviderStats.evictions`, which counts LRU evictions only.

        Returns:
            True if it was cached.
        """
        key = memory_key(memory_id)
        with self._lock:
            return self._cache.pop(key, None) is not None

    def clear_cache(self) -> int:
        """Drop every cached memory (the store keeps all data).

        Returns:
            How many were dropped.
        """
        with self._lock:
            count = len(self._cache)
            self._cache.clear()
            return count

    def expire(self) -> int:
        """Drop every memory idle longer than ``ttl`` now, instead of waiting for the next use.

        Returns:
            How many were dropped (counted in :attr:`ProviderStats.expirations`).
        """
        with self._lock:
            if self._ttl is None:
                return 0
            now = self._now()
            # A full scan: with a clock that stepped back, use order and idle time can
            # disagree, and an explicit call should drop everything that is idle.
            idle = [key for key, cached in self._cache.items() if self._is_idle(cached, now)]
            for key in idle:
                del self._cache[key]
            self._expirations += len(idle)
            return len(idle)

    # ------------------------------------------------------------------ looking in

    def stats(self) -> ProviderStats:
        """The counters, read together under the cache's lock."""
        with self._lock:
            self._expire_idle(self._now())
            return ProviderStats(
                size=len(self._cache),
                hits=self._hits,
                misses=self._misses,
                evictions=self._evictions,
                expirations=self._expirations,
                creations=self._creations,
            )

    def ids(self) -> list[MemoryId]:
        """The cached memory ids, least recently used first (the order LRU evicts them)."""
        with self._lock:
            self._expire_idle(self._now())
            return [cached.memory_id for cached in self._cache.values()]

    def __len__(self) -> int:
        with self._lock:
            self._expire_idle(self._now())
            return len(self._cache)

    def __contains__(self, memory_id: object) -> bool:
        """Whether ``memory_id`` is cached (and not idle past ``ttl``); does not count as use."""
        key = memory_key(memory_id)
        with self._lock:
            now = self._now()
            self._expire_idle(now)
            cached = self._cache.get(key)
            return cached is not None and not self._is_idle(cached, now)

    def __repr__(self) -> str:
        return (
            f"ChatMemoryProvider(size={len(self._cache)}, max_size={self._max_size}, "
            f"ttl={self._ttl})"
        )

    # ------------------------------------------------------------------ internals

    def _now(self) -> datetime:
        now = self._clock()
        if not isinstance(now, datetime) or now.tzinfo is None:
            msg = (
                f"ChatMemoryProvider: the clock returned {now!r}; it must return an aware "
                "datetime, e.g. datetime.now(UTC)"
            )
            raise ValueError(msg)
        return now

    def _is_idle(self, cached: _Cached[M], now: datetime) -> bool:
        return self._ttl is not None and now - cached.used_at > self._ttl

    def _expire_idle(self, now: datetime) -> None:
        """Drop idle entries from the least recently used end: O(dropped) per call, which keeps
        ids that are never asked for again from staying in memory forever."""
        if self._ttl is None:
            return
        while self._cache:
            key, oldest = next(iter(self._cache.items()))
            if not self._is_idle(oldest, now):
                return
            del self._cache[key]
            self._expirations += 1

    def _create(self, memory_id: MemoryId, key: str) -> M:
        memory = self._factory(memory_id)
        if not isinstance(memory, ChatMemory):
            msg = (
                f"ChatMemoryProvider: the factory returned {type(memory).__name__} for memory "
                f"id {memory_id!r}; it must return a ChatMemory, e.g. "
                "MessageWindowChatMemory(id=memory_id, max_messages=20, store=store)"
            )
            raise TypeError(msg)
        try:
            built = memory_key(memory.id)
        except TypeError:
            built = None
        if built != key:
            # LangChain4j issue #3548: a provider that forgets to pass the id builds every
            # memory as "default", and all users silently share one conversation.
            msg = (
                f"ChatMemoryProvider: the factory was asked for memory id {memory_id!r} but "
                f"built a memory with id {memory.id!r}; pass the id it receives, e.g. "
                "MessageWindowChatMemory(id=memory_id, ...)"
            )
            raise ValueError(msg)
        return memory
