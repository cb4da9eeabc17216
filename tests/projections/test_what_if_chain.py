"""what_if reads its history as bare verified rows in pages of seqs: every row is vouched for
as records() vouches for it, the link between two pages included, and acknowledged damage is
left out exactly as records() leaves it out.

The history has 130 events and what_if reads it in pages of 20 seqs, so seq 40 ends a page,
41 starts one and 57 sits in the middle of one. A fixed message window reads only the newest
events (projections.counterfactual): asked about a seq a few events after the edit, it reads
the edited row too; the other policies replay from the start.
"""

from __future__ import annotations

import pytest

from eventlog.errors import ChainIntegrityError
from eventlog.hashing import commit, record_hash
from eventlog.ids import StreamKey
from eventlog.testing.records import user_payload
from projections import MessageWindowChatMemory, MessageWindowPolicy, what_if
from projections import counterfactual as replay_module
from projections.replay import records, replay_views
from tests.factories import a_message, a_tool_exchange

EVENTS = 130
PAGE = 20
POLICIES = {
    "fixed": MessageWindowPolicy(5),
    "callable": MessageWindowPolicy(lambda _id: 5),
    "system first, chunked": MessageWindowPolicy(
        5, always_keep_system_message_first=True, evict_to=0.6
    ),
}


def _history(store) -> None:
    """130 events: a system message, plain adds, and a tool exchange every 25 events (rows
    what_if must decode), in appends of a few events each."""
    memory = MessageWindowChatMemory(id="conv", max_messages=5, store=store)
    memory.add(a_message("system", "be brief"))
    while (head := store.head("conv")) is None or head.seq < EVENTS:
        seq = head.seq if head is not None else 0
        if seq % 25 == 23:
            memory.add(*a_tool_exchange(call_id=str(seq)))
        else:
            memory.add(*[a_message("user" if i % 2 else "ai") for i in range(min(3, EVENTS - seq))])
    assert store.head("conv").seq == EVENTS


@pytest.fixture
def paged(monkeypatch):
    monkeypatch.setattr(replay_module, "_WHAT_IF_PAGE", PAGE)


@pytest.mark.usefixtures("paged")
@pytest.mark.parametrize("seq", [57, 40, 41], ids=["mid-page", "page end", "page start"])
@pytest.mark.parametrize("policy", list(POLICIES), ids=list(POLICIES))
def test_an_edited_row_is_refused_naming_its_seq(backend, reopen, seq, policy):
    store = reopen()
    _history(store)
    before = what_if(store, "conv", POLICIES[policy], seq=seq - 1)
    backend.tamper(store, "conv", seq, "payload", user_payload("FORGED"))
    fresh = reopen()
    # Check the edit is refused wherever it falls in a page, and named, whatever the policy
    # (10 events on: inside the newest events a fixed window of 5 reads).
    with pytest.raises(ChainIntegrityError) as caught:
        what_if(fresh, "conv", POLICIES[policy], seq=seq + 10)
    assert caught.value.seq == seq
    assert caught.value.stream_id == "conv"
    # Check a what-if before the edit reads nothing past its target: it answers as before.
    assert before
    assert what_if(fresh, "conv", POLICIES[policy], seq=seq - 1) == before


@pytest.mark.usefixtures("paged")
@pytest.mark.parametrize("seq", [40, 57], ids=["page end", "mid-page"])
def test_a_rehashed_forgery_is_refused_at_the_link_after_it(backend, reopen, seq):
    store = reopen()
    _history(store)
    (record,) = store.read("conv", gt=seq - 1, lte=seq)
    assert record.format == 2  # unkeyed: anyone can recompute the row's own hashes
    forged = record._replace(payload=user_payload("FORGED"))
    forged = forged._replace(commitment=commit(bytes.fromhex(forged.salt), forged.payload))
    forged = forged._replace(hash=record_hash(forged))
    for column in ("payload", "commitment", "hash"):
        backend.tamper(store, "conv", seq, column, getattr(forged, column))
    fresh = reopen()
    # Check the forged row verifies on its own, so only the next row's link can tell; at a
    # page end that link is the one between two pages, which what_if checks itself.
    assert fresh.check(fresh.read("conv", gt=seq - 1, lte=seq)[0]) is None
    # A callable limit replays from the start: what_if's own pages, linked page to page.
    with pytest.raises(ChainIntegrityError, match=f"breaks at seq {seq + 1}") as caught:
        what_if(fresh, "conv", POLICIES["callable"])
    assert caught.value.seq == seq + 1
    # A fixed limit reads the newest events in one verified read, which checks its links too.
    with pytest.raises(ChainIntegrityError, match=f"breaks at seq {seq + 1}"):
        what_if(fresh, "conv", POLICIES["fixed"], seq=seq + 10)
    with pytest.raises(ChainIntegrityError, match=f"breaks at seq {seq + 1}"):
        list(records(fresh, StreamKey("conv"), page=PAGE))


