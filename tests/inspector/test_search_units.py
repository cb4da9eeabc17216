"""The search scan's edges: set events, erased content and chatledger's own streams."""

from __future__ import annotations

from datetime import timedelta

from eventlog import InMemoryEventStore, SystemMessage, UserMessage
from projections import MessageWindowChatMemory
from projections.compaction import compact
from projections.inspector.search import search


def test_search_finds_text_in_a_set_event_and_skips_erased_and_system_streams():
    store = InMemoryEventStore()
    kept = MessageWindowChatMemory("kept", max_messages=5, store=store)
    kept.set(SystemMessage("Be kind."), UserMessage("the needle is here"))
    gone = MessageWindowChatMemory("gone", max_messages=5, store=store)
    gone.add(UserMessage("another needle"))
    store.erase("gone", reason="asked")
    compact(store, idle_for=timedelta(0))  # writes a run record to a ~sys: stream
    page = search(store, "NEEDLE")
    assert [(h.key, h.seq, h.role) for h in page.hits] == [("kept", 1, "user")]
    assert page.hits[0].match == "needle"
    assert (page.hits[0].before, page.hits[0].after) == ("the ", " is here")
    assert any(info.stream_id.startswith("~sys:") for info in store.streams(include_system=True))
    assert page.next_after is None
