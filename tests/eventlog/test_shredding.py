"""An erasure on a ledger with a keyring shreds the memory's content key, so a backup taken
before it yields no text - whichever spelling of the id reaches the erasure: the id itself,
its stored key (what compaction's retention and the CLI pass), or a pseudonym, in a process
that has never seen the id. Each test is the attacker's move: a backup copy of the database
read with the live keyring after the erasure."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from freezegun import freeze_time

from eventlog import SQLiteEventStore
from eventlog.ids import StreamKey, memory_key
from eventlog.keyring import KeyUnavailableError, MemoryKeyring
from eventlog.serialization import decode_event
from eventlog.store import EventStore
from eventlog.testing.records import batch, texts
from projections.compaction import compact

VICTIM = ("user-42", "s1")
OTHER = ("user-7", "s1")
SECRET = "card 4111 1111 1111 1111"  # noqa: S105 - a marker text, not a password


def _backup(path: pathlib.Path, to: pathlib.Path) -> None:
    with sqlite3.connect(path) as src, sqlite3.connect(to) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def _stored_key(store: EventStore) -> StreamKey:
    return StreamKey(memory_key(VICTIM))


def _pseudonym(store: EventStore) -> StreamKey:
    # As a listing gives it in a process that never saw the id: the stream's own key.
    (info,) = [i for i in store.streams() if i.memory_id == VICTIM]
    return StreamKey(info.stream_id)


def _erase(store: EventStore, spell: Callable[[EventStore], Any]) -> None:
    store.erase(spell(store), reason="GDPR")


def _purge(store: EventStore, spell: Callable[[EventStore], Any]) -> None:
    memory_id = spell(store)
    head = store.head(memory_id)  # by the same spelling: naming VICTIM would teach the id
    assert head is not None
    store.purge(memory_id, expected_seq=head.seq, reason="retention")


SPELLINGS: dict[str, Callable[[EventStore], Any]] = {
    "id": lambda _store: VICTIM,
    "stored-key": _stored_key,
}


def _check_backup(backup: pathlib.Path, ring: MemoryKeyring, erasable: bool) -> None:
    with SQLiteEventStore(backup, keyring=ring, read_only=True) as old:
        victim = next(
            (i.memory_id for i in old.streams() if memory_key(i.memory_id) != memory_key(OTHER)),
        )
        (record,) = old.read(victim)
        with pytest.raises(KeyUnavailableError, match="destroyed by an erasure"):
            decode_event(record)
        # Check only the erased memory's key went: the other one still opens.
        assert texts(old.read(OTHER)) == ["bob's text"]
        if erasable:
            assert isinstance(victim, StreamKey)  # its names row was sealed under that key


def _ledger_and_backup(
    tmp_path: pathlib.Path, erasable: bool
) -> tuple[pathlib.Path, pathlib.Path, MemoryKeyring, StreamKey]:
    """A keyring ledger holding VICTIM's secret and OTHER's text, and a backup of it taken
    now; returns both paths, the keyring and VICTIM's stream key."""
    path, backup = tmp_path / "chat.db", tmp_path / "backup.db"
    ring = MemoryKeyring()
    with SQLiteEventStore(path, keyring=ring, erasable_ids=erasable) as store:
        store.append(VICTIM, batch(SECRET))
        store.append(OTHER, batch("bob's text"))
        stream = _pseudonym(store) if erasable else _stored_key(store)
    _backup(path, backup)
    return path, backup, ring, stream


@pytest.mark.parametrize("erasable", [False, True], ids=["clear-ids", "erasable-ids"])
@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
@pytest.mark.parametrize("how", [_erase, _purge], ids=["erase", "purge"])
def test_an_erasure_shreds_the_key_however_the_id_is_spelled(
    tmp_path: pathlib.Path, erasable: bool, spelling: str, how: Any
) -> None:
    path, backup, ring, _ = _ledger_and_backup(tmp_path, erasable)
    # A new store object, as a separate process erasing later would open.
    with SQLiteEventStore(path, keyring=ring, erasable_ids=erasable) as store:
        how(store, SPELLINGS[spelling])
    _check_backup(backup, ring, erasable)


