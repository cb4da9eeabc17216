"""[forger]: someone with write access to the database files but without the chain key.

Each attack is done with plain SQL on a real SQLite file and a real PostgreSQL schema, then the
ledger is opened the way an application or the command line would open it. Every attack must
fail ``verify()`` with the key AND never be served: reads raise ChainIntegrityError naming the
memory, the seq and the remedy.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from eventlog import ChainIntegrityError, ChainKeyError, UserMessage
from eventlog.errors import PersistenceError, ReadOnlyError
from eventlog.hashing import chain_hash_v2, commit, head_mac
from eventlog.keycheck import KEY_CHECK
from eventlog.testing.records import user_payload
from projections import MessageWindowChatMemory
from tests.conftest import PG_DSN

KEY = b"the application's chain key, 32b"
FORGED = "pay 10000 EUR"

pytestmark = pytest.mark.skip_backend("memory")  # attacks edit files and rows


class Db:
    """Plain SQL on the backend's database, as an attacker with write access would run it.
    Statements use ``?`` and ``{events}``-style table names."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.keyed = False  # whether the ledger under attack is keyed (seals out of reach)
        self.backup: dict[int, tuple[str, str]] = {}  # seq -> (payload, salt) from before

    def _tables(self, text: str) -> str:
        if self.backend.name == "sqlite":
            return text.format(events="events", settings="settings", heads="heads")
        schema = f'"{self.backend.schema}"'
        return text.replace("?", "%s").format(
            events=f"{schema}.events", settings=f"{schema}.settings", heads=f"{schema}.heads"
        )

    def run(self, text: str, *params: Any) -> list[tuple[Any, ...]]:
        sql = self._tables(text)
        if self.backend.name == "sqlite":
            with sqlite3.connect(self.backend.path) as conn:
                return conn.execute(sql, params).fetchall()
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def rows(self, stream: str) -> list[dict[str, Any]]:
        names = [
            "position",
            "stream_id",
            "seq",
            "recorded_at",
            "kind",
            "schema_version",
            "payload",
            "meta",
            "prev_hash",
            "hash",
            "salt",
            "commitment",
            "format",
        ]
        found = self.run(
            f"SELECT {', '.join(names)} FROM {{events}} WHERE stream_id = ? ORDER BY seq", stream
        )
        return [dict(zip(names, row, strict=True)) for row in found]

    def rechain_unkeyed(
        self,
        stream: str,
        edit: dict[int, str],
        *,
        move: int = 0,
        payloads: dict[int, str] | None = None,
    ) -> None:
        """Rewrite ``stream`` as unkeyed format 2 records with valid SHA-256 hashes, payloads of
        ``edit`` (seq -> text) replaced, optionally moving every row to position ``-seq +
        move`` (positions are not hashed): everything a forger without the key can compute."""
        prev = "0" * 64
        for row in self.rows(stream):
            payload = user_payload(edit[row["seq"]]) if row["seq"] in edit else row["payload"]
            payload = (payloads or {}).get(row["seq"], payload)  # stored text, as given
            commitment = commit(bytes.fromhex(row["salt"]), payload)
            digest = chain_hash_v2(
                prev,
                stream,
                row["seq"],
                row["kind"],
                row["schema_version"],
                row["recorded_at"],
                commitment,
                row["meta"],
            )
            position = row["position"] if not move else move - row["seq"]
            self.run(
                "UPDATE {events} SET payload = ?, commitment = ?, prev_hash = ?, hash = ?, "
                "format = 2, position = ? WHERE stream_id = ? AND seq = ?",
                payload,
                commitment,
                prev,
                digest,
                position,
                stream,
                row["seq"],
            )
            prev = digest


@pytest.fixture
def db(backend: Any) -> Db:
    return Db(backend)


def _say(store: Any, memory_id: str, *texts: str) -> MessageWindowChatMemory:
    memory = MessageWindowChatMemory(id=memory_id, max_messages=10, store=store)
    for text in texts:
        memory.add(UserMessage(text))
    return memory


def _served(store: Any, memory_id: str) -> list[str]:
    """What a fresh memory object serves (a cold open, as an application after a restart)."""
    memory = MessageWindowChatMemory(id=memory_id, max_messages=10, store=store)
    return [str(m.text) for m in memory.messages()]


