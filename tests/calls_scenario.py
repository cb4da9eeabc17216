"""A session and a LangChain history that record model calls (``context_sent`` events), with
every reason a message can be left out of one: shared by the read model's, the CLI's and the
inspector's tests of recorded calls."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

ESTIMATOR_MODEL = "gpt-4o-mini"
TOKEN_BUDGET = 30

ITEMS_BEFORE: list[Any] = [
    {"role": "user", "content": "q1"},
    {"role": "assistant", "content": "a1"},
]
ITEMS_TOOLS: list[Any] = [
    {"role": "user", "content": "q2"},
    {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
    {"role": "assistant", "content": "checking"},
    {"type": "function_call_output", "call_id": "c1", "output": "21 C"},
    {"role": "assistant", "content": "a2, popped"},
]
ITEMS_AFTER_CLEAR: list[Any] = [
    {"role": "user", "content": "q4 " + "long words " * 20},
    {"role": "assistant", "content": "a4"},
]


def record_session(path: Path) -> dict[str, int]:
    """Session ``conv`` on the SQLite file ``path``: three recorded model calls.

    Returns:
        The seqs of the calls, ``{"first": 3, "second": 10, "third": 14}``, and of the clear.
    """
    from eventlog import SQLiteEventStore
    from projections import MessageWindowPolicy, TokenWindowPolicy
    from projections.adapters.openai_agents import LedgerSession
    from projections.tokens import OpenAiTokenCountEstimator

    def call(session: LedgerSession, callback: Any, new: list[Any]) -> list[Any]:
        async def run() -> list[Any]:
            return list(await callback(list(await session.get_items()), new))

        return asyncio.run(run())

    with SQLiteEventStore(path) as store:
        session = LedgerSession("conv", store=store)
        asyncio.run(session.add_items(ITEMS_BEFORE))  # 1, 2
        call(session, session.window_callback(MessageWindowPolicy(3)), [_user("q2?")])  # 3
        asyncio.run(session.add_items(ITEMS_TOOLS))  # 4..8
        asyncio.run(session.pop_item())  # 9 retracts 8
        call(session, session.window_callback(MessageWindowPolicy(5)), [_user("q3")])  # 10
        asyncio.run(session.clear_session())  # 11
        asyncio.run(session.add_items(ITEMS_AFTER_CLEAR))  # 12, 13
        policy = TokenWindowPolicy(TOKEN_BUDGET, OpenAiTokenCountEstimator(ESTIMATOR_MODEL))
        call(session, session.window_callback(policy, valid_for=None), [_user("q5")])  # 14
    return {"first": 3, "second": 10, "clear": 11, "third": 14}


def record_history(path: Path) -> dict[str, int]:
    """LangChain history ``lc`` with ``window=MessageWindowPolicy(3)``: two recorded reads.

    Returns:
        The seqs of the reads, ``{"first": 5, "second": 8}``.
    """
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    from eventlog import SQLiteEventStore
    from projections import MessageWindowPolicy
    from projections.adapters.langchain import LedgerChatMessageHistory

    with SQLiteEventStore(path) as store:
        history = LedgerChatMessageHistory("lc", store=store, window=MessageWindowPolicy(3))
        history.add_messages(
            [SystemMessage("be brief"), HumanMessage("h1"), AIMessage("a1"), HumanMessage("h2")]
        )  # 1..4
        assert len(history.messages) == 3  # 5
        history.add_messages([SystemMessage("be briefer"), HumanMessage("h3")])  # 6, 7
        assert len(history.messages) == 3  # 8
    return {"first": 5, "second": 8}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}