@pytest.mark.parametrize("seqs", [[57], [40], [41], [40, 41], [21, 22, 23, 60]])
@pytest.mark.parametrize("page", [1, 7, PAGE, 1000])
def test_quarantined_rows_are_left_out_as_records_leaves_them(backend, reopen, seqs, page):
    store = reopen()
    _history(store)
    for seq in seqs:
        backend.tamper(store, "conv", seq, "payload", user_payload("FORGED"))
    fresh = reopen()
    for seq in seqs:
        fresh.quarantine("conv", seq, reason="disk fault")
    # Check what_if, in pages that cut the damage anywhere, shows what the record-by-record
    # replay shows (records() leaves the quarantined rows out), at the head and before it.
    for name, policy in POLICIES.items():
        views = {r.seq: v for r, v in replay_views(fresh, StreamKey("conv"), policy)}
        assert not set(seqs) & views.keys()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(replay_module, "_WHAT_IF_PAGE", page)
            assert what_if(fresh, "conv", policy) == views[EVENTS], name
            for target in (max(seqs) + 1, 100):
                assert what_if(fresh, "conv", policy, seq=target) == views[target], name


@pytest.mark.usefixtures("paged")
@pytest.mark.parametrize("policy", list(POLICIES), ids=list(POLICIES))
def test_a_history_starting_pages_after_seq_1_is_read_from_its_start(store, policy):
    _history(store)
    store.purge("conv", expected_seq=EVENTS, reason="idle")  # the tombstone keeps seq 131
    memory = MessageWindowChatMemory(id="conv", max_messages=5, store=store)
    memory.add(*[a_message("user") for _ in range(PAGE + 3)])
    views = {r.seq: v for r, v in replay_views(store, StreamKey("conv"), POLICIES[policy])}
    assert min(views) == EVENTS + 1
    # Check what_if finds a history whose first page of seqs is empty, at the head and before.
    assert what_if(store, "conv", POLICIES[policy]) == views[max(views)]
    for target in (EVENTS + 1, EVENTS + 2, EVENTS + PAGE):
        assert what_if(store, "conv", POLICIES[policy], seq=target) == views[target]
    assert what_if(store, "nobody", POLICIES[policy]) == []


@pytest.mark.parametrize("damaged", [(57,), (40, 41), (59, 60)], ids=str)
def test_records_reads_past_acknowledged_damage_to_the_head(backend, reopen, damaged):
    # Pages of 20 records: the records read, not the rows the store read, fill a page, so a
    # page holding acknowledged damage is never taken for the end of the history.
    store = reopen()
    _history(store)
    for seq in damaged:
        backend.tamper(store, "conv", seq, "payload", user_payload("DAMAGED"))
    fresh = reopen()
    for seq in damaged:
        fresh.quarantine("conv", seq, reason="disk fault")
    seqs = [r.seq for r in records(fresh, "conv", page=PAGE)]
    assert seqs == [s for s in range(1, EVENTS + 1) if s not in damaged]


def test_a_quarantined_system_message_before_the_newest_events_is_left_out(backend, reopen):
    # A fixed window folds only the newest events, seeded with the system message the event
    # before them names. Acknowledged damage is left out of a replay: without the damaged
    # second prompt, the first one stays. The seed must not say otherwise.
    store = reopen()
    memory = MessageWindowChatMemory(id="conv", max_messages=5, store=store)
    memory.add(a_message("system", "be brief"), a_message("system", "be verbose"))
    memory.add(*[a_message("user", f"u{i}") for i in range(60)])
    backend.tamper(store, "conv", 2, "payload", user_payload("FORGED"))
    fresh = reopen()
    fresh.quarantine("conv", 2, reason="disk fault")
    policy = MessageWindowPolicy(3)
    views = {r.seq: v for r, v in replay_views(fresh, StreamKey("conv"), policy)}
    assert 2 not in views
    assert what_if(fresh, "conv", policy) == views[62]
    assert [m.text for m in views[62]] == ["be brief", "u58", "u59"]
