"""Time the witness against rollback: W1 durable adds with and without it, and what opens and
closes cost.

Outside the test run. W1 is ``MessageWindowChatMemory(max_messages=20).add(m)`` committed on
return (as in ``scripts/bench.py``); with ``--witness`` defaults (moved every 1,000 appends or
5 s, and on close). The two stores alternate in rounds of ``--round`` adds, so both see the same
disk and the same neighbours; the ratio is of the medians of the per-round rates. Then, on a
ledger of ``--size`` records: the first open that creates a witness (reads every record), an
open with the anchor check, an open with ``check="tree"`` (re-reads every record), and a close
that moves the witness after ``--round`` adds.

    python scripts/bench_witness.py --backend sqlite --n 4000 --size 100000
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from eventlog import SQLiteEventStore, UserMessage
from eventlog.models import NewRecord
from eventlog.store import EventStore
from eventlog.witness import FileWitness
from projections import MessageWindowChatMemory

DEFAULT_DSN = "host=127.0.0.1 port=5432 dbname=test"
TEXT = "x" * 200


def _opener(backend: str, workdir: pathlib.Path, dsn: str) -> Callable[..., EventStore]:
    schemas: dict[str, str] = {}

    def open_store(db: str, **kwargs: Any) -> EventStore:
        if backend == "sqlite":
            return SQLiteEventStore(workdir / f"{db}.db", **kwargs)
        from eventlog.postgres import PostgresEventStore

        schema = schemas.setdefault(db, f"bw_{uuid.uuid4().hex[:10]}")
        return PostgresEventStore(dsn, schema=schema, **kwargs)

    open_store.schemas = schemas  # type: ignore[attr-defined]
    return open_store


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--n", type=int, default=4000, help="W1 adds per store (default 4000)")
    parser.add_argument("--round", type=int, default=200, help="adds per alternating round")
    parser.add_argument("--size", type=int, default=100_000, help="ledger size for open times")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = pathlib.Path(tmp)
        open_store = _opener(args.backend, workdir, args.dsn)
        witness = FileWitness(workdir / "w1.witness")
        plain = open_store("plain")
        witnessed = open_store("witnessed", witness=witness)
        memories = {
            "W1": MessageWindowChatMemory("w1", 20, plain),
            "W1+witness": MessageWindowChatMemory("w1", 20, witnessed),
        }
        rates: dict[str, list[float]] = {name: [] for name in memories}
        for memory in memories.values():  # warm up: first head lookups, caches
            for _ in range(20):
                memory.add(UserMessage(TEXT))
        for _ in range(max(args.n // args.round, 1)):
            for name, memory in memories.items():
                start = time.perf_counter()
                for _ in range(args.round):
                    memory.add(UserMessage(TEXT))
                rates[name].append(args.round / (time.perf_counter() - start))
        for name, values in rates.items():
            results[f"{name} adds/s"] = statistics.median(values)
        results["ratio"] = results["W1+witness adds/s"] / results["W1 adds/s"]
        results["witness writes"] = witness.writes
        results["close s"] = _timed(witnessed.close)
        plain.close()

        big = open_store("big")
        items = [NewRecord(kind="memory_cleared", payload='{"kind":"memory_cleared"}')] * 1000
        for i in range(args.size // 1000):
            big.append(f"m{i % 50}", items)
        big.close()
        path = workdir / "big.witness"
        results["open without witness s"] = _timed(lambda: open_store("big").close())
        results["first open (creates witness) s"] = _timed(
            lambda: open_store("big", witness=path).close()
        )
        results["open, anchor check s"] = _timed(lambda: open_store("big", witness=path).close())
        tree = FileWitness(path, check="tree")
        results["open, tree check s"] = _timed(lambda: open_store("big", witness=tree).close())
        store = open_store("big", witness=path)
        store.append("m0", items[: args.round])
        results[f"close after {args.round} appends s"] = _timed(store.close)
        schemas = getattr(open_store, "schemas", {})
    if schemas:
        import psycopg
        from psycopg import sql

        with psycopg.connect(args.dsn, autocommit=True) as conn:
            for schema in schemas.values():
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    for name, value in results.items():
        print(f"{name:36} {value:12.4f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