@pytest.mark.parametrize("how", [_erase, _purge], ids=["erase", "purge"])
def test_an_erasure_by_pseudonym_in_a_new_process_shreds_the_key(
    tmp_path: pathlib.Path, how: Any
) -> None:
    path, backup, ring, pseudonym = _ledger_and_backup(tmp_path, erasable=True)
    with SQLiteEventStore(path, keyring=ring, erasable_ids=True) as store:
        how(store, lambda _store: pseudonym)  # the id was never named in this process
    _check_backup(backup, ring, erasable=True)


@pytest.mark.parametrize("how", [_erase, _purge], ids=["erase", "purge"])
def test_an_erasure_by_pseudonym_cut_short_at_the_key_is_finished_by_a_rerun(
    tmp_path: pathlib.Path, how: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The erasure dies where the key is destroyed (a keyring that fails, a crash). Before,
    # the rows and the names row were committed first: a rerun by pseudonym could no longer
    # learn whose key it was, said "nothing to erase", and the key that opens every backup's
    # copy stayed. Now the destruction is inside the transaction: nothing is committed.
    path, backup, ring, pseudonym = _ledger_and_backup(tmp_path, erasable=True)

    def die(subject: str, memory: str) -> int:
        msg = "killed while destroying the key"
        raise RuntimeError(msg)

    with (
        SQLiteEventStore(path, keyring=ring, erasable_ids=True) as store,
        monkeypatch.context() as patch,
    ):
        patch.setattr(ring, "destroy_memory", die)
        with pytest.raises(RuntimeError, match="killed while destroying"):
            how(store, lambda _store: pseudonym)
    # A new process reruns it, knowing only the pseudonym.
    with SQLiteEventStore(path, keyring=ring, erasable_ids=True) as store:
        how(store, lambda _store: pseudonym)
    _check_backup(backup, ring, erasable=True)


def test_erase_subject_with_no_memory_left_still_destroys_the_subjects_keys(
    tmp_path: pathlib.Path,
) -> None:
    # A rerun after the memories went (purged on a ledger with erasable ids, their names rows
    # with them) still shreds what the keyring holds for the subject.
    from eventlog.keyring import subject_of

    ring = MemoryKeyring()
    key_id, _ = ring.memory_key(subject_of(VICTIM), memory_key(VICTIM))
    with SQLiteEventStore(tmp_path / "chat.db", keyring=ring) as store:
        store.append(OTHER, batch("bob's text"))
        assert store.erase_subject(VICTIM[:1], reason="GDPR") == []
    assert ring.get(key_id) is None and ring.destroyed(key_id)


@pytest.mark.parametrize("erasable", [False, True], ids=["clear-ids", "erasable-ids"])
def test_retention_shreds_the_key_of_an_idle_memory(tmp_path: pathlib.Path, erasable: bool) -> None:
    path, backup = tmp_path / "chat.db", tmp_path / "backup.db"
    ring = MemoryKeyring()
    with (
        freeze_time("2026-01-01"),
        SQLiteEventStore(path, keyring=ring, erasable_ids=erasable) as store,
    ):
        store.append(VICTIM, batch(SECRET))
    with (
        freeze_time("2026-05-30"),
        SQLiteEventStore(path, keyring=ring, erasable_ids=erasable) as store,
    ):
        store.append(OTHER, batch("bob's text"))
    _backup(path, backup)
    # The scheduled job's own store object, months later: only VICTIM is idle long enough.
    with (
        freeze_time("2026-06-01"),
        SQLiteEventStore(path, keyring=ring, erasable_ids=erasable) as store,
    ):
        report = compact(store, idle_for=timedelta(days=1), purge_idle_for=timedelta(days=90))
        assert report.purged == (VICTIM,)
    _check_backup(backup, ring, erasable)


def test_the_cli_erase_of_a_tuple_id_shreds_its_key(tmp_path: pathlib.Path) -> None:
    from eventlog import FileKeyring
    from projections.cli.app import main

    path, backup, keys = tmp_path / "chat.db", tmp_path / "backup.db", tmp_path / "keys.json"
    with SQLiteEventStore(path, keyring=FileKeyring(keys)) as store:
        store.append(VICTIM, batch(SECRET))
        store.append(OTHER, batch("bob's text"))
    _backup(path, backup)
    argv = ["erase", memory_key(VICTIM), "--db", str(path), "--keyring", str(keys)]
    assert main([*argv, "--reason", "GDPR", "--yes"]) == 0
    with SQLiteEventStore(backup, keyring=FileKeyring(keys), read_only=True) as old:
        (record,) = old.read(VICTIM)
        with pytest.raises(KeyUnavailableError, match="destroyed by an erasure"):
            decode_event(record)
        assert texts(old.read(OTHER)) == ["bob's text"]


@pytest.mark.parametrize("erasable", [False, True], ids=["clear-ids", "erasable-ids"])
def test_erase_subject_under_a_longer_prefix_shreds_exactly_those_memories_keys(
    tmp_path: pathlib.Path, erasable: bool
) -> None:
    path, backup = tmp_path / "chat.db", tmp_path / "backup.db"
    ring = MemoryKeyring()
    gone = [("user-42", "tenant-a", "s1"), ("user-42", "tenant-a", "s2")]
    kept = [("user-42", "tenant-b", "s1"), ("user-42",), ("user-420", "tenant-a", "s1")]
    with SQLiteEventStore(path, keyring=ring, erasable_ids=erasable) as store:
        for memory_id in gone + kept:
            store.append(memory_id, batch(f"text of {memory_key(memory_id)}"))
    _backup(path, backup)
    with SQLiteEventStore(path, keyring=ring, erasable_ids=erasable) as store:
        receipts = store.erase_subject(("user-42", "tenant-a"), reason="tenant left")
        assert sorted(r.memory_id for r in receipts) == gone
    with SQLiteEventStore(backup, keyring=ring, read_only=True) as old:
        shown = {memory_key(i.memory_id): i.stream_id for i in old.streams()}
        for memory_id in kept:
            assert texts(old.read(memory_id)) == [f"text of {memory_key(memory_id)}"]
        unreadable = [k for k in shown if k not in {memory_key(m) for m in kept}]
        assert len(unreadable) == len(gone)
        for key in unreadable:
            (record,) = old.read(StreamKey(shown[key]))
            with pytest.raises(KeyUnavailableError, match="destroyed by an erasure"):
                decode_event(record)


def test_langgraph_delete_thread_shreds_the_threads_keys(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("langgraph", reason="the langgraph extra is not installed")
    from langchain_core.messages import HumanMessage

    from eventlog.keyring import is_sealed
    from projections.adapters.langgraph import LedgerSaver
    from tests.adapters.test_langgraph import chat_app

    path, backup = tmp_path / "lg.db", tmp_path / "backup.db"
    ring = MemoryKeyring()
    store = SQLiteEventStore(path, keyring=ring)
    saver = LedgerSaver(store)
    app = chat_app(saver)
    for thread in ("alice", "bob"):
        app.invoke({"messages": [HumanMessage(SECRET)]}, {"configurable": {"thread_id": thread}})
    store.checkpoint()
    _backup(path, backup)
    saver.delete_thread("alice")
    store.close()
    # Check the backup's copy of alice's checkpoints no longer opens; bob's still does.
    with SQLiteEventStore(backup, keyring=ring, read_only=True) as old:
        sealed: dict[str, list[bool]] = {}
        for info in old.streams():
            thread = str(info.memory_id[0]) if isinstance(info.memory_id, tuple) else ""
            sealed.setdefault(thread, []).extend(
                is_sealed(r.payload) for r in old.read(info.memory_id)
            )
    assert set(sealed) == {"alice", "bob"}
    assert sealed["alice"] and all(sealed["alice"])
    assert sealed["bob"] and not any(sealed["bob"])


def _refused_erasures() -> dict[str, Callable[[EventStore], Any]]:
    def purge(store: EventStore) -> Any:
        head = store.head(VICTIM)
        assert head is not None
        return store.purge(VICTIM, expected_seq=head.seq, reason="retention")

    return {
        "erase": lambda store: store.erase(VICTIM, reason="GDPR"),
        "erase_subject": lambda store: store.erase_subject(VICTIM[:1], reason="GDPR"),
        "purge": purge,
    }


# The move each guarantee is meant to stop: erasing from a process that forgot the keyring,
# or through a keyring that is not the one the content was sealed with (a wrong --keyring
# file, a fresh keyring after a redeploy). Neither can destroy the key: the rows would be
# blanked and a receipt written while the key survives, so every backup still opens with it.
ERASERS: dict[str, tuple[Callable[[], dict[str, Any]], str]] = {
    "no-keyring": (dict, r"sealed under a keyring \(seq 1\).*keyring="),
    "another-keyring": (
        lambda: {"keyring": MemoryKeyring()},
        r"under key '[0-9a-f]+' \(seq 1\), which this store's keyring neither holds nor",
    ),
}


@pytest.mark.parametrize("eraser", sorted(ERASERS))
@pytest.mark.parametrize("operation", sorted(_refused_erasures()))
def test_an_erasure_that_cannot_destroy_the_key_is_refused_and_erases_nothing(
    backend: Any, operation: str, eraser: str
) -> None:
    if backend.name == "memory":
        pytest.skip("an in-memory store cannot be reopened with another keyring or none")
    from eventlog import KeyringError

    ring = MemoryKeyring()
    store = backend.open(keyring=ring)
    store.append(VICTIM, batch("first, sealed", "sealed too"))
    store.append(OTHER, batch("bob's text"))
    before = [r.hash for r in store.read(VICTIM)]
    options, refusal = ERASERS[eraser]
    with pytest.raises(KeyringError, match=refusal) as e:
        _refused_erasures()[operation](backend.open(**options()))
    assert "nothing was erased" in str(e.value)
    # Check nothing changed: same records, still readable with the keyring, no receipt.
    assert [r.hash for r in store.read(VICTIM)] == before
    assert texts(store.read(VICTIM)) == ["first, sealed", "sealed too"]
    # Check the same erasure with the keyring goes through.
    _refused_erasures()[operation](store)
    assert not any(r.kind == "message_added" and r.payload for r in store.read(VICTIM))


def test_an_older_copy_of_the_keyring_file_is_refused_by_the_cli(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    from eventlog import FileKeyring
    from projections.cli.app import main

    path, keys, old = tmp_path / "chat.db", tmp_path / "keys.json", tmp_path / "keys-old.json"
    with SQLiteEventStore(path, keyring=FileKeyring(keys)) as store:
        store.append(OTHER, batch("bob's text"))
        shutil.copy2(keys, old)  # a copy (mode kept) taken before VICTIM's key was made
        store.append(VICTIM, batch(SECRET))
    capsys.readouterr()
    argv = ["erase", memory_key(VICTIM), "--db", str(path), "--reason", "GDPR", "--yes"]
    assert main([*argv, "--keyring", str(old)]) != 0
    err = capsys.readouterr().err
    assert "older copy" in err and "nothing was erased" in err
    with SQLiteEventStore(path, keyring=FileKeyring(keys), read_only=True) as store:
        assert texts(store.read(VICTIM)) == [SECRET]
    # Check the live keyring file erases it, and its key is gone.
    assert main([*argv, "--keyring", str(keys)]) == 0
    with SQLiteEventStore(path, keyring=FileKeyring(keys), read_only=True) as store:
        assert not any(r.payload for r in store.read(VICTIM) if r.kind == "message_added")


def test_content_under_a_key_the_keyring_destroyed_is_erased_again(tmp_path: pathlib.Path) -> None:
    # A database restored from a backup taken before an erasure holds content under a key the
    # keyring records as destroyed: erasing it again is the right keyring's work, not refused.
    path, backup, ring = tmp_path / "chat.db", tmp_path / "backup.db", MemoryKeyring()
    with SQLiteEventStore(path, keyring=ring) as store:
        store.append(VICTIM, batch(SECRET))
        store.append(OTHER, batch("bob's text"))
        store.checkpoint()
        _backup(path, backup)
        store.erase(VICTIM, reason="GDPR")
    with SQLiteEventStore(backup, keyring=ring) as restored:
        receipt = restored.erase(VICTIM, reason="GDPR, again after a restore")
        assert receipt.event.record_count == 1


def test_a_keyring_that_records_no_erasures_is_not_second_guessed(backend: Any) -> None:
    # A third-party keyring without destroyed() cannot tell "not mine" from "destroyed":
    # the erasure goes ahead, as before the check (documented in the README).
    from eventlog.keyring import Keyring

    class Recordless(Keyring):
        def __init__(self) -> None:
            self.keys: dict[str, tuple[str, bytes]] = {}

        def current(self, subject: str) -> tuple[str, bytes]:
            return self.keys.setdefault(subject, (f"kms{len(self.keys)}", bytes(range(32))))

        def get(self, key_id: str) -> bytes | None:
            return next((k for i, k in self.keys.values() if i == key_id), None)

        def destroy(self, subject: str) -> int:
            return int(self.keys.pop(subject, None) is not None)

    if backend.name == "memory":
        pytest.skip("an in-memory store cannot be reopened with another keyring")
    store = backend.open(keyring=Recordless())
    store.append(VICTIM, batch(SECRET))
    other = backend.open(keyring=Recordless())
    assert other.erase(VICTIM, reason="GDPR").event.record_count == 1


def test_an_erasure_without_a_keyring_of_content_never_sealed_goes_through(backend: Any) -> None:
    store = backend.open()
    store.append(VICTIM, batch("plain"))
    receipt = store.erase(VICTIM, reason="GDPR")
    assert receipt.record.kind == "memory_erased"


def test_the_cli_refuses_to_erase_sealed_content_without_the_keyring(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eventlog import FileKeyring
    from projections.cli.app import main

    path, keys = tmp_path / "chat.db", tmp_path / "keys.json"
    with SQLiteEventStore(path, keyring=FileKeyring(keys)) as store:
        store.append(VICTIM, batch(SECRET))
    capsys.readouterr()
    code = main(["erase", memory_key(VICTIM), "--db", str(path), "--reason", "GDPR", "--yes"])
    err = capsys.readouterr().err
    assert code != 0 and "--keyring FILE" in err and "nothing was erased" in err
    with SQLiteEventStore(path, keyring=FileKeyring(keys), read_only=True) as store:
        assert texts(store.read(VICTIM)) == [SECRET]


# ------------------------------------------------------------------ snapshots are sealed too


def _window_state(text: str) -> str:
    message = {"contents": [{"text": text, "type": "TEXT"}], "type": "USER"}
    return json.dumps({"estimator": None, "entries": [[1, 0, message, None]]})


def _sql(backend: Any, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run ``query`` on the backend's database behind the store's back ({t}: the table)."""
    if backend.name == "sqlite":
        with sqlite3.connect(backend.path) as conn:
            rows = conn.execute(query.format(t="snapshots"), params).fetchall()
        conn.close()
        return rows
    import psycopg

    from tests.conftest import PG_DSN

    with psycopg.connect(PG_DSN, autocommit=True) as pg:
        table = f'"{backend.schema}".snapshots'
        cursor = pg.execute(query.replace("?", "%s").format(t=table), params)
        return cursor.fetchall() if cursor.description else []


def _snapshot_states(backend: Any, store: Any) -> dict[str, str]:
    """Every stored snapshot's state as stored, by stream key."""
    if backend.name == "memory":
        return {k: s.state for (k, _), saved in store._snapshots.items() for s in saved.values()}
    return dict(_sql(backend, "SELECT stream_id, state FROM {t}"))


def _move_snapshot(backend: Any, store: Any, source: str, target: str) -> None:
    """Put ``source``'s stored snapshot state into ``target``'s snapshot (a forger's copy)."""
    if backend.name == "memory":
        (from_snap,) = store._snapshots[(source, "window/v2")].values()
        (to_seq,) = store._snapshots[(target, "window/v2")]
        store._snapshots[(target, "window/v2")][to_seq] = dataclasses.replace(
            store._snapshots[(target, "window/v2")][to_seq], state=from_snap.state
        )
        return
    state = _snapshot_states(backend, store)[source]
    _sql(backend, "UPDATE {t} SET state = ? WHERE stream_id = ?", (state, target))


def test_snapshots_are_sealed_under_the_memorys_key_and_die_with_it(backend: Any) -> None:
    ring = MemoryKeyring()
    store = backend.open(keyring=ring)
    store.append(VICTIM, batch(SECRET))
    store.append(OTHER, batch("bob's text"))
    store.save_snapshot(VICTIM, "window/v2", 1, _window_state(SECRET))
    store.save_snapshot(OTHER, "window/v2", 1, _window_state("bob's window"))
    # Check a snapshot reads back as saved, and is stored sealed (a backup sees no text).
    loaded = store.load_snapshot(VICTIM, "window/v2")
    assert loaded is not None and loaded.state == _window_state(SECRET)
    assert SECRET not in _snapshot_states(backend, store)[memory_key(VICTIM)]
    if backend.name != "memory":
        # Check a store without the keyring does not get it (None: derived data, not an error).
        assert backend.open().load_snapshot(VICTIM, "window/v2") is None
    # Check a sealed snapshot moved to another memory (or seq) does not open there.
    _move_snapshot(backend, store, memory_key(VICTIM), memory_key(OTHER))
    assert store.load_snapshot(OTHER, "window/v2") is None
    # Check erasing the memory destroys the key its snapshot was sealed under.
    sealed = _snapshot_states(backend, store)[memory_key(OTHER)]
    store.erase(VICTIM, reason="GDPR")
    from eventlog.keyring import open_sealed

    with pytest.raises(KeyUnavailableError, match="destroyed by an erasure"):
        open_sealed(ring, b"any", sealed, where="a backup's copy of the snapshot")


def test_compaction_on_a_keyring_ledger_leaves_no_text_in_clear_and_reseals_old_snapshots(
    tmp_path: pathlib.Path,
) -> None:
    from eventlog import UserMessage
    from projections import MessageWindowChatMemory

    path = tmp_path / "chat.db"
    ring = MemoryKeyring()
    with freeze_time("2026-01-01"), SQLiteEventStore(path, keyring=ring) as store:
        MessageWindowChatMemory(VICTIM, 5, store).add(UserMessage(SECRET))
    with freeze_time("2026-01-05"), SQLiteEventStore(path, keyring=ring) as store:
        assert compact(store, idle_for=timedelta(days=1)).compacted == (VICTIM,)
        store.checkpoint()
        assert SECRET.encode() not in path.read_bytes()
        # A snapshot in clear, as one written before snapshots were sealed: not used, and
        # the next compaction writes it again, sealed.
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE snapshots SET state = ?", (_window_state(SECRET),))
        conn.close()
        assert store.load_snapshot(VICTIM, "window/v2") is None
        assert compact(store, idle_for=timedelta(days=1)).compacted == (VICTIM,)
        store.checkpoint()
        assert SECRET.encode() not in path.read_bytes()
        # Check a cold open still shows the window.
        assert [m.text for m in MessageWindowChatMemory(VICTIM, 5, store).messages()] == [SECRET]


def test_first_sealed_finds_the_first_sealed_record_and_nothing_else(backend: Any) -> None:
    # Recorder._first_sealed, on each backend (the in-memory store runs the default, which a
    # third-party recorder inherits): what an erasure without a keyring looks for.
    ring = MemoryKeyring()
    store = backend.open(keyring=ring)
    key = str(store.stream_key(VICTIM))
    assert store._first_sealed(key) is None  # no records
    store.append(VICTIM, batch("one", "two", "three"))
    assert store._first_sealed(key) == 1
    store.erase(VICTIM, reason="GDPR")  # blanked; the receipt is plain
    assert store._first_sealed(key) is None
    store.append(VICTIM, batch("after"))
    assert store._first_sealed(key) == 5
    # Check plain content (a store without a keyring) is never taken for sealed.
    if backend.name != "memory":
        plain = backend.open()
        plain.append(OTHER, batch("enc1: in the text, not sealed"))
        assert plain._first_sealed(str(plain.stream_key(OTHER))) is None


def test_only_what_is_appended_with_the_keyring_is_sealed() -> None:
    # The README's limit of encryption at rest: an import keeps the bytes its commitments cover.
    import io

    from eventlog import InMemoryEventStore, export_jsonl, import_jsonl

    source = InMemoryEventStore()
    source.append(VICTIM, batch("from before"))
    exported = io.StringIO()
    export_jsonl(source, exported)
    store = InMemoryEventStore(keyring=MemoryKeyring())
    import_jsonl(store, exported.getvalue().splitlines())
    store.append(VICTIM, batch("appended"))
    assert [bool(r.sealed) for r in store.read(VICTIM)] == [False, True]
    assert store.verify().ok
