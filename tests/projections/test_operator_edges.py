"""Edges an operator or a careless user reaches: provider eviction under use, compaction racing
writers, cancelled and crowded async calls, dynamic limits, and time travel at its boundaries.

Each test names what must hold; none fakes what chatledger owns.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import threading
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from freezegun import freeze_time

from eventlog import (
    AiMessage,
    InMemoryEventStore,
    SQLiteEventStore,
    SystemMessage,
    UserMessage,
)
from eventlog.errors import ContentErasedError, PersistenceError, StoreClosedError
from eventlog.store import EventStore
from eventlog.timetext import format_time
from projections import (
    ChatMemoryProvider,
    MessageWindowChatMemory,
    OpenAiTokenCountEstimator,
    SummarizingChatMemory,
    TokenWindowChatMemory,
    compact,
    compaction_runs,
)
from tests.conftest import PG_DSN, require_pg
from tests.factories import a_tool_exchange

FAR_FUTURE = timedelta(days=3650)


def _texts(messages):
    return [m.text for m in messages]


def _added(memory):
    """Texts of the message_added events of a memory's history, in log order."""
    return [e.event.message.text for e in memory.history() if e.event.kind == "message_added"]


# ---------------------------------------------------------------- 1. the provider


def test_an_evicted_memory_held_by_one_thread_and_its_successor_lose_and_duplicate_nothing(
    tmp_path,
):
    store = SQLiteEventStore(tmp_path / "p.db")
    provider = ChatMemoryProvider(
        lambda memory_id: MessageWindowChatMemory(memory_id, max_messages=3, store=store),
        max_size=1,
    )
    held = provider.get("u")
    n = 150

    def old_object():
        for i in range(n):
            held.add(UserMessage(f"a{i}"))

    def via_provider():
        for i in range(n):
            provider.get("u").add(UserMessage(f"b{i}"))
            provider.get(f"other-{i}")  # max_size=1: "u" is evicted on every turn

    threads = [threading.Thread(target=old_object), threading.Thread(target=via_provider)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    # Check every add landed exactly once, each thread's in its own order
    added = _added(held)
    assert sorted(added) == sorted([f"a{i}" for i in range(n)] + [f"b{i}" for i in range(n)])
    assert [t for t in added if t[0] == "a"] == [f"a{i}" for i in range(n)]
    assert [t for t in added if t[0] == "b"] == [f"b{i}" for i in range(n)]
    # Check the held object and a fresh one agree on the window, and the chain verifies
    assert held.messages() == provider.get("u").messages() == held.as_of(seq=held.seq)
    assert len(held.messages()) == 3
    assert store.verify().ok
    assert provider.stats().evictions >= n


def test_ttl_expiry_under_freezegun_while_a_caller_still_uses_the_memory(tmp_path):
    store = SQLiteEventStore(tmp_path / "ttl.db")
    provider = ChatMemoryProvider(
        lambda memory_id: MessageWindowChatMemory(memory_id, max_messages=5, store=store),
        ttl=timedelta(minutes=30),
    )
    with freeze_time("2030-01-01T12:00:00Z") as frozen:
        held = provider.get("u")
        held.add(UserMessage("before"))
        frozen.tick(timedelta(minutes=31))
        # Check the idle entry is gone at the next touch, and a new object replaces it
        assert "u" not in provider
        fresh = provider.get("u")
        assert fresh is not held
        assert provider.stats().expirations == 1
        # Check the expired object still writes, and both objects see each other's writes
        held.add(UserMessage("from the expired object"))
        fresh.add(UserMessage("from the new object"))
        assert _texts(held.messages()) == _texts(fresh.messages())
        assert _texts(fresh.messages()) == [
            "before",
            "from the expired object",
            "from the new object",
        ]
        # Check a jump backwards (a clock stepped back) expires nothing and keeps the object
        frozen.move_to("2029-12-31T00:00:00Z")
        assert provider.get("u") is fresh
    assert _added(fresh) == ["before", "from the expired object", "from the new object"]


def test_a_provider_over_a_closed_store_says_so_instead_of_a_traceback(tmp_path):
    store = SQLiteEventStore(tmp_path / "closed.db")
    provider = ChatMemoryProvider(
        lambda memory_id: MessageWindowChatMemory(memory_id, max_messages=5, store=store)
    )
    cached = provider.get("cached")
    cached.add(UserMessage("hello"))
    store.close()
    # Check both a cached memory and one built after the close raise StoreClosedError
    with pytest.raises(StoreClosedError):
        cached.messages()
    with pytest.raises(StoreClosedError):
        cached.add(UserMessage("lost?"))
    with pytest.raises(StoreClosedError):
        provider.get("new").messages()
    # Check nothing half-written: the file holds exactly what landed before the close
    reopened = SQLiteEventStore(tmp_path / "closed.db")
    assert _added(MessageWindowChatMemory("cached", max_messages=5, store=reopened)) == ["hello"]
    assert reopened.verify().ok


@pytest.mark.parametrize(
    ("max_size", "error"),
    [(0, ValueError), (-1, ValueError), (True, TypeError), (2.0, TypeError), ("3", TypeError)],
)
def test_provider_capacity_that_makes_no_sense_is_refused(max_size, error):
    with pytest.raises(error, match="max_size"):
        ChatMemoryProvider(lambda memory_id: None, max_size=max_size)  # type: ignore[type-var]


def test_a_huge_capacity_and_odd_id_types(tmp_path):
    store = InMemoryEventStore()
    provider = ChatMemoryProvider(
        lambda memory_id: MessageWindowChatMemory(memory_id, max_messages=5, store=store),
        max_size=10**18,
    )
    # Check 1, "1" and (1,) are three memories, and equal ids share one object
    provider.get(1).add(UserMessage("int"))
    provider.get("1").add(UserMessage("str"))
    provider.get((1,)).add(UserMessage("tuple"))
    assert provider.get(1) is provider.get(1)
    assert [_texts(provider.get(i).messages()) for i in (1, "1", (1,))] == [
        ["int"],
        ["str"],
        ["tuple"],
    ]
    # Check ids that a store cannot key are refused before the factory runs
    for bad in (True, 1.5, None, ["a"], b"a", ("a", False)):
        with pytest.raises(TypeError, match="memory id"):
            provider.get(bad)  # type: ignore[arg-type]
    assert provider.stats().creations == 3


def _appends_after_ends(base):
    """A reader class on which another connection's first append to a memory lands right
    after the reader looked at that memory's ends, before it reads the records."""

    class AppendsAfterEnds(base):  # type: ignore[valid-type,misc]
        then: MessageWindowChatMemory | None = None

        def _ends(self, key):
            ends = super()._ends(key)
            writer, self.then = self.then, None
            if writer is not None:
                writer.add(UserMessage("first"))
            return ends

    return AppendsAfterEnds


@pytest.mark.parametrize("backend_name", ["sqlite", "postgres"])
def test_reading_a_memory_while_another_connection_writes_its_first_event(tmp_path, backend_name):
    writer: EventStore
    if backend_name == "sqlite":
        path = tmp_path / "first.db"
        writer = SQLiteEventStore(path)
        reader = _appends_after_ends(SQLiteEventStore)(path)
    else:
        require_pg()
        from eventlog.postgres import PostgresEventStore

        schema = f"t_{uuid.uuid4().hex[:12]}"
        writer = PostgresEventStore(PG_DSN, schema=schema)
        reader = _appends_after_ends(PostgresEventStore)(PG_DSN, schema=schema)
    try:
        # Check a history read that meets the first write is served, not reported as a
        # broken chain (it used to say "records were read but the memory has no head;
        # restore the database from a backup")
        reader.then = MessageWindowChatMemory("new", max_messages=3, store=writer)
        events = MessageWindowChatMemory("new", max_messages=3, store=reader).history()
        assert [e.event.message.text for e in events] == ["first"]
        reader.then = MessageWindowChatMemory("new-2", max_messages=3, store=writer)
        assert [r.seq for r in reader.read_verified("new-2")] == [1]
        reader.then = MessageWindowChatMemory("new-3", max_messages=3, store=writer)
        assert [r.seq for r in reader.read_verified("new-3", desc=True, limit=1)] == [1]
        assert reader.verify().ok
    finally:
        reader.close()
        writer.close()
        if backend_name == "postgres":
            import psycopg

            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")


# ---------------------------------------------------------------- 2. compaction

_WRITER = textwrap.dedent(
    """
    import sys
    from eventlog import SQLiteEventStore, UserMessage
    from projections import MessageWindowChatMemory
    path, n = sys.argv[1], int(sys.argv[2])
    store = SQLiteEventStore(path)
    memory = MessageWindowChatMemory("busy", max_messages=5, store=store)
    print("ready", flush=True)
    for i in range(n):
        memory.add(UserMessage(f"w{i}"))
    store.close()
    """
)


@pytest.mark.slow
def test_compaction_racing_another_process_on_one_sqlite_file_changes_no_answer(tmp_path):
    path = tmp_path / "race.db"
    store = SQLiteEventStore(path)
    idle = MessageWindowChatMemory("idle", max_messages=5, store=store)
    idle.add(UserMessage("quiet"))
    n = 300
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), str(n)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == b"ready"
    runs = 0
    while writer.poll() is None or runs < 3:
        # Everything counts as idle: compaction snapshots the writer's memory mid-race
        report = compact(store, idle_for=timedelta(0), now=datetime.now(UTC) + FAR_FUTURE)
        assert report.errors == ()
        runs += 1
    _, err = writer.communicate(timeout=180)
    assert writer.returncode == 0, err.decode()
    # Check every add landed once, in order, and the chain verifies
    busy = MessageWindowChatMemory("busy", max_messages=5, store=store)
    assert _added(busy) == [f"w{i}" for i in range(n)]
    assert store.verify().ok
    # Check time travel is exact at every seq, snapshots or not
    for k in range(1, n + 1):
        assert _texts(busy.as_of(seq=k)) == [f"w{i}" for i in range(max(0, k - 5), k)]
    assert _texts(busy.messages()) == [f"w{i}" for i in range(n - 5, n)]
    assert len(compaction_runs(store)) == runs


