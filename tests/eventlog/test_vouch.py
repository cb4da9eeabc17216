"""The read path's checks one by one (eventlog.vouch), on the in-memory store, whose rows and
seals a test can edit directly: each refusal names the memory, the seq and the reason."""

from __future__ import annotations

import pytest

from eventlog import ChainIntegrityError, InMemoryEventStore
from eventlog.hashing import KEYED_CHAIN, RANGE_ROW_FIELDS, head_mac, verified_run
from eventlog.models import HeadSeal
from eventlog.testing.records import batch
from eventlog.vouch import NO_SEALS, erased_bound, head_problem, restored, seal_problem

KEY = b"k" * 32


@pytest.fixture
def store():
    s = InMemoryEventStore()
    s.append("m", batch("a", "b", "c", "d"))
    return s


def _refused(store, match, **bounds):
    with pytest.raises(ChainIntegrityError, match=match) as caught:
        store.read_verified("m", **bounds)
    assert caught.value.stream_id == "m"
    return caught.value


def test_an_intact_memory_is_served_for_every_range(store):
    assert [r.seq for r in store.read_verified("m")] == [1, 2, 3, 4]
    assert [r.seq for r in store.read_verified("m", gt=1, lte=3)] == [2, 3]
    assert [r.seq for r in store.read_verified("m", desc=True, limit=2)] == [4, 3]
    assert [r.seq for r in store.read_verified("m", gt=10)] == []
    assert store.read_verified("nobody") == []


def test_a_blank_or_forged_seal_is_refused(store):
    seal = store._seals["m"]
    store._seals["m"] = seal._replace(mac="")
    _refused(store, "head seal is missing")
    store._seals["m"] = seal._replace(mac=head_mac(None, "m", 3, seal.hash))
    _refused(store, "head seal does not verify")
    # A seal moved back to an earlier record with a valid-looking mac of the wrong erasure.
    store._seals["m"] = seal._replace(erased_through=2)
    _refused(store, "does not verify")


def test_records_gone_or_seal_gone(store):
    seal = store._seals.pop("m")
    _refused(store, "no head seal")
    store._seals["m"] = seal
    store._streams["m"] = []
    error = _refused(store, "records are gone")
    assert error.seq == 4


def test_a_seal_without_a_key_in_a_keyed_ledger_cannot_be_checked():
    keyed = InMemoryEventStore(chain_key=KEY)
    keyed.append("m", batch("a"))
    seal = keyed._seals["m"]
    keyed._key = None  # as a store opened without the key would be
    assert seal_problem(keyed, "m", seal) == KEYED_CHAIN


def test_ledgers_from_before_seals_are_checked_but_for_their_head(store):
    store._seals_required = False
    last = store.read("m", desc=True, limit=1)[0]
    assert head_problem(store, "m", last, NO_SEALS) is None
    assert head_problem(store, "m", last, HeadSeal(4, last.hash, "")) is None
    store._seals_required = True
    assert head_problem(store, "m", last, NO_SEALS) == (
        4,
        "it has records but no head seal (a seal deleted by hand)",
    )


def test_records_out_of_place_or_missing_at_the_end_of_a_descending_read(store, monkeypatch):
    real = store.read

    def shifted(memory_id, **bounds):
        found = real(memory_id, **bounds)
        return found[1:] if bounds.get("desc") and len(found) > 1 else found

    monkeypatch.setattr(store, "read", shifted)
    error = _refused(store, "seq 4 is missing", desc=True, limit=3)
    assert error.seq == 4

    def beyond(memory_id, **bounds):
        found = real(memory_id)
        return found if bounds.get("lte") == 2 else real(memory_id, **bounds)

    monkeypatch.setattr(store, "read", beyond)
    _refused(store, "seq 4 is out of place", lte=2)


def test_a_first_record_that_does_not_start_the_chain(store):
    stream = store._streams["m"]
    stream[0] = stream[0]._replace(prev_hash="a" * 64)
    _refused(store, "does not start the chain", gt=2)


