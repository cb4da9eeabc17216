"""The page badge on its own: every way a run of records can fail to link, and the view's
refusals of a range it cannot show."""

from __future__ import annotations

import pytest

from eventlog import InMemoryEventStore, UserMessage
from eventlog.hashing import GENESIS
from eventlog.models import Record
from projections import MessageWindowChatMemory
from projections.inspector.badges import records_badge
from projections.inspector.views import event_detail, step_view
from tests.factories import a_record


def _chain(n: int) -> list[Record]:
    records = [a_record(seq=1)]
    for seq in range(2, n + 1):
        records.append(a_record(seq=seq, prev_hash=records[-1].hash))
    return records


@pytest.mark.parametrize(
    ("change", "bad_seq", "reason"),
    [
        (lambda rs: rs, None, None),
        (lambda rs: [rs[0], rs[2]], 3, "seq 2 is missing (found 3 next)"),
        (lambda rs: [rs[0], rs[1]._replace(prev_hash=GENESIS)], 2, "prev_hash does not match"),
        (lambda rs: [a_record(seq=1, prev_hash="1" * 64)], 1, "not the genesis hash"),
        (lambda rs: [rs[0]._replace(hash="2" * 64)], 1, "hash"),
    ],
)
def test_a_run_of_records_is_checked_record_by_record_and_link_by_link(change, bad_seq, reason):
    store = InMemoryEventStore()
    badge = records_badge(store, change(_chain(3)), whole=False)
    assert badge.checked
    if bad_seq is None:
        assert badge.bad is None
        assert (badge.first, badge.last) == (1, 3)
    else:
        assert badge.bad is not None
        assert badge.bad[0] == bad_seq
        assert reason in badge.bad[1]


def test_nothing_to_check_is_not_a_verified_badge():
    badge = records_badge(InMemoryEventStore(), [], whole=False)
    assert not badge.checked
    assert badge.bad is None


def test_the_view_refuses_what_it_cannot_show_naming_the_range():
    store = InMemoryEventStore()
    MessageWindowChatMemory("m", max_messages=2, store=store).add(UserMessage("hi"))
    with pytest.raises(ValueError, match=r"diff from seq 5: pick a seq from 0 to 1"):
        step_view(store, "m", 1, diff_from=5)
    with pytest.raises(ValueError, match=r"what-if page -1: use 0 or more"):
        step_view(store, "m", 1, part=-1)
    with pytest.raises(LookupError, match=r"no memory 'nope'"):
        step_view(store, "nope", None)
    with pytest.raises(LookupError, match=r"has no event 9"):
        event_detail(store, "m", 9)


def test_an_event_page_that_cannot_be_shown_is_an_error_page(ledger, serve):
    import sqlite3
    import urllib.error
    import urllib.request

    from eventlog import SQLiteEventStore

    with sqlite3.connect(ledger) as conn:
        conn.execute("UPDATE events SET payload = replace(payload, '4', '5') WHERE seq = 4")
    server = serve(SQLiteEventStore(ledger))
    for path, status in (("/m/conv/e/99", 404), ("/m/conv/e/4", 400)):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(server.url + path)  # noqa: S310 - our own local server
        assert e.value.code == status
        assert "Cannot show that" in e.value.read().decode()
