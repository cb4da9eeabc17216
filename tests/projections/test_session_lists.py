"""Session lists and windows read by index agree with a model of the list and with the fold over
the whole list (property tests).

Here rather than in tests/adapters: once a Hypothesis test has run, Hypothesis reads the clock
on every garbage collection, which moves a frozen clock with auto_tick (the CLI fixtures'), so
property tests run after those.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("langchain_core", reason="the langchain extra is not installed")

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from eventlog import InMemoryEventStore
from projections import MessageWindowChatMemory, MessageWindowPolicy, TokenWindowPolicy
from projections.adapters.langchain import (
    LedgerChatMessageHistory,
    from_langchain,
    to_langchain,
)
from projections.adapters.openai_agents import LedgerSession
from projections.adapters.selection import rules_message as _for_rules
from projections.tokens import OpenAiTokenCountEstimator
from projections.window import Entry, Window, WindowPolicy


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


Op = tuple[str, int]
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(1, 4)),
        st.tuples(st.just("pop"), st.just(0)),
        st.tuples(st.just("clear"), st.just(0)),
        st.tuples(st.just("get"), st.integers(-1, 6)),
        st.tuples(st.just("other"), st.integers(1, 3)),  # another object appends
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_a_session_is_the_list_of_items_after_the_last_clear_minus_retractions(ops) -> None:
    store = InMemoryEventStore()
    live = LedgerSession("p", store=store)
    other = LedgerSession("p", store=store)
    model: list[Any] = []
    counter = 0
    for op, n in ops:
        if op in ("add", "other"):
            items: list[Any] = [{"role": "user", "content": f"i{counter + k}"} for k in range(n)]
            counter += n
            _run((live if op == "add" else other).add_items(items))
            model.extend(items)
        elif op == "pop":
            assert _run(live.pop_item()) == (model.pop() if model else None)
        elif op == "clear":
            _run(live.clear_session())
            model.clear()
        else:
            want = model if n < 0 else model[-n:] if n else []
            # Check the long-lived object and a new one agree with the model.
            assert _run(live.get_items(limit=n if n >= 0 else None)) == want
            assert _run(LedgerSession("p", store=store).get_items(limit=n)) == want
    assert _run(LedgerSession("p", store=store).get_items()) == model
    # Check the list each event records is what a memory replaying the events keeps.
    memory = MessageWindowChatMemory("p", max_messages=2**31 - 1, store=store)
    assert [m.attributes["openai_agents.item"] for m in memory.messages()] == model


# ---------------------------------------------------------------- LangChain windows


def _lc_message(kind: int, i: int) -> Any:
    if kind == 0:
        return HumanMessage(f"h{i}")
    if kind == 1:
        return AIMessage(f"a{i}")
    if kind == 2:
        return AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": f"c{i}"}])
    if kind == 3:
        return ToolMessage(f"r{i}", tool_call_id=f"c{i}")
    return SystemMessage(f"s{i % 3}")


def _full_fold(stored: list[Any], policy: WindowPolicy) -> list[Any]:
    """The window over the whole list, as the adapter computed it before item lists."""
    window = Window(policy)
    for index, message in enumerate(stored):
        rules = _for_rules(message)
        window.add(Entry(rules, (index + 1, 0), policy.count(rules)), lambda: policy.limit_for(""))
    return [stored[e.ref[0] - 1] for e in window.view(policy.limit_for(""))]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(st.sampled_from([0, 0, 0, 1, 1, 2, 3, 3, 4]), min_size=0, max_size=120),
    limit=st.integers(1, 6),
    tokens=st.booleans(),
    keep_first=st.booleans(),
)
def test_a_langchain_window_read_by_index_equals_the_fold_over_the_whole_list(
    kinds, limit, tokens, keep_first
) -> None:
    store = InMemoryEventStore()
    policy: WindowPolicy = (
        TokenWindowPolicy(
            limit * 12,
            OpenAiTokenCountEstimator("gpt-4o"),
            always_keep_system_message_first=keep_first,
        )
        if tokens
        else MessageWindowPolicy(limit, always_keep_system_message_first=keep_first)
    )
    history = LedgerChatMessageHistory("w", store=store, window=policy)
    messages = [_lc_message(kind, i) for i, kind in enumerate(kinds)]
    for start in range(0, len(messages), 7):
        history.add_messages(messages[start : start + 7])
    stored = [from_langchain(m) for m in messages]
    want = [to_langchain(m) for m in _full_fold(stored, policy)]
    assert LedgerChatMessageHistory("w", store=store, window=policy).messages == want