def test_a_head_that_keeps_moving_is_given_up(store, monkeypatch):
    seals = iter(range(100))

    def moving(key):
        seal, first, last = InMemoryEventStore._ends(store, key)
        return seal._replace(seq=5 + next(seals)), first, last

    monkeypatch.setattr(store, "_ends", moving)
    _refused(store, "kept moving")


def test_unkeyed_records_of_a_keyed_ledger_are_walked_once_per_head():
    plain = _legacy_ledger()
    walks = []
    real = plain._pages

    def counted(key):
        walks.append(key)
        return real(key)

    plain._pages = counted  # type: ignore[method-assign]
    assert len(plain.read_verified("m")) == 2
    assert len(plain.read_verified("m", gt=1)) == 1
    assert walks == ["m"]  # the second read trusts the walk at the same head
    stream = plain._streams["m"]
    stream[0] = stream[0]._replace(meta='{"x":1}')
    plain.__dict__["_legacy_vouched"].clear()
    _refused(plain, "stored hash does not match")


def _range_rows(store, key="u1"):
    return list(store._range_rows(key, 0, None))


def test_verified_run_stops_at_the_first_row_verifies_would_not_pass():
    store = InMemoryEventStore()
    store.append("u1", batch("a", "b", "c", "d"))
    rows = _range_rows(store)
    # Check an intact run passes whole, and every prefix of it too.
    assert verified_run("u1", rows, None, 0) == 4
    assert verified_run("u1", rows[1:], None, 0) == 3
    # Check a change to any field of row 3 (index 2) stops the run there, never later: the
    # field is hashed, or it is the link, or it makes the row one the loop leaves to vouch().
    changes = {
        "seq": 9, "recorded_at_text": "2020-01-01T00:00:00.000000Z", "kind": "memory_cleared",
        "schema_version": 2, "payload": '{"forged":1}', "meta": "{}", "prev_hash": "a" * 64,
        "hash": "b" * 64, "salt": "c" * 32, "commitment": "d" * 64, "format": 1, "position": 0,
    }  # fmt: skip
    assert set(changes) == set(RANGE_ROW_FIELDS)
    for field, value in changes.items():
        changed = list(rows)
        row = list(changed[2])
        row[RANGE_ROW_FIELDS.index(field)] = value
        changed[2] = tuple(row)
        assert verified_run("u1", changed, None, 0) == 2, field
    # Check rows of another memory, non-hex text, or content within an erasure stop it too.
    assert verified_run("u2", rows, None, 0) == 0
    odd = list(rows[0])
    odd[RANGE_ROW_FIELDS.index("salt")] = "zz" * 16
    assert verified_run("u1", [tuple(odd), *rows[1:]], None, 0) == 0
    assert verified_run("u1", rows, None, 2) == 0
    # Check a keyed check of unkeyed rows leaves them to the full path.
    assert verified_run("u1", rows, b"k" * 32, 0) == 0


def test_content_back_in_the_last_record_an_erasure_reached_is_refused(store):
    # An import of an erasure's emptied records (without its receipt) seals the memory erased
    # through the last of them: the bound is inclusive, so that record may not hold content.
    before = store._streams["m"][3]
    store.erase("m", reason="request 7")
    store._streams["m"] = store._streams["m"][:4]
    store._seal("m", store._streams["m"][3], erased_through=4)
    assert store.read_verified("m") == store._streams["m"]
    store._streams["m"][3] = before  # put back from a backup: it matches the commitment
    error = _refused(store, "content is back", gt=2)
    assert error.seq == 4
    assert restored(before, 4) is not None
    assert restored(before, 3) is None


def test_ends_that_show_a_first_record_but_no_newest_are_refused_not_crashed(store, monkeypatch):
    # A backend whose ends are not one snapshot (or a forged one) may show a first record and
    # no newest: records read then have no head to be vouched for.
    _, first, _ = store._ends("m")
    monkeypatch.setattr(store, "_ends", lambda key: (None, first, None))
    error = _refused(store, "no head", gt=1)
    assert error.seq == 2
    with pytest.raises(ChainIntegrityError, match="no head"):
        store.read_verified_rows("m")


