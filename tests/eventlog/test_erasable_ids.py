"""Erasable ids ([forget] item 1): a ledger created with ``erasable_ids=True`` stores memories
under keyed pseudonyms and each id in one row an erasure deletes, so erasing a subject removes
every byte of its identifier while the chain, old digests, other proofs and the receipt keep
verifying. Each test tries what an attacker or an auditor would, on every backend."""

from __future__ import annotations

import json
import pathlib
import sqlite3
from typing import Any

import pytest

from eventlog import (
    ChainIntegrityError,
    ChainKeyError,
    InMemoryEventStore,
    SQLiteEventStore,
    check_receipt,
    find_receipt,
    receipt_bundle,
    verify_inclusion,
)
from eventlog.ids import StreamKey, memory_key
from eventlog.keyring import KeyUnavailableError, MemoryKeyring
from eventlog.serialization import decode_event
from eventlog.store import EventStore
from eventlog.testing.records import batch, texts
from projections import MessageWindowChatMemory
from tests.conftest import Backend

MARKER = "zorro-7f3e@example.com"
OTHER = "bob@example.com"
KEY = bytes(range(32))


def _fill(store: EventStore) -> None:
    for who in (MARKER, OTHER):
        for session in ("s1", "s2"):
            store.append((who, session), batch(f"text of {who} {session}", "an answer"))


def _pseudonymous(backend: Backend, **kwargs: Any) -> EventStore:
    store = backend.open(erasable_ids=True, **kwargs)
    assert store.erasable_ids
    return store


def test_streams_are_stored_under_pseudonyms_and_listed_by_their_ids(backend):
    store = _pseudonymous(backend)
    _fill(store)
    infos = store.streams()
    # Check no stored key holds the id, and every listing gives the id back.
    assert all(i.stream_id.startswith("~p:") and MARKER not in i.stream_id for i in infos)
    assert sorted(memory_key(i.memory_id) for i in infos) == sorted(
        memory_key((w, s)) for w in (MARKER, OTHER) for s in ("s1", "s2")
    )
    assert not any(i.id_erased for i in infos)
    assert texts(store.read((MARKER, "s1")))[0] == f"text of {MARKER} s1"
    # Check a clear stored key (what the CLI and older objects pass) finds the same stream.
    clear = StreamKey(memory_key((MARKER, "s1")))
    assert store.read(clear) == store.read((MARKER, "s1"))
    assert str(store.stream_key((MARKER, "s1"))) == store.read(clear)[0].stream_id


def test_erase_subject_removes_the_id_and_keeps_every_proof(backend):
    store = _pseudonymous(backend)
    _fill(store)
    before = store.digest()
    other_proof_seq = 2
    receipts = store.erase_subject((MARKER,), reason="GDPR art. 17 request #881")
    # Check the receipts name the ids for the caller, and the ledger forgot them.
    assert sorted(r.memory_id for r in receipts) == [(MARKER, "s1"), (MARKER, "s2")]
    erased = [i for i in store.streams() if i.id_erased]
    assert len(erased) == 2
    assert all(isinstance(i.memory_id, StreamKey) and MARKER not in i.memory_id for i in erased)
    assert {memory_key(i.memory_id) for i in store.streams() if not i.id_erased} == {
        memory_key((OTHER, "s1")),
        memory_key((OTHER, "s2")),
    }
    # Check the chain, the digest taken before, another memory's proof and the receipt.
    assert store.verify().ok
    assert store.verify(digest=before).ok
    after = store.digest()
    proof = store.prove((OTHER, "s1"), other_proof_seq, digest=after)
    assert verify_inclusion(proof, after)
    for receipt in receipts:
        text = receipt_bundle(store, find_receipt(store, receipt.id), digest=after)
        assert check_receipt(text, after).ok
        assert MARKER not in text
    # Check the same id keeps working for new messages, and is listed again by its id.
    store.append((MARKER, "s1"), batch("a new message"))
    assert texts(store.read((MARKER, "s1"), desc=True, limit=1)) == ["a new message"]
    named = {memory_key(i.memory_id) for i in store.streams() if not i.id_erased}
    assert memory_key((MARKER, "s1")) in named


