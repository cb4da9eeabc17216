"""Erasure under crashes and on disk: SIGKILL in the middle of SQLite erasures, and which bytes
PostgreSQL's vacuum() really removes from the table files.

SQLite: a child process erases a subject with many sessions and then a run of single memories,
and is SIGKILLed at random moments. Every memory must be untouched or fully erased (never
partial), the chain must verify, a rerun must finish the job without a second receipt, and no
erased text may be left in the .db, -wal or -shm files.

PostgreSQL: the test reads the relation files under ``data_directory`` (a local cluster run by
a user who may read them; otherwise it skips, except with CI=true) and establishes what
erase(), vacuum() and vacuum(full=True) leave behind in the heap and TOAST files.
"""

from __future__ import annotations

import json
import pathlib
import random
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from eventlog import SQLiteEventStore
from eventlog.serialization import decode_event
from eventlog.store import EventStore
from eventlog.testing.records import batch
from tests.conftest import IN_CI, PG_DSN, require_pg
from tests.processes import unmeasured_env

# ------------------------------------------------------------------ SQLite: kill -9

BIG = "big"  # the subject erase_subject() works through, one transaction per session
BIG_SESSIONS = 100
USERS = 100  # user-1..user-100 with 2 or 3 sessions each: 250 memories
LOOP = 60  # ("user-1", "s1") .. ("user-60", "s1") are erased one by one with erase()
TARGETS = [(BIG, f"s{i:03}") for i in range(BIG_SESSIONS)] + [
    (f"user-{u}", "s1") for u in range(1, LOOP + 1)
]
MEMORIES = [(BIG, f"s{i:03}") for i in range(BIG_SESSIONS)] + [
    (f"user-{u}", f"s{s}") for u in range(1, USERS + 1) for s in range(1, 3 + u % 2)
]


def _marker(memory_id: tuple[str, str], m: int) -> str:
    return f"<<secret {memory_id[0]}/{memory_id[1]}#{m}>>"


def _snapshot_marker(memory_id: tuple[str, str]) -> str:
    return f"<<snapshot {memory_id[0]}/{memory_id[1]}>>"


# The child prints a line before its work and after each memory it erases one by one, so the
# parent can aim its kills; then it waits on stdin, so the parent always kills a live process.
_ERASER = textwrap.dedent(
    """
    import sys
    from eventlog import SQLiteEventStore
    path, big, loop = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SQLiteEventStore(path)
    print("ready", flush=True)
    store.erase_subject((big,), reason="subject request")
    print("subject", flush=True)
    for u in range(1, loop + 1):
        store.erase((f"user-{u}", "s1"), reason="session request")
        print("erased", u, flush=True)
    print("done", flush=True)
    sys.stdin.read()
    """
)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A closed store file with every memory (three messages each) and a snapshot of each."""
    path = tmp_path_factory.mktemp("template") / "chat.db"
    with SQLiteEventStore(path) as store:
        for mid in MEMORIES:
            store.append(mid, batch(*(_marker(mid, m) for m in range(3))))
            store.save_snapshot(mid, "window", 3, json.dumps({"state": _snapshot_marker(mid)}))
    assert sorted(p.name for p in path.parent.iterdir()) == ["chat.db"]  # WAL folded in
    return path


def _state(store: EventStore, mid: tuple[str, str]) -> str:
    """'untouched' or 'erased'; fails on anything in between."""
    records = store.read(mid)
    messages = [r for r in records if r.kind == "message_added"]
    receipts = [r for r in records if r.kind == "memory_erased"]
    assert [r.seq for r in messages] == [1, 2, 3], mid
    snapshot = store.load_snapshot(mid, "window")
    if all(r.payload and r.salt for r in messages) and not receipts:
        # Check an untouched memory still has its text and its snapshot.
        assert [json.loads(r.payload)["contents"][0]["text"] for r in messages] == [
            _marker(mid, m) for m in range(3)
        ]
        assert snapshot is not None, mid
        assert _snapshot_marker(mid) in snapshot.state
        return "untouched"
    # Check an erased memory lost payload and salt of every message, its snapshot, and has
    # exactly one receipt, its last record, covering all three messages.
    assert all(r.payload == "" and r.salt == "" and r.erased for r in messages), (mid, records)
    assert len(receipts) == 1, (mid, records)
    assert records[-1] == receipts[0], mid
    event = decode_event(receipts[0])
    assert (event.first_seq, event.last_seq, event.record_count) == (1, 3, 3), mid
    assert snapshot is None, mid
    return "erased"


def _markers_in_files(directory: pathlib.Path, mids: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Which of these memories' texts appear, byte for byte, in which file of ``directory``."""
    found: dict[str, list[str]] = {}
    for f in sorted(directory.iterdir()):
        data = f.read_bytes()
        texts = [_marker(mid, m) for mid in mids for m in range(3)]
        texts += [_snapshot_marker(mid) for mid in mids]
        hits = [t for t in texts if t.encode() in data]
        if hits:
            found[f.name] = hits
    return found


