"""TokenWindowChatMemory must show exactly what LangChain4j's TokenWindowChatMemory shows.

The definition is §1 (and §4 for the counts) of shared/reference/langchain4j-semantics.md.
Scenarios ported from LangChain4j's ``TokenWindowChatMemoryTest`` name the Java test they come
from. Java's ``userMessageWithTokens(n)`` makes equal messages for equal ``n``; here every
message has its own word so no two are equal by accident. Token counts are computed in this
module straight from tiktoken (the oracle), independently of the estimator under test, and
pinned against the estimator in ``test_the_counts_the_scenarios_rely_on``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
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
from projections import OpenAiTokenCountEstimator, TokenWindowChatMemory
from tests.factories import Step, add, clear, play, set_to
from tests.projections.tiktoken_oracle import tiktoken_encoding

O200K = tiktoken_encoding("o200k_base")
PER_MESSAGE = 4  # 1 for the role + 3 per-message overhead (§4.3)
PRIMING = 3  # every reply is primed with <|start|>assistant<|message|> (§4.4)


def text_with_tokens(word: str, n: int) -> str:
    """``n`` repetitions of a one-token word: exactly ``n`` tokens in o200k and cl100k."""
    return " ".join([word] * n)


def user(word: str, tokens: int) -> UserMessage:
    """A user message the OpenAI estimator counts as ``tokens``."""
    return UserMessage(text_with_tokens(word, tokens - PER_MESSAGE))


def ai(word: str, tokens: int) -> AiMessage:
    return AiMessage(text_with_tokens(word, tokens - PER_MESSAGE))


def system(word: str, tokens: int) -> SystemMessage:
    return SystemMessage(text_with_tokens(word, tokens - PER_MESSAGE))


WORDS = ["apple", "banana", "pear", "berry", "lime", "fig", "date", "red", "blue", "green"]

# --- Messages (token counts per gpt-4o-mini in comments) ----------------------------------------

U10A, A10B, U10C, A10D, U10E = (
    user("apple", 10),
    ai("banana", 10),
    user("pear", 10),
    ai("berry", 10),
    user("lime", 10),
)
S10 = system("fig", 10)
U5 = user("date", 5)
U5B = user("red", 5)
U5C = user("blue", 5)
S30 = system("green", 30)
U30 = user("apple", 30)
SYS = SystemMessage("You are a helpful assistant")  # 9
SYS2 = SystemMessage("You are an unhelpful assistant")  # 11

CALC_SYS = SystemMessage("Use calculator for math questions")  # 9
QUESTION = UserMessage("How much is 2+2?")  # 12
REQ1 = ToolExecutionRequest(id="1", name="calculator", arguments='{ "a": 2, "b": 2 }')
REQ2 = ToolExecutionRequest(id="2", name="calculator", arguments='{ "a": 3, "b": 3 }')
CALL = AiMessage(tool_execution_requests=[REQ1])  # 24
RESULT = ToolExecutionResultMessage.from_request(REQ1, "4")  # 5
ANSWER = AiMessage("2 + 2 = 4")  # 11
QUESTION2 = UserMessage("How much is 2+2 and 3+3?")  # 17
CALL2 = AiMessage(tool_execution_requests=[REQ1, REQ2])  # 57
RESULT1 = ToolExecutionResultMessage.from_request(REQ1, "4")  # 5
RESULT2 = ToolExecutionResultMessage.from_request(REQ2, "6")  # 5
ANSWER2 = AiMessage("2 + 2 = 4, 3 + 3 = 6")  # 20


def oracle_count(message: Any) -> int:
    """§4.3 for the message shapes used in this module, computed from tiktoken directly."""
    for known, count in ORACLE_COUNTS:
        if known == message:
            return count
    msg = f"no oracle count for {message!r}; add it to ORACLE_COUNTS"
    raise AssertionError(msg)


def _t(text: str) -> int:
    return len(O200K.encode_ordinary(text))


ORACLE_COUNTS: list[tuple[Any, int]] = [
    *((m, 10) for m in (U10A, A10B, U10C, A10D, U10E, S10)),
    *((m, 5) for m in (U5, U5B, U5C)),
    (S30, 30),
    (U30, 30),
    (SYS, PER_MESSAGE + _t("You are a helpful assistant")),
    (SYS2, PER_MESSAGE + _t("You are an unhelpful assistant")),
    (CALC_SYS, PER_MESSAGE + _t("Use calculator for math questions")),
    (QUESTION, PER_MESSAGE + _t("How much is 2+2?")),
    # one request: +6 -1 + 2*tokens(name) + tokens(arguments)
    (CALL, PER_MESSAGE + 6 - 1 + 2 * _t("calculator") + _t('{ "a": 2, "b": 2 }')),
    (RESULT, PER_MESSAGE + _t("4")),
    (RESULT2, PER_MESSAGE + _t("6")),
    (ANSWER, PER_MESSAGE + _t("2 + 2 = 4")),
    (QUESTION2, PER_MESSAGE + _t("How much is 2+2 and 3+3?")),
    # two requests: +6 +15, per request 7 + tokens(name) + per JSON entry 2 + key + value
    (
        CALL2,
        PER_MESSAGE + 6 + 15 + 2 * (7 + _t("calculator") + 2 * (2 + _t("a") + _t("2"))),
    ),
    (ANSWER2, PER_MESSAGE + _t("2 + 2 = 4, 3 + 3 = 6")),
]


_ESTIMATORS: dict[str, OpenAiTokenCountEstimator] = {}


def estimator(model: str = "gpt-4o-mini") -> OpenAiTokenCountEstimator:
    if model not in _ESTIMATORS:
        _ESTIMATORS[model] = OpenAiTokenCountEstimator(model)
    return _ESTIMATORS[model]


def window(
    limit: int | Callable[[Any], int | None],
    store: Any = None,
    *,
    flag: bool = False,
    model: str = "gpt-4o-mini",
    memory_id: Any = "user-1",
    counter: Any = None,
) -> TokenWindowChatMemory:
    return TokenWindowChatMemory(
        id=memory_id,
        max_tokens=limit,
        token_count_estimator=estimator(model) if counter is None else counter,
        store=InMemoryEventStore() if store is None else store,
        always_keep_system_message_first=flag,
    )


# --- Preconditions ------------------------------------------------------------------------------


@pytest.mark.parametrize("word", WORDS)
@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_words_are_one_token_each(word: str, encoding: str) -> None:
    enc = tiktoken_encoding(encoding)
    for n in (1, 6, 26):
        assert len(enc.encode_ordinary(text_with_tokens(word, n))) == n


def test_the_counts_the_scenarios_rely_on() -> None:
    # Pinned by LangChain4j's TokenWindowChatMemoryTest (gpt-4o-mini)
    expected = {
        "QUESTION": (QUESTION, 12),
        "CALL": (CALL, 24),
        "RESULT": (RESULT, 5),
        "ANSWER": (ANSWER, 11),
        "CALC_SYS": (CALC_SYS, 9),
        "QUESTION2": (QUESTION2, 17),
        "CALL2": (CALL2, 57),
        "ANSWER2": (ANSWER2, 20),
    }
    for name, (message, count) in expected.items():
        assert oracle_count(message) == count, name
    counter = estimator()
    for message, count in ORACLE_COUNTS:
        assert counter.estimate_token_count_in_message(message) == count, message
    assert counter.estimate_token_count_in_messages([QUESTION]) == PRIMING + 12
    assert counter.estimate_token_count_in_messages([QUESTION, CALL, RESULT]) == PRIMING + 41
    # "o" models subtract one from the list count (§4.4)
    assert estimator("o3-mini").estimate_token_count_in_messages([U10A]) == 12


# --- Scenario table -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    rule: str
    limit: int
    steps: list[tuple[Step, list[Any]]]
    flag: bool = False
    model: str = "gpt-4o-mini"


HELLO, WORLD, BANANA = UserMessage("hello"), UserMessage("world"), UserMessage("banana")

CASES = [
    # TokenWindowChatMemoryTest.store_and_clear: limit = 3 + m1 + m2 (5 + 5)
    Case(
        "store and clear, clear twice",
        PRIMING + 5 + 5,
        [
            (add(HELLO), [HELLO]),
            (add(WORLD), [HELLO, WORLD]),
            (add(BANANA), [WORLD, BANANA]),
            (clear(), []),
            (clear(), []),
        ],
    ),
    # TokenWindowChatMemoryTest.should_keep_specified_number_of_tokens_in_chat_memory
    Case(
        "sliding eviction; total == max fits",
        33,
        [
            (add(U10A), [U10A]),
            (add(A10B), [U10A, A10B]),
            (add(U10C), [U10A, A10B, U10C]),  # 3 + 30 == 33: fits (strict >)
            (add(A10D), [A10B, U10C, A10D]),
        ],
    ),
    Case(
        "one token over the limit evicts",
        32,
        [(add(U10A), [U10A]), (add(A10B), [U10A, A10B]), (add(U10C), [A10B, U10C])],
    ),
    Case(
        "the +3 priming counts: limit == sum of the messages evicts",
        20,
        [(add(U10A), [U10A]), (add(A10B), [A10B])],
    ),
    Case(
        "o models count one less: 2 + 20 fits a limit of 22",
        22,
        [(add(U10A), [U10A]), (add(A10B), [U10A, A10B]), (add(U10C), [A10B, U10C])],
        model="o3-mini",
    ),
    Case(
        "o models: 2 + 20 does not fit 21",
        21,
        [(add(U10A), [U10A]), (add(A10B), [A10B])],
        model="o3-mini",
    ),
    # TokenWindowChatMemoryTest.should_not_evict_system_message_from_chat_memory
    Case(
        "system message at index 0 is never evicted",
        33,
        [
            (add(S10), [S10]),
            (add(U10A), [S10, U10A]),
            (add(A10B), [S10, U10A, A10B]),
            (add(U10C), [S10, A10B, U10C]),
            (add(A10D), [S10, U10C, A10D]),
        ],
    ),
    # TokenWindowChatMemoryTest.should_keep_only_the_latest_system_message_in_chat_memory
    Case(
        "replacement system message goes to the end",
        40,
        [
            (add(SYS), [SYS]),
            (add(U10A), [SYS, U10A]),
            (add(A10B), [SYS, U10A, A10B]),
            (add(SYS2), [U10A, A10B, SYS2]),
        ],
    ),
    Case(
        "replacement system message goes first with the flag",
        40,
        [
            (add(SYS), [SYS]),
            (add(U10A), [SYS, U10A]),
            (add(A10B), [SYS, U10A, A10B]),
            (add(SYS2), [SYS2, U10A, A10B]),
        ],
        flag=True,
    ),
    Case(
        "replacement bubbles up to index 0, then is protected",
        33,
        [
            (add(S10), [S10]),
            (add(U10A), [S10, U10A]),
            (add(A10B), [S10, U10A, A10B]),
            (add(SYS2), [A10B, SYS2]),  # 3+10+10+11 = 34 > 33: U10A goes
            (add(U10C), [SYS2, U10C]),  # 3+10+11+10 = 34: A10B goes, SYS2 is now first
            (add(A10D), [SYS2, A10D]),
        ],
    ),
    # TokenWindowChatMemoryTest.should_not_add_the_same_system_message_to_chat_memory_if_it_is_already_there  # noqa: E501
    Case(
        "the same system message again appends no event",
        33,
        [
            (add(S10), [S10]),
            (add(U10A), [S10, U10A]),
            (add(A10B), [S10, U10A, A10B]),
            (add(S10, events=0), [S10, U10A, A10B]),
        ],
    ),
    # TokenWindowChatMemoryTest.should_evict_orphan_ToolExecutionResultMessage_when_evicting_AiMessage_with_ToolExecutionRequest  # noqa: E501
    Case(
        "orphan tool result is evicted with its AI message",
        39,
        [
            (add(QUESTION), [QUESTION]),  # 15
            (add(CALL), [QUESTION, CALL]),  # 39
            (add(RESULT), [CALL, RESULT]),  # 32
            (add(ANSWER), [ANSWER]),  # 14
        ],
    ),
    # ..._when_SystemMessage_is_present
    Case(
        "orphan cascade behind a system message",
        48,
        [
            (add(CALC_SYS), [CALC_SYS]),  # 12
            (add(QUESTION), [CALC_SYS, QUESTION]),  # 24
            (add(CALL), [CALC_SYS, QUESTION, CALL]),  # 48
            (add(RESULT), [CALC_SYS, CALL, RESULT]),  # 41
            (add(ANSWER), [CALC_SYS, ANSWER]),  # 23
        ],
    ),
    # ..._when_SystemMessage_is_present_2
    Case(
        "orphan cascade over-evicts down to the system message",
        36,
        [
            (add(CALC_SYS), [CALC_SYS]),
            (add(QUESTION), [CALC_SYS, QUESTION]),
            (add(CALL), [CALC_SYS, CALL]),  # 36
            (add(RESULT), [CALC_SYS]),  # 12
        ],
    ),
    # ...should_evict_multiple_orphan_ToolExecutionResultMessages_when_evicting_AiMessage_with_ToolExecutionRequests  # noqa: E501
    Case(
        "all consecutive orphan results go with their AI message",
        82,
        [
            (add(QUESTION2), [QUESTION2]),  # 20
            (add(CALL2), [QUESTION2, CALL2]),  # 77
            (add(RESULT1), [QUESTION2, CALL2, RESULT1]),  # 82
            (add(RESULT2), [CALL2, RESULT1, RESULT2]),  # 70
            (add(ANSWER2), [ANSWER2]),  # 23
        ],
    ),
    # ..._when_SystemMessage_is_present (multiple)
    Case(
        "all consecutive orphan results go, behind a system message",
        91,
        [
            (add(CALC_SYS), [CALC_SYS]),  # 12
            (add(QUESTION2), [CALC_SYS, QUESTION2]),  # 29
            (add(CALL2), [CALC_SYS, QUESTION2, CALL2]),  # 86
            (add(RESULT1), [CALC_SYS, QUESTION2, CALL2, RESULT1]),  # 91
            (add(RESULT2), [CALC_SYS, CALL2, RESULT1, RESULT2]),  # 79
            (add(ANSWER2), [CALC_SYS, ANSWER2]),  # 32
        ],
    ),
    Case(
        "a tool result after an evicted user message stays",
        3 + 12 + 5,
        [(add(QUESTION), [QUESTION]), (add(RESULT), [QUESTION, RESULT]), (add(U5), [RESULT, U5])],
    ),
    # TokenWindowChatMemoryTest.should_work_even_if_the_first_message_exceeds_max_tokens
    Case(
        "a message larger than the limit is evicted whole: the memory is empty",
        2,
        [
            (add(user("apple", 25)), []),
            (add(ai("banana", 10)), []),
            (add(user("pear", 25)), []),
            (add(ai("berry", 10)), []),
        ],
        model="gpt-3.5-turbo",
    ),
    Case(
        "an oversized newcomer evicts everything, itself included",
        20,
        [(add(U5), [U5]), (add(U5B), [U5, U5B]), (add(U30), []), (add(U5C), [U5C])],
    ),
    # TokenWindowChatMemoryTest.should_not_fail_even_with_just_system_message
    Case(
        "a lone system message over the limit is kept",
        2,
        [(add(system("apple", 10)), [system("apple", 10)])],
        model="gpt-3.5-turbo",
    ),
    Case(
        "[System(big), X]: X is evicted, the system message stays",
        20,
        [
            (add(S30), [S30]),
            (add(U5), [S30]),
            (add(S30, events=0), [S30]),
            (add(SYS), [SYS]),  # replacement: the big one is removed, 12 fits
            (add(U5B), [SYS, U5B]),
        ],
    ),
    # TokenWindowChatMemoryTest.system_message_first_enabled
    Case(
        "flag inserts a later system message at index 0",
        100,
        [(add(U10A), [U10A]), (add(S10), [S10, U10A]), (add(A10B), [S10, U10A, A10B])],
        flag=True,
    ),
    # TokenWindowChatMemoryTest.system_message_first_disabled
    Case(
        "without the flag a later system message is appended",
        100,
        [(add(U10A), [U10A]), (add(S10), [U10A, S10]), (add(A10B), [U10A, S10, A10B])],
    ),
    # TokenWindowChatMemoryTest.system_message_first_with_message_eviction
    Case(
        "flag with eviction keeps the system message first",
        35,
        [
            (add(S10), [S10]),
            (add(U10A), [S10, U10A]),
            (add(U10C), [S10, U10A, U10C]),
            (add(U10E), [S10, U10C, U10E]),
        ],
        flag=True,
    ),
    # TokenWindowChatMemoryTest.set_with_varargs_should_not_throw_when_eviction_is_needed
    Case(
        "set over the limit is trimmed by the normal eviction",
        25,
        [(set_to(U10A, U10C, U10E), [U10C, U10E])],
    ),
    Case(
        "set applies no system rules, even with the flag",
        100,
        [(set_to(U10A, S10, S10, SYS), [U10A, S10, S10, SYS])],
        flag=True,
    ),
    Case(
        "set: a lone system message over the limit is kept, [System(big), X] drops X",
        20,
        [(set_to(S30), [S30]), (set_to(S30, U5), [S30]), (set_to(U30), [])],
    ),
    Case(
        "set: the cascade over-evicts",
        36,
        [(set_to(CALC_SYS, CALL, RESULT), [CALC_SYS])],
    ),
    Case(
        "set: cascaded orphans leave the running total (80 - 57 - 5 - 5 = 13 fits 20)",
        20,
        [(set_to(CALL2, RESULT1, RESULT2, U10A), [U10A])],
    ),
    Case(
        "set: cascaded orphans leave the running total, behind a system message",
        20,
        [(set_to(CALC_SYS, CALL2, RESULT1, RESULT2, U5), [CALC_SYS, U5])],
    ),
    Case(
        "set: tool results at the head are not cleaned up",
        100,
        [(set_to(RESULT, U5), [RESULT, U5]), (set_to(), [])],
    ),
    Case(
        "clear, then the window refills",
        23,
        [(add(U10A), [U10A]), (clear(), []), (add(A10B), [A10B]), (add(U10C), [A10B, U10C])],
    ),
    Case(
        "add(m1, m2, m3) is one full add cycle per message",
        23,
        [(add(U10A, A10B, U10C), [A10B, U10C]), (add(), [A10B, U10C])],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.rule for case in CASES])
def test_window_rules(case: Case, store: Any) -> None:
    play(window(case.limit, store, flag=case.flag, model=case.model), case.steps)


# --- The running total (§1.6) -------------------------------------------------------------------


class SeparatorCounter:
    """A counter whose list total is NOT the sum of its message counts: 5 per message plus a
    10-token separator per message that no single-message count includes. LangChain4j counts
    the list once and then only subtracts single-message counts, so the separators of evicted
    messages stay in the running total; a re-count after each eviction would keep more."""

    def estimate_token_count_in_text(self, text: str) -> int:
        return len(text.split())

    def estimate_token_count_in_message(self, message: Any) -> int:
        return 5

    def estimate_token_count_in_messages(self, messages: Iterable[Any]) -> int:
        items = list(messages)
        return 5 * len(items) + 10 * len(items)


def test_running_total_is_decremented_not_recounted() -> None:
    m1, m2, m3, m4, m5 = (UserMessage(f"m{i}") for i in range(1, 6))
    memory = window(35, counter=SeparatorCounter())
    memory.add(m1)
    memory.add(m2)
    assert memory.messages() == [m1, m2]  # 30
    # [m1, m2, m3] = 45 > 35: evict m1 -> 40 > 35 (a recount would say 30): evict m2 -> 35
    memory.add(m3)
    assert memory.messages() == [m3]
    memory.add(m4)
    assert memory.messages() == [m3, m4]
    memory.add(m5)
    assert memory.messages() == [m5]
    assert memory.as_of(seq=3) == [m3]


def test_the_total_of_an_openai_window_includes_the_priming_after_evictions() -> None:
    # 3 + 10 + 10 + 10 = 33 > 32: one eviction brings the running total to 23, priming included,
    # so [A10B, U10C] is kept; a total without the +3 would have kept all three.
    memory = window(32)
    for message in (U10A, A10B, U10C):
        memory.add(message)
    assert memory.messages() == [A10B, U10C]
    shown = memory.messages()
    assert estimator().estimate_token_count_in_messages(shown) == 23


# --- Identity, history, fresh lists, set -------------------------------------------------------


def test_id_defaults_to_default_and_is_kept() -> None:
    # TokenWindowChatMemoryTest.id
    assert TokenWindowChatMemory.with_max_tokens(2, estimator()).id == "default"
    assert window(2, memory_id="abc").id == "abc"


def test_with_max_tokens_has_its_own_store() -> None:
    first = TokenWindowChatMemory.with_max_tokens(100, estimator("gpt-4o"))
    second = TokenWindowChatMemory.with_max_tokens(100, estimator("gpt-4o"))
    first.add(U10A)
    assert first.messages() == [U10A]
    assert second.messages() == []


def test_an_evicted_oversized_message_stays_in_history(store: Any) -> None:
    memory = window(20, store)
    memory.add(U30)
    assert memory.messages() == []
    assert [(e.kind, e.message) for e in memory.history()] == [("message_added", U30)]
    assert memory.as_of(seq=1) == []


def test_set_keeps_the_full_list_in_history_and_does_not_alias() -> None:
    # TokenWindowChatMemoryTest.set_with_list_should_not_mutate_or_alias_the_caller_provided_list
    memory = window(25)
    callers: list[Any] = [U10A, U10C, U10E]
    memory.set(callers)
    assert callers == [U10A, U10C, U10E]
    assert memory.messages() == [U10C, U10E]
    callers.append(A10B)
    assert memory.messages() == [U10C, U10E]
    (event,) = memory.history()
    assert event.kind == "messages_set"
    assert list(event.messages or ()) == [U10A, U10C, U10E]


def test_messages_returns_a_fresh_list_every_call() -> None:
    memory = window(100)
    memory.add(U10A)
    first = memory.messages()
    assert first is not memory.messages()
    first.append(A10B)
    assert memory.messages() == [U10A]


def test_set_without_arguments_is_an_error() -> None:
    memory = window(100)
    with pytest.raises(ValueError):
        memory.set()
    assert memory.history() == []


# --- Validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -1])
def test_max_tokens_must_be_positive(limit: int) -> None:
    with pytest.raises(ValueError) as error:
        window(limit)
    assert str(error.value) == f"max_tokens must be greater than zero, but is: {limit}"


@pytest.mark.parametrize("value", [0, -3, None])
def test_dynamic_max_tokens_is_checked_at_construction(value: int | None) -> None:
    with pytest.raises(ValueError, match=r"^max_tokens must be greater than zero, but is: "):
        window(lambda _id: value)


def test_max_tokens_none_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"^max_tokens must be greater than zero, but is: "):
        window(None)  # type: ignore[arg-type]


def test_an_estimator_is_required() -> None:
    with pytest.raises((TypeError, ValueError)):
        TokenWindowChatMemory(
            id="user-1",
            max_tokens=100,
            token_count_estimator=None,
            store=InMemoryEventStore(),
        )


def test_dynamic_max_tokens_turning_invalid_fails_every_call_and_writes_nothing(
    store: Any,
) -> None:
    limit = [100]
    memory = window(lambda _id: limit[0], store)
    memory.add(U10A)
    before = memory.history()
    limit[0] = -5
    expected = "max_tokens must be greater than zero, but is: -5"
    for call in (memory.messages, lambda: memory.add(A10B), lambda: memory.set([A10B])):
        with pytest.raises(ValueError) as error:
            call()
        assert str(error.value) == expected
    assert memory.history() == before


@pytest.mark.parametrize("bad", [None, "hello", {"type": "USER"}, 42], ids=repr)
def test_a_batch_with_one_bad_element_writes_nothing(bad: Any, store: Any) -> None:
    memory = window(100, store)
    memory.add(U10A)
    with pytest.raises((TypeError, ValueError)):
        memory.add(A10B, bad, U10C)
    with pytest.raises((TypeError, ValueError)):
        memory.add(bad)
    assert [e.message for e in memory.history()] == [U10A]
    assert memory.messages() == [U10A]


def test_a_message_the_estimator_cannot_count_is_not_written() -> None:
    # §4.3: OpenAiTokenCountEstimator rejects CustomMessage ("Unknown message type"), and
    # LangChain4j throws before updateMessages; a written event would poison every later read.
    memory = window(100)
    memory.add(U10A)
    with pytest.raises((TypeError, ValueError)):
        memory.add(CustomMessage(attributes={"k": "v"}))
    assert len(memory.history()) == 1
    assert memory.messages() == [U10A]


# --- Dynamic limits -----------------------------------------------------------------------------


def test_dynamic_max_tokens_can_change_for_same_id(store: Any) -> None:
    # TokenWindowChatMemoryTest.dynamic_max_tokens_can_change_for_same_id
    limit = [33]
    memory = window(lambda _id: limit[0], store, memory_id="same-id")
    for message in (U10A, A10B, U10C):
        memory.add(message)
    assert memory.messages() == [U10A, A10B, U10C]
    memory.add(A10D)
    assert memory.messages() == [A10B, U10C, A10D]

    limit[0] = 43
    memory.add(U10E)
    assert memory.messages() == [A10B, U10C, A10D, U10E]  # 43 fits; U10A stays out

    limit[0] = 33
    events = len(memory.history())
    assert memory.messages() == [U10C, A10D, U10E]
    assert len(memory.history()) == events


def test_growth_never_resurrects_a_message_evicted_by_a_write() -> None:
    limit = [43]
    memory = window(lambda _id: limit[0])
    for message in (U10A, A10B, U10C, A10D):
        memory.add(message)
    limit[0] = 23
    memory.add(U10E)
    assert memory.messages() == [A10D, U10E]
    limit[0] = 1000
    assert memory.messages() == [A10D, U10E]


def test_dynamic_max_tokens_per_id_on_one_store(store: Any) -> None:
    # TokenWindowChatMemoryTest.dynamic_max_tokens_behavior (all ids share ONE store)
    def per_id(memory_id: Any) -> int:
        return {"short": 33, "long": 60}.get(memory_id, 45)

    short = window(per_id, store, memory_id="short")
    long = window(per_id, store, memory_id="long")
    other = window(per_id, store, memory_id="other")
    for message in (U10A, A10B, U10C, A10D):
        short.add(message)
    assert short.messages() == [A10B, U10C, A10D]
    for message in (U10A, A10B, U10C, A10D, U10E):
        long.add(message)
    assert long.messages() == [U10A, A10B, U10C, A10D, U10E]
    for message in (U10A, A10B, U10C, A10D):
        other.add(message)
    assert other.messages() == [U10A, A10B, U10C, A10D]


def test_two_memories_on_one_store_and_id_share_state(store: Any) -> None:
    first = window(23, store)
    second = window(23, store)
    first.add(U10A)
    second.add(A10B)
    assert first.messages() == [U10A, A10B]
    first.add(U10C)
    assert second.messages() == [A10B, U10C]
    assert [e.seq for e in second.history()] == [1, 2, 3]


def test_a_memory_with_another_estimator_counts_with_its_own(store: Any) -> None:
    # LC4j stores messages, not counts: a reader with another estimator counts them itself.
    melons = UserMessage(text_with_tokens("melon", 20))
    assert estimator().estimate_token_count_in_message(melons) == 24
    assert estimator("gpt-3.5-turbo").estimate_token_count_in_message(melons) == 43
    writer = window(1000, store)
    writer.add(melons)
    writer.add(U10A)
    reader = window(50, store, model="gpt-3.5-turbo")
    # 3 + 43 + 10 = 56 > 50 under cl100k (the writer's o200k counts would give 37)
    assert reader.messages() == [U10A]
    assert writer.messages() == [melons, U10A]


# --- Model-based: random operations against a transcription of LangChain4j ----------------------


def _lc4j_trim(messages: list[Any], limit: int) -> None:
    """TokenWindowChatMemory.ensureCapacity (§1.6), transcribed, with the oracle's counts."""
    if not messages:
        return
    total = PRIMING + sum(oracle_count(m) for m in messages)
    while total > limit and messages:
        index = 0
        if isinstance(messages[0], SystemMessage):
            if len(messages) == 1:
                return
            index = 1
        evicted = messages.pop(index)
        total -= oracle_count(evicted)
        if isinstance(evicted, AiMessage) and evicted.tool_execution_requests:
            while len(messages) > index and isinstance(messages[index], ToolExecutionResultMessage):
                total -= oracle_count(messages.pop(index))


