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
from projections import counterfactual as replay_module
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


@pytest.mark.parametrize("page", [1, 2])
def test_a_replaced_record_between_pages_is_refused(page):
    store = InMemoryEventStore()
    _conversation(store, "m", events=4)
    _conversation(store, "other", events=4)
    real_read = store.read
    foreign = real_read("other", gt=2, lte=3)[0]

    def read_with_a_foreign_record(memory_id, **bounds):
        return [foreign if r.seq == 3 else r for r in real_read(memory_id, **bounds)]

    store.read = read_with_a_foreign_record  # type: ignore[method-assign]  # chains elsewhere
    # Check it is refused alone in its page (only the link to the page before can tell) and
    # inside a page.
    with pytest.raises(ChainIntegrityError):
        list(records(store, "m", page=page))


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


def _long_plain_runs(store):
    memory = MessageWindowChatMemory(id="r", max_messages=4, store=store)
    memory.add(a_message("system", "first"))
    memory.add(*[a_message("user" if i % 2 else "ai") for i in range(9)])
    memory.add(*a_tool_exchange(call_id="a"))
    for i in range(7):
        memory.add(a_message("user" if i % 2 else "ai"))
    memory.set([a_message("ai"), a_message("system", "second"), a_message("user")])
    memory.add(*[a_message("user") for _ in range(5)])
    memory.clear()
    for _ in range(6):
        memory.add(a_message("user"))
    return memory


@pytest.mark.parametrize("limit", [1, 2, 3, 5])
@pytest.mark.parametrize("evict_to", [None, 0.5, 0.7])
@pytest.mark.parametrize("dynamic", [False, True])
def test_what_if_folds_runs_of_plain_adds_as_the_decoded_replay(limit, evict_to, dynamic):
    store = InMemoryEventStore()
    _long_plain_runs(store)
    policy = MessageWindowPolicy((lambda _id: limit) if dynamic else limit, evict_to=evict_to)
    views = list(replay_views(store, "r", policy))
    # Check runs longer than the limit, under LangChain4j's rule and chunked eviction, with
    # a fixed limit (folded at once) or a callable one (one by one), after every event.
    for record, view in views:
        assert what_if(store, "r", policy, seq=record.seq) == view


@_SETTINGS
@given(
    steps=st.lists(
        st.one_of(
            st.lists(chat_messages(), min_size=1, max_size=4).map(lambda m: ("add", m)),
            st.lists(chat_messages(), max_size=3).map(lambda m: ("set", m)),
            st.just(("clear", [])),
        ),
        min_size=1,
        max_size=12,
    ),
    limit=st.integers(1, 6),
    evict_to=st.sampled_from([None, 0.5]),
    dynamic=st.booleans(),
    page=st.integers(1, 4),
)
def test_what_if_equals_the_decoded_replay_across_sets_clears_and_pages(
    steps, limit, evict_to, dynamic, page
):
    store = InMemoryEventStore()
    memory = MessageWindowChatMemory(id="h", max_messages=3, store=store)
    for step, messages in steps:
        getattr(memory, step)(*([messages] if step == "set" else messages))
    policy = MessageWindowPolicy((lambda _id: limit) if dynamic else limit, evict_to=evict_to)
    views = list(replay_views(store, "h", policy))
    # Check runs of plain adds folded at once (fixed limit) or one by one (a callable), cut
    # by sets, clears and page ends, give the fully decoded replay's view.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(replay_module, "_WHAT_IF_PAGE", page)
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
