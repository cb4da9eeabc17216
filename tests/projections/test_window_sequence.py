"""The window rules :func:`projections.meta.check_window_record` checks beyond structure: a
message window holds no more than its own recorded limit, and a memory's window holds its
messages in the order they were brought (a system message may be put first), nothing from
before a set or clear, nothing taken back, and no gap that eviction cannot leave.

Every window a memory writes passes (Hypothesis, on message, token and summarizing memories,
forks and pops); a re-hashed export whose window breaks a rule is refused by the import."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from eventlog import (
    AiMessage,
    InMemoryEventStore,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from eventlog.formats.jsonl import export_jsonl, import_jsonl
from eventlog.import_checks import Brought
from projections import (
    MessageWindowChatMemory,
    OpenAiTokenCountEstimator,
    SummarizingChatMemory,
    TokenWindowChatMemory,
)
from projections.audit import fork
from projections.meta import check_window_record
from tests.eventlog.test_import_gate import _rehash

_REQ = ToolExecutionRequest(id="c1", name="calc", arguments='{"x": 1}')
_MESSAGES = st.one_of(
    st.sampled_from(["be brief", "be verbose"]).map(SystemMessage),
    st.sampled_from(["hi", "more", ""]).map(UserMessage),
    st.sampled_from(["ok", "sure"]).map(AiMessage),
    st.just(AiMessage(tool_execution_requests=[_REQ])),
    st.just(ToolExecutionResultMessage.from_request(_REQ, "42")),
)
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(_MESSAGES, min_size=1, max_size=3)),
        st.tuples(st.just("set"), st.lists(_MESSAGES, max_size=5)),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("limit"), st.integers(1, 6)),
    ),
    max_size=25,
)


def _export(store: InMemoryEventStore) -> list[str]:
    out = io.StringIO()
    export_jsonl(store, out)
    return out.getvalue().splitlines()


def _import(lines: list[str]) -> Any:
    return import_jsonl(InMemoryEventStore(), lines, source="f", check=check_window_record)


def _play(memory, box, script) -> None:
    for op, arg in script:
        if op == "limit":
            box[0] = arg
        elif op in ("clear", "pop"):
            getattr(memory, op)()
        else:
            getattr(memory, op)(arg)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# A fork's set holds a system message at item 1 inside the add run [1, 3] of a later window.
@example(
    script=[
        ("add", [SystemMessage("a"), AiMessage(tool_execution_requests=[_REQ]), SystemMessage("b")])
    ],
    kind="messages",
    first=False,
    evict=None,
    forked=True,
)
# A set's item 0 in the add run [1, 2] (encode_refs writes it as an add).
@example(
    script=[("set", [SystemMessage("a"), UserMessage("u")]), ("add", [UserMessage("v")])],
    kind="messages",
    first=False,
    evict=None,
    forked=False,
)
@given(
    script=_OPS,
    kind=st.sampled_from(["messages", "tokens", "summarizing"]),
    first=st.booleans(),
    evict=st.sampled_from([None, 0.5]),
    forked=st.booleans(),
)
def test_every_window_a_memory_writes_is_accepted(script, kind, first, evict, forked):
    store = InMemoryEventStore()
    box = [3]
    policy = {"always_keep_system_message_first": first, "evict_to": evict, "store": store}
    memory: Any
    if kind == "messages":
        memory = MessageWindowChatMemory(id="p", max_messages=lambda _: box[0], **policy)
    elif kind == "tokens":
        memory = TokenWindowChatMemory(
            id="p",
            max_tokens=lambda _: box[0] * 12,
            token_count_estimator=OpenAiTokenCountEstimator("gpt-4o-mini"),
            **policy,
        )
    else:
        memory = SummarizingChatMemory(
            id="p",
            max_messages=lambda _: box[0],
            summarizer=lambda messages, previous: f"{previous or ''}+{len(messages)}",
            **policy,
        )
    _play(memory, box, script)
    if forked and memory.seq:
        fork(store, "p", "q")
        _play(MessageWindowChatMemory(id="q", max_messages=4, store=store), box, script[:5])
    _import(_export(store))  # refused before anything is written if any window breaks a rule


# ---------------------------------------------------------------------------- refused


def _conversation() -> list[str]:
    """A system message, then four adds under a window of 3: after seq 5 it holds 1, 4, 5;
    then a set of two (seq 6), an add (seq 7) and a pop of that add (seq 8)."""
    store = InMemoryEventStore()
    chat = MessageWindowChatMemory(id="conv", max_messages=3, store=store)
    chat.add(SystemMessage("be brief"))
    for text in ("u2", "u3", "u4", "u5"):
        chat.add(UserMessage(text))
    chat.set(UserMessage("u6"), AiMessage("a6"))
    chat.add(UserMessage("u7"))
    chat.pop()
    return _export(store)


LINES = _conversation()


def _meta(seq: int) -> Any:
    (line,) = [line for line in LINES[1:] if json.loads(line)["seq"] == seq]
    return json.loads(json.loads(line)["meta"])


def _with_window(seq: int, window: list[list[int]]) -> list[str]:
    lines = list(LINES)
    for i, line in enumerate(lines[1:], 1):
        obj = json.loads(line)
        if obj["seq"] == seq:
            meta = json.loads(obj["meta"])
            meta["w"] = window
            meta.pop("sys", None)
            obj["meta"] = json.dumps(meta, separators=(",", ":"), sort_keys=True)
            lines[i] = json.dumps(obj)
    return _rehash(lines)


def test_the_conversation_records_the_windows_described():
    assert [_meta(seq)["w"] for seq in (5, 6, 7, 8)] == [
        [[1, 1], [4, 5]],
        [[6, 0, 1]],
        [[6, 0, 1], [7, 7]],
        [[6, 0, 1]],
    ]
    _import(LINES)


@pytest.mark.parametrize(
    ("seq", "window", "error"),
    [
        (5, [[1, 5]], "holds 5 messages, more than its own limit 3"),
        (5, [[1, 1], [3, 3], [5, 5]], "a message is missing from the window"),  # u4 left out
        (5, [[1, 1], [3, 4]], "a message is missing from the window"),  # the newest left out
        (5, [[1, 1], [5, 5], [4, 4]], r"holds message \[4, 0\] after \[5, 0\], out of the order"),
        (5, [[5, 5], [1, 1], [4, 4]], r"puts message \[5, 0\] first.*only a system message"),
        (7, [[5, 5], [6, 1, 1], [7, 7]], r"refers to event 5, but after event 6 \(messages_set\)"),
        (7, [[6, 0, 0], [7, 7]], "a message is missing from the window"),  # a6 left out
        (8, [[6, 0, 1], [7, 7]], r"holds a message taken back \(message_retracted\)"),
    ],
    ids=["over-limit", "gap", "newest-left-out", "reordered", "non-system-first",
         "before-a-set", "set-item-left-out", "popped-kept"],
)  # fmt: skip
def test_a_window_no_memory_writes_is_refused(seq, window, error):
    # Before the fix each of these imported: only the window's structure was checked.
    with pytest.raises(ValueError, match=error):
        _import(_with_window(seq, window))


def test_a_system_message_put_first_and_a_token_window_over_its_count_are_accepted():
    # Check LangChain4j's system message rule: a replacement put first with a later ref.
    store = InMemoryEventStore()
    chat = MessageWindowChatMemory(
        id="conv", max_messages=3, store=store, always_keep_system_message_first=True
    )
    chat.add(SystemMessage("one"), UserMessage("u2"), SystemMessage("two"))
    assert json.loads(store.read("conv")[-1].meta)["w"] == [[3, 3], [2, 2]]
    # Check a token window's limit is tokens, not messages: five messages under a limit of 3
    # would be refused in a message window.
    tokens = TokenWindowChatMemory(
        id="tok",
        max_tokens=3,
        token_count_estimator=_CountsNothing(),
        store=store,
    )
    tokens.add(*[UserMessage(f"t{i}") for i in range(5)])
    assert json.loads(store.read("tok")[-1].meta)["w"] == [[1, 5]]
    _import(_export(store))


class _CountsNothing:
    """A token estimator under which every message is free."""

    def estimate_token_count_in_text(self, text):
        return 0

    def estimate_token_count_in_message(self, message):
        return 0

    def estimate_token_count_in_messages(self, messages):
        return 0


def test_brought_keeps_only_a_retraction_of_a_message_it_brought():
    brought = Brought()
    brought.append(1, "message_added", 1, system=[0])
    brought.append(2, "message_added", 1)
    brought.append(3, "message_retracted", 0, retracted=(9, 0))  # names nothing brought
    brought.append(4, "message_retracted", 0, retracted=(2, 0))
    brought.append(5, "message_retracted", 0, retracted=(2, 0))  # the same, again
    assert brought.is_system(1, 0) and not brought.is_system(2, 0)
    assert brought.retracted_in((1, 0), (9, 0)) == 1
    assert brought.gone_from((1, 0)) == 2  # the system message and the retracted one
    assert brought.newest("message_retracted") == 5 and brought.unknown == 0


def test_an_erased_memory_imports_its_roles_unknown():
    # An erasure empties the records (their roles are gone) but keeps their windows: the
    # gap rules cannot be judged there and are not, until the receipt empties the window.
    store = InMemoryEventStore()
    chat = MessageWindowChatMemory(
        id="p", max_messages=3, store=store, always_keep_system_message_first=True
    )
    chat.add(UserMessage("a"), SystemMessage("s1"), UserMessage("b"), SystemMessage("s2"))
    chat.add(UserMessage("c"))
    store.erase("p", reason="asked")
    MessageWindowChatMemory(id="p", max_messages=3, store=store).add(UserMessage("after"))
    popped = MessageWindowChatMemory(id="q", max_messages=3, store=store)
    popped.add(SystemMessage("s"), UserMessage("u"))
    popped.pop()
    popped.add(UserMessage("v"))
    report = _import(_export(store))
    assert report.imported == {"p": (1, 7), "q": (1, 4)}