def test_an_unkeyed_ledger_never_walks_a_memory_to_serve_a_read(store, monkeypatch):
    # A read costs the records it returns, not the history: nothing outside the range (the
    # first record and the head aside) is read, so a damaged record outside it is not either.
    def walked(key):
        raise AssertionError(f"{key} walked")

    monkeypatch.setattr(store, "_pages", walked)
    assert [r.seq for r in store.read_verified("m", gt=1, lte=3)] == [2, 3]
    assert [r.seq for r in store.read_verified("m", desc=True, limit=1)] == [4]


def test_the_row_read_refuses_content_put_back_after_an_erasure(store):
    # read_verified_rows checks most rows in one loop: that loop must know the erasure's bound
    # too, or content restored from a backup (matching its commitment) would be served.
    # The range starts at the restored record, so no emptied row sends it to the full path.
    before = store._streams["m"][3]
    store.erase("m", reason="request 7")
    store.append("m", batch("e"))
    assert [row[0] for row in store.read_verified_rows("m")] == [1, 2, 3, 4, 5, 6]
    store._streams["m"][3] = before
    with pytest.raises(ChainIntegrityError, match="content is back") as caught:
        store.read_verified_rows("m", gt=3)
    assert caught.value.seq == 4


def _legacy_ledger() -> InMemoryEventStore:
    """A keyed ledger whose memory "m" holds two unkeyed records: the legacy prefix, as
    adopt_key=True would leave it."""
    plain = InMemoryEventStore()
    plain.append("m", batch("a", "b"))
    plain._key, plain._keyed_db, plain._keyed_since = KEY, True, 2
    seal = plain._seals["m"]
    plain._seals["m"] = seal._replace(mac=head_mac(KEY, "m", 2, seal.hash))
    return plain


def test_the_walked_hashes_kept_are_bounded_in_memories():
    # Each memory walked leaves an entry: one who can make memories must not grow it forever.
    plain = _legacy_ledger()
    stale = {f"other{i}": ("h", 1, b"x" * 8) for i in range(10_001)}
    plain.__dict__["_legacy_vouched"] = dict(stale)
    assert len(plain.read_verified("m")) == 2
    assert list(plain.__dict__["_legacy_vouched"]) == ["m"]
    # Up to the bound (10,000 other memories) nothing is dropped: the walks stay cached.
    plain.__dict__["_legacy_vouched"] = dict(list(stale.items())[:10_000])
    plain.read_verified("m")
    assert len(plain.__dict__["_legacy_vouched"]) == 10_001


def test_the_walked_hashes_kept_are_bounded_in_bytes():
    # Memory "m" keeps 16 bytes (8 per record): with the others it may fill the 64 MiB bound
    # exactly, and one byte more drops the others.
    plain = _legacy_ledger()
    bound = 64 << 20
    plain.__dict__["_legacy_vouched"] = {"other": ("h", 1, bytes(bound - 16))}
    plain.read_verified("m")
    assert sorted(plain.__dict__["_legacy_vouched"]) == ["m", "other"]
    plain.__dict__["_legacy_vouched"] = {"other": ("h", 1, bytes(bound - 15))}
    plain.read_verified("m")
    assert list(plain.__dict__["_legacy_vouched"]) == ["m"]


def test_a_newest_record_rewritten_in_place_is_named_at_its_seq(store):
    # Same seq as the seal, another hash (a forger rewrote the last message and recomputed
    # its hash): not a truncation, so the error names that record, not a missing one.
    stream = store._streams["m"]
    stream[3] = stream[3]._replace(hash="b" * 64)
    error = _refused(store, r"the newest record is not the sealed head \(seq 4\)", gt=3)
    assert error.seq == 4


def test_a_read_of_no_records_is_served(store):
    assert store.read_verified("m", limit=0) == []
    assert store.read_verified("m", desc=True, limit=0) == []


