"""One ledger behind a LangChain4j-style memory, an Agents SDK session and a LangChain history."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("langchain_core", reason="the langchain extra is not installed")

from langchain_core.messages import AIMessage, HumanMessage

from eventlog import AiMessage, SQLiteEventStore, UserMessage
from projections import MessageWindowChatMemory
from projections.adapters.langchain import LedgerChatMessageHistory
from projections.adapters.openai_agents import LedgerSession


def test_three_frameworks_share_one_ledger_and_the_cli_reads_them_all(tmp_path, cli):
    path = tmp_path / "shared.db"
    with SQLiteEventStore(path) as store:
        MessageWindowChatMemory("lc4j", max_messages=10, store=store).add(
            UserMessage("from Java"), AiMessage("hello Java")
        )
        session = LedgerSession("agents", store=store)
        asyncio.run(session.add_items([{"role": "user", "content": "from the SDK"}]))
        LedgerChatMessageHistory("langchain", store=store).add_messages(
            [HumanMessage("from LangChain"), AIMessage("hello LangChain")]
        )
        # Each framework reads what another wrote on the same id, as its own messages.
        assert asyncio.run(LedgerSession("lc4j", store=store).get_items()) == [
            {"role": "user", "content": "from Java"},
            {"role": "assistant", "content": "hello Java"},
        ]
        assert LedgerChatMessageHistory("agents", store=store).messages == [
            HumanMessage("from the SDK")
        ]
    listed = cli("ids", "--db", path, "--json")
    assert listed.returncode == 0, listed.stderr
    for memory_id in ("lc4j", "agents", "langchain"):
        assert memory_id in listed.stdout
    verified = cli("verify", "--db", path)
    assert verified.returncode == 0, verified.stdout
    shown = cli("show", "langchain", "--db", path)
    assert "hello LangChain" in shown.stdout
