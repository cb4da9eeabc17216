"""Erasure against a hostile caller, a careless operator and a crash: prefixes that are no id,
a ledger opened with the wrong keyring, a process killed between an erasure's batches or in
the middle of a keyring write. Each test is a move that needs no secret, and says which claim
of the README it holds the code to."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import shutil
import signal
import sqlite3
import subprocess
import sys

import pytest

from eventlog import FileKeyring, KeyUnavailableError, SQLiteEventStore
from eventlog.keyring import KeyringError, MemoryKeyring
from eventlog.serialization import decode_event
from eventlog.store import EventStore
from eventlog.testing.records import batch, texts
from tests.conftest import PG_DSN, Backend
from tests.processes import unmeasured_env

SECRET = "passport X1234567"  # noqa: S105 - a marker text, not a password


def _heads(store: EventStore) -> dict[object, int]:
    return {info.memory_id: info.last_seq for info in store.streams()}


@pytest.mark.parametrize(
    ("prefix", "error"),
    [
        ((True,), TypeError),  # True == 1: matched every memory of user 1
        ((1.0,), TypeError),  # 1.0 == 1, likewise
        ((1, 2.5), TypeError),
        (("user", ["s1"]), TypeError),
        (("\ud800",), ValueError),  # no store can keep such an id
    ],
    ids=["bool", "float", "float-second", "list", "lone-surrogate"],
)
@pytest.mark.parametrize("keyring", [False, True], ids=["no-keyring", "keyring"])
def test_a_prefix_that_is_no_id_is_refused_before_anything_is_erased(
    tmp_path: pathlib.Path, prefix: tuple[object, ...], error: type[Exception], keyring: bool
) -> None:
    # A prefix compares with ==, so (True,) and (1.0,) matched the ids of user 1 - erasing
    # memories no valid prefix named. With a keyring it was worse: the batches before the last
    # were erased, then the key's destruction raised on the prefix, rolling back the last
    # batch: memories blanked with a receipt while their key survived (every backup readable).
    ring = MemoryKeyring() if keyring else None
    with SQLiteEventStore(tmp_path / "chat.db", keyring=ring) as store:
        for session in ("a", "b", "c"):
            store.append((1, session), batch(f"{SECRET} {session}"))
        before = _heads(store)
        with pytest.raises(error, match="erase_subject: prefix"):
            store.erase_subject(prefix, reason="GDPR", batch=1)
        # Check nothing was erased, and every memory still reads.
        assert _heads(store) == before
        for session in ("a", "b", "c"):
            assert texts(store.read((1, session))) == [f"{SECRET} {session}"]


def test_a_huge_unicode_prefix_erases_exactly_its_memories(tmp_path: pathlib.Path) -> None:
    # Ids compare exactly: no normalization, no string prefix. "é" composed and decomposed are
    # two subjects, and ("user-4",) is no prefix of ("user-42", ...).
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    huge = "\U0001f600" * 50_000
    ids = [(composed, "s1"), (decomposed, "s1"), ("user-4", "s1"), ("user-42", "s1"), (huge, "s")]
    ring = MemoryKeyring()
    with SQLiteEventStore(tmp_path / "chat.db", keyring=ring, erasable_ids=True) as store:
        for mid in ids:
            store.append(mid, batch(f"text of {mid[0][:10]}"))
        assert [r.memory_id for r in store.erase_subject((composed,), reason="GDPR")] == [
            (composed, "s1")
        ]
        assert [r.memory_id for r in store.erase_subject(("user-4",), reason="GDPR")] == [
            ("user-4", "s1")
        ]
        assert [r.memory_id for r in store.erase_subject((huge,), reason="GDPR")] == [(huge, "s")]
        assert texts(store.read((decomposed, "s1"))) == [f"text of {decomposed}"]
        assert texts(store.read(("user-42", "s1"))) == ["text of user-42"]
        # A plain id is its own subject, apart from the tuples that start with it: erasing
        # the tuples' subject leaves it readable (its key is not theirs).
        store.append("user-42", batch("a plain id"))
        assert [r.memory_id for r in store.erase_subject(("user-42",), reason="GDPR")] == [
            ("user-42", "s1")
        ]
        assert texts(store.read("user-42")) == ["a plain id"]
        assert store.verify().ok


@pytest.mark.skip_backend("memory")  # a memory store cannot be reopened with another keyring
@pytest.mark.parametrize("opened_with", ["no keyring", "another keyring"])
def test_erase_subject_through_the_wrong_keyring_refuses_instead_of_finding_nothing(
    backend: Backend, opened_with: str
) -> None:
    # With erasable ids under a keyring, every id is sealed in its names row. Opened without
    # that keyring (or with another: a wrong --keyring file), erase_subject could read no id,
    # matched nothing and returned no receipt, no error: the operator told the regulator the
    # data was gone while every byte of it stayed.
    ring = MemoryKeyring()
    store = backend.open(keyring=ring, erasable_ids=True)
    store.append(("alice", "s1"), batch(SECRET))
    store.append(("bob", "s1"), batch("bob's text"))
    store.close()
    blind = backend.open(keyring=None if opened_with == "no keyring" else MemoryKeyring())
    with pytest.raises(KeyringError, match=r"open the store with the keyring.*nothing was erased"):
        blind.erase_subject(("alice",), reason="GDPR")
    blind.close()
    # Check nothing was erased, and with the right keyring the erasure goes through.
    store = backend.open(keyring=ring)
    assert texts(store.read(("alice", "s1"))) == [SECRET]
    (receipt,) = store.erase_subject(("alice",), reason="GDPR")
    assert receipt.memory_id == ("alice", "s1")
    assert texts(store.read(("bob", "s1"))) == ["bob's text"]
    store.close()
    # Check a names row whose key the keyring destroyed (an erasure cut short after the
    # destruction) does not block later erasures: it names nobody any more.
    again = backend.open(keyring=ring)
    assert again.erase_subject(("carol",), reason="GDPR") == []
    again.close()


_KILLED_BETWEEN_BATCHES = """
import os, signal, sys
from eventlog import FileKeyring, SQLiteEventStore

