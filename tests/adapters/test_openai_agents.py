"""LedgerSession: the Agents SDK's Session over the ledger, items exact, history kept."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from eventlog import (
    AiMessage,
    EventStore,
    MessageRetracted,
    SQLiteEventStore,
    ToolExecutionResultMessage,
    UserMessage,
)
from projections import MessageWindowPolicy
from projections.adapters.openai_agents import (
    ITEM_KEY,
    LedgerSession,
    item_of,
    message_of,
    window_callback,
)

ITEMS: list[Any] = [
    {"role": "system", "content": "Be brief."},
    {"role": "developer", "content": "Use metric units."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "and this?"},
            {"type": "input_image", "image_url": "https://example.org/a.png", "detail": "low"},
        ],
    },
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "need the weather tool"}],
        "encrypted_content": "gAAAA-opaque",
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": '{"temp": 21.5}'},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "21.5 °C.", "annotations": [], "logprobs": []}],
    },
    {"type": "item_reference", "id": "msg_0"},
]


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_every_item_round_trips_exactly(store: EventStore) -> None:
    session = LedgerSession("s1", store=store)
    _run(session.add_items(ITEMS))
    assert _run(session.get_items()) == ITEMS
    assert _run(session.get_items(limit=2)) == ITEMS[-2:]
    assert _run(session.get_items(limit=0)) == []
    # A new object (another process, after a restart) reads the same items.
    assert _run(LedgerSession("s1", store=store).get_items()) == ITEMS


def test_items_are_stored_as_the_closest_messages(store: EventStore) -> None:
    messages = [message_of(item) for item in ITEMS]
    assert messages[2] == UserMessage("Weather in Paris?", attributes={ITEM_KEY: ITEMS[2]})
    call = messages[5]
    assert isinstance(call, AiMessage)
    assert call.tool_execution_requests[0].id == "call_1"
    assert isinstance(messages[6], ToolExecutionResultMessage)
    assert messages[6].id == "call_1"
    assert [item_of(m) for m in messages] == ITEMS
    # A message written by a LangChain4j service on the same id still reads as an item.
    assert item_of(UserMessage("hi")) == {"role": "user", "content": "hi"}


def test_add_items_is_one_atomic_append(store: EventStore) -> None:
    session = LedgerSession("s2", store=store)
    _run(session.add_items(ITEMS[:3]))
    with pytest.raises(TypeError, match="nothing was written"):
        _run(session.add_items([ITEMS[3], "not an item"]))  # type: ignore[list-item]
    with pytest.raises(TypeError, match="is not JSON"):
        bad: Any = {"role": "user", "content": float("nan")}
        _run(session.add_items([bad]))
    assert session.memory.seq == 3
    assert _run(session.get_items()) == ITEMS[:3]


@pytest.mark.parametrize(
    "items",
    [{"role": "user", "content": "one item, not a list"}, "a str", b"bytes", 5],
    ids=["dict", "str", "bytes", "int"],
)
def test_add_items_given_one_item_or_text_refuses_the_argument_not_its_first_key(
    store: EventStore, items: Any
) -> None:
    # Before: a dict was taken as the list of its keys, refused as "not str 'role'", a str as
    # the list of its characters ("not str 'a'"), an int as "'int' object is not iterable".
    session = LedgerSession("s-shape", store=store)
    _run(session.add_items(ITEMS[:1]))
    with pytest.raises(TypeError, match=r"add_items: items must be a list .*nothing was written"):
        _run(session.add_items(items))
    with pytest.raises(TypeError, match=r"_atomic_replace_items: items must be a list"):
        _run(session._atomic_replace_items(items))
    assert session.memory.seq == 1
    assert _run(session.get_items()) == ITEMS[:1]


def test_pop_item_appends_a_retraction_and_history_keeps_the_item(store: EventStore) -> None:
    session = LedgerSession("s3", store=store)
    _run(session.add_items(ITEMS[:4]))
    assert _run(session.pop_item()) == ITEMS[3]
    assert _run(session.get_items()) == ITEMS[:3]
    events = session.memory.history()
    assert events[-1].event == MessageRetracted(seq=4, index=0)
    assert item_of(events[3].event.message) == ITEMS[3]
    assert session.memory.as_of(seq=4)[-1] == message_of(ITEMS[3])  # time travel sees it
    _run(session.clear_session())
    assert _run(session.get_items()) == []
    assert _run(session.pop_item()) is None
    kinds = [e.event.kind for e in session.memory.history()]
    assert kinds == [*["message_added"] * 4, "message_retracted", "memory_cleared"]
    assert store.verify("s3").ok


def _paired(chosen: list[dict[str, Any]]) -> bool:
    """Every output follows its call; every call has its output unless nothing follows."""
    calls = [i.get("call_id") for i in chosen if i.get("type") == "function_call"]
    outputs = [i.get("call_id") for i in chosen if i.get("type") == "function_call_output"]
    for index, item in enumerate(chosen):
        if item.get("type") == "function_call_output":
            earlier = [i.get("call_id") for i in chosen[:index] if i.get("type") == "function_call"]
            if item.get("call_id") not in earlier:
                return False
    last_call = max(
        (k for k, i in enumerate(chosen) if i.get("type") == "function_call"), default=-1
    )
    tail_only = all(i.get("type") == "function_call_output" for i in chosen[last_call + 1 :])
    return set(calls) <= set(outputs) or tail_only


def test_the_window_callback_gives_a_valid_window_pairing_calls_by_call_id() -> None:
    history = [{"role": "user", "content": f"q{i}"} for i in range(5)]
    calls = [
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "g", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "1"},
        {"type": "function_call_output", "call_id": "b", "output": "2"},
    ]
    nxt = {"role": "user", "content": "next"}
    # Parallel calls are one unit: both calls and both outputs stay together.
    chosen = window_callback(MessageWindowPolicy(4))([*history, *calls], [nxt])
    assert chosen == [*calls, nxt]
    for limit in range(1, 9):
        for tail in ([], [nxt]):
            chosen = window_callback(MessageWindowPolicy(limit))([*history, *calls], tail)
            assert _paired(chosen), (limit, chosen)
            assert len([i for i in chosen if i.get("type") != "function_call"]) <= limit
            messages = [message_of(i) for i in chosen]
            results = [m for m in messages if isinstance(m, ToolExecutionResultMessage)]
            assert all(m.id in ("a", "b") for m in results)
    unanswered = [{"type": "function_call", "call_id": "x", "name": "f", "arguments": "{}"}]
    hi = {"role": "user", "content": "hi"}
    assert window_callback(MessageWindowPolicy(10))([*unanswered, hi], []) == [hi]
    # A call in progress at the very end stays (the SDK is about to send its output).
    assert window_callback(MessageWindowPolicy(10))([hi, *unanswered], []) == [hi, *unanswered]
    # A reasoning item stays with the call it preceded.
    reasoning = [ITEMS[4], ITEMS[5], ITEMS[6]]
    chosen = window_callback(MessageWindowPolicy(2))([*history, *reasoning], [])
    assert chosen == reasoning


def test_cli_reads_a_session(tmp_path, cli) -> None:
    path = tmp_path / "agents.db"
    with SQLiteEventStore(path) as store:
        session = LedgerSession("chat-1", store=store)
        _run(session.add_items(ITEMS))
        _run(session.pop_item())
    result = cli("history", "chat-1", "--db", path)
    assert result.returncode == 0, result.stderr
    assert "message_retracted" in result.stdout
    assert "Weather in Paris?" in result.stdout
    assert cli("verify", "--db", path).returncode == 0
