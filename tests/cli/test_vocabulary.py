"""Messages a framework wrote, shown in that framework's words: a LangChain system message is a
system message (not the custom JSON it is stored as), an Agents tool output names its tool."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from eventlog import SQLiteEventStore
from projections.adapters.langchain import LedgerChatMessageHistory
from projections.adapters.openai_agents import LedgerSession


@pytest.fixture
def frameworks_db(tmp_path):
    path = tmp_path / "frameworks.db"
    with SQLiteEventStore(path) as store:
        LedgerChatMessageHistory("lc", store=store).add_messages(
            [
                SystemMessage("Be terse."),
                HumanMessage("2+2?"),
                AIMessage("", tool_calls=[{"name": "calc", "args": {"a": 2}, "id": "t1"}]),
                ToolMessage("4", tool_call_id="t1"),
            ]
        )
        items: list[Any] = [
            {"role": "system", "content": "You plan trips."},
            {"role": "user", "content": "Weather in Paris?"},
            {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "21 C"},
            {"type": "reasoning", "id": "r1", "summary": []},
        ]
        asyncio.run(LedgerSession("agents", store=store).add_items(items))
    return path


def test_a_langchain_system_message_is_shown_as_a_system_message(ok, frameworks_db):
    shown = ok("show", "lc", "--db", frameworks_db).stdout.splitlines()
    assert shown[2:] == [
        "1  1      system  Be terse.",
        "2  2      user    2+2?",
        '3  3      ai      → calc({"a": 2})',
        "4  4      tool    calc: 4",
    ]
    history = ok("history", "lc", "--db", frameworks_db).stdout
    assert "system Be terse." in history
    assert "langchain.message" not in history


def test_an_agents_tool_output_names_its_tool_and_system_items_are_system(ok, frameworks_db):
    rows = [
        line.split()[2:]
        for line in ok("show", "agents", "--db", frameworks_db).stdout.splitlines()[2:]
    ]
    assert rows[0] == ["system", "You", "plan", "trips."]
    assert rows[3] == ["tool", "weather:", "21", "C"]
    assert rows[4] == ["reasoning", '{"id":', '"r1",', '"summary":', "[]}"]
    for command in ("history", "replay"):
        out = ok(command, "agents", "--db", frameworks_db).stdout
        assert "tool weather: 21 C" in out, command
        assert "openai_agents.item" not in out, command


def test_framework_messages_of_every_shape_read_as_text():
    from eventlog.messages import CustomMessage
    from projections.readmodel import describe

    def langchain(kind, content, **data):
        return CustomMessage(
            {"langchain.message": {"type": kind, "data": {"content": content, **data}}}
        )

    blocks = [{"type": "text", "text": "Be"}, {"type": "image"}, "terse."]
    assert describe(langchain("system", blocks)) == ("system", "Be terse.")
    assert describe(langchain("chat", "hi", role="critic")) == ("critic", "hi")
    assert describe(langchain("function", None)) == ("function", "")
    assert describe(langchain("system", {"odd": 1})) == ("system", '{"odd": 1}')
    item = {"role": "developer", "content": [{"type": "input_text", "text": "Plan."}]}
    assert describe(CustomMessage({"openai_agents.item": item})) == ("system", "Plan.")
    assert describe(CustomMessage({"other": 1})) == ("custom", '{"other": 1}')