class KilledAfterTheFirstBatch(SQLiteEventStore):
    def _erase(self, keys, reason, expected_seq, before_commit=None):
        receipts = super()._erase(keys, reason, expected_seq, before_commit=before_commit)
        os.kill(os.getpid(), signal.SIGKILL)  # the first batch is committed, nothing more
        return receipts

path, keys = sys.argv[1:]
with KilledAfterTheFirstBatch(path, keyring=FileKeyring(keys), erasable_ids=True) as store:
    store.erase_subject(("user-42", "tenant-a"), reason="GDPR", batch=1)
"""


def test_a_rerun_after_a_kill_between_batches_shreds_every_erased_memorys_key(
    tmp_path: pathlib.Path,
) -> None:
    # README: "each memory is untouched or fully erased with its receipt, even after kill -9;
    # a rerun finishes the job". Under a two-element prefix each memory's own key goes; the
    # first batch's memories lost their names rows with their content, so the rerun never
    # learns they were the tenant's and their keys - which open every backup - stay.
    db, keys = tmp_path / "chat.db", tmp_path / "keys.json"
    sessions = [("user-42", "tenant-a", f"s{i}") for i in range(3)]
    with SQLiteEventStore(db, keyring=FileKeyring(keys), erasable_ids=True) as store:
        for mid in sessions:
            store.append(mid, batch(f"{SECRET} {mid[2]}"))
        store.append(("user-42", "tenant-b", "s0"), batch("keep me"))
        store.checkpoint()
    shutil.copy(db, tmp_path / "backup.db")  # last night's backup
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_BETWEEN_BATCHES, str(db), str(keys)],
        env=unmeasured_env(),  # killed: its coverage file would be half written
        capture_output=True,
        text=True,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    ring = FileKeyring(keys)
    with SQLiteEventStore(db, keyring=ring) as store:
        store.erase_subject(("user-42", "tenant-a"), reason="GDPR, rerun")
        assert texts(store.read(("user-42", "tenant-b", "s0"))) == ["keep me"]
    with SQLiteEventStore(tmp_path / "backup.db", keyring=ring) as backup:
        for mid in sessions:
            with pytest.raises(KeyUnavailableError):
                decode_event(backup.read(mid)[0])


_KILLED_IN_A_KEYRING_WRITE = """
import os, signal, sys
from eventlog import FileKeyring

