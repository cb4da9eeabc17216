"""What the log gives back agrees with memories built afresh: Hypothesis scripts of adds, sets
and clears (system messages, tool calls and their results) on one memory, then

* what-if with another policy equals a fresh memory of that policy fed the same script, after
  every operation (message and token windows, ``evict_to``, system message kept first);
* time travel to seq k equals a fresh memory fed the first k events of the history;
* a diff between two seqs is what the views at both ends say: entered = only at the end,
  left = only at the start, and what came and went is in neither.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from eventlog import (
    AiMessage,
    InMemoryEventStore,
    MemoryCleared,
    MessageAdded,
    MessagesSet,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from projections import (
    MessageWindowChatMemory,
    MessageWindowPolicy,
    OpenAiTokenCountEstimator,
    SummarizingChatMemory,
    TokenWindowChatMemory,
    TokenWindowPolicy,
    what_if,
)
from projections.audit import diff
from projections.replay import view_at

_ESTIMATOR = OpenAiTokenCountEstimator("gpt-4o-mini")
_CALL = ToolExecutionRequest(id="c1", name="calc", arguments='{"x": 1}')
_MESSAGES = st.one_of(
    st.sampled_from(["be brief", "be verbose"]).map(SystemMessage),
    st.sampled_from(["u1", "u2", "a longer user message"]).map(UserMessage),
    st.sampled_from(["a1", "a2"]).map(AiMessage),
    st.just(AiMessage(tool_execution_requests=[_CALL])),
    st.just(ToolExecutionResultMessage.from_request(_CALL, "42")),
)
_SCRIPTS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), _MESSAGES),
        st.tuples(st.just("set"), st.lists(_MESSAGES, max_size=5)),
        st.tuples(st.just("clear"), st.none()),
    ),
    min_size=1,
    max_size=16,
)
_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _memory(kind, store, limit, first, evict):
    if kind == "tokens":
        return TokenWindowChatMemory(
            id="p",
            max_tokens=limit * 8,
            token_count_estimator=_ESTIMATOR,
            store=store,
            always_keep_system_message_first=first,
            evict_to=evict,
        )
    if kind == "summary":
        return SummarizingChatMemory(
            "p", max_messages=limit, summarizer=lambda evicted, previous: "s", store=store
        )
    return MessageWindowChatMemory(
        id="p",
        max_messages=limit,
        store=store,
        always_keep_system_message_first=first,
        evict_to=evict,
    )


def _play(memory, op, arg):
    if op == "clear":
        memory.clear()
    else:
        getattr(memory, op)(arg)


@_SETTINGS
@given(
    script=_SCRIPTS,
    kinds=st.tuples(*[st.sampled_from(["messages", "tokens"])] * 2),
    limits=st.tuples(st.integers(1, 6), st.integers(1, 6)),
    first=st.tuples(st.booleans(), st.booleans()),
    evict=st.sampled_from([None, 0.5]),
)
def test_what_if_another_policy_is_a_fresh_memory_of_it_fed_the_same_script(
    script, kinds, limits, first, evict
):
    source, other = kinds
    store = InMemoryEventStore()
    recorded = _memory(source, store, limits[0], first[0], None)
    fresh = _memory(other, InMemoryEventStore(), limits[1], first[1], evict)
    policy = (
        TokenWindowPolicy(
            limits[1] * 8, _ESTIMATOR, always_keep_system_message_first=first[1], evict_to=evict
        )
        if other == "tokens"
        else MessageWindowPolicy(
            limits[1], always_keep_system_message_first=first[1], evict_to=evict
        )
    )
    for op, arg in script:
        _play(recorded, op, arg)
        _play(fresh, op, arg)
        if recorded.seq:
            note(f"after {op} {arg}")
            assert what_if(store, "p", policy, seq=recorded.seq) == fresh.messages()


@_SETTINGS
@given(
    script=_SCRIPTS,
    kind=st.sampled_from(["messages", "tokens"]),
    limit=st.integers(1, 6),
    first=st.booleans(),
    evict=st.sampled_from([None, 0.5]),
)
def test_time_travel_to_seq_k_is_a_fresh_memory_fed_the_first_k_events(
    script, kind, limit, first, evict
):
    store = InMemoryEventStore()
    memory = _memory(kind, store, limit, first, evict)
    for op, arg in script:
        _play(memory, op, arg)
    history = memory.history()
    replayed = _memory(kind, InMemoryEventStore(), limit, first, evict)
    for entry in history:
        event = entry.event
        if isinstance(event, MessageAdded):
            replayed.add(event.message)
        elif isinstance(event, MessagesSet):
            replayed.set(list(event.messages))
        else:
            assert isinstance(event, MemoryCleared)
            replayed.clear()
        assert memory.as_of(seq=entry.seq) == replayed.messages(), entry.seq


@_SETTINGS
@given(
    script=_SCRIPTS,
    kind=st.sampled_from(["messages", "tokens", "summary"]),
    limit=st.integers(1, 5),
    evict=st.sampled_from([None, 0.5]),
    data=st.data(),
)
def test_a_diff_is_what_the_views_at_both_ends_say(script, kind, limit, evict, data):
    store = InMemoryEventStore()
    memory = _memory(kind, store, limit, False, evict)
    for op, arg in script:
        _play(memory, op, arg)
    start = data.draw(st.integers(0, memory.seq))
    end = data.draw(st.integers(start, memory.seq))
    before = {entry.ref for entry in view_at(store, "p", start)}
    after = {entry.ref for entry in view_at(store, "p", end)}
    changes = diff(store, "p", start, end)
    assert {c.entry.ref for c in changes.entered} == after - before
    assert {c.entry.ref for c in changes.left} == before - after
    assert all(c.entry.ref not in before | after for c in changes.passed)
    for change in changes.changes:
        for seq in (change.entered_at, change.left_at):
            assert seq is None or start < seq <= end
