"""Framework sessions side by side with the peers a user would pick instead, in one run.

Outside the test run (``tests/test_bench_sessions_smoke.py`` runs it with tiny sizes). For each
size (items in one session, filled in batches of 1,000) on SQLite files in a temporary
directory, as a server uses them - a new session object per request, the store (or engine)
kept open:

* ``cold10``: a new ``LedgerSession`` + ``get_items(limit=10)`` vs a new Agents SDK
  ``SQLiteSession`` + the same call (and raw ``sqlite3``: the ten newest JSON rows, the floor);
* ``all``: ``get_items()`` of everything, the same way;
* ``add100``: ``add_items`` of 100 items on a new object;
* ``lc``: a new ``LedgerChatMessageHistory`` + ``.messages`` vs langchain-community's
  ``SQLChatMessageHistory`` (both the whole history), and ``lc20``: ours with ``window=20``;
* ``stall``: the longest the event loop went without running while our async calls ran (a
  ticker task sleeping 1 ms measures it, in rounds of their own so its wake-ups do not slow
  the timed calls), per figure and over all.

Everything the set-up allocated is collected and frozen (``gc.freeze()``, as servers do after
start-up) before the first figure, so no call pays for the set-up's garbage.

Figures are medians of ``--repeat`` rounds, ours and the peer's interleaved; ratios are ours /
peer's. Needs the ``bench`` and ``openai-agents`` extras.

    python scripts/bench_sessions.py                      # 1k and 20k
    python scripts/bench_sessions.py --sizes 1000,20000,1000000 --json out.json
    python scripts/bench_sessions.py --sizes 1000000 --keep dbs   # build once, reuse after
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from eventlog import SQLiteEventStore
from projections import MessageWindowPolicy

BATCH = 1_000
GOALS = {
    "cold10": 2.0,  # new object + get_items(limit=10) <= 2 x SQLiteSession
    "all": 1.5,  # get_items() <= 1.5 x SQLiteSession
    "add100": 3.0,  # add_items(100) <= 3 x SQLiteSession
    "lc": 1.0,  # cold .messages <= SQLChatMessageHistory
}
FLAT = 1.5  # add_items(100) at the largest size / at the smallest
STALL_MS = 10.0


def _item(i: int) -> dict[str, Any]:
    role = "user" if i % 2 == 0 else "assistant"
    return {"role": role, "content": f"message {i}: the quick brown fox jumps over the lazy dog"}


class Stall:
    """The longest gap between two runs of a ticker task on the loop, in ms."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.case = 0.0  # the worst since the last reset (per figure)

    async def around(self, call: Callable[[], Awaitable[Any]]) -> Any:
        done = False

        async def tick() -> None:
            last = time.perf_counter()
            while not done:
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                gap = (now - last) * 1000 - 1.0
                self.worst = max(self.worst, gap)
                self.case = max(self.case, gap)
                last = now

        ticker = asyncio.ensure_future(tick())
        await asyncio.sleep(0)  # the ticker runs once before the call starts
        try:
            return await call()
        finally:
            done = True
            await ticker


async def _timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await call()
    return (time.perf_counter() - start) * 1000


def _median(values: list[float]) -> float:
    return statistics.median(values)