def test_erase_of_one_memory_removes_only_its_id(backend):
    store = _pseudonymous(backend)
    _fill(store)
    receipt = store.erase((MARKER, "s1"), reason="request 7")
    assert receipt.memory_id == (MARKER, "s1")
    left = {memory_key(i.memory_id) for i in store.streams() if not i.id_erased}
    assert memory_key((MARKER, "s2")) in left
    assert memory_key((MARKER, "s1")) not in left
    assert store.verify().ok


def test_a_memory_object_works_on_erasable_ids(backend):
    store = _pseudonymous(backend)
    memory = MessageWindowChatMemory(id=(MARKER, "s1"), max_messages=3, store=store)
    from eventlog import UserMessage

    for i in range(5):
        memory.add(UserMessage(f"m{i}"))
    again = MessageWindowChatMemory(id=(MARKER, "s1"), max_messages=3, store=store)
    assert [m.text for m in again.messages()] == ["m2", "m3", "m4"]
    assert all(i.stream_id.startswith("~p:") for i in store.streams())


@pytest.mark.skip_backend("memory")
def test_erasable_ids_are_chosen_at_creation_and_kept(backend):
    store = backend.open()
    store.append("plain", batch("hello"))
    # Check a ledger with records in clear cannot be switched: their keys are in the chain.
    with pytest.raises(ValueError, match="already holds records"):
        backend.open(erasable_ids=True)
    other = Backend(backend.name, backend.path.parent / "second")
    other.path.parent.mkdir()
    try:
        first = other.open(erasable_ids=True)
        first.append(("a", "s"), batch("x"))
        # Check a later open without the flag still stores under pseudonyms.
        again = other.open()
        assert again.erasable_ids
        again.append(("a", "s"), batch("y"))
        assert texts(again.read(("a", "s"))) == ["x", "y"]
        assert all(i.stream_id.startswith("~p:") for i in again.streams())
    finally:
        other.cleanup()


def test_with_a_keyring_no_id_is_stored_in_clear_and_lookups_need_the_keyring(backend):
    ring = MemoryKeyring()
    store = _pseudonymous(backend, keyring=ring)
    _fill(store)
    rows = store._name_rows()
    assert len(rows) == 4
    assert not any(MARKER in name or OTHER in name for name in rows.values())
    assert {memory_key(i.memory_id) for i in store.streams()} >= {memory_key((MARKER, "s1"))}
    if backend.name == "memory":
        return
    blind = backend.open()  # the same ledger, without the keyring
    assert blind.erasable_ids
    # Check the ids stay unknown without the keyring, and a lookup by id says what to pass.
    assert all(isinstance(i.memory_id, StreamKey) for i in blind.streams())
    with pytest.raises(ChainKeyError, match="keyring"):
        blind.read((MARKER, "s1"))
    assert blind.verify().ok  # verification needs no id


@pytest.mark.skip_backend("memory")
def test_a_keyed_ledger_keys_its_pseudonyms_under_the_chain_key(backend):
    store = _pseudonymous(backend, chain_key=KEY)
    _fill(store)
    assert store._names is not None and store._names.mode == "chain"
    unkeyed = backend.open()
    with pytest.raises(ChainKeyError, match="chain key"):
        unkeyed.read((MARKER, "s1"))
    # Check the names rows are still readable (in clear) and listed without the key.
    assert {memory_key(i.memory_id) for i in unkeyed.streams()} >= {memory_key((OTHER, "s2"))}


@pytest.mark.skip_backend("memory")
def test_a_names_row_moved_to_another_memory_does_not_name_it(backend):
    store = _pseudonymous(backend)
    _fill(store)
    victim = store.stream_key((OTHER, "s1"))
    # An attacker points bob's pseudonym at the marker's id.
    _set_name(backend, str(victim), memory_key((MARKER, "s2")))
    shown = {i.stream_id: i.memory_id for i in store.streams()}
    assert shown[str(victim)] == victim  # unreadable, never the forged id
    assert sum(memory_key(m) == memory_key((MARKER, "s2")) for m in shown.values()) == 1