def _stale_ends(store, monkeypatch):
    """Ends as read before another writer appended seq 5: the read runs after that append."""
    ends = store._ends("m")
    store.append("m", batch("e"))
    monkeypatch.setattr(store, "_ends", lambda key: ends)


def test_a_row_deleted_at_the_start_is_refused_though_an_append_lengthened_the_answer(
    store, monkeypatch
):
    # Seq 2 gone, seq 5 appended since the ends were read: as many rows as the range needs,
    # but not the ones it needs.
    _stale_ends(store, monkeypatch)
    real_rows, real_read = store._range_rows, store.read
    monkeypatch.setattr(store, "_range_rows", lambda *a: [r for r in real_rows(*a) if r[0] != 2])
    monkeypatch.setattr(
        store, "read", lambda *a, **k: [r for r in real_read(*a, **k) if r.seq != 2]
    )
    with pytest.raises(ChainIntegrityError, match="seq 2 is missing") as caught:
        store.read_verified_rows("m", gt=1)
    assert caught.value.seq == 2
    assert _refused(store, "seq 2 is missing", gt=1).seq == 2


def test_the_oldest_or_newest_records_missing_from_a_descending_read_are_named(store, monkeypatch):
    real = store.read

    def dropping(cut):
        monkeypatch.setattr(store, "read", lambda *a, **k: cut(real(*a, **k)))

    dropping(lambda found: found[:-1])  # the oldest of the records asked for
    assert _refused(store, "seq 2 is missing", desc=True, limit=3).seq == 2
    dropping(lambda found: found[2:])  # the newest two
    assert _refused(store, "seq 3 is missing", desc=True, limit=4).seq == 3
    dropping(lambda found: [])
    assert _refused(store, "seq 4 is missing", desc=True, limit=2).seq == 4


def test_a_ledger_from_before_seals_still_refuses_a_short_range(store, monkeypatch):
    # No seal to say where the head is: the newest record says it, so a record deleted
    # inside the range is still refused.
    store._seals_required = False
    ends = store._ends("m")
    monkeypatch.setattr(store, "_ends", lambda key: (NO_SEALS, ends[1], ends[2]))
    assert [r.seq for r in store.read_verified("m", gt=1, lte=3)] == [2, 3]
    real_rows, real_read = store._range_rows, store.read
    monkeypatch.setattr(
        store, "read", lambda *a, **k: [r for r in real_read(*a, **k) if r.seq != 3]
    )
    monkeypatch.setattr(store, "_range_rows", lambda *a: [r for r in real_rows(*a) if r[0] != 3])
    assert _refused(store, "seq 3 is missing", gt=1, lte=3).seq == 3
    with pytest.raises(ChainIntegrityError, match="seq 3 is missing"):
        store.read_verified_rows("m", gt=1, lte=3)


def test_a_missing_or_unchained_first_record_is_named_at_seq_1(store, monkeypatch):
    seal, _, last = store._ends("m")
    monkeypatch.setattr(store, "_ends", lambda key: (seal, None, last))
    assert _refused(store, "first record is missing", gt=2).seq == 1
    monkeypatch.undo()
    stream = store._streams["m"]
    first = stream.pop(0)
    assert _refused(store, "records before seq 2 are missing", gt=2).seq == 1
    stream.insert(0, first._replace(prev_hash="a" * 64))
    assert _refused(store, "does not start the chain", gt=2).seq == 1


def test_a_head_given_up_on_names_no_record(store, monkeypatch):
    seals = iter(range(100))
    monkeypatch.setattr(
        store, "_ends", lambda key: (store._seals[key]._replace(seq=5 + next(seals)), None, None)
    )
    assert _refused(store, "kept moving").seq == 0


def test_a_keyed_ledger_of_keyed_records_never_walks_a_memory():
    keyed = InMemoryEventStore(chain_key=KEY)
    keyed.append("m", batch("a", "b", "c"))

    def walked(key):
        raise AssertionError(f"{key} walked")

    keyed._pages = walked  # type: ignore[method-assign]
    assert [r.seq for r in keyed.read_verified("m", gt=1)] == [2, 3]


