"""Store contract: encryption at rest with per-subject keys (crypto-shredding on erase)."""

from __future__ import annotations

import io
import json
import threading

import pytest

from eventlog import SQLiteEventStore
from eventlog.formats.jsonl import export_jsonl
from eventlog.ids import StreamKey
from eventlog.keyring import KeyUnavailableError, MemoryKeyring, is_sealed
from eventlog.keyring_file import FileKeyring
from eventlog.ledger import verify_inclusion
from eventlog.serialization import decode_event
from eventlog.testing._base import reopens
from eventlog.testing.records import added, batch, settled, texts

SECRET = "my IBAN is DE89 3704 0044 0532 0130 00"  # noqa: S105 - a message, not a password


class _AppendWhileDestroying(MemoryKeyring):
    """A keyring that, asked to destroy a memory's keys, first lets another writer (another
    store object on the database: another process's) append to that memory, and waits a
    moment for it to land."""

    def __init__(self):
        super().__init__()
        self.writer = None
        self.thread = None
        self.errors = []

    def destroy(self, subject):
        self._race()
        return super().destroy(subject)

    def destroy_memory(self, subject, memory):
        self._race()
        return super().destroy_memory(subject, memory)

    def _race(self):
        if self.writer is None or self.thread is not None:
            return
        writer = self.writer

        def append():
            try:
                writer.append(RACED, batch("said during the erasure"))
            except BaseException as e:  # reported by the test
                self.errors.append(e)

        self.thread = threading.Thread(target=append)
        self.thread.start()
        # Long enough for an append with nothing in its way to land (milliseconds); one that
        # waits for the erasure's lock waits it out.
        self.thread.join(timeout=1.0)


RACED = ("user-42", "s1")

_ERASURES = {
    "erase": lambda store: store.erase(RACED, reason="GDPR"),
    "purge": lambda store: store.purge(
        RACED, expected_seq=store.head(RACED).seq, reason="retention"
    ),
    "erase_subject": lambda store: store.erase_subject(RACED[:1], reason="GDPR"),
}


def _stored(backend, stream_id):
    """The payloads as stored, read by a store without the keyring."""
    return [r.payload for r in backend.open().read(stream_id)]


class EncryptionContract:
    """The encryption part of the store contract."""

    @reopens
    def test_payloads_are_stored_sealed_and_read_back_plain(self, backend, tmp_path):
        ring = FileKeyring(tmp_path / "keys.json")
        store = backend.open(keyring=ring)
        written = store.append(("alice", "s1"), batch(SECRET, "second"))
        # Check append and read give the plaintext, and keep the stored text in .sealed.
        assert texts(written) == [SECRET, "second"]
        read = store.read(("alice", "s1"))
        assert texts(read) == [SECRET, "second"]
        assert all(is_sealed(r.sealed) for r in read)
        # Check the verified rows carry the plaintext too (each checked against its sealed text).
        rows = store.read_verified_rows(("alice", "s1"))
        assert [row[4] for row in rows] == [r.payload for r in read]
        # Check the database itself holds only ciphertext (a reader without the keyring).
        raw = _stored(backend, read[0].stream_id)
        assert all(is_sealed(p) for p in raw)
        assert not any("IBAN" in p for p in raw)
        # Check chains, digests and proofs verify without any key.
        plain = backend.open()
        assert plain.verify().ok
        digest = settled(store).digest()
        assert plain.verify(digest=digest).ok
        proof = plain.prove(("alice", "s1"), 1, digest=digest)
        assert verify_inclusion(proof, digest)
        # Check decoding without the keyring names the read and the remedy.
        with pytest.raises(KeyUnavailableError, match=r"seq 1 .*encrypted.*keyring="):
            decode_event(plain.read(("alice", "s1"))[0])

    def test_receipts_and_system_streams_stay_readable_without_keys(self, backend):
        ring = MemoryKeyring()
        store = backend.open(keyring=ring)
        store.append(StreamKey("~sys:compaction"), [added("run")])
        store.append(("bob", "s1"), batch("hi"))
        receipt = store.erase(("bob", "s1"), reason="request 1")
        # Check the receipt is plain JSON (an auditor reads it with no key) and bob's row erased.
        assert not is_sealed(receipt.record.stored_payload)
        assert json.loads(receipt.record.stored_payload)["reason"] == "request 1"
        assert not is_sealed(store.read(StreamKey("~sys:compaction"))[0].stored_payload)

    def test_a_ciphertext_moved_to_another_row_does_not_open(self, backend, tmp_path):
        ring = MemoryKeyring()
        store = backend.open(keyring=ring)
        store.append("u1", batch("one", "two"))
        first = store.read("u1")[0]
        backend.tamper(store, first.stream_id, 2, "payload", first.stored_payload)
        # Check the moved row stays sealed (authenticated data names the row) and verify reports it.
        second = store.read("u1")[1]
        assert is_sealed(second.payload)
        report = store.verify()
        assert report.first_bad_seq("u1") == 2

    def test_an_export_carries_ciphertext_and_imports_without_keys(self, backend, tmp_path):
        from eventlog.formats.jsonl import import_jsonl

        ring = MemoryKeyring()
        store = backend.open(keyring=ring)
        store.append(("dan", "s1"), batch(SECRET))
        out = io.StringIO()
        export_jsonl(store, out)
        lines = out.getvalue().splitlines()
        assert not any("IBAN" in line for line in lines)
        # Check a store with the same keyring reads the imported copy; proofs survive.
        with SQLiteEventStore(tmp_path / "copy.db", keyring=ring) as copy:
            import_jsonl(copy, lines)
            assert texts(copy.read(("dan", "s1"))) == [SECRET]
            assert copy.verify().ok

    @pytest.mark.parametrize("operation", sorted(_ERASURES))
    def test_an_append_racing_an_erasure_stays_readable(self, backend, operation):
        # The key goes inside the erasure's transaction, holding the lock appends take
        # (Recorder._erase's before_commit): an append lands before the erasure (erased with
        # the rest) or after it under a new key, never sealed under the key being destroyed.
        ring = _AppendWhileDestroying()
        store = backend.open(keyring=ring)
        store.append(RACED, batch("before the erasure"))
        ring.writer = backend.open(keyring=ring)  # the in-memory store: the same object
        _ERASURES[operation](store)
        assert ring.thread is not None
        ring.thread.join(timeout=60)
        assert not ring.thread.is_alive() and ring.errors == []
        for reader in (store, ring.writer):
            said = [r for r in reader.read(RACED) if r.kind == "message_added" and not r.erased]
            for record in said:
                decode_event(record)  # KeyUnavailableError for one sealed under a shredded key
            assert texts(said) == ["said during the erasure"]
        assert store.verify().ok

    def test_a_keyring_of_the_wrong_type_is_refused(self, backend):
        with pytest.raises(TypeError, match=r"keyring must be an eventlog.keyring.Keyring"):
            backend.open(keyring="keys.json")
