"""Hash chain functions and the record <-> event round trip (Hypothesis)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventlog import InMemoryEventStore
from eventlog.hashing import (
    CONTENT_MISMATCH,
    GENESIS,
    KEYED_CHAIN,
    chain_hash,
    chain_hash_v2,
    check_stream,
    first_break,
    malformed,
    record_hash,
    record_problem,
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
    store = InMemoryEventStore(chain_key=key)
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


@pytest.mark.parametrize("size", [1, 32, 63, 64, 65, 200])
def test_the_keyed_chain_hash_is_hmac_sha256_at_every_key_size(size):
    import hmac

    # A key of exactly one SHA-256 block (64 bytes) is used as is; only a longer one is
    # hashed first (RFC 2104).
    key = bytes(i % 256 for i in range(size))
    fields = (GENESIS, "s", 1, "k", 1, "2025-01-01T00:00:00.000000Z", "c" * 64, "")
    preimage = (
        f"chatledger.v3\x1f{GENESIS}\x1f1:s\x1f1\x1f1:k\x1f1\x1f27:2025-01-01T00:00:00.000000Z"
        f"\x1f64:{'c' * 64}\x1f0:"
    ).encode()
    assert chain_hash_v2(*fields, key) == hmac.digest(key, preimage, "sha256").hex()


def test_record_hash_refuses_an_unknown_format_and_a_keyed_one_without_the_key():
    record = _stored("a", _KEY)[0]
    assert record_hash(record, _KEY) == record.hash
    with pytest.raises(ValueError, match=r"^record_hash of m#1: format 3 needs the store's key$"):
        record_hash(record)
    for fmt in (0, 4):
        with pytest.raises(ValueError, match=rf"^record_hash of m#1: format {fmt} is unknown$"):
            record_hash(record._replace(format=fmt), _KEY)


@pytest.mark.parametrize("position", [0, -1])
def test_a_record_at_a_position_below_1_was_moved_by_hand(position):
    record = _stored("a", None)[0]
    assert stored_record_problem(record, None, 0) is None
    assert stored_record_problem(record._replace(position=position), None, 0) == (
        f"position {position} is not positive: the row was moved by hand"
    )


def test_rows_a_store_writes_are_not_malformed():
    for key in (None, _KEY):
        for record in _stored("a", key):
            assert malformed(record) is None
    (legacy,) = _chain("a")  # format 1: no salt, no commitment
    assert malformed(legacy) is None
    erased = _stored("a", None)[0]._replace(payload="", salt="")
    assert malformed(erased) is None
    assert malformed(_chain("a")[0]._replace(stream_id="~i:7")) is None  # a tagged key


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"seq": "1"}, "malformed seq '1': not an integer"),
        ({"schema_version": 1.0}, "malformed schema_version 1.0: not an integer"),
        ({"format": True}, "malformed format True: not an integer"),
        ({"stream_id": "~i:07"}, "malformed stream key '~i:07': not the canonical key"),
        ({"stream_id": "~x"}, "malformed stream key '~x': not the canonical key"),
        ({"stream_id": 5}, "malformed stream key 5: not the canonical key"),
        ({"recorded_at_text": "2026-01-01T00:00:00Z"}, "malformed recorded_at '2026-01-01T00"),
        ({"recorded_at_text": "yesterday"}, "malformed recorded_at 'yesterday'"),
        ({"hash": "F" * 64}, "malformed hash 'FFFF"),
        ({"prev_hash": None}, "malformed prev_hash None: not 64 lowercase hex digits"),
        ({"format": 4}, "malformed format 4: not 1, 2 or 3"),
        ({"commitment": ""}, "malformed commitment '': not 64 lowercase hex digits"),
        ({"salt": "AB" * 16}, "malformed salt 'ABAB"),
    ],
)
def test_a_row_no_store_would_write_is_malformed(changes, reason):
    record = _stored("a", None)[0]
    problem = malformed(record._replace(**changes))
    assert problem is not None and problem.startswith(reason), problem


def test_a_format_1_row_needs_no_commitment_or_salt_to_be_well_formed():
    (legacy,) = _chain("a")
    assert malformed(legacy._replace(commitment="", salt="")) is None
    assert malformed(legacy._replace(commitment="x", salt="y")) is None  # format 1 ignores them


def test_a_keyed_record_checked_without_the_key_says_so():
    record = _stored("a", _KEY)[0]
    assert record_problem(record, _KEY) is None
    assert record_problem(record) == KEYED_CHAIN
    assert record_problem(record, b"j" * 32) == CONTENT_MISMATCH


def test_the_fast_check_takes_an_unkeyed_record_up_to_the_keyed_boundary():
    record = _stored("a", None)[0]  # format 2, at position 1
    # At the boundary it is legacy (written before keying), after it only a forger wrote it.
    assert stored_record_problem(record, _KEY, keyed_since=1) is None
    assert verifies(record, _KEY, 1) is True
    assert stored_record_problem(record, _KEY, keyed_since=0) is not None
    assert verifies(record, _KEY, 0) is False


def test_a_full_check_reports_every_malformed_row_and_the_first_failure():
    a, b, c, d = _chain("a", "b", "c", "d")
    problem = record_problem
    assert check_stream([a, b, c, d], problem, full=True) == (None, [])
    odd_b, odd_d = b._replace(recorded_at_text="now"), d._replace(stream_id="~x")
    reason_b, reason_d = malformed(odd_b), malformed(odd_d)
    assert reason_b is not None and reason_d is not None
    # A well-formed row between them: the walk goes on past it to the end.
    assert check_stream([a, odd_b, c, odd_d], problem, full=True) == (
        (2, reason_b),
        [(2, reason_b), (4, reason_d)],
    )
    # Without `full`, rows are not checked for malformed text and the walk stops at a failure.
    assert check_stream([a, odd_b, c, odd_d], problem) == ((2, CONTENT_MISMATCH), [])
