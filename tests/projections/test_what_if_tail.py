"""what_if of a fixed message window folds only the newest events (projections.counterfactual):
it must answer exactly what the replay of the whole history answers.

Histories mix what moves a window's front in unusual ways: AI tool requests whose results
follow (orphan cascades), lone tool results, system messages (equal and different, added and
set, two at once in a set), clears, pops, and several writers with other policies on the same
memory, so the newest events start anywhere in that.
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
from eventlog.serialization import added_record
from projections import (
    MessageWindowChatMemory,
    MessageWindowPolicy,
    OpenAiTokenCountEstimator,
    TokenWindowChatMemory,
    TokenWindowPolicy,
    counterfactual,
    what_if,
)
from tests.factories import a_message

_REQ = ToolExecutionRequest(id="c1", name="calc", arguments='{"x": 1}')
_REQ2 = ToolExecutionRequest(id="c2", name="calc", arguments='{"x": 2}')
_ESTIMATOR = OpenAiTokenCountEstimator("gpt-4o-mini")

messages = st.one_of(
    st.sampled_from(["be brief", "be verbose", "be kind"]).map(SystemMessage),
    st.sampled_from(["a", "b", "hello there"]).map(UserMessage),
    st.sampled_from(["x", "y"]).map(AiMessage),
    st.just(AiMessage(tool_execution_requests=[_REQ])),
    st.just(AiMessage(tool_execution_requests=[_REQ, _REQ2])),
    st.just(ToolExecutionResultMessage.from_request(_REQ, "42")),
    st.just(ToolExecutionResultMessage.from_request(_REQ2, "43")),
)
# Plain adds dominate, as in a conversation; the rest come often enough to land in a tail.
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(messages, min_size=1, max_size=4)),
        st.tuples(st.just("add"), st.lists(messages, min_size=1, max_size=4)),
        st.tuples(st.just("add"), st.lists(messages, min_size=1, max_size=4)),
        st.tuples(st.just("set"), st.lists(messages, max_size=4)),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("writer"), st.integers(0, 2)),
    ),
    min_size=20,
    max_size=70,
)
_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _writers(store):
    return [
        MessageWindowChatMemory("m", max_messages=3, store=store),
        MessageWindowChatMemory(
            "m", max_messages=6, store=store, always_keep_system_message_first=True
        ),
        TokenWindowChatMemory(
            "m", max_tokens=60, token_count_estimator=_ESTIMATOR, store=store, evict_to=0.5
        ),
    ]


def _play(store, script) -> None:
    writers = _writers(store)
    memory = writers[0]
    for op, arg in script:
        if op == "add":
            memory.add(*arg)
        elif op == "set":
            memory.set(arg)
        elif op == "clear":
            memory.clear()
        elif op == "pop":
            memory.pop()
        else:
            memory = writers[arg]


def _compare(store, limit: int, first: bool, *, tokens: bool = False) -> int:
    """Check every seq's what_if against the full replay; return how many the tail settled."""
    policy = (
        TokenWindowPolicy(limit, _ESTIMATOR, always_keep_system_message_first=first)
        if tokens
        else MessageWindowPolicy(limit, always_keep_system_message_first=first)
    )
    head = store.head("m")
    settled = 0
    for seq in range(1, 0 if head is None else head.seq + 1):
        full = counterfactual._replayed(store, "m", policy, seq)
        tail = counterfactual._tail_window(store, "m", policy, seq)
        if tail is not None:
            settled += 1
            assert [e.message for e in tail] == full, (seq, limit, first, tokens)
        assert what_if(store, "m", policy, seq=seq) == full, (seq, limit, first, tokens)
    return settled


@_SETTINGS
@given(script=ops, limit=st.integers(1, 4), first=st.booleans())
def test_the_newest_events_give_the_full_replays_answer(script, limit, first):
    store = InMemoryEventStore()
    _play(store, script)
    _compare(store, limit, first)


@_SETTINGS
@given(script=ops, limit=st.sampled_from([8, 20, 45]), first=st.booleans())
def test_a_token_windows_newest_events_give_the_full_replays_answer(script, limit, first):
    # 8 tokens hold about one short message beside the reply priming: nearly every add evicts.
    store = InMemoryEventStore()
    _play(store, script)
    _compare(store, limit, first, tokens=True)