ring = FileKeyring(sys.argv[1])
ring.memory_key("alice", "m1")
os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)  # after the temp file's fsync
ring.memory_key("bob", "m2")
"""


def test_a_key_file_write_cut_short_leaves_no_copy_of_a_key_once_it_is_destroyed(
    tmp_path: pathlib.Path,
) -> None:
    # A process killed between writing the keyring's temporary file and renaming it left that
    # file behind, holding every key of the time. Destroying one of them later removed it from
    # the keyring file only: the stray copy beside it still opened every backup's content.
    path = tmp_path / "keys.json"
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_IN_A_KEYRING_WRITE, str(path)],
        env=unmeasured_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert any(p.name.endswith(".tmp") for p in tmp_path.iterdir())  # the kill left one
    # A keyring at a longer name beside it, which the cleanup must leave alone.
    neighbour = tmp_path / "keys.json.other"
    stray = tmp_path / ".keys.json.other.abcdefgh.tmp"
    stray.write_bytes(b"not ours")
    ring = FileKeyring(path)
    _, key = ring.memory_key("alice", "m1")
    assert ring.destroy("alice") == 1
    encoded = base64.b64encode(key)
    assert [p.name for p in tmp_path.iterdir() if encoded in p.read_bytes()] == []
    assert stray.read_bytes() == b"not ours"
    assert not neighbour.exists()


def test_an_entry_stripped_of_its_mac_beside_entries_that_have_one_is_refused(
    tmp_path: pathlib.Path,
) -> None:
    # The operator who gets "does not match its MAC" after editing an entry's subject by hand
    # deletes the "mac" line: the file loaded (entries without a MAC pass, for files written
    # before MACs), and an erasure by subject then destroyed the other subject's key. Every
    # write gives every entry its MAC, so one entry without it beside others is an edit.
    path = tmp_path / "keys.json"
    ring = FileKeyring(path)
    for subject in ("alice", "bob", "carol"):
        ring.current(subject)
    doc = json.loads(path.read_text())
    first, second = (e for e in doc["keys"].values() if e["subject"] in ("alice", "bob"))
    first["subject"], second["subject"] = second["subject"], first["subject"]
    del first["mac"], second["mac"]
    path.write_text(json.dumps(doc))
    os.chmod(path, 0o600)
    with pytest.raises(KeyringError, match="has no MAC"):
        FileKeyring(path)


@pytest.mark.parametrize("what", ["fifo", "device"])
def test_a_keyring_path_that_is_no_regular_file_is_refused_without_hanging(
    tmp_path: pathlib.Path, what: str
) -> None:
    # A FIFO put where the key file was made every process opening the keyring hang in
    # open(); a link to /dev/zero made it read until memory ran out (a MemoryError).
    path = tmp_path / "keys.json"
    if what == "fifo":
        os.mkfifo(path, 0o600)
    else:
        path.symlink_to("/dev/zero")
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))\n"
        "from eventlog import FileKeyring\n"
        "from eventlog.keyring import KeyringError\n"
        "try:\n"
        "    FileKeyring(sys.argv[1], allow_insecure_permissions=True)\n"
        "except KeyringError as e:\n"
        "    print(e)\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        env=unmeasured_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=20,
    )
    assert child.returncode == 0, child.stderr
    assert "not a regular file" in child.stdout


_KILLED_AFTER_THE_KEYS = """
import os, signal, sys
from eventlog import FileKeyring, SQLiteEventStore

