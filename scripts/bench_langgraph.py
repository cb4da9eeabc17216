"""LedgerSaver against LangGraph's official savers, on the chat graph of issue 28.

One thread, one ``invoke`` per turn, each turn a ~200-character human message and a
~200-character AI reply (a fake chat model, offline), default durability. At each size the
graph is run from empty with each saver, then measured side by side in this one run:

* ``bytes``: the database on disk (SQLite: the file and its WAL after a checkpoint;
  PostgreSQL: ``pg_total_relation_size`` of the saver's tables, indexes and TOAST);
* ``put`` / ``get_tuple``: median time of the saver's own calls during the last 10 turns
  (what LangGraph asked of it while the thread was that long);
* ``get_tuple(latest)`` and ``list(limit=10)``: median of 10 calls on the finished thread;
* ``heartbeat``: how late a 1 ms asyncio heartbeat runs while ``aget_tuple``,
  ``alist(limit=10)`` and ``aput`` run (the async methods must not block the event loop):
  the median of 7 rounds' worst and the worst of all, beside a floor measured in alternate
  rounds (a worker thread only decoding the same checkpoints with the serde).

Peers: ``SqliteSaver`` (langgraph-checkpoint-sqlite) beside LedgerSaver on SQLite, and
``PostgresSaver`` (langgraph-checkpoint-postgres, when installed) beside LedgerSaver on
PostgreSQL (a fresh schema each, dropped afterwards; ``CHATLEDGER_TEST_PG_DSN`` or the local
server). Ratios are LedgerSaver / peer.

    python scripts/bench_langgraph.py                      # 100 and 1,000 turns
    python scripts/bench_langgraph.py --sizes "" --ledger-sizes 10000 --no-postgres --fast-build

Every turn's ``invoke`` reads the whole thread back (LangGraph decodes the full message list,
whatever the saver), so building a thread costs the square of its length: 10,000 turns take
about an hour and a half on a 2-CPU machine, 3,000 turns ten minutes. ``--fast-build`` (for
``--ledger-sizes``) skips those reads while building: the graph gets back the checkpoint it
put last (see :class:`Replay`); the stored events are the same, and the last 10 turns and
every figure use the saver as is.
    python scripts/bench_langgraph.py --json out.json

Needs ``pip install -e '.[langgraph,bench,postgres]'`` (PostgresSaver:
``pip install langgraph-checkpoint-postgres``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import importlib.util
import itertools
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import START, MessagesState, StateGraph

from eventlog import SQLiteEventStore
from projections.adapters.langgraph import LedgerSaver

PG_DSN = os.environ.get("CHATLEDGER_TEST_PG_DSN", "host=127.0.0.1 port=5432 dbname=test")
CONFIG: Any = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
HUMAN = "h" * 200
TAIL = 10  # turns at the end whose put / get_tuple calls are timed


def chat_graph(saver: Any) -> Any:
    replies = (AIMessage(f"reply {n} " + "a" * 190) for n in itertools.count(1))
    model = GenericFakeChatModel(messages=replies)

    def chat(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("chat", chat)
    graph.add_edge(START, "chat")
    return graph.compile(checkpointer=saver)


class Timed:
    """Wraps a saver method and keeps the duration of each call while ``on``."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn, self.on = fn, False
        self.times: list[float] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            if self.on:
                self.times.append(time.perf_counter() - start)