def _kill_during_erase(path: pathlib.Path, after: str, delay: float) -> str:
    """Start the eraser, wait for the line ``after``, sleep ``delay`` and SIGKILL it.

    Returns the last line the child printed before it died."""
    child = subprocess.Popen(
        [sys.executable, "-c", _ERASER, str(path), BIG, str(LOOP)],
        env=unmeasured_env(),  # killed: its coverage file would be half written
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    try:
        line = ""
        while line != after:
            line = child.stdout.readline().strip()
            assert line, f"the eraser ended before printing {after!r}"
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        rest, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    # Check it was our SIGKILL that ended the child, not an error of its own.
    assert child.returncode == -signal.SIGKILL, err
    return [line, *rest.splitlines()][-1]


def test_sigkill_during_erase_leaves_every_memory_whole_or_erased(template, tmp_path):
    rng = random.Random(20240611)  # fixed: a failure names a kill point that can be rerun
    # Kill points: inside erase_subject (a delay after "ready"), and inside the erase() loop
    # (a short delay after the k-th "erased" line), plus one after everything was done.
    kill_points: list[tuple[str, float]] = [("ready", rng.uniform(0.02, 0.15)) for _ in range(4)]
    kill_points += [
        (f"erased {rng.randint(1, LOOP - 10)}", rng.uniform(0, 0.003)) for _ in range(3)
    ]
    kill_points += [("done", 0.0)]
    interrupted = 0
    for trial, (after, delay) in enumerate(kill_points):
        directory = tmp_path / f"trial-{trial}"
        directory.mkdir()
        path = directory / "chat.db"
        shutil.copy(template, path)
        last_line = _kill_during_erase(path, after, delay)
        where = f"trial {trial}: killed {delay * 1000:.1f} ms after {after!r} (last {last_line!r})"

        with SQLiteEventStore(path) as store:
            # Check every memory is untouched or fully erased, and the chains verify.
            states = {mid: _state(store, mid) for mid in MEMORIES}
            assert store.verify().ok, where
            erased = {mid for mid, state in states.items() if state == "erased"}
            assert erased <= set(TARGETS), where
            # Check erasure ran in order: erased memories are a prefix of the targets.
            assert sorted(erased, key=TARGETS.index) == TARGETS[: len(erased)], where
            if 0 < len(erased) < len(TARGETS):
                interrupted += 1

            # Check a rerun finishes the job, with a receipt only for what was left.
            receipts = store.erase_subject((BIG,), reason="rerun")
            for mid in TARGETS[BIG_SESSIONS:]:
                if mid in erased:
                    with pytest.raises(ValueError, match="nothing to erase"):
                        store.erase(mid, reason="rerun")
                else:
                    receipts.append(store.erase(mid, reason="rerun"))
            assert sorted(r.memory_id for r in receipts) == sorted(set(TARGETS) - erased), where
            states = {mid: _state(store, mid) for mid in MEMORIES}
            assert {mid for mid, s in states.items() if s == "erased"} == set(TARGETS), where
            assert store.verify().ok, where

        # Check no erased text survives in any file, and the scan itself can see kept text.
        assert _markers_in_files(directory, TARGETS) == {}, where
        kept = [mid for mid in MEMORIES if mid not in set(TARGETS)]
        assert len(_markers_in_files(directory, kept)["chat.db"]) == 4 * len(kept), where
    # Check the kills really landed in the middle of the work, not only before or after it.
    assert interrupted >= 4, f"only {interrupted} kills interrupted the erasure"


def test_rerun_after_a_kill_between_commit_and_checkpoint_erases_the_bytes(tmp_path):
    """A process killed after erase() committed but before its WAL checkpoint leaves the old
    pages in the .db file; the rerun an operator does then must still leave no copy behind."""
    path = tmp_path / "chat.db"
    secret = "<<secret victim/s1#0>>"  # noqa: S105 - test data
    with SQLiteEventStore(path) as store:
        store.append(("victim", "s1"), batch(secret))
        store.append(("other", "s1"), batch("<<kept>>"))
    # Another process's connection: its open read transaction blocks the checkpoint, and the
    # connection stays open afterwards (so closing our store is not the last close, which
    # would checkpoint on its own).
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN")
        other.execute("SELECT count(*) FROM events").fetchone()
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from eventlog import SQLiteEventStore as S; "
                "S(sys.argv[1]).erase(('victim', 's1'), reason='r')",
                str(path),
            ],
            env=unmeasured_env(),  # killed: its coverage file would be half written
            stderr=subprocess.PIPE,
        )
        try:
            watcher = sqlite3.connect(path)
            deadline = time.monotonic() + 20
            while not watcher.execute(
                "SELECT count(*) FROM events WHERE kind = 'memory_erased'"
            ).fetchone()[0]:
                assert time.monotonic() < deadline, "the erase never committed"
                time.sleep(0.005)
            watcher.close()
            # Check the child is still alive: stuck in the checkpoint our reader blocks.
            assert child.poll() is None
        finally:
            child.kill()
            child.communicate(timeout=30)
        other.execute("COMMIT")
        assert secret.encode() in path.read_bytes()  # the crash left the old page in the file

        with SQLiteEventStore(path) as store:
            assert [r.erased for r in store.read(("victim", "s1"))] == [True, False]
            # Check the rerun (nothing left to erase) still removes every copy of the text.
            assert store.erase_subject(("victim",), reason="rerun") == []
            with pytest.raises(ValueError, match="nothing to erase"):
                store.erase(("victim", "s1"), reason="rerun")
            leftovers = [f.name for f in tmp_path.iterdir() if secret.encode() in f.read_bytes()]
            assert leftovers == [], f"erased text still in {leftovers} after the rerun"
    finally:
        other.close()