class KilledAfterTheDestruction(FileKeyring):
    def destroy(self, subject):
        destroyed = super().destroy(subject)  # the key file is rewritten, nothing committed
        os.kill(os.getpid(), signal.SIGKILL)
        return destroyed

path, keys = sys.argv[1:]
with SQLiteEventStore(path, keyring=KilledAfterTheDestruction(keys)) as store:
    store.erase_subject(("user-42",), reason="GDPR")
"""


@pytest.mark.parametrize("erasable", [False, True], ids=["clear-ids", "erasable-ids"])
def test_a_rerun_after_a_kill_between_the_key_destruction_and_the_commit_finishes_the_job(
    tmp_path: pathlib.Path, erasable: bool
) -> None:
    # README: "a commit that fails after the destruction leaves the content unreadable but
    # not blanked, with no receipt, and the erasure raises: run it again". With erasable ids
    # the rerun of erase_subject found no memory (their ids are sealed under the keys it had
    # destroyed) and returned no receipt: the rows stayed unblanked and unreceipted forever.
    db, keys = tmp_path / "chat.db", tmp_path / "keys.json"
    with SQLiteEventStore(db, keyring=FileKeyring(keys), erasable_ids=erasable) as store:
        store.append(("user-42", "s1"), batch(SECRET))
        store.append(("user-7", "s1"), batch("keep me"))
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_AFTER_THE_KEYS, str(db), str(keys)],
        env=unmeasured_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    with SQLiteEventStore(db, keyring=FileKeyring(keys)) as store:
        (receipt,) = store.erase_subject(("user-42",), reason="GDPR, rerun")
        assert receipt.event.record_count == 1
        assert texts(store.read(("user-7", "s1"))) == ["keep me"]
        assert store.verify().ok


@pytest.mark.skip_backend("memory")  # one memory store object per database
def test_an_id_that_comes_back_after_another_store_erased_it_can_be_erased_again(
    backend: Backend,
) -> None:
    # README: "the id keeps working for new messages, which store its names row again". A
    # store object (a worker process) that appended to the memory before another one erased
    # it kept the names row it had sealed - under the key the erasure destroyed - and put it
    # back with its next append: the id was unreadable from then on, and the next erasure of
    # the subject matched nothing, so the user's new messages survived it.
    ring = MemoryKeyring()
    worker = backend.open(keyring=ring, erasable_ids=True)
    eraser = backend.open(keyring=ring)
    worker.append(("alice", "s1"), batch("before"))
    eraser.erase_subject(("alice",), reason="GDPR #1")
    worker.append(("alice", "s1"), batch(SECRET))
    # Check the id reads again, and the next erasure of the subject finds the new message.
    assert [i.memory_id for i in eraser.streams()] == [("alice", "s1")]
    (receipt,) = eraser.erase_subject(("alice",), reason="GDPR #2")
    assert receipt.event.record_count == 1
    records = eraser.read(("alice", "s1"))
    assert [r.kind for r in records if not r.erased] == ["memory_erased", "memory_erased"]


@pytest.mark.parametrize("how", ["erase", "erase_subject"])
def test_a_reason_no_receipt_can_hold_is_refused_by_name(store: EventStore, how: str) -> None:
    # A lone surrogate (text decoded with errors="surrogateescape") raised a bare
    # UnicodeEncodeError from the receipt's encoding, naming neither the erasure nor the cure.
    store.append(("user-42", "s1"), batch(SECRET))
    reason = "request #12 from caf\udce9"
    with pytest.raises(ValueError, match=rf"{how}: reason holds a lone surrogate.*nothing was"):
        if how == "erase":
            store.erase(("user-42", "s1"), reason=reason)
        else:
            store.erase_subject(("user-42",), reason=reason)
    assert texts(store.read(("user-42", "s1"))) == [SECRET]


@pytest.mark.parametrize("subject", ["[true]", "[1.5]", '[1, ["a"]]'])
def test_the_cli_refuses_a_subject_that_is_no_ids_start(
    tmp_path: pathlib.Path, subject: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # `chatledger erase --subject '[true]'` erased every memory of user 1 (True == 1).
    from projections.cli import main

    path = tmp_path / "chat.db"
    with SQLiteEventStore(path) as store:
        store.append((1, "a"), batch(SECRET))
    status = main(["erase", "--db", str(path), "--subject", subject, "--reason", "r", "--yes"])
    err = capsys.readouterr().err
    assert status == 2
    assert "not the start of a memory id" in err and "Traceback" not in err
    with SQLiteEventStore(path) as store:
        assert texts(store.read((1, "a"))) == [SECRET]


def _delete_names_row(backend: Backend, key: str) -> None:
    """What an attacker with write access to the database does, behind the store's back."""
    if backend.name == "sqlite":
        with sqlite3.connect(backend.path) as conn:
            conn.execute("DELETE FROM names WHERE stream_id = ?", (key,))
        conn.close()
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(PG_DSN, autocommit=True) as pg:
        query = sql.SQL("DELETE FROM {}.names WHERE stream_id = %s")
        pg.execute(query.format(sql.Identifier(backend.schema)), (key,))


