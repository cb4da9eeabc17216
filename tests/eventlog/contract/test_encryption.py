"""Store contract: encryption at rest with per-subject keys (crypto-shredding on erase)."""

from __future__ import annotations

import io
import json
import shutil

import pytest

from eventlog import SQLiteEventStore
from eventlog.ids import StreamKey
from eventlog.jsonl import export_jsonl
from eventlog.keyring import KeyUnavailableError, MemoryKeyring, is_sealed
from eventlog.keyring_file import FileKeyring
from eventlog.ledger import verify_inclusion
from eventlog.serialization import decode_event

from .records import added, batch, texts

SECRET = "my IBAN is DE89 3704 0044 0532 0130 00"  # noqa: S105 - a message, not a password


def _stored(backend, stream_id):
    """The payloads as stored, read by a store without the keyring."""
    return [r.payload for r in backend.open().read(stream_id)]


@pytest.mark.skip_backend("memory")
def test_payloads_are_stored_sealed_and_read_back_plain(backend, tmp_path):
    ring = FileKeyring(tmp_path / "keys.json")
    store = backend.open(keyring=ring)
    written = store.append(("alice", "s1"), batch(SECRET, "second"))
    # Check append and read give the plaintext, and keep the stored text in .sealed.
    assert texts(written) == [SECRET, "second"]
    read = store.read(("alice", "s1"))
    assert texts(read) == [SECRET, "second"]
    assert all(is_sealed(r.sealed) for r in read)
    # Check the database itself holds only ciphertext (a reader without the keyring).
    raw = _stored(backend, read[0].stream_id)
    assert all(is_sealed(p) for p in raw)
    assert not any("IBAN" in p for p in raw)
    # Check chains, digests and proofs verify without any key.
    plain = backend.open()
    assert plain.verify().ok
    digest = store.digest()
    assert plain.verify(digest=digest).ok
    proof = plain.prove(("alice", "s1"), 1, digest=digest)
    assert verify_inclusion(proof, digest)
    # Check decoding without the keyring names the read and the remedy.
    with pytest.raises(KeyUnavailableError, match=r"seq 1 .*encrypted.*keyring="):
        decode_event(plain.read(("alice", "s1"))[0])


def test_receipts_and_system_streams_stay_readable_without_keys(backend):
    ring = MemoryKeyring()
    store = backend.open(keyring=ring)
    store.append(StreamKey("~sys:compaction"), [added("run")])
    store.append(("bob", "s1"), batch("hi"))
    receipt = store.erase(("bob", "s1"), reason="request 1")
    # Check the receipt is plain JSON (an auditor reads it with no key) and bob's row erased.
    assert not is_sealed(receipt.record.stored_payload)
    assert json.loads(receipt.record.stored_payload)["reason"] == "request 1"
    assert not is_sealed(store.read(StreamKey("~sys:compaction"))[0].stored_payload)


def test_erase_subject_destroys_the_key_so_a_pre_erasure_copy_yields_nothing(tmp_path):
    # SQLite only: the backup is a copy of the database file.
    ring = FileKeyring(tmp_path / "keys.json")
    path = tmp_path / "chat.db"
    store = SQLiteEventStore(path, keyring=ring)
    store.append(("alice", "s1"), batch(SECRET))
    store.append(("alice", "s2"), batch("alice again"))
    store.append(("carol", "s1"), batch("carol stays"))
    store.checkpoint()
    backup = tmp_path / "backup.db"
    shutil.copy(path, backup)  # a backup taken before the erasure

    store.erase_subject(("alice",), reason="GDPR art. 17 request #881")

    # Check the backup still verifies, shows carol, and cannot yield alice's messages.
    with SQLiteEventStore(backup, keyring=ring) as old:
        assert old.verify().ok
        assert texts(old.read(("carol", "s1"))) == ["carol stays"]
        (sealed,) = old.read(("alice", "s1"))
        assert is_sealed(sealed.payload)
        with pytest.raises(KeyUnavailableError, match="destroyed by an erasure"):
            decode_event(sealed)
    assert SECRET.encode() not in backup.read_bytes()
    # Check alice can start again under a new key, and it is not the destroyed one.
    store.append(("alice", "s3"), batch("new start"))
    assert texts(store.read(("alice", "s3"))) == ["new start"]
    assert texts(store.read(("carol", "s1"))) == ["carol stays"]
    assert store.read(("alice", "s3"))[0].sealed.split(":")[1] != sealed.payload.split(":")[1]
    store.close()


def test_a_ciphertext_moved_to_another_row_does_not_open(backend, tmp_path):
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


def test_an_export_carries_ciphertext_and_imports_without_keys(backend, tmp_path):
    from eventlog.jsonl import import_jsonl

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


def test_a_keyring_of_the_wrong_type_is_refused(backend):
    with pytest.raises(TypeError, match=r"keyring must be an eventlog.keyring.Keyring"):
        backend.open(keyring="keys.json")


@pytest.mark.skip_backend("memory")
def test_erasing_one_memory_shreds_its_own_key_so_a_pre_erasure_copy_yields_nothing(tmp_path):
    ring = FileKeyring(tmp_path / "keys.json")
    path = tmp_path / "chat.db"
    store = SQLiteEventStore(path, keyring=ring)
    store.append(("dave", "s1"), batch(SECRET))
    store.append(("dave", "s2"), batch("dave's other session"))
    store.checkpoint()
    backup = tmp_path / "backup.db"
    shutil.copy(path, backup)  # a backup taken before the erasure
    (s1,) = store.read(("dave", "s1"))
    (s2,) = store.read(("dave", "s2"))
    assert s1.sealed.split(":")[1] != s2.sealed.split(":")[1]  # one key per memory

    store.erase(("dave", "s1"), reason="request #9")

    with SQLiteEventStore(backup, keyring=ring) as old:
        (sealed,) = old.read(("dave", "s1"))
        with pytest.raises(KeyUnavailableError, match="destroyed by an erasure"):
            decode_event(sealed)
        assert texts(old.read(("dave", "s2"))) == ["dave's other session"]  # untouched
    assert ring.destroyed(s1.sealed.split(":")[1])
    store.append(("dave", "s1"), batch("after"))  # the id keeps working, under a new key
    assert texts(store.read(("dave", "s1"))[-1:]) == ["after"]
    store.close()


def test_a_keyring_that_keeps_one_key_per_subject_still_works(tmp_path):
    # Keyrings written against the three-method interface (a KMS adapter) seal with the
    # subject's key: nothing breaks; erasing one memory then shreds no key (the README says).
    class SubjectKeys(MemoryKeyring):
        def memory_key(self, subject, memory):
            return self.current(subject)

        def destroy_memory(self, subject, memory):
            return 0

    ring = SubjectKeys()
    store = SQLiteEventStore(tmp_path / "chat.db", keyring=ring)
    store.append(("erin", "s1"), batch("one"))
    store.append(("erin", "s2"), batch("two"))
    (a,) = store.read(("erin", "s1"))
    (b,) = store.read(("erin", "s2"))
    assert a.sealed.split(":")[1] == b.sealed.split(":")[1]
    store.erase(("erin", "s1"), reason="r")
    assert texts(store.read(("erin", "s2"))) == ["two"]
    assert store.erase_subject(("erin",), reason="r")
    assert ring.get(a.sealed.split(":")[1]) is None  # the subject's erasure shreds it
    store.close()
