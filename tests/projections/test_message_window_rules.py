"""MessageWindowChatMemory must show exactly what LangChain4j's MessageWindowChatMemory shows.

The definition is §1 of shared/reference/langchain4j-semantics.md (release 1.19.0). Scenarios
ported from LangChain4j's ``MessageWindowChatMemoryTest`` name the Java test they come from;
the rest cover rules of §1 the Java suite leaves implicit, or chatledger's own additions
(history, ``as_of``, atomic batches, dynamic limits that never resurrect evicted messages).

Every table row is played by :func:`factories.play`, which checks after EVERY step the visible
list, how many events the step appended, that history only grew at its end, and finally that
``as_of(seq=k)`` equals what ``messages()`` showed right after event k.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog import (
    AiMessage,
    CustomMessage,
    InMemoryEventStore,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from projections import MessageWindowChatMemory
from tests.factories import Step, a_conversation, add, clear, play, set_to

# --- Messages -----------------------------------------------------------------------------------

SYS = SystemMessage("You are a helpful assistant")
SYS2 = SystemMessage("You are an unhelpful assistant")
U1 = UserMessage("hello")
A1 = AiMessage("hi")
U2 = UserMessage("sup")
A2 = AiMessage("not much")
U3 = UserMessage("Tell me a joke")
A3 = AiMessage("Why did the Java developer wear glasses? Because they didn't see sharp!")

CALC_SYS = SystemMessage("Use calculator for math questions")
QUESTION = UserMessage("How much is 2+2?")
REQ1 = ToolExecutionRequest(id="1", name="calculator", arguments='{ "a": 2, "b": 2 }')
REQ2 = ToolExecutionRequest(id="2", name="calculator", arguments='{ "a": 3, "b": 3 }')
CALL = AiMessage(tool_execution_requests=[REQ1])
RESULT = ToolExecutionResultMessage.from_request(REQ1, "4")
ANSWER = AiMessage("2 + 2 = 4")
QUESTION2 = UserMessage("How much is 2+2 and 3+3?")
CALL2 = AiMessage(tool_execution_requests=[REQ1, REQ2])
RESULT1 = ToolExecutionResultMessage.from_request(REQ1, "4")
RESULT2 = ToolExecutionResultMessage.from_request(REQ2, "6")
ANSWER2 = AiMessage("2 + 2 = 4, 3 + 3 = 6")
# A tool result whose id matches no request: the cascade must not look at ids.
STRAY_RESULT = ToolExecutionResultMessage(id="99", tool_name="weather", text="sunny")
CALL_WITH_TEXT = AiMessage("Let me compute that.", tool_execution_requests=[REQ1])


def window(
    limit: int | Callable[[Any], int | None],
    store: Any = None,
    *,
    flag: bool = False,
    memory_id: Any = "user-1",
) -> MessageWindowChatMemory:
    return MessageWindowChatMemory(
        id=memory_id,
        max_messages=limit,
        store=InMemoryEventStore() if store is None else store,
        always_keep_system_message_first=flag,
    )


# --- Scenario table -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    rule: str
    limit: int
    steps: list[tuple[Step, list[Any]]]
    flag: bool = False


CASES = [
    # MessageWindowChatMemoryTest.should_keep_specified_number_of_messages_in_chat_memory
    Case(
        "sliding eviction drops the oldest",
        3,
        [
            (add(U1), [U1]),
            (add(A1), [U1, A1]),
            (add(U2), [U1, A1, U2]),
            (add(A2), [A1, U2, A2]),
        ],
    ),
    # MessageWindowChatMemoryTest.store_and_clear
    Case(
        "store and clear, clear twice",
        2,
        [
            (add(UserMessage("hello")), [UserMessage("hello")]),
            (add(UserMessage("world")), [UserMessage("hello"), UserMessage("world")]),
            (add(UserMessage("banana")), [UserMessage("world"), UserMessage("banana")]),
            (clear(), []),
            (clear(), []),
        ],
    ),
    Case("limit 1 keeps only the newest", 1, [(add(U1), [U1]), (add(A1), [A1]), (add(U2), [U2])]),
    Case(
        "identical non-system messages are all kept (no dedup)",
        3,
        [(add(U1), [U1]), (add(U1), [U1, U1]), (add(U1), [U1, U1, U1]), (add(U1), [U1, U1, U1])],
    ),
    # MessageWindowChatMemoryTest.should_not_evict_system_message_from_chat_memory
    Case(
        "system message at index 0 is never evicted",
        3,
        [
            (add(SYS), [SYS]),
            (add(U1), [SYS, U1]),
            (add(A1), [SYS, U1, A1]),
            (add(U3), [SYS, A1, U3]),
            (add(A3), [SYS, U3, A3]),
        ],
    ),
    Case(
        "lone system message survives limit 1; newcomers are evicted behind it",
        1,
        [(add(SYS), [SYS]), (add(U1), [SYS]), (add(A1), [SYS])],
    ),
    # MessageWindowChatMemoryTest.should_keep_only_the_latest_system_message_in_chat_memory
    Case(
        "replacement system message removes the old one and goes to the end",
        3,
        [
            (add(SYS), [SYS]),
            (add(U1), [SYS, U1]),
            (add(A1), [SYS, U1, A1]),
            (add(SYS2), [U1, A1, SYS2]),
        ],
    ),
    Case(
        "replacement system message goes to index 0 with the flag",
        3,
        [
            (add(SYS), [SYS]),
            (add(U1), [SYS, U1]),
            (add(A1), [SYS, U1, A1]),
            (add(SYS2), [SYS2, U1, A1]),
        ],
        flag=True,
    ),
    # MessageWindowChatMemoryTest.should_not_add_the_same_system_message_to_chat_memory_if_it_is_already_there  # noqa: E501
    Case(
        "the same system message again appends no event",
        3,
        [
            (add(SYS), [SYS]),
            (add(U1), [SYS, U1]),
            (add(A1), [SYS, U1, A1]),
            (add(SystemMessage("You are a helpful assistant"), events=0), [SYS, U1, A1]),
        ],
    ),
    Case(
        "the same system message again appends no event, with the flag",
        3,
        [(add(U1), [U1]), (add(SYS), [SYS, U1]), (add(SYS, events=0), [SYS, U1])],
        flag=True,
    ),
    Case(
        "dedup also applies to a system message that is not first",
        5,
        [
            (add(U1), [U1]),
            (add(SYS), [U1, SYS]),
            (add(A1), [U1, SYS, A1]),
            (add(SYS, events=0), [U1, SYS, A1]),
        ],
    ),
    Case(
        "replacing a system message in the middle removes it there",
        5,
        [
            (add(U1), [U1]),
            (add(SYS), [U1, SYS]),
            (add(A1), [U1, SYS, A1]),
            (add(SYS2), [U1, A1, SYS2]),
        ],
    ),
    Case(
        "replacing a system message in the middle with the flag",
        5,
        [
            (add(U1), [U1]),
            (add(A1), [U1, A1]),
            (add(SYS), [SYS, U1, A1]),
            (add(SYS2), [SYS2, U1, A1]),
        ],
        flag=True,
    ),
    # Issue #1111: the replacement sits at the end and bubbles up as older messages go
    Case(
        "replacement system message bubbles up to index 0 and is then protected",
        3,
        [
            (add(SYS), [SYS]),
            (add(U1), [SYS, U1]),
            (add(A1), [SYS, U1, A1]),
            (add(SYS2), [U1, A1, SYS2]),
            (add(U2), [A1, SYS2, U2]),
            (add(A2), [SYS2, U2, A2]),
            (add(U3), [SYS2, A2, U3]),
        ],
    ),
    Case(
        "with the flag the replacement stays first while the window slides",
        3,
        [
            (add(SYS), [SYS]),
            (add(U1), [SYS, U1]),
            (add(A1), [SYS, U1, A1]),
            (add(SYS2), [SYS2, U1, A1]),
            (add(U2), [SYS2, A1, U2]),
        ],
        flag=True,
    ),
    Case(
        "a system message behind the head slides to index 0, then is protected",
        3,
        [
            (add(U1), [U1]),
            (add(SYS), [U1, SYS]),
            (add(A1), [U1, SYS, A1]),
            (add(U2), [SYS, A1, U2]),
            (add(A2), [SYS, U2, A2]),
        ],
    ),
    # MessageWindowChatMemoryTest.system_message_first_enabled
    Case(
        "flag inserts a later system message at index 0",
        5,
        [(add(U1), [U1]), (add(SYS), [SYS, U1]), (add(A1), [SYS, U1, A1])],
        flag=True,
    ),
    # MessageWindowChatMemoryTest.system_message_first_disabled
    Case(
        "without the flag a later system message is appended",
        5,
        [(add(U1), [U1]), (add(SYS), [U1, SYS]), (add(A1), [U1, SYS, A1])],
    ),
    # MessageWindowChatMemoryTest.system_message_first_with_message_eviction
    Case(
        "flag with eviction keeps the system message first",
        3,
        [
            (add(SYS), [SYS]),
            (add(UserMessage("Message 1")), [SYS, UserMessage("Message 1")]),
            (
                add(UserMessage("Message 2")),
                [SYS, UserMessage("Message 1"), UserMessage("Message 2")],
            ),
            (
                add(UserMessage("Message 3")),
                [SYS, UserMessage("Message 2"), UserMessage("Message 3")],
            ),
        ],
        flag=True,
    ),
    # MessageWindowChatMemoryTest.should_evict_orphan_ToolExecutionResultMessage_when_evicting_AiMessage_with_ToolExecutionRequest  # noqa: E501
    Case(
        "orphan tool result is evicted with its AI message",
        2,
        [
            (add(QUESTION), [QUESTION]),
            (add(CALL), [QUESTION, CALL]),
            (add(RESULT), [CALL, RESULT]),
            (add(ANSWER), [ANSWER]),
        ],
    ),
    # ..._when_SystemMessage_is_present
    Case(
        "orphan cascade behind a system message",
        3,
        [
            (add(CALC_SYS), [CALC_SYS]),
            (add(QUESTION), [CALC_SYS, QUESTION]),
            (add(CALL), [CALC_SYS, QUESTION, CALL]),
            (add(RESULT), [CALC_SYS, CALL, RESULT]),
            (add(ANSWER), [CALC_SYS, ANSWER]),
        ],
    ),
    # ..._when_SystemMessage_is_present_2: the cascade over-evicts (limit 2, [S, A(req), T] -> [S])
    Case(
        "orphan cascade over-evicts: limit 2, [S, A(req), T] becomes [S]",
        2,
        [
            (add(CALC_SYS), [CALC_SYS]),
            (add(QUESTION), [CALC_SYS, QUESTION]),
            (add(CALL), [CALC_SYS, CALL]),
            (add(RESULT), [CALC_SYS]),
        ],
    ),
    # ...should_evict_multiple_orphan_ToolExecutionResultMessages_when_evicting_AiMessage_with_ToolExecutionRequests  # noqa: E501
    Case(
        "all consecutive orphan results go with their AI message",
        3,
        [
            (add(QUESTION2), [QUESTION2]),
            (add(CALL2), [QUESTION2, CALL2]),
            (add(RESULT1), [QUESTION2, CALL2, RESULT1]),
            (add(RESULT2), [CALL2, RESULT1, RESULT2]),
            (add(ANSWER2), [ANSWER2]),
        ],
    ),
    # ..._when_SystemMessage_is_present (multiple)
    Case(
        "all consecutive orphan results go, behind a system message",
        4,
        [
            (add(CALC_SYS), [CALC_SYS]),
            (add(QUESTION2), [CALC_SYS, QUESTION2]),
            (add(CALL2), [CALC_SYS, QUESTION2, CALL2]),
            (add(RESULT1), [CALC_SYS, QUESTION2, CALL2, RESULT1]),
            (add(RESULT2), [CALC_SYS, CALL2, RESULT1, RESULT2]),
            (add(ANSWER2), [CALC_SYS, ANSWER2]),
        ],
    ),
    Case(
        "the cascade ignores tool ids and names",
        2,
        [(add(CALL), [CALL]), (add(STRAY_RESULT), [CALL, STRAY_RESULT]), (add(U1), [U1])],
    ),
    Case(
        "an AI message with text and requests cascades too",
        2,
        [
            (add(CALL_WITH_TEXT), [CALL_WITH_TEXT]),
            (add(RESULT), [CALL_WITH_TEXT, RESULT]),
            (add(U1), [U1]),
        ],
    ),
    Case(
        "the cascade stops at the first message that is not a tool result",
        3,
        [
            (add(CALL), [CALL]),
            (add(RESULT), [CALL, RESULT]),
            (add(U1), [CALL, RESULT, U1]),
            (add(RESULT2), [U1, RESULT2]),
        ],
    ),
    Case(
        "a tool result after an evicted user message stays",
        2,
        [
            (add(U1), [U1]),
            (add(RESULT), [U1, RESULT]),
            (add(U2), [RESULT, U2]),
            (add(A1), [U2, A1]),
        ],
    ),
    Case(
        "a tool result after an evicted AI message without requests stays",
        2,
        [(add(A1), [A1]), (add(RESULT), [A1, RESULT]), (add(U1), [RESULT, U1])],
    ),
    Case(
        "an AI message with unanswered requests is kept until evicted itself",
        3,
        [
            (add(U1), [U1]),
            (add(CALL), [U1, CALL]),
            (add(U2), [U1, CALL, U2]),
            (add(A1), [CALL, U2, A1]),
            (add(A2), [U2, A1, A2]),
        ],
    ),
    Case(
        "tool results already at the head are not cleaned up",
        3,
        [
            (set_to(RESULT, U1), [RESULT, U1]),
            (add(A1), [RESULT, U1, A1]),
            (add(A2), [U1, A1, A2]),
        ],
    ),
    # MessageWindowChatMemoryTest.set_with_varargs_should_not_throw_when_eviction_is_needed
    Case(
        "set over capacity is trimmed by the normal eviction",
        2,
        [
            (
                set_to(UserMessage("m1"), UserMessage("m2"), UserMessage("m3")),
                [UserMessage("m2"), UserMessage("m3")],
            )
        ],
    ),
    Case(
        "set applies no system rules: duplicates and order are kept, even with the flag",
        5,
        [(set_to(U1, SYS, SYS, SYS2), [U1, SYS, SYS, SYS2])],
        flag=True,
    ),
    Case(
        "set: only the system message at index 0 is protected",
        3,
        [(set_to(SYS, SYS2, U1, U2), [SYS, U1, U2])],
    ),
    Case("set: eviction cascades to orphan results", 2, [(set_to(CALL, RESULT, U1), [U1])]),
    Case("set: the cascade can over-evict", 2, [(set_to(CALC_SYS, CALL, RESULT), [CALC_SYS])]),
    Case(
        "set replaces the content and adds continue from it",
        3,
        [(add(U1), [U1]), (add(A1), [U1, A1]), (set_to(U2), [U2]), (add(A2), [U2, A2])],
    ),
    Case(
        "set to an empty list empties the memory",
        3,
        [(add(U1), [U1]), (set_to(), []), (add(A1), [A1])],
    ),
    Case(
        "after set, dedup compares with the FIRST system message only",
        5,
        [
            (set_to(SYS, SYS2, U1), [SYS, SYS2, U1]),
            (add(SYS, events=0), [SYS, SYS2, U1]),
            (add(SYS2), [SYS2, U1, SYS2]),
            (add(SYS2, events=0), [SYS2, U1, SYS2]),
        ],
    ),
    Case(
        "after set, a replacement removes only the first system message (flag)",
        5,
        [(set_to(SYS, SYS2, U1), [SYS, SYS2, U1]), (add(SYS2), [SYS2, SYS2, U1])],
        flag=True,
    ),
    Case(
        "clear, then the same system message is added again",
        3,
        [
            (add(SYS), [SYS]),
            (add(U1), [SYS, U1]),
            (clear(), []),
            (add(SYS), [SYS]),
            (add(U2), [SYS, U2]),
        ],
    ),
    Case(
        "add(m1, m2, m3) is one full add cycle per message",
        2,
        [(add(U1, A1, U2), [A1, U2]), (add(A2), [U2, A2])],
    ),
    Case(
        "add(list) is one full add cycle per message",
        2,
        [(Step("add", ([U1, A1, U2],), 3), [A1, U2])],
    ),
    Case(
        "a batch skips a duplicate system message without an event",
        3,
        [(add(SYS, U1, SYS, events=2), [SYS, U1])],
    ),
    Case(
        "a batch replacing the system message behaves like single adds",
        3,
        [(add(SYS, U1, SYS2, A1), [U1, SYS2, A1])],
    ),
    Case(
        "add() and add([]) are no-ops",
        3,
        [(add(U1), [U1]), (add(), [U1]), (Step("add", ([],), 0), [U1])],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.rule for case in CASES])
def test_window_rules(case: Case, store: Any) -> None:
    play(window(case.limit, store, flag=case.flag), case.steps)


# --- Identity, history, as_of -------------------------------------------------------------------


def test_id_defaults_to_default_and_is_kept() -> None:
    # MessageWindowChatMemoryTest.id
    assert MessageWindowChatMemory.with_max_messages(1).id == "default"
    assert window(1, memory_id="abc").id == "abc"


def test_with_max_messages_has_its_own_store() -> None:
    first = MessageWindowChatMemory.with_max_messages(3)
    second = MessageWindowChatMemory.with_max_messages(3)
    first.add(U1)
    assert first.messages() == [U1]
    assert second.messages() == []
    assert second.history() == []


def test_history_records_every_operation_in_order(store: Any) -> None:
    memory = window(2, store)
    memory.add(U1)
    memory.add(A1)
    memory.add(U2)  # evicts U1 from the window, not from history
    memory.set([U3, A3, SYS])
    memory.clear()

    history = memory.history()
    # Check kinds and gapless seqs
    assert [e.kind for e in history] == [
        "message_added",
        "message_added",
        "message_added",
        "messages_set",
        "memory_cleared",
    ]
    assert [e.seq for e in history] == [1, 2, 3, 4, 5]
    # Check evicted messages stay in history
    assert [e.message for e in history[:3]] == [U1, A1, U2]
    # Check set keeps the FULL list, not the trimmed window
    assert list(history[3].messages or ()) == [U3, A3, SYS]
    assert memory.as_of(seq=4) == [A3, SYS]
    # Check timestamps are aware UTC and never go back
    for event in history:
        assert event.recorded_at.utcoffset() == timedelta(0)
    stamps = [e.recorded_at for e in history]
    assert stamps == sorted(stamps)


def test_duplicate_system_message_is_not_recorded(store: Any) -> None:
    memory = window(3, store)
    memory.add(SYS)
    memory.add(SYS)
    memory.add(SystemMessage("You are a helpful assistant"))
    assert [e.kind for e in memory.history()] == ["message_added"]


def test_as_of_replays_every_past_state(store: Any) -> None:
    memory = window(3, store)
    shown = []
    for message in [SYS, *a_conversation(6)]:
        memory.add(message)
        shown.append(memory.messages())
    memory.set([U1, U2])
    shown.append(memory.messages())
    memory.clear()
    shown.append(memory.messages())
    assert [memory.as_of(seq=k) for k in range(1, len(shown) + 1)] == shown
    assert shown[-1] == []
    assert shown[-3][0] == SYS  # the system message survived six adds through a window of 3


def test_messages_returns_a_fresh_list_every_call() -> None:
    memory = window(3)
    memory.add(U1)
    memory.add(A1)
    first = memory.messages()
    second = memory.messages()
    assert first == second
    assert first is not second
    first.append(U2)
    second.clear()
    assert memory.messages() == [U1, A1]
    assert len(memory.history()) == 2


def test_set_does_not_alias_or_mutate_the_callers_list() -> None:
    # MessageWindowChatMemoryTest.set_with_list_should_not_mutate_or_alias_the_caller_provided_list
    memory = window(2)
    callers = [UserMessage("a1"), UserMessage("a2"), UserMessage("a3")]
    memory.set(callers)
    assert callers == [UserMessage("a1"), UserMessage("a2"), UserMessage("a3")]
    assert memory.messages() == [UserMessage("a2"), UserMessage("a3")]
    callers.append(UserMessage("a4-injected"))
    assert memory.messages() == [UserMessage("a2"), UserMessage("a3")]
    assert list(memory.history()[0].messages or ()) == [
        UserMessage("a1"),
        UserMessage("a2"),
        UserMessage("a3"),
    ]


def test_set_accepts_varargs_and_a_list_alike() -> None:
    by_args = window(3)
    by_list = window(3)
    by_args.set(U1, A1)
    by_list.set([U1, A1])
    assert by_args.messages() == by_list.messages() == [U1, A1]


def test_custom_message_is_kept_like_any_other() -> None:
    custom = CustomMessage(attributes={"k": "v"})
    memory = window(2)
    memory.add(custom)
    memory.add(U1)
    assert memory.messages() == [custom, U1]
    memory.add(A1)
    assert memory.messages() == [U1, A1]


# --- Validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -1])
def test_max_messages_must_be_positive(limit: int) -> None:
    with pytest.raises(ValueError) as error:
        window(limit)
    assert str(error.value) == f"max_messages must be greater than zero, but is: {limit}"


def test_max_messages_none_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"^max_messages must be greater than zero, but is: "):
        window(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -3, None])
def test_dynamic_max_messages_is_checked_at_construction(value: int | None) -> None:
    with pytest.raises(ValueError, match=r"^max_messages must be greater than zero, but is: "):
        window(lambda _id: value)


def test_dynamic_max_messages_turning_invalid_fails_every_call_and_writes_nothing(
    store: Any,
) -> None:
    limit = [3]
    memory = window(lambda _id: limit[0], store)
    memory.add(U1)
    before = memory.history()

    limit[0] = 0
    expected = "max_messages must be greater than zero, but is: 0"
    with pytest.raises(ValueError) as on_read:
        memory.messages()
    assert str(on_read.value) == expected
    with pytest.raises(ValueError) as on_add:
        memory.add(A1)
    assert str(on_add.value) == expected
    with pytest.raises(ValueError) as on_set:
        memory.set([A1])
    assert str(on_set.value) == expected
    with pytest.raises(ValueError):
        memory.add(SYS)
    assert memory.history() == before

    # Check clear does not consult the limit (LC4j: clear() is deleteMessages only)
    memory.clear()
    assert [e.kind for e in memory.history()] == ["message_added", "memory_cleared"]
    limit[0] = 3
    assert memory.messages() == []


BAD_ELEMENTS = [None, "hello", {"type": "USER", "text": "hi"}, 42]


@pytest.mark.parametrize("bad", BAD_ELEMENTS, ids=repr)
def test_add_rejects_a_non_message_and_writes_nothing(bad: Any, store: Any) -> None:
    memory = window(3, store)
    memory.add(U1)
    with pytest.raises((TypeError, ValueError)):
        memory.add(bad)
    assert len(memory.history()) == 1
    assert memory.messages() == [U1]


@pytest.mark.parametrize("bad", BAD_ELEMENTS, ids=repr)
@pytest.mark.parametrize(
    "call",
    [
        lambda m, bad: m.add(A1, bad, U2),
        lambda m, bad: m.add(bad, A1),
        lambda m, bad: m.add(A1, U2, bad),
        lambda m, bad: m.add([A1, bad, U2]),
    ],
    ids=["varargs-middle", "varargs-first", "varargs-last", "list"],
)
def test_a_batch_with_one_bad_element_writes_nothing(
    call: Callable[[Any, Any], None], bad: Any, store: Any
) -> None:
    memory = window(3, store)
    memory.add(U1)
    with pytest.raises((TypeError, ValueError)):
        call(memory, bad)
    assert [e.message for e in memory.history()] == [U1]
    assert memory.messages() == [U1]


def test_set_without_arguments_is_an_error() -> None:
    memory = window(3)
    memory.add(U1)
    with pytest.raises(ValueError):
        memory.set()
    assert memory.messages() == [U1]
    assert len(memory.history()) == 1


@pytest.mark.parametrize("bad", BAD_ELEMENTS, ids=repr)
def test_set_with_a_bad_element_writes_nothing(bad: Any) -> None:
    # Derived: chatledger validates add() elements; set() must not let the same garbage in.
    memory = window(3)
    memory.add(U1)
    with pytest.raises((TypeError, ValueError)):
        memory.set([A1, bad])
    assert memory.messages() == [U1]
    assert len(memory.history()) == 1


# --- Dynamic limits -----------------------------------------------------------------------------


def test_dynamic_max_messages_can_change_for_same_id(store: Any) -> None:
    # MessageWindowChatMemoryTest.dynamic_max_messages_can_change_for_same_id
    limit = [3]
    memory = window(lambda _id: limit[0], store, memory_id="same-id")
    a, b, c, d, e = (UserMessage(t) for t in "ABCDE")
    for message in (a, b, c):
        memory.add(message)
    assert memory.messages() == [a, b, c]
    memory.add(d)
    assert memory.messages() == [b, c, d]

    limit[0] = 5
    memory.add(e)
    assert memory.messages() == [b, c, d, e]  # growth does not bring back a

    limit[0] = 2
    events = len(memory.history())
    assert memory.messages() == [d, e]
    assert len(memory.history()) == events  # a read never writes


def test_a_shrink_seen_only_by_reads_is_undone_by_growth() -> None:
    # §1.3: messages() trims a copy and never writes, so nothing was evicted for good yet.
    limit = [4]
    memory = window(lambda _id: limit[0])
    for message in (U1, A1, U2, A2):
        memory.add(message)
    limit[0] = 2
    assert memory.messages() == [U2, A2]
    limit[0] = 4
    assert memory.messages() == [U1, A1, U2, A2]


def test_growth_never_resurrects_a_message_evicted_by_a_write(store: Any) -> None:
    limit = [4]
    memory = window(lambda _id: limit[0], store)
    for message in (U1, A1, U2, A2):
        memory.add(message)
    limit[0] = 2
    memory.add(U3)  # writes the trimmed window: [A2, U3]
    assert memory.messages() == [A2, U3]
    limit[0] = 10
    assert memory.messages() == [A2, U3]
    memory.add(A3)
    assert memory.messages() == [A2, U3, A3]
    # Check history still has everything
    assert [e.message for e in memory.history()] == [U1, A1, U2, A2, U3, A3]


def test_set_under_a_shrunk_limit_evicts_for_good() -> None:
    limit = [2]
    memory = window(lambda _id: limit[0])
    memory.set([U1, A1, U2])
    limit[0] = 5
    assert memory.messages() == [A1, U2]
    assert list(memory.history()[0].messages or ()) == [U1, A1, U2]


def test_duplicate_system_message_under_a_shrunk_limit_writes_nothing() -> None:
    # §1.4 step 2: the dedup returns before anything is written, even if the read trimmed.
    limit = [3]
    memory = window(lambda _id: limit[0])
    for message in (SYS, U1, A1):
        memory.add(message)
    limit[0] = 2
    memory.add(SYS)
    assert len(memory.history()) == 3
    assert memory.messages() == [SYS, A1]
    limit[0] = 3
    assert memory.messages() == [SYS, U1, A1]


def test_add_trims_with_the_current_limit_before_the_system_rules() -> None:
    # §1.4 step 1: the system rules see the window already trimmed by the current limit.
    limit = [4]
    memory = window(lambda _id: limit[0])
    memory.set([U1, SYS, SYS2, A1])
    limit[0] = 2
    assert memory.messages() == [SYS, A1]  # U1 goes, then SYS2 at index 1
    memory.add(SYS2)  # the first system message of the TRIMMED window is SYS: replaced
    assert memory.messages() == [A1, SYS2]
    # Checked against the untrimmed list it would have been [SYS2, SYS2]


@pytest.mark.parametrize("memory_id", ["user-7", 42, ("alice", "session-1")], ids=repr)
def test_dynamic_max_messages_is_asked_with_the_memory_id(memory_id: Any) -> None:
    asked: list[Any] = []

    def provider(asked_for: Any) -> int:
        asked.append(asked_for)
        return 2

    memory = window(provider, memory_id=memory_id)
    assert memory.id == memory_id
    memory.add(U1)
    memory.messages()
    memory.set([A1])
    assert asked
    assert all(a == memory_id for a in asked)


def test_dynamic_max_messages_per_id_on_one_store(store: Any) -> None:
    # MessageWindowChatMemoryTest.dynamic_max_messages_behavior (here all ids share ONE store)
    def per_id(memory_id: Any) -> int:
        return {"short": 2, "long": 4}.get(memory_id, 3)

    short = window(per_id, store, memory_id="short")
    long = window(per_id, store, memory_id="long")
    other = window(per_id, store, memory_id="other")
    a, b, c = (UserMessage(t) for t in "abc")
    m1, m2, m3, m4, m5 = (UserMessage(t) for t in "12345")
    x, y, z, w = (UserMessage(t) for t in "xyzw")

    for message in (a, b, c):
        short.add(message)
    assert short.messages() == [b, c]
    for message in (m1, m2, m3, m4, m5):
        long.add(message)
    assert long.messages() == [m2, m3, m4, m5]
    for message in (x, y, z, w):
        other.add(message)
    assert other.messages() == [y, z, w]

    short.clear()
    assert short.messages() == []
    assert long.messages() == [m2, m3, m4, m5]
    assert other.messages() == [y, z, w]


# --- Shared store -------------------------------------------------------------------------------


def test_two_memories_on_one_store_and_id_share_state(store: Any) -> None:
    first = window(2, store)
    second = window(2, store)
    first.add(U1)
    assert second.messages() == [U1]
    second.add(A1)
    assert first.messages() == [U1, A1]
    first.add(U2)  # continues from second's add: U1 goes
    assert second.messages() == [A1, U2]
    second.add(SYS)
    first.add(SYS)  # the duplicate is seen through the other object
    assert [e.seq for e in first.history()] == [1, 2, 3, 4]
    assert first.messages() == second.messages() == [U2, SYS]


def test_ids_on_one_store_are_isolated(store: Any) -> None:
    alice = window(3, store, memory_id="alice")
    bob = window(3, store, memory_id="bob")
    alice.add(SYS)
    bob.add(SYS2)
    alice.add(U1)
    assert alice.messages() == [SYS, U1]
    assert bob.messages() == [SYS2]
    assert [e.seq for e in bob.history()] == [1]


def test_an_evicted_message_stays_out_for_a_memory_with_a_larger_limit(store: Any) -> None:
    # LC4j: the store holds the trimmed list, so a second memory on it cannot see U1 again.
    small = window(2, store)
    for message in (U1, A1, U2):
        small.add(message)
    large = window(10, store)
    assert large.messages() == [A1, U2]
    large.add(A2)
    assert large.messages() == [A1, U2, A2]


# --- Model-based: random operations against a transcription of LangChain4j ----------------------


def _lc4j_trim(messages: list[Any], limit: int) -> None:
    """MessageWindowChatMemory.ensureCapacity (§1.5), transcribed."""
    while len(messages) > limit:
        index = 1 if isinstance(messages[0], SystemMessage) else 0
        evicted = messages.pop(index)
        if isinstance(evicted, AiMessage) and evicted.tool_execution_requests:
            while len(messages) > index and isinstance(messages[index], ToolExecutionResultMessage):
                messages.pop(index)


class Lc4jMessageWindow:
    """The store-backed LangChain4j memory: the reference the projection must match."""

    def __init__(self, limit: int, flag: bool) -> None:
        self.limit = limit
        self.flag = flag
        self.stored: list[Any] = []

    def messages(self) -> list[Any]:
        shown = list(self.stored)
        _lc4j_trim(shown, self.limit)
        return shown

    def add(self, message: Any) -> bool:
        shown = self.messages()
        if isinstance(message, SystemMessage):
            first = next((m for m in shown if isinstance(m, SystemMessage)), None)
            if first is not None:
                if first == message:
                    return False
                shown.remove(first)
        if isinstance(message, SystemMessage) and self.flag:
            shown.insert(0, message)
        else:
            shown.append(message)
        _lc4j_trim(shown, self.limit)
        self.stored = shown
        return True

    def set(self, messages: list[Any]) -> None:
        self.stored = list(messages)
        _lc4j_trim(self.stored, self.limit)

    def clear(self) -> None:
        self.stored = []


POOL = [SYS, SYS2, CALC_SYS, U1, U2, A1, CALL, CALL2, CALL_WITH_TEXT, RESULT, RESULT2, STRAY_RESULT]
OPERATIONS = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(POOL)),
    st.tuples(st.just("set"), st.lists(st.sampled_from(POOL), max_size=6)),
    st.tuples(st.just("clear"), st.none()),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    limit=st.integers(min_value=1, max_value=5),
    flag=st.booleans(),
    operations=st.lists(OPERATIONS, max_size=14),
)
def test_matches_langchain4j_on_random_operations(
    limit: int, flag: bool, operations: list[tuple[str, Any]]
) -> None:
    memory = window(limit, flag=flag)
    reference = Lc4jMessageWindow(limit, flag)
    states: list[list[Any]] = []
    for op, arg in operations:
        if op == "add":
            wrote = reference.add(arg)
            memory.add(arg)
        elif op == "set":
            reference.set(arg)
            wrote = True
            memory.set(list(arg))
        else:
            reference.clear()
            wrote = True
            memory.clear()
        shown = memory.messages()
        assert shown == reference.messages(), f"after {op} {arg!r}"
        assert len(shown) <= limit
        if wrote:
            states.append(shown)
        assert len(memory.history()) == len(states)
    assert [memory.as_of(seq=k) for k in range(1, len(states) + 1)] == states