# ------------------------------------------------------------------ PostgreSQL: vacuum


def _admin(query: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        cur = conn.execute(query.encode())
        return cur.fetchall() if cur.description else []


@pytest.fixture
def pg_schema() -> Iterator[str]:
    require_pg()
    name = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        _admin(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _relation_files(schema: str) -> dict[str, pathlib.Path]:
    """The main fork files of the events table, its TOAST table and the snapshots table."""
    (data_directory,) = _admin("SHOW data_directory")[0]
    rows = _admin(
        f"SELECT pg_relation_filepath('\"{schema}\".events'), "
        f"pg_relation_filepath((SELECT reltoastrelid FROM pg_class "
        f"WHERE oid = '\"{schema}\".events'::regclass)), "
        f"pg_relation_filepath('\"{schema}\".snapshots')"
    )
    heap, toast, snapshots = rows[0]
    return {
        name: pathlib.Path(data_directory, relative)
        for name, relative in (("heap", heap), ("toast", toast), ("snapshots", snapshots))
    }


def _found(files: dict[str, pathlib.Path], texts: list[str]) -> dict[str, int]:
    """How many of ``texts`` occur in each file once every dirty page is written out."""
    _admin("CHECKPOINT")
    counts = {}
    for name, f in files.items():
        data = f.read_bytes()
        counts[name] = sum(t.encode() in data for t in texts)
    return counts


def _chunks(text: str) -> list[str]:
    """64-character pieces of a TOASTed text (its ~2 KB chunks lie in separate tuples)."""
    return [text[i : i + 64] for i in range(0, len(text) - 64, 512)]


def test_postgres_erase_vacuum_and_vacuum_full_on_disk(pg_schema):
    """What is left of erased text in the table files (the claims of purge/_erase/vacuum)."""
    from eventlog.postgres import PostgresEventStore

    # Random hex: incompressible, so pglz/lz4 TOAST compression keeps it verbatim.
    short = [f"<<short {secrets.token_hex(8)}>>" for _ in range(10)]
    long_ = [f"<<long {secrets.token_hex(4000)}>>" for _ in range(3)]  # 8 KB each: TOASTed
    snapshot_secret = f"<<snapshot {secrets.token_hex(8)}>>"
    kept_long = [f"<<kept {secrets.token_hex(1500)}>>" for _ in range(60)]
    with PostgresEventStore(PG_DSN, schema=pg_schema) as store:
        # Live data on both sides of the victim, as in any real table: the pages holding
        # the erased text are in the middle of each file, where nothing truncates them.
        for i in range(60):
            if i == 30:
                store.append(("victim", "s1"), batch(*short, *long_))
                store.save_snapshot(("victim", "s1"), "window", 13, snapshot_secret)
            store.append((f"user-{i}", "s1"), batch(f"kept {i}", kept_long[i]))
            store.save_snapshot((f"user-{i}", "s1"), "window", 2, f"kept snapshot {i}")
        files = _relation_files(pg_schema)
        try:
            for f in files.values():
                f.read_bytes()
        except OSError as e:
            if IN_CI:
                raise
            pytest.skip(f"cannot read PostgreSQL's data files here (remote or no access): {e}")
        long_chunks = [c for text in long_ for c in _chunks(text)]
        kept_chunks = [c for text in kept_long for c in _chunks(text)]
        everything = {"short": short, "long": long_chunks, "snapshot": [snapshot_secret]}

        def on_disk(paths: dict[str, pathlib.Path]) -> dict[str, int]:
            return {kind: sum(_found(paths, texts).values()) for kind, texts in everything.items()}

        # Check the scan sees the text where it lives: short ones inline in the heap, long
        # ones in TOAST chunks, the snapshot in its table.
        assert _found(files, short)["heap"] == len(short)
        assert _found(files, long_chunks)["toast"] == len(long_chunks)
        assert _found(files, [snapshot_secret])["snapshots"] == 1

        store.erase(("victim", "s1"), reason="GDPR")

        # Check erase(): no reader sees the text, but every byte is still in the files, as
        # dead row versions (heap and TOAST) and a dead snapshot row.
        assert on_disk(files) == {"short": 10, "long": len(long_chunks), "snapshot": 1}
        assert all(r.payload == "" for r in store.read(("victim", "s1"))[:-1])
        assert store.load_snapshot(("victim", "s1"), "window") is None

        store.vacuum()

        # Check vacuum(): the dead versions are gone for PostgreSQL (space reusable, same
        # files), but not from the disk: a TOAST page whose chunks all died is only marked
        # empty, so the erased text stays in the file until new rows overwrite that space.
        assert _relation_files(pg_schema) == files
        assert _found(files, long_chunks)["toast"] == len(long_chunks)
        assert _found(files, kept_chunks)["toast"] == len(kept_chunks)

        store.vacuum(full=True)

        # Check vacuum(full=True): new files without any erased byte, live text copied over,
        # and the old files are gone after the checkpoint.
        new_files = _relation_files(pg_schema)
        assert set(new_files.values()).isdisjoint(files.values())
        assert on_disk(new_files) == {"short": 0, "long": 0, "snapshot": 0}
        assert _found(new_files, kept_chunks)["toast"] == len(kept_chunks)
        assert [f for f in files.values() if f.exists() and f.stat().st_size > 0] == []
        assert store.verify().ok
