"""SummarizingChatMemory: summaries are history, time travel never calls the summarizer, a
failure loses nothing, and a tool call is never summarized apart from its results."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog import (
    AiMessage,
    ChatMessage,
    EventStore,
    InMemoryEventStore,
    SQLiteEventStore,
    SummaryRecorded,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    message_to_json,
)
from eventlog.models import NewRecord
from projections import (
    MessageWindowChatMemory,
    MessageWindowPolicy,
    OpenAiTokenCountEstimator,
    SummarizingChatMemory,
    TokenWindowChatMemory,
    walk,
)
from projections.replay import replay_views, window_meta
from projections.summarizing import default_summary_message
from tests.factories import lose_last_commit

SYS = SystemMessage("be brief")


class Summarizer:
    """Counts its calls; joins texts so a test can read what each summary covers."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[ChatMessage], str | None]] = []
        self.fail = 0  # the next `fail` calls raise

    def __call__(self, messages: list[ChatMessage], previous: str | None) -> str:
        self.calls.append((list(messages), previous))
        if self.fail:
            self.fail -= 1
            raise RuntimeError("LLM unavailable")
        return ((previous + " ") if previous else "") + " ".join(_text(m) for m in messages)


def _text(message: ChatMessage) -> str:
    if isinstance(message, AiMessage) and message.tool_execution_requests:
        return "call:" + ",".join(str(r.id) for r in message.tool_execution_requests)
    if isinstance(message, ToolExecutionResultMessage):
        return f"result:{message.id}"
    return getattr(message, "text", None) or message.type


def _texts(messages: list[ChatMessage]) -> list[str]:
    return [_text(m) for m in messages]


def _memory(store: EventStore, summarizer: Summarizer, **kwargs: object) -> SummarizingChatMemory:
    kwargs.setdefault("max_messages", 3)
    return SummarizingChatMemory("s", summarizer=summarizer, store=store, **kwargs)  # type: ignore[arg-type]


def test_evicted_messages_become_a_summary_event_and_the_view_shows_it(store):
    summarizer = Summarizer()
    memory = _memory(store, summarizer)
    memory.add(SYS)
    for i in range(5):
        memory.add(UserMessage(f"u{i}"))
    view = memory.messages()
    # The app's system message, then the summary, then LangChain4j's window.
    assert view[0] == SYS
    assert view[1] == SystemMessage("Summary of the earlier conversation:\nu0 u1 u2")
    assert _texts(view[2:]) == ["u3", "u4"]
    assert memory.summary == "u0 u1 u2"
    summaries = [e for e in memory.history() if isinstance(e.event, SummaryRecorded)]
    assert [s.event.covers for s in summaries] == [((2, 0),), ((3, 0),), ((4, 0),)]  # u0..u2
    assert summaries[-1].event.previous == summaries[-2].seq
    # The window itself is LangChain4j's exactly.
    plain = MessageWindowChatMemory("plain", max_messages=3, store=store)
    plain.add(SYS)
    for i in range(5):
        plain.add(UserMessage(f"u{i}"))
    assert [m for m in view if m != view[1]] == plain.messages()


def test_replay_and_time_travel_never_call_the_summarizer(store, reopen):
    summarizer = Summarizer()
    memory = _memory(store, summarizer)
    memory.add(SYS)
    views = {}
    for i in range(8):
        memory.add(UserMessage(f"u{i}"), AiMessage(f"a{i}"))
        views[memory.seq] = memory.messages()
    calls = len(summarizer.calls)
    assert calls > 0
    for seq, view in views.items():
        assert memory.as_of(seq=seq) == view
    assert list(walk(store, "s"))
    assert list(replay_views(store, "s", MessageWindowPolicy(3)))
    assert memory.what_if(MessageWindowPolicy(5))
    assert len(memory.history()) == memory.seq
    # A cold open (another process, after a restart) shows the same view from the log.
    cold_summarizer = Summarizer()
    cold = _memory(reopen(), cold_summarizer)
    assert cold.messages() == memory.messages()
    assert cold.as_of(seq=max(views)) == views[max(views)]
    assert cold_summarizer.calls == []
    assert len(summarizer.calls) == calls


