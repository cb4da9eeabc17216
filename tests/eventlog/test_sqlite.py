"""SQLite-only behaviour: file format, pragmas, migrations, locking and multi-process appends."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import sqlite_utils

from eventlog import PersistenceError, SQLiteEventStore
from eventlog.sqlite import MIGRATIONS
from eventlog.testing.records import added, batch, texts


def test_file_is_wal_and_readable_with_plain_sqlite(tmp_path):
    path = tmp_path / "chat.db"
    with SQLiteEventStore(path) as store:
        store.append("user-1", batch("hello"))
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        stream_id, seq, payload = conn.execute(
            "SELECT stream_id, seq, payload FROM events"
        ).fetchone()
    # Check a sqlite3 user sees the id as given and the payload as LangChain4j JSON text.
    assert (stream_id, seq) == ("user-1", 1)
    assert json.loads(payload) == {"contents": [{"text": "hello", "type": "TEXT"}], "type": "USER"}


def test_synchronous_option(tmp_path):
    store = SQLiteEventStore(tmp_path / "a.db", synchronous="FULL")
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    store.close()
    store = SQLiteEventStore(tmp_path / "b.db")
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    store.close()
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteEventStore(tmp_path / "c.db", synchronous="OFF")  # type: ignore[arg-type]


def test_reopen_keeps_everything_and_migrations_are_idempotent(tmp_path):
    path = tmp_path / "chat.db"
    with SQLiteEventStore(path) as store:
        first = store.append("u1", batch("a", "b"))
    with SQLiteEventStore(path) as store:
        assert store.read("u1") == first
        assert [r.seq for r in store.append("u1", batch("c"))] == [3]
        applied = [m.name for m in MIGRATIONS.applied(store.db)]
    assert applied == [
        "m001_events",
        "m002_record_format",
        "m003_head_seals",
        "m004_marker",
        "m005_ledger_tree",
        "m006_names",
    ]


def test_accepts_a_sqlite_utils_database(tmp_path):
    db = sqlite_utils.Database(tmp_path / "x.db")
    store = SQLiteEventStore(db)
    store.append("u1", batch("a"))
    assert store.db is db
    assert db["events"].count == 1
    store.close()


def test_create_schema_false_on_empty_file_fails_clearly(tmp_path):
    store = SQLiteEventStore(tmp_path / "empty.db", create_schema=False)
    with pytest.raises(PersistenceError, match="append"):
        store.append("u1", batch("a"))
    store.close()


def test_unopenable_path_is_a_persistence_error(tmp_path):
    with pytest.raises(PersistenceError, match="open"):
        SQLiteEventStore(tmp_path / "no" / "such" / "dir" / "x.db")


def test_waits_for_another_writer_instead_of_failing(tmp_path):
    path = tmp_path / "chat.db"
    store = SQLiteEventStore(path)
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")

    def release() -> None:
        time.sleep(0.3)
        blocker.execute("COMMIT")

    releaser = threading.Thread(target=release)
    releaser.start()
    # Check the append waits for the lock (no "database is locked") and lands.
    started = time.monotonic()
    store.append("u1", batch("a"))
    assert time.monotonic() - started >= 0.25
    assert texts(store.read("u1")) == ["a"]
    store.close()
    # The append can land while the releasing thread is still inside execute("COMMIT");
    # closing the connection under it crashes the interpreter.
    releaser.join()
    blocker.close()


def test_lock_held_past_busy_timeout_is_a_clear_error(tmp_path):
    path = tmp_path / "chat.db"
    store = SQLiteEventStore(path, busy_timeout=0.2)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    with pytest.raises(PersistenceError, match="busy_timeout"):
        store.append("u1", batch("a"))
    blocker.execute("ROLLBACK")
    assert store.read("u1") == []
    store.append("u1", batch("b"))
    assert texts(store.read("u1")) == ["b"]
    store.close()
    blocker.close()


def test_a_write_behind_another_writer_names_the_write_lock_and_busy_timeout(tmp_path):
    path = tmp_path / "chat.db"
    store = SQLiteEventStore(path, busy_timeout=0.2)
    store.append("u1", batch("a"))
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    for operation, call in (
        ("append", lambda: store.append("u1", batch("b"))),
        ("save_snapshot", lambda: store.save_snapshot("u1", "w", 1, "{}")),
    ):
        with pytest.raises(PersistenceError) as info:
            call()
        assert info.value.operation == operation
        assert str(info.value).startswith(
            f"{operation} failed: another connection held the write lock of {path} for more "
            "than busy_timeout=0.2 s; raise busy_timeout or find the long transaction"
        )
    # Check reads do not wait for a writer (WAL).
    assert texts(store.read("u1")) == ["a"]
    blocker.execute("ROLLBACK")
    store.close()
    blocker.close()


def test_a_row_refused_by_another_constraint_is_a_persistence_error_not_a_lost_race(tmp_path):
    # Only the unique (stream_id, seq) key means another writer won; a trigger (or CHECK)
    # refusing a row is reported at once - not retried as a race - and the batch rolls back.
    path = tmp_path / "chat.db"
    store = SQLiteEventStore(path)
    store.append("u1", batch("a"))
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON events WHEN NEW.payload LIKE '%poison%' "
            "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
        )
    with pytest.raises(PersistenceError, match="refused by a trigger"):
        store.append("u1", batch("b", "poison"), expected_seq=1)
    assert texts(store.read("u1")) == ["a"]
    store.append("u1", batch("c"), expected_seq=1)
    assert texts(store.read("u1")) == ["a", "c"]
    store.close()


def test_sees_commits_of_another_connection(tmp_path):
    path = tmp_path / "chat.db"
    a, b = SQLiteEventStore(path), SQLiteEventStore(path)
    a.append("u1", batch("1"))
    assert b.head("u1").seq == 1  # b caches heads; data_version must invalidate them
    a.append("u1", batch("2"))
    assert b.head("u1").seq == 2
    b.append("u1", batch("3"), expected_seq=2)
    assert a.head("u1").seq == 3
    a.close()
    b.close()


_WRITER = textwrap.dedent(
    """
    import sys
    from eventlog import SQLiteEventStore
    from eventlog.models import NewRecord
    path, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SQLiteEventStore(path)
    for i in range(n):
        payload = '{"contents":[{"text":"%s:%d","type":"TEXT"}],"type":"USER"}' % (name, i)
        store.append("shared", [NewRecord("message_added", payload)])
        store.append("own-" + name, [NewRecord("message_added", payload)])
    store.close()
    """
)


def test_two_processes_appending_to_one_file_lose_nothing(tmp_path):
    path = tmp_path / "chat.db"
    SQLiteEventStore(path).close()  # schema first, so both writers start on equal terms
    n = 300
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), name, str(n)], stderr=subprocess.PIPE
        )
        for name in ("a", "b")
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    with SQLiteEventStore(path) as store:
        shared = texts(store.read("shared"))
        # Check nothing lost, seqs gapless, each writer's order kept, chains intact.
        assert len(shared) == 2 * n
        assert [r.seq for r in store.read("shared")] == list(range(1, 2 * n + 1))
        for name in ("a", "b"):
            assert [t for t in shared if t.startswith(name)] == [f"{name}:{i}" for i in range(n)]
            assert len(store.read(f"own-{name}")) == n
        assert store.verify().ok


def test_purge_leaves_no_copy_in_the_files(tmp_path):
    path = tmp_path / "chat.db"
    secret = "my-credit-card-4111-1111-1111-1111"  # noqa: S105 - test data
    with SQLiteEventStore(path) as store:
        store.append("victim", [added(secret), *batch(*[f"filler {i}" for i in range(50)])])
        store.append("other", batch("keep me"))
        head = store.head("victim")
        store.purge("victim", expected_seq=head.seq, reason="test")
        # Check while the store is still open (WAL checkpointed and truncated by purge).
        for f in tmp_path.iterdir():
            assert secret.encode() not in f.read_bytes(), f.name
    for f in tmp_path.iterdir():
        assert secret.encode() not in f.read_bytes(), f.name
    with SQLiteEventStore(path) as store:
        assert texts(store.read("other")) == ["keep me"]
        assert store.verify().ok


def _v1_rows(key, texts_):
    """Rows as the format 1 code wrote them (before migration m002)."""
    from eventlog.hashing import GENESIS, chain_hash

    rows, prev = [], GENESIS
    for seq, text in enumerate(texts_, 1):
        when = f"2025-01-01T00:00:0{seq}.000000Z"
        payload = added(text).payload
        digest = chain_hash(prev, key, seq, "message_added", 1, when, payload, "")
        rows.append((key, seq, when, "message_added", 1, payload, "", prev, digest))
        prev = digest
    return rows


def test_a_format_1_database_migrates_and_keeps_verifying(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite_utils.Database(path)
    MIGRATIONS.apply(db, stop_before="m002_record_format")
    db.conn.executemany(
        "INSERT INTO events (stream_id, seq, recorded_at, kind, schema_version, payload, meta, "
        "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        _v1_rows("u1", ["a", "b"]),
    )
    db.conn.commit()
    db.close()
    with SQLiteEventStore(path) as store:
        # Check old rows read as format 1, verify, and the chain continues in format 2.
        assert [(r.format, r.salt, r.commitment) for r in store.read("u1")] == [(1, "", "")] * 2
        assert store.append("u1", batch("c"))[0].format == 2
        assert store.verify().ok
        assert texts(store.read("u1")) == ["a", "b", "c"]


def test_a_non_integer_column_is_reported_malformed(tmp_path):
    path = tmp_path / "chat.db"
    with SQLiteEventStore(path) as store:
        store.append("u1", batch("a", "b"))
    # SQLite keeps text in an INTEGER column when it is not a number.
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET schema_version = 'two' WHERE seq = 2")
    with SQLiteEventStore(path) as store:
        report = store.verify()
    reason = "malformed schema_version 'two': not an integer"
    assert report.failures == {"u1": (2, reason)}
    assert report.malformed == (("u1", 2, reason),)
