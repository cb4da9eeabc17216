"""[forger], the edges a review found: each attack is plain SQL by someone without the chain key
on a real SQLite file and a real PostgreSQL schema, and each must be refused by the read path
and by ``verify()`` (or by the operation it targets)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

from eventlog import ChainIntegrityError
from eventlog.hashing import chain_hash_v2, commit, new_salt
from eventlog.testing.records import user_payload
from projections import MessageWindowChatMemory
from tests.eventlog.test_forger import KEY, Db, _say

pytestmark = pytest.mark.skip_backend("memory")  # attacks edit files and rows

COLUMNS = (
    "position, stream_id, seq, recorded_at, kind, schema_version, payload, meta, prev_hash, "
    "hash, salt, commitment, format"
)


def _backup(db: Db, stream: str) -> list[tuple[Any, ...]]:
    return [tuple(r.values()) for r in db.rows(stream)]


def _put_back(db: Db, rows: list[tuple[Any, ...]]) -> None:
    marks = ", ".join("?" * 13)
    for row in rows:
        db.run(f"INSERT INTO {{events}} ({COLUMNS}) VALUES ({marks})", *row[:13])


def test_purged_records_put_back_from_a_backup_are_refused(backend) -> None:
    store = backend.open(chain_key=KEY)
    _say(store, "conv", "my card is 4111 1111 1111 1111", "expires 12/29")
    db = Db(backend)
    backup = _backup(db, "conv")
    store.purge("conv", expected_seq=2, reason="retention")
    _say(store, "conv", "new chat")
    store.close()
    # Every purged row is genuine and keyed; only the seal (erased through the tombstone) can
    # tell they were purged.
    _put_back(db, backup)
    fresh = backend.open(chain_key=KEY)
    with pytest.raises(ChainIntegrityError, match="its erasure or purge") as caught:
        fresh.read_verified("conv")
    assert caught.value.seq == 1
    with pytest.raises(ChainIntegrityError):
        MessageWindowChatMemory(id="conv", max_messages=10, store=fresh).as_of(seq=2)
    assert fresh.verify().failures["conv"][0] == 1


@pytest.mark.parametrize("kind", ["memory_erased", "memory_purged"])
@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_an_emptied_receipt_is_refused(backend, kind, keyed) -> None:
    store = backend.open(chain_key=KEY if keyed else None)
    _say(store, "conv", "a", "b")
    if kind == "memory_erased":
        store.erase("conv", reason="the user asked")
    else:
        store.purge("conv", expected_seq=2, reason="retention")
    store.close()
    db = Db(backend)
    db.run("UPDATE {events} SET payload = '', salt = '' WHERE kind = ?", kind)
    fresh = backend.open(chain_key=KEY if keyed else None)
    # Receipts are never erased: emptied, what was erased, when and why is gone.
    for read in (fresh.read_verified, fresh.read_verified_rows):
        with pytest.raises(ChainIntegrityError, match="receipts are never erased"):
            read("conv")
    assert not fresh.verify().ok


def test_prove_refuses_erased_content_put_back(backend) -> None:
    store = backend.open(chain_key=KEY)
    _say(store, "conv", "my SSN is 078-05-1120")
    db = Db(backend)
    (before,) = db.rows("conv")
    store.erase("conv", reason="GDPR art. 17")
    db.run(
        "UPDATE {events} SET payload = ?, salt = ? WHERE stream_id = ? AND seq = 1",
        before["payload"],
        before["salt"],
        "conv",
    )
    # A proof discloses its record's content by default: never content the seal says is erased.
    with pytest.raises(ChainIntegrityError, match="its erasure or purge") as caught:
        store.prove("conv", 1)
    assert "078-05-1120" not in str(caught.value)


def test_an_adopted_ledgers_unkeyed_record_rewritten_under_a_running_process(backend) -> None:
    legacy = backend.open()
    _say(legacy, "conv", "hi", "transfer 10 EUR to Bob", "ok")
    legacy.close()
    server = backend.open(chain_key=KEY, adopt_key=True)  # the long-lived app, keyed since adoption
    memory = MessageWindowChatMemory(id="conv", max_messages=10, store=server)
    assert [m.text for m in memory.as_of(seq=2)] == ["hi", "transfer 10 EUR to Bob"]
    # The forger rewrites unkeyed record 2 with a valid SHA-256 hash (no key needed); the
    # link from seq 3 breaks, but a read that stops at seq 2 does not see that link.
    (row,) = [r for r in Db(backend).rows("conv") if r["seq"] == 2]
    payload = user_payload("transfer 10000 EUR to Mallory")
    salt = new_salt()
    commitment = commit(salt, payload)
    digest = chain_hash_v2(
        row["prev_hash"],
        "conv",
        2,
        row["kind"],
        row["schema_version"],
        row["recorded_at"],
        commitment,
        row["meta"],
    )
    Db(backend).run(
        "UPDATE {events} SET payload = ?, salt = ?, commitment = ?, hash = ? "
        "WHERE stream_id = ? AND seq = 2",
        payload,
        salt.hex(),
        commitment,
        digest,
        "conv",
    )
    # Check the same process refuses it in every read, the short ones included.
    with pytest.raises(ChainIntegrityError):
        server.read_verified("conv", gt=1, lte=2)
    with pytest.raises(ChainIntegrityError):
        MessageWindowChatMemory(id="conv", max_messages=10, store=server).as_of(seq=2)
    assert not server.verify().ok


def test_a_seq_stored_as_text_is_damage_not_a_type_error(backend) -> None:
    if backend.name != "sqlite":
        pytest.skip("only SQLite keeps text in an integer column")
    store = backend.open(chain_key=KEY)
    _say(store, "conv", "a", "b")
    store.close()
    with sqlite3.connect(backend.path) as conn:
        conn.execute(
            f"INSERT INTO events ({COLUMNS.replace('position, ', '')}) SELECT stream_id, 'x', "
            "recorded_at, kind, schema_version, payload, meta, prev_hash, hash, salt, "
            "commitment, format FROM events WHERE seq = 2"
        )
    fresh = backend.open(chain_key=KEY)
    for read in (
        lambda: fresh.read_verified("conv"),
        lambda: MessageWindowChatMemory(id="conv", max_messages=10, store=fresh).messages(),
    ):
        with pytest.raises(ChainIntegrityError, match="not an integer"):
            read()
    assert json.dumps(fresh.verify().failures["conv"][1]).count("not an integer") == 1


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_a_memory_whose_every_row_was_deleted_fails_the_whole_ledgers_verify(
    backend, keyed
) -> None:
    store = backend.open(chain_key=KEY if keyed else None)
    _say(store, "gone", "my card is 4111 1111 1111 1111", "expires 12/29")
    _say(store, "kept", "hello")
    store.close()
    # The forger deletes every row of one memory and leaves its head seal (deleting the seal
    # too is a deletion only a digest or a witness can show).
    Db(backend).run("DELETE FROM {events} WHERE stream_id = ?", "gone")
    fresh = backend.open(chain_key=KEY if keyed else None)
    report = fresh.verify()
    assert not report.ok
    assert set(report.failures) == {"gone"} and "gone" in report.checked
    seq, reason = report.failures["gone"]
    assert seq == 2 and "seal" in reason
    # Check verify() of that memory alone says the same, and the other memory is intact.
    assert fresh.verify("gone").failures["gone"] == (seq, reason)
    assert fresh.verify("kept").ok