def test_retention_racing_a_writer_on_another_connection_never_loses_a_write(tmp_path):
    path = tmp_path / "purge.db"
    store = SQLiteEventStore(path)
    n = 200
    failures: list[BaseException] = []
    done = threading.Event()

    def writer():
        memory = MessageWindowChatMemory("w", max_messages=3, store=SQLiteEventStore(path))
        try:
            for i in range(n):
                memory.add(UserMessage(f"w{i}"))
        except BaseException as e:
            failures.append(e)
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    erasures = 0
    while not done.is_set() or erasures == 0:
        report = compact(
            store,
            idle_for=timedelta(0),
            purge_idle_for=timedelta(0),
            now=datetime.now(UTC) + FAR_FUTURE,
        )
        assert report.errors == ()
        erasures += len(report.purged)
    thread.join(timeout=120)
    # Check the writer never saw an error, and every add is in the log once (erased or not)
    assert failures == []
    memory = MessageWindowChatMemory("w", max_messages=3, store=store)
    kinds = [e.event.kind for e in memory.history()]
    assert kinds.count("memory_erased") == erasures
    assert kinds.count("message_added") + kinds.count("content_erased") == n
    assert store.verify().ok
    # Check the window shows only what was added after the last erasure
    after = kinds[::-1].index("memory_erased")
    assert len(memory.messages()) == min(after, 3)