def test_keyed_downgrade_to_unkeyed_records_at_positions_below_zero_fails(backend, db):
    store = backend.open(chain_key=KEY)
    _say(store, "conv", "hello", "pay 10 EUR", "thanks")
    _say(store, "other", "unrelated")
    # The forger rewrites the memory as unkeyed records with recomputed hashes and moves them
    # below every keyed position, where an earlier version accepted unkeyed records.
    db.rechain_unkeyed("conv", {2: FORGED}, move=-100)
    fresh = backend.open(chain_key=KEY)
    report = fresh.verify()
    assert not report.ok
    assert "conv" in report.failures
    assert report.ledger_problems and "sealed legacy prefix" in report.ledger_problems[0]
    assert report.legacy_records == 0
    with pytest.raises(ChainIntegrityError) as caught:
        _served(fresh, "conv")
    assert caught.value.stream_id == "conv"
    assert "not served" in str(caught.value)
    assert _served(fresh, "other") == ["unrelated"]  # the rest stays usable


def test_unkeyed_records_forged_past_the_first_page_of_the_log_break_the_legacy_seal(
    backend, db, monkeypatch
):
    # verify() reads the whole log page by page for the unkeyed records; pages of 2 records
    # here, so the forged ones sit on the third page of 6 records (a full page is no end).
    monkeypatch.setattr("eventlog.ledger_verify._VERIFY_PAGE", 2)
    store = backend.open(chain_key=KEY)
    _say(store, "conv", "hello", "pay 10 EUR", "thanks")
    _say(store, "other", "unrelated", "and more", "bye")
    db.rechain_unkeyed("other", {3: FORGED})
    report = backend.open(chain_key=KEY).verify()
    assert report.records == 6
    (problem,) = report.ledger_problems
    assert "3 found, 0 sealed" in problem and "same count" not in problem


def test_full_downgrade_with_the_key_check_deleted_is_refused_at_open(backend, db):
    store = backend.open(chain_key=KEY)
    _say(store, "conv", "hello", "pay 10 EUR")
    store.close()
    db.rechain_unkeyed("conv", {2: FORGED})
    db.run("DELETE FROM {settings}")
    # Reopening with the key must not start afresh and vouch for the forged records.
    with pytest.raises(ChainKeyError, match="adopt_key=True"):
        backend.open(chain_key=KEY)


def test_a_full_downgrade_of_a_ledger_keyed_from_the_start_fails_verify_even_if_adopted(
    backend, db
):
    store = backend.open(chain_key=KEY)
    _say(store, "conv", "hello", "pay 10 EUR")
    store.close()
    db.rechain_unkeyed("conv", {2: FORGED})
    db.run("DELETE FROM {settings} WHERE name = ?", KEY_CHECK)
    # An operator who adopts the key anyway: the heads the forger could not reseal stop it.
    with pytest.raises(ChainKeyError, match="does not verify"):
        backend.open(chain_key=KEY, adopt_key=True)


def test_a_key_is_adopted_only_explicitly_and_the_report_says_what_is_keyed(backend, db):
    plain = backend.open()
    _say(plain, "conv", "before the key")
    # Unkeyed: nothing keyed and no sealed legacy prefix (its record is not one yet).
    before = plain.verify()
    assert (before.ok, before.keyed_since, before.legacy_records) == (True, None, 0)
    last_unkeyed = max(r["position"] for r in db.rows("conv"))
    with pytest.raises(ChainKeyError, match="chatledger key adopt"):
        backend.open(chain_key=KEY)
    keyed = backend.open(chain_key=KEY, adopt_key=True)
    _say(keyed, "conv2", "after the key")
    report = backend.open(chain_key=KEY).verify()
    assert report.ok, report
    assert report.keyed_since == last_unkeyed
    assert report.legacy_records == 1
    assert plain.verify().keyed_since is None or plain.verify().keyed_since == last_unkeyed
    # The sealed prefix holds against a forger without the key: a rehashed legacy record fails.
    db.rechain_unkeyed("conv", {1: FORGED})
    again = backend.open(chain_key=KEY)
    report = again.verify()
    assert not report.ok
    (problem,) = report.ledger_problems
    assert "1 found, 1 sealed" in problem and "(same count, different records)" in problem
    with pytest.raises(ChainIntegrityError):
        _served(again, "conv")


def test_adopting_a_key_refuses_a_ledger_that_does_not_verify(backend, db):
    plain = backend.open()
    _say(plain, "conv", "a", "b")
    db.run("UPDATE {events} SET payload = ? WHERE seq = 1", user_payload(FORGED))
    with pytest.raises(ChainKeyError, match="does not verify"):
        backend.open(chain_key=KEY, adopt_key=True)


