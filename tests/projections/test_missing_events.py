"""An event a read leaves out - a damaged record acknowledged with ``quarantine``, or one a
retention purge deleted - is named as such by ``explain`` and time travel, in one line: never
an ``AssertionError``, never "purged?" for a record that is quarantined."""

from __future__ import annotations

import pytest

from eventlog.testing.records import user_payload
from projections import MessageWindowChatMemory, MessageWindowPolicy, what_if
from projections.audit import diff, explain
from projections.cli import main
from tests.factories import a_message


def _conversation(store) -> MessageWindowChatMemory:
    memory = MessageWindowChatMemory(id="conv", max_messages=3, store=store)
    for i in range(5):
        memory.add(a_message("user", f"message {i}"))
    return memory


def test_a_quarantined_event_is_named_by_explain_and_time_travel(backend, reopen) -> None:
    # Before, explain of the acknowledged record failed an assert (a traceback from
    # `chatledger explain`), and as_of said the record was "not in the store (purged?)".
    store = reopen()
    _conversation(store)
    backend.tamper(store, "conv", 3, "payload", user_payload("FORGED"))
    fresh = reopen()
    fresh.quarantine("conv", 3, reason="disk fault")
    named = r"event 3 of 'conv' is a damaged record acknowledged by quarantine"
    with pytest.raises(ValueError, match=named):
        explain(fresh, "conv", 3)
    memory = MessageWindowChatMemory(id="conv", max_messages=3, store=fresh)
    with pytest.raises(ValueError, match=named):
        memory.as_of(seq=3)
    # The events around it still answer.
    assert explain(fresh, "conv", 2).left_at == 5
    assert len(memory.as_of(seq=4)) == 2


def test_a_purged_event_is_named_by_explain_and_time_travel(store) -> None:
    memory = _conversation(store)
    store.purge("conv", expected_seq=5, reason="retention")
    memory.add(a_message("user", "after the purge"))
    named = r"event 2 of 'conv' is not in the store: a retention purge deleted it"
    with pytest.raises(ValueError, match=named):
        explain(store, "conv", 2)
    with pytest.raises(ValueError, match=named):
        memory.as_of(seq=2)


@pytest.mark.skip_backend("memory", "postgres")
def test_chatledger_explain_of_a_quarantined_event_is_one_line(backend, reopen, capsys) -> None:
    store = reopen()
    _conversation(store)
    backend.tamper(store, "conv", 3, "payload", user_payload("FORGED"))
    reopen().quarantine("conv", 3, reason="disk fault")
    status = main(["explain", "conv", "3", "--db", str(backend.path)])
    err = capsys.readouterr().err
    assert status == 1
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "acknowledged by quarantine" in err


def test_the_events_after_a_quarantined_one_are_explained_and_diffed(backend, reopen) -> None:
    # Before, a walk starting at the acknowledged record (explain of the next event, a diff
    # from it) failed unpacking its missing row: "not enough values to unpack".
    store = reopen()
    _conversation(store)
    backend.tamper(store, "conv", 3, "payload", user_payload("FORGED"))
    fresh = reopen()
    fresh.quarantine("conv", 3, reason="disk fault")
    assert explain(fresh, "conv", 4).entered_at == 4
    changes = diff(fresh, "conv", 3, 5)
    assert [c.entry.ref for c in changes.entered] == [(4, 0), (5, 0)]


def test_time_travel_into_a_purged_span_is_refused_not_empty(store) -> None:
    # Before, as_of(at=) a time the purge deleted, and what_if(seq=) a purged seq, answered
    # [] - "the model saw nothing" - where what it saw is unknown.
    memory = _conversation(store)
    during = store.read("conv")[-1].recorded_at
    store.purge("conv", expected_seq=5, reason="retention")
    memory.add(a_message("user", "after the purge"))
    named = r"of 'conv': events 1\.\.5 were deleted by a retention purge"
    with pytest.raises(ValueError, match=named):
        memory.as_of(at=during)
    with pytest.raises(ValueError, match=named):
        what_if(store, "conv", MessageWindowPolicy(2), seq=3)
    with pytest.raises(ValueError, match=named):
        what_if(store, "conv", MessageWindowPolicy(2), at=during)
    assert memory.as_of(seq=0) == [] and what_if(store, "conv", MessageWindowPolicy(2), seq=0) == []
    assert len(what_if(store, "conv", MessageWindowPolicy(2), seq=7)) == 1