def test_a_failing_summarizer_leaves_the_window_exact_and_retries_at_the_next_eviction(
    store, caplog
):
    summarizer = Summarizer()
    memory = _memory(store, summarizer)
    plain = MessageWindowChatMemory("plain", max_messages=3, store=store)
    for target in (memory, plain):
        target.add(UserMessage("u0"), UserMessage("u1"), UserMessage("u2"))
    summarizer.fail = 1
    with caplog.at_level(logging.WARNING, "chatledger.summarizing"):
        memory.add(UserMessage("u3"))  # evicts u0; the summarizer raises
    plain.add(UserMessage("u3"))
    assert "summarizer failed (RuntimeError: LLM unavailable)" in caplog.text
    assert isinstance(memory.last_error, RuntimeError)
    assert memory.summary is None
    assert memory.messages() == plain.messages()  # nothing half-written
    assert not any(isinstance(e.event, SummaryRecorded) for e in memory.history())
    memory.add(UserMessage("u4"))  # evicts u1: both pending messages fold in one call
    assert _texts(summarizer.calls[-1][0]) == ["u0", "u1"]
    assert memory.summary == "u0 u1"
    assert memory.last_error is None


def test_pending_evictions_survive_a_restart(tmp_path):
    path = tmp_path / "chat.db"
    failing = Summarizer()
    failing.fail = 10
    memory = _memory(SQLiteEventStore(path), failing)
    memory.add(UserMessage("u0"), UserMessage("u1"), UserMessage("u2"), UserMessage("u3"))
    assert memory.summary is None  # u0 left, the summarizer failed, the process "dies"
    working = Summarizer()
    again = _memory(SQLiteEventStore(path), working)
    again.add(UserMessage("u4"))
    assert _texts(working.calls[0][0]) == ["u0", "u1"]
    assert again.summary == "u0 u1"


def test_a_tool_call_is_summarized_together_with_its_results(store):
    summarizer = Summarizer()
    memory = _memory(store, summarizer, max_messages=2)
    request = ToolExecutionRequest(id="c1", name="calc", arguments="{}")
    memory.add(UserMessage("q"), AiMessage(tool_execution_requests=[request]))
    memory.add(UserMessage("meanwhile"))  # evicts q
    memory.add(UserMessage("still waiting"))  # evicts the call, its result has not come
    assert len(summarizer.calls) == 1  # the call alone is not summarized: it waits
    assert _texts(summarizer.calls[-1][0]) == ["q"]
    memory.add(ToolExecutionResultMessage("c1", "calc", "42"))  # arrives after its call left
    assert _texts(summarizer.calls[-1][0]) == ["meanwhile"]  # evicted now; the call waits on
    deferred = [e.event for e in memory.history() if isinstance(e.event, SummaryRecorded)]
    assert deferred[-1].deferred == ((2, 0),)
    memory.add(UserMessage("next"))  # evicts "meanwhile"
    memory.add(UserMessage("last"))  # evicts the late result: now the pair folds together
    folded = [_texts(messages) for messages, _ in summarizer.calls]
    assert ["call:c1", "result:c1"] in [
        [t for t in batch if t.startswith(("call", "result"))] for batch in folded
    ]
    for batch in folded:  # never one without the other
        assert ("call:c1" in batch) == ("result:c1" in batch)
    assert "call:c1 result:c1" in (memory.summary or "")


def test_an_async_summarizer_works_from_sync_and_from_inside_an_event_loop(store):
    calls = []

    async def summarize(messages: list[ChatMessage], previous: str | None) -> str:
        await asyncio.sleep(0)
        calls.append(len(messages))
        return f"{previous or ''}+{len(messages)}"

    memory = SummarizingChatMemory("a", max_messages=1, summarizer=summarize, store=store)
    memory.add(UserMessage("a"), UserMessage("b"))
    assert memory.summary == "+1"

    async def inside_a_loop() -> str | None:
        memory.add(UserMessage("c"))  # sync call from async code: no "loop already running"
        return memory.summary

    assert asyncio.run(inside_a_loop()) == "+1+1"
    assert calls == [1, 1]


def test_clear_ends_the_summary_and_set_keeps_it(store):
    summarizer = Summarizer()
    memory = _memory(store, summarizer, max_messages=1)
    memory.add(UserMessage("a"), UserMessage("b"))
    assert memory.summary == "a"
    memory.set([UserMessage("x")])  # the app's own choice: not summarized, summary kept
    assert memory.summary == "a"
    assert _texts(memory.messages()) == ["Summary of the earlier conversation:\na", "x"]
    memory.clear()
    assert memory.summary is None
    assert memory.messages() == []
    memory.add(UserMessage("c"), UserMessage("d"))
    assert summarizer.calls[-1][1] is None  # a fresh summary, not continuing the old one
    assert memory.summary == "c"


