"""[forger] on the command line: reads never write, keys are adopted only by `key adopt`, and a
downgraded keyed ledger fails `verify` with the key."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from eventlog import ChainIntegrityError, ChainKeyError, SQLiteEventStore, UserMessage
from eventlog.hashing import chain_hash_v2, commit
from eventlog.testing.records import user_payload
from projections import MessageWindowChatMemory

KEY = b"a chain key of 32 bytes, exactly"

READS = [
    ["ids"],
    ["history", "conv"],
    ["show", "conv"],
    ["diff", "conv", "1", "3"],
    ["verify"],
    ["digest"],
    ["export", "-o", "-"],
]


def _snapshot(directory: Path) -> dict[str, str]:
    """Every file beside the ledger with a hash of its bytes."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file()
    }


@pytest.fixture
def app_ledger(tmp_path):
    """A ledger written by an application without a key, closed cleanly (no -wal left)."""
    path = tmp_path / "app.db"
    with SQLiteEventStore(path) as store:
        memory = MessageWindowChatMemory(id="conv", max_messages=4, store=store)
        for text in ("hello", "pay 10 EUR", "thanks"):
            memory.add(UserMessage(text))
    (tmp_path / "chain.key").write_bytes(KEY)
    return path


@pytest.mark.parametrize("args", READS, ids=lambda a: a[0])
def test_read_commands_change_no_byte_with_or_without_a_key_file(cli, app_ledger, args):
    before = _snapshot(app_ledger.parent)
    plain = cli(*args, "--db", app_ledger)
    assert plain.returncode == 0, plain.stderr
    # A key file handed to a read on an unkeyed ledger is refused with the remedy, never written.
    keyed = cli(*args, "--db", app_ledger, "--key-file", app_ledger.parent / "chain.key")
    assert keyed.returncode == 1
    assert "chatledger key adopt" in keyed.stderr
    after = _snapshot(app_ledger.parent)
    assert {k: v for k, v in after.items() if not k.endswith(("-wal", "-shm"))} == {
        k: v for k, v in before.items() if not k.endswith(("-wal", "-shm"))
    }
    with sqlite3.connect(app_ledger) as conn:
        assert conn.execute(
            "SELECT count(*) FROM settings WHERE name = 'key_check'"
        ).fetchone() == (0,)
    # The application, which opens without a key, keeps appending.
    with SQLiteEventStore(app_ledger) as store:
        MessageWindowChatMemory(id="conv", max_messages=4, store=store).add(UserMessage("ok"))


def test_key_adopt_keys_the_ledger_and_verify_says_from_where(cli, app_ledger):
    key_file = app_ledger.parent / "chain.key"
    missing = cli("key", "adopt", "--db", app_ledger)
    assert missing.returncode == 2
    assert "--key-file" in missing.stderr
    adopted = cli("key", "adopt", "--db", app_ledger, "--key-file", key_file)
    assert adopted.returncode == 0, adopted.stderr
    assert "3 unkeyed record(s) before it are sealed" in adopted.stdout
    checked = cli("verify", "--db", app_ledger, "--key-file", key_file)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("OK ")
    assert "keyed after position 3, 3 unkeyed records sealed before it" in checked.stdout
    # The application now needs the key to write.
    with SQLiteEventStore(app_ledger) as store:
        memory = MessageWindowChatMemory(id="conv", max_messages=4, store=store)
        with pytest.raises((ChainKeyError, ChainIntegrityError), match="chain_key="):
            memory.add(UserMessage("x"))


def test_verify_with_the_key_fails_a_downgraded_keyed_ledger(cli, tmp_path):
    path = tmp_path / "keyed.db"
    with SQLiteEventStore(path, chain_key=KEY) as store:
        memory = MessageWindowChatMemory(id="conv", max_messages=4, store=store)
        for text in ("hello", "pay 10 EUR", "thanks"):
            memory.add(UserMessage(text))
    (tmp_path / "chain.key").write_bytes(KEY)
    # The forger rewrites the memory as unkeyed records at positions <= 0 (no key needed).
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT seq, kind, schema_version, recorded_at, meta, salt, payload FROM events "
            "WHERE stream_id = 'conv' ORDER BY seq"
        ).fetchall()
        prev = "0" * 64
        for seq, kind, version, when, meta, salt, stored in rows:
            payload = user_payload("pay 10000 EUR") if seq == 2 else stored
            commitment = commit(bytes.fromhex(salt), payload)
            digest = chain_hash_v2(prev, "conv", seq, kind, version, when, commitment, meta)
            conn.execute(
                "UPDATE events SET payload = ?, commitment = ?, prev_hash = ?, hash = ?, "
                "format = 2, position = ? WHERE stream_id = 'conv' AND seq = ?",
                (payload, commitment, prev, digest, -seq, seq),
            )
            prev = digest
    result = cli("verify", "--db", path, "--key-file", tmp_path / "chain.key")
    assert result.returncode == 1
    assert "BROKEN" in result.stdout
    assert "sealed legacy prefix" in result.stdout
    shown = cli("history", "conv", "--db", path, "--key-file", tmp_path / "chain.key")
    assert shown.returncode == 1
    assert "pay 10000 EUR" not in shown.stdout
    assert "not served" in shown.stderr


def test_a_ledger_is_recognised_by_its_marker_while_its_writer_still_runs(cli, tmp_path):
    path = tmp_path / "live.db"
    with SQLiteEventStore(path) as store:
        MessageWindowChatMemory(id="conv", max_messages=4, store=store).add(UserMessage("hi"))
        # The header with the marker may still be only in the WAL: it is read from there.
        listed = cli("ids", "--db", path)
        assert listed.returncode == 0, listed.stderr
        assert "conv" in listed.stdout