class Lc4jTokenWindow:
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


POOL = [m for m, _ in ORACLE_COUNTS]
OPERATIONS = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(POOL)),
    st.tuples(st.just("set"), st.lists(st.sampled_from(POOL), max_size=5)),
    st.tuples(st.just("clear"), st.none()),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    limit=st.integers(min_value=1, max_value=120),
    flag=st.booleans(),
    operations=st.lists(OPERATIONS, max_size=12),
)
def test_matches_langchain4j_on_random_operations(
    limit: int, flag: bool, operations: list[tuple[str, Any]]
) -> None:
    memory = window(limit, flag=flag)
    reference = Lc4jTokenWindow(limit, flag)
    states: list[list[Any]] = []
    for op, arg in operations:
        wrote = True
        if op == "add":
            wrote = reference.add(arg)
            memory.add(arg)
        elif op == "set":
            reference.set(arg)
            memory.set(list(arg))
        else:
            reference.stored = []
            memory.clear()
        shown = memory.messages()
        assert shown == reference.messages(), f"after {op} {arg!r}"
        # Invariant: within budget, unless only a system message is left
        if not (len(shown) == 1 and isinstance(shown[0], SystemMessage)) and shown:
            assert PRIMING + sum(oracle_count(m) for m in shown) <= limit
        if wrote:
            states.append(shown)
        assert len(memory.history()) == len(states)
    assert [memory.as_of(seq=k) for k in range(1, len(states) + 1)] == states