class _FailingProvider(ChatMemoryProvider[MessageWindowChatMemory]):
    """A provider whose evict fails once: a compaction interrupted half-way."""

    failed = False

    def evict(self, memory_id):
        if not self.failed:
            self.failed = True
            raise RuntimeError("interrupted")
        return super().evict(memory_id)


def test_a_compaction_interrupted_half_way_leaves_nothing_a_rerun_cannot_finish(tmp_path):
    store = SQLiteEventStore(tmp_path / "half.db")
    provider = _FailingProvider(
        lambda memory_id: MessageWindowChatMemory(memory_id, max_messages=2, store=store)
    )
    for name in ("a", "b", "c"):
        memory = provider.get(name)
        memory.add(UserMessage(f"{name}1"), UserMessage(f"{name}2"), UserMessage(f"{name}3"))
    before = {name: provider.get(name).as_of(seq=2) for name in ("a", "b", "c")}
    later = datetime.now(UTC) + FAR_FUTURE
    with pytest.raises(RuntimeError, match="interrupted"):
        compact(store, idle_for=timedelta(hours=1), providers=[provider], now=later)
    # Check the rerun finishes the job: the memory snapshotted before the failure is
    # unchanged, the others are compacted, and no answer moved
    report = compact(store, idle_for=timedelta(hours=1), providers=[provider], now=later)
    assert report.errors == ()
    assert len(report.compacted) == 2
    assert len(compaction_runs(store)) == 1  # the interrupted run logged nothing
    for name in ("a", "b", "c"):
        memory = MessageWindowChatMemory(name, max_messages=2, store=store)
        assert _texts(memory.messages()) == [f"{name}2", f"{name}3"]
        assert memory.as_of(seq=2) == before[name]
        assert _added(memory) == [f"{name}1", f"{name}2", f"{name}3"]
    assert store.verify().ok