def test_a_long_conversation_in_a_token_window_is_settled_by_its_tail():
    store = InMemoryEventStore()
    memory = MessageWindowChatMemory("m", max_messages=4, store=store)
    memory.add(SystemMessage("be brief"))
    memory.add(*[UserMessage(f"question number {i}") for i in range(150)])
    policy = TokenWindowPolicy(40, _ESTIMATOR)
    tail = counterfactual._tail_window(store, "m", policy, None)
    assert tail is not None
    assert [e.message for e in tail] == counterfactual._replayed(store, "m", policy, None)
    assert tail[0].message == SystemMessage("be brief")
    assert len(tail) > 2
    # An estimator whose list count is not the sum of its messages' is replayed in full.
    assert counterfactual._tail_window(store, "m", TokenWindowPolicy(40, _Lumped()), None) is None


class _Lumped:
    """An estimator without ``messages_overhead``: its list count is its own business."""

    def estimate_token_count_in_text(self, text):
        return len(text)

    def estimate_token_count_in_message(self, message):
        return 5

    def estimate_token_count_in_messages(self, messages):
        return 5 * len(list(messages)) + 1


def test_a_long_conversation_is_settled_by_its_tail_at_every_seq():
    # Check the tail is not a path that never runs: in a plain conversation with a system
    # prompt and tool calls, every seq past the first span is settled by the newest events.
    store = InMemoryEventStore()
    memory = MessageWindowChatMemory("m", max_messages=4, store=store)
    memory.add(SystemMessage("be brief"))
    for turn in range(40):
        memory.add(UserMessage(f"q{turn}"))
        if turn % 5 == 0:
            memory.add(AiMessage(tool_execution_requests=[_REQ]))
            memory.add(ToolExecutionResultMessage.from_request(_REQ, "42"))
        memory.add(AiMessage(f"a{turn}"))
    span = 2 * 4 + 16
    head = store.head("m").seq
    assert _compare(store, 4, first=False) == head - span


def test_a_set_of_two_system_messages_sends_the_fold_to_the_start():
    # Which of two system messages a window keeps depends on its policy: the events after
    # such a set record no system messages, so no tail is seeded from them.
    store = InMemoryEventStore()
    memory = MessageWindowChatMemory("m", max_messages=8, store=store)
    memory.set([SystemMessage("one"), SystemMessage("two"), UserMessage("u")])
    memory.add(*[UserMessage(f"u{i}") for i in range(40)])
    policy = MessageWindowPolicy(2)
    assert counterfactual._tail_window(store, "m", policy, None) is None
    # Check the full replay's answer differs from the writer's own system messages.
    assert what_if(store, "m", policy) == [SystemMessage("one"), UserMessage("u39")]
    memory.clear()
    memory.add(*[UserMessage(f"v{i}") for i in range(40)])
    assert counterfactual._tail_window(store, "m", policy, None) is not None
    assert what_if(store, "m", policy) == [UserMessage("v38"), UserMessage("v39")]


def test_events_without_a_system_record_are_replayed_from_the_start():
    # A history written before memories recorded `sys` (here: written by hand without it).
    store = InMemoryEventStore()
    store.append(
        "m",
        [added_record(a_message("system", "old"), '{"lim":2,"w":[[1,1]]}')]
        + [
            added_record(a_message("user", f"u{i}"), f'{{"lim":2,"w":[[1,1],[{i + 2},{i + 2}]]}}')
            for i in range(40)
        ],
    )
    policy = MessageWindowPolicy(3)
    assert counterfactual._tail_window(store, "m", policy, None) is None
    assert what_if(store, "m", policy) == [
        SystemMessage("old"),
        UserMessage("u38"),
        UserMessage("u39"),
    ]
    # A memory opened on it writes no `sys` either, until a clear or a set settles it.
    memory = MessageWindowChatMemory("m", max_messages=2, store=store)
    memory.add(*[UserMessage(f"w{i}") for i in range(30)])
    assert counterfactual._tail_window(store, "m", policy, None) is None
    assert what_if(store, "m", policy)[0] == SystemMessage("old")


def _add_and_pop(memory, times: int) -> None:
    for i in range(times):
        memory.add(UserMessage(f"p{i}"))
        memory.pop()


def test_a_tail_that_never_evicts_says_nothing_of_older_messages():
    # Adds each taken back by a pop: the newest events never fill a window of 4, so they
    # cannot tell which older messages it still holds (u8 to u10: the first add evicted u7).
    store = InMemoryEventStore()
    memory = MessageWindowChatMemory("m", max_messages=4, store=store)
    memory.add(*[UserMessage(f"u{i}") for i in range(1, 11)])
    _add_and_pop(memory, 15)
    policy = MessageWindowPolicy(4)
    assert store.head("m").seq == 40
    assert counterfactual._tail_window(store, "m", policy, None) is None
    assert what_if(store, "m", policy) == [UserMessage(f"u{i}") for i in range(8, 11)]