def test_token_window_and_chunked_eviction_summarize_in_chunks(store):
    summarizer = Summarizer()
    estimator = OpenAiTokenCountEstimator("gpt-4o-mini")
    memory = SummarizingChatMemory(
        "t",
        max_tokens=60,
        token_count_estimator=estimator,
        summarizer=summarizer,
        store=store,
        evict_to=0.5,
    )
    plain = TokenWindowChatMemory(
        "tp", max_tokens=60, token_count_estimator=estimator, store=store, evict_to=0.5
    )
    for i in range(20):
        message = UserMessage(f"message number {i}")
        memory.add(message)
        plain.add(message)
    assert memory.messages()[1:] == plain.messages()
    assert estimator.estimate_token_count_in_messages(plain.messages()) <= 60
    # Chunked: each summary folds several messages at once.
    assert all(len(messages) >= 2 for messages, _ in summarizer.calls)


def test_bad_arguments_are_refused_with_the_remedy():
    with pytest.raises(ValueError, match="exactly one of max_messages= and max_tokens="):
        SummarizingChatMemory(summarizer=Summarizer())
    with pytest.raises(ValueError, match="summarizer must be a callable"):
        SummarizingChatMemory(max_messages=3)
    with pytest.raises(ValueError, match="evict_to must be between 0 and 1"):
        SummarizingChatMemory(max_messages=3, summarizer=Summarizer(), evict_to=1.5)


def test_a_summary_that_loses_a_race_is_folded_again_on_the_new_head(store):
    other = MessageWindowChatMemory("s", max_messages=3, store=store)
    raced: list[bool] = []

    def summarize(messages: list[ChatMessage], previous: str | None) -> str:
        if not raced:  # another writer appends while the model is thinking
            raced.append(True)
            other.add(UserMessage("from another process"))
        return ((previous + " ") if previous else "") + " ".join(_text(m) for m in messages)

    memory = SummarizingChatMemory("s", max_messages=3, summarizer=summarize, store=store)
    memory.add(UserMessage("u0"), UserMessage("u1"), UserMessage("u2"), UserMessage("u3"))
    # The other writer's add evicted u1; the retry folds u0 and u1 together, on its head.
    assert memory.summary == "u0 u1"
    assert _texts(memory.messages()[1:]) == ["u2", "u3", "from another process"]
    covered = [e.event.covers for e in memory.history() if isinstance(e.event, SummaryRecorded)]
    assert covered == [((1, 0), (2, 0))]


def test_a_summarizer_returning_something_else_is_a_failure_retried_later(store, caplog):
    answers: list[Any] = [None, "fine"]
    memory = SummarizingChatMemory(
        "s", max_messages=1, summarizer=lambda m, p: answers.pop(0), store=store
    )
    with caplog.at_level(logging.WARNING, "chatledger.summarizing"):
        memory.add(UserMessage("a"), UserMessage("b"))
    assert "summarizer returned NoneType None, not a str" in caplog.text
    assert memory.summary is None
    memory.add(UserMessage("c"))
    assert memory.summary == "fine"


def test_a_window_record_naming_a_non_summary_is_refused(store):
    memory = SummarizingChatMemory("s", max_messages=1, summarizer=Summarizer(), store=store)
    memory.add(UserMessage("a"))
    # A record claiming event 1 (a message) is its summary: not written by a memory.
    forged = '{"lim":1,"sth":1,"sum":1,"w":[[2,2]]}'
    store.append("s", [NewRecord("message_added", message_to_json(UserMessage("b")), forged)])
    cold = SummarizingChatMemory("s", max_messages=1, summarizer=Summarizer(), store=store)
    with pytest.raises(ValueError, match="names event 1 as its summary, but it is a message_added"):
        cold.messages()
    with pytest.raises(ValueError, match="names event 1 as its summary"):
        memory.as_of(seq=2)


_REQUESTS = [ToolExecutionRequest(id=f"c{i}", name="calc", arguments="{}") for i in range(2)]
_any_message = st.one_of(
    st.sampled_from([SYS, SystemMessage("be verbose")]),
    st.text(max_size=8).map(UserMessage),
    st.text(max_size=8).map(AiMessage),
    st.sampled_from(_REQUESTS).map(lambda r: AiMessage(tool_execution_requests=[r])),
    st.sampled_from(_REQUESTS).map(lambda r: ToolExecutionResultMessage.from_request(r, "ok")),
)
_script = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(_any_message, min_size=1, max_size=3)),
        st.tuples(st.just("set"), st.lists(_any_message, max_size=3)),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("limit"), st.integers(1, 5)),
        st.tuples(st.just("fail"), st.integers(1, 2)),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=_script, chunked=st.booleans())
