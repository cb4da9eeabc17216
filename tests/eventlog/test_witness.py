"""The witness against rollback (item 3 of [checkpoints]), on SQLite and PostgreSQL: a restored
older copy, a diverging ledger, freshness on appends and close, read-only opens, purges."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import time
from collections.abc import Iterator

import pytest

from eventlog import RollbackError
from eventlog.errors import EventLogError, PersistenceError
from eventlog.merkle import MerkleTree
from eventlog.testing.records import batch, settled
from eventlog.witness import FileWitness, TreeState
from tests.conftest import PG_DSN
from tests.eventlog.test_forger import Db

pytestmark = pytest.mark.skip_backend("memory")  # nothing of a memory store survives it


def _snapshot(backend, name="old"):
    """Copy the closed database aside (SQLite: the files; PostgreSQL: the rows of events and
    heads), as a backup would."""
    if backend.name == "sqlite":
        for suffix in ("", "-wal"):
            src = backend.path.with_name(backend.path.name + suffix)
            if src.exists():
                shutil.copyfile(src, src.with_name(f"{name}{suffix}"))
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        for table in ("events", "heads"):
            conn.execute(
                sql.SQL("CREATE TABLE {} AS SELECT * FROM {}").format(
                    sql.Identifier(backend.schema, f"{name}_{table}"),
                    sql.Identifier(backend.schema, table),
                )
            )


def _restore(backend, name="old"):
    """Put the copy back: every byte genuine, the newest records (and their seals) gone."""
    if backend.name == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            backend.path.with_name(backend.path.name + suffix).unlink(missing_ok=True)
            src = backend.path.with_name(f"{name}{suffix}")
            if src.exists():
                shutil.copyfile(src, backend.path.with_name(backend.path.name + suffix))
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(PG_DSN, autocommit=True) as conn, conn.transaction():
        for table in ("events", "heads"):
            live = sql.Identifier(backend.schema, table)
            conn.execute(sql.SQL("DELETE FROM {}").format(live))
            conn.execute(
                sql.SQL("INSERT INTO {} SELECT * FROM {}").format(
                    live, sql.Identifier(backend.schema, f"{name}_{table}")
                )
            )


def _put_back(backend, stream: str, source: str) -> None:
    """As an attacker with write access and no key: replace ``stream``'s rows (records and head
    seal) with the ones of the copy ``source`` (see _snapshot), every byte genuine."""
    if backend.name == "sqlite":
        other = backend.path.with_name(source)
        with sqlite3.connect(backend.path) as db:
            db.execute("ATTACH DATABASE ? AS src", (str(other),))
            db.execute("DELETE FROM events WHERE stream_id = ?", (stream,))
            db.execute("INSERT INTO events SELECT * FROM src.events WHERE stream_id = ?", (stream,))
            db.execute(
                "INSERT OR REPLACE INTO heads SELECT * FROM src.heads WHERE stream_id = ?",
                (stream,),
            )
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(PG_DSN, autocommit=True) as conn, conn.transaction():
        for table in ("events", "heads"):
            live = sql.Identifier(backend.schema, table)
            copy = sql.Identifier(backend.schema, f"{source}_{table}")
            conn.execute(sql.SQL("DELETE FROM {} WHERE stream_id = %s").format(live), (stream,))
            conn.execute(
                sql.SQL("INSERT INTO {} SELECT * FROM {} WHERE stream_id = %s").format(live, copy),
                (stream,),
            )


def _witnessed(path):
    return json.loads(path.read_text())


def test_tree_state_has_the_rfc_9162_root_of_every_size():
    # Check the frontier fold against the Merkle tree the ledger uses, size by size.
    tree, state = MerkleTree(), TreeState()
    assert state.root() == tree.root()
    for i in range(70):
        leaf = f"{i:064x}"
        tree.append(bytes.fromhex(leaf))
        state.push(i + 1, leaf)
        assert state.root() == tree.root(), i
        assert TreeState.from_json(state.to_json()) == state


def test_a_fresh_witness_is_created_on_first_open_and_moved_on_close(backend, tmp_path):
    path = tmp_path / "ledger.witness"
    store = backend.open(witness=path)
    # Check a new witness starts from the ledger as it is: empty.
    assert _witnessed(path)["size"] == 0
    store.append("u1", batch("a", "b"))
    store.append("u2", batch("c"))
    settled(store).close()
    data = _witnessed(path)
    assert (data["size"], data["format"]) == (3, "chatledger.witness/1")
    auditor = backend.open(read_only=True)
    assert data["last_hash"] == auditor.read_all()[-1].hash
    d = auditor.digest()
    assert TreeState.from_json(path.read_text()).root() == d.root
    # Check closing twice (and reopening) keeps it as it is.
    store.close()
    backend.open(witness=path).close()
    assert _witnessed(path) == data


def _until_shown(backend, size):
    """Wait until a new store object's ``read_all`` shows ``size`` records. On PostgreSQL it
    shows a record only once every transaction older than its commit has ended anywhere on the
    server (another test run's, say), so a witness created by a new store object right after
    an append could otherwise see fewer."""
    reader = backend.open(read_only=True)
    deadline = time.monotonic() + 30
    while len(reader.read_all()) < size and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_witness_is_created_for_a_ledger_that_has_records(backend, tmp_path):
    store = backend.open()
    store.append("u1", batch("a", "b", "c"))
    path = tmp_path / "w.json"
    _until_shown(backend, 3)
    backend.open(witness=path)
    assert _witnessed(path)["size"] == 3


def test_a_restored_older_copy_is_refused_after_a_clean_close(backend, tmp_path):
    path = tmp_path / "ledger.witness"
    store = backend.open(witness=path)
    store.append("u1", batch("a", "b", "c"))
    store.close()
    _snapshot(backend)
    store = backend.open(witness=path)
    store.append("u1", batch("d"))
    store.append("u2", batch("e"))
    store.close()
    _restore(backend)
    # Check the copy is a valid ledger on its own: without the witness, nothing notices.
    plain = backend.open()
    assert plain.verify().ok and len(plain.read_all()) == 3
    plain.close()
    # Check an open with the witness refuses it, naming both sizes and the remedy.
    with pytest.raises(RollbackError) as caught:
        backend.open(witness=path)
    e = caught.value
    assert isinstance(e, EventLogError)
    assert (e.operation, e.witnessed_size, e.ledger_size, e.behind) == ("open", 5, 3, True)
    assert str(path) == e.witness
    message = str(e)
    assert "holds 3 records, behind the 5 its witness" in message
    assert "restore the newest copy of the database" in message
    assert "move the witness file aside" in message
    # Check a read-only open refuses it too, and the witness is left as it was.
    before = path.read_text()
    with pytest.raises(RollbackError):
        backend.open(witness=path, read_only=True)
    assert path.read_text() == before
    # Check the remedy: a new witness starts from the ledger as it is.
    path.rename(tmp_path / "aside")
    backend.open(witness=path).close()
    assert _witnessed(path)["size"] == 3


def test_a_diverging_ledger_is_refused(backend, tmp_path):
    path = tmp_path / "w"
    store = backend.open(witness=path)
    store.append("u1", batch("a", "b"))
    store.append("u2", batch("c"))
    settled(store).close()
    # The same size, another root: the last witnessed record replaced.
    backend.tamper(backend.open(), "u2", 1, "hash", "f" * 64)
    with pytest.raises(RollbackError) as caught:
        backend.open(witness=path)
    e = caught.value
    assert (e.witnessed_size, e.ledger_size, e.behind) == (3, 3, False)
    assert "the witnessed history was changed" in str(e)


def test_the_tree_check_catches_a_rewrite_before_the_last_witnessed_record(backend, tmp_path):
    path = tmp_path / "w"
    store = backend.open(witness=path)
    store.append("u1", batch("a", "b"))
    store.append("u2", batch("c"))
    settled(store).close()
    backend.tamper(backend.open(), "u1", 1, "hash", "e" * 64)
    # Check the anchor check (one indexed read) does not see it - the read path does ...
    backend.open(witness=path).close()
    # ... and the tree check does.
    with pytest.raises(RollbackError) as caught:
        backend.open(witness=FileWitness(path, check="tree"))
    assert caught.value.behind is False


def test_a_read_only_open_never_writes_the_witness(backend, tmp_path):
    path = tmp_path / "w"
    backend.open().append("u1", batch("a"))
    # Check a read-only open does not create a missing witness ...
    backend.open(witness=path, read_only=True).close()
    assert not path.exists()
    backend.open(witness=path).close()
    before = path.read_text()
    # ... nor moves an existing one when the ledger grew, on reads or close.
    backend.open().append("u1", batch("b"))
    reader = backend.open(witness=path, read_only=True)
    # read(), not read_all(): PostgreSQL's global order stops below any transaction still
    # running in the database (another workload's), and this test is not about that.
    assert len(reader.read("u1")) == 2
    reader.close()
    assert path.read_text() == before


def test_appends_move_the_witness_every_n_appends(backend, tmp_path):
    path = tmp_path / "w"
    witness = FileWitness(path, every=2, seconds=3600)
    store = backend.open(witness=witness)
    writes = witness.writes
    store.append("u1", batch("a"))
    assert witness.writes == writes and _witnessed(path)["size"] == 0
    store.append("u1", batch("b", "c"))
    assert witness.writes == writes + 1 and _witnessed(path)["size"] == 3
    # Check another writer's appends are absorbed too (read from the ledger, not counted).
    backend.open().append("u2", batch("x"))
    store.append("u1", batch("d"))
    store.append("u1", batch("e"))
    assert _witnessed(path)["size"] == 6


def test_appends_move_the_witness_after_t_seconds(backend, tmp_path):
    path = tmp_path / "w"
    store = backend.open(witness=FileWitness(path, every=10**6, seconds=0))
    store.append("u1", batch("a"))
    assert _witnessed(path)["size"] == 1


def test_a_purge_restarts_the_witness_from_the_ledger(backend, tmp_path):
    path = tmp_path / "w"
    store = backend.open(witness=path)
    store.append("u2", batch("x"))
    store.append("u1", batch("a", "b"))
    store.close()
    store = backend.open(witness=path)
    store.purge("u1", expected_seq=2, reason="retention")
    store.close()
    # Check the tombstone after the witnessed last record let it start again (not a rollback).
    assert _witnessed(path)["size"] == 2
    backend.open(witness=path).close()


def test_a_purge_that_crashed_before_the_witness_moved_is_not_called_a_rollback(backend, tmp_path):
    path = tmp_path / "w"
    store = backend.open(witness=path)
    store.append("u1", batch("a", "b"))
    settled(store).close()
    backend.open().purge("u1", expected_seq=2, reason="retention")  # no witness: never moved
    settled(backend.open())
    backend.open(witness=path, read_only=True).close()
    backend.open(witness=path).close()
    assert _witnessed(path)["size"] == 1


def test_stores_sharing_a_witness_keep_it_consistent(backend, tmp_path):
    path = tmp_path / "w"
    a = backend.open(witness=path)
    b = backend.open(witness=path)
    a.append("u1", batch("a"))
    b.append("u2", batch("b"))
    b.close()
    a.append("u1", batch("c"))
    a.close()
    assert _witnessed(path)["size"] == 3
    backend.open(witness=FileWitness(path, check="tree")).close()


def test_a_rollback_while_open_is_refused_on_close(backend, tmp_path):
    path = tmp_path / "w"
    store = backend.open(witness=path)
    store.append("u1", batch("a", "b"))
    store.close()
    if backend.name == "postgres":
        _snapshot(backend)
    store = backend.open(witness=path)
    store.append("u1", batch("c"))
    other = backend.open(witness=path)
    other.close()  # moves the witness to 3 records
    if backend.name == "sqlite":
        with sqlite3.connect(backend.path) as conn:
            conn.execute("DELETE FROM events WHERE seq = 3")
    else:
        _restore(backend)
    with pytest.raises(RollbackError) as caught:
        store.close()
    assert caught.value.operation == "close"
    with pytest.raises(EventLogError):
        store.read_all()  # closed all the same


def test_a_witness_that_is_not_one_is_refused(backend, tmp_path):
    path = tmp_path / "w"
    path.write_text("{}")
    with pytest.raises(PersistenceError, match="is not a chatledger witness"):
        backend.open(witness=path)
    backend.open(witness=tmp_path / "ok").close()
    data = _witnessed(tmp_path / "ok")
    data["root"] = data["frontier"] = None
    path.write_text(json.dumps(data))
    with pytest.raises(PersistenceError, match="move it aside"):
        backend.open(witness=path)


@pytest.mark.skip_backend("memory", "postgres")
def test_an_unwritable_witness_is_a_persistence_error(backend, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "w.json"
    with pytest.raises(PersistenceError, match="cannot read"):
        backend.open(witness=folder)  # a directory, not a file
    with pytest.raises(PersistenceError, match="cannot write"):
        backend.open(witness=folder / "missing" / "w")  # its folder does not exist
    # Check writing the file itself fails the same way (here: a directory in its place).
    witness = FileWitness(path)
    witness.path = folder
    with pytest.raises(PersistenceError, match="cannot write"):
        witness._write(TreeState())


def test_witness_arguments_are_checked(tmp_path):
    with pytest.raises(ValueError, match="check must be"):
        FileWitness(tmp_path / "w", check="full")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="every=0"):
        FileWitness(tmp_path / "w", every=0)
    assert repr(FileWitness("x")) == "FileWitness('x')"


def test_a_witness_file_edited_by_hand_is_not_trusted():
    state = TreeState()
    for i in range(5):
        state.push(i + 1, f"{i:064x}")
    data = json.loads(state.to_json())
    with pytest.raises(ValueError, match="not the root of its frontier"):
        TreeState.from_json(json.dumps({**data, "root": data["frontier"][0]}))
    with pytest.raises(ValueError, match="malformed size"):
        TreeState.from_json(json.dumps({**data, "size": 7}))
    with pytest.raises(ValueError, match=r"not a chatledger\.witness/1 file"):
        TreeState.from_json("[]")


def test_the_tree_check_accepts_a_ledger_that_grew_and_reads_in_pages(
    backend, tmp_path, monkeypatch
):
    import eventlog.witness

    monkeypatch.setattr(eventlog.witness, "_PAGE", 2)
    path = tmp_path / "w"
    store = backend.open(witness=path)
    store.append("u1", batch("a", "b", "c"))
    settled(store).close()
    backend.open().append("u2", batch("x", "y"))  # appended without the witness
    # On PostgreSQL the ledger shows records only below the server's oldest open transaction
    # (the watermark): another client's transaction - any database on the server - holds
    # the last two back for a while. Wait until they are visible, as a tailer would.
    deadline = time.monotonic() + 60
    while backend.open().digest().size < 5:
        assert time.monotonic() < deadline, "another client held a transaction open for 60 s"
        time.sleep(0.05)
    tree = FileWitness(path, check="tree")
    backend.open(witness=tree).close()
    assert _witnessed(path)["size"] == 5


# ---------------------------------------------------------------- a PostgreSQL witness


@pytest.fixture
def pg_witness_table():
    """A fresh schema for the witness table (the witness database is the test server's)."""
    from tests.conftest import require_pg

    require_pg()
    import uuid

    import psycopg
    from psycopg import sql

    schema = f"w_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    yield f"{schema}.chatledger_witness"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def test_a_postgres_witness_refuses_a_restored_older_copy(backend, pg_witness_table):
    from eventlog.witness import PostgresWitness

    def witness(**kwargs):
        return PostgresWitness(PG_DSN, name="ledger-1", table=pg_witness_table, **kwargs)

    # Check a read-only open neither creates the table nor a row.
    backend.open().append("u1", batch("a"))
    backend.open(witness=witness(), read_only=True).close()
    assert witness().read() is None
    store = backend.open(witness=witness())
    store.append("u1", batch("b", "c"))
    settled(store).close()
    state = witness().read()
    assert state is not None and state.size == 3
    _snapshot(backend)
    store = backend.open(witness=witness())
    store.append("u2", batch("d"))
    settled(store).close()
    _restore(backend)
    with pytest.raises(RollbackError) as caught:
        backend.open(witness=witness())
    e = caught.value
    assert (e.witnessed_size, e.ledger_size, e.behind) == (4, 3, True)
    assert e.witness == f"witness 'ledger-1' in {pg_witness_table} at 127.0.0.1:5432/test"
    # Check another name in the same table is another witness.
    other = PostgresWitness(PG_DSN, name="ledger-2", table=pg_witness_table)
    backend.open(witness=other).close()
    assert repr(other).startswith("PostgresWitness(\"witness 'ledger-2'")


@pytest.mark.skip_backend("memory", "postgres")
def test_a_postgres_witness_that_is_unreachable_or_edited_is_refused(backend, pg_witness_table):
    import psycopg
    from psycopg import sql

    from eventlog.witness import PostgresWitness, as_witness

    url = "postgresql://chatledger:s3cret@127.0.0.1:1/nowhere?connect_timeout=1"
    assert isinstance(as_witness(url), PostgresWitness)
    with pytest.raises(PersistenceError) as caught:
        backend.open(witness=url)
    assert "s3cret" not in str(caught.value) and "127.0.0.1:1/nowhere" in str(caught.value)
    witness = PostgresWitness(PG_DSN, name="x", table=pg_witness_table)
    backend.open(witness=witness).close()
    schema, table = pg_witness_table.split(".")
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("UPDATE {} SET state = '{{}}'").format(sql.Identifier(schema, table)))
    with pytest.raises(PersistenceError, match="delete its row to start a new witness"):
        backend.open(witness=witness)


def test_one_memory_put_back_from_a_backup_needs_the_tree_check_or_a_digest(backend, tmp_path):
    key = b"the application's chain key, 32b"
    path = tmp_path / "w"
    store = backend.open(chain_key=key, witness=path)
    store.append("x", batch("1", "2", "3"))
    store.append("y", batch("a"))
    store.close()
    db = Db(backend)
    old_seal = db.run("SELECT * FROM {heads} WHERE stream_id = ?", "x")
    store = backend.open(chain_key=key, witness=path)
    store.append("x", batch("4", "5"))
    store.append("y", batch("b"))
    digest = store.digest()
    store.close()
    # One memory's newest records deleted and its older seal row put back from a backup: every
    # record and seal left is genuine and keyed, so neither the read path nor verify() can
    # tell (the README says so), and the default anchor check reads only the last record ...
    db.run("DELETE FROM {events} WHERE stream_id = ? AND seq > 3", "x")
    db.run("DELETE FROM {heads} WHERE stream_id = ?", "x")
    db.run("INSERT INTO {heads} VALUES (?, ?, ?, ?, ?)", *old_seal[0])
    rolled = backend.open(chain_key=key, witness=path)
    assert [r.seq for r in rolled.read_verified("x")] == [1, 2, 3]
    assert rolled.verify().ok
    # ... while a digest taken before the rollback, and the witness's tree check, refuse it.
    assert not rolled.verify(digest=digest).ok
    rolled.close()
    with pytest.raises(RollbackError) as caught:
        backend.open(chain_key=key, witness=FileWitness(path, check="tree"))
    assert caught.value.behind is True


# ---------------------------------------------------------------- attacks (mutation run)


def test_a_one_record_ledger_forked_is_refused(backend, tmp_path):
    # The smallest ledger a witness has seen still has an anchor: its one record.
    path = tmp_path / "w"
    store = backend.open(witness=path)
    store.append("u1", batch("a"))
    settled(store).close()
    assert _witnessed(path)["size"] == 1
    backend.tamper(backend.open(), "u1", 1, "hash", "f" * 64)  # a fork of one record
    with pytest.raises(RollbackError) as caught:
        backend.open(witness=path)
    e = caught.value
    assert (e.witnessed_size, e.ledger_size, e.behind) == (1, 1, False)


class _Counting:
    """A store as the witness sees it, counting the records it reads."""

    def __init__(self, store):
        self.store, self.rows = store, 0

    def read_all(self, *, gt=0, limit=None):
        page = self.store.read_all(gt=gt, limit=limit)
        self.rows += len(page)
        return page


def test_the_anchor_check_reads_one_record_whatever_the_ledger_grew_to(backend, tmp_path):
    path = tmp_path / "w"
    store = backend.open(witness=path)
    store.append("u1", batch("a", "b", "c"))
    settled(store).close()
    backend.open().append("u2", batch("x", "y"))  # appended without the witness
    _until_shown(backend, 5)
    counting = _Counting(backend.open())
    FileWitness(path).check(counting, "ledger", write=False)  # type: ignore[arg-type]
    assert counting.rows == 1
    # Check a witness of an empty ledger is anchored without reading any record.
    empty = tmp_path / "empty"
    FileWitness(empty)._write(TreeState())
    counting = _Counting(backend.open())
    FileWitness(empty).check(counting, "ledger", write=False)  # type: ignore[arg-type]
    assert counting.rows == 0


def test_every_one_append_is_allowed_and_counted_from_each_move(backend, tmp_path, monkeypatch):
    import types

    import eventlog.witness

    monkeypatch.setattr(eventlog.witness, "time", types.SimpleNamespace(monotonic=lambda: 1e3))
    path = tmp_path / "w"
    witness = FileWitness(path, every=3)
    assert witness.writes == 0
    store = backend.open(witness=witness)
    assert witness.writes == 1  # created
    for expected in (1, 1, 2, 2, 2, 3):  # moved at the 3rd and 6th append only
        store.append("u1", batch("a"))
        assert witness.writes == expected
    one = FileWitness(tmp_path / "w1", every=1)
    store = backend.open(witness=one)
    store.append("u1", batch("b"))
    assert (one.writes, _witnessed(tmp_path / "w1")["size"]) == (2, 7)


def test_appends_move_the_witness_once_the_seconds_have_passed(backend, tmp_path, monkeypatch):
    import types

    import eventlog.witness

    clock = [1e4]
    fake = types.SimpleNamespace(monotonic=lambda: clock[0])
    monkeypatch.setattr(eventlog.witness, "time", fake)
    path = tmp_path / "w"
    witness = FileWitness(path, every=10**6)  # seconds=5.0
    store = backend.open(witness=witness)
    writes = witness.writes
    store.append("u1", batch("a"))
    clock[0] += 4.5
    store.append("u1", batch("b"))
    assert witness.writes == writes  # 4.5 s: not yet
    clock[0] += 0.5
    store.append("u1", batch("c"))
    assert witness.writes == writes + 1  # 5 s exactly
    # Check seconds=0 moves it on every append, even within one tick of the clock.
    zero = FileWitness(tmp_path / "w0", every=10**6, seconds=0)
    store = backend.open(witness=zero)
    store.append("u1", batch("d"))
    assert _witnessed(tmp_path / "w0")["size"] == 4


def test_garbage_inside_a_witness_hash_is_refused():
    state = TreeState()
    for i in range(3):
        state.push(i + 1, f"{i:064x}")
    data = json.loads(state.to_json())
    frontier = [data["frontier"][0][:8] + "*" + data["frontier"][0][8:], data["frontier"][1]]
    for edited in ({**data, "frontier": frontier}, {**data, "root": "*" + data["root"]}):
        with pytest.raises(ValueError):
            TreeState.from_json(json.dumps(edited))


def test_the_witness_lock_file_is_private(backend, tmp_path):
    import stat

    backend.open(witness=tmp_path / "w").close()
    assert stat.S_IMODE((tmp_path / "w.lock").stat().st_mode) & 0o077 == 0


def test_a_postgres_witness_names_the_default_port():
    from eventlog.witness import PostgresWitness

    witness = PostgresWitness("host=db.example dbname=ledger", name="n", table="t")
    assert witness.where == "witness 'n' in t at db.example:5432/ledger"


def test_a_postgres_witness_in_a_table_named_with_capitals_and_a_dot_is_read_back(
    backend, pg_witness_table
):
    # Found by the mutation run: the table was looked up unquoted, so "Witness" was never
    # found, every open started a new witness, and a restored older copy was accepted.
    from eventlog.witness import PostgresWitness

    schema = pg_witness_table.split(".")[0]
    table = f"{schema}.Chat.Witness"

    def witness():
        return PostgresWitness(PG_DSN, name="ledger", table=table)

    store = backend.open(witness=witness())
    store.append("u1", batch("a", "b"))
    store.close()
    _snapshot(backend)
    store = backend.open(witness=witness())
    store.append("u1", batch("c"))
    store.close()
    _restore(backend)
    with pytest.raises(RollbackError) as caught:
        backend.open(witness=witness())
    assert (caught.value.witnessed_size, caught.value.ledger_size) == (3, 2)
    state = witness().read()
    assert state is not None and state.size == 3


def _witness_one_record(backend, path, **options):
    """A ledger of one record (u1's "a") and its witness at ``path``."""
    store = backend.open(witness=path, **options)
    store.append("u1", batch("a"))
    store.close()


@contextlib.contextmanager
def _transaction_held_open() -> Iterator[None]:
    """A transaction with an id, open on another connection for the block: PostgreSQL's
    read_all stops below it, so the witness's tree cannot take in records committed after."""
    import psycopg

    with psycopg.connect(PG_DSN) as other:
        other.execute("SELECT pg_current_xact_id()")  # an id: it counts as still running
        yield
        other.rollback()


@pytest.mark.skip_backend("memory", "sqlite")
def test_records_a_transaction_held_open_keeps_out_of_the_tree_are_anchored(backend, tmp_path):
    path = tmp_path / "w"
    _witness_one_record(backend, path)
    with _transaction_held_open():
        store = backend.open(witness=path)
        appended = store.append("u1", batch("b", "c"))
        store.close()
        # Check the tree stops below the open transaction, and the newest record is anchored.
        data = _witnessed(path)
        assert data["size"] == 1
        assert data["anchors"] == [[appended[-1].position, appended[-1].hash]]
        backend.open(witness=path).close()  # the anchored record is there: accepted
    backend.open(witness=path).close()
    data = _witnessed(path)
    assert data["size"] == 3  # in the tree at the first move after the transaction ended
    assert "anchors" not in data


@pytest.mark.skip_backend("memory", "sqlite")
def test_a_rollback_behind_a_transaction_held_open_is_refused(backend, tmp_path):
    path = tmp_path / "w"
    _witness_one_record(backend, path)
    _snapshot(backend)
    # The attacker holds a transaction open so the tree cannot pass it, waits for the app's
    # next records, then puts the older copy back (records and seal: the read path passes it).
    with _transaction_held_open():
        store = backend.open(witness=path)
        store.append("u1", batch("b", "c"))
        store.close()
        _restore(backend)
        with pytest.raises(RollbackError) as caught:
            backend.open(witness=path)
        assert caught.value.behind
        assert caught.value.operation == "open"
    with pytest.raises(RollbackError):
        backend.open(witness=path)  # and after it ended


@pytest.mark.skip_backend("memory", "sqlite")
def test_an_anchored_record_a_retention_purge_deleted_is_not_a_rollback(backend, tmp_path):
    path = tmp_path / "w"
    _witness_one_record(backend, path)
    with _transaction_held_open():
        store = backend.open(witness=path)
        store.append("u2", batch("b", "c"))
        store.close()
        assert _witnessed(path)["anchors"]
        backend.open().purge("u2", expected_seq=2, reason="retention")  # no witness
        backend.open(witness=path).close()  # the purge took the anchored record: accepted
    backend.open(witness=path).close()
    assert "anchors" not in _witnessed(path)


def test_anchors_round_trip_and_malformed_ones_are_refused():
    state = TreeState()
    state.push(5, "ab" * 32)
    state.anchors = [(9, "cd" * 32)]
    again = TreeState.from_json(state.to_json())
    assert again.anchors == [(9, "cd" * 32)]
    assert "anchors" not in json.loads(TreeState().to_json())  # none: the file as before
    for bad in (
        [[5, "cd" * 32]],  # not after last_position
        [[9, "CD" * 32]],  # not lowercase hex
        [[True, "cd" * 32]],
        [[9, "cd" * 32, 1]],
        [[10 + i, "cd" * 32] for i in range(65)],  # more than MAX_ANCHORS
        {"9": "cd" * 32},
    ):
        data = json.loads(state.to_json())
        data["anchors"] = bad
        with pytest.raises(ValueError, match="malformed anchors"):
            TreeState.from_json(json.dumps(data))


@pytest.mark.skip_backend("memory", "sqlite")
def test_a_rollback_of_the_stores_own_records_is_refused_on_close_while_a_transaction_is_held(
    backend, tmp_path
):
    path = tmp_path / "w"
    store = backend.open(witness=path)
    store.append("u1", batch("a", "b"))
    store.close()
    _snapshot(backend)
    with _transaction_held_open():
        store = backend.open(witness=path)
        store.append("u1", batch("c"))
        _restore(backend)
        # Check the store's own newest record, which the tree cannot take in yet, is checked:
        # gone, the ledger was rolled back under the store.
        with pytest.raises(RollbackError) as caught:
            store.close()
        assert caught.value.operation == "close"


@pytest.mark.skip_backend("memory", "sqlite")
def test_a_hand_made_purge_row_does_not_excuse_a_missing_anchor(backend, tmp_path):
    import psycopg
    from psycopg import sql

    key = b"k" * 32
    path = tmp_path / "w"
    _witness_one_record(backend, path, chain_key=key)
    _snapshot(backend)
    with _transaction_held_open():
        store = backend.open(witness=path, chain_key=key)
        store.append("u1", batch("b", "c"))
        store.close()
        _restore(backend)
        # The forger writes to the database without the chain key: a row that merely says
        # memory_purged must not explain away the anchored record it removed.
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (position, stream_id, seq, recorded_at, kind, "
                    "schema_version, payload, meta, prev_hash, hash, salt, commitment, format) "
                    "VALUES ((pg_current_xact_id()::text::bigint << 20), 'zz', 1, "
                    "'2026-01-01T00:00:00.000000Z', 'memory_purged', 1, '{{}}', '{{}}', %s, %s, "
                    "'', '', 1)"
                ).format(sql.Identifier(backend.schema, "events")),
                ("0" * 64, "1" * 64),
            )
        with pytest.raises(RollbackError):
            backend.open(witness=path, chain_key=key)


