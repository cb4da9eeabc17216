"""Hypothesis invariants of the window memories.

* replay equals incremental update: replaying the log through the memory's policy gives the
  live view after every event;
* reopening equals the live object;
* time travel returns exactly what messages() returned;
* a window never exceeds its budget, except where LangChain4j's rules say so (a lone system
  message over the token limit).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog import (
    AiMessage,
    InMemoryEventStore,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from projections import MessageWindowChatMemory, OpenAiTokenCountEstimator, TokenWindowChatMemory
from projections.replay import replay_views

_ESTIMATOR = OpenAiTokenCountEstimator("gpt-4o-mini")
_REQ = ToolExecutionRequest(id="c1", name="calc", arguments='{"x": 1}')

messages = st.one_of(
    st.sampled_from(["be brief", "be verbose"]).map(SystemMessage),
    st.text(min_size=0, max_size=40).map(UserMessage),
    st.text(min_size=0, max_size=40).map(AiMessage),
    st.just(AiMessage(tool_execution_requests=[_REQ])),
    st.just(ToolExecutionResultMessage.from_request(_REQ, "42")),
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(messages, min_size=1, max_size=3)),
        st.tuples(st.just("set"), st.lists(messages, max_size=5)),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=25,
)
_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _run(memory, script):
    views = {}
    for op, arg in script:
        before = memory.position
        if op == "clear":
            memory.clear()
        else:
            getattr(memory, op)(arg)
        if memory.position != before:
            views[memory.position] = memory.messages()
    return views


def _check(make, script, within_budget):
    store = InMemoryEventStore()
    live = make(store)
    views = _run(live, script)
    # Replay equals incremental update, after every event.
    replayed = {record.seq: view for record, view in replay_views(store, "p", live.policy)}
    assert {seq: replayed[seq] for seq in views} == views
    # Reopening equals the live object; time travel equals the recorded views, and (inside
    # batches too) the windows recorded in the log equal an independent replay.
    cold = make(store)
    assert cold.messages() == live.messages()
    for seq, view in replayed.items():
        assert cold.as_of(seq=seq) == view
        assert within_budget(view)


@_SETTINGS
@given(script=ops, limit=st.integers(1, 6), first=st.booleans())
def test_message_window_invariants(script, limit, first):
    def make(store):
        return MessageWindowChatMemory(
            id="p", max_messages=limit, store=store, always_keep_system_message_first=first
        )

    _check(make, script, lambda view: len(view) <= limit)


@_SETTINGS
@given(script=ops, limit=st.integers(1, 80), first=st.booleans())
def test_token_window_invariants(script, limit, first):
    def make(store):
        return TokenWindowChatMemory(
            id="p",
            max_tokens=limit,
            token_count_estimator=_ESTIMATOR,
            store=store,
            always_keep_system_message_first=first,
        )

    def within(view):
        if len(view) == 1 and isinstance(view[0], SystemMessage):
            return True  # LangChain4j keeps a lone system message even over the limit
        return not view or _ESTIMATOR.estimate_token_count_in_messages(view) <= limit

    _check(make, script, within)


@given(st.lists(st.tuples(st.integers(1, 8), st.integers(0, 3)), unique=True, max_size=12))
def test_window_refs_round_trip(refs):
    from projections.replay import decode_refs, encode_refs
    from projections.windows import Entry

    entries = [Entry(UserMessage("m"), ref) for ref in refs]
    runs = encode_refs(entries)
    assert decode_refs(runs) == refs
    # Check it is run-length encoded: a window of consecutive adds is one run.
    assert encode_refs([Entry(UserMessage("m"), (s, 0)) for s in range(5, 25)]) == [[5, 24]]