class Replay:
    """``get_tuple`` for a fast build (``--fast-build``): the checkpoint the graph put last,
    handed back as put (its own message objects, nothing decoded), when the config asks for
    the newest one and no task wrote to it; else the saver's own ``get_tuple``. What is
    stored is the same - every ``put`` and ``put_writes`` is the saver's - only the reads
    of the build are skipped: each ``invoke`` decoding the whole thread makes a build cost
    the square of its length."""

    def __init__(self, saver: Any, get: Callable[..., Any]) -> None:
        from langgraph.checkpoint.base import CheckpointTuple

        self.tuple_type: Any = CheckpointTuple
        self.get, self.on = get, True
        self.last: Any = None
        self.put_fn, self.writes_fn = saver.put, saver.put_writes

    def put(self, config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        stored = self.put_fn(config, checkpoint, metadata, versions)
        kept = {**checkpoint, "channel_values": dict(checkpoint["channel_values"])}
        self.last = self.tuple_type(stored, kept, metadata, config, [])
        return stored

    def put_writes(self, config: Any, *args: Any, **kwargs: Any) -> None:
        self.last = None  # its checkpoint has pending writes now: read it from the saver
        self.writes_fn(config, *args, **kwargs)

    def get_tuple(self, config: Any) -> Any:
        if self.on and self.last is not None and "checkpoint_id" not in config["configurable"]:
            last = self.last
            values = {
                k: list(v) if isinstance(v, list) else v
                for k, v in last.checkpoint["channel_values"].items()
            }
            checkpoint = {**last.checkpoint, "channel_values": values}
            return self.tuple_type(last.config, checkpoint, last.metadata, last.parent_config, [])
        return self.get(config)


def run_turns(savers: list[Any], turns: int, *, fast: bool = False) -> list[dict[str, float]]:
    """Run the chat graph ``turns`` times on each saver, turn by turn in alternation (so a
    busy machine slows every saver alike); each saver's put/get_tuple timed in the last turns.
    ``fast``: the turns before those served by :class:`Replay`."""
    timed = []
    replays: list[Replay | None] = []
    for saver in savers:
        replay = Replay(saver, saver.get_tuple) if fast else None
        if replay is not None:
            saver.put_writes = replay.put_writes
        put = Timed(replay.put if replay else saver.put)
        get = Timed(replay.get_tuple if replay else saver.get_tuple)
        saver.put, saver.get_tuple = put, get
        timed.append((chat_graph(saver), put, get, [0.0]))
        replays.append(replay)
    for turn in range(turns):
        for (app, put, get, build), replay in zip(timed, replays, strict=True):
            put.on = get.on = turn >= turns - TAIL
            if replay is not None:
                replay.on = turn < turns - TAIL
            start = time.perf_counter()
            app.invoke({"messages": [HumanMessage(HUMAN)]}, CONFIG)
            build[0] += time.perf_counter() - start
    rows = []
    for saver, (app, put, get, build), replay in zip(savers, timed, replays, strict=True):
        del saver.put, saver.get_tuple
        if replay is not None:
            del saver.put_writes
        state = app.get_state(CONFIG)
        assert len(state.values["messages"]) == 2 * turns, "the graph lost messages"
        rows.append(
            {
                "turns": turns,
                "build_s": build[0],
                "put_ms": statistics.median(put.times) * 1000,
                "get_in_run_ms": statistics.median(get.times) * 1000,
            }
        )
    return rows


def interleaved_ms(calls: list[Callable[[], Any]], n: int = 10) -> list[float]:
    """Median time of each call, the calls taken in turn ``n`` times (after one warm-up)."""
    times: list[list[float]] = [[] for _ in calls]
    for call in calls:
        call()
    for _ in range(n):
        for call, kept in zip(calls, times, strict=True):
            start = time.perf_counter()
            call()
            kept.append(time.perf_counter() - start)
    return [statistics.median(kept) * 1000 for kept in times]


def list_10(saver: Any) -> list[Any]:
    return list(saver.list(CONFIG, limit=10))


def measure(
    savers: list[Any], turns: int, sizes: list[Callable[[], int]], *, fast: bool = False
) -> list[dict[str, Any]]:
    """Every figure of each saver (the first is LedgerSaver), side by side."""
    rows = run_turns(savers, turns, fast=fast)
    for row, size in zip(rows, sizes, strict=True):
        row["bytes"] = size()
    gets = interleaved_ms([functools.partial(s.get_tuple, CONFIG) for s in savers])
    lists = interleaved_ms([functools.partial(list_10, s) for s in savers])
    for row, get, listed in zip(rows, gets, lists, strict=True):
        row["get_tuple_ms"], row["list10_ms"] = get, listed
    rows[0].update(asyncio.run(heartbeats(savers[0])))
    for row, put in zip(rows, isolated_put_ms(savers), strict=True):
        row["put_alone_ms"] = put
    return rows


def isolated_put_ms(savers: list[Any], n: int = 20) -> list[float]:
    """Median time of ``put`` called alone, in this thread: the next ``n`` steps of the
    finished thread, each one more message, the savers taken in turn. In the graph's run
    (``put_ms``) LangGraph's default durability saves a checkpoint on a background thread while
    its own thread runs the next step, so that figure also holds the graph's work on the
    thread (it grows with the thread) competing for the GIL; this one is the saver's alone."""
    chains = []
    for saver in savers:
        latest = saver.get_tuple(CONFIG)
        chains.append([saver, latest.config, latest.checkpoint, []])
    for step in range(n):
        for chain in chains:
            saver, config, previous, kept = chain
            values = dict(previous["channel_values"])
            values["messages"] = [*values["messages"], HumanMessage(HUMAN, id=str(uuid.uuid4()))]
            version = saver.get_next_version(previous["channel_versions"]["messages"], None)
            checkpoint = {
                **previous,
                "id": str(uuid6()),
                "channel_values": values,
                "channel_versions": {**previous["channel_versions"], "messages": version},
            }
            metadata: Any = {"source": "loop", "step": 10**6 + step, "parents": {}}
            start = time.perf_counter()
            chain[1] = saver.put(config, checkpoint, metadata, {"messages": version})
            kept.append(time.perf_counter() - start)
            chain[2] = checkpoint
    return [statistics.median(chain[3]) * 1000 for chain in chains]


async def heartbeats(saver: Any, rounds: int = 7) -> dict[str, float]:
    """How late a 1 ms asyncio heartbeat runs while the saver's async methods work
    (``aget_tuple``, ``alist(limit=10)``, ``aput`` per round), and - the floor, in alternate
    rounds - while a worker thread only decodes the same checkpoints with the serde (what any
    saver that works off the loop costs the loop in this process: the GIL, and the garbage
    collector pausing every thread while those objects are made). Per kind: the median of the
    rounds' worst lateness, and the worst of all."""
    latest = await saver.aget_tuple(CONFIG)
    blob = saver.serde.dumps_typed(latest.checkpoint["channel_values"])
    loop = asyncio.get_running_loop()

    async def ledger_round() -> None:
        await saver.aget_tuple(CONFIG)
        _ = [t async for t in saver.alist(CONFIG, limit=10)]
        checkpoint = dict(latest.checkpoint)
        checkpoint["id"] = str(uuid.uuid4())  # a side checkpoint: the thread stays as it was
        await saver.aput(latest.config, checkpoint, latest.metadata, {})

    async def floor_round() -> None:
        # The checkpoints get_tuple and list(limit=10) decode, held until the round ends as
        # the ledger round's caller holds what it listed.
        held = [await loop.run_in_executor(None, saver.serde.loads_typed, blob) for _ in range(11)]
        del held

    worst = 0.0
    done = False
    # What stalls the loop: each late beat, and each full (generation 2) garbage collection,
    # as (start, end) - a collection holds the GIL, so it stops the loop's thread too,
    # whichever thread's allocation started it.
    late: list[tuple[str, float, float]] = []
    full: list[tuple[str, float, float]] = []
    kind_now = ""
    started = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            full.append((kind_now, started[0], time.perf_counter()))

    async def beat() -> None:
        nonlocal worst
        while not done:
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            end = time.perf_counter()
            worst = max(worst, end - start - 0.001)
            if end - start - 0.001 > 0.002:
                late.append((kind_now, start, end))

    gc.callbacks.append(on_gc)
    beating = asyncio.create_task(beat())
    found: dict[str, list[float]] = {"heartbeat": [], "floor": []}
    try:
        for _ in range(rounds):
            for kind, work in (("heartbeat", ledger_round), ("floor", floor_round)):
                await asyncio.sleep(0.005)
                worst, kind_now = 0.0, kind
                await work()
                found[kind].append(worst * 1000)
                kind_now = ""
        done = True
        await beating
    finally:
        gc.callbacks.remove(on_gc)
    figures = {
        f"{kind}_{stat}_ms": fn(values)
        for kind, values in found.items()
        for stat, fn in (("median", statistics.median), ("max", max))
    }
    for kind in found:
        pauses = [(s, e) for k, s, e in full if k == kind]
        # The worst beat that no full collection overlapped: the loop's stall not
        # explained by the collector.
        alone = [
            e - s - 0.001
            for k, s, e in late
            if k == kind and not any(s < pe and ps < e for ps, pe in pauses)
        ]
        figures[f"{kind}_nogc_max_ms"] = max(alone, default=0.0) * 1000
        figures[f"{kind}_gc2_count"] = len(pauses)
        figures[f"{kind}_gc2_max_ms"] = max((e - s for s, e in pauses), default=0.0) * 1000
    return figures


# ---------------------------------------------------------------------------- contenders


@contextlib.contextmanager
def ledger_sqlite(work: Path, name: str) -> Iterator[tuple[Any, Callable[[], int]]]:
    path = work / f"{name}.db"
    store = SQLiteEventStore(path)
    try:
        yield LedgerSaver(store), lambda: sqlite_bytes(path, store.checkpoint)
    finally:
        store.close()


@contextlib.contextmanager
def peer_sqlite(work: Path, name: str) -> Iterator[tuple[Any, Callable[[], int]]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = work / f"{name}.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")

    def checkpoint() -> None:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    try:
        yield SqliteSaver(conn), lambda: sqlite_bytes(path, checkpoint)
    finally:
        conn.close()


def sqlite_bytes(path: Path, checkpoint: Callable[[], Any]) -> int:
    checkpoint()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


@contextlib.contextmanager
def pg_schema() -> Iterator[str]:
    import psycopg
    from psycopg import sql

    schema = f"lgbench_{uuid.uuid4().hex[:10]}"
    try:
        yield schema
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def pg_bytes(schema: str) -> int:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0


@contextlib.contextmanager
def ledger_pg(work: Path, name: str) -> Iterator[tuple[Any, Callable[[], int]]]:
    from eventlog.postgres import PostgresEventStore

    with pg_schema() as schema:
        store = PostgresEventStore(PG_DSN, schema=schema)
        try:
            yield LedgerSaver(store), lambda: pg_bytes(schema)
        finally:
            store.close()


@contextlib.contextmanager
def peer_pg(work: Path, name: str) -> Iterator[tuple[Any, Callable[[], int]]]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import sql
    from psycopg.rows import dict_row

    with pg_schema() as schema:
        with psycopg.connect(PG_DSN, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn = psycopg.connect(
            PG_DSN, autocommit=True, prepare_threshold=0, row_factory=dict_row,
            options=f"-c search_path={schema}",
        )  # fmt: skip
        try:
            saver = PostgresSaver(conn)
            saver.setup()
            yield saver, lambda: pg_bytes(schema)
        finally:
            conn.close()


def has_pg_peer() -> str | None:
    try:
        import langgraph.checkpoint.postgres  # noqa: F401
        import psycopg

        with psycopg.connect(PG_DSN, connect_timeout=3):
            pass
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


# ---------------------------------------------------------------------------- report


def line(row: dict[str, Any]) -> str:
    text = (
        f"{row['backend']:8} {row['saver']:13} {row['turns']:6} turns: "
        f"{fmt_bytes(row['bytes']):>9}  put {row['put_ms']:7.2f} ms  "
        f"get_tuple {row['get_tuple_ms']:7.2f} ms  list(10) {row['list10_ms']:8.2f} ms  "
        f"build {row['build_s']:6.1f} s  put alone {row['put_alone_ms']:6.2f} ms"
    )
    if "heartbeat_max_ms" in row:
        text += (
            f"  heartbeat median/worst {row['heartbeat_median_ms']:.1f}/"
            f"{row['heartbeat_max_ms']:.1f} ms (floor {row['floor_median_ms']:.1f}/"
            f"{row['floor_max_ms']:.1f} ms); without a full collection "
            f"{row['heartbeat_nogc_max_ms']:.1f} ms (floor {row['floor_nogc_max_ms']:.1f} ms); "
            f"full collections {row['heartbeat_gc2_count']}, longest "
            f"{row['heartbeat_gc2_max_ms']:.1f} ms (floor {row['floor_gc2_count']}, "
            f"{row['floor_gc2_max_ms']:.1f} ms)"
        )
    return text


def fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000", help="turns, all savers")
    parser.add_argument("--ledger-sizes", default="", help="turns, LedgerSaver alone (10000)")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--fast-build",
        action="store_true",
        help="--ledger-sizes only: build the thread without reading it back (Replay); the "
        "last turns and every figure use the saver as is",
    )
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() once the modules are imported, as a long-running server may: full "
        "collections then skip the objects made at startup",
    )
    args = parser.parse_args(argv)
    if args.gc_freeze:
        gc.freeze()
        print(f"gc.freeze(): {gc.get_freeze_count()} objects made at startup frozen")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    alone = [int(s) for s in args.ledger_sizes.split(",") if s]
    pairs: list[tuple[str, Any, Any]] = [("sqlite", ledger_sqlite, peer_sqlite)]
    if importlib.util.find_spec("langgraph.checkpoint.sqlite") is None:
        print("SqliteSaver not measured: pip install -e '.[bench]' (langgraph-checkpoint-sqlite)")
        pairs = [("sqlite", ledger_sqlite, None)]
    why_no_pg = "--no-postgres" if args.no_postgres else has_pg_peer()
    if why_no_pg is None:
        pairs.append(("postgres", ledger_pg, peer_pg))
    else:
        print(f"PostgresSaver not measured: {why_no_pg}")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="chatledger-bench-lg-") as tmp:
        work = Path(tmp)
        for turns in sorted({*sizes, *alone}):
            for backend, ledger, peer in pairs:
                contenders = [("LedgerSaver", ledger)]
                if turns in sizes and peer is not None:
                    contenders.append(("peer", peer))
                with contextlib.ExitStack() as stack:
                    opened = [
                        stack.enter_context(open_saver(work, f"{backend}-{who}-{turns}"))
                        for who, open_saver in contenders
                    ]
                    fast = args.fast_build and turns not in sizes
                    measured = measure(
                        [o[0] for o in opened], turns, [o[1] for o in opened], fast=fast
                    )
                    for (who, _), (saver, _), row in zip(contenders, opened, measured, strict=True):
                        name = who if who == "LedgerSaver" else type(saver).__name__
                        row.update(backend=backend, saver=name, who=who, fast_build=fast)
                        rows.append(row)
                        print(line(row), flush=True)
    goals = check_goals(rows, sizes)
    for goal, ok, detail in goals:
        print(f"{'PASS' if ok else 'MISS'}  {goal}: {detail}")
    if args.json:
        args.json.write_text(
            json.dumps({"rows": rows, "goals": [list(g) for g in goals]}, indent=1),
            encoding="utf-8",
        )
    return 0


