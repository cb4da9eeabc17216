"""The erasure rules (eventlog.erasure) under attack: what a receipt says, which keys an
erasure shreds and which it must leave, and erasures refused with nothing erased. Each test is
a move of someone who holds a backup, a reader's snapshot or a keyless process, never a key."""

from __future__ import annotations

import pathlib
import sqlite3
from datetime import UTC, datetime

import pytest

from eventlog import SQLiteEventStore
from eventlog.erasure import erasure_record
from eventlog.ids import StreamKey
from eventlog.keyring import MemoryKeyring, subject_of
from eventlog.testing.records import batch, texts


def test_an_erase_receipt_says_whether_a_reader_kept_the_old_pages(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "chat.db"
    with SQLiteEventStore(path) as store:
        for user in ("u1", "u2", "u3", "u4"):
            store.append((user, "s1"), batch(f"secret of {user}"))
        # No reader: the files were cleaned, and the receipts must not claim otherwise.
        assert not store.erase(("u1", "s1"), reason="GDPR").cleanup_pending
        (receipt,) = store.erase_subject(("u2",), reason="GDPR")
        assert not receipt.cleanup_pending
        store.checkpoint()
        # A backup holding a read snapshot keeps the WAL's old pages: the receipt must say so,
        # or the operator would think no copy of the text is left in the files.
        backup = sqlite3.connect(path, isolation_level=None)
        backup.execute("BEGIN")
        backup.execute("SELECT count(*) FROM events").fetchone()
        try:
            assert store.erase(("u3", "s1"), reason="GDPR").cleanup_pending
            (receipt,) = store.erase_subject(("u4",), reason="GDPR")
            assert receipt.cleanup_pending
        finally:
            backup.close()


@pytest.mark.parametrize("erasable", [False, True], ids=["clear-ids", "erasable-ids"])
def test_erasing_one_session_leaves_the_users_other_sessions_readable(
    tmp_path: pathlib.Path, erasable: bool
) -> None:
    # A tuple id shares its subject ("user-42",) with the user's other sessions: erasing one
    # session shreds that session's key only. Shredding the subject's would make the other
    # sessions unreadable - an erasure of what nobody asked to erase.
    ring = MemoryKeyring()
    with SQLiteEventStore(tmp_path / "chat.db", keyring=ring, erasable_ids=erasable) as store:
        store.append(("user-42", "s1"), batch("erase me"))
        store.append(("user-42", "s2"), batch("keep me"))
        store.append("user-42", batch("a plain id of the same text"))
        store.erase(("user-42", "s1"), reason="GDPR")
        assert texts(store.read(("user-42", "s2"))) == ["keep me"]
        assert texts(store.read("user-42")) == ["a plain id of the same text"]


def test_a_plain_id_erasure_shreds_its_own_subject_key(tmp_path: pathlib.Path) -> None:
    # A plain id is its own subject: content sealed under the subject's key (before memories
    # had keys of their own) is the memory's too, so the erasure destroys that key as well; a
    # session of a tuple id shares its subject's key with the user's other sessions, so it
    # must stay.
    path = tmp_path / "chat.db"
    ring = MemoryKeyring()
    with SQLiteEventStore(path, keyring=ring) as store:
        store.append("alice", batch("alice's secret"))
        store.append(("bob", "s1"), batch("bob's first"))
        store.append(("bob", "s2"), batch("bob's second"))
    alice_old, _ = ring.current(subject_of("alice"))
    bob_old, _ = ring.current(subject_of(("bob", "s1")))
    with SQLiteEventStore(path, keyring=ring) as store:
        store.erase("alice", reason="GDPR")
        store.erase(("bob", "s1"), reason="GDPR")
        assert texts(store.read(("bob", "s2"))) == ["bob's second"]
    assert ring.get(alice_old) is None and ring.destroyed(alice_old)
    assert ring.get(bob_old) is not None


def test_a_rerun_erasure_by_pseudonym_says_nothing_to_erase(tmp_path: pathlib.Path) -> None:
    # A retention job that crashed after the erasure reruns it by the stored key it listed.
    # The names row went with the content, so this process cannot learn the id (nor the key's
    # subject): the rerun must say there is nothing to erase, not fail on the missing id.
    path = tmp_path / "chat.db"
    ring = MemoryKeyring()
    with SQLiteEventStore(path, keyring=ring, erasable_ids=True) as store:
        store.append(("user-42", "s1"), batch("secret"))
        (info,) = store.streams()
        pseudonym = StreamKey(info.stream_id)
        store.erase(pseudonym, reason="GDPR")
    with SQLiteEventStore(path, keyring=ring, erasable_ids=True) as store:
        with pytest.raises(ValueError, match="nothing to erase"):
            store.erase(pseudonym, reason="GDPR")
        head = store.head(pseudonym)
        assert head is not None
        # A purge by the same spelling goes through: it shreds nothing more and still works.
        store.purge(pseudonym, expected_seq=head.seq, reason="retention")


def test_erase_subject_shreds_the_subjects_own_key_only_under_a_one_element_prefix(
    tmp_path: pathlib.Path,
) -> None:
    # Content sealed before memories had keys of their own is under the subject's key: an
    # erasure of the whole subject must destroy it (a backup's old rows open with it), one of
    # some of its memories (a longer prefix) must not (its other memories' old rows need it).
    path = tmp_path / "chat.db"
    ring = MemoryKeyring()
    with SQLiteEventStore(path, keyring=ring) as store:
        store.append(("user-42", "tenant-a", "s1"), batch("a"))
        store.append(("user-42", "tenant-b", "s1"), batch("b"))
        store.append(("user-7", "s1"), batch("c"))
    old_42, _ = ring.current(subject_of(("user-42",)))
    old_7, _ = ring.current(subject_of(("user-7",)))
    with SQLiteEventStore(path, keyring=ring) as store:
        store.erase_subject(("user-42", "tenant-a"), reason="tenant left")
        assert ring.get(old_42) is not None
        assert texts(store.read(("user-42", "tenant-b", "s1"))) == ["b"]
        store.erase_subject(("user-42",), reason="GDPR")
    assert ring.get(old_42) is None and ring.destroyed(old_42)
    assert ring.get(old_7) is not None


def test_the_refusal_to_erase_format_1_records_names_them_exactly() -> None:
    # The operator must learn which records block the erasure: up to five are named in full,
    # "..." only when more were left out.
    now = datetime(2026, 1, 1, tzinfo=UTC)
    five = [(seq, 1) for seq in range(1, 6)]
    with pytest.raises(ValueError, match=r"5 record\(s\) \(seq 1, 2, 3, 4, 5\) are format 1"):
        erasure_record("k", five, "GDPR", now)
    with pytest.raises(ValueError, match=r"6 record\(s\) \(seq 1, 2, 3, 4, 5, \.\.\.\)"):
        erasure_record("k", [*five, (6, 1)], "GDPR", now)
    # A mix refuses too, naming only the format 1 ones; none at all builds no receipt.
    with pytest.raises(ValueError, match=r"1 record\(s\) \(seq 2\)"):
        erasure_record("k", [(1, 3), (2, 1)], "GDPR", now)
    assert erasure_record("k", [], "GDPR", now) is None