def _update(backend: Backend, table: str, column: str, value: str, stream_id: str) -> None:
    """Set ``column`` of ``table``'s rows of ``stream_id`` behind the store's back, with SQL."""
    if backend.name == "sqlite":
        with sqlite3.connect(backend.path) as conn:
            conn.execute(f"UPDATE {table} SET {column} = ? WHERE stream_id = ?", (value, stream_id))
        return
    import psycopg
    from psycopg import sql

    from tests.conftest import PG_DSN

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {} SET {} = %s WHERE stream_id = %s").format(
                sql.Identifier(backend.schema, table), sql.Identifier(column)
            ),
            (value, stream_id),
        )


def _set_name(backend: Backend, stream_id: str, name: str) -> None:
    _update(backend, "names", "name", name, stream_id)


def _move_stream(backend: Backend, stream_id: str, to: str) -> None:
    """Move every row of a stream (not its seal) to another stream key, with plain SQL."""
    _update(backend, "events", "stream_id", to, stream_id)


def _moved_to_clear(backend: Backend, **options: Any) -> tuple[EventStore, str]:
    """A filled pseudonymous ledger whose ``(MARKER, "s2")`` rows were moved, with plain SQL,
    to the clear key of that id (which no store writes on such a ledger); the clear key."""
    store = _pseudonymous(backend, **options)
    _fill(store)
    clear = memory_key((MARKER, "s2"))
    _move_stream(backend, str(store.stream_key((MARKER, "s2"))), clear)
    return store, clear


@pytest.mark.skip_backend("memory")
def test_rows_moved_from_a_pseudonym_to_a_clear_key_fail_verify(backend):
    # No store of an erasable-ids ledger writes a clear key: read() looks an id's pseudonym
    # up instead. A forger without the chain key moves a memory's rows to its clear key;
    # verify() once read the (now empty) pseudonym for them and passed, never checking them.
    store, clear = _moved_to_clear(backend, chain_key=KEY)
    for reader in (store, backend.open(chain_key=KEY)):
        report = reader.verify()
        assert not report.ok
        assert report.records == 8  # every row read and checked, the moved ones too
        seq, reason = report.failures[clear]
        assert seq == 1 and "hash" in reason
        with pytest.raises(ChainIntegrityError, match="gone"):
            reader.read_verified((MARKER, "s2"))


@pytest.mark.skip_backend("memory")
def test_rows_moved_to_a_clear_key_and_rehashed_there_fail_verify_for_want_of_a_seal(backend):
    from tests.eventlog.test_forger import Db

    # Unkeyed, so the forger can rehash the moved rows under their new key: each then
    # verifies, but no seal vouches for the newest.
    store, clear = _moved_to_clear(backend)
    Db(backend).rechain_unkeyed(clear, {})
    report = store.verify()
    assert report.records == 8
    assert report.failures[clear] == (2, "it has records but no head seal (a seal deleted by hand)")


@pytest.mark.skip_backend("memory")
def test_an_id_moved_into_a_clear_key_is_listed_and_erased_by_its_subject(backend):
    store, clear = _moved_to_clear(backend)
    # Check the auditor sees the clear key's id, and erasing the subject reaches its rows.
    assert {i.stream_id: i.memory_id for i in store.streams()}[clear] == (MARKER, "s2")
    receipts = store.erase_subject((MARKER,), reason="GDPR art. 17 request #882")
    assert clear in {r.record.stream_id for r in receipts}
    assert not any(MARKER in r.payload for r in store.read_all())


def test_with_a_keyring_reads_open_what_the_rows_keep_sealed(backend):
    store = _pseudonymous(backend, keyring=MemoryKeyring())
    appended = store.append((MARKER, "s1"), batch(f"text of {MARKER} s1", "an answer"))
    found = store.read((MARKER, "s1"))
    assert texts(found) == [f"text of {MARKER} s1", "an answer"]
    assert appended == found  # the writer's records, field for field, with their ciphertext
    assert all(r.sealed and r.sealed.startswith("enc1:") and MARKER not in r.sealed for r in found)