# ---------------------------------------------------------------- 3. async


class _Gate:
    """A dynamic limit that can hold the store's worker thread inside an add."""

    def __init__(self) -> None:
        self.closed = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, memory_id: object) -> int:
        if self.closed:
            self.entered.set()
            self.release.wait(timeout=60)
        return 3


def test_cancelling_an_add_lands_it_once_or_not_at_all_and_the_memory_stays_usable(tmp_path):
    gate = _Gate()
    store = SQLiteEventStore(tmp_path / "cancel.db")
    memory = MessageWindowChatMemory("c", max_messages=gate, store=store)

    async def scenario() -> None:
        gate.closed = True
        running = asyncio.create_task(memory.aadd(UserMessage("running")))
        await asyncio.to_thread(gate.entered.wait, 60)
        queued = asyncio.create_task(memory.aadd(UserMessage("queued")))
        await asyncio.sleep(0)  # queued on the store's one worker, behind "running"
        running.cancel()
        queued.cancel()
        # The queued call is withdrawn from the worker when its cancellation is processed,
        # which is before the task finishes: only then may the worker move on
        with pytest.raises(asyncio.CancelledError):
            await queued
        gate.closed = False
        gate.release.set()
        # The running call cannot be stopped: the caller sees CancelledError, the add lands
        with pytest.raises(asyncio.CancelledError):
            await running
        # Check the object is still usable from the loop
        await memory.aadd(UserMessage("after"))
        assert _texts(await memory.amessages()) == ["running", "after"]

    asyncio.run(scenario())
    # Check: the add that was running landed once; the queued one never ran
    assert _added(MessageWindowChatMemory("c", max_messages=3, store=store)) == [
        "running",
        "after",
    ]
    assert store.verify().ok


def test_many_concurrent_adds_on_one_memory_from_one_loop(store):
    memory = MessageWindowChatMemory("many", max_messages=4, store=store)
    n = 120

    async def scenario() -> None:
        await asyncio.gather(*(memory.aadd(UserMessage(f"m{i}")) for i in range(n)))

    asyncio.run(scenario())
    added = _added(memory)
    # Check every add landed exactly once
    assert sorted(added) == sorted(f"m{i}" for i in range(n))
    if getattr(store, "async_workers", 1) == 1:
        # One worker: the calls run in the order they were awaited
        assert added == [f"m{i}" for i in range(n)]
    # Check the window is the last four of the log, live and by time travel
    assert _texts(memory.messages()) == added[-4:] == _texts(memory.as_of(seq=n))


def test_closing_the_store_while_tasks_run_fails_them_clearly_and_loses_nothing(tmp_path):
    path = tmp_path / "closing.db"
    store = SQLiteEventStore(path)
    gate = _Gate()
    memory = MessageWindowChatMemory("closing", max_messages=gate, store=store)

    async def scenario() -> list[object]:
        for i in range(10):
            await memory.aadd(UserMessage(f"y{i}"))
        gate.closed = True  # the next add stops inside the worker, before its append
        tasks = [asyncio.create_task(memory.aadd(UserMessage(f"y{i}"))) for i in range(10, 60)]
        await asyncio.to_thread(gate.entered.wait, 60)
        store.close()  # while one add is in the worker and 49 wait behind it
        gate.release.set()
        return await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)

    results = asyncio.run(scenario())
    # Check every task raised StoreClosedError (none hangs, none fails otherwise)
    assert all(isinstance(r, StoreClosedError) for r in results), results
    # Check the file holds exactly the adds that returned, once each, and verifies
    reopened = SQLiteEventStore(path)
    assert _added(MessageWindowChatMemory("closing", max_messages=5, store=reopened)) == [
        f"y{i}" for i in range(10)
    ]
    assert reopened.verify().ok


