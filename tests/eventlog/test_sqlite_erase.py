"""SQLite erase on disk: no byte of erased text in the .db, -wal or -shm files at any size, and a
long-running reader (a backup) delays the file cleanup without failing the erasure."""

from __future__ import annotations

import pathlib
import sqlite3
import time

import pytest
import sqlite_utils

from eventlog import SQLiteEventStore
from eventlog.testing.records import batch, texts

MARKER = "QZV-erasable-7f3e"


def _on_disk(path: pathlib.Path, needle: str) -> list[str]:
    """The files of the database that hold ``needle``."""
    names = [path.name, path.name + "-wal", path.name + "-shm"]
    return [
        name
        for name in names
        if (path.parent / name).exists() and needle.encode() in (path.parent / name).read_bytes()
    ]


def _fill(store: SQLiteEventStore, memories: int, subjects: int) -> None:
    """``memories`` conversations of three messages over ``subjects`` users; user 1 holds the
    marker. Long enough texts that pages split, merge and overflow while the file grows."""
    for i in range(memories):
        user = i % subjects
        word = MARKER if user == 1 else "ordinary"
        store.append(
            (f"user{user}", f"s{i}"),
            batch(f"{word} question {i} " * 4, f"{word} answer {i} " * 9, f"{word} {i} " * 40),
        )


@pytest.mark.parametrize(
    ("memories", "subjects"),
    [(30, 3), (300, 30), (3_000, 300), (3_000, 3)],
    ids=["30", "300", "3000-small-subject", "3000-large-subject"],
)
def test_erase_subject_leaves_no_byte_of_the_text_in_any_file(tmp_path, memories, subjects):
    path = tmp_path / "chat.db"
    with SQLiteEventStore(path) as store:
        _fill(store, memories, subjects)
        assert _on_disk(path, MARKER)  # the scan finds the text before the erasure
        digest = store.digest()
        receipts = store.erase_subject(("user1",), reason="GDPR art. 17 request #881")
        # Check every session of the subject was erased and the files were cleaned.
        assert len(receipts) == memories // subjects
        assert not any(r.cleanup_pending for r in receipts)
        assert _on_disk(path, MARKER) == []
        assert store.verify().ok
        assert store.verify(digest=digest).ok
        assert texts(store.read(("user2", "s2")))[0].startswith("ordinary question 2")
    # Check closing the store writes nothing of it back either.
    assert _on_disk(path, MARKER) == []


def test_a_long_reader_leaves_cleanup_pending_and_the_next_run_finishes_it(tmp_path):
    path = tmp_path / "chat.db"
    store = SQLiteEventStore(path, busy_timeout=0.3)
    _fill(store, 60, 6)
    store.checkpoint()
    backup = sqlite3.connect(path, isolation_level=None)
    backup.execute("BEGIN")
    backup.execute("SELECT count(*) FROM events").fetchone()  # holds a read snapshot

    started = time.monotonic()
    receipts = store.erase_subject(("user1",), reason="request 7")

    # Check the erasure is reported done, with the file cleanup pending, not as a failure.
    assert len(receipts) == 10
    assert all(r.cleanup_pending for r in receipts)
    assert time.monotonic() - started < 5
    # Check no read returns the content, though the old pages still hold it on disk.
    assert all(r.erased for r in store.read(("user1", "s1"))[:-1])
    assert _on_disk(path, MARKER) == [path.name]
    # Check the backup's snapshot still sees the old rows (that is what a backup is for).
    assert (
        backup.execute(
            "SELECT count(*) FROM events WHERE payload LIKE ?", (f"%{MARKER}%",)
        ).fetchone()[0]
        == 30
    )
    backup.execute("COMMIT")
    backup.close()

    # Check the next run has nothing to erase but finishes the cleanup.
    assert store.erase_subject(("user1",), reason="request 7") == []
    assert _on_disk(path, MARKER) == []
    store.close()


def test_erasure_never_waits_out_a_reader_more_than_once(tmp_path):
    """[forget] item 4: a backup holding a snapshot used to block every erase for the whole
    busy_timeout (30 s by default), once per memory of a retention run."""
    from datetime import UTC, datetime, timedelta

    from projections.compaction import compact

    path = tmp_path / "chat.db"
    store = SQLiteEventStore(path)  # the default busy_timeout: 30 s
    _fill(store, 60, 6)
    later = datetime.now(UTC) + timedelta(days=60)  # every memory idle by then
    store.checkpoint()
    backup = sqlite3.connect(path, isolation_level=None)
    backup.execute("BEGIN")
    backup.execute("SELECT count(*) FROM events").fetchone()  # holds a read snapshot

    # Check one erase returns at once with the cleanup pending (the wait is 0.5 s).
    started = time.monotonic()
    receipt = store.erase(("user1", "s1"), reason="request 8")
    assert receipt.cleanup_pending and store.cleanup_pending
    assert time.monotonic() - started < 10
    # Check a retention run over the other 50 idle memories waits at most once more: at
    # 30 s per memory it would take 25 minutes.
    started = time.monotonic()
    report = compact(
        store, idle_for=timedelta(days=7), purge_idle_for=timedelta(days=30), now=later
    )
    assert len(report.purged) == 59 and not report.errors
    assert report.cleanup_pending and store.cleanup_pending
    assert time.monotonic() - started < 10
    assert store.finish_cleanup() is False  # the reader is still there
    assert path.name in _on_disk(path, MARKER)  # old pages the reader's snapshot still uses

    # Check the next scheduled run, once the reader is gone, finishes the cleanup.
    backup.execute("COMMIT")
    backup.close()
    report = compact(
        store, idle_for=timedelta(days=7), purge_idle_for=timedelta(days=30), now=later
    )
    assert not report.cleanup_pending and not store.cleanup_pending
    assert _on_disk(path, MARKER) == []
    store.close()


def test_a_checkpoint_finishes_a_pending_cleanup_and_says_so(tmp_path):
    path = tmp_path / "chat.db"
    store = SQLiteEventStore(path, busy_timeout=0.3)
    _fill(store, 12, 6)
    store.checkpoint()
    assert not store.cleanup_pending
    backup = sqlite3.connect(path, isolation_level=None)
    backup.execute("BEGIN")
    backup.execute("SELECT count(*) FROM events").fetchone()  # holds a read snapshot
    store.erase_subject(("user1",), reason="request 9")
    assert store.cleanup_pending
    backup.execute("COMMIT")
    backup.close()
    # Check checkpoint() - not only another erase - completes the cleanup and clears the flag.
    store.checkpoint()
    assert not store.cleanup_pending
    assert _on_disk(path, MARKER) == []
    assert store.finish_cleanup() is True
    store.close()


def test_an_in_memory_database_has_no_wal_to_wait_for():
    store = SQLiteEventStore(sqlite_utils.Database(memory=True), busy_timeout=0.2)
    store.append(("user1", "s1"), batch(f"{MARKER} hello"))
    # Check the checkpoint of a database without a WAL (it reports no log: -1) completes:
    # the erasure is not left "pending" and checkpoint() does not fail.
    receipt = store.erase(("user1", "s1"), reason="request 10")
    assert not receipt.cleanup_pending and not store.cleanup_pending
    store.checkpoint()
    store.close()
