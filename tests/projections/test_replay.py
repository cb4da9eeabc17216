"""The log is the truth: reopening, time travel, replay and what-if give exactly the live views.

Runs on every backend through the `reopen` fixture (a second store object on the same database).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from freezegun import freeze_time

from eventlog import (
    AiMessage,
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
    TokenWindowPolicy,
    what_if,
)


def _script():
    req = ToolExecutionRequest(id="1", name="calculator", arguments='{"a": 2, "b": 2}')
    yield ("add", SystemMessage("Be brief."))
    for turn in range(6):
        yield ("add", UserMessage(f"Question {turn}: how much is {turn}+{turn}?"))
        if turn % 2:
            yield ("add", AiMessage(tool_execution_requests=[req]))
            yield ("add", ToolExecutionResultMessage.from_request(req, str(2 * turn)))
        yield ("add", AiMessage(f"It is {2 * turn}."))
        if turn == 3:
            yield ("add", SystemMessage("Be verbose."))
    yield ("set", [UserMessage("reset 1"), AiMessage("reset 2"), UserMessage("reset 3")])
    yield ("add", UserMessage("after set"))
    yield ("clear", None)
    yield ("add", UserMessage("after clear"))


def _play(memory):
    """Run the script, returning messages() after each event-producing step, by seq."""
    views = {}
    for op, arg in _script():
        before = memory.seq
        getattr(memory, op)(*(() if arg is None else (arg,)))
        if memory.seq != before:
            views[memory.seq] = memory.messages()
    return views


@pytest.fixture(params=["messages", "tokens"])
def make(request):
    estimator = OpenAiTokenCountEstimator("gpt-4o-mini")

    def build(store, limit=None, **kw):
        if request.param == "messages":
            return MessageWindowChatMemory(id="conv", max_messages=limit or 4, store=store, **kw)
        return TokenWindowChatMemory(
            id="conv", max_tokens=limit or 60, token_count_estimator=estimator, store=store, **kw
        )

    return build


def test_reopened_memory_equals_live_and_continues(reopen, make):
    live = make(reopen())
    views = _play(live)
    cold = make(reopen())
    # Check a new object on a new store object shows exactly the live view and history.
    assert cold.messages() == live.messages()
    assert [e.event for e in cold.history()] == [e.event for e in live.history()]
    # Check it continues the same memory, and the first object sees that at its next call.
    cold.add(UserMessage("from the second object"))
    assert live.messages()[-1] == UserMessage("from the second object")
    assert live.messages() == cold.messages()
    assert len(views) == len(live.history()) - 1


def test_as_of_every_seq_equals_what_messages_returned(reopen, make):
    live = make(reopen())
    views = _play(live)
    cold = make(reopen())
    for seq, view in views.items():
        assert cold.as_of(seq=seq) == view, seq
    assert cold.as_of(seq=0) == []
    with pytest.raises(ValueError, match="history ends"):
        cold.as_of(seq=max(views) + 1)
    with pytest.raises(ValueError, match="exactly one"):
        cold.as_of()


def test_as_of_time(reopen, make):
    memory = make(reopen())
    with freeze_time("2026-05-01 09:00:00"):
        memory.add(UserMessage("morning"))
    with freeze_time("2026-05-01 18:00:00"):
        memory.add(UserMessage("evening"))
    assert memory.as_of(at=datetime(2026, 5, 1, 8, tzinfo=UTC)) == []
    assert memory.as_of(at=datetime(2026, 5, 1, 12, tzinfo=UTC)) == [UserMessage("morning")]
    assert memory.as_of(at=datetime(2026, 5, 2, tzinfo=UTC)) == [
        UserMessage("morning"),
        UserMessage("evening"),
    ]


def test_dynamic_limit_history_replays_exactly_under_any_later_limit(reopen):
    limits = {"now": 6}
    live = MessageWindowChatMemory(id="dyn", max_messages=lambda _id: limits["now"], store=reopen())
    views = {}
    for i in range(20):
        if i == 8:
            limits["now"] = 2  # shrink: the next add writes the trimmed window
        if i == 14:
            limits["now"] = 10  # grow: evicted messages do not come back
        live.add(UserMessage(f"m{i}"))
        views[live.seq] = live.messages()
    assert views[14][0] == UserMessage("m12")
    assert views[20] == [UserMessage(f"m{i}") for i in range(12, 20)]
    # Check a reader with a completely different limit still sees the recorded past exactly.
    other = MessageWindowChatMemory(id="dyn", max_messages=100, store=reopen())
    for seq, view in views.items():
        assert other.as_of(seq=seq) == view
    # ... while its own present view is the log's window under its own limit.
    assert other.messages() == views[20]


class _CharCounter:
    """A different 'tokenizer': 1 token per character. Its identity differs from OpenAI's."""

    identity = "chars"
    messages_overhead = 0

    def estimate_token_count_in_text(self, text):
        return len(text)

    def estimate_token_count_in_message(self, message):
        return len(getattr(message, "text", "") or "")

    def estimate_token_count_in_messages(self, messages):
        return sum(self.estimate_token_count_in_message(m) for m in messages)


def test_past_views_do_not_depend_on_todays_tokenizer(reopen):
    live = TokenWindowChatMemory(
        id="tok",
        max_tokens=40,
        token_count_estimator=OpenAiTokenCountEstimator("gpt-4o-mini"),
        store=reopen(),
    )
    views = {}
    for i in range(12):
        live.add(UserMessage(f"message number {i} with a few words"))
        views[live.seq] = live.messages()
    # Check: reopened with another estimator, the recorded past is unchanged ...
    other = TokenWindowChatMemory(
        id="tok", max_tokens=40, token_count_estimator=_CharCounter(), store=reopen()
    )
    for seq, view in views.items():
        assert other.as_of(seq=seq) == view
    # ... and its present view applies its own counting to the current window (recounted once).
    assert other.messages() == [m for m in views[12] if len(m.text or "") <= 40][-1:]


def test_what_if_other_policies(reopen, make):
    store = reopen()
    live = make(store)
    views = _play(live)
    last = max(views)
    # Check replaying under the memory's own policy equals the live views (static limit).
    for seq, view in views.items():
        assert live.what_if(live.policy, seq=seq) == view
    # Check a bigger window keeps more, and nothing is written by asking.
    bigger = what_if(store, "conv", MessageWindowPolicy(50), seq=last - 4)
    assert len(bigger) > len(views[last - 4])
    assert len(live.history()) == last
    tokens = what_if(store, "conv", TokenWindowPolicy(2000, OpenAiTokenCountEstimator("gpt-4o")))
    assert tokens == [UserMessage("after clear")]
    with pytest.raises(ValueError, match="max_messages"):
        MessageWindowPolicy(0)


@pytest.mark.parametrize("policy", ["messages:3", 3, None])
def test_what_if_names_a_policy_that_is_not_one(reopen, make, policy):
    # The CLI's spelling ("messages:3") passed to the API used to fail deep in the window
    # with "must be str, not SystemMessage".
    store = reopen()
    live = make(store)
    _play(live)
    with pytest.raises(TypeError, match=r"^what_if: policy must be a WindowPolicy .*, not "):
        live.what_if(policy)
    with pytest.raises(TypeError, match=r"^what_if: policy must be a WindowPolicy"):
        what_if(store, "conv", policy, seq=1)