# ---------------------------------------------------------------- 4. limits and windows


def test_a_dynamic_limit_that_changes_between_calls_keeps_time_travel_exact(store):
    limit = [3]
    memory = MessageWindowChatMemory("dyn", max_messages=lambda memory_id: limit[0], store=store)
    shown = {}
    for i, size in enumerate([3, 3, 3, 1, 1, 4, 4, 4, 4, 2, 5]):
        limit[0] = size
        memory.add(UserMessage(f"m{i}"))
        shown[memory.seq] = memory.messages()
    # Check each add's window obeyed the limit of its moment
    assert _texts(shown[4]) == ["m3"]
    assert _texts(shown[9]) == ["m5", "m6", "m7", "m8"]
    assert _texts(shown[10]) == ["m8", "m9"]
    assert _texts(shown[11]) == ["m8", "m9", "m10"]
    # Check as_of answers what messages() showed, whatever the limit is now
    limit[0] = 1
    for seq, messages in shown.items():
        assert memory.as_of(seq=seq) == messages


@pytest.mark.parametrize("bad", [0, -2, "3", True, None, 2.5])
def test_a_dynamic_limit_returning_nonsense_writes_nothing(store, bad):
    limit = [2]
    memory = MessageWindowChatMemory("bad", max_messages=lambda memory_id: limit[0], store=store)
    memory.add(UserMessage("kept"))
    limit[0] = bad
    with pytest.raises(ValueError, match="max_messages"):
        memory.add(UserMessage("refused"))
    with pytest.raises(ValueError, match="max_messages"):
        memory.messages()
    limit[0] = 2
    assert _added(memory) == ["kept"]
    assert _texts(memory.messages()) == ["kept"]


@pytest.mark.parametrize(("limit", "shown"), [("20", "a str, '20'"), (20.0, "a float, 20.0")])
def test_a_limit_from_a_config_file_says_why_it_was_refused(limit, shown):
    # Check the message says the type: "but is: 20" alone (as it used to read) hides why
    with pytest.raises(ValueError, match="pass an int") as error:
        MessageWindowChatMemory("config", max_messages=limit)
    assert str(error.value).startswith("max_messages must be greater than zero, but is: ")
    assert shown in str(error.value)
    with pytest.raises(ValueError, match="pass an int"):
        TokenWindowChatMemory(
            "config", max_tokens=limit, token_count_estimator=OpenAiTokenCountEstimator("gpt-4")
        )


def test_a_limit_of_one_with_a_tool_exchange(store):
    memory = MessageWindowChatMemory("one", max_messages=1, store=store)
    call, result = a_tool_exchange()
    memory.add(UserMessage("compute"), call, result)
    # Check LangChain4j's rule: the call left with its results; the lone result is evicted
    # when the call goes, so the window never starts with an orphan result
    assert memory.messages() == [result] or memory.messages() == []
    memory.add(AiMessage("4"))
    assert memory.messages() == [AiMessage("4")]
    assert len(memory.history()) == 4


def test_a_system_message_larger_than_the_token_budget(store):
    memory = TokenWindowChatMemory(
        "big", max_tokens=10, token_count_estimator=OpenAiTokenCountEstimator("gpt-4"), store=store
    )
    system = SystemMessage("rule " * 40)
    memory.add(system)
    # Check a lone system message over the budget is kept (LangChain4j)
    assert memory.messages() == [system]
    memory.add(UserMessage("hi"))
    # Check the user message cannot fit beside it and leaves; the system message stays
    assert memory.messages() == [system]
    assert memory.as_of(seq=1) == memory.as_of(seq=2) == [system]
    assert [e.event.kind for e in memory.history()] == ["message_added", "message_added"]


