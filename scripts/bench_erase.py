"""Time erasure and encryption at rest on SQLite files in a temporary directory.

Outside the test run. Figures, all from this process:

* ``erase_subject_s``: ``erase_subject`` of one user with ``--memories`` sessions of three
  messages each (plus as many memories of other users, untouched), batches of 500;
* ``erase_subject_longer_prefix_s``: ``erase_subject(("user-42", "tenant-a"))`` of
  ``--prefix-memories`` sessions of one message each, sealed under a ``FileKeyring`` (each
  session has its own key, destroyed with it: one rewrite of the key file in all; one per
  session before, 35 s for 1,000);
* ``first_add_of_new_subject_sealed_ms``: the first message of a new subject with a
  ``FileKeyring`` (creates its key: one locked, fsynced rewrite of the key file);
* ``erase_one_ms``: ``erase`` of one memory among them (median of 20);
* ``erase_with_reader_ms`` / ``retention_with_reader_s``: with a backup holding a read
  snapshot (SQLite's default ``busy_timeout``, 30 s), one ``erase``, then a retention run
  erasing ``--retention`` idle memories: each waited out the reader for the whole
  ``busy_timeout`` before (hours for 1,000 memories), now only the first waits, half a second;
* ``add_per_s`` / ``add_sealed_per_s``: ``MessageWindowChatMemory.add`` of one message, without
  and with ``keyring=FileKeyring(...)`` (AES-256-GCM per payload), ``--adds`` each (best of
  three interleaved rounds), and the same
  number of raw ``sqlite3`` INSERTs of the same JSON (one autocommit statement each, WAL,
  synchronous=NORMAL) as the floor; ratios are to raw and sealed-to-plain.

    python scripts/bench_erase.py --memories 10000 --adds 5000
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from eventlog import SQLiteEventStore, UserMessage
from eventlog.ids import StreamKey
from eventlog.keyring_file import FileKeyring
from eventlog.models import NewRecord
from projections import MessageWindowChatMemory


def _payload(text: str) -> str:
    return json.dumps({"contents": [{"text": text, "type": "TEXT"}], "type": "USER"})


def erase_figures(root: Path, memories: int) -> dict[str, float]:
    with SQLiteEventStore(root / "erase.db") as store:
        for i in range(memories):
            for user in ("user-42", f"other-{i % 97}"):
                store.append(
                    (user, f"s{i}"),
                    [
                        NewRecord("message_added", _payload(f"{user} says {i} {k}"))
                        for k in range(3)
                    ],
                )
        started = time.perf_counter()
        receipts = store.erase_subject(("user-42",), reason="bench")
        took = time.perf_counter() - started
        assert len(receipts) == memories, len(receipts)
        singles = []
        for i in range(20):
            one = time.perf_counter()
            store.erase(StreamKey(f'~t:["other-{i % 97}","s{i}"]'), reason="bench")
            singles.append((time.perf_counter() - one) * 1000)
    return {"erase_subject_s": round(took, 2), "erase_one_ms": round(statistics.median(singles), 2)}


def prefix_figures(root: Path, memories: int) -> dict[str, float]:
    ring = FileKeyring(root / "prefix-keys.json")
    with SQLiteEventStore(root / "prefix.db", keyring=ring) as store:
        for i in range(memories):
            store.append(
                ("user-42", "tenant-a", f"s{i}"),
                [NewRecord("message_added", _payload(f"says {i}"))],
            )
        started = time.perf_counter()
        receipts = store.erase_subject(("user-42", "tenant-a"), reason="bench")
        took = time.perf_counter() - started
        assert len(receipts) == memories, len(receipts)
    return {"erase_subject_longer_prefix_s": round(took, 2)}


def reader_figures(root: Path, memories: int) -> dict[str, float]:
    """Erasure while a backup holds a read snapshot (the default ``busy_timeout`` of 30 s): one
    ``erase``, then a retention run (``compact`` with ``purge_idle_for``) over ``memories``
    idle memories, then the cleanup once the reader is gone."""
    from datetime import UTC, datetime, timedelta

    from projections.compaction import compact

    path = root / "reader.db"
    with SQLiteEventStore(path) as store:
        for i in range(memories + 1):
            store.append(
                (f"user-{i}", "s"),
                [NewRecord("message_added", _payload(f"message {i} {k}")) for k in range(3)],
            )
        store.checkpoint()
        backup = sqlite3.connect(path, isolation_level=None)
        backup.execute("BEGIN")
        backup.execute("SELECT count(*) FROM events").fetchone()
        started = time.perf_counter()
        receipt = store.erase(("user-0", "s"), reason="bench")
        one = time.perf_counter() - started
        assert receipt.cleanup_pending
        started = time.perf_counter()
        later = datetime.now(UTC) + timedelta(days=60)
        report = compact(
            store, idle_for=timedelta(days=7), purge_idle_for=timedelta(days=30), now=later
        )
        run = time.perf_counter() - started
        assert len(report.purged) == memories and report.cleanup_pending, report
        backup.execute("COMMIT")
        backup.close()
        assert store.finish_cleanup()
    return {
        "erase_with_reader_ms": round(one * 1000, 1),
        "retention_with_reader_s": round(run, 2),
        "retention_memories": memories,
    }


def _adds(store: SQLiteEventStore, n: int) -> float:
    """Adds per second to 50 conversations that already exist (steady state: with a keyring,
    creating a subject's key is a one-time cost, timed by ``_first_adds``)."""
    memories = [
        MessageWindowChatMemory(id=(f"u{k}", "s"), max_messages=20, store=store) for k in range(50)
    ]
    for memory in memories:
        memory.add(UserMessage("hello"))
    started = time.perf_counter()
    for i in range(n):
        memories[i % 50].add(UserMessage(f"message number {i}, a typical short chat turn"))
    return n / (time.perf_counter() - started)


def _raw(path: Path, n: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT, seq INT, payload TEXT)")
    started = time.perf_counter()
    for i in range(n):
        conn.execute(
            "INSERT INTO t (k, seq, payload) VALUES (?, ?, ?)",
            (f"u{i % 50}", i, _payload(f"message number {i}, a typical short chat turn")),
        )
    rate = n / (time.perf_counter() - started)
    conn.close()
    return rate


def add_figures(root: Path, n: int) -> dict[str, float]:
    # Interleaved rounds, best of each: the two runs see the same machine noise.
    raws, plains, sealeds = [], [], []
    for k in range(3):
        raws.append(_raw(root / f"raw{k}.db", n))
        with SQLiteEventStore(root / f"plain{k}.db") as store:
            plains.append(_adds(store, n))
        ring = FileKeyring(root / f"keys{k}.json")
        with SQLiteEventStore(root / f"sealed{k}.db", keyring=ring) as store:
            sealeds.append(_adds(store, n))
    raw, plain, sealed = max(raws), max(plains), max(sealeds)
    with SQLiteEventStore(root / "first.db", keyring=FileKeyring(root / "first.json")) as store:
        started = time.perf_counter()
        for k in range(100):
            MessageWindowChatMemory(id=(f"new{k}", "s"), max_messages=20, store=store).add(
                UserMessage("hello")
            )
        first_ms = (time.perf_counter() - started) * 10
    return {
        "raw_insert_per_s": round(raw),
        "add_per_s": round(plain),
        "add_sealed_per_s": round(sealed),
        "add_to_raw": round(plain / raw, 2),
        "add_sealed_to_raw": round(sealed / raw, 2),
        "sealed_to_plain": round(sealed / plain, 2),
        "first_add_of_new_subject_sealed_ms": round(first_ms, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--adds", type=int, default=5_000)
    parser.add_argument(
        "--retention", type=int, default=1_000, help="idle memories erased with a reader open"
    )
    parser.add_argument(
        "--prefix-memories",
        type=int,
        default=1_000,
        help="sessions erased under a two-element prefix with a FileKeyring",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        figures = {"memories": args.memories, **erase_figures(root, args.memories)}
        figures |= prefix_figures(root, args.prefix_memories)
        figures |= reader_figures(root, args.retention)
        figures |= add_figures(root, args.adds)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
