"""Hash chain functions and the record <-> event round trip (Hypothesis)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventlog import InMemoryEventStore
from eventlog.hashing import (
    GENESIS,
    chain_hash,
    chain_hash_v2,
    first_break,
    record_hash,
    stored_record_problem,
    verifies,
)
from eventlog.models import ContentErased, MessageAdded, MessagesSet, Record
from eventlog.serialization import decode_event, encode_event
from eventlog.testing.records import added
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


@given(fields, fields, st.sampled_from([None, b"k" * 16]))
def test_different_format_2_and_3_records_never_share_a_hash_input(a, b, key):
    # Format 2/3 length-prefix recorded_at and the commitment too (free text here on purpose).
    def digest(f):
        return chain_hash_v2(GENESIS, f[0], f[1], f[2], f[3], f[4], f[5], f[6], key)

    assert (digest(a) == digest(b)) == (a == b)


def test_format_2_and_3_preimages_are_tagged_apart_from_format_1():
    # Same fields, three formats: three different hashes, and format 3 depends on the key.
    a = (GENESIS, "s", 1, "k", 1, "2025-01-01T00:00:00.000000Z", "p", "")
    hashes = {chain_hash(*a), chain_hash_v2(*a), chain_hash_v2(*a, b"k" * 16)}
    assert len(hashes) == 3
    assert chain_hash_v2(*a, b"k" * 16) != chain_hash_v2(*a, b"j" * 16)


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
        encode_event(e, {"w": []})
        for e in map(decode_event, records)
        if not isinstance(e, ContentErased)
    ]


# ------------------------------------------------------------------ one test per verify rule
#
# first_break has five rules. Each test below breaks exactly one of them and leaves every
# record self-consistent wherever it can (its hash recomputed with record_hash), so removing
# that one rule from first_break makes that test fail.


def _chain(*texts: str, fmt: int = 1) -> list[Record]:
    # Format 1 by default: these rules hold for every format, and format 1 records written
    # before format 2 must keep verifying; the v2/v3 tests further down pass fmt=None.
    store = InMemoryEventStore()
    return store.append("h", [added(t)._replace(format=fmt) for t in texts])


def _rehash(record: Record, **changes: Any) -> Record:
    """The record with ``changes`` applied and its own hash recomputed, as a forger would."""
    edited = record._replace(**changes)
    return edited._replace(hash=record_hash(edited))


def test_intact_chains_verify_from_genesis_and_from_a_tombstone():
    assert first_break(_chain("a", "b", "c")) is None
    store = InMemoryEventStore()
    store.append("h", [added("a"), added("b")])
    store.purge("h", expected_seq=2, reason="test")
    store.append("h", [added("c")])
    # Check a purged stream, which starts at its tombstone (seq 3), verifies.
    assert first_break(store.read("h")) is None


def test_rule_hash_matches_content():
    a, b, c = _chain("a", "b", "c")
    # Check an edit without a new hash is caught at the edited record itself.
    assert first_break([a, b._replace(payload=b.payload.replace("b", "B")), c]) == (
        2,
        "stored hash does not match the record's content",
    )


def test_rule_prev_hash_links_to_the_previous_record():
    a, b, c = _chain("a", "b", "c")
    forged = _rehash(b, payload=b.payload.replace("b", "B"))
    # Check the forged record is self-consistent, so only the next record's link gives it away.
    assert record_hash(forged) == forged.hash
    assert first_break([a, forged, c]) == (
        3,
        "prev_hash does not match the previous record's hash",
    )


def test_rule_seq_1_chains_to_genesis():
    (a,) = _chain("a")
    forged = _rehash(a, prev_hash="a" * 64)
    # Check a first record that claims a predecessor is caught, even with nothing after it.
    assert first_break([forged]) == (1, "prev_hash does not match the previous record's hash")


def test_rule_a_stream_starts_at_seq_1_or_at_a_tombstone():
    _, b, c = _chain("a", "b", "c")
    # Check losing the first record is caught: seq 2 is no tombstone, so seq 1 must exist.
    assert first_break([b, c]) == (2, "records before seq 2 are missing")


def test_rule_seqs_have_no_gaps():
    a, b, c = _chain("a", "b", "c")
    # A forger renumbers seq 3 to 4 and rehashes it (seq is hashed): its link to seq 2 holds,
    # so only the seq rule sees the hole.
    renumbered = _rehash(c, seq=4)
    assert first_break([a, b, renumbered]) == (4, "seq 3 is missing (found 4 next)")


def test_known_gap_a_rehashed_last_record_verifies():
    a, b, c = _chain("a", "b", "c")
    # Nothing follows the last record, so no link can contradict a rehashed forgery of it:
    # catching that needs a digest of the head kept outside the store (another issue's work).
    # This asserts today's behaviour so the gap stays visible; flip it when that lands.
    assert first_break([a, b, _rehash(c, payload=c.payload.replace("c", "C"))]) is None
    # Likewise a stream cut down to a tombstone start: the tombstone's prev_hash is trusted.
    tomb = _rehash(c, kind="memory_purged")
    assert first_break([tomb]) is None


@given(st.binary(min_size=16, max_size=100), st.text(max_size=8))
def test_the_keyed_chain_hash_is_hmac_sha256(key, meta):
    import hashlib
    import hmac

    fields = (GENESIS, "s", 1, "k", 1, "2025-01-01T00:00:00.000000Z", "c" * 64, meta)
    plain = chain_hash_v2(*fields)
    # Check against the standard library's HMAC (keys longer than a block included), over the
    # format 3 preimage, which differs from format 2's only in its version tag.
    preimage = (
        f"chatledger.v3\x1f{GENESIS}\x1f1:s\x1f1\x1f1:k\x1f1\x1f27:2025-01-01T00:00:00.000000Z"
        f"\x1f64:{'c' * 64}\x1f{len(meta)}:{meta}"
    ).encode()
    assert chain_hash_v2(*fields, key) == hmac.digest(key, preimage, "sha256").hex()
    assert plain == hashlib.sha256(preimage.replace(b"v3", b"v2", 1)).hexdigest()


# verify(digest=)'s fast check: never more lenient than the full one, and it takes the common case.
_KEY = b"k" * 32
_odd_values = st.one_of(
    st.text(max_size=70),
    st.binary(max_size=8),
    st.integers(-2, 2**40),
    st.just("F" * 64),  # hex, but not lowercase
    st.just(" " + "0" * 31),  # bytes.fromhex takes it; the format does not
    st.just(GENESIS),
)
# Every field but the position, which is an integer in every backend (its primary key).
_record_fields = st.sampled_from([f for f in Record._fields if f != "position"])


def _stored(text: str, key: bytes | None) -> list[Record]:
    store = InMemoryEventStore(key=key)
    return store.append("m", [added(text), added(text + "!", meta='{"w":[]}')])


@given(
    text=st.text(max_size=12),
    written_with=st.sampled_from([None, _KEY]),
    edits=st.lists(st.tuples(_record_fields, _odd_values), max_size=3),
    position=st.integers(-1, 3),
    checked_with=st.sampled_from([None, _KEY, b"j" * 32]),
    keyed_since=st.integers(-1, 3),
)
def test_the_fast_check_passes_only_what_the_full_check_passes(
    *, text, written_with, edits, position, checked_with, keyed_since
):
    for record in _stored(text, written_with):
        edited = record._replace(**dict(edits), position=record.position * position)
        # A value no backend returns (an int in a text column) may raise: in both or neither.
        full: object
        try:
            full = stored_record_problem(edited, checked_with, keyed_since)
        except (TypeError, AttributeError):
            full = TypeError
        try:
            fast: object = verifies(edited, checked_with, keyed_since)
        except (TypeError, AttributeError):
            fast = TypeError
        assert fast is not True or full is None
        assert fast is not TypeError or full is TypeError


@given(st.text(max_size=40), st.sampled_from([None, _KEY]))
def test_the_fast_check_takes_every_intact_record_of_formats_2_and_3(text, key):
    records = _stored(text, key)
    assert [r.format for r in records] == [2, 2] if key is None else [3, 3]
    assert all(verifies(r, key, 0) for r in records)
    # ... and leaves the rest to the full check: no key for a keyed record, a wrong key,
    # an unkeyed record where a key applies, an erased payload, one changed character.
    first = records[0]
    assert not verifies(first, None if key else _KEY, 0)
    assert not verifies(first._replace(payload="", salt=""), key, 0)
    assert not verifies(first._replace(meta=first.meta + " "), key, 0)
    # The same salt bytes in capitals: the commitment still matches, the format does not.
    assert first.salt == first.salt.lower()
    if first.salt != first.salt.upper():
        assert not verifies(first._replace(salt=first.salt.upper()), key, 0)
    # A link in capitals, rehashed by someone holding whatever the chain needs: still refused.
    second = records[1]
    shouting = second.prev_hash.upper()
    rehashed = second._replace(
        prev_hash=shouting,
        hash=chain_hash_v2(
            shouting,
            "m",
            2,
            second.kind,
            1,
            second.recorded_at_text,
            second.commitment,
            second.meta,
            key,
        ),
    )
    assert stored_record_problem(rehashed, key, 0) is not None
    assert verifies(rehashed._replace(prev_hash=second.prev_hash), key, 0) is False
    assert not verifies(rehashed, key, 0)
    if key:
        assert not verifies(first, b"j" * 32, 0)


@pytest.mark.parametrize(
    ("fmt", "salt", "payload", "erased"),
    [
        (2, "", "", True),  # what erase() leaves: payload and salt gone, commitment kept
        (3, "", "", True),
        (1, "", "", False),  # format 1 has no salt at all: an empty payload is just empty
        (2, "ab" * 16, "", False),  # an empty payload still committed to under its salt
        (2, "", "{}", False),  # a payload without its salt is damage, not an erasure
        (2, "ab" * 16, "{}", False),
    ],
)
def test_a_record_is_erased_exactly_when_a_salted_format_lost_payload_and_salt(
    fmt, salt, payload, erased
):
    record = Record(1, "m", 1, "2026-01-01T00:00:00.000000Z", "k", 1, payload, "", GENESIS, "")
    assert record._replace(format=fmt, salt=salt).erased is erased
