"""A way back from damage: an acknowledged record is left out, nothing else is, and only the
chain key's holder can acknowledge anything in a keyed ledger."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from eventlog import ChainIntegrityError, ChainKeyError, SQLiteEventStore, UserMessage
from eventlog.models import RecordQuarantined
from eventlog.quarantine import QUARANTINE_STREAM
from eventlog.serialization import decode_event, encode_event
from eventlog.testing.records import user_payload
from projections import MessageWindowChatMemory
from projections.adapters.openai_agents import LedgerSession
from tests.eventlog.test_forger import KEY, Db
from tests.factories import a_cut_export

pytestmark = pytest.mark.skip_backend("memory")  # the damage is done with SQL on the files

ITEMS: list[Any] = [{"role": "user", "content": f"item {i}"} for i in range(1, 7)]


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _damaged(backend: Any, *, keyed: bool, seqs: tuple[int, ...] = (5,)) -> Db:
    """Six items in "conv" and three in "other", then the content of ``seqs`` of "conv"
    edited by hand (a disk fault, or someone with SQL access)."""
    store = backend.open(chain_key=KEY if keyed else None)
    _run(LedgerSession("conv", store=store).add_items(ITEMS))
    _run(LedgerSession("other", store=store).add_items(ITEMS[:3]))
    store.close()
    db = Db(backend)
    db.keyed = keyed
    for seq in seqs:
        db.run(
            "UPDATE {events} SET payload = ? WHERE stream_id = ? AND seq = ?",
            user_payload("damaged"),
            "conv",
            seq,
        )
    return db


def _items(store: Any, **kwargs: Any) -> Any:
    return _run(LedgerSession("conv", store=store).get_items(**kwargs))


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_an_acknowledged_record_is_left_out_and_the_session_works_again(backend, keyed) -> None:
    _damaged(backend, keyed=keyed)
    store = backend.open(chain_key=KEY if keyed else None)
    # Check reads fail closed, naming the seq and the remedy.
    with pytest.raises(ChainIntegrityError) as caught:
        _items(store)
    assert caught.value.seq == 5
    assert "not served" in str(caught.value)
    ack = store.quarantine("conv", 5, reason="disk fault, ticket 42")
    assert ack.stream_id == QUARANTINE_STREAM
    assert ack.format == (3 if keyed else 2)  # keyed when the chain is
    assert set(store.quarantined("conv")) == {5}
    assert store.quarantined("other") == {}
    # Check every read path works again, without the damaged item and with every other one.
    without = ITEMS[:4] + ITEMS[5:]
    assert _items(store) == without
    assert _items(store, limit=2) == without[-2:]  # topped up from before the damage
    assert _items(store, limit=3) == without[-3:]
    session = LedgerSession("conv", store=store)
    _run(session.add_items([{"role": "user", "content": "after"}]))
    assert _items(store)[-1] == {"role": "user", "content": "after"}
    assert _run(session.pop_item()) == {"role": "user", "content": "after"}
    memory = MessageWindowChatMemory("conv", max_messages=2**31 - 1, store=store)
    assert [e.seq for e in memory.history()] == [1, 2, 3, 4, 6, 7, 8]
    assert len(memory.messages()) == 5
    # Check verify still reports the acknowledged break, and quarantining again is a no-op.
    report = store.verify("conv")
    assert not report.ok
    assert report.failures["conv"][0] == 5
    assert store.quarantine("conv", 5, reason="again") == ack


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_a_record_emptied_by_hand_can_be_acknowledged(backend, keyed) -> None:
    db = _damaged(backend, keyed=keyed, seqs=())
    db.run("UPDATE {events} SET payload = '', salt = '' WHERE stream_id = ? AND seq = 4", "conv")
    store = backend.open(chain_key=KEY if keyed else None)
    # Check the emptied record (what erase() leaves, without an erasure) is refused, counts as
    # damage, and once acknowledged the session serves every other item.
    with pytest.raises(ChainIntegrityError, match="no erasure reached it") as caught:
        _items(store)
    assert caught.value.seq == 4
    ack = decode_event(store.quarantine("conv", 4, reason="emptied by hand, ticket 7"))
    assert isinstance(ack, RecordQuarantined)
    assert ack.found.startswith("its content is gone, but no erasure reached it")
    assert _items(store) == ITEMS[:3] + ITEMS[4:]
    assert store.verify("conv").failures["conv"][0] == 4


def test_only_a_damaged_record_can_be_acknowledged_and_only_it_is_left_out(backend) -> None:
    _damaged(backend, keyed=False, seqs=(3, 5))
    store = backend.open()
    # Check an intact record cannot be hidden.
    with pytest.raises(ValueError, match="nothing to quarantine"):
        store.quarantine("conv", 4, reason="hide it")
    with pytest.raises(ValueError, match="records end at seq 6"):
        store.quarantine("conv", 7, reason="past the head")
    with pytest.raises(ValueError, match="reason must be a non-empty string"):
        store.quarantine("conv", 5, reason=" ")
    # Check acknowledging seq 5 leaves seq 3's damage refused, in every range that holds it.
    store.quarantine("conv", 5, reason="disk fault")
    with pytest.raises(ChainIntegrityError) as caught:
        _items(store)
    assert caught.value.seq == 3
    assert _items(store, limit=2) == [ITEMS[3], ITEMS[5]]  # seqs 4 and 6: intact, served
    with pytest.raises(ChainIntegrityError):
        _items(store, limit=3)  # reaches seq 3
    # Check another memory's damage at the same seq is not covered.
    Db(backend).run(
        "UPDATE {events} SET payload = ? WHERE stream_id = ? AND seq = 3",
        user_payload("damaged"),
        "other",
    )
    with pytest.raises(ChainIntegrityError):
        _run(LedgerSession("other", store=store).get_items())


def test_without_the_chain_key_no_acknowledgement_silences_a_break(backend, tmp_path) -> None:
    db = _damaged(backend, keyed=True)
    # Check a store opened without the key cannot acknowledge anything.
    keyless = backend.open()
    with pytest.raises(ChainKeyError):
        keyless.quarantine("conv", 5, reason="forged")
    keyless.close()
    # Check a forger writing an acknowledgement row by hand (an unkeyed record: a valid
    # SHA-256 chain, all it can compute) is refused, and the break stays refused.
    scratch = SQLiteEventStore(tmp_path / "scratch.db")
    event = RecordQuarantined(
        memory="conv",
        seq=5,
        found="forged",
        found_hash="",
        quarantined_at=scratch._now(),
        reason="forged",
    )
    scratch.append(QUARANTINE_STREAM, [encode_event(event)])
    scratch.close()
    with sqlite3.connect(tmp_path / "scratch.db") as conn:
        row = conn.execute(
            "SELECT stream_id, seq, recorded_at, kind, schema_version, payload, meta, "
            "prev_hash, hash, salt, commitment, format FROM events"
        ).fetchone()
    (top,) = db.run("SELECT max(position) FROM {events}")[0]
    db.run(
        "INSERT INTO {events} (position, stream_id, seq, recorded_at, kind, schema_version, "
        "payload, meta, prev_hash, hash, salt, commitment, format) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        top + 1,
        *row,
    )
    store = backend.open(chain_key=KEY)
    with pytest.raises(ChainIntegrityError) as caught:
        _items(store)
    assert (caught.value.stream_id, caught.value.seq) == ("conv", 5)
    with pytest.raises(ChainIntegrityError):
        store.quarantined("conv")  # the forged acknowledgement itself is refused


def test_an_acknowledgement_survives_export_and_import(backend, tmp_path) -> None:
    import io
    import json

    from eventlog.formats.jsonl import export_jsonl, import_jsonl
    from eventlog.serialization import decode_event

    db = _damaged(backend, keyed=False, seqs=())
    (original,) = [r["payload"] for r in db.rows("conv") if r["seq"] == 5]
    db.run(
        "UPDATE {events} SET payload = ? WHERE stream_id = ? AND seq = 5",
        user_payload("damaged"),
        "conv",
    )
    store = backend.open()
    ack = store.quarantine("conv", 5, reason="disk fault")
    out = io.StringIO()
    # allow_damaged: an acknowledgement excuses reads, not the chain that import checks.
    export_jsonl(store, out, include_system=True, allow_damaged=True)
    copy = SQLiteEventStore(tmp_path / "copy.db")
    # The damaged memory itself would be refused by the import (its chain is broken), and
    # without it its acknowledgement is refused too: it would name a memory of the target.
    header, *rows = out.getvalue().splitlines()
    lines = a_cut_export([header, *(r for r in rows if json.loads(r)["memory"] != "conv")])
    with pytest.raises(ValueError, match="'conv' seq 5, a memory this file does not bring"):
        import_jsonl(copy, lines)
    assert copy.streams(include_system=True) == []
    # Check once the record is restored the memory travels with its acknowledgement, which
    # excuses nothing there (the record is intact).
    db.run("UPDATE {events} SET payload = ? WHERE stream_id = ? AND seq = 5", original, "conv")
    out = io.StringIO()
    export_jsonl(store, out, include_system=True)
    import_jsonl(copy, out.getvalue().splitlines())
    (imported,) = copy.read(QUARANTINE_STREAM)
    assert imported.payload == ack.payload
    assert decode_event(imported) == decode_event(ack)
    assert isinstance(decode_event(imported), RecordQuarantined)
    assert copy.quarantined("conv") == {}


def test_bad_requests_are_refused_and_acknowledging_twice_is_one_acknowledgement(backend) -> None:
    _damaged(backend, keyed=False)
    store = backend.open()
    for seq in (0, True, "5"):
        with pytest.raises(ValueError, match="seq must be an int >= 1"):
            store.quarantine("conv", seq, reason="fault")
    with pytest.raises(ValueError, match="records end at seq 6"):
        store.quarantine("conv", 7, reason="fault")
    with pytest.raises(ValueError, match="records end at seq 0"):
        store.quarantine("nobody", 1, reason="fault")
    first = store.quarantine("conv", 5, reason="fault")
    assert store.quarantine("conv", 5, reason="again") == first
    # Check ranges read around the excluded record, both ways and bounded.
    every = store.read_verified_excluding("conv", skip={5})
    assert [r.seq for r in every] == [1, 2, 3, 4, 6]
    newest = store.read_verified_excluding("conv", skip={5}, desc=True, limit=3)
    assert [r.seq for r in newest] == [6, 4]  # the limit counts the rows read, 5 included
    assert [r.seq for r in store.read_verified_excluding("conv", skip={5}, gt=4, lte=6)] == [6]


@pytest.mark.parametrize("damage", ["deleted", "relinked"])
def test_a_missing_or_unlinked_record_can_be_acknowledged(backend, damage) -> None:
    db = _damaged(backend, keyed=False, seqs=())
    if damage == "deleted":
        db.run("DELETE FROM {events} WHERE stream_id = ? AND seq = ?", "conv", 3)
    else:
        db.run(
            "UPDATE {events} SET prev_hash = ? WHERE stream_id = ? AND seq = ?",
            "0" * 64,
            "conv",
            3,
        )
    store = backend.open()
    with pytest.raises(ChainIntegrityError):
        _items(store)
    store.quarantine("conv", 3, reason=f"record {damage}")
    assert len(_items(store)) == 5


def _forge(db: Db, seq: int, *, payload: str | None = None, prev_hash: str | None = None) -> None:
    """Rewrite record ``seq`` of "conv" with a valid SHA-256 hash (an unkeyed ledger: anyone
    with SQL access can), so only its links give it away."""
    from eventlog.hashing import chain_hash_v2, commit

    (row,) = [r for r in db.rows("conv") if r["seq"] == seq]
    payload = row["payload"] if payload is None else payload
    prev = row["prev_hash"] if prev_hash is None else prev_hash
    commitment = commit(bytes.fromhex(row["salt"]), payload)
    digest = chain_hash_v2(
        prev, "conv", seq, row["kind"], row["schema_version"], row["recorded_at"], commitment,
        row["meta"],
    )  # fmt: skip
    db.run(
        "UPDATE {events} SET payload = ?, prev_hash = ?, commitment = ?, hash = ? "
        "WHERE stream_id = ? AND seq = ?",
        payload, prev, commitment, digest, "conv", seq,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("seq", "edit", "found"),
    [
        (1, {"prev_hash": "1" * 64}, "it does not start the chain"),
        (3, {"prev_hash": "1" * 64}, "it does not chain to seq 2"),
        (3, {"payload": user_payload("forged")}, "seq 4 does not chain to it"),
    ],
)
def test_a_record_that_verifies_alone_but_breaks_a_link_is_named_by_that_link(
    backend, seq, edit, found
) -> None:
    db = _damaged(backend, keyed=False, seqs=())
    _forge(db, seq, **edit)
    store = backend.open()
    with pytest.raises(ChainIntegrityError):
        _items(store)
    record = store.quarantine("conv", seq, reason="forged by hand")
    event = decode_event(record)
    assert isinstance(event, RecordQuarantined)
    assert event.found == found
    # Check a record two away, which verifies and chains both ways, is not taken for damage.
    with pytest.raises(ValueError, match="the record verifies and chains to its neighbours"):
        store.quarantine("conv", seq + 2, reason="not damaged")


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_a_damaged_newest_record_can_be_acknowledged(backend, keyed) -> None:
    _damaged(backend, keyed=keyed, seqs=(6,))  # the head: its seal still names its hash
    store = backend.open(chain_key=KEY if keyed else None)
    with pytest.raises(ChainIntegrityError) as caught:
        _items(store)
    assert caught.value.seq == 6
    store.quarantine("conv", 6, reason="the newest record was edited")
    # Check the session reads again without it, and goes on from it.
    assert [item["content"] for item in _items(store)] == [f"item {i}" for i in range(1, 6)]
    _run(LedgerSession("conv", store=store).add_items([{"role": "user", "content": "item 7"}]))
    assert _items(store)[-1]["content"] == "item 7"
    assert not store.verify().ok  # the acknowledged break is still reported


def test_a_window_memory_whose_newest_record_is_acknowledged_says_so(backend) -> None:
    store = backend.open()
    memory = MessageWindowChatMemory(id="win", max_messages=10, store=store)
    for n in range(3):
        memory.add(UserMessage(f"m{n}"))
    store.close()
    Db(backend).run(
        "UPDATE {events} SET payload = ? WHERE stream_id = ? AND seq = ?",
        user_payload("torn"),
        "win",
        3,
    )
    store = backend.open()
    store.quarantine("win", 3, reason="torn write")
    # Check a clear refusal naming the record and the way out, not a crash.
    with pytest.raises(ChainIntegrityError, match="acknowledged as damaged") as caught:
        MessageWindowChatMemory(id="win", max_messages=10, store=store).messages()
    assert caught.value.seq == 3