def test_the_in_memory_store_takes_erasable_ids():
    store = InMemoryEventStore(erasable_ids=True)
    store.append(("x", "y"), batch("hi"))
    assert store.streams()[0].stream_id.startswith("~p:")


# ------------------------------------------------------------------ bytes on disk (SQLite)


def _files_with(path: pathlib.Path, needle: str) -> list[str]:
    names = [path.name, path.name + "-wal", path.name + "-shm"]
    return [
        n
        for n in names
        if (path.parent / n).exists() and needle.encode() in (path.parent / n).read_bytes()
    ]


def _backup(path: pathlib.Path, to: pathlib.Path) -> None:
    with sqlite3.connect(path) as src, sqlite3.connect(to) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def test_sqlite_erase_subject_leaves_no_byte_of_the_id_in_any_file(tmp_path):
    path = tmp_path / "chat.db"
    with SQLiteEventStore(path, erasable_ids=True) as store:
        for i in range(300):
            who = MARKER if i % 30 == 1 else f"user{i % 30}"
            store.append((who, f"s{i}"), batch(f"question {i} " * 4, f"answer {i} " * 9))
        store.checkpoint()
        assert _files_with(path, MARKER)  # the scan finds the id (its names rows) before
        digest = store.digest()
        receipts = store.erase_subject((MARKER,), reason="GDPR art. 17 request #881")
        assert len(receipts) == 10 and not any(r.cleanup_pending for r in receipts)
        assert _files_with(path, MARKER) == []
        assert store.verify().ok and store.verify(digest=digest).ok
    assert _files_with(path, MARKER) == []


def test_sqlite_backup_taken_before_erasure_reveals_neither_id_nor_text_with_a_keyring(tmp_path):
    path = tmp_path / "chat.db"
    ring = MemoryKeyring()
    secret = "card 4111 1111 1111 1111"  # noqa: S105 - a marker text, not a password
    with SQLiteEventStore(path, erasable_ids=True, keyring=ring) as store:
        store.append((MARKER, "s1"), batch(secret))
        store.append((OTHER, "s1"), batch("bob's text"))
        backup = tmp_path / "backup.db"
        _backup(path, backup)
        # Check the backup holds neither in clear, even before the erasure.
        assert _files_with(backup, MARKER) == [] and _files_with(backup, secret) == []
        store.erase_subject((MARKER,), reason="GDPR")
    # Check the backup, opened with the live keyring, yields neither the text nor the id:
    # the keys that sealed both were shredded.
    with SQLiteEventStore(backup, keyring=ring, read_only=True) as old:
        infos = {i.stream_id: i for i in old.streams()}
        marker_key = next(
            k
            for k, i in infos.items()
            if isinstance(i.memory_id, StreamKey) and k.startswith("~p:")
        )
        assert isinstance(infos[marker_key].memory_id, StreamKey)  # the id does not open
        assert [
            memory_key(i.memory_id)
            for i in infos.values()
            if not isinstance(i.memory_id, StreamKey)
        ] == [memory_key((OTHER, "s1"))]
        (record,) = old.read(StreamKey(marker_key))
        with pytest.raises(KeyUnavailableError, match="destroyed by an erasure"):
            decode_event(record)


# ------------------------------------------------------------------ bytes on disk (PostgreSQL)


