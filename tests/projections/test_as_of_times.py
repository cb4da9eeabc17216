"""[forger] against reads by time: ``as_of(at=)`` and ``what_if(at=)`` find their seq by the
stored times, a column anyone with write access can edit. A record's time moved past the
asked moment must be refused, not answered with an earlier (genuine) view the memory did not
show then. Real SQLite files and PostgreSQL schemas, edited with plain SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from freezegun import freeze_time

from eventlog import ChainIntegrityError, UserMessage
from eventlog.store import EventStore
from projections import MessageWindowChatMemory, MessageWindowPolicy, what_if
from projections.inspector.search import jump_seq
from tests.conftest import Backend

KEY = b"the application's chain key, 32b"
AT = datetime(2026, 1, 3, 12, tzinfo=UTC)  # after day 3's message, before day 4's

pytestmark = pytest.mark.skip_backend("memory")  # attacks edit files and rows


def _days(backend: Backend, keyed: bool) -> EventStore:
    """Five messages, one a day from 2026-01-01; a window of two, so neither the head's window
    nor the view at ``AT`` reads record 3."""
    store = backend.open(chain_key=KEY) if keyed else backend.open()
    for day, text in enumerate(["one", "two", "three", "four", "five"], start=1):
        with freeze_time(f"2026-01-0{day}"):
            MessageWindowChatMemory(id="conv", max_messages=2, store=store).add(UserMessage(text))
    return store


def _texts(messages: Sequence[object]) -> list[str]:
    return [m.text for m in messages]  # type: ignore[attr-defined]


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed-by-hand"])
@pytest.mark.parametrize("seq", [3, 1], ids=["answer-moved-back", "before-every-event"])
def test_a_time_moved_past_the_asked_moment_is_refused_not_an_earlier_view(backend, keyed, seq):
    store = _days(backend, keyed)
    memory = MessageWindowChatMemory(id="conv", max_messages=2, store=store)
    policy = MessageWindowPolicy(max_messages=2)
    at = AT if seq == 3 else datetime(2026, 1, 1, 12, tzinfo=UTC)
    before = _texts(memory.as_of(at=at))
    assert before == (["two", "three"] if seq == 3 else ["one"])
    # The attacker dates record `seq` (the answer) past the asked moment: the stored times
    # alone then name the record before it (or none), whose genuine view would be served.
    backend.tamper(store, "conv", seq, "recorded_at", "2026-01-03T23:00:00.000000Z")
    # Check both reads by time refuse, naming the record, instead of an earlier view.
    with pytest.raises(ChainIntegrityError, match=f"conv breaks at seq {seq}"):
        memory.as_of(at=at)
    with pytest.raises(ChainIntegrityError, match=f"conv breaks at seq {seq}"):
        what_if(store, "conv", policy, at=at)
    with pytest.raises(ChainIntegrityError, match=f"conv breaks at seq {seq}"):
        jump_seq(store, "conv", at.isoformat())  # the inspector's "jump to a time"
    if seq == 3:
        # Check a read by seq of a view without the record still answers (every read also
        # checks the first record: with that one edited, every read refuses).
        assert _texts(memory.as_of(seq=2)) == ["one", "two"]
