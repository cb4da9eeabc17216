"""Time ledger digests and proofs on a SQLite file of ``--n`` records (default 1 M).

Outside the test run: building the file takes a minute or two, so it is kept (``--path``)
and reused by later runs; a file holding fewer records than ``--n`` is topped up. Records
are small user messages spread over ``--streams`` memories, appended in batches (one
transaction per batch), so the file is built fast and is shaped like a real log: global
positions interleave the streams.

Each figure comes from this process, which opens the file fresh:

* ``first_digest_s``: this process's first ``digest()``: on a new file it reads every record and
  stores the tree's blocks, on a file kept from an earlier run it reads the stored blocks;
* ``digest_ms`` / ``digest_after_append_ms``: a later ``digest()`` with nothing new, and
  right after appending one record (median of ``--repeat``);
* ``prove_ms``: ``prove()`` of a random record against the current size (median);
* ``verify_digest_s``: ``verify_digest()`` of an older digest against the whole file;
* ``proof_json_bytes``: the largest proof of those timed, as JSON;
* in a fresh child process, after this one stored the tree's blocks: ``new_process_digest_ms``
  (its first ``digest()``), ``new_process_prove_ms`` and ``new_process_consistency_ms`` (its
  first ``prove()`` and ``prove_consistency()`` of an old digest), against
  ``raw_read_hashes_ms``: raw ``sqlite3`` reading every record's hash in order, the least a
  tree rebuilt from the records would cost.

    python scripts/bench_ledger.py --path ledger-1m.db --n 1000000
    python scripts/bench_ledger.py --dsn "host=127.0.0.1 dbname=test" --schema bench_1m

With ``--dsn`` the log is a PostgreSQL schema (kept, like the file, for later runs) and the raw
floor reads the hashes with psycopg.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from eventlog import SQLiteEventStore
from eventlog.ids import StreamKey
from eventlog.ledger import digest, prove, verify_digest, verify_inclusion
from eventlog.ledger_models import LedgerDigest
from eventlog.models import NewRecord
from eventlog.store import EventStore


def _payload(i: int) -> str:
    return json.dumps(
        {"contents": [{"text": f"message {i}", "type": "TEXT"}], "type": "USER"},
        separators=(",", ":"),
    )


def _count(store: EventStore) -> int:
    return sum(info.event_count for info in store.streams(include_system=True))


def _open(path: Path, dsn: str | None, schema: str) -> EventStore:
    if dsn is None:
        return SQLiteEventStore(path)
    from eventlog.postgres import PostgresEventStore

    return PostgresEventStore(dsn, schema=schema)


def _raw_hashes_ms(path: Path, dsn: str | None, schema: str) -> float:
    """Raw driver time to read every record's hash in global order: a rebuild's floor."""
    start = time.perf_counter()
    if dsn is None:
        conn = sqlite3.connect(path)
        for _ in conn.execute("SELECT hash FROM events ORDER BY position"):
            pass
        conn.close()
    else:
        import psycopg
        from psycopg import sql

        with psycopg.connect(dsn) as pg, pg.cursor(name="hashes") as cur:
            cur.execute(
                sql.SQL("SELECT hash FROM {}.events ORDER BY position").format(
                    sql.Identifier(schema)
                )
            )
            for _ in cur:
                pass
    return (time.perf_counter() - start) * 1e3


def build(path: Path, n: int, streams: int, batch: int, *, dsn: str | None, schema: str) -> None:
    """Top the log up to ``n`` records: rounds of one ``batch`` per stream, round-robin."""
    with _open(path, dsn, schema) as store:
        have = _count(store)
        start = time.perf_counter()
        i = have
        while i < n:
            for s in range(streams):
                if i >= n:
                    break
                size = min(batch, n - i)
                store.append(
                    f"m{s}", [NewRecord("message_added", _payload(i + k)) for k in range(size)]
                )
                i += size
        if n > have:
            took = time.perf_counter() - start
            print(f"built {n - have:,} records in {took:.1f} s", file=sys.stderr)


def _median_ms(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1e6


def new_process(  # noqa: PLR0917 - the child's command line, one to one
    path: Path, dsn: str | None, schema: str, stream: str, seq: int, old: str
) -> dict[str, float]:
    """The first ``digest()``, ``prove()`` and ``prove_consistency()`` of a fresh store object
    each (a new process's tree starts empty), and the raw floor."""
    results = {}
    with _open(path, dsn, schema) as store:
        start = time.perf_counter()
        digest(store)
        results["new_process_digest_ms"] = (time.perf_counter() - start) * 1e3
    with _open(path, dsn, schema) as store:
        start = time.perf_counter()
        prove(store, StreamKey(stream), seq)
        results["new_process_prove_ms"] = (time.perf_counter() - start) * 1e3
    with _open(path, dsn, schema) as store:
        start = time.perf_counter()
        store.prove_consistency(LedgerDigest.from_json(old))
        results["new_process_consistency_ms"] = (time.perf_counter() - start) * 1e3
    results["raw_read_hashes_ms"] = _raw_hashes_ms(path, dsn, schema)
    return results


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=Path("ledger-bench.db"))
    parser.add_argument("--dsn", help="a PostgreSQL DSN: use a schema there instead of a file")
    parser.add_argument(
        "--schema", default="ledger_bench", help="with --dsn (default ledger_bench)"
    )
    parser.add_argument("--n", type=int, default=1_000_000, help="records (default 1,000,000)")
    parser.add_argument("--streams", type=int, default=10_000, help="memories (default 10,000)")
    parser.add_argument("--batch", type=int, default=20, help="records per append")
    parser.add_argument("--repeat", type=int, default=50, help="timed calls per operation")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--new-process", nargs=3, metavar=("STREAM", "SEQ", "OLD"), help=argparse.SUPPRESS
    )
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.new_process:
        stream, seq, old_json = args.new_process
        figures = new_process(args.path, args.dsn, args.schema, stream, int(seq), old_json)
        print(json.dumps(figures))
        return figures

    build(args.path, args.n, args.streams, args.batch, dsn=args.dsn, schema=args.schema)
    rng = random.Random(args.seed)
    results: dict[str, float] = {}
    with _open(args.path, args.dsn, args.schema) as store:
        start = time.perf_counter()
        old = digest(store)
        results["first_digest_s"] = time.perf_counter() - start
        results["records"] = old.size
        results["digest_ms"] = _median_ms(lambda: digest(store), args.repeat)

        def append_then_digest() -> None:
            store.append("bench-tail", [NewRecord("message_added", _payload(-1))])
            digest(store)

        results["digest_after_append_ms"] = _median_ms(append_then_digest, args.repeat)
        results["append_only_ms"] = _median_ms(
            lambda: store.append("bench-tail", [NewRecord("message_added", _payload(-1))]),
            args.repeat,
        )

        infos = store.streams()
        now = digest(store)
        picks = [rng.choice(infos) for _ in range(args.repeat)]
        targets = [(info.stream_id, rng.randint(1, info.last_seq)) for info in picks]
        sizes: list[int] = []

        def prove_one() -> None:
            key, seq = targets[len(sizes) % len(targets)]
            proof = prove(store, StreamKey(key), seq, digest=now)
            sizes.append(len(proof.to_json()))

        results["prove_ms"] = _median_ms(prove_one, args.repeat)
        key, seq = targets[0]
        proof = prove(store, StreamKey(key), seq, digest=now)
        assert verify_inclusion(proof, now)
        results["verify_inclusion_ms"] = _median_ms(
            lambda: verify_inclusion(proof, now), args.repeat
        )
        results["proof_json_bytes"] = max(sizes)

        start = time.perf_counter()
        report = verify_digest(store, old)
        results["verify_digest_s"] = time.perf_counter() - start
        assert report.ok, report.message

    child = subprocess.run(
        [
            sys.executable,
            __file__,
            "--path",
            str(args.path),
            "--schema",
            args.schema,
            *(["--dsn", args.dsn] if args.dsn else []),
            "--new-process",
            key,
            str(seq),
            old.to_json(),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    results.update(json.loads(child.stdout.strip().splitlines()[-1]))

    width = max(map(len, results))
    for name, value in results.items():
        print(
            f"{name:<{width}}  {value:,.3f}"
            if isinstance(value, float)
            else f"{name:<{width}}  {value:,}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