def test_a_summary_never_holds_a_tool_call_without_its_late_result(store):
    folded = []

    def summarize(evicted, previous):
        folded.append(list(evicted))
        return f"{previous or ''}+{len(evicted)}"

    memory = SummarizingChatMemory("late", max_messages=2, summarizer=summarize, store=store)
    call, result = a_tool_exchange("late-1")
    memory.add(call)
    memory.add(UserMessage("u1"))
    memory.add(UserMessage("u2"))  # the call is evicted before its result arrived
    memory.add(result)  # the result arrives after the eviction
    for i in range(3, 7):
        memory.add(UserMessage(f"u{i}"))
    # Check the call was summarized, and only in the same batch as its result
    batches_with_call = [b for b in folded if call in b]
    assert len(batches_with_call) == 1
    assert result in batches_with_call[0]
    assert all(call not in b for b in folded if result not in b)
    # Check time travel and a cold open agree with the live view
    again = SummarizingChatMemory(
        "late", max_messages=2, summarizer=lambda e, p: pytest.fail("no new call"), store=store
    )
    assert again.messages() == memory.messages() == memory.as_of(seq=memory.seq)


def test_a_summary_the_store_cannot_take_does_not_fail_the_add_that_landed(tmp_path):
    path = tmp_path / "locked.db"
    store = SQLiteEventStore(path, busy_timeout=0.2)
    other = sqlite3.connect(path, isolation_level=None)  # another process's connection
    locked: list[bool] = []

    def summarize(evicted, previous):
        if not locked:
            locked.append(True)
            other.execute("BEGIN IMMEDIATE")  # it holds the write lock while the model runs
        return (previous or "") + "".join(f"[{m.text}]" for m in evicted)

    memory = SummarizingChatMemory("locked", max_messages=2, summarizer=summarize, store=store)
    memory.add(UserMessage("a"), UserMessage("b"))
    # Check the add whose summary cannot be appended returns: "c" is in the log, and an
    # exception here (as it used to raise) has the caller retry and log "c" twice
    memory.add(UserMessage("c"))
    other.execute("ROLLBACK")
    other.close()
    assert isinstance(memory.last_error, PersistenceError)
    assert _added(memory) == ["a", "b", "c"]
    assert memory.summary is None
    # Check the next eviction folds everything pending, in one summary
    memory.add(UserMessage("d"))
    assert memory.summary == "[a][b]"
    assert _texts(memory.messages()[1:]) == ["c", "d"]
    assert store.verify().ok


def test_a_store_closed_while_the_summarizer_runs_keeps_the_message_once(tmp_path):
    path = tmp_path / "closed-sum.db"
    store = SQLiteEventStore(path)

    def summarize(evicted, previous):
        store.close()  # the app shuts down while the model answers
        return "late"

    memory = SummarizingChatMemory("closing", max_messages=1, summarizer=summarize, store=store)
    memory.add(UserMessage("a"))
    memory.add(UserMessage("b"))
    assert isinstance(memory.last_error, StoreClosedError)
    with pytest.raises(StoreClosedError):
        memory.add(UserMessage("c"))
    reopened = SQLiteEventStore(path)
    again = SummarizingChatMemory(
        "closing",
        max_messages=1,
        summarizer=lambda e, p: "+".join(_texts(e)),
        store=reopened,
    )
    assert _added(again) == ["a", "b"]
    again.add(UserMessage("c"))
    assert again.summary == "a+b"
    assert reopened.verify().ok


