"""The window state machine and the window record, tested directly (no store)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog import AiMessage, SystemMessage, ToolExecutionRequest, UserMessage
from eventlog.messages import ToolExecutionResultMessage
from eventlog.models import Record
from projections.meta import ForkOrigin, WindowMeta
from projections.replay import window_meta
from projections.window import (
    Departure,
    Entry,
    MessageWindowPolicy,
    TokenWindowPolicy,
    Window,
    evict_permille,
)

_REQ = ToolExecutionRequest(id="1", name="calc", arguments="{}")


def _entry(seq, message, index=0):
    return Entry(message, (seq, index))


def _reasons(departures):
    return [(d.entry.ref, d.reason) for d in departures]


def test_add_reports_evictions_and_orphans_with_their_reasons():
    window = Window(MessageWindowPolicy(3))
    window.add(_entry(1, SystemMessage("s")), lambda: 3)
    window.add(_entry(2, AiMessage(tool_execution_requests=[_REQ])), lambda: 3)
    window.add(_entry(3, ToolExecutionResultMessage.from_request(_REQ, "4")), lambda: 3)
    departures = window.add(_entry(4, UserMessage("next")), lambda: 3)
    # Check the request is evicted (the system message at index 0 stays) and its result goes
    # with it as an orphan, in the order they left.
    assert _reasons(departures) == [((2, 0), "evicted"), ((3, 0), "orphan")]
    assert [e.ref for e in window.entries] == [(1, 0), (4, 0)]
    assert window.limit == 3


def test_add_of_the_same_system_message_changes_nothing_even_over_the_limit():
    window = Window(
        MessageWindowPolicy(3), [_entry(1, UserMessage("a")), _entry(2, SystemMessage("s"))]
    )
    # Check a limit that shrank is not applied when the add writes nothing (LangChain4j
    # returns before storing the trimmed list).
    assert window.add(_entry(3, SystemMessage("s")), lambda: 1) is None
    assert [e.ref for e in window.entries] == [(1, 0), (2, 0)]


def test_add_replaces_the_system_message_and_reads_the_limit_twice():
    calls = []

    def limit():
        calls.append(1)
        return 5

    window = Window(
        MessageWindowPolicy(5), [_entry(1, SystemMessage("old")), _entry(2, UserMessage("u"))]
    )
    departures = window.add(_entry(3, SystemMessage("new")), limit)
    assert _reasons(departures) == [((1, 0), "system_replaced")]
    assert [e.ref for e in window.entries] == [(2, 0), (3, 0)]
    assert len(calls) == 2


def test_set_and_clear_name_every_entry_that_left():
    window = Window(MessageWindowPolicy(2), [_entry(1, UserMessage("a"))])
    departures = window.set([_entry(2, UserMessage(str(i)), i) for i in range(3)], 2)
    assert _reasons(departures) == [((1, 0), "set"), ((2, 0), "evicted")]
    untrimmed = window.copy()
    untrimmed.set([_entry(3, UserMessage(str(i)), i) for i in range(4)], None)
    assert len(untrimmed.entries) == 4 and untrimmed.limit is None
    assert _reasons(window.clear()) == [((2, 1), "cleared"), ((2, 2), "cleared")]
    assert window.entries == []


def test_view_trims_a_copy_only():
    entries = [_entry(i, UserMessage(str(i))) for i in range(1, 5)]
    window = Window(MessageWindowPolicy(4), entries)
    assert [e.ref for e in window.view(2)] == [(3, 0), (4, 0)]
    assert window.entries == entries
    assert window.view(10) == entries
    assert Departure(entries[0], "evicted").reason == "evicted"


def test_window_meta_fast_path_matches_known_bytes():
    assert WindowMeta([[1, 3]], 20).encode() == '{"lim":20,"w":[[1,3]]}'
    assert WindowMeta([]).encode() == '{"w":[]}'
    assert (
        WindowMeta([[2, 0, 1]], 9, 7, "e").encode() == '{"est":"e","lim":9,"tok":7,"w":[[2,0,1]]}'
    )
    forked = WindowMeta([[1, 0, 1]], None, [3, 4], "e", ForkOrigin("a", 2, "h"))
    assert forked.encode() == (
        '{"est":"e","forked_from":{"hash":"h","memory":"a","seq":2},"tok":[3,4],"w":[[1,0,1]]}'
    )
    assert forked.size == 2 and forked.refs == [(1, 0), (1, 1)]


@pytest.mark.parametrize(
    "text",
    [
        "{oops",
        "[1]",
        '{"w": 5}',
        '{"w": [[1]]}',
        '{"w": [[3, 1]]}',
        '{"w": [[1, -2]]}',
        '{"w": [[1, true]]}',
        '{"w": [], "lim": "20"}',
        '{"w": [], "tok": [1, "x"], "est": "e"}',
        '{"w": [], "tok": 1, "est": 5}',
        '{"w": [], "forked_from": {"memory": 1}}',
    ],
)
def test_window_meta_refuses_malformed_records(text):
    with pytest.raises(ValueError, match="meta"):
        WindowMeta.decode(text)


def test_window_meta_of_events_without_a_window():
    assert WindowMeta.decode("") is None
    assert WindowMeta.decode('{"other": 1}') is None
    record = Record(
        position=1,
        stream_id="m",
        seq=1,
        recorded_at_text="2026-01-01T00:00:00.000000Z",
        kind="message_added",
        schema_version=1,
        payload="{}",
        meta='{"w": 5}',
        prev_hash="",
        hash="",
    )
    with pytest.raises(ValueError, match=r"event m#1 \(message_added\).*malformed"):
        window_meta(record)
    with pytest.raises(ValueError, match="records no window"):
        window_meta(record._replace(meta=""))
    assert window_meta(record._replace(kind="memory_cleared")).refs == []


@pytest.mark.parametrize(
    ("evict_to", "permille"), [(None, None), (0.7, 700), (0.001, 1), (0.999, 999)]
)
def test_evict_to_is_kept_as_thousandths(evict_to, permille):
    assert evict_permille(evict_to) == permille


@pytest.mark.parametrize("evict_to", [True, False, "0.5", [0.5], math.inf, -math.inf, math.nan])
def test_evict_to_must_be_a_number(evict_to):
    with pytest.raises(ValueError, match=r"^evict_to must be a fraction of the limit such as 0.7"):
        evict_permille(evict_to)


@pytest.mark.parametrize(
    "evict_to", [0, 1, 0.0004, 0.9996, -0.5, 1.5, 10**5000], ids=[*"012345", "huge"]
)
def test_evict_to_must_round_to_a_fraction_strictly_between_0_and_1(evict_to):
    with pytest.raises(ValueError, match=r"^evict_to must be between 0 and 1 \(exclusive\)"):
        evict_permille(evict_to)


class _Letters:
    """A token estimator (the pluggable kind): one token per character, 3 per list."""

    identity = "letters"
    messages_overhead = 3

    def estimate_token_count_in_text(self, text):
        return len(text)

    def estimate_token_count_in_message(self, message):
        return len(message.text)

    def estimate_token_count_in_messages(self, messages):
        return 3 + sum(len(m.text) for m in messages)


def _users(*texts):
    return [Entry(UserMessage(t), (seq, 0), len(t)) for seq, t in enumerate(texts, start=1)]


@pytest.mark.parametrize(
    ("tokens", "limit", "kept"),
    [
        # Down to half the limit: 2 of 4 messages, or 5 of 11 tokens (3 + "e").
        (False, 4, ["dd", "e"]),
        (True, 11, ["e"]),
    ],
)
def test_chunked_eviction_starts_only_over_the_limit(tokens, limit, kept):
    policy = (
        TokenWindowPolicy(limit, _Letters(), evict_to=0.5)
        if tokens
        else MessageWindowPolicy(limit, evict_to=0.5)
    )
    at_limit = _users("aa", "bb", "cc", "dd")  # 4 messages, 3 + 8 = 11 tokens
    assert policy.fits(at_limit, limit)
    assert policy.ensure_capacity(at_limit, limit) == []
    assert len(at_limit) == 4
    over = _users("aa", "bb", "cc", "dd", "e")
    assert not policy.fits(over, limit)
    policy.ensure_capacity(over, limit)
    assert [e.message.text for e in over] == kept


def test_an_empty_window_fits_even_a_limit_below_the_list_overhead():
    policy = TokenWindowPolicy(1, _Letters())
    assert policy.total([]) == 3
    assert policy.fits([], 1)
    assert policy.ensure_capacity([], 1) == []


def test_the_low_water_mark_is_evict_to_of_the_limit_and_at_least_one_message():
    assert MessageWindowPolicy(10).evict_to is None
    assert MessageWindowPolicy(10).low_water(10) == 10
    chunked = MessageWindowPolicy(10, evict_to=0.25)
    assert chunked.evict_to == 0.25
    assert [chunked.low_water(limit) for limit in (1, 4, 8, 10)] == [1, 1, 2, 2]


def test_a_recorded_token_count_is_used_as_recorded():
    # Counted when it entered the log, perhaps by another estimator: never counted again.
    policy = TokenWindowPolicy(100, _Letters())
    assert policy.total([Entry(UserMessage("a"), (1, 0), 40)]) == 3 + 40
    assert (
        policy.total([Entry(UserMessage("a"), (1, 0), 40), Entry(UserMessage("bc"), (2, 0))]) == 45
    )


def test_retract_takes_out_the_entry_of_that_ref_only():
    window = Window(MessageWindowPolicy(5), _users("a", "b", "c"))
    (departed,) = window.retract((2, 0))
    assert (departed.entry.ref, departed.reason) == ((2, 0), "retracted")
    assert [e.ref for e in window.entries] == [(1, 0), (3, 0)]
    assert window.retract((2, 0)) == []


def _mixed_entries(kinds):
    """Entries of the kinds the rules tell apart: plain, system (two texts), AI with a tool
    request, tool result."""
    make = {
        "plain": lambda: UserMessage("u"),
        "ai": lambda: AiMessage("a"),
        "sys1": lambda: SystemMessage("one"),
        "sys2": lambda: SystemMessage("two"),
        "request": lambda: AiMessage(tool_execution_requests=[_REQ]),
        "result": lambda: ToolExecutionResultMessage.from_request(_REQ, "4"),
    }
    return [_entry(seq, make[kind]()) for seq, kind in enumerate(kinds, start=1)]


_KINDS = st.sampled_from(["plain", "ai", "sys1", "sys2", "request", "result"])


@settings(max_examples=300, deadline=None)
@given(
    before=st.lists(_KINDS, max_size=12),
    plain=st.integers(0, 20),
    limit=st.integers(1, 6),
    start_limit=st.integers(1, 8),
    evict_to=st.sampled_from([None, 0.5, 0.7]),
    first=st.booleans(),
    by_set=st.booleans(),
)
def test_add_plain_equals_add_one_by_one(  # noqa: PLR0917 - hypothesis draws
    before, plain, limit, start_limit, evict_to, first, by_set
):
    policy = MessageWindowPolicy(limit, always_keep_system_message_first=first, evict_to=evict_to)
    one_by_one = Window(policy)
    # A window as any history leaves it: adds under another limit, or a set of anything
    # (several system messages, over the limit), so it may be over this one.
    if by_set:
        one_by_one.set(_mixed_entries(before), None)
    for entry in [] if by_set else _mixed_entries(before):
        one_by_one.add(entry, lambda: start_limit)
    at_once = one_by_one.copy()
    tail_only = one_by_one.copy()
    entries = [_entry(100 + i, UserMessage("p") if i % 2 else AiMessage("a")) for i in range(plain)]
    for entry in entries:
        one_by_one.add(entry, lambda: limit)
    at_once.add_plain(entries, limit)
    # Check the adds done as one keep exactly what the adds one by one keep, in order.
    assert at_once.entries == one_by_one.entries
    assert at_once.limit == one_by_one.limit
    if evict_to is None:
        # Check entries before the last `limit` can be left out (what-if leaves them out).
        tail_only.add_plain(entries[-limit:], limit)
        assert tail_only.entries == one_by_one.entries


def test_add_plain_of_a_token_window_adds_one_by_one():
    policy = TokenWindowPolicy(12, _Letters())
    one_by_one, at_once = Window(policy), Window(policy)
    entries = _users("aa", "bbb", "c", "dddd", "ee")
    for entry in entries:
        one_by_one.add(entry, lambda: 12)
    at_once.add_plain(entries, 12)
    # Check a token window gets the per-add rules (its total is not a message count).
    assert at_once.entries == one_by_one.entries
    assert [e.message.text for e in at_once.entries] == ["c", "dddd", "ee"]


class _Returns:
    """A pluggable estimator that returns ``value`` for every count."""

    def __init__(self, value: object) -> None:
        self.value = value

    def estimate_token_count_in_text(self, text: str) -> object:
        return self.value

    def estimate_token_count_in_message(self, message: object) -> object:
        return self.value

    def estimate_token_count_in_messages(self, messages: object) -> object:
        return self.value


def _as_estimator(count: object) -> Any:
    return _Returns(count)


@pytest.mark.parametrize(
    "count", [-5, 1.5, None, "3", True, math.nan, 2**63, 10**5000],
    ids=["negative", "float", "none", "str", "bool", "nan", "2**63", "huge"],
)  # fmt: skip
def test_an_estimator_count_that_is_not_a_token_count_is_refused(tmp_path, count):
    """Before: 1.5, "3" and True were coerced by int(), -5 shrank the window's total, None and
    nan failed inside int() with errors naming neither the estimator nor the message."""
    from eventlog import SQLiteEventStore
    from projections import TokenWindowChatMemory

    store = SQLiteEventStore(tmp_path / "t.db")
    memory = TokenWindowChatMemory(
        "t", max_tokens=100, token_count_estimator=_as_estimator(count), store=store
    )
    with pytest.raises(ValueError, match=r"estimate_token_count_in_message returned .* for "):
        memory.add(UserMessage("a"))
    assert store.read_all() == []
    seven: Any = _Returns(7)
    ok = TokenWindowChatMemory("ok", max_tokens=100, token_count_estimator=seven, store=store)
    ok.add(UserMessage("a"))
    assert [m.text for m in ok.messages()] == ["a"]
