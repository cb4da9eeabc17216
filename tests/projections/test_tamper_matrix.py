"""The tamper matrix: what someone with write access to the database can do with plain SQL,
and what catches it. Every edit is caught by ``verify()`` or by ``verify(digest=d)`` against a
digest taken before it, and no edit makes a fresh memory serve text from a record that does not
verify (it either fails with a clear error or shows records that do)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import timedelta

import pytest

from eventlog import ChainIntegrityError, SQLiteEventStore, UserMessage
from eventlog.hashing import commit, head_mac, record_hash
from eventlog.models import Record
from projections import MessageWindowChatMemory, compact
from projections.snapshots import SNAPSHOT_NAME
from tests.factories import lose_last_commit

KEY = b"a chain key of 32 bytes, exactly"
FORGED = "FORGED"


def _memory(store, memory_id="conv"):
    return MessageWindowChatMemory(id=memory_id, max_messages=4, store=store)


def _rows(path, sql, *params):
    with sqlite3.connect(path) as conn:
        conn.execute(sql, params)


def _rechain(store: SQLiteEventStore, path, stream: str, seq: int, text: str) -> None:
    """Rewrite one message and recompute its commitment and every later hash of its stream
    with the public functions: every chain is self-consistent again."""
    prev = None
    for record in store.read(stream, gt=seq - 1):
        forged: Record = record
        if record.seq == seq:
            forged = record._replace(payload=record.payload.replace("m3", text))
            forged = forged._replace(commitment=commit(bytes.fromhex(forged.salt), forged.payload))
        if prev is not None:
            forged = forged._replace(prev_hash=prev)
        # Without the key a forger can only write unkeyed records (format 2).
        forged = forged._replace(format=2)
        forged = forged._replace(hash=record_hash(forged))
        _rows(
            path,
            "UPDATE events SET payload = ?, commitment = ?, prev_hash = ?, hash = ?, format = 2 "
            "WHERE stream_id = ? AND seq = ?",
            forged.payload,
            forged.commitment,
            forged.prev_hash,
            forged.hash,
            stream,
            record.seq,
        )
        prev = forged.hash


def edit_payload(store, path, key):
    _rows(path, "UPDATE events SET payload = replace(payload, 'm5', ?) WHERE seq = 5", FORGED)


def edit_snapshot(store, path, key):
    compact(store, idle_for=timedelta(0))
    assert store.load_snapshot("conv", SNAPSHOT_NAME) is not None
    _rows(path, "UPDATE snapshots SET state = replace(state, 'm5', ?)", FORGED)


def delete_tail_and_continue(store, path, key):
    _rows(path, "DELETE FROM events WHERE stream_id = 'conv' AND seq >= 5")
    # The head seal still says seq 6: no memory continues the truncated chain.
    with pytest.raises(ChainIntegrityError, match="truncated"):
        _memory(SQLiteEventStore(path, chain_key=key)).add(UserMessage(f"{FORGED} continuation"))


def delete_tail(store, path, key):
    _rows(path, "DELETE FROM events WHERE stream_id = 'conv' AND seq >= 5")


def delete_memory(store, path, key):
    _rows(path, "DELETE FROM events WHERE stream_id = 'other'")


def rechain_rewrite(store, path, key):
    _rechain(store, path, "conv", 3, FORGED)
    if key is None:
        # An unkeyed head seal is a plain SHA-256: the forger recomputes it too.
        (last,) = store.read("conv", desc=True, limit=1)
        _rows(
            path,
            "UPDATE heads SET hash = ?, mac = ? WHERE stream_id = 'conv'",
            last.hash,
            head_mac(None, "conv", last.seq, last.hash),
        )


def lost_commit_replaced(store, path, key):
    lose_last_commit(path, "conv", 6, key)
    _memory(SQLiteEventStore(path, chain_key=key)).add(UserMessage(f"{FORGED} at the same seq"))


def malformed_time(store, path, key):
    _rows(path, "UPDATE events SET recorded_at = 'yesterday' WHERE stream_id = 'conv' AND seq = 2")


def malformed_key(store, path, key):
    _rows(path, "UPDATE events SET stream_id = '~i:007' WHERE stream_id = 'other'")


EDITS: dict[str, Callable[..., None]] = {
    "payload edited": edit_payload,
    "snapshot edited": edit_snapshot,
    "tail deleted, conversation continued": delete_tail_and_continue,
    "tail deleted": delete_tail,
    "whole memory deleted": delete_memory,
    "message rewritten, chain recomputed": rechain_rewrite,
    "last commit lost, other writer at the same seq": lost_commit_replaced,
    "malformed recorded_at": malformed_time,
    "non-canonical stream key": malformed_key,
}


def _verified_texts(store) -> set[str]:
    """Every message text of a record the store vouches for."""
    texts = set()
    for record in store.read_all():
        if store.check(record) is None:
            texts.add(record.payload)
    return texts


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed"])
@pytest.mark.parametrize("edit", list(EDITS), ids=list(EDITS))
def test_every_edit_is_caught_and_nothing_unverified_is_served(tmp_path, edit, keyed):
    path = tmp_path / "chat.db"
    key = KEY if keyed else None
    store = SQLiteEventStore(path, chain_key=key)
    live = _memory(store)
    for i in range(1, 7):
        live.add(UserMessage(f"m{i}"))
    _memory(store, "other").add(UserMessage("other"))
    digest = store.digest()
    EDITS[edit](store, path, key)
    fresh = SQLiteEventStore(path, chain_key=key)
    # Check the edit is caught: by the chains alone, or against the digest taken before it.
    caught_by_chain = not fresh.verify().ok
    caught_by_digest = not fresh.verify(digest=digest).ok
    if edit == "snapshot edited":
        # Snapshots are outside the log and never served: nothing to catch, nothing shown.
        assert not caught_by_chain and not caught_by_digest
    else:
        assert caught_by_chain or caught_by_digest, edit
    if edit == "message rewritten, chain recomputed":
        # Without the key anyone can recompute a chain: only the digest tells. With the key,
        # the chain itself refuses the forgery.
        assert caught_by_digest and caught_by_chain == keyed
    # Check a fresh memory never serves text from a record that does not verify.
    try:
        shown = _memory(fresh).messages()
    except (ChainIntegrityError, ValueError) as e:
        assert "conv" in str(e)  # the error names the memory
        return
    payloads = _verified_texts(fresh)
    for message in shown:
        assert any(message.text in payload for payload in payloads)
        if FORGED in (message.text or ""):
            assert edit in (
                "tail deleted, conversation continued",
                "message rewritten, chain recomputed",
                "last commit lost, other writer at the same seq",
            )