@pytest.mark.parametrize("keyring", [False, True], ids=["no-keyring", "keyring"])
def test_postgres_erase_and_vacuum_full_leave_no_byte_of_the_id(backend, keyring):
    if backend.name != "postgres":
        pytest.skip("PostgreSQL's files only")
    from tests.conftest import IN_CI
    from tests.eventlog.test_erase_durability import _admin

    store = _pseudonymous(backend, keyring=MemoryKeyring()) if keyring else _pseudonymous(backend)
    for i in range(60):
        who = MARKER if i == 30 else f"user-{i}"
        store.append((who, "s1"), batch(f"kept {i}", f"more {i}"))
    tables = ("events", "names", "heads", "snapshots")

    def files() -> dict[str, pathlib.Path]:
        (data_directory,) = _admin("SHOW data_directory")[0]
        query = ", ".join(f"pg_relation_filepath('\"{backend.schema}\".{t}')" for t in tables)
        return {
            t: pathlib.Path(data_directory, p)
            for t, p in zip(tables, _admin(f"SELECT {query}")[0], strict=True)
        }

    def holding(needle: str) -> list[str]:
        _admin("CHECKPOINT")
        return [t for t, f in files().items() if needle.encode() in f.read_bytes()]

    try:
        before = holding(MARKER)
    except OSError as e:
        if IN_CI:
            raise
        pytest.skip(f"cannot read PostgreSQL's data files here: {e}")
    # Check the id lives in its names row only - and with a keyring not even there (sealed).
    assert before == ([] if keyring else ["names"])
    digest = store.digest()
    (receipt,) = store.erase_subject((MARKER,), reason="GDPR")
    assert receipt.cleanup_pending  # dead row versions until vacuum(full=True)
    from eventlog.postgres import PostgresEventStore

    assert isinstance(store, PostgresEventStore)
    store.vacuum(full=True)
    assert holding(MARKER) == []
    assert store.verify().ok and store.verify(digest=digest).ok


# ------------------------------------------------------------------ the front ends


