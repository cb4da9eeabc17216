"""The framework adapters on a ledger with erasable ids ([forget]): they find their memories
by id as on any ledger, and erasing a thread or session removes its id too."""

from __future__ import annotations

import asyncio

import pytest

from eventlog import SQLiteEventStore
from eventlog.ids import memory_key
from eventlog.keyring import MemoryKeyring

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("langgraph", reason="the langgraph extra is not installed")


def test_a_langgraph_thread_on_erasable_ids_reads_back_and_delete_thread_erases_its_id(tmp_path):
    from langchain_core.messages import HumanMessage
    from langchain_core.runnables import RunnableConfig

    from projections.adapters.langgraph import LedgerSaver
    from tests.adapters.test_langgraph import chat_app

    store = SQLiteEventStore(tmp_path / "lg.db", erasable_ids=True, keyring=MemoryKeyring())
    saver = LedgerSaver(store)
    app = chat_app(saver)
    for thread in ("alice@example.com", "bob"):
        for i in range(3):
            app.invoke(
                {"messages": [HumanMessage(f"hi {i}")]}, {"configurable": {"thread_id": thread}}
            )
    alice: RunnableConfig = {"configurable": {"thread_id": "alice@example.com"}}
    assert len(app.get_state(alice).values["messages"]) == 6
    assert all(i.stream_id.startswith("~p:") for i in store.streams())
    saver.delete_thread("alice@example.com")
    # Check the thread is gone, its id with it, and bob's thread and the chain are intact.
    assert app.get_state(alice).values == {}
    named = [memory_key(i.memory_id) for i in store.streams() if not i.id_erased]
    assert len(named) == 1 and "bob" in named[0] and "alice" not in " ".join(named)
    assert sum(i.id_erased for i in store.streams()) == 1
    assert store.verify().ok
    store.close()


def test_an_agents_session_on_erasable_ids_reads_back_in_a_new_object(tmp_path):
    from projections.adapters.openai_agents import LedgerSession

    store = SQLiteEventStore(tmp_path / "ag.db", erasable_ids=True)

    async def run() -> object:
        session = LedgerSession("carol@example.com", store=store)
        await session.add_items([{"role": "user", "content": "hello"}])
        return await LedgerSession("carol@example.com", store=store).get_items(limit=10)

    assert asyncio.run(run()) == [{"role": "user", "content": "hello"}]
    (info,) = store.streams()
    assert info.stream_id.startswith("~p:") and "carol" in memory_key(info.memory_id)
    store.close()
