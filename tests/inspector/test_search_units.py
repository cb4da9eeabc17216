"""The search scan's edges: set events, erased content and chatledger's own streams."""

from __future__ import annotations

from datetime import timedelta

from eventlog import InMemoryEventStore, SystemMessage, UserMessage
from eventlog.testing.records import user_payload
from projections import MessageWindowChatMemory
from projections.compaction import compact
from projections.inspector.search import _hit, search


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


def test_a_hit_shows_text_only_when_the_checked_row_is_the_row_the_scan_read():
    store = InMemoryEventStore()
    MessageWindowChatMemory("conv", max_messages=5, store=store).add(UserMessage("the needle"))
    (scanned,) = store.read("conv")
    # The row as the scan read it verifies and is shown ...
    shown = _hit(store, scanned, "user", "the needle", at=4, size=6)
    assert (shown.verified, shown.match) == (True, "needle")
    # ... but text the scan read from a row edited before the check (the check reads the
    # stored row, which differs) is not: a forger's edit between the two reads shows nothing.
    forged = scanned._replace(payload=user_payload("the needle, forged"))
    hidden = _hit(store, forged, "user", "the needle, forged", at=4, size=6)
    assert (hidden.verified, hidden.match, hidden.before, hidden.after) == (False, "", "", "")


def test_a_hit_marks_the_text_that_matched_when_folding_changes_lengths():
    # "ß" folds to "ss" and "ﬁ" to "fi": offsets in the folded text are further along than in
    # the message, and the page marked the wrong text (an empty mark for "hunter2").
    store = InMemoryEventStore()
    conv = MessageWindowChatMemory("c", max_messages=5, store=store)
    conv.add(UserMessage("Straße " * 10 + "the password is hunter2"))
    conv.add(UserMessage("ﬁﬁﬁ İstanbul secret"))
    shown = {
        (h.match, h.after[:4]) for q in ("HUNTER2", "Secret", "ss") for h in search(store, q).hits
    }
    assert shown == {("hunter2", ""), ("secret", ""), ("ß", "e St")}
    (hit,) = search(store, "STANBUL").hits
    assert (hit.before, hit.match, hit.after) == ("ﬁﬁﬁ İ", "stanbul", " secret")