def test_summaries_never_change_the_window_and_each_message_is_summarized_once(script, chunked):
    store = InMemoryEventStore()
    box = [3]
    summarizer = Summarizer()
    evict = 0.5 if chunked else None
    memory = SummarizingChatMemory(
        "s", max_messages=lambda _id: box[0], summarizer=summarizer, store=store, evict_to=evict
    )
    plain = MessageWindowChatMemory(
        "p", max_messages=lambda _id: box[0], store=store, evict_to=evict
    )
    views = {}
    for op, arg in script:
        if op == "limit":
            box[0] = arg
            continue
        if op == "fail":
            summarizer.fail = arg
            continue
        for target in (memory, plain):
            if op == "clear":
                target.clear()
            else:
                getattr(target, op)(arg)
        view = memory.messages()
        summary = memory.summary
        window = [m for m in view if summary is None or m != default_summary_message(summary)]
        assert window == plain.messages()  # the window is LangChain4j's, summary or not
        views[memory.seq] = memory.as_of(seq=memory.seq)
    calls = len(summarizer.calls)
    # Time travel and a cold open read summaries from the log: no summarizer call.
    for seq, view in views.items():
        assert memory.as_of(seq=seq) == view
    # Configured as `memory` is: a limit changed after the last write trims on read, and
    # chunked eviction trims further than a plain one.
    cold = SummarizingChatMemory(
        "s", max_messages=lambda _id: box[0], summarizer=summarizer, store=store, evict_to=evict
    )
    assert cold.messages() == memory.messages()
    assert len(summarizer.calls) == calls
    # Each evicted message is summarized at most once between clears, and only evicted ones.
    evicted = {
        d.entry.ref
        for step in walk(store, "s")
        for d in step.departures
        if d.reason in ("evicted", "orphan")
    }
    covered: list[tuple[int, int]] = []
    for event in memory.history():
        if event.event.kind == "memory_cleared":
            covered = []
        elif isinstance(event.event, SummaryRecorded):
            assert not set(event.event.covers) & set(covered)
            covered += event.event.covers
            assert set(event.event.covers) <= evicted