def test_an_unkeyed_record_read_other_than_the_walk_saw_it_is_refused(monkeypatch):
    # A one-record read (as_of) is bound by no link: a forger's unkeyed record 1, hash
    # recomputed (it verifies on its own), read while the walk saw the real one.
    plain = _legacy_ledger()
    forger = InMemoryEventStore()
    forger.append("m", batch("forged"))
    (forged,) = forger._streams["m"]
    assert plain.check(forged) is None and forged.hash != plain._streams["m"][0].hash
    real = plain.read

    def rewritten(key, **bounds):
        return [forged] if bounds.get("lte") == 1 else real(key, **bounds)

    monkeypatch.setattr(plain, "read", rewritten)
    assert _refused(plain, "changed while it was read", lte=1).seq == 1
    # And when the walk is already cached at this head: the cache does not vouch for it.
    monkeypatch.undo()
    plain.read_verified("m")
    monkeypatch.setattr(plain, "read", rewritten)
    assert _refused(plain, "changed while it was read", lte=1).seq == 1


def test_half_the_content_put_back_is_refused_too(store):
    # Salt or payload alone back in an erased record: either is content the erasure removed.
    original = store._streams["m"][1]
    store.erase("m", reason="request 7")
    emptied = store._streams["m"][1]
    assert restored(emptied, 5) is None
    assert restored(emptied._replace(salt=original.salt), 5) is not None
    assert restored(emptied._replace(payload=original.payload), 5) is not None


def test_a_memory_without_a_seal_is_reported_for_that_not_for_its_content(store):
    # No seal: nothing was erased (bound 0), so the content of record 1 is no "content back".
    assert erased_bound(None) == 0 and erased_bound(NO_SEALS) is None
    store._seals.pop("m")
    assert store.verify().failures["m"] == (
        4,
        "it has records but no head seal (a seal deleted by hand)",
    )


def test_the_row_read_vouches_in_one_loop_without_the_full_path(store, monkeypatch):
    # The row read exists to be cheaper: an intact memory, or none, never takes the full path.
    def full(*args, **kwargs):
        raise AssertionError("the full path was taken")

    monkeypatch.setattr(store, "read_verified", full)
    assert [row[0] for row in store.read_verified_rows("m")] == [1, 2, 3, 4]
    assert [row[0] for row in store.read_verified_rows("m", gt=2)] == [3, 4]
    assert store.read_verified_rows("nobody") == []


def test_an_unsealed_head_row_still_tells_how_long_the_memory_was(store):
    # A ledger migrated to head rows but never opened writable since: its heads hold the seq
    # and hash, no mac yet. The mac is not checked, but the seq still shows a truncated tail.
    store._seals_required = False
    store._seals["m"] = store._seals["m"]._replace(mac="")
    assert [r.seq for r in store.read_verified("m", gt=2)] == [3, 4]
    del store._streams["m"][3]
    assert _refused(store, "seq 4 is missing", gt=2).seq == 4
    with pytest.raises(ChainIntegrityError, match="seq 4 is missing"):
        store.read_verified_rows("m", gt=2)


def test_a_record_deleted_inside_the_range_is_named(store):
    del store._streams["m"][2]
    error = _refused(store, "seq 3 is missing", gt=1, lte=4)
    assert error.seq == 3


def test_a_keyed_read_without_the_key_names_the_key_not_a_restore(tmp_path):
    # Nothing is damaged: sending the reader to restore a backup would be a wrong remedy.
    from eventlog import SQLiteEventStore

    path = tmp_path / "keyed.db"
    with SQLiteEventStore(path, chain_key=b"k" * 32) as store:
        store.append("m", batch("hello"))
    with (
        SQLiteEventStore(path, read_only=True) as store,
        pytest.raises(ChainIntegrityError) as refused,
    ):
        store.read_verified("m")
    message = str(refused.value)
    assert "chain_key=" in message and "--key-file" in message
    assert "backup" not in message