@pytest.mark.skip_backend("memory")  # the attacker edits the database's names table
@pytest.mark.parametrize("keyring", [False, True], ids=["stored-id-key", "keyring"])
def test_a_names_row_deleted_by_hand_does_not_hide_a_memory_from_erase_subject(
    backend: Backend, keyring: bool
) -> None:
    # Deleting one names row needs no key and verify does not see it (the row is beside the
    # chain). The memory then matched no prefix: erase_subject returned no receipt and left
    # every message, and `streams()` even called its id erased.
    ring = MemoryKeyring() if keyring else None
    store = backend.open(keyring=ring, erasable_ids=True)
    store.append(("alice", "s1"), batch(SECRET))
    store.append(("alice", "s2"), batch("erased properly"))
    store.erase(("alice", "s2"), reason="GDPR #1")  # no names row, its receipt newest: fine
    hidden = str(store.stream_key(("alice", "s1")))
    store.close()
    _delete_names_row(backend, hidden)
    store = backend.open(keyring=ring)
    assert store.verify().ok  # what makes the check below necessary
    with pytest.raises(ValueError, match=rf"memory {hidden} holds records after its last"):
        store.erase_subject(("alice",), reason="GDPR #2")
    # Check nothing was erased: the message is still there, read by id.
    assert texts(store.read(("alice", "s1"))) == [SECRET]
    store.close()


def _swap_names_rows(backend: Backend, one: str, other: str) -> None:
    """Swap two memories' ``names`` rows, behind the store's back (no key needed)."""
    swap = (
        "UPDATE {} SET name = CASE WHEN stream_id = %s THEN %s ELSE %s END "
        "WHERE stream_id IN (%s, %s)"
    )
    if backend.name == "sqlite":
        with sqlite3.connect(backend.path) as conn:
            rows = dict(conn.execute("SELECT stream_id, name FROM names").fetchall())
            conn.execute(
                swap.format("names").replace("%s", "?"),
                (one, rows[other], rows[one], one, other),
            )
        conn.close()
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(PG_DSN, autocommit=True) as pg:
        table = sql.Identifier(backend.schema, "names")
        rows = dict(pg.execute(sql.SQL("SELECT stream_id, name FROM {}").format(table)))
        pg.execute(sql.SQL(swap).format(table), (one, rows[other], rows[one], one, other))