def test_the_anchor_check_passes_an_older_copy_with_the_last_memory_copied_in(backend, tmp_path):
    # What the README says of the default check: it reads one record, so an older copy with the
    # witnessed last record's memory copied back in (records and seal, every byte genuine)
    # passes it; only the tree check (or a digest) tells.
    path = tmp_path / "w"
    store = backend.open(witness=path)
    store.append("u1", batch("a", "b"))
    store.append("u2", batch("x"))
    store.close()
    _snapshot(backend, "old")
    store = backend.open(witness=path)
    store.append("u2", batch("y"))  # what the rollback takes away
    store.append("u1", batch("c"))  # the witnessed last record
    store.close()
    _snapshot(backend, "new")
    _restore(backend, "old")
    _put_back(backend, "u1", "new")
    backend.open(witness=path).close()
    with pytest.raises(RollbackError) as caught:
        backend.open(witness=FileWitness(path, check="tree"))
    assert (caught.value.witnessed_size, caught.value.ledger_size) == (5, 4)


@pytest.mark.parametrize(
    "table",
    ["w" * 64, "s." + "t" * 64, "", "s.", 5],
    ids=["64", "schema.64", "empty", "dot", "int"],
)
def test_a_witness_table_postgresql_would_cut_or_refuse_is_refused(table) -> None:
    """PostgreSQL cuts names to 63 bytes: two witness tables whose names share 63 bytes would
    be one table, each ledger's row beside the other's (before: accepted, and used)."""
    from eventlog.witness import PostgresWitness

    with pytest.raises((ValueError, TypeError), match="PostgresWitness: "):
        PostgresWitness("postgresql://127.0.0.1/test", table=table)