def test_a_tail_starting_with_tool_results_may_lag_the_window():
    # The tool results at the tail's front answer an AI request just before it. The whole
    # history evicts that request with its results (the orphan cascade), so the window ends
    # empty; folded from the tail alone, the request is not there and a result survives.
    store = InMemoryEventStore()
    memory = MessageWindowChatMemory("m", max_messages=2, store=store)
    memory.add(*[UserMessage(f"u{i}") for i in range(1, 6)])
    memory.add(AiMessage(tool_execution_requests=[_REQ, _REQ2]))  # seq 6: the tail's seed
    memory.add(ToolExecutionResultMessage.from_request(_REQ, "42"))
    memory.add(ToolExecutionResultMessage.from_request(_REQ2, "43"))
    _add_and_pop(memory, 9)
    policy = MessageWindowPolicy(2)
    assert store.head("m").seq == 6 + 2 * 2 + 16  # the first span starts right after seq 6
    assert counterfactual._tail_window(store, "m", policy, None) is None
    assert what_if(store, "m", policy) == []


def _by_hand(store, sys_ref: str, count: int = 40) -> None:
    """``count`` user messages whose window records name ``sys_ref`` as the system message
    (a record no memory writes: each window holds the event itself and message 1)."""
    store.append(
        "m",
        [
            added_record(
                UserMessage(f"u{seq}"), f'{{"lim":9,"sys":[{sys_ref}],"w":[[1,1],[{seq},{seq}]]}}'
            )
            for seq in range(1, count + 1)
        ],
    )


def test_a_system_ref_naming_another_kind_of_message_is_not_a_seed():
    store = InMemoryEventStore()
    _by_hand(store, "[1,0]")  # message 1 is a user message
    policy = MessageWindowPolicy(2)
    assert counterfactual._tail_window(store, "m", policy, None) is None
    assert what_if(store, "m", policy) == [UserMessage("u39"), UserMessage("u40")]


def test_a_system_ref_outside_its_window_is_not_a_seed():
    # The records name the system message "b" replaced: not in their windows, not a seed.
    store = InMemoryEventStore()
    store.append(
        "m",
        [
            added_record(SystemMessage("a"), '{"lim":9,"sys":[[1,0]],"w":[[1,1]]}'),
            added_record(SystemMessage("b"), '{"lim":9,"sys":[[2,0]],"w":[[2,2]]}'),
        ]
        + [
            added_record(
                UserMessage(f"u{seq}"), f'{{"lim":9,"sys":[[1,0]],"w":[[2,2],[{seq},{seq}]]}}'
            )
            for seq in range(3, 41)
        ],
    )
    policy = MessageWindowPolicy(3)
    assert counterfactual._tail_window(store, "m", policy, None) is None
    assert what_if(store, "m", policy) == [
        SystemMessage("b"),
        UserMessage("u39"),
        UserMessage("u40"),
    ]


def test_chunked_eviction_is_replayed_from_the_start():
    # evict_to trims to a low-water mark only when the limit is crossed: where those trims fall
    # depends on the whole path, so the newest events cannot settle it.
    store = InMemoryEventStore()
    memory = MessageWindowChatMemory("m", max_messages=3, store=store)
    memory.add(*[UserMessage(f"u{i}") for i in range(1, 42)])
    for policy in (
        MessageWindowPolicy(4, evict_to=0.5),
        TokenWindowPolicy(40, _ESTIMATOR, evict_to=0.5),
    ):
        assert counterfactual._tail_window(store, "m", policy, None) is None
        assert what_if(store, "m", policy) == counterfactual._replayed(store, "m", policy, None)
    # 41 adds under 4, trimmed to 2 at each crossing (the 5th, 8th, ... 41st add): 2 messages
    # at the end, not the last 4.
    assert what_if(store, "m", MessageWindowPolicy(4, evict_to=0.5)) == [
        UserMessage("u40"),
        UserMessage("u41"),
    ]


def test_the_newest_events_may_be_exactly_as_many_as_a_page_allows():
    store = InMemoryEventStore()
    memory = MessageWindowChatMemory("m", max_messages=3, store=store)
    memory.add(*[UserMessage(f"u{i}") for i in range(2100)])
    policy = MessageWindowPolicy(992)  # reads 2 * 992 + 16 = 2,000 events
    view = counterfactual.what_if_newest(store, "m", policy, seq=2100, most=2000)
    assert view == [UserMessage(f"u{i}") for i in range(2100 - 992, 2100)]
    assert counterfactual.what_if_newest(store, "m", policy, seq=2100, most=1999) is None