def test_a_read_only_open_writes_nothing_and_refuses_a_key_for_an_unkeyed_ledger(backend, db):
    app = backend.open()
    _say(app, "conv", "hello")
    before = db.run("SELECT name, value FROM {settings} ORDER BY name")
    with pytest.raises(ChainKeyError, match="key adopt"):
        backend.open(chain_key=KEY, read_only=True)
    reader = backend.open(read_only=True)
    assert _served(reader, "conv") == ["hello"]
    with pytest.raises(ReadOnlyError, match="read_only=True"):
        reader.append("conv", [_record()])
    assert db.run("SELECT name, value FROM {settings} ORDER BY name") == before
    # The application, which opens without a key, keeps writing.
    _say(backend.open(), "conv", "still works")


def _record() -> Any:
    from eventlog.models import NewRecord

    return NewRecord("message_added", user_payload("x"))


def test_a_record_that_verify_rejects_never_reaches_the_model(backend, db):
    store = backend.open()
    _say(store, "conv", "a", "b", "c", "d")
    # Forge seq 2 and recompute only its own hash: the link from seq 3 stays broken.
    (row,) = [r for r in db.rows("conv") if r["seq"] == 2]
    payload = user_payload(FORGED)
    commitment = commit(bytes.fromhex(row["salt"]), payload)
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
    db.run(
        "UPDATE {events} SET payload = ?, commitment = ?, hash = ? WHERE stream_id = ? AND seq = 2",
        payload,
        commitment,
        digest,
        "conv",
    )
    fresh = backend.open()
    assert fresh.verify("conv").first_bad_seq("conv") == 3
    with pytest.raises(ChainIntegrityError, match="prev_hash") as caught:
        _served(fresh, "conv")
    assert caught.value.seq == 3


def test_a_live_memory_stops_appending_onto_a_chain_that_broke_under_it(backend, db):
    store = backend.open()
    memory = _say(store, "conv", "a", "b", "c")
    db.run("DELETE FROM {events} WHERE stream_id = ? AND seq = 3", "conv")
    with pytest.raises(ChainIntegrityError):
        memory.messages()
    with pytest.raises(ChainIntegrityError):
        memory.add(UserMessage("d"))
    assert [r["seq"] for r in db.rows("conv")] == [1, 2]  # nothing chained onto the break


# ---------------------------------------------------------------- the read-path matrix


def _seal_of(db: Db, stream: str) -> tuple[Any, ...]:
    return db.run("SELECT seq, hash, mac FROM {heads} WHERE stream_id = ?", stream)[0]


def _edit_content(db: Db, *, rehash: bool) -> None:
    if rehash:
        db.rechain_unkeyed("conv", {5: FORGED})
        if db.keyed:
            return
        _reseal(db)
        return
    db.run(
        "UPDATE {events} SET payload = ? WHERE stream_id = ? AND seq = 5",
        user_payload(FORGED),
        "conv",
    )


def _reseal(db: Db) -> None:
    """An unkeyed ledger's seal is a plain SHA-256: a forger recomputes it too."""
    last = db.rows("conv")[-1]
    db.run(
        "UPDATE {heads} SET seq = ?, hash = ?, mac = ? WHERE stream_id = ?",
        last["seq"],
        last["hash"],
        head_mac(None, "conv", last["seq"], last["hash"]),
        "conv",
    )


def _truncate(db: Db, *, rehash: bool) -> None:
    db.run("DELETE FROM {events} WHERE stream_id = ? AND seq = 6", "conv")
    if rehash and not db.keyed:
        _reseal(db)


def _delete_middle(db: Db, *, rehash: bool) -> None:
    db.run("DELETE FROM {events} WHERE stream_id = ? AND seq = 5", "conv")
    if rehash:
        db.run("UPDATE {events} SET seq = seq - 1 WHERE stream_id = ? AND seq > 5", "conv")
        db.rechain_unkeyed("conv", {})
        if not db.keyed:
            _reseal(db)


def _delete_first(db: Db, *, rehash: bool) -> None:
    db.run("DELETE FROM {events} WHERE stream_id = ? AND seq = 1", "conv")
    if rehash:
        db.run("UPDATE {events} SET seq = seq - 1 WHERE stream_id = ?", "conv")
        db.rechain_unkeyed("conv", {})
        if not db.keyed:
            _reseal(db)