def test_cli_ids_and_the_inspector_show_an_erased_id_by_its_receipt(tmp_path, capsys):
    from projections.cli.app import main
    from projections.inspector.views import memory_rows

    path = tmp_path / "chat.db"
    with SQLiteEventStore(path, erasable_ids=True) as store:
        _fill(store)
        receipt = store.erase((MARKER, "s1"), reason="GDPR")
        listed = {row.label for row in memory_rows(store).rows}
    assert f"erased (receipt {receipt.id})" in listed
    assert not any(MARKER in label and "s1" in label for label in listed)
    capsys.readouterr()
    assert main(["ids", "--db", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    assert f'"id_erased": "erased (receipt {receipt.id})"' in out
    assert memory_key((MARKER, "s2")) in out.replace('\\"', '"')
    assert memory_key((MARKER, "s1")) not in out.replace('\\"', '"')
    # Check the listing is in id order (not the pseudonyms'), erased memories last.
    rows = [json.loads(line) for line in out.splitlines()]
    named = [r["memory"] for r in rows if "id_erased" not in r]
    assert named == sorted(named) and len(named) == 3
    assert "id_erased" in rows[-1] and not any("id_erased" in r for r in rows[:-1])
    # Check an id as listed is taken back by the commands (the clear key finds the stream).
    assert main(["history", "--db", str(path), "--id-json", f'["{OTHER}", "s1"]']) == 0
    assert f"text of {OTHER} s1" in capsys.readouterr().out


def test_exports_carry_pseudonyms_and_clear_ids_are_not_imported_into_an_erasable_ledger():
    import io

    from eventlog import export_jsonl, import_jsonl

    source = InMemoryEventStore(erasable_ids=True)
    _fill(source)
    out = io.StringIO()
    export_jsonl(source, out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()[1:]]
    assert lines and all(line["memory"].startswith("~p:") for line in lines)
    # Check the pseudonymous export imports into a plain ledger and verifies there.
    plain = InMemoryEventStore()
    import_jsonl(plain, out.getvalue().splitlines())
    assert plain.verify().ok and len(plain.streams()) == 4
    # Check records whose hashes cover a clear id are refused, before anything is written.
    clear = InMemoryEventStore()
    _fill(clear)
    text = io.StringIO()
    export_jsonl(clear, text)
    target = InMemoryEventStore(erasable_ids=True)
    with pytest.raises(ValueError, match="erasable_ids"):
        import_jsonl(target, text.getvalue().splitlines())
    assert target.streams() == []


def test_pseudonymous_memories_imported_into_a_plain_ledger_are_listed_by_their_keys(
    tmp_path, capsys
):
    # Before the fix `chatledger ids` showed each as "erased" (its id hidden, no key to
    # paste), though its id was never erased: a plain ledger has no names to read it from.
    import io

    from eventlog import export_jsonl, import_jsonl
    from projections.cli.app import main

    source = InMemoryEventStore(erasable_ids=True)
    _fill(source)
    out = io.StringIO()
    export_jsonl(source, out)
    path = tmp_path / "plain.db"
    with SQLiteEventStore(path) as plain:
        import_jsonl(plain, out.getvalue().splitlines())
        infos = plain.streams()
    keys = sorted(info.stream_id for info in infos)
    assert len(keys) == 4 and all(k.startswith("~p:") for k in keys)
    assert not any(info.id_erased for info in infos)
    capsys.readouterr()
    assert main(["ids", "--db", str(path), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(r["memory"] for r in rows) == keys
    assert not any("id_erased" in r for r in rows)
    assert main(["ids", "--db", str(path)]) == 0
    table = capsys.readouterr().out
    assert all(k in table for k in keys) and "erased" not in table
    # Check a key as listed is taken back by the commands.
    assert main(["history", "--db", str(path), keys[0]]) == 0
    assert "text of" in capsys.readouterr().out


@pytest.mark.skip_backend("memory")
def test_a_clear_name_written_into_a_keyring_ledger_names_nothing(backend):
    store = _pseudonymous(backend, keyring=MemoryKeyring())
    _fill(store)
    victim = store.stream_key((OTHER, "s1"))
    _set_name(backend, str(victim), memory_key((MARKER, "s2")))
    shown = {i.stream_id: i.memory_id for i in store.streams()}
    assert shown[str(victim)] == victim


def test_with_a_file_keyring_no_file_keeps_the_id_after_erase_subject(tmp_path):
    from eventlog import FileKeyring

    path, keys = tmp_path / "chat.db", tmp_path / "keys.json"
    ring = FileKeyring(keys, master_key=bytes(range(32)))
    with SQLiteEventStore(path, erasable_ids=True, keyring=ring) as store:
        _fill(store)
        backup = tmp_path / "backup.db"
        _backup(path, backup)
        store.erase_subject((MARKER,), reason="GDPR")
        assert _files_with(path, MARKER) == []
    # Check neither the keyring file nor the ledger nor last night's backup names the subject.
    assert MARKER.encode() not in keys.read_bytes()
    assert _files_with(backup, MARKER) == []
    with SQLiteEventStore(backup, keyring=FileKeyring(keys, master_key=bytes(range(32)))) as old:
        named = [memory_key(i.memory_id) for i in old.streams() if not i.id_erased]
        assert all(MARKER not in n for n in named)
        assert sum(isinstance(i.memory_id, StreamKey) for i in old.streams()) == 2


# ------------------------------------------------------------------ purge takes the id too


@pytest.mark.parametrize("keyed", [False, True], ids=["stored-key", "chain-key"])
def test_purge_takes_the_id_with_the_records(backend, keyed):
    store = _pseudonymous(backend, **({"chain_key": KEY} if keyed else {}))
    _fill(store)
    victim = str(store.stream_key((MARKER, "s1")))
    head = store.head((MARKER, "s1"))
    assert head is not None
    tomb = store.purge((MARKER, "s1"), expected_seq=head.seq, reason="retention")
    # Check the tombstone names the pseudonym only, and the listing no longer gives the id.
    assert tomb.stream_id == victim and MARKER not in tomb.payload
    reopened = (
        store if backend.name == "memory" else backend.open(**({"chain_key": KEY} if keyed else {}))
    )
    for lister in (store, reopened):  # the cache of this object, and the database itself
        infos = {i.stream_id: i for i in lister.streams()}
        assert infos[victim].id_erased
        assert infos[victim].memory_id == StreamKey(victim)
        left = {memory_key(i.memory_id) for i in infos.values() if not i.id_erased}
        assert left == {
            memory_key((MARKER, "s2")),
            memory_key((OTHER, "s1")),
            memory_key((OTHER, "s2")),
        }
    assert store.verify().ok and reopened.verify().ok
    # Check the id keeps working for new messages, which store its names row again.
    store.append((MARKER, "s1"), batch("after the purge"))
    assert not {i.stream_id: i for i in reopened.streams()}[victim].id_erased


def test_sqlite_purge_leaves_no_byte_of_the_id_in_any_file(tmp_path):
    path = tmp_path / "chat.db"
    with SQLiteEventStore(path, erasable_ids=True) as store:
        for i in range(60):
            store.append((f"user{i}", "s1"), batch(f"question {i} " * 4))
        store.append((MARKER, "s1"), batch("the marker's text"))
        store.checkpoint()
        assert _files_with(path, MARKER)  # its names row, before
        head = store.head((MARKER, "s1"))
        assert head is not None
        store.purge((MARKER, "s1"), expected_seq=head.seq, reason="retention")
        assert not store.cleanup_pending
        assert _files_with(path, MARKER) == []
        assert store.verify().ok
    assert _files_with(path, MARKER) == []


@pytest.mark.parametrize("erasable", [True, False], ids=["erasable-ids", "clear-ids"])
def test_a_backup_taken_before_a_purge_yields_neither_text_nor_id_with_a_keyring(
    tmp_path, erasable
):
    path, backup = tmp_path / "chat.db", tmp_path / "backup.db"
    ring = MemoryKeyring()
    secret = "card 4111 1111 1111 1111"  # noqa: S105 - a marker text, not a password
    with SQLiteEventStore(path, erasable_ids=erasable, keyring=ring) as store:
        store.append((MARKER, "s1"), batch(secret))
        store.append((OTHER, "s1"), batch("bob's text"))
        _backup(path, backup)
        head = store.head((MARKER, "s1"))
        assert head is not None
        store.purge((MARKER, "s1"), expected_seq=head.seq, reason="retention")
    # Check the backup, opened with the live keyring, yields neither: the purge shredded the
    # memory's key, which sealed both its text and its names row. (Without erasable ids the
    # stream key is the id itself: only the text can go.)
    with SQLiteEventStore(backup, keyring=ring, read_only=True) as old:
        infos = old.streams()
        purged_id: Any = (MARKER, "s1")
        if erasable:
            named = [i for i in infos if not isinstance(i.memory_id, StreamKey)]
            assert [memory_key(i.memory_id) for i in named] == [memory_key((OTHER, "s1"))]
            (hidden,) = [i for i in infos if isinstance(i.memory_id, StreamKey)]
            purged_id = hidden.memory_id
        (record,) = old.read(purged_id)
        with pytest.raises(KeyUnavailableError, match="destroyed by an erasure"):
            decode_event(record)
        # Check the other memory still opens: only the purged memory's key went.
        assert texts(old.read((OTHER, "s1"))) == ["bob's text"]


def test_the_cli_lists_a_purged_id_by_its_tombstone(tmp_path, capsys):
    from projections.cli.app import main

    path = tmp_path / "chat.db"
    with SQLiteEventStore(path, erasable_ids=True) as store:
        _fill(store)
        head = store.head((MARKER, "s1"))
        assert head is not None
        tomb = store.purge((MARKER, "s1"), expected_seq=head.seq, reason="retention")
    capsys.readouterr()
    assert main(["ids", "--db", str(path), "--json"]) == 0
    out = capsys.readouterr().out.replace('\\"', '"')
    assert f'"id_erased": "purged (tombstone at seq {tomb.seq})"' in out
    assert memory_key((MARKER, "s1")) not in out and memory_key((MARKER, "s2")) in out


def test_the_cli_never_calls_an_id_erased_that_no_receipt_erased(tmp_path, capsys):
    from projections.cli.app import main

    path = tmp_path / "chat.db"
    with SQLiteEventStore(path, erasable_ids=True) as store:
        _fill(store)
        key = store.stream_key((MARKER, "s1"))
    with sqlite3.connect(path) as db:  # the row deleted by hand: no erasure, no receipt
        db.execute("DELETE FROM names WHERE stream_id = ?", (key,))
    capsys.readouterr()
    assert main(["ids", "--db", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    assert "no erasure receipt" in out
    assert '"id_erased": "erased"' not in out
