"""Retention under real processes: a compaction run SIGKILLed part way through its purges, and
a retention run racing a writer in another process, on SQLite and PostgreSQL, with a keyring
(so each erasure also destroys a content key, inside its transaction).

A killed run must leave every memory untouched or fully erased (or, for the one in flight,
its key destroyed before the commit, as documented; never a receipt without its blanking or
a half-logged run), and the next run must finish the job. A writer in another process must
lose no add to a racing purge.
"""

from __future__ import annotations

import pathlib
import random
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta

import pytest

from eventlog import FileKeyring, KeyUnavailableError, UserMessage
from eventlog.store import EventStore
from projections import MessageWindowChatMemory, compact, compaction_runs
from tests.conftest import PG_DSN, Backend
from tests.processes import unmeasured_env

pytestmark = [pytest.mark.slow, pytest.mark.skip_backend("memory")]

MEMORIES = 30  # per trial: ("user<trial>", 0) .. ("user<trial>", 29)
FAR_FUTURE = timedelta(days=400)  # every memory is idle past the purge threshold then

# The child opens the same ledger, runs one retention run and prints a line after each memory
# it purged (its provider's evict, called right after), so the parent can aim its kills; then
# it waits on stdin, so the parent always kills a live process.
_RETENTION = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime, timedelta
    from eventlog import FileKeyring
    from projections import ChatMemoryProvider, compact

    backend, where, keys = sys.argv[1:4]
    ring = FileKeyring(keys)
    if backend == "sqlite":
        from eventlog import SQLiteEventStore
        store = SQLiteEventStore(where, keyring=ring)
    else:
        from eventlog.postgres import PostgresEventStore
        store = PostgresEventStore(sys.argv[4], schema=where, keyring=ring)

    class Announcing(ChatMemoryProvider):
        purged = 0
        def evict(self, memory_id):
            Announcing.purged += 1
            print("purged", Announcing.purged, flush=True)
            return super().evict(memory_id)

    print("ready", flush=True)
    later = datetime.now(UTC) + timedelta(days=400)
    compact(store, idle_for=timedelta(days=1), purge_idle_for=timedelta(days=90),
            providers=[Announcing(lambda i: None)], now=later)
    print("done", flush=True)
    sys.stdin.read()
    """
)


def _where(backend: Backend) -> str:
    return str(backend.path) if backend.name == "sqlite" else backend.schema


def _memories(trial: int) -> list[tuple[str, int]]:
    return [(f"user{trial}", i) for i in range(MEMORIES)]


def _fill(store: EventStore, mids: list[tuple[str, int]]) -> None:
    for mid in mids:
        memory = MessageWindowChatMemory(mid, max_messages=3, store=store)
        memory.add(*(UserMessage(f"secret {mid[1]}/{m}") for m in range(5)))


def _state(store: EventStore, mid: tuple[str, int], keys: pathlib.Path) -> str:
    """'untouched', 'erased' or 'shredded'; fails on anything else.

    'shredded' is the documented state of a kill between the key's destruction and the
    erasure's commit (both inside its transaction): the content is unreadable, not blanked,
    with no receipt, and the next run finishes the erasure.
    """
    memory = MessageWindowChatMemory(mid, max_messages=3, store=store)
    try:
        history = memory.history()
    except KeyUnavailableError as e:
        assert FileKeyring(keys).destroyed(e.key_id), (mid, e)  # not merely missing
        assert [r.kind for r in store.read(mid)] == ["message_added"] * 5, mid
        return "shredded"
    kinds = [e.kind if not e.erased else "erased" for e in history]
    if kinds == ["message_added"] * 5:
        # Check an untouched memory still opens: its key was not destroyed.
        texts = [getattr(m, "text", None) for m in memory.messages()]
        assert texts == [f"secret {mid[1]}/{m}" for m in (2, 3, 4)], mid
        return "untouched"
    assert kinds == ["erased"] * 5 + ["memory_erased"], (mid, kinds)
    assert memory.messages() == [], mid
    return "erased"


def _kill_during_retention(backend: Backend, keys: pathlib.Path, after: str, delay: float) -> str:
    """Start the retention run, wait for the line ``after``, sleep ``delay``, SIGKILL it.
    Returns the last line the child printed."""
    child = subprocess.Popen(
        [sys.executable, "-c", _RETENTION, backend.name, _where(backend), str(keys), PG_DSN],
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
            assert line, f"the retention run ended before printing {after!r}"
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        rest, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    # Check it was our SIGKILL that ended the child, not an error of its own.
    assert child.returncode == -signal.SIGKILL, err
    return [line, *rest.splitlines()][-1]


def test_sigkill_during_retention_leaves_every_memory_whole_or_erased(
    tmp_path: pathlib.Path, backend: Backend
) -> None:
    rng = random.Random(20261129)  # fixed: a failure names a kill point that can be rerun
    kill_points = [("ready", rng.uniform(0.0, 0.05)) for _ in range(2)]
    kill_points += [
        (f"purged {rng.randint(1, MEMORIES - 5)}", rng.uniform(0, 0.003)) for _ in range(3)
    ]
    kill_points += [("done", 0.0)]
    interrupted = 0
    for trial, (after, delay) in enumerate(kill_points):
        keys = tmp_path / f"keys-{trial}.json"
        if backend.name == "sqlite":
            backend.path = tmp_path / f"trial-{trial}.db"
        store = backend.open(keyring=FileKeyring(keys))
        mids = _memories(trial)  # fresh ones: on PostgreSQL the trials share one schema
        _fill(store, mids)
        last = _kill_during_retention(backend, keys, after, delay)
        where = f"trial {trial}: killed {delay * 1000:.1f} ms after {after!r} (last {last!r})"

        store = backend.open(keyring=FileKeyring(keys))
        # Check every memory is untouched or fully erased, the ledger verifies, and the run
        # log holds the run only if it finished.
        states = {mid: _state(store, mid, keys) for mid in mids}
        assert store.verify().ok, where
        erased = {mid for mid, state in states.items() if state == "erased"}
        # At most the one memory in flight at the kill lost its key before its commit.
        assert list(states.values()).count("shredded") <= 1, where
        runs = len(compaction_runs(store))
        if 0 < len(erased) < len(mids) or "shredded" in states.values():
            interrupted += 1
        # Check a rerun finishes the job: it erases exactly what was left, once.
        report = compact(
            store,
            idle_for=timedelta(days=1),
            purge_idle_for=timedelta(days=90),
            now=datetime.now(UTC) + FAR_FUTURE,
        )
        assert report.errors == (), where
        assert sorted(report.purged) == sorted(set(mids) - erased), where
        assert {_state(store, mid, keys) for mid in mids} == {"erased"}, where
        assert store.verify().ok, where
        assert len(compaction_runs(store)) == runs + 1, where
    # Check the kills really landed in the middle of the work, not only before or after it.
    assert interrupted >= 3, f"only {interrupted} kills interrupted the run"


_WRITER = textwrap.dedent(
    """
    import sys
    from eventlog import FileKeyring, KeyUnavailableError, UserMessage
    from projections import MessageWindowChatMemory

    backend, where, keys, dsn, n = sys.argv[1:6]
    ring = FileKeyring(keys)
    if backend == "sqlite":
        from eventlog import SQLiteEventStore
        store = SQLiteEventStore(where, keyring=ring)
    else:
        from eventlog.postgres import PostgresEventStore
        store = PostgresEventStore(dsn, schema=where, keyring=ring)
    memory = MessageWindowChatMemory(("writer", 1), max_messages=3, store=store)
    print("ready", flush=True)
    for i in range(int(n)):
        memory.add(UserMessage(f"w{i}"))
    print("done", [m.text for m in memory.messages()], flush=True)
    store.close()
    """
)


def test_retention_racing_a_writer_process_loses_no_write(
    tmp_path: pathlib.Path, backend: Backend
) -> None:
    keys = tmp_path / "keys.json"
    store = backend.open(keyring=FileKeyring(keys))
    n = 150
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, backend.name, _where(backend), str(keys), PG_DSN, str(n)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "ready"
    erasures = 0
    try:
        while writer.poll() is None or erasures == 0:
            # Everything counts as idle: the purge races each add of the writer.
            report = compact(
                store,
                idle_for=timedelta(0),
                purge_idle_for=timedelta(0),
                now=datetime.now(UTC) + FAR_FUTURE,
            )
            assert report.errors == ()
            erasures += len(report.purged)
        out, err = writer.communicate(timeout=120)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.communicate()
    assert writer.returncode == 0, err
    # Check every add is in the log once (erased or not), after the erasures it raced.
    memory = MessageWindowChatMemory(("writer", 1), max_messages=3, store=store)
    history = memory.history()
    kinds = [e.kind for e in history]
    assert kinds.count("memory_erased") == erasures
    added = [e for e in history if e.kind != "memory_erased"]
    assert len(added) == n
    kept = [e.message.text for e in added if not e.erased and e.message is not None]
    assert kept == [f"w{i}" for i in range(n - len(kept), n)]  # only the newest survive
    assert store.verify().ok
    # Check the window after the last erasure is what the writer saw at its end.
    after = kinds[::-1].index("memory_erased")
    texts = [getattr(m, "text", None) for m in memory.messages()]
    assert texts == [f"w{i}" for i in range(n - min(after, 3), n)]
    if after >= 3:
        assert out.strip().endswith(str([f"w{i}" for i in range(n - 3, n)]))
