"""Hash chain functions and the record <-> event round trip (Hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eventlog import InMemoryEventStore
from eventlog.hashing import GENESIS, chain_hash, first_break, record_hash
from eventlog.models import MessageAdded, MessagesSet
from eventlog.serialization import decode_event, encode_event
from tests.strategies import chat_messages

fields = st.tuples(
    st.text(max_size=6),  # stream key: any characters, separators included
    st.integers(0, 10**6),
    st.text(max_size=6),  # kind
    st.integers(1, 3),
    st.text(max_size=6),  # recorded_at (free text here on purpose)
    st.text(max_size=8),  # payload
    st.text(max_size=8),  # meta
)


@given(fields, fields)
def test_different_records_never_share_a_hash_input(a, b):
    # A shared preimage would be a collision no SHA-256 strength could prevent.
    assert (chain_hash(GENESIS, *a) == chain_hash(GENESIS, *b)) == (a == b)


@given(st.lists(chat_messages(), min_size=1, max_size=4), st.booleans())
def test_events_round_trip_through_stored_records(messages, as_set):
    store = InMemoryEventStore()
    events = (
        [MessagesSet(messages=tuple(messages))]
        if as_set
        else [MessageAdded(message=m) for m in messages]
    )
    records = store.append("h", [encode_event(e, {"w": []}) for e in events])
    # Check decoding gives the same events, and the stored hashes verify.
    assert [decode_event(r) for r in records] == events
    assert all(record_hash(r) == r.hash for r in records)
    assert first_break(records) is None
    # Check the same event always encodes to the same bytes (what the hash covers).
    assert [encode_event(e, {"w": []}) for e in events] == [
        encode_event(decode_event(r), {"w": []}) for r in records
    ]