def test_an_unreadable_pending_range_does_not_fail_the_add_that_landed(store, caplog, monkeypatch):
    summarizer = Summarizer()
    memory = _memory(store, summarizer, max_messages=1)
    memory.add(UserMessage("a"))
    # The store stops serving the events the summary needs (e.g. content erased meanwhile):
    real_read = store.read

    def failing_read(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("lte") == 0 or kwargs.get("gt") == 0:
            raise ValueError("event 1 is gone")
        return real_read(*args, **kwargs)

    monkeypatch.setattr(store, "read", failing_read)
    with caplog.at_level(logging.WARNING, "chatledger.summarizing"):
        memory.add(UserMessage("b"))  # evicts "a"; the add must land anyway
    monkeypatch.setattr(store, "read", real_read)
    assert "could not read what left the window (ValueError: event 1 is gone)" in caplog.text
    assert isinstance(memory.last_error, ValueError)
    assert memory.seq == 2
    memory.add(UserMessage("c"))  # readable again: "a" and "b" fold together
    assert memory.summary == "a b"


@pytest.mark.parametrize(
    ("added", "summary", "back_to"),
    [
        ("abc", "x y a b", 1),
        ("abc", "x y a b", 2),
        ("abc", "x y a b", 3),
        ("a", "x y", 2),
    ],
)
def test_a_memory_whose_history_went_back_serves_the_summary_a_fresh_one_would(
    tmp_path, added, summary, back_to
):
    # A restore or a failover that lost commits: the summary events and what followed are
    # gone, down to events a memory that does not summarize wrote (no coverage in their meta).
    path = tmp_path / "chat.db"
    plain = MessageWindowChatMemory("s", max_messages=1, store=SQLiteEventStore(path))
    plain.add(UserMessage("x"))
    plain.add(UserMessage("y"))
    mine = _memory(SQLiteEventStore(path), Summarizer(), max_messages=1)
    for text in added:
        mine.add(UserMessage(text))
    assert mine.summary == summary  # what the plain memory evicted is folded too
    head = mine.store.head("s")
    assert head is not None
    for seq in range(head.seq, back_to, -1):
        lose_last_commit(path, "s", seq)
    fresh = _memory(SQLiteEventStore(path), Summarizer(), max_messages=1)
    assert mine.summary == fresh.summary
    assert mine.messages() == fresh.messages()


@pytest.mark.parametrize("rewritten", [1, 2])
def test_a_memory_whose_history_was_replaced_forgets_the_summary_of_the_old_one(
    tmp_path, rewritten
):
    # A restore lost the newest commits and another writer, one that does not summarize,
    # wrote new events at the same seqs: one at the seq the old coverage reached, or
    # also one at the seq of the old summary event. Neither the old summary nor its
    # coverage belongs to this history.
    path = tmp_path / "chat.db"
    mine = _memory(SQLiteEventStore(path), Summarizer(), max_messages=1)
    for text in "abcd":
        mine.add(UserMessage(text))
    assert mine.summary == "a b c"
    head = mine.store.read("s")[-1]
    covered = window_meta(head).through
    assert covered is not None and covered == head.seq - 1
    for seq in range(head.seq, covered - 1, -1):
        lose_last_commit(path, "s", seq)
    plain = MessageWindowChatMemory("s", max_messages=1, store=SQLiteEventStore(path))
    for i in range(rewritten):
        plain.add(UserMessage(f"p{i}"))
    fresh = _memory(SQLiteEventStore(path), Summarizer(), max_messages=1)
    # The summary the lost commits held ("a b c") is gone; the one before it ("a b", an
    # event the restore kept) is in force, for the object that saw the change and for a
    # new one alike, as for an object that had followed this history all along.
    assert fresh.summary == mine.summary == "a b"
    assert mine.messages() == fresh.messages()
    assert mine.messages()[1:] == [UserMessage(f"p{rewritten - 1}")]


def test_a_summary_unreadable_while_catching_up_is_read_again_not_lost(store, monkeypatch):
    from eventlog import PersistenceError

    summarizer = Summarizer()
    writer = _memory(store, summarizer)
    stale = _memory(store, Summarizer())
    assert stale.messages() == []
    for i in range(5):
        writer.add(UserMessage(f"u{i}"))
    summarizer.fail = 1
    writer.add(UserMessage("u5"))  # lands; its window record names the summary in force
    assert writer.summary == "u0 u1"
    (newest,) = [e.seq for e in writer.history() if isinstance(e.event, SummaryRecorded)][-1:]
    real = store.read_verified

    def summary_read_fails(*args: Any, **kwargs: Any) -> Any:
        if (kwargs.get("gt"), kwargs.get("lte")) == (newest - 1, newest):
            raise PersistenceError("read", "the connection was lost")
        return real(*args, **kwargs)

    # The stale object catches up, and the summary its new head names cannot be read.
    monkeypatch.setattr(store, "read_verified", summary_read_fails)
    with pytest.raises(PersistenceError):
        stale.messages()
    monkeypatch.setattr(store, "read_verified", real)
    # Check nothing half-moved stayed: the next call reloads, shows the summary, and the
    # next eviction folds it forward instead of starting a new one without it.
    assert stale.messages() == writer.messages()
    assert stale.summary == "u0 u1"
    stale.add(UserMessage("u6"))
    assert stale.summary == "u0 u1 u2 u3"


def test_a_summary_that_is_not_utf8_is_a_summarizer_failure_not_a_failed_add(tmp_path) -> None:
    """A summarizer returning a lone surrogate: before, the add that triggered the summary
    raised the log's ValueError although its message had landed (a caller retrying it would
    add it twice). Now it is a summarizer failure like any other: logged, the evicted messages
    folded at the next eviction, the add returns."""
    store = SQLiteEventStore(tmp_path / "s.db")
    replies = iter(["\ud800 broken", "fine"])
    memory = SummarizingChatMemory(
        "c", max_messages=2, summarizer=lambda _m, _p: next(replies), store=store
    )
    for i in range(3):
        memory.add(UserMessage(f"u{i}"))  # the third evicts u0: the summarizer runs
    assert [m.kind for m in memory.history()] == ["message_added"] * 3
    assert isinstance(memory.last_error, ValueError)
    assert "not UTF-8" in str(memory.last_error)
    memory.add(UserMessage("u3"))  # the next eviction folds u0 and u1
    assert memory.summary == "fine"
    assert memory.last_error is None


def test_a_summary_message_that_is_not_a_message_is_refused_by_name(tmp_path) -> None:
    # Before: messages() returned the str among the messages, for the model call to fail on.
    memory = SummarizingChatMemory(
        "c",
        max_messages=2,
        summarizer=lambda _m, _p: "s",
        summary_message=lambda text: text,  # type: ignore[arg-type,return-value]
        store=SQLiteEventStore(tmp_path / "s.db"),
    )
    for i in range(3):
        memory.add(UserMessage(f"u{i}"))
    with pytest.raises(TypeError, match="summary_message returned str 's', not a ChatMessage"):
        memory.messages()