@pytest.mark.skip_backend("memory")  # the attacker edits the database's names table
@pytest.mark.parametrize("keyring", [False, True], ids=["stored-id-key", "keyring"])
def test_names_rows_swapped_by_hand_do_not_hide_a_memory_from_erase_subject(
    backend: Backend, keyring: bool
) -> None:
    # A row moved to another pseudonym names nobody (read_name checks the pseudonym), so the
    # memories matched no prefix: erase_subject(("alice",)) returned no receipt and left
    # every message of alice's, as a deleted row did before it was refused.
    ring = MemoryKeyring() if keyring else None
    store = backend.open(keyring=ring, erasable_ids=True)
    store.append(("alice", "s1"), batch(SECRET))
    store.append(("bob", "s1"), batch("bob's"))
    alice, bob = (str(store.stream_key((who, "s1"))) for who in ("alice", "bob"))
    store.close()
    _swap_names_rows(backend, alice, bob)
    store = backend.open(keyring=ring)
    assert store.verify().ok  # the rows are beside the chain
    with pytest.raises(ValueError, match=r"memory ~p:\w+ holds records after its last"):
        store.erase_subject(("alice",), reason="GDPR #3")
    assert texts(store.read(("alice", "s1"))) == [SECRET]  # nothing was erased
    assert texts(store.read(("bob", "s1"))) == ["bob's"]
    store.close()


_KILLED_IN_THE_THIRD_BATCH = """
import os, signal, sys
from eventlog import FileKeyring
from eventlog.postgres import PostgresEventStore

batches = []

class KilledInTheThirdBatch(PostgresEventStore):
    def _erase(self, keys, reason, expected_seq, before_commit=None):
        batches.append(keys)

        def then_die():
            if before_commit is not None:
                before_commit()
            if len(batches) == 3:  # rows blanked, receipts written, not committed
                os.kill(os.getpid(), signal.SIGKILL)

        return super()._erase(keys, reason, expected_seq, before_commit=then_die)

dsn, schema, keys = sys.argv[1:]
with KilledInTheThirdBatch(dsn, schema=schema, keyring=FileKeyring(keys)) as store:
    store.erase_subject(("user-42",), reason="GDPR", batch=4)
"""


@pytest.mark.skip_backend("memory", "sqlite")  # SQLite: test_erase_durability.py
def test_postgres_erase_subject_killed_in_a_batch_leaves_each_memory_whole_or_erased(
    backend: Backend, tmp_path: pathlib.Path
) -> None:
    # README: "erase_subject erases 500 memories per transaction (each memory is untouched or
    # fully erased with its receipt, even after kill -9; a rerun finishes the job without a
    # second receipt)". Here on PostgreSQL, the process killed inside its third transaction.
    keys = tmp_path / "keys.json"
    sessions = [("user-42", f"s{i:02}") for i in range(14)]
    store = backend.open(keyring=FileKeyring(keys))
    for mid in sessions:
        store.append(mid, batch(f"{SECRET} {mid[1]}", "an answer"))
    store.append(("user-7", "s1"), batch("keep me"))
    store.close()
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_IN_THE_THIRD_BATCH, PG_DSN, backend.schema, str(keys)],
        env=unmeasured_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    store = backend.open(keyring=FileKeyring(keys))
    # Check the first two batches (8 memories, in stream key order) are erased with one
    # receipt each, the third's rollback left the rest whole, and the chains verify.
    erased = []
    for mid in sessions:
        records = store.read(mid)
        receipts = [r for r in records if r.kind == "memory_erased"]
        if receipts:
            assert len(receipts) == 1 and all(r.erased for r in records[:2]), mid
            erased.append(mid)
        else:
            assert texts(records) == [f"{SECRET} {mid[1]}", "an answer"], mid
    assert erased == sessions[:8]
    assert store.verify().ok
    # Check the rerun erases exactly the rest, one receipt each, and shreds the subject's keys.
    rerun = store.erase_subject(("user-42",), reason="GDPR, rerun")
    assert [r.memory_id for r in rerun] == sessions[8:]
    assert all(len([r for r in store.read(m) if r.kind == "memory_erased"]) == 1 for m in sessions)
    assert texts(store.read(("user-7", "s1"))) == ["keep me"]
    assert store.verify().ok
    store.close()
    stored = json.loads(keys.read_text())["keys"].values()
    assert [e["subject"] for e in stored] == ['~t:["user-7"]']