async def bench_size(
    root: Path, size: int, repeat: int, stall: Stall, *, keep: bool = False
) -> dict[str, Any]:
    """The figures of one size; with ``keep``, the databases in ``root`` are reused when a
    run with ``keep`` built them before (and left there)."""
    from agents.memory import SQLiteSession

    from projections.adapters.langchain import LedgerChatMessageHistory
    from projections.adapters.openai_agents import LedgerSession

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_community.chat_message_histories import SQLChatMessageHistory
        from sqlalchemy import create_engine

    paths = [root / f"{n}-{size}.db" for n in ("ledger", "sdk", "lc", "built")]
    ledger_path, peer_path, lc_path, built = paths
    reuse = keep and built.exists()
    store = SQLiteEventStore(ledger_path)
    engine = create_engine(f"sqlite:///{lc_path}")
    if not reuse:
        await _fill(store, peer_path, engine, size)
        built.touch()  # only once every write is in: an interrupted fill is redone

    raw = sqlite3.connect(peer_path)

    async def raw10() -> list[Any]:
        rows = raw.execute(
            "SELECT message_data FROM agent_messages WHERE session_id = ? "
            "ORDER BY id DESC LIMIT 10",
            ("s",),
        ).fetchall()
        return [json.loads(r[0]) for r in reversed(rows)]

    async def raw_all() -> list[Any]:
        rows = raw.execute(
            "SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id", ("s",)
        ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def sdk(call: Callable[[Any], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
        async def run() -> Any:
            session = SQLiteSession("s", str(peer_path))
            try:
                return await call(session)
            finally:
                session.close()

        return run

    def ledger(call: Callable[[Any], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
        async def run() -> Any:
            return await call(LedgerSession("s", store=store))

        return run

    async def lc_peer() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # Its async methods need an async engine: a server on a sync one calls this.
            return SQLChatMessageHistory(session_id="h", connection=engine).messages

    async def lc_ours() -> Any:
        history = LedgerChatMessageHistory("h", store=store)
        return await history.aget_messages()

    async def lc_ours20() -> Any:
        history = LedgerChatMessageHistory("h", store=store, window=MessageWindowPolicy(20))
        return await history.aget_messages()

    adds: list[Any] = [_item(i) for i in range(100)]
    cases: dict[str, tuple[Callable[[], Awaitable[Any]], ...]] = {
        "cold10": (
            ledger(lambda s: s.get_items(limit=10)),
            sdk(lambda s: s.get_items(limit=10)),
            raw10,
        ),
        # The O(k) calls before the whole-history ones: a million-item read leaves a heap
        # that the garbage collector then walks during whatever runs next, on both sides.
        "add100": (ledger(lambda s: s.add_items(adds)), sdk(lambda s: s.add_items(adds))),
        "lc20": (lc_ours20,),
        "all": (ledger(lambda s: s.get_items()), sdk(lambda s: s.get_items()), raw_all),
        "lc": (lc_ours, lc_peer),
    }
    import gc

    gc.collect()
    gc.freeze()
    # Correctness first: both sides return the same items, the whole history too.
    for name in ("cold10", "all", "lc"):
        got, want = await cases[name][0](), await cases[name][1]()
        assert got == want, (name, len(got), len(want))
    del got, want
    gc.collect()
    rows: dict[str, Any] = {}
    heavy = size > 100_000
    for name, calls in cases.items():
        rounds = max(1, repeat // 5) if heavy and name in ("all", "lc") else repeat
        times: list[list[float]] = [[] for _ in calls]
        stall.case = 0.0
        for _ in range(rounds):
            for i, call in enumerate(calls):
                times[i].append(await _timed(call))
        # The stall separately: the ticker's wake-ups would slow the timed calls down. The
        # peer's too, for comparison (only ours counts toward the goal).
        for _ in range(min(rounds, 3)):
            await stall.around(calls[0])
        ours_stall = stall.case
        peer_stall = Stall()
        if len(calls) > 1:
            for _ in range(min(rounds, 3)):
                await peer_stall.around(calls[1])
        medians = [_median(t) for t in times]
        row: dict[str, Any] = {"ours_ms": round(medians[0], 3), "stall_ms": round(ours_stall, 1)}
        if len(medians) > 1:
            row["peer_ms"] = round(medians[1], 3)
            row["ratio"] = round(medians[0] / medians[1], 2)
            row["peer_stall_ms"] = round(peer_stall.worst, 1)
        if len(medians) > 2:
            row["raw_ms"] = round(medians[2], 3)
        rows[name] = row
    raw.close()
    engine.dispose()
    store.close()
    if not keep:
        for path in paths:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
    return rows


async def _fill(store: SQLiteEventStore, peer_path: Path, engine: Any, size: int) -> None:
    from agents.memory import SQLiteSession
    from langchain_core.messages import AIMessage, HumanMessage

    from projections.adapters.langchain import LedgerChatMessageHistory
    from projections.adapters.openai_agents import LedgerSession

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_community.chat_message_histories import SQLChatMessageHistory

    ours = LedgerSession("s", store=store)
    theirs = SQLiteSession("s", str(peer_path))
    for start in range(0, size, BATCH):
        batch: list[Any] = [_item(i) for i in range(start, min(size, start + BATCH))]
        await ours.add_items(batch)
        await theirs.add_items(batch)
    theirs.close()
    texts = [_item(i)["content"] for i in range(size)]
    lc_messages = [HumanMessage(t) if i % 2 == 0 else AIMessage(t) for i, t in enumerate(texts)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peer_history = SQLChatMessageHistory(session_id="h", connection=engine)
    ledger_history = LedgerChatMessageHistory("h", store=store)
    for start in range(0, size, BATCH):
        peer_history.add_messages(lc_messages[start : start + BATCH])
        ledger_history.add_messages(lc_messages[start : start + BATCH])


def _table(results: dict[int, dict[str, Any]], stall: float) -> str:
    labels = {
        "cold10": "new `LedgerSession` + `get_items(limit=10)` vs `SQLiteSession`",
        "all": "`get_items()` (everything) vs `SQLiteSession`",
        "add100": "`add_items(100)` on a new object vs `SQLiteSession`",
        "lc": "new `LedgerChatMessageHistory` `.messages` vs `SQLChatMessageHistory`",
        "lc20": "new `LedgerChatMessageHistory(window=20)` `.messages`",
    }
    sizes = sorted(results)
    head = "| items | " + " | ".join(f"{s:,}" for s in sizes) + " |"
    lines = [head, "|---|" + "---|" * len(sizes)]
    for name, label in labels.items():
        cells = []
        for s in sizes:
            row = results[s][name]
            cell = f"{row['ours_ms']:.2f} ms"
            if "peer_ms" in row:
                cell += f" / {row['peer_ms']:.2f} ms = **{row['ratio']:.2f}x**"
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append(f"| worst event-loop stall during our calls | {stall:.1f} ms (all sizes) |")
    return "\n".join(lines)


def _goals(results: dict[int, dict[str, Any]], stall: float) -> dict[str, bool]:
    met = {}
    for size, rows in results.items():
        for name, bound in GOALS.items():
            met[f"{name}@{size} <= {bound}x"] = rows[name]["ratio"] <= bound
    sizes = sorted(results)
    flat = results[sizes[-1]]["add100"]["ours_ms"] / results[sizes[0]]["add100"]["ours_ms"]
    met[f"add100 flat {sizes[-1]} vs {sizes[0]} = {flat:.2f} <= {FLAT}"] = flat <= FLAT
    met[f"stall {stall:.1f} ms <= {STALL_MS} ms"] = stall <= STALL_MS
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes", default="1000,20000", help="items per session, e.g. 1000,1000000"
    )
    parser.add_argument("--repeat", type=int, default=15, help="rounds per figure (median)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--keep",
        type=Path,
        help="build the databases in this directory and leave them there; a later run with "
        "the same directory reuses them (a million items take minutes to build). Every run "
        "adds add_items(100) rounds to both sides alike",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    stall = Stall()
    results: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) if args.keep is None else args.keep
        root.mkdir(parents=True, exist_ok=True)
        for size in sizes:
            results[size] = asyncio.run(
                bench_size(root, size, args.repeat, stall, keep=args.keep is not None)
            )
            print(f"{size:>9,} items: {json.dumps(results[size])}", flush=True)
    print()
    print(_table(results, stall.worst))
    goals = _goals(results, stall.worst)
    print()
    for goal, ok in goals.items():
        print(f"{'met ' if ok else 'MISSED'} {goal}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "sizes": results,
                    "stall_ms": round(stall.worst, 2),
                    "goals": goals,
                    "cpus": os.cpu_count(),
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
