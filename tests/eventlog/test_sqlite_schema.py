"""The SQLite schema module's edges the mutation run found untested: the header-only ledger
check (:func:`eventlog.sqlite.is_ledger_file`) on files that are not ledgers, on a ledger whose
newest first page is still in its WAL, on WAL files that are not current, and migrations that
run again on a file that already has their columns."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventlog import SQLiteEventStore
from eventlog.sqlite import APPLICATION_ID, is_ledger_file
from eventlog.testing.records import batch, texts

_MARKER = APPLICATION_ID.to_bytes(4, "big")
_SQLITE = b"SQLite format 3\x00"


def test_a_missing_path_or_a_directory_is_not_a_ledger(tmp_path):
    assert not is_ledger_file(tmp_path / "missing.db")
    assert not is_ledger_file(tmp_path)


def test_a_file_that_is_not_sqlite_is_not_a_ledger_even_with_the_marker_at_offset_68(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"x" * 68 + _MARKER + b"\x00" * 60)
    assert not is_ledger_file(path)


def test_a_sqlite_header_shorter_than_100_bytes_is_not_a_ledger(tmp_path):
    path = tmp_path / "cut.db"
    header = _SQLITE + b"\x00" * (68 - len(_SQLITE)) + _MARKER
    path.write_bytes(header)
    assert not is_ledger_file(path)
    # The same bytes padded to a full header are recognised: only the length differs.
    path.write_bytes(header + b"\x00" * (100 - len(header)))
    assert is_ledger_file(path)


@pytest.fixture
def wal_ledger(tmp_path: Path) -> Iterator[Path]:
    """A SQLite file in WAL mode whose marker is only in its WAL, held open by a writer (no
    checkpoint): page 1 is written twice - unmarked by the first commit, marked by the second -
    and a third commit writes page 2 only, so the newest frame is not page 1."""
    path = tmp_path / "live.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute("CREATE TABLE t (x)")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("INSERT INTO t VALUES ('after the marker')")
        yield path
    finally:
        conn.close()


def _frames(wal: bytes) -> list[tuple[int, bytes]]:
    """(page number, page bytes) of each frame of a WAL file."""
    size = int.from_bytes(wal[8:12], "big")
    return [
        (int.from_bytes(wal[at : at + 4], "big"), wal[at + 24 : at + 24 + size])
        for at in range(32, len(wal) - 24 - size + 1, 24 + size)
    ]


def test_the_newest_first_page_in_the_wal_decides(wal_ledger):
    path, wal = wal_ledger, Path(f"{wal_ledger}-wal").read_bytes()
    # Check the setup: the main file's header has no marker; the WAL holds page 1 unmarked,
    # then marked, and its last frame is page 2.
    assert path.read_bytes()[68:72] == b"\x00" * 4
    pages = _frames(wal)
    assert [n for n, _ in pages] == [1, 2, 1, 2]
    assert [p[68:72] for n, p in pages if n == 1] == [b"\x00" * 4, _MARKER]
    assert is_ledger_file(path)


def _copy(src: Path, dst: Path, wal: bytes) -> Path:
    shutil.copyfile(src, dst)
    Path(f"{dst}-wal").write_bytes(wal)
    return dst


@pytest.mark.parametrize("magic", [0x377F0682, 0x377F0683], ids=["little", "big"])
def test_either_wal_checksum_byte_order_is_read(wal_ledger, tmp_path, magic):
    wal = Path(f"{wal_ledger}-wal").read_bytes()
    # Check both magic numbers SQLite writes (the checksums' byte order) are accepted: the
    # reader never checks checksums, so the bytes after the magic serve either.
    path = _copy(wal_ledger, tmp_path / "copy.db", magic.to_bytes(4, "big") + wal[4:])
    assert is_ledger_file(path)


def test_a_wal_without_the_wal_magic_is_ignored(wal_ledger, tmp_path):
    wal = Path(f"{wal_ledger}-wal").read_bytes()
    path = _copy(wal_ledger, tmp_path / "copy.db", b"\x00\x00\x00\x00" + wal[4:])
    # Check the frames of a file that is not a WAL are not read: the main header decides.
    assert not is_ledger_file(path)


def test_frames_of_an_older_wal_generation_are_ignored(wal_ledger, tmp_path):
    wal = bytearray(Path(f"{wal_ledger}-wal").read_bytes())
    size = int.from_bytes(wal[8:12], "big")
    # Give the WAL header new salts: every frame left is from before a WAL reset, and a
    # reader must not take the marked page 1 among them.
    wal[16:24] = bytes(b ^ 0xFF for b in wal[16:24])
    path = _copy(wal_ledger, tmp_path / "copy.db", bytes(wal))
    assert not is_ledger_file(path)
    # Only the frames whose salts match count: the marked page 1 (the third frame) current.
    third = 32 + 2 * (24 + size)
    wal[third + 8 : third + 16] = wal[16:24]
    path = _copy(wal_ledger, tmp_path / "copy2.db", bytes(wal))
    assert is_ledger_file(path)


def test_a_truncated_wal_header_is_ignored(wal_ledger, tmp_path):
    wal = Path(f"{wal_ledger}-wal").read_bytes()
    path = _copy(wal_ledger, tmp_path / "copy.db", wal[:31])
    assert not is_ledger_file(path)


def _forget_migrations(path: Path, *names: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(
            f"DELETE FROM _sqlite_migrations WHERE name IN ({', '.join('?' for _ in names)})",
            names,
        )
        conn.commit()


@pytest.mark.parametrize("migration", ["m002_record_format", "m003_head_seals"])
def test_a_migration_that_runs_again_keeps_the_columns_it_added(tmp_path, migration):
    path = tmp_path / "chat.db"
    with SQLiteEventStore(path) as store:
        store.append("u1", batch("a", "b"))
    # As when two processes open a new file at once: the migration's columns exist, and it
    # is not recorded as applied, so the next open runs it again - which must not fail on a
    # column it would add twice (ALTER TABLE has no IF NOT EXISTS).
    _forget_migrations(path, migration)
    with SQLiteEventStore(path) as store:
        assert texts(store.read("u1")) == ["a", "b"]
        store.append("u1", batch("c"))
        assert store.verify().ok
    with SQLiteEventStore(path, read_only=True) as store:
        assert texts(store.read("u1")) == ["a", "b", "c"]


def test_a_ledger_migrated_by_a_newer_chatledger_is_refused_as_postgres_does(tmp_path):
    # A newer chatledger's migration may add what it relies on (a column, a trigger): reading
    # it with this code, or writing rows that lack it, must not happen silently.
    from eventlog import SchemaVersionError

    path = tmp_path / "newer.db"
    with SQLiteEventStore(path) as store:
        store.append("u1", batch("a"))
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            "VALUES ('eventlog', 'm099_from_the_future', '2030-01-01')"
        )
    before = path.read_bytes()
    for read_only, create_schema in ((False, True), (True, True), (False, False)):
        with pytest.raises(SchemaVersionError, match="upgrade chatledger"):
            SQLiteEventStore(path, read_only=read_only, create_schema=create_schema)
    assert path.read_bytes() == before
    # Another application's migrations in the same table are none of ours.
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm099_from_the_future'")
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            "VALUES ('their_app', 'm001_theirs', '2030-01-01')"
        )
    SQLiteEventStore(path).close()


@pytest.mark.parametrize("names", [("NULL", "'m099_from_the_future'"), ("NULL", "x'ff'")])
def test_migration_rows_that_are_not_names_are_refused_as_a_newer_ledger(tmp_path, names):
    # Rows a hand (or a forger) wrote into _sqlite_migrations with a name that is not text
    # beside another unknown name: the refusal sorted the unknown names to show the first,
    # and `chatledger verify` died with "TypeError: '<' not supported between instances of
    # 'NoneType' and 'str'" (a traceback) instead of the refusal naming its remedy.
    from eventlog import SchemaVersionError

    path = tmp_path / "odd.db"
    with SQLiteEventStore(path) as store:
        store.append("u1", batch("a"))
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        for name in names:
            conn.execute(
                "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                f"VALUES ('eventlog', {name}, '2030-01-01')"
            )
    for read_only in (False, True):
        with pytest.raises(SchemaVersionError, match="upgrade chatledger"):
            SQLiteEventStore(path, read_only=read_only)