def _swap(db: Db, *, rehash: bool) -> None:
    rows = {r["seq"]: r for r in db.rows("conv")}
    for seq, other in ((5, 6), (6, 5)):
        db.run(
            "UPDATE {events} SET payload = ?, salt = ?, commitment = ? "
            "WHERE stream_id = ? AND seq = ?",
            rows[other]["payload"],
            rows[other]["salt"],
            rows[other]["commitment"],
            "conv",
            seq,
        )
    if rehash:
        db.rechain_unkeyed("conv", {})
        if not db.keyed:
            _reseal(db)


def _insert_forged(db: Db, *, rehash: bool) -> None:
    last = db.rows("conv")[-1]
    payload = user_payload(FORGED)
    salt = "00" * 16
    commitment = commit(bytes(16), payload)
    digest = chain_hash_v2(
        last["hash"],
        "conv",
        7,
        "message_added",
        last["schema_version"],
        last["recorded_at"],
        commitment,
        "",
    )
    db.run(
        "INSERT INTO {events} (position, stream_id, seq, recorded_at, kind, schema_version, "
        "payload, meta, prev_hash, hash, salt, commitment, format) "
        "VALUES (?, ?, 7, ?, 'message_added', ?, ?, '', ?, ?, ?, ?, 2)",
        last["position"] + 1000,
        "conv",
        last["recorded_at"],
        last["schema_version"],
        payload,
        last["hash"],
        digest,
        salt,
        commitment,
    )
    if rehash and not db.keyed:
        _reseal(db)


def _copy_from_other(db: Db, *, rehash: bool) -> None:
    (row,) = [r for r in db.rows("other") if r["seq"] == 3]
    db.run(
        "UPDATE {events} SET payload = ?, salt = ?, commitment = ?, hash = ?, prev_hash = ?, "
        "recorded_at = ?, meta = ? WHERE stream_id = ? AND seq = 5",
        row["payload"],
        row["salt"],
        row["commitment"],
        row["hash"],
        row["prev_hash"],
        row["recorded_at"],
        row["meta"],
        "conv",
    )
    if rehash:
        db.rechain_unkeyed("conv", {})
        if not db.keyed:
            _reseal(db)


def _restore_erased(db: Db, *, rehash: bool) -> None:
    # Set up by the caller: "conv" was erased; its old content comes back from a backup.
    for seq, (payload, salt) in db.backup.items():
        db.run(
            "UPDATE {events} SET payload = ?, salt = ? WHERE stream_id = ? AND seq = ?",
            payload,
            salt,
            "conv",
            seq,
        )
    if rehash and not db.keyed:
        db.run("UPDATE {heads} SET erased_through = 0, erased_mac = '' WHERE stream_id = ?", "conv")


def _empty_content(db: Db, *, rehash: bool) -> None:
    # What erase() leaves (payload and salt gone, commitment kept) needs no key to leave: the
    # chain hash covers the commitment, so only the seal's erased_through can tell. A forger
    # who rehashes also claims the erasure in the seal row (whose MAC needs the key).
    db.run("UPDATE {events} SET payload = '', salt = '' WHERE stream_id = ? AND seq <= 5", "conv")
    if rehash:
        db.run("UPDATE {heads} SET erased_through = 5 WHERE stream_id = ?", "conv")


def _change_metadata(db: Db, *, rehash: bool) -> None:
    db.run("UPDATE {events} SET kind = 'messages_set' WHERE stream_id = ? AND seq = 5", "conv")
    db.run(
        "UPDATE {events} SET recorded_at = '2001-01-01T00:00:00.000000Z' "
        "WHERE stream_id = ? AND seq = 5",
        "conv",
    )
    if rehash:
        db.rechain_unkeyed("conv", {})
        if not db.keyed:
            _reseal(db)


# Each edit and the seq an as_of() read of it asks for (its range holds the edit, or the edit
# is at the head or the first record, which every read checks). Six messages m1..m6, window 2.
EDITS = {
    "content changed": (_edit_content, 5),
    "tail truncated": (_truncate, 2),
    "middle record deleted": (_delete_middle, 5),
    "first record deleted": (_delete_first, 3),
    "two records swapped": (_swap, 5),
    "forged record inserted": (_insert_forged, 3),
    "record copied from another memory": (_copy_from_other, 5),
    "erased content restored": (_restore_erased, 3),
    "content emptied by hand": (_empty_content, 5),
    "metadata changed": (_change_metadata, 5),
}


def _reads(store: Any, at: int) -> Iterator[tuple[str, Any]]:
    memory = MessageWindowChatMemory(id="conv", max_messages=2, store=store)
    yield "messages()", memory.messages
    yield "history()", memory.history
    yield f"as_of(seq={at})", lambda: memory.as_of(seq=at)


