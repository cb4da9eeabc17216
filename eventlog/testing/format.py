"""Store contract: record format 2 (salted payload commitments), check() and expected_hash."""

from __future__ import annotations

import pytest

from eventlog import ChainIntegrityError, ConcurrencyError
from eventlog.hashing import CONTENT_MISMATCH, GENESIS, commit, record_hash
from eventlog.ids import StreamKey
from eventlog.testing.chain import _delete, _forge
from eventlog.testing.records import added, batch, settled, texts, user_payload

EMPTIED_BY_HAND = "its content is gone, but no erasure reached it"


class FormatContract:
    """The format part of the store contract."""

    def test_new_records_are_format_2_with_salted_commitments(self, store):
        records = store.append("u1", batch("same", "same"))
        for r in records:
            # Check each record has a fresh 16-byte salt and the commitment SHA-256(salt||payload).
            assert r.format == 2
            assert len(r.salt) == 32
            assert r.commitment == commit(bytes.fromhex(r.salt), r.payload)
            assert record_hash(r) == r.hash
            assert store.check(r) is None
        # Check equal payloads commit differently (random salts), and reads return every field.
        assert records[0].salt != records[1].salt
        assert records[0].commitment != records[1].commitment
        assert store.read("u1") == records
        assert settled(store).read_all() == records

    def test_format_1_records_stay_verifiable_and_the_chain_continues_in_format_2(
        self, backend, store
    ):
        old = store.append("u1", [added("a")._replace(format=1), added("b")._replace(format=1)])
        assert [(r.format, r.salt, r.commitment) for r in old] == [(1, "", "")] * 2
        new = store.append("u1", batch("c"))
        # Check a format 2 record chains onto a format 1 head, and the whole stream verifies.
        assert (new[0].format, new[0].prev_hash) == (2, old[-1].hash)
        fresh = backend.open()
        assert fresh.verify().ok
        assert [fresh.check(r) for r in fresh.read("u1")] == [None] * 3
        # Check an edit of a format 1 record is still caught there.
        backend.tamper(store, "u1", 1, "payload", user_payload("forged"))
        assert backend.open().verify("u1").failures == {"u1": (1, CONTENT_MISMATCH)}

    @pytest.mark.parametrize(
        ("column", "value"),
        [("payload", user_payload("I never said that")), ("salt", "ab" * 16)],
    )
    def test_payload_or_salt_edit_is_caught_by_the_commitment(self, backend, store, column, value):
        store.append("u1", batch("a", "b", "c"))
        # The chain covers the commitment, not the payload: only the commitment check sees this.
        backend.tamper(store, "u1", 2, column, value)
        fresh = backend.open()
        assert fresh.verify("u1").failures == {"u1": (2, CONTENT_MISMATCH)}
        (edited,) = fresh.read("u1", gt=1, lte=2)
        assert fresh.check(edited) == CONTENT_MISMATCH

    def test_a_new_commitment_breaks_the_chain_hash(self, backend, store):
        records = store.append("u1", batch("a", "b", "c"))
        forged = user_payload("I never said that")
        # Check a forger who commits to the new payload still breaks the record's own hash.
        backend.tamper(store, "u1", 2, "payload", forged)
        backend.tamper(store, "u1", 2, "commitment", commit(bytes.fromhex(records[1].salt), forged))
        assert backend.open().verify("u1").failures == {"u1": (2, CONTENT_MISMATCH)}

    def test_content_emptied_by_hand_is_refused_and_so_is_a_lone_salt_deletion(
        self, backend, store
    ):
        store.append("u1", batch("a", "secret", "c"))
        store.append("u2", batch("a", "b"))
        # Check a record emptied by hand (payload and salt gone, commitment kept: what erase()
        # leaves, and what anyone can do without a key) is refused: no erasure sealed it.
        backend.tamper(store, "u1", 2, "payload", "")
        backend.tamper(store, "u1", 2, "salt", "")
        reopened = backend.open()
        (seq, reason) = reopened.verify("u1").failures["u1"]
        assert seq == 2
        assert reason.startswith(EMPTIED_BY_HAND)
        with pytest.raises(ChainIntegrityError, match=EMPTIED_BY_HAND):
            reopened.read_verified("u1")
        with pytest.raises(ChainIntegrityError, match=EMPTIED_BY_HAND):
            reopened.read_verified_rows("u1")
        # Check a payload kept without its salt cannot be checked, so it is reported.
        backend.tamper(store, "u2", 2, "salt", "")
        reason = "salt missing: the payload is kept but its salt was deleted"
        assert backend.open().verify("u2").failures == {"u2": (2, reason)}

    def test_check_reports_a_record_s_own_problems(self, store):
        (record,) = store.append("u1", batch("a"))
        assert store.check(record) is None
        # Check each problem of a record on its own, as a reader serving records would see it.
        assert store.check(record._replace(meta='{"x":1}')) == CONTENT_MISMATCH
        assert store.check(record._replace(payload="{}")) == CONTENT_MISMATCH
        assert store.check(record._replace(prev_hash="x" * 64)) == (
            "malformed prev_hash: not 64 lowercase hex digits"
        )
        assert store.check(record._replace(salt="zz" * 16)) == (
            "malformed salt: not 32 lowercase hex digits"
        )
        assert store.check(record._replace(format=7)) == "malformed format 7: not 1, 2 or 3"

    def test_append_with_expected_hash(self, store):
        # Check an empty stream's head hash is GENESIS.
        first = store.append("u1", batch("a"), expected_hash=GENESIS)
        second = store.append("u1", batch("b"), expected_hash=first[0].hash)
        assert [r.seq for r in second] == [2]
        # Check a wrong hash is refused with the facts, and nothing is written.
        with pytest.raises(ConcurrencyError) as info:
            store.append("u1", batch("c", "d"), expected_hash=first[0].hash)
        assert (info.value.expected_hash, info.value.actual_hash) == (first[0].hash, second[0].hash)
        assert info.value.actual == 2
        assert "reload" in str(info.value)
        with pytest.raises(ConcurrencyError):
            store.append("u2", batch("x"), expected_hash=first[0].hash)
        assert texts(store.read("u1")) == ["a", "b"]
        assert store.read("u2") == []
        # Check both expectations together.
        store.append("u1", batch("c", "d"), expected_seq=2, expected_hash=second[0].hash)
        assert store.verify().ok

    def test_expected_hash_notices_a_head_replaced_at_the_same_seq(self, backend, store):
        a = store.append("u1", batch("a", "b"))
        # Another writer (after a failover that lost seq 2) writes a different seq 2.
        other = backend.open()
        _delete(backend, other, "u1", 2)
        replaced = other.append(StreamKey("u1"), batch("B"), expected_seq=1)[0]
        assert replaced.seq == 2
        assert replaced.hash != a[1].hash
        # Check the first store, whose cached head is the lost seq 2, is refused by its hash.
        with pytest.raises(ConcurrencyError) as info:
            store.append("u1", batch("c"), expected_hash=a[1].hash)
        assert info.value.actual_hash == replaced.hash
        with pytest.raises(ConcurrencyError):
            store.append("u1", batch("c", "d"), expected_hash=a[1].hash)
        assert texts(store.read("u1")) == ["a", "B"]
        store.append("u1", batch("c"), expected_hash=replaced.hash)
        assert backend.open().verify().ok

    def test_forged_commitment_and_hash_is_caught_by_the_next_link(self, backend, store):
        store.append("u1", batch("a", "b", "c"))
        # _forge recomputes commitment and hash, as an attacker knowing the recipe would.
        forged = _forge(backend, store, "u1", 2, payload=user_payload("I never said that"))
        fresh = backend.open()
        assert fresh.check(forged) is None
        assert fresh.verify("u1").failures == {
            "u1": (3, "prev_hash does not match the previous record's hash")
        }

    @pytest.mark.parametrize(
        ("fields", "message"),
        [
            ({"format": 1, "salt": "ab" * 16}, "a format 1 record has no salt or commitment"),
            ({"salt": "AB" * 16}, "is not 32 lowercase hex digits"),
            ({"salt": "ab" * 8}, "is not 32 lowercase hex digits"),
            ({"salt": "not hex"}, "is not 32 lowercase hex digits"),
            ({"salt": ""}, "an empty salt is only for an erased record"),
            # Each condition alone is refused: a payload kept, or no commitment to keep.
            ({"salt": "", "commitment": "cd" * 32}, "an empty salt is only for an erased record"),
            ({"salt": "", "payload": ""}, "an empty salt is only for an erased record"),
            ({"salt": "ab" * 16, "commitment": "cd" * 32}, "does not match the payload and salt"),
        ],
    )
    def test_imported_salts_and_commitments_are_validated(self, store, fields, message):
        with pytest.raises(ValueError, match=message):
            store.append("u1", [added("a")._replace(**fields)])
        assert store.read("u1") == []

    def test_imports_reproduce_salt_commitment_and_erased_records(self, backend, store):
        (original,) = store.append("u1", batch("a"))
        copy = original._replace(stream_id="u2")
        # Check an import with the original salt reproduces the commitment, and an erased record
        # (no payload, no salt, the commitment kept) can be imported and verifies.
        imported = store.append(
            "u2",
            [
                added("")._replace(payload="", salt="", commitment=original.commitment),
                added("a")._replace(format=2, salt=copy.salt),
            ],
        )
        assert imported[1].commitment == original.commitment
        assert (imported[0].payload, imported[0].salt) == ("", "")
        reopened = backend.open()
        assert reopened.verify().ok
        assert [r.seq for r in reopened.read_verified("u2")] == [1, 2]

    def test_an_emptied_record_after_content_is_refused_and_nothing_is_written(self, store):
        (original,) = store.append("u1", batch("a"))
        emptied = added("")._replace(payload="", salt="", commitment=original.commitment)
        # Check an import cannot leave the shape a hand edit leaves: an erasure empties a
        # memory from its first record on, so emptied content after kept content is refused,
        # in one batch or after records already stored.
        for memory, items in (("u2", [added("a"), emptied]), ("u1", [emptied])):
            with pytest.raises(ValueError, match="follows records that hold content"):
                store.append(memory, items)
        assert store.read("u2") == []
        assert [r.seq for r in store.read("u1")] == [1]

    def test_an_erased_memory_imported_a_record_at_a_time_verifies(self, backend, store):
        before = store.append("u1", batch("a", "b"))
        receipt = store.erase("u1", reason="r")
        store.append("u1", batch("c"))
        # Check an erased memory copied as an import writes it (a record per append, the
        # batches split anywhere) verifies and reads: the receipt closes the emptied prefix
        # as erase() sealed it, and the content after it is served.
        for record in store.read("u1"):
            item = added("")._replace(
                kind=record.kind,
                payload=record.payload,
                meta=record.meta,
                format=record.format,
                salt=record.salt,
                commitment=record.commitment,
            )
            store.append("u2", [item])
        reopened = backend.open()
        assert reopened.verify().ok
        records = reopened.read_verified("u2")
        assert [r.erased for r in records] == [True, True, False, False]
        assert records[2].kind == receipt.record.kind
        # Check content put back into the imported erased prefix (from a backup: it matches
        # the commitment) is refused there too.
        backend.tamper(store, "u2", 1, "payload", before[0].payload)
        backend.tamper(store, "u2", 1, "salt", before[0].salt)
        (seq, reason) = backend.open().verify("u2").failures["u2"]
        assert (seq, reason.split(":")[0]) == (
            1,
            "content is back in a record its erasure or purge (up to seq 3) removed",
        )
