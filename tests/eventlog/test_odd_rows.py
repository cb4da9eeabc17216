"""Rows no store writes, put in a SQLite ledger by hand: every read path refuses them by name
(ChainIntegrityError naming the seq), the whole-history path (read_verified_rows) exactly as the
record path (read_verified), and verify() reports them - never a crash, never served."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from eventlog import ChainIntegrityError, FileKeyring, SQLiteEventStore
from eventlog.hashing import GENESIS, chain_hash_v2, commit
from eventlog.testing.records import batch

KEY = b"k" * 32


def _ledger(path: Path, **options: object) -> None:
    store = SQLiteEventStore(path, **options)  # type: ignore[arg-type]
    store.append("u1", batch("m1", "m2", "m3", "m4"))
    store.close()


def _refusals(store: SQLiteEventStore) -> list[int]:
    """The seq each read path refuses at (both must refuse)."""
    seqs = []
    for read in (store.read_verified, store.read_verified_rows):
        with pytest.raises(ChainIntegrityError) as caught:
            read("u1")
        seqs.append(caught.value.seq)
    return seqs


def test_a_row_forged_at_seq_0_is_refused_by_both_read_paths_and_seen_by_verify(tmp_path):
    path = tmp_path / "seq0.db"
    _ledger(path)
    with sqlite3.connect(path) as conn:
        (at, version) = conn.execute(
            "SELECT recorded_at, schema_version FROM events WHERE seq = 1"
        ).fetchone()
        salt, payload = "00" * 16, '{"reason":"x"}'
        commitment = commit(bytes.fromhex(salt), payload)
        digest = chain_hash_v2(GENESIS, "u1", 0, "memory_purged", version, at, commitment, "")
        conn.execute(
            "INSERT INTO events (stream_id, seq, recorded_at, kind, schema_version, payload, "
            "meta, prev_hash, hash, salt, commitment, format) "
            "VALUES ('u1', 0, ?, 'memory_purged', ?, ?, '', ?, ?, ?, ?, 2)",
            (at, version, payload, GENESIS, digest, salt, commitment),
        )
    store = SQLiteEventStore(path)
    assert _refusals(store) == [0, 0]
    assert not store.verify("u1").ok


@pytest.mark.parametrize(
    ("column", "value"),
    [("payload", b'{"x":1}'), ("salt", bytes(16)), ("recorded_at", b"2026"), ("meta", b"{}")],
)
@pytest.mark.parametrize("mode", ["plain", "keyed", "keyring"])
def test_a_column_of_a_type_no_store_writes_is_damage_named_by_its_seq(
    tmp_path, column, value, mode
):
    path = tmp_path / "odd.db"
    options: dict[str, object] = {}
    if mode == "keyed":
        options["chain_key"] = KEY
    if mode == "keyring":
        options["keyring"] = FileKeyring(tmp_path / "keys.json")
    _ledger(path, **options)
    with sqlite3.connect(path) as conn:
        # A BLOB keeps its type in a TEXT column (no affinity conversion).
        conn.execute(f"UPDATE events SET {column} = ? WHERE seq = 2", (value,))
    if mode == "keyring":
        options["keyring"] = FileKeyring(tmp_path / "keys.json")
    store = SQLiteEventStore(path, **options)  # type: ignore[arg-type]
    assert _refusals(store) == [2, 2]
    report = store.verify("u1")
    assert not report.ok
