"""ChatMemoryProvider: one object per id (also under a thundering herd), LRU, idle expiry, and
eviction that never loses data. Tests that touch data run on every backend via `reopen`."""

from __future__ import annotations

import gc
import itertools
import threading
import time
import uuid
import weakref
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from freezegun import freeze_time

from eventlog import InMemoryEventStore
from eventlog.formats.lc4j_json import message_to_json
from eventlog.store import EventStore
from projections import MessageWindowChatMemory
from projections.provider import ChatMemoryProvider, ProviderStats
from tests.factories import a_conversation, a_message

_WAIT = 10.0  # seconds: generous bound for thread hand-offs; never reached when the code works


class FakeClock:
    """An injected clock: tests move time by hand and never sleep."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)


def _window_provider(
    store: EventStore, **kwargs: Any
) -> ChatMemoryProvider[MessageWindowChatMemory]:
    return ChatMemoryProvider(
        lambda memory_id: MessageWindowChatMemory(id=memory_id, max_messages=20, store=store),
        **kwargs,
    )


def _as_json(memory: MessageWindowChatMemory) -> list[str]:
    return [message_to_json(m) for m in memory.messages()]


def _texts(memory: MessageWindowChatMemory) -> list[str]:
    return [getattr(m, "text", None) or "" for m in memory.messages()]


# ------------------------------------------------------------------ one object per id


def test_get_returns_the_same_object_while_cached(store):
    provider = _window_provider(store)
    memory = provider.get("user-1")
    # Check the example: the same object on every call, built once.
    assert provider.get("user-1") is memory
    assert memory.id == "user-1"
    assert memory.store is store
    assert provider.stats() == ProviderStats(
        size=1, hits=1, misses=1, evictions=0, expirations=0, creations=1
    )


def test_many_threads_asking_for_a_new_id_run_the_factory_once():
    store = InMemoryEventStore()
    calls = []
    threads_n = 32
    barrier = threading.Barrier(threads_n)

    def slow_factory(memory_id):
        calls.append(memory_id)
        time.sleep(0.05)  # wide window for the other threads to arrive mid-creation
        return MessageWindowChatMemory(id=memory_id, max_messages=5, store=store)

    provider = ChatMemoryProvider(slow_factory)
    results = [None] * threads_n

    def worker(i):
        barrier.wait(timeout=_WAIT)
        results[i] = provider.get("herd")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=_WAIT)
    # Check the factory ran exactly once and every thread got that one object.
    assert calls == ["herd"]
    assert all(r is results[0] for r in results)
    stats = provider.stats()
    assert stats.creations == 1
    assert stats.hits + stats.misses == threads_n
    assert stats.misses >= 2  # at least one thread waited for the creation in progress


def test_creating_one_id_does_not_block_another():
    store = InMemoryEventStore()
    slow_started, release = threading.Event(), threading.Event()

    def factory(memory_id):
        if memory_id == "slow":
            slow_started.set()
            assert release.wait(_WAIT)
        return MessageWindowChatMemory(id=memory_id, max_messages=5, store=store)

    provider = ChatMemoryProvider(factory)
    got: dict[str, MessageWindowChatMemory] = {}
    slow = threading.Thread(target=lambda: got.setdefault("slow", provider.get("slow")))
    slow.start()
    try:
        assert slow_started.wait(_WAIT)
        # Check another id is created and served while "slow" is still being built.
        fast = provider.get("fast")
        assert fast.id == "fast"
        assert "slow" not in got
        assert provider.ids() == ["fast"]
    finally:
        release.set()
        slow.join(_WAIT)
    assert got["slow"] is provider.get("slow")


def test_waiting_for_another_threads_factory_is_bounded_and_names_the_id():
    store = InMemoryEventStore()
    started, release = threading.Event(), threading.Event()

    def factory(memory_id):
        started.set()
        assert release.wait(_WAIT)  # a factory stuck on something (a network call)
        return MessageWindowChatMemory(id=memory_id, max_messages=5, store=store)

    provider = ChatMemoryProvider(factory, wait_timeout=0.2)
    got: list[MessageWindowChatMemory] = []
    creator = threading.Thread(target=lambda: got.append(provider.get("stuck")))
    creator.start()
    try:
        assert started.wait(_WAIT)
        # Check a second get gives up after wait_timeout with an error naming the id and why.
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match=r"get\('stuck'\) waited 0.2 s .*still running"):
            provider.get("stuck")
        assert 0.15 < time.monotonic() - t0 < _WAIT
    finally:
        release.set()
        creator.join(_WAIT)
    # Check the creator was not interrupted: its memory is the cached one, and a later get waits
    # for nothing.
    assert got and provider.get("stuck") is got[0]


@pytest.mark.parametrize("forever", [float("inf"), 1e12])
def test_a_wait_timeout_beyond_what_a_lock_can_wait_means_no_limit(forever):
    # threading's waits end at threading.TIMEOUT_MAX (about 292 years): an operator writing
    # "inf" (or a huge number) means "no limit", and the waiting get() used to raise
    # OverflowError ("timestamp out of range") the first time two threads met on one id.
    store = InMemoryEventStore()
    started, release = threading.Event(), threading.Event()

    def factory(memory_id):
        started.set()
        assert release.wait(_WAIT)
        return MessageWindowChatMemory(id=memory_id, max_messages=5, store=store)

    provider = ChatMemoryProvider(factory, wait_timeout=forever)
    got: list[MessageWindowChatMemory] = []
    creator = threading.Thread(target=lambda: got.append(provider.get("slow")))
    creator.start()
    waited: list[object] = []

    def wait() -> None:
        try:
            waited.append(provider.get("slow"))
        except BaseException as e:
            waited.append(e)

    waiter = threading.Thread(target=wait)
    try:
        assert started.wait(_WAIT)
        waiter.start()
        deadline = time.monotonic() + _WAIT
        while provider.stats().misses < 2 and time.monotonic() < deadline:
            time.sleep(0.001)  # the waiter is now blocked on the creator's factory
        time.sleep(0.05)
    finally:
        release.set()
        creator.join(_WAIT)
        waiter.join(_WAIT)
    # Check the waiter got the creator's memory, not an OverflowError.
    assert got and waited == [got[0]]


def test_a_factory_error_reaches_every_waiter_and_nothing_is_cached():
    store = InMemoryEventStore()
    entered, release = threading.Event(), threading.Event()
    attempts = itertools.count(1)

    def flaky(memory_id):
        if next(attempts) == 1:
            entered.set()
            assert release.wait(_WAIT)
            raise ConnectionError("database is down")
        return MessageWindowChatMemory(id=memory_id, max_messages=5, store=store)

    provider = ChatMemoryProvider(flaky)
    errors = []

    def worker():
        try:
            provider.get("x")
        except ConnectionError as e:
            errors.append(e)

    first = threading.Thread(target=worker)
    first.start()
    assert entered.wait(_WAIT)
    waiters = [threading.Thread(target=worker) for _ in range(4)]
    for t in waiters:
        t.start()
    # Let the waiters reach the creation in progress before it fails.
    deadline = time.monotonic() + _WAIT
    while provider.stats().misses < 5 and time.monotonic() < deadline:
        time.sleep(0.001)
    release.set()
    for t in [first, *waiters]:
        t.join(_WAIT)
    # Check the creator's error reached all five callers, and no memory was cached.
    assert len(errors) == 5
    assert "x" not in provider
    assert provider.stats().creations == 0
    # Check the next call tries again (the failure was not cached either).
    assert provider.get("x").id == "x"
    assert provider.stats().creations == 1


def test_a_factory_asking_for_its_own_id_fails_instead_of_deadlocking():
    store = InMemoryEventStore()
    provider: ChatMemoryProvider[MessageWindowChatMemory]

    def factory(memory_id):
        provider.get(memory_id)
        return MessageWindowChatMemory(id=memory_id, max_messages=5, store=store)

    provider = ChatMemoryProvider(factory)
    with pytest.raises(RuntimeError, match=r"'loop'.*creating that same id"):
        provider.get("loop")
    assert len(provider) == 0


def test_factories_that_get_each_other_on_two_threads_fail_instead_of_deadlocking():
    # Thread 1 creates "a", whose factory gets "b"; thread 2 creates "b", whose factory gets
    # "a". Both factories first wait at a barrier, so each id is being created when the other
    # asks for it: without cycle detection both wait on each other's future forever.
    store = InMemoryEventStore()
    barrier = threading.Barrier(2)
    other = {"a": "b", "b": "a"}
    provider: ChatMemoryProvider[MessageWindowChatMemory]

    def factory(memory_id):
        if memory_id in other:
            barrier.wait(timeout=5)
            provider.get(other[memory_id])
        return MessageWindowChatMemory(id=memory_id, max_messages=5, store=store)

    provider = ChatMemoryProvider(factory)
    errors: dict[str, BaseException] = {}

    def ask(memory_id: str) -> None:
        try:
            provider.get(memory_id)
        except BaseException as e:
            errors[memory_id] = e

    threads = [threading.Thread(target=ask, args=(k,), daemon=True) for k in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    # Check neither thread hangs, both fail, and one of them names the cycle.
    assert not any(thread.is_alive() for thread in threads), "deadlocked"
    assert set(errors) == {"a", "b"}
    assert any("would deadlock" in str(e) for e in errors.values())
    assert len(provider) == 0
    # Check nothing is left half-created: later gets of both ids work.
    assert provider._creating == {}
    assert provider._waiting == {}
    other.clear()
    assert provider.get("a").id == "a"
    assert provider.get("b").id == "b"


# ------------------------------------------------------------------ LRU


def test_least_recently_used_memory_is_evicted_beyond_max_size():
    provider = _window_provider(InMemoryEventStore(), max_size=2)
    a = provider.get("a")
    provider.get("b")
    # Check get refreshes recency: "a" was used after "b", so "b" goes first.
    assert provider.get("a") is a
    provider.get("c")
    assert provider.ids() == ["a", "c"]
    assert "b" not in provider
    assert provider.stats().evictions == 1
    provider.get("d")
    assert provider.ids() == ["c", "d"]
    assert provider.stats() == ProviderStats(
        size=2, hits=1, misses=4, evictions=2, expirations=0, creations=4
    )


def test_eviction_never_loses_data(reopen):
    store = reopen()
    provider = _window_provider(store, max_size=1)
    first = provider.get("alice")
    conversation = a_conversation(4, system="Be brief.")
    first.add(conversation)
    shown = _as_json(first)
    history = [e.event for e in first.history()]
    provider.get("bob").add(a_message("user", "bob's question"))  # evicts alice (max_size=1)
    assert "alice" not in provider
    again = provider.get("alice")
    # Check a new object, with exactly the same view and history, from the store.
    assert again is not first
    assert _as_json(again) == shown
    assert [e.event for e in again.history()] == history
    # Check the same after an explicit evict and a cleared cache, and on a fresh store object.
    assert provider.evict("alice") is True
    assert _as_json(provider.get("alice")) == shown
    assert provider.clear_cache() == 1
    assert len(provider) == 0
    cold = _window_provider(reopen()).get("alice")
    assert _as_json(cold) == shown
    assert _texts(_window_provider(reopen()).get("bob")) == ["bob's question"]


def test_a_dropped_object_still_held_by_a_caller_stays_in_step(reopen):
    provider = _window_provider(reopen())
    old = provider.get("carol")
    old.add(a_message("user", "before the evict"))
    provider.evict("carol")
    new = provider.get("carol")
    # Check both objects read and write the same history: neither shows a stale window.
    old.add(a_message("user", "through the old object"))
    assert _texts(new) == ["before the evict", "through the old object"]
    new.add(a_message("ai", "through the new object"))
    assert old.messages() == new.messages()


# ------------------------------------------------------------------ idle expiry


def test_idle_memories_expire_after_ttl_measured_by_the_injected_clock():
    clock = FakeClock()
    provider = _window_provider(InMemoryEventStore(), ttl=timedelta(minutes=30), clock=clock)
    memory = provider.get("a")
    clock.advance(minutes=29)
    # Check a get refreshes the idle time: 29 + 29 minutes of age, but never 30 idle.
    assert provider.get("a") is memory
    clock.advance(minutes=29)
    assert provider.get("a") is memory
    # Check exactly ttl idle is still cached; one microsecond more is not.
    clock.advance(minutes=30)
    assert "a" in provider
    clock.advance(microseconds=1)
    assert "a" not in provider
    replacement = provider.get("a")
    assert replacement is not memory
    assert provider.stats().expirations == 1


def test_idle_entries_of_other_ids_are_dropped_lazily_on_any_access():
    clock = FakeClock()
    provider = _window_provider(InMemoryEventStore(), ttl=timedelta(minutes=30), clock=clock)
    old = [weakref.ref(provider.get(memory_id)) for memory_id in ("old-1", "old-2")]
    clock.advance(minutes=20)
    provider.get("young")
    clock.advance(minutes=11)
    # Check a get of an unrelated id releases the two idle memories (nothing else holds
    # them) and keeps the young one.
    provider.get("other")
    gc.collect()
    assert [ref() for ref in old] == [None, None]
    assert provider.ids() == ["young", "other"]
    assert provider.stats().expirations == 2


def test_expire_drops_idle_entries_now():
    clock = FakeClock()
    provider = _window_provider(InMemoryEventStore(), ttl=timedelta(seconds=10), clock=clock)
    provider.get("a")
    provider.get("b")
    clock.advance(seconds=5)
    provider.get("b")
    clock.advance(seconds=6)
    # Check expire() reports what it dropped: "a" was idle 11 s, "b" 6 s.
    assert provider.expire() == 1
    assert provider.ids() == ["b"]
    clock.advance(seconds=5)
    assert provider.expire() == 1
    assert provider.expire() == 0
    assert provider.stats().expirations == 2


def test_expire_finds_idle_entries_when_the_clock_stepped_back():
    clock = FakeClock()
    provider = _window_provider(InMemoryEventStore(), ttl=timedelta(minutes=1), clock=clock)
    provider.get("first")
    clock.advance(minutes=-10)  # e.g. an NTP correction
    provider.get("second")  # used after "first", but with an earlier time
    clock.advance(minutes=10, seconds=30)
    # Check the explicit scan drops "second" (idle 10.5 min) although "first" is older in use
    # order and not idle, which stops the lazy sweep.
    assert provider.expire() == 1
    assert provider.ids() == ["first"]


def test_ttl_none_never_expires():
    clock = FakeClock()
    provider = _window_provider(InMemoryEventStore(), ttl=None, clock=clock)
    memory = provider.get("a")
    clock.advance(days=3650)
    assert provider.expire() == 0
    assert provider.get("a") is memory


def test_default_clock_is_the_standard_clock_so_freezegun_moves_it():
    provider = _window_provider(InMemoryEventStore(), ttl=timedelta(minutes=30))
    with freeze_time("2026-01-01 09:00:00") as frozen:
        memory = provider.get("a")
        frozen.tick(timedelta(minutes=30))
        assert provider.get("a") is memory
        frozen.tick(timedelta(minutes=31))
        assert "a" not in provider
        assert provider.stats().expirations == 1


def test_a_clock_returning_naive_times_is_refused():
    provider = _window_provider(InMemoryEventStore(), clock=lambda: datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="aware datetime"):
        provider.get("a")


# ------------------------------------------------------------------ counters and views


def test_counters_len_contains_ids_evict_and_clear():
    provider = _window_provider(InMemoryEventStore(), max_size=3)
    assert (provider.max_size, provider.ttl) == (3, None)
    assert len(provider) == 0
    assert provider.stats() == ProviderStats(0, 0, 0, 0, 0, 0)
    for memory_id in ("a", "b", "a", "c", "a"):
        provider.get(memory_id)
    assert len(provider) == 3
    assert "b" in provider
    assert "z" not in provider
    # Check `in` is not a use: "b" stays least recently used.
    assert provider.ids() == ["b", "c", "a"]
    assert provider.evict("b") is True
    assert provider.evict("b") is False
    assert provider.evict("never") is False
    assert provider.ids() == ["c", "a"]
    assert repr(provider) == "ChatMemoryProvider(size=2, max_size=3, ttl=None)"
    assert provider.clear_cache() == 2
    assert provider.ids() == []
    # Check explicit evicts and clears are not counted as LRU evictions.
    assert provider.stats() == ProviderStats(
        size=0, hits=2, misses=3, evictions=0, expirations=0, creations=3
    )


def test_ids_keep_their_type(store):
    key = uuid.UUID("12345678-1234-5678-1234-567812345678")
    provider = _window_provider(store)
    for memory_id in (1, "1", ("tenant", 7), key):
        provider.get(memory_id)
    assert provider.ids() == [1, "1", ("tenant", 7), key]
    assert ("tenant", 7) in provider
    assert ("tenant", "7") not in provider


def test_unsupported_id_types_are_refused():
    provider = _window_provider(InMemoryEventStore())
    with pytest.raises(TypeError, match="memory id"):
        provider.get(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="memory id"):
        provider.get(True)
    assert provider.stats().misses == 0


# ------------------------------------------------------------------ per-id isolation


def test_nothing_one_id_does_is_visible_through_another(reopen):
    clock = FakeClock()
    provider = _window_provider(reopen(), ttl=timedelta(minutes=10), clock=clock)
    # Ids whose text looks alike but whose stored keys differ.
    ids: list[Any] = ["1", 1, ("1",), uuid.UUID(int=1), "~i:1", ""]
    for n, memory_id in enumerate(ids):
        provider.get(memory_id).add(a_message("user", f"message of id #{n}"))
    # Check each memory shows only its own message, also through a fresh store object.
    for n, memory_id in enumerate(ids):
        assert _texts(provider.get(memory_id)) == [f"message of id #{n}"]
        cold = _window_provider(reopen()).get(memory_id)
        assert _texts(cold) == [f"message of id #{n}"]
    # Check clearing, evicting and expiring one id leaves the others alone.
    provider.get(1).clear()
    assert provider.evict("1") is True
    assert _texts(provider.get(("1",))) == ["message of id #2"]
    clock.advance(minutes=5)
    for memory_id in ids[2:]:
        provider.get(memory_id)
    clock.advance(minutes=6)
    assert provider.expire() == 1  # only 1 (int) was idle: "1" was evicted, the rest are used
    assert provider.ids() == ids[2:]
    assert _texts(provider.get("1")) == ["message of id #0"]
    assert provider.get(1).messages() == []


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_size": 0}, ValueError, "max_size must be at least 1, but is 0"),
        ({"max_size": -5}, ValueError, "max_size must be at least 1"),
        ({"max_size": True}, TypeError, "max_size must be an int, not bool"),
        ({"max_size": 10.0}, TypeError, "max_size must be an int, not float"),
        ({"ttl": timedelta(seconds=-1)}, ValueError, "ttl must be positive"),
        ({"ttl": timedelta(0)}, ValueError, "ttl must be positive"),
        ({"ttl": 30}, TypeError, "ttl must be a datetime.timedelta or None, not int"),
        ({"clock": "now"}, TypeError, "clock must be callable"),
        ({"wait_timeout": 0}, ValueError, "wait_timeout must be positive seconds or None"),
        ({"wait_timeout": -1.0}, ValueError, "wait_timeout must be positive"),
        ({"wait_timeout": float("nan")}, ValueError, "wait_timeout must be positive"),
        # A number from a config file read as text, or a flag: refused at once with the remedy,
        # not a bare "'>' not supported" (text) or a wait of 1 s (True) under contention.
        ({"wait_timeout": "5"}, TypeError, "wait_timeout must be seconds .* not str '5'"),
        ({"wait_timeout": True}, TypeError, "wait_timeout must be seconds .* not bool True"),
    ],
)
def test_invalid_settings_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        _window_provider(InMemoryEventStore(), **kwargs)


def test_a_factory_that_is_not_callable_is_refused():
    with pytest.raises(TypeError, match="factory must be a callable"):
        ChatMemoryProvider(MessageWindowChatMemory(max_messages=3))  # type: ignore[arg-type]


def test_a_factory_returning_something_else_is_refused_naming_the_id():
    provider: Any = ChatMemoryProvider(lambda memory_id: ["not", "a", "memory"])
    with pytest.raises(TypeError, match="returned list for memory id 'user-1'"):
        provider.get("user-1")
    assert "user-1" not in provider
    assert provider.stats().creations == 0


def test_a_factory_that_forgets_the_id_is_refused(store):
    # LangChain4j issue #3548: without id=, every memory would be "default", one history
    # shared by all users.
    provider = ChatMemoryProvider(
        lambda memory_id: MessageWindowChatMemory(max_messages=20, store=store)
    )
    with pytest.raises(
        ValueError, match="asked for memory id 'user-1' but built a memory with id 'default'"
    ):
        provider.get("user-1")
    assert len(provider) == 0
    # Check ids equal as text but different as ids are caught too (1 is not "1").
    wrong_type = ChatMemoryProvider(
        lambda memory_id: MessageWindowChatMemory(id=str(memory_id), max_messages=20, store=store)
    )
    with pytest.raises(ValueError, match="memory id 1 but built a memory with id '1'"):
        wrong_type.get(1)
    assert wrong_type.get("1").id == "1"
