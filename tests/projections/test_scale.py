"""Long histories in bounded memory: history pages, the lazy what-if fold, the streamed diff.

Each walk in pages must vouch for as much as one read of the whole range, and each shortcut
must give exactly what the full computation gives: the references here are the unpaged,
fully decoded paths (replay() decodes every message; diff() holds every change).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog import InMemoryEventStore
from eventlog.errors import ChainIntegrityError
from eventlog.messages import CustomMessage
from projections import MessageWindowChatMemory, MessageWindowPolicy, what_if
from projections.audit import diff, diff_stream
from projections.replay import records, replay_views
from tests.factories import a_message, a_tool_exchange
from tests.strategies import chat_messages

_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _conversation(store, memory_id="m", *, events=12, max_messages=3):
    memory = MessageWindowChatMemory(id=memory_id, max_messages=max_messages, store=store)
    memory.add(a_message("system", "be brief"))
    for i in range(events):
        memory.add(a_message("user" if i % 2 == 0 else "ai"))
    return memory


def test_iter_history_pages_equal_history(store):
    memory = _conversation(store, events=11)
    # Check every page size gives the same events as the list, bounds included.
    for page in (1, 2, 5, 100):
        assert list(memory.iter_history(page=page)) == memory.history()
        assert list(memory.iter_history(gt=3, lte=9, page=page)) == memory.history(gt=3, lte=9)
    assert [e.seq for e in memory.iter_history(gt=10, page=2)] == [11, 12]


def test_iter_history_refuses_a_bad_page_size():
    memory = _conversation(InMemoryEventStore())
    for page in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="page must be an int >= 1"):
            next(memory.iter_history(page=page))


@pytest.mark.parametrize("page", [1, 2, 3, 100])
def test_a_record_missing_between_pages_is_refused(page):
    store = InMemoryEventStore()
    memory = _conversation(store, events=8)
    real_read = store.read

    def read_without_seq_4(memory_id, *, limit=None, **bounds):
        found = [r for r in real_read(memory_id, **bounds) if r.seq != 4]
        return found[:limit]

    store.read = read_without_seq_4  # type: ignore[method-assign]  # as after a DELETE
    # Check the gap is refused whether it falls inside a page or between two.
    with pytest.raises(ChainIntegrityError, match=r"does not chain to seq 3|seq 4 is missing"):
        list(memory.iter_history(page=page))
    with pytest.raises(ChainIntegrityError, match=r"breaks at seq 5|seq 4 is missing"):
        list(records(store, "m", page=page))


def test_a_replaced_record_between_pages_is_refused():
    store = InMemoryEventStore()
    _conversation(store, "m", events=4)
    _conversation(store, "other", events=4)
    real_read = store.read
    foreign = real_read("other", gt=2, lte=3)[0]

    def read_with_a_foreign_record(memory_id, **bounds):
        return [foreign if r.seq == 3 else r for r in real_read(memory_id, **bounds)]

    store.read = read_with_a_foreign_record  # type: ignore[method-assign]  # chains elsewhere
    with pytest.raises(ChainIntegrityError):
        list(records(store, "m", page=2))


def _tool_heavy(store, limit):
    memory = MessageWindowChatMemory(id="t", max_messages=limit, store=store)
    memory.add(a_message("system", "first"))
    for i in range(6):
        memory.add(a_message("user"))
        memory.add(*a_tool_exchange(call_id=str(i)))
        memory.add(CustomMessage({"n": i}))
        if i == 3:
            memory.add(a_message("system", "second"))
            memory.add(a_message("system", "second"))  # the same again: nothing is written
    return memory


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 50])
@pytest.mark.parametrize("first", [False, True])
def test_what_if_equals_the_fully_decoded_replay(store, limit, first):
    _tool_heavy(store, 4)
    policy = MessageWindowPolicy(limit, always_keep_system_message_first=first)
    views = list(replay_views(store, "t", policy))
    # Check the stand-in fold gives the decoded fold's view after every event, and the
    # messages returned are the real ones (no stand-in leaks).
    for record, view in views:
        assert what_if(store, "t", policy, seq=record.seq) == view
    assert what_if(store, "t", policy) == views[-1][1]


@_SETTINGS
@given(
    messages=st.lists(chat_messages(), min_size=1, max_size=25),
    limit=st.integers(1, 6),
    what_limit=st.integers(1, 8),
    first=st.booleans(),
)
def test_what_if_equals_the_decoded_replay_for_any_messages(messages, limit, what_limit, first):
    store = InMemoryEventStore()
    memory = MessageWindowChatMemory(id="h", max_messages=limit, store=store)
    for message in messages:
        memory.add(message)
    policy = MessageWindowPolicy(what_limit, always_keep_system_message_first=first)
    views = list(replay_views(store, "h", policy))
    assert what_if(store, "h", policy) == (views[-1][1] if views else [])


def test_diff_stream_equals_diff_with_a_system_message_kept_throughout(store):
    memory = _conversation(store, events=20, max_messages=3)
    memory.set([a_message("user"), a_message("ai")])
    memory.add(a_message("system", "again"))
    for _ in range(4):
        memory.add(a_message("user"))
    memory.clear()
    memory.add(a_message("user"))
    head = memory.seq
    # Check every range, so changes that arrive out of ref order (the system message
    # reported last) are merged back exactly where diff() puts them.
    for start in range(head + 1):
        for end in range(start, head + 1, 3):
            expected = diff(store, "m", start, end)
            streamed = diff_stream(store, "m", start, end)
            assert [
                (c.entry.ref, c.message, c.entered_at, c.left_at, c.reason) for c in streamed
            ] == [
                (c.entry.ref, c.message, c.entered_at, c.left_at, c.reason)
                for c in expected.changes
            ]
            assert len(streamed) == len(expected.changes)
            assert streamed.counts() == (
                len(expected.entered),
                len(expected.left),
                len(expected.passed),
            )


def test_diff_stream_refuses_what_diff_refuses(store):
    _conversation(store, events=3)
    with pytest.raises(ValueError, match="must not be after"):
        diff_stream(store, "m", 3, 2)
    with pytest.raises(ValueError, match="pick a seq from 0 to 4"):
        diff_stream(store, "m", 0, 9)
