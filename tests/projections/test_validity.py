"""Provider-valid views: every view keeps its profile's rules, the default stays LangChain4j's,
and interrupted tails are repaired by appending, never by editing."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog import (
    AiMessage,
    ChatMessage,
    InMemoryEventStore,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from projections import (
    MessageWindowChatMemory,
    MessageWindowPolicy,
    OpenAiTokenCountEstimator,
    TokenWindowChatMemory,
    check_valid,
    diff,
    valid_view,
)
from projections.validity import INTERRUPTED, PROVIDERS, answers

_ESTIMATOR = OpenAiTokenCountEstimator("gpt-4o-mini")
_PROFILES = sorted(PROVIDERS)


def _req(call_id: str) -> ToolExecutionRequest:
    return ToolExecutionRequest(id=call_id, name="calc", arguments="{}")


def _call(*ids: str, text: str | None = None) -> AiMessage:
    return AiMessage(text, tool_execution_requests=[_req(i) for i in ids])


def _result(call_id: str) -> ToolExecutionResultMessage:
    return ToolExecutionResultMessage(call_id, "calc", f"r-{call_id}")


SYS = SystemMessage("be brief")
U1, U2 = UserMessage("hi"), UserMessage("and then?")
A1 = AiMessage("hello")


# ---------------------------------------------------------------------------- the rules


def test_the_checker_flags_what_each_provider_rejects():
    # The checker is the independent statement of the rules the property test relies on.
    assert check_valid([U1, _result("c1")], "openai") == [
        "1: tool result 'c1' answers no call right before it"
    ]
    assert check_valid([U1, _call("c1"), U2, A1], "openai") == [
        "1: tool calls ['c1'] have no results right after them"
    ]
    assert check_valid([U1, _call("c1"), _result("c1"), _result("c1")], "openai") == [
        "3: tool result 'c1' answers no call right before it"
    ]
    assert check_valid([A1, U1], "openai") == []  # OpenAI takes an assistant turn first
    assert check_valid([A1, U1], "anthropic") == ["0: the conversation starts with AI, not USER"]
    assert check_valid([U1, SYS], "gemini") == ["1: system message after the conversation started"]
    assert check_valid([U1, A1, _call("c1"), _result("c1")], "gemini") == [
        "2: tool call does not follow a user turn or a result"
    ]
    # The one call allowed to stay open: at the very end (a run in progress).
    for profile in _PROFILES:
        assert check_valid([SYS, U1, _call("c1", "c2"), _result("c1")], profile) == []


def test_a_trimmed_call_leaves_its_result_out():
    window: list[ChatMessage] = [
        SYS,
        _result("c1"),
        U1,
        A1,
    ]  # LangChain4j keeps a result whose call was evicted
    for profile in _PROFILES:
        assert valid_view(window, profile) == [SYS, U1, A1]


def test_an_unanswered_call_keeps_its_text_and_loses_its_requests():
    window: list[ChatMessage] = [U1, _call("c1", text="let me check"), U2]
    assert valid_view(window, "openai") == [U1, AiMessage("let me check"), U2]
    orphaned: list[ChatMessage] = [U1, _call("c1"), _result("c9"), U2]
    assert valid_view(orphaned, "openai") == [U1, U2]


def test_a_call_in_progress_at_the_end_stays():
    window: list[ChatMessage] = [U1, _call("c1", "c2"), _result("c1")]
    for profile in _PROFILES:
        assert valid_view(window, profile) == window


def test_anthropic_and_gemini_start_at_a_user_turn_with_system_first():
    window: list[ChatMessage] = [A1, _call("c1"), _result("c1"), SYS, U1, A1]
    assert valid_view(window, "openai") == window
    assert valid_view(window, "anthropic") == [SYS, U1, A1]
    assert valid_view(window, "gemini") == [SYS, U1, A1]


def test_gemini_wants_a_call_after_a_user_turn_or_a_result():
    window: list[ChatMessage] = [U1, A1, _call("c1"), _result("c1"), U2]
    assert valid_view(window, "anthropic") == window
    assert valid_view(window, "gemini") == [U1, A1, U2]
    chained: list[ChatMessage] = [U1, _call("c1"), _result("c1"), _call("c2"), _result("c2")]
    assert valid_view(chained, "gemini") == chained


def test_an_unknown_profile_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"valid_for='azure'.*\['anthropic', 'gemini', 'openai'\]"):
        valid_view([U1], "azure")
    with pytest.raises(ValueError, match="valid_for='azure'"):
        MessageWindowChatMemory(max_messages=3, valid_for="azure")


# ---------------------------------------------------------------------------- property


_ID = st.sampled_from(["c1", "c2", "c3"])
_messages = st.one_of(
    st.sampled_from([SYS, SystemMessage("be verbose"), U1, U2, A1]),
    st.lists(_ID, min_size=1, max_size=2, unique=True).map(lambda ids: _call(*ids)),
    st.lists(_ID, min_size=1, max_size=2, unique=True).map(lambda ids: _call(*ids, text="hm")),
    _ID.map(_result),
)
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(_messages, min_size=1, max_size=3)),
        st.tuples(st.just("set"), st.lists(_messages, max_size=4)),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("limit"), st.integers(1, 8)),
        st.tuples(st.just("repair"), st.none()),
    ),
    max_size=20,
)


def _subsequence(view: list[ChatMessage], window: list[ChatMessage]) -> bool:
    """Every view message is a window message (or one stripped of its calls), in order -
    system messages aside, which some profiles lift to the front."""
    rest = iter(m for m in window if not isinstance(m, SystemMessage))
    for message in view:
        if isinstance(message, SystemMessage):
            continue
        for candidate in rest:
            if candidate == message or (
                isinstance(candidate, AiMessage)
                and candidate.tool_execution_requests
                and message == AiMessage(candidate.text)
            ):
                break
        else:
            return False
    return True


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=_ops,
    tokens=st.booleans(),
    evict=st.sampled_from([None, 0.5]),
    first=st.booleans(),
    own=st.sampled_from([None, *_PROFILES]),
)
def test_every_view_keeps_its_profile_and_the_default_stays_langchain4j(
    script, tokens, evict, first, own
):
    box = [4 if not tokens else 60]
    store = InMemoryEventStore()

    def make(memory_id, valid_for):
        if tokens:
            return TokenWindowChatMemory(
                memory_id,
                max_tokens=lambda _id: box[0] * 15,
                token_count_estimator=_ESTIMATOR,
                store=store,
                always_keep_system_message_first=first,
                evict_to=evict,
                valid_for=valid_for,
            )
        return MessageWindowChatMemory(
            memory_id,
            max_messages=lambda _id: box[0],
            store=store,
            always_keep_system_message_first=first,
            evict_to=evict,
            valid_for=valid_for,
        )

    memory = make("v", own)
    plain = make("plain", None)  # the same script on a memory without any profile
    for op, arg in script:
        if op == "limit":
            box[0] = arg
            continue
        for target in (memory, plain):
            if op == "clear":
                target.clear()
            elif op == "repair":
                target.repair()
            else:
                getattr(target, op)(arg)
        window = memory.messages(valid_for=None)
        assert window == plain.messages()  # the profile never changes the window itself
        assert memory.messages() == (window if own is None else valid_view(window, own))
        for profile in _PROFILES:
            view = memory.messages(valid_for=profile)
            assert check_valid(view, profile) == [], (profile, window, view)
            assert _subsequence(view, window)
            recorded = memory.as_of(seq=memory.seq, valid_for=None)  # before a limit change
            assert memory.as_of(seq=memory.seq, valid_for=profile) == valid_view(recorded, profile)
    # Nothing was ever written by a view: both logs hold the same events.
    kinds = [e.event.kind for e in memory.history()]
    assert kinds == [e.event.kind for e in plain.history()]


# ---------------------------------------------------------------------------- repair


def test_repair_answers_an_interrupted_tail_by_appending(tmp_path):
    from eventlog import SQLiteEventStore

    store = SQLiteEventStore(tmp_path / "chat.db")
    memory = MessageWindowChatMemory("r", max_messages=10, store=store)
    memory.add(SYS, U1, _call("c1", "c2", text="checking"), _result("c1"))
    before = memory.seq
    # Open at the very end: every profile still accepts it (a run in progress).
    assert check_valid(memory.messages(), "openai") == []
    repaired = memory.repair()
    assert repaired == [ToolExecutionResultMessage("c2", "calc", INTERRUPTED, is_error=True)]
    memory.add(U2)
    for profile in _PROFILES:
        view = memory.messages(valid_for=profile)
        assert check_valid(view, profile) == []
        assert _call("c1", "c2", text="checking") in view  # kept with both results
    # The repair is history: an appended event, shown by diff with the message it brought.
    events = memory.history()
    assert [e.seq for e in events] == list(range(1, before + 3))
    assert events[before].event.message == repaired[0]
    assert [c.message for c in diff(store, "r", before, before + 1).entered] == [repaired[0]]
    assert memory.repair() == []  # nothing open any more: nothing written
    assert memory.seq == before + 2


def test_repair_leaves_a_call_in_the_middle_to_the_views():
    memory = MessageWindowChatMemory("m", max_messages=10)
    memory.add(U1, _call("c1"), U2)
    assert memory.repair() == []  # a result appended now would not follow its call
    assert memory.seq == 3
    assert memory.messages(valid_for="openai") == [U1, U2]


def test_what_if_takes_a_profile_and_chunked_eviction():
    memory = MessageWindowChatMemory("w", max_messages=20)
    memory.add(SYS)
    for i in range(6):
        memory.add(UserMessage(f"u{i}"), _call(f"c{i}"), _result(f"c{i}"), AiMessage(f"a{i}"))
    # A 6-message window starts with an AI turn (Anthropic refuses it): the profile drops it.
    plain = memory.what_if(MessageWindowPolicy(6))
    assert plain[1] == AiMessage("a4")
    valid = memory.what_if(MessageWindowPolicy(6), valid_for="anthropic")
    assert check_valid(valid, "anthropic") == []
    assert valid == [SYS, UserMessage("u5"), _call("c5"), _result("c5"), AiMessage("a5")]
    chunked = memory.what_if(MessageWindowPolicy(6, evict_to=0.5))
    assert len(chunked) <= 6
    assert chunked != plain


_ids = st.sampled_from(["a", "b", "c"])


@given(st.lists(_ids, min_size=1, max_size=4), st.lists(st.one_of(_ids, st.none()), max_size=6))
def test_each_result_answers_the_first_open_request_with_its_id(request_ids, result_ids):
    call = AiMessage(
        tool_execution_requests=[ToolExecutionRequest(i, "t", "{}") for i in request_ids]
    )
    results = [
        (k, UserMessage("not a result") if i is None else ToolExecutionResultMessage(i, "t", "x"))
        for k, i in enumerate(result_ids)
    ]
    answering, unanswered = answers(call, results)
    # Per id: min(requests, results) pairs; the earliest results answer, the last requests wait.
    for i in "abc":
        wanted = request_ids.count(i)
        given_ = result_ids.count(i)
        tags = [k for k, m in answering if isinstance(m, ToolExecutionResultMessage) and m.id == i]
        assert tags == [k for k, r in enumerate(result_ids) if r == i][: min(wanted, given_)]
        waiting = [r for r in unanswered if r.id == i]
        assert waiting == [r for r in call.tool_execution_requests if r.id == i][given_:]
    assert [k for k, _ in answering] == sorted(k for k, _ in answering)
