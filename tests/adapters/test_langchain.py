"""LedgerChatMessageHistory: LangChain messages round-trip exactly, the history keeps all."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="the langchain extra is not installed")

from langchain_core._api.deprecation import LangChainDeprecationWarning
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from eventlog import (
    AiMessage,
    EventStore,
    SQLiteEventStore,
    ToolExecutionResultMessage,
    UserMessage,
)
from projections import MessageWindowPolicy, what_if_call
from projections.adapters.langchain import (
    LedgerChatMessageHistory,
    from_langchain,
    to_langchain,
)

MESSAGES: list[BaseMessage] = [
    SystemMessage("You are terse.", id="sys-1"),
    HumanMessage("What is 2+2?", id="h-1", name="alice"),
    AIMessage(
        "",
        id="run-1",
        tool_calls=[{"name": "add", "args": {"a": 2, "b": 2}, "id": "call-1", "type": "tool_call"}],
        response_metadata={"model_name": "fake", "finish_reason": "tool_calls"},
        usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    ),
    ToolMessage("4", tool_call_id="call-1", name="add", artifact={"raw": 4}),
    AIMessage("2+2 is 4.", id="run-2", additional_kwargs={"refusal": None}),
    HumanMessage(
        content=[
            {"type": "text", "text": "And this?"},
            {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}},
        ]
    ),
    SystemMessage("Be verbose."),
    AIMessageChunk(content="A cat.", id="run-3"),
    ToolMessage("boom", tool_call_id="call-2", status="error"),
]


def test_every_message_type_round_trips_exactly(store: EventStore) -> None:
    history = LedgerChatMessageHistory("lc", store=store)
    history.add_messages(MESSAGES)
    assert history.messages == MESSAGES
    assert [type(m) for m in history.messages] == [type(m) for m in MESSAGES]
    assert LedgerChatMessageHistory("lc", store=store).messages == MESSAGES  # reopened


def test_messages_map_to_what_langchain4j_readers_expect() -> None:
    stored = [from_langchain(m) for m in MESSAGES]
    assert isinstance(stored[1], UserMessage)
    assert stored[1].text == "What is 2+2?"
    assert isinstance(stored[2], AiMessage)
    request = stored[2].tool_execution_requests[0]
    assert (request.id, request.name, request.arguments) == ("call-1", "add", '{"a": 2, "b": 2}')
    assert isinstance(stored[3], ToolExecutionResultMessage)
    assert (stored[3].id, stored[3].text, stored[3].is_error) == ("call-1", "4", False)
    assert stored[8].is_error is True
    assert [to_langchain(m) for m in stored] == MESSAGES
    # Written by a LangChain4j service on the same id: read as the closest LangChain message.
    assert to_langchain(UserMessage("hi")) == HumanMessage("hi")


def test_add_messages_is_atomic_and_clear_keeps_the_history(store: EventStore) -> None:
    history = LedgerChatMessageHistory("lc2", store=store)
    history.add_messages(MESSAGES[:2])
    with pytest.raises(TypeError, match="nothing was written"):
        history.add_messages([MESSAGES[2], "not a message"])  # type: ignore[list-item]
    assert history.messages == MESSAGES[:2]
    assert history.memory.seq == 2
    history.clear()
    assert history.messages == []
    kinds = [e.event.kind for e in history.memory.history()]
    assert kinds == ["message_added", "message_added", "memory_cleared"]
    assert history.memory.as_of(seq=2)[-1] == from_langchain(MESSAGES[1])  # time travel


def test_sync_and_async_agree(store: EventStore) -> None:
    sync = LedgerChatMessageHistory("sync", store=store)
    asyn = LedgerChatMessageHistory("async", store=store)

    async def play() -> list[Any]:
        await asyn.aadd_messages(MESSAGES[:4])
        first = await asyn.aget_messages()
        await asyn.aclear()
        await asyn.aadd_messages(MESSAGES[4:])
        return [first, await asyn.aget_messages()]

    sync.add_messages(MESSAGES[:4])
    first = sync.messages
    sync.clear()
    sync.add_messages(MESSAGES[4:])
    assert asyncio.run(play()) == [first, sync.messages]


def test_a_window_policy_gives_langchain4j_s_window(store: EventStore) -> None:
    full = LedgerChatMessageHistory("w", store=store)
    full.add_messages(MESSAGES)
    window = LedgerChatMessageHistory("w", store=store, window=MessageWindowPolicy(3))
    # The newest system message replaces the first and stays; the oldest leave first.
    assert window.messages == [MESSAGES[6], MESSAGES[7], MESSAGES[8]]
    assert full.messages == MESSAGES  # the history keeps everything
    small = LedgerChatMessageHistory("w", store=store, window=MessageWindowPolicy(5))
    shown = small.messages
    # "You are terse." was replaced by "Be verbose." (LangChain4j appends the new one), the
    # call and its result left together (orphan cascade): 5 messages.
    assert shown == [MESSAGES[i] for i in (4, 5, 6, 7, 8)]
    assert asyncio.run(small.aget_messages()) == shown


def test_runnable_with_message_history_end_to_end(tmp_path, cli) -> None:
    path = tmp_path / "lc.db"
    store = SQLiteEventStore(path)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are terse."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    model = FakeListChatModel(responses=["Paris.", "Rome."])
    # langchain-core 1.6.4+ deprecates RunnableWithMessageHistory (it still works; the issue
    # asks for it): the warning is expected here, and only here.
    with pytest.warns(LangChainDeprecationWarning, match="RunnableWithMessageHistory"):
        chain = RunnableWithMessageHistory(
            prompt | model,
            lambda session_id: LedgerChatMessageHistory(session_id, store=store),
            input_messages_key="question",
            history_messages_key="history",
        )
    config: Any = {"configurable": {"session_id": "trip"}}
    assert chain.invoke({"question": "Capital of France?"}, config=config).content == "Paris."
    reply = asyncio.run(chain.ainvoke({"question": "And Italy?"}, config=config))
    assert reply.content == "Rome."
    history = LedgerChatMessageHistory("trip", store=store)
    assert [m.content for m in history.messages] == [
        "Capital of France?",
        "Paris.",
        "And Italy?",
        "Rome.",
    ]
    result = cli("history", "trip", "--db", path)
    assert result.returncode == 0, result.stderr
    assert "Capital of France?" in result.stdout
    assert cli("verify", "--db", path).returncode == 0


@pytest.mark.parametrize("size", [3, 12])
def test_a_repeated_system_message_leaves_the_first_in_the_window_however_long_the_history(
    store: EventStore, size: int
) -> None:
    history = LedgerChatMessageHistory("c", store=store)
    history.add_messages([SystemMessage("Be brief.", id="first")])
    history.add_messages([HumanMessage(f"h{i}") for i in range(3)])
    history.add_messages([SystemMessage("Be brief.", id="again")])  # equal: LangChain4j ignores it
    history.add_messages([HumanMessage(f"h{i}") for i in range(3, 40)])
    # Check the window read in O(window) rows keeps the system message the whole fold keeps,
    # for a window short enough to stop before the system messages (3) and one that does not.
    window = LedgerChatMessageHistory("c", store=store, window=MessageWindowPolicy(size))
    shown = window.messages
    assert [m.id for m in shown if isinstance(m, SystemMessage)] == ["first"]
    assert [m.content for m in shown[1:]] == [f"h{i}" for i in range(41 - size, 40)]
    # Check the recorded call (event 43) is what re-running its policy sends.
    assert what_if_call(store, "c", 43, MessageWindowPolicy(size)).same


class _RacedStore(SQLiteEventStore):
    """A real SQLite store whose first append is preceded by another writer's (another
    connection to the same file): a message added between a window read and its record."""

    raced = False
    raced_path: Any = None

    def append(self, memory_id: Any, items: Any, **kwargs: Any) -> list[Any]:
        if not self.raced and kwargs.get("expected_seq") is not None:
            self.raced = True
            with SQLiteEventStore(self.raced_path) as other:
                LedgerChatMessageHistory(memory_id, store=other).add_messages(
                    [HumanMessage("added meanwhile")]
                )
        return super().append(memory_id, items, **kwargs)


def test_a_window_read_records_the_list_it_chose_from_when_another_writer_adds(
    tmp_path,
) -> None:
    path = tmp_path / "race.db"
    with SQLiteEventStore(path) as store:
        LedgerChatMessageHistory("c", store=store).add_messages(
            [HumanMessage(f"h{i}") for i in range(4)]
        )
    with _RacedStore(path) as store:
        store.raced_path = path
        window = LedgerChatMessageHistory("c", store=store, window=MessageWindowPolicy(2))
        shown = window.messages
        assert store.raced
        # Check the window and its record are of one list: the record's seq holds the list the
        # window was chosen from, so re-running the recorded policy sends what was sent.
        (call,) = [r for r in store.read("c") if r.kind == "context_sent"]
        assert [m.content for m in window.sent(call.seq)] == [m.content for m in shown]
        assert what_if_call(store, "c", call.seq, MessageWindowPolicy(2)).same
        assert [m.content for m in shown] == ["h3", "added meanwhile"]


def test_a_store_list_or_flag_of_the_wrong_type_is_a_clear_error(tmp_path: Any) -> None:
    # Before: store="x.db" raised AttributeError "'str' object has no attribute 'stream_key'",
    # add_messages(None) "'NoneType' object is not iterable", and record="no" was taken as True.
    with pytest.raises(TypeError, match=r"needs a chatledger EventStore .* not str 'x.db'"):
        LedgerChatMessageHistory("m", store="x.db")  # type: ignore[arg-type]
    with SQLiteEventStore(tmp_path / "l.db") as store:
        with pytest.raises(TypeError, match=r"record must be True or False, got 'no'"):
            LedgerChatMessageHistory("m", store=store, record="no")  # type: ignore[arg-type]
        history = LedgerChatMessageHistory("m", store=store)
        for bad in (None, HumanMessage("one"), "text"):
            with pytest.raises(TypeError, match=r"add_messages: messages must be a list"):
                history.add_messages(bad)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match=r"aadd_messages: messages must be a list"):
                asyncio.run(history.aadd_messages(bad))  # type: ignore[arg-type]
        assert list(store.streams()) == []