def test_two_summarizing_objects_on_one_id_fold_each_message_once(tmp_path):
    path = tmp_path / "two.db"
    n = 60

    def summarize(evicted, previous):
        return (previous or "") + "".join(f"[{m.text}]" for m in evicted)

    def run(name):
        memory = SummarizingChatMemory(
            "shared", max_messages=3, summarizer=summarize, store=SQLiteEventStore(path)
        )
        for i in range(n):
            memory.add(UserMessage(f"{name}{i}"))

    SQLiteEventStore(path).close()
    threads = [threading.Thread(target=run, args=(name,)) for name in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    store = SQLiteEventStore(path)
    memory = SummarizingChatMemory("shared", max_messages=3, summarizer=summarize, store=store)
    covered = [
        ref
        for e in memory.history()
        if e.event.kind == "summary_recorded"
        for ref in e.event.covers
    ]
    # Check no message is covered by two summaries, and the summary in force plus the
    # window hold every message exactly once
    assert len(covered) == len(set(covered))
    summary = memory.summary or ""
    window = _texts(memory.messages()[1:])
    for text in [f"{name}{i}" for name in "ab" for i in range(n)]:
        assert summary.count(f"[{text}]") + window.count(text) == 1, text
    assert store.verify().ok


def test_a_summary_stays_in_force_for_an_object_opened_after_a_plain_writer(store):
    calls: list[list[str]] = []

    def summarize(evicted, previous):
        calls.append(_texts(evicted))
        return (previous or "") + "".join(f"[{m.text}]" for m in evicted)

    summarizing = SummarizingChatMemory("mixed", max_messages=2, summarizer=summarize, store=store)
    for i in range(4):
        summarizing.add(UserMessage(f"m{i}"))
    assert summarizing.summary == "[m0][m1]"
    # A memory that does not summarize writes the same id (an older deployment still
    # running, a script): its event records no summary
    plain = MessageWindowChatMemory("mixed", max_messages=2, store=store)
    plain.add(UserMessage("p"))
    live = summarizing.messages()
    assert _texts(live[1:]) == ["m3", "p"]
    # Check an object opened now shows the summary in force, as the live object does (it
    # used to show none), and time travel to that event agrees
    fresh = SummarizingChatMemory("mixed", max_messages=2, summarizer=summarize, store=store)
    assert fresh.messages() == live
    assert fresh.summary == "[m0][m1]"
    assert summarizing.as_of(seq=plain.seq) == live
    assert fresh.as_of(seq=plain.seq) == live
    # Check its next eviction folds only what left since (it used to fold everything
    # evicted since the first event again, without the previous summary)
    calls.clear()
    fresh.add(UserMessage("q"))
    assert calls == [["m2", "m3"]]
    assert fresh.summary == "[m0][m1][m2][m3]"
    assert summarizing.messages() == fresh.messages()


# ---------------------------------------------------------------- 5. time travel


def test_time_travel_boundaries(store):
    memory = MessageWindowChatMemory("tt", max_messages=2, store=store)
    before_first = datetime.now(UTC) - timedelta(days=1)
    # Check an empty history: seq 0 and any time are the empty window; seq 1 is refused
    assert memory.as_of(seq=0) == []
    assert memory.as_of(at=before_first) == []
    with pytest.raises(ValueError, match="ends at seq 0"):
        memory.as_of(seq=1)
    memory.add(UserMessage("a"), UserMessage("b"), UserMessage("c"))
    memory.clear()
    memory.add(UserMessage("d"))
    # Check seq 0, a time before the first event, the head, and beyond the head
    assert memory.as_of(seq=0) == []
    assert memory.as_of(at=before_first) == []
    assert memory.as_of(at=datetime.min.replace(tzinfo=UTC)) == []
    assert _texts(memory.as_of(at=datetime.max.replace(tzinfo=UTC))) == ["d"]
    assert _texts(memory.as_of(seq=5)) == ["d"]
    with pytest.raises(ValueError, match="ends at seq 5"):
        memory.as_of(seq=6)
    # Check before and after the clear
    assert _texts(memory.as_of(seq=3)) == ["b", "c"]
    assert memory.as_of(seq=4) == []
    # Check a naive datetime and other nonsense are refused with what to pass
    with pytest.raises(ValueError, match="no timezone"):
        memory.as_of(at=datetime.now())  # naive: the point of the test
    with pytest.raises(TypeError, match="aware datetime"):
        memory.as_of(at="2030-01-01")  # type: ignore[arg-type]
    for seq in (-1, 1.0, True):
        with pytest.raises(ValueError, match="seq must be an int"):
            memory.as_of(seq=seq)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exactly one"):
        memory.as_of()
    # Check after an erasure: older content is refused clearly, seq 0 and new writes work
    store.erase("tt", reason="gdpr")
    assert memory.messages() == []
    with pytest.raises(ContentErasedError, match="gdpr"):
        memory.as_of(seq=3)
    assert memory.as_of(seq=0) == []
    memory.add(UserMessage("e"))
    assert _texts(memory.as_of(seq=memory.seq)) == ["e"]


def test_a_summarizing_memory_travels_to_seq_zero_and_before_its_first_event(store):
    memory = SummarizingChatMemory(
        "sum-tt", max_messages=2, summarizer=lambda evicted, previous: "s", store=store
    )
    before_first = datetime.now(UTC) - timedelta(days=1)
    # Check an empty summarizing memory at seq 0 (it used to read the records after seq -1)
    assert memory.as_of(seq=0) == []
    assert asyncio.run(memory.aas_of(seq=0)) == []
    for i in range(4):
        memory.add(UserMessage(f"m{i}"))
    assert memory.summary == "s"
    # Check seq 0 and a time before the first event are the empty window, without a summary
    assert memory.as_of(seq=0) == []
    assert memory.as_of(at=before_first) == []
    assert _texts(memory.as_of(seq=1)) == ["m0"]


def test_a_time_before_year_1000_in_another_zone_is_before_every_event(store):
    memory = MessageWindowChatMemory("old", max_messages=2, store=store)
    memory.add(UserMessage("a"))
    plus_one = timezone(timedelta(hours=1))
    # Check the same instant is the same answer whatever the zone (it used to be stored
    # text "999-..." through strftime, which sorted after "2026-...")
    assert memory.as_of(at=datetime(999, 1, 1, tzinfo=UTC)) == []
    assert memory.as_of(at=datetime(999, 1, 1, tzinfo=plus_one)) == []
    assert format_time(datetime(999, 1, 1, 1, tzinfo=plus_one)) == "0999-01-01T00:00:00.000000Z"


def test_a_time_that_leaves_the_calendar_in_utc_is_a_clear_error(store):
    memory = MessageWindowChatMemory("edge", max_messages=2, store=store)
    memory.add(UserMessage("a"))
    # Check an aware time whose UTC instant is before year 1 or after 9999 raises a
    # ValueError naming it (it used to be an OverflowError from deep inside)
    for moment in (
        datetime.min.replace(tzinfo=timezone(timedelta(hours=1))),
        datetime.max.replace(tzinfo=timezone(timedelta(hours=-1))),
    ):
        with pytest.raises(ValueError, match="outside the years 1-9999"):
            memory.as_of(at=moment)


def test_as_of_a_time_shared_by_several_events_is_after_the_last_of_them(store):
    memory = MessageWindowChatMemory("same-time", max_messages=5, store=store)
    with freeze_time("2031-05-01T10:00:00Z") as frozen:
        first = datetime.now(UTC)
        memory.add(UserMessage("a"))
        memory.add(UserMessage("b"), UserMessage("c"))
        frozen.tick(timedelta(seconds=1))
        memory.add(UserMessage("d"))
        # Check a time equal to events' stamps includes them all, a microsecond before
        # includes none, and a time between two stamps is the earlier one's view
        assert _texts(memory.as_of(at=first)) == ["a", "b", "c"]
        assert memory.as_of(at=first - timedelta(microseconds=1)) == []
        assert _texts(memory.as_of(at=first + timedelta(milliseconds=500))) == ["a", "b", "c"]
        assert _texts(memory.as_of(at=datetime.now(UTC))) == ["a", "b", "c", "d"]
        # Check the same instant written in another zone is the same answer
        east = first.astimezone(timezone(timedelta(hours=5, minutes=30)))
        assert memory.as_of(at=east) == memory.as_of(at=first)


# ---------------------------------------------------------------- 6. the wrong file


@pytest.mark.parametrize("table", ["events (x)", "settings (name PRIMARY KEY, value)"])
def test_opening_another_applications_database_changes_nothing_in_it(tmp_path, table):
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE {table}")
        conn.execute("CREATE TABLE users (name)")
    conn.close()

    def shape():
        with sqlite3.connect(path) as conn:
            tables = conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
            mode = conn.execute("PRAGMA journal_mode").fetchone()
        conn.close()
        return tables, mode

    before = shape()
    # Check an operator who points a store at the wrong file gets a clear refusal (it used to
    # add columns to that table, create chatledger's tables, switch the file to WAL, and then
    # fail with "no such column: e.stream_id")
    with pytest.raises(PersistenceError, match="not a chatledger ledger") as error:
        SQLiteEventStore(path)
    assert table.split()[0] in str(error.value)
    assert shape() == before


def test_a_file_shared_with_an_application_whose_tables_do_not_clash_still_opens(tmp_path):
    path = tmp_path / "shared.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (name)")
    conn.close()
    store = SQLiteEventStore(path)
    MessageWindowChatMemory("m", max_messages=2, store=store).add(UserMessage("hi"))
    store.close()
    # Check a ledger reopens (its own tables are no clash)
    again = SQLiteEventStore(path)
    assert _added(MessageWindowChatMemory("m", max_messages=2, store=again)) == ["hi"]
