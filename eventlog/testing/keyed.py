"""Store contract: keyed chains (format 3, HMAC-SHA256 under the store's key)."""

from __future__ import annotations

import pytest

from eventlog.errors import ChainKeyError
from eventlog.hashing import CONTENT_MISMATCH, KEYED_CHAIN, chain_hash_v2, record_hash
from eventlog.keycheck import KEY_CHECK, parse
from eventlog.models import NewRecord
from eventlog.testing._base import reopens
from eventlog.testing.records import added, batch, texts, user_payload

KEY = b"k" * 32
OTHER_KEY = b"o" * 32


def _set_key_check(backend, value):
    """Overwrite (or with None delete) the stored key check value behind the store's back."""
    backend.set_setting(KEY_CHECK, value)


def _get_key_check(backend):
    """The stored key check value, read behind the store's back."""
    return backend.get_setting(KEY_CHECK)


def _rechain_unkeyed(backend, store, seq, payload):
    """Rewrite a keyed record as a format 2 record with a valid SHA-256 hash: what a forger
    without the key can do."""
    (record,) = store.read("u1", gt=seq - 1, lte=seq)
    from eventlog.hashing import commit

    commitment = commit(bytes.fromhex(record.salt), payload)
    digest = chain_hash_v2(
        record.prev_hash,
        record.stream_id,
        record.seq,
        record.kind,
        record.schema_version,
        record.recorded_at_text,
        commitment,
        record.meta,
    )
    for column, value in (
        ("payload", payload),
        ("commitment", commitment),
        ("hash", digest),
        ("format", 2),
    ):
        backend.tamper(store, "u1", seq, column, value)


class KeyedContract:
    """The keyed part of the store contract."""

    def test_keyed_store_writes_format_3_records_that_verify_with_the_key(self, backend):
        store = backend.open(chain_key=KEY)
        records = store.append("u1", batch("a", "b"))
        # Check records are format 3, hashed with HMAC under the key, and verify.
        assert [r.format for r in records] == [3, 3]
        assert all(record_hash(r, KEY) == r.hash for r in records)
        assert all(record_hash(r, OTHER_KEY) != r.hash for r in records)
        assert [store.check(r) for r in records] == [None, None]
        assert store.verify().ok
        # Check a record cannot be checked without a key, by the pure function either.
        with pytest.raises(ValueError, match="needs the store's key"):
            record_hash(records[0])

    @pytest.mark.parametrize(("key", "error"), [(b"x" * 15, ValueError), ("x" * 32, TypeError)])
    def test_short_or_text_keys_are_refused(self, backend, key, error):
        with pytest.raises(error, match="key"):
            backend.open(chain_key=key)

    @reopens
    def test_wrong_key_fails_at_open(self, backend):
        backend.open(chain_key=KEY).append("u1", batch("a"))
        # Check a wrong key is refused at once, before anything is read or written.
        with pytest.raises(ChainKeyError, match="does not match the key check"):
            backend.open(chain_key=OTHER_KEY)
        assert texts(backend.open(chain_key=KEY).read("u1")) == ["a"]

    @reopens
    def test_without_the_key_a_keyed_store_reads_but_refuses_to_write_and_verify(self, backend):
        keyed = backend.open(chain_key=KEY)
        keyed.append("u1", batch("a", "b"))
        plain = backend.open()
        # Check reads work, but appends and purges name the remedy.
        assert texts(plain.read("u1")) == ["a", "b"]
        with pytest.raises(ChainKeyError, match="open it with chain_key="):
            plain.append("u1", batch("c"))
        with pytest.raises(ChainKeyError, match="open it with chain_key="):
            plain.purge("u1", expected_seq=2, reason="test")
        # Check verify() reports the keyed records as not verifiable, and check() says why.
        report = plain.verify()
        assert not report.ok
        assert report.failures == {"u1": (1, KEYED_CHAIN)}
        assert report.records == 2
        assert plain.check(plain.read("u1")[0]) == KEYED_CHAIN

    def test_a_forger_without_the_key_cannot_rechain(self, backend):
        store = backend.open(chain_key=KEY)
        store.append("u1", batch("a", "b"))
        # Check a record rewritten as unkeyed format 2 (hash valid under SHA-256) is caught.
        _rechain_unkeyed(backend, store, 2, user_payload("forged"))
        report = backend.open(chain_key=KEY).verify()
        assert report.first_bad_seq("u1") == 2
        assert report.failures["u1"][1].startswith("unkeyed record (format 2) in a keyed store")
        # Check keeping format 3 with a SHA-256 hash fails the HMAC.
        backend.tamper(store, "u1", 2, "format", 3)
        assert backend.open(chain_key=KEY).verify().failures == {"u1": (2, CONTENT_MISMATCH)}

    @reopens
    def test_keying_an_existing_store_keeps_old_records_and_guards_new_ones(self, backend):
        backend.open().append("u1", batch("a", "b"))
        # Check a key is never adopted silently: the open names the remedy.
        with pytest.raises(ChainKeyError, match="adopt_key=True"):
            backend.open(chain_key=KEY)
        keyed = backend.open(chain_key=KEY, adopt_key=True)
        # Check records from before keying verify, and new ones are format 3.
        new = keyed.append("u1", batch("c"))
        assert new[0].format == 3
        assert [r.format for r in keyed.read("u1")] == [2, 2, 3]
        assert backend.open(chain_key=KEY).verify().ok
        # Check the boundary holds: a record after it rewritten as unkeyed is caught.
        _rechain_unkeyed(backend, keyed, 3, user_payload("forged"))
        failure = backend.open(chain_key=KEY).verify().failures["u1"]
        assert failure[0] == 3
        assert failure[1].startswith("unkeyed record")

    @reopens
    def test_an_altered_or_deleted_key_check_is_refused(self, backend):
        store = backend.open(chain_key=KEY)
        store.append("u1", batch("a"))
        # Check moving the keyed boundary (to accept rewritten records) breaks the check value.
        stored = parse(_get_key_check(backend))
        assert stored is not None and stored.version == 2
        moved = f"v2:999:{stored.legacy_count}:{stored.legacy_root}:{stored.mac}"
        _set_key_check(backend, moved)
        with pytest.raises(ChainKeyError, match="does not match the key check"):
            backend.open(chain_key=KEY)
        # Check deleting it while keyed records exist is refused instead of starting afresh.
        _set_key_check(backend, None)
        with pytest.raises(ChainKeyError, match="no key check value"):
            backend.open(chain_key=KEY)

    def test_a_keyed_store_takes_only_format_3_and_an_unkeyed_one_no_format_3(self, backend):
        store = backend.open(chain_key=KEY)
        # Check an import cannot slip unkeyed records into a keyed store, nor keyed ones elsewhere.
        with pytest.raises(ValueError, match="keyed store, which writes only format 3"):
            store.append("u1", [added("a")._replace(format=2)])
        with pytest.raises(ValueError, match="format 7 is unknown"):
            store.append("u1", [added("a")._replace(format=7)])
        assert store.read("u1") == []
        from eventlog import InMemoryEventStore

        with pytest.raises(ValueError, match="store without a key"):
            InMemoryEventStore().append("u1", [NewRecord("memory_cleared", "{}", format=3)])
