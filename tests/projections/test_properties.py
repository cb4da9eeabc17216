"""Hypothesis invariants of the window memories, with limits that change between operations.

* replay equals incremental update: the audit's replay (the recorded limits) and what-if with
  the memory's own policy (the limit in force at each event) give the live view after every
  event, and the audit's replay reproduces every recorded window without falling back;
* reopening equals the live object;
* time travel returns exactly what messages() returned;
* a window never exceeds the budget in force, except where LangChain4j's rules say so (a lone
  system message over the token limit).
"""

from __future__ import annotations

import json

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
from projections.audit import walk
from projections.meta import ForkOrigin, WindowMeta, decode_refs, encode_refs
from projections.replay import replay_views
from projections.window import Entry

_ESTIMATOR = OpenAiTokenCountEstimator("gpt-4o-mini")
_REQ = ToolExecutionRequest(id="c1", name="calc", arguments='{"x": 1}')

messages = st.one_of(
    st.sampled_from(["be brief", "be verbose"]).map(SystemMessage),
    st.text(min_size=0, max_size=40).map(UserMessage),
    st.text(min_size=0, max_size=40).map(AiMessage),
    st.just(AiMessage(tool_execution_requests=[_REQ])),
    st.just(ToolExecutionResultMessage.from_request(_REQ, "42")),
)


def _ops(limits):
    return st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.lists(messages, min_size=1, max_size=3)),
            st.tuples(st.just("set"), st.lists(messages, max_size=5)),
            st.tuples(st.just("clear"), st.none()),
            st.tuples(st.just("limit"), limits),  # the dynamic limit changes
        ),
        max_size=25,
    )


_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _run(memory, box, script):
    """Play the script; return the live view and the limit in force after each event, by seq."""
    views, limits = {}, {}
    for op, arg in script:
        if op == "limit":
            box[0] = arg
            continue
        before = memory.seq
        if op == "clear":
            memory.clear()
        else:
            getattr(memory, op)(arg)
        for seq in range(before + 1, memory.seq + 1):
            limits[seq] = box[0]
        if memory.seq != before:
            views[memory.seq] = memory.messages()
    return views, limits


def _check(make, script, first_limit, within_budget):
    store = InMemoryEventStore()
    box = [first_limit]
    live = make(store, lambda _id: box[0])
    views, limits = _run(live, box, script)
    # The audit's replay folds the recorded limits and reproduces every recorded window.
    steps = {step.seq: step for step in walk(store, "p")}
    assert all(step.replayed for step in steps.values())
    assert {seq: [e.message for e in steps[seq].view] for seq in views} == views
    # What-if with the same policy: the fold is lazy, so the limit can be set to the one in
    # force before each event is folded.
    replayed = {}
    box[0] = limits.get(1, first_limit)
    for record, view in replay_views(store, "p", live.policy):
        replayed[record.seq] = view
        box[0] = limits.get(record.seq + 1, box[0])
    assert {seq: replayed[seq] for seq in views} == views
    # Reopening equals the live object; time travel equals the recorded views, and (inside
    # batches too) the windows recorded in the log equal the what-if replay.
    box[0] = limits.get(max(limits, default=0), first_limit)
    cold = make(store, lambda _id: box[0])
    assert cold.messages() == live.messages()
    for seq, view in replayed.items():
        assert cold.as_of(seq=seq) == view
        assert within_budget(view, limits[seq])


@_SETTINGS
@given(
    script=_ops(st.integers(1, 6)),
    limit=st.integers(1, 6),
    first=st.booleans(),
    evict=st.sampled_from([None, 0.5, 0.7]),
)
def test_message_window_invariants(script, limit, first, evict):
    def make(store, max_messages):
        return MessageWindowChatMemory(
            id="p",
            max_messages=max_messages,
            store=store,
            always_keep_system_message_first=first,
            evict_to=evict,
        )

    _check(make, script, limit, lambda view, budget: len(view) <= budget)


@_SETTINGS
@given(
    script=_ops(st.integers(1, 80)),
    limit=st.integers(1, 80),
    first=st.booleans(),
    evict=st.sampled_from([None, 0.5, 0.7]),
)
def test_token_window_invariants(script, limit, first, evict):
    def make(store, max_tokens):
        return TokenWindowChatMemory(
            id="p",
            max_tokens=max_tokens,
            token_count_estimator=_ESTIMATOR,
            store=store,
            always_keep_system_message_first=first,
            evict_to=evict,
        )

    def within(view, budget):
        if len(view) == 1 and isinstance(view[0], SystemMessage):
            return True  # LangChain4j keeps a lone system message even over the limit
        return not view or _ESTIMATOR.estimate_token_count_in_messages(view) <= budget

    _check(make, script, limit, within)


@given(st.lists(st.tuples(st.integers(1, 8), st.integers(0, 3)), unique=True, max_size=12))
def test_window_refs_round_trip(refs):
    entries = [Entry(UserMessage("m"), ref) for ref in refs]
    runs = encode_refs(entries)
    assert decode_refs(runs) == refs
    # Check it is run-length encoded: a window of consecutive adds is one run.
    assert encode_refs([Entry(UserMessage("m"), (s, 0)) for s in range(5, 25)]) == [[5, 24]]


runs = st.lists(
    st.one_of(
        st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)).map(lambda t: [min(t), max(t)]),
        st.tuples(st.integers(1, 10**6), st.integers(0, 50), st.integers(0, 50)).map(
            lambda t: [t[0], min(t[1:]), max(t[1:])]
        ),
    ),
    max_size=4,
)


@given(
    runs=runs,
    limit=st.none() | st.integers(1, 10**6),
    tokens=st.none() | st.integers(0, 10**5) | st.lists(st.integers(0, 10**5), max_size=4),
    estimator=st.text(max_size=12),
    fork=st.none() | st.tuples(st.text(max_size=8), st.integers(1, 99), st.text(max_size=8)),
)
def test_window_meta_is_canonical_and_round_trips(runs, limit, tokens, estimator, fork):
    meta = WindowMeta(
        runs,
        limit,
        tokens,
        estimator if tokens is not None else None,
        None if fork is None else ForkOrigin(*fork),
    )
    text = meta.encode()
    # Check the fast path writes the same bytes as the canonical JSON encoder.
    assert text == json.dumps(
        meta.to_json(), ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )
    assert WindowMeta.decode(text) == meta
