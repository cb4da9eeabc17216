"""Encryption at rest on SQLite files: a copy of the database taken before an erasure yields
nothing once the erasure shredded the keys (the file is the backup)."""

from __future__ import annotations

import shutil

import pytest

from eventlog import SQLiteEventStore
from eventlog.keyring import KeyUnavailableError, MemoryKeyring, is_sealed
from eventlog.keyring_file import FileKeyring
from eventlog.serialization import decode_event
from eventlog.testing.records import batch, texts

SECRET = "my IBAN is DE89 3704 0044 0532 0130 00"  # noqa: S105 - a message, not a password


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