@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize(
    "mode", ["unkeyed, naive edit", "keyed, naive edit", "keyed, forger rehashes"]
)
def test_read_path_matrix(backend, db, edit, mode):
    keyed = mode.startswith("keyed")
    store = backend.open(chain_key=KEY if keyed else None)
    _say(store, "conv", *[f"m{i}" for i in range(1, 7)])
    _say(store, "other", "o1", "o2", "o3")
    db.keyed = keyed
    if edit == "erased content restored":
        db.backup = {r["seq"]: (r["payload"], r["salt"]) for r in db.rows("conv")}
        store.erase("conv", reason="the user asked")
    store.close()
    change, at = EDITS[edit]
    change(db, rehash=mode.endswith("rehashes"))
    fresh = backend.open(chain_key=KEY if keyed else None)
    # No audit call: opening and reading is enough to be refused.
    for name, read in _reads(fresh, at):
        if edit == "erased content restored" and name == "messages()":
            assert read() == []  # the window after an erasure is empty: nothing restored shows
            continue
        with pytest.raises(ChainIntegrityError) as caught:
            read()
        error = caught.value
        assert error.stream_id == "conv", name
        assert error.seq >= 1, name
        assert "not served" in str(error), name
    assert not fresh.verify().ok


def test_a_live_memory_that_finds_a_break_stops_appending_though_its_head_is_intact(backend, db):
    store = backend.open()
    memory = _say(store, "conv", "a", "b", "c")
    db.run("DELETE FROM {events} WHERE stream_id = ? AND seq = 1", "conv")
    # Another writer appends; catching up, the memory reads and finds the first record gone.
    backend.open().append("conv", [_record()])
    with pytest.raises(ChainIntegrityError, match="records before seq 2"):
        memory.messages()
    with pytest.raises(ChainIntegrityError, match="stopped appending"):
        memory.add(UserMessage("e"))
    assert [r["seq"] for r in db.rows("conv")] == [2, 3, 4]


def _as_before_seals(path: Any, key: bytes | None) -> None:
    """Turn a SQLite ledger into what chatledger wrote before head seals: no heads table, no
    trigger, no m003 migration, and a version 1 key check (``<keyed_since>:<mac>``)."""
    from eventlog.keycheck import v1_value

    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(
            "DROP TRIGGER events_seal_head; DROP TABLE heads; "
            "ALTER TABLE events DROP COLUMN head_mac; "
            "DELETE FROM _sqlite_migrations WHERE name IN ('m003_head_seals', 'm004_marker'); "
            "DELETE FROM settings WHERE name = 'heads'; PRAGMA application_id = 0;"
        )
        if key is not None:
            conn.execute(
                "UPDATE settings SET value = ? WHERE name = ?", (v1_value(key, 0), KEY_CHECK)
            )
        conn.commit()


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_a_ledger_from_before_seals_is_marked_and_sealed_by_a_writable_open(tmp_path, keyed):
    from eventlog import SQLiteEventStore
    from eventlog.keycheck import parse

    path = tmp_path / "old.db"
    key = KEY if keyed else None
    with SQLiteEventStore(path, chain_key=key) as store:
        _say(store, "conv", "a", "b")
    _as_before_seals(path, key)
    before = path.read_bytes()
    # Without chatledger's marker in its header, a read-only open refuses it untouched.
    with pytest.raises(PersistenceError, match="not a chatledger ledger"):
        SQLiteEventStore(path, chain_key=key, read_only=True)
    assert path.read_bytes() == before
    # The first writable open migrates, seals every head and (keyed) upgrades the key check.
    with SQLiteEventStore(path, chain_key=key) as store:
        assert store.verify().ok
        _say(store, "conv", "c")
    with sqlite3.connect(path) as conn:
        seals = conn.execute("SELECT stream_id, seq, mac FROM heads").fetchall()
        check = conn.execute("SELECT value FROM settings WHERE name = ?", (KEY_CHECK,)).fetchone()
    assert [(s, q) for s, q, _ in seals] == [("conv", 3)] and all(m for _, _, m in seals)
    if keyed:
        assert parse(check[0]).version == 2
    with SQLiteEventStore(path, chain_key=key, read_only=True) as reader:
        assert _served(reader, "conv") == ["a", "b", "c"]
    # From then on a truncation is refused on the read path.
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM events WHERE stream_id = 'conv' AND seq = 3")
    with SQLiteEventStore(path, chain_key=key) as store, pytest.raises(ChainIntegrityError):
        _served(store, "conv")
