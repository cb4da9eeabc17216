"""SQLiteEventStore's edges the mutation run of its recorder modules found untested: an
expected seq on an empty memory, which driver errors are waited out (another connection's
lock) and which are reported at once, and waiting for a lock at open and on a read."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
import sqlite_utils

from eventlog import ConcurrencyError, PersistenceError, SQLiteEventStore
from eventlog.testing.records import batch, texts


def test_an_expected_seq_on_an_empty_memory_is_a_conflict(tmp_path):
    with SQLiteEventStore(tmp_path / "chat.db") as store:
        # Check a caller who believes the memory holds one record is refused, not chained
        # to nothing (the head read as "empty" is seq 0, which is not 1).
        with pytest.raises(ConcurrencyError) as info:
            store.append("u1", batch("a"), expected_seq=1)
        assert (info.value.expected, info.value.actual) == (1, 0)
        assert store.read("u1") == []
        assert [r.seq for r in store.append("u1", batch("a"), expected_seq=0)] == [1]


def _traced(path):
    """A Database whose connection records every statement run on it."""
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    return sqlite_utils.Database(conn), statements


def test_a_failing_write_that_is_not_a_lock_is_reported_at_once(tmp_path):
    store = SQLiteEventStore(tmp_path / "empty.db", create_schema=False, busy_timeout=0.2)
    # Check the driver's own reason reaches the caller - not retried as if another
    # connection held the write lock, and then blamed on it.
    with pytest.raises(PersistenceError) as info:
        store.append("u1", batch("a"))
    assert "no such table" in str(info.value)
    assert "busy_timeout" not in str(info.value)
    store.close()


def test_a_failing_open_that_is_not_a_lock_is_not_retried(tmp_path):
    path = tmp_path / "other-app.db"
    with sqlite3.connect(path) as conn:  # another application's table of the same name
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, name TEXT)")
    db, statements = _traced(path)
    with pytest.raises(PersistenceError, match="open"):
        SQLiteEventStore(db, busy_timeout=0.2)
    # Check the open was tried once: a migration that cannot apply is no lock to wait for.
    assert statements.count("PRAGMA busy_timeout = 0") == 1
    db.conn.close()


def _release_after(blocker: sqlite3.Connection, seconds: float) -> threading.Thread:
    """Commit ``blocker``'s transaction after ``seconds``, from another thread."""

    def release() -> None:
        time.sleep(seconds)
        blocker.execute("COMMIT")

    thread = threading.Thread(target=release)
    thread.start()
    return thread


def test_open_waits_for_another_connection_holding_the_file(tmp_path):
    path = tmp_path / "chat.db"
    with sqlite3.connect(path) as conn:  # a rollback-journal file, as before the first open
        conn.execute("CREATE TABLE unrelated (x)")
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN EXCLUSIVE")  # no reader may look at the schema until it ends
    releaser = _release_after(blocker, 0.3)
    try:
        # Check the open waits for the lock (within busy_timeout) instead of failing.
        with SQLiteEventStore(path) as store:
            store.append("u1", batch("a"))
            assert texts(store.read("u1")) == ["a"]
    finally:
        releaser.join()
        blocker.close()


def test_a_read_waits_for_another_connection_holding_the_file(tmp_path):
    path = tmp_path / "chat.db"
    with SQLiteEventStore(path) as store:
        store.append("u1", batch("a"))
    with sqlite3.connect(path) as conn:  # a ledger someone put back in rollback-journal mode
        conn.execute("PRAGMA journal_mode = DELETE")
    with SQLiteEventStore(path, read_only=True) as store:  # read-only: left in that mode
        blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        blocker.execute("BEGIN EXCLUSIVE")  # keeps every reader out until it ends
        releaser = _release_after(blocker, 0.3)
        try:
            # Check the read waits for the lock (within busy_timeout) instead of failing.
            assert texts(store.read("u1")) == ["a"]
        finally:
            releaser.join()
            blocker.close()


def test_a_database_passed_in_gets_each_append_committed(tmp_path):
    path = tmp_path / "chat.db"
    db = sqlite_utils.Database(path)  # Python's default: implicit transactions, not autocommit
    with SQLiteEventStore(db) as store:
        store.append("u1", batch("a"))
        # Check another connection sees the append at once: it was committed, not left in a
        # transaction the driver opened implicitly.
        with sqlite3.connect(path) as other:
            assert other.execute("SELECT count(*) FROM events").fetchone()[0] == 1
        store.append("u1", batch("b", "c"))
        assert texts(store.read("u1")) == ["a", "b", "c"]


def test_create_schema_false_leaves_another_applications_file_in_its_journal_mode(tmp_path):
    path = tmp_path / "other-app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    SQLiteEventStore(path, create_schema=False).close()
    # Check the file was not switched to WAL (which rewrites its header): not a ledger.
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_conflict_caught_by_the_unique_key_names_the_seq_the_caller_expected(tmp_path):
    path = tmp_path / "chat.db"
    a, b = SQLiteEventStore(path), SQLiteEventStore(path)
    assert a.head("u1") is None  # a caches "u1 is empty"
    b.append("u1", batch("from b"))
    # Check a's append, chained to its stale cached head, is refused by the unique
    # (stream_id, seq) key, and the error names what the caller expected: an empty memory.
    with pytest.raises(ConcurrencyError) as info:
        a.append("u1", batch("from a"), expected_seq=0)
    assert info.value.expected == 0
    assert texts(a.read("u1")) == ["from b"]
    a.close()
    b.close()


def test_a_limit_of_zero_reads_nothing(tmp_path):
    with SQLiteEventStore(tmp_path / "chat.db") as store:
        store.append("u1", batch("a", "b"))
        # Check limit=0 means no record (not SQLite's "no limit", nor one).
        assert store.read_all(limit=0) == []
        assert store.read("u1", limit=0) == []
        assert texts(store.read_all(limit=1)) == ["a"]


def test_a_loaded_snapshot_names_its_memory_and_projection(tmp_path):
    with SQLiteEventStore(tmp_path / "chat.db") as store:
        store.append("u1", batch("a", "b"))
        store.save_snapshot("u1", "window", 2, '{"n": 2}')
        snap = store.load_snapshot("u1", "window")
        # Check every field comes from its own column.
        assert snap is not None
        assert (snap.stream_id, snap.name, snap.seq, snap.state) == ("u1", "window", 2, '{"n": 2}')
        assert store.load_snapshot("u1", "window", lte=1) is None


def test_streams_counts_records_apart_from_the_last_seq(tmp_path):
    with SQLiteEventStore(tmp_path / "chat.db") as store:
        store.append("u1", batch("a", "b", "c"))
        store.purge("u1", expected_seq=3, reason="retention")
        # Check a purged memory counts its one record (the tombstone) at seq 4.
        (info,) = store.streams()
        assert (info.stream_id, info.event_count, info.last_seq) == ("u1", 1, 4)