def check_goals(rows: list[dict[str, Any]], sizes: list[int]) -> list[tuple[str, bool, str]]:
    """Issue 28's targets, per backend that has both savers at the sizes."""

    def row(backend: str, who: str, turns: int) -> dict[str, Any] | None:
        found = [r for r in rows if (r["backend"], r["who"], r["turns"]) == (backend, who, turns)]
        return found[0] if found else None

    goals: list[tuple[str, bool, str]] = []
    small, large = min(sizes, default=0), max(sizes, default=0)
    for backend in sorted({r["backend"] for r in rows}) if sizes else []:
        ls, ps = row(backend, "LedgerSaver", small), row(backend, "peer", small)
        ll, pl = row(backend, "LedgerSaver", large), row(backend, "peer", large)
        if None in (ls, ps, ll, pl):
            continue
        assert ls and ps and ll and pl
        ratio = ll["bytes"] / pl["bytes"]
        goals.append((f"{backend} bytes <= 0.02x peer at {large}", ratio <= 0.02, f"{ratio:.4f}x"))
        ratio = ls["put_ms"] / ps["put_ms"]
        goals.append((f"{backend} put <= 1.5x peer at {small}", ratio <= 1.5, f"{ratio:.2f}x"))
        flat = ll["put_ms"] / ls["put_ms"]
        goals.append((f"{backend} put {large} vs {small} <= 1.5x", flat <= 1.5, f"{flat:.2f}x"))
        flat = ll["put_alone_ms"] / ls["put_alone_ms"]
        goals.append(
            (f"{backend} put alone {large} vs {small} <= 1.5x", flat <= 1.5, f"{flat:.2f}x")
        )
        for turns, lr, pr in ((small, ls, ps), (large, ll, pl)):
            ratio = lr["get_tuple_ms"] / pr["get_tuple_ms"]
            goals.append((f"{backend} get_tuple <= peer at {turns}", ratio <= 1.0, f"{ratio:.2f}x"))
        ratio = ll["list10_ms"] / pl["list10_ms"]
        goals.append(
            (f"{backend} list(limit=10) <= 0.1x peer at {large}", ratio <= 0.1, f"{ratio:.3f}x")
        )
    for r in rows:
        if "heartbeat_max_ms" in r:
            goals.append(
                (
                    f"{r['backend']} heartbeat <= 10 ms at {r['turns']}",
                    r["heartbeat_max_ms"] <= 10,
                    f"worst {r['heartbeat_max_ms']:.1f} ms, median of rounds "
                    f"{r['heartbeat_median_ms']:.1f} ms (floor {r['floor_max_ms']:.1f} / "
                    f"{r['floor_median_ms']:.1f} ms)",
                )
            )
            goals.append(
                (
                    f"{r['backend']} heartbeat without a full collection <= 10 ms at {r['turns']}",
                    r["heartbeat_nogc_max_ms"] <= 10,
                    f"worst {r['heartbeat_nogc_max_ms']:.1f} ms; {r['heartbeat_gc2_count']} "
                    f"full collections, longest {r['heartbeat_gc2_max_ms']:.1f} ms",
                )
            )
    return goals


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
