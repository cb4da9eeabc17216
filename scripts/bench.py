"""chatledger benchmarks: durable adds, reads, cold opens, time travel, ledger, writers, peers.

Outside the test run (timings there would make it slow and flaky);
``tests/test_bench_smoke.py`` runs it with tiny sizes so it cannot rot. One run measures
everything on one file system (a fresh temporary directory under ``--dir``, default the
current directory, removed afterwards). Absolute times on
a shared 2-core machine drift with the neighbours' load, so the figures to read are the ratios:

* the contenders of a group (write: RAW FLOOR W1 KW W2 TW peers; read: W3 TT RAW.read peers;
  cold: W4; ledger: LD.digest LD.prove LD.inclusion; ledger-full: LD.digest.cold LD.verify) are
  warmed up, then timed in ``--repeat`` rounds; in a round each one does its operations in
  ``--slices`` turns, taking turns with the others in a rotating order, so two contenders'
  figures for a round come from the same few seconds;
* a ratio is *paired*: the median over rounds of the per-round ratio (the "rounds a-b x" in
  the detail column shows their spread); values are medians (of per-round rates, or of every
  timed call for latencies), timed with ``time.perf_counter_ns``;
* before each write turn the harness calls ``os.sync()`` (untimed; ``--no-sync`` to skip), so a
  heavy writer's dirty pages are not written back during the next contender's turn;
* cold opens (W4) run after everything else in this process has closed the history file: the
  first connection to a SQLite file rebuilds its WAL index, as a process starting cold does;
* W5 runs real writer processes (this script with ``--worker``) released together through a
  pipe; their rate is all adds over the span from the first start to the last finish.

Rows (ids as printed and in ``--json``):

=============== ===================================================================================
RAW             raw driver loop, INSERT + COMMIT per message into a table shaped like ``events``,
                same pragmas (WAL, synchronous NORMAL): the physical limit of a durable add
FLOOR           the least Python a durable add with chatledger's guarantees needs, written out by
                hand: the message's JSON, a salt, the payload commitment, the window record, the
                chain hash and the head seal, then one INSERT into the real schema (with its
                head-seal trigger), no checks or objects (SQLite only): W1 can come no closer
                to RAW than FLOOR does
W1              ``MessageWindowChatMemory(max_messages=20).add(m)`` on one conversation, one
                200-character message per call, committed on return
KW              W1 on a keyed store (``chain_key=`` 32 bytes: format 3 records, HMAC-SHA256 chain)
W2              1,000 conversations x 20 messages, round-robin, one memory object each
TW              W1 with ``TokenWindowChatMemory(2000, OpenAiTokenCountEstimator("gpt-4o-mini"))``
BUILD           history building: ``memory.add(list_of_1000)`` batches (one transaction each)
W3@N            ``messages()`` of a warm memory whose conversation has N events
W4@N            cold open: new store object, new memory object, first ``messages()``
TT.as_of        ``as_of(seq=...)`` at random seqs of a ``--tt-size`` history
TT.what_if      ``what_if(MessageWindowPolicy(50))`` at the head of that history (the newest
                events, see projections/counterfactual.py), with its ratio to RAW.read
RAW.read        the bare sqlite3 driver reading every row of that history (``SELECT *``, fetchmany):
                the floor under a replay that must read them all (SQLite only)
LD.digest       ``store.digest()`` right after one more add (incremental; the add is untimed) on
                the history database, which holds every W3/W4/TT history (1.11 M records at the
                default sizes); the ledger rows run after the read group, which their adds
                would otherwise change
LD.digest.cold  first ``digest()`` of a new store object on that database (reads every record,
                builds the tree); one per round
LD.verify       ``store.verify(digest=d)``: every record re-read and re-hashed; one per round
LD.prove        ``store.prove(memory_id, seq)`` of a random seq of the largest history, tree built
LD.proof        the size of those proofs as JSON (``to_json()``), largest
LD.inclusion    ``verify_inclusion(proof, d)`` of such a proof, no database
W5.single       one writer process, ``--w5-n`` adds (the reference)
W5.same         two writer processes, one conversation: total adds/s, errors, lost adds
W5.separate     two writer processes, one conversation each
PEER.lc.*       LangChain ``SQLChatMessageHistory``: ``add_message`` rate; ``.messages`` at N
PEER.lg.*       LangGraph ``SqliteSaver``: ``put`` of a checkpoint holding the 20-message window;
                ``get_tuple`` (latest) of a thread with N checkpoints
=============== ===================================================================================

All chatledger histories (W3, W4, TT, LD) live in one file (one schema for Postgres): one
conversation per size, built once per run, so 1 k and 1 M are measured side by side on the same
table. Peers run on SQLite with the same pragmas (WAL, synchronous NORMAL) as chatledger, so
every contender gives the same durability; they run only with ``--backend sqlite`` and show
"not installed" when the ``bench`` extra is missing. LangChain keeps no window: its read loads
the whole history, as an application trimming afterwards would. LangGraph is measured at the
checkpointer (one ``put`` per message), a lower bound for a graph, which writes a checkpoint per
step. The in-memory backend stops at 100 k events by default and has no RAW, LD.digest.cold or W5
rows.

Usage::

    python scripts/bench.py --quick                      # < 1 min on SQLite
    python scripts/bench.py --json bench.json            # sizes up to 1 M, about 3 min
    python scripts/bench.py --backend postgres --quick   # CHATLEDGER_TEST_PG_DSN or the local one
    python -m cProfile -o out.prof scripts/bench.py --quick --only read
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import hashlib
import importlib.metadata
import itertools
import json
import os
import pathlib
import platform
import random
import secrets
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[1]

from eventlog import (  # noqa: E402
    AiMessage,
    ChatMessage,
    InclusionProof,
    InMemoryEventStore,
    SQLiteEventStore,
    SystemMessage,
    UserMessage,
    verify_inclusion,
)
from eventlog.formats.lc4j_json import message_to_json  # noqa: E402
from eventlog.hashing import GENESIS, chain_hash_v2, head_mac  # noqa: E402
from eventlog.models import NewRecord  # noqa: E402
from eventlog.recorders.sqlite_sql import INSERT as _STORE_INSERT  # noqa: E402
from eventlog.store import EventStore  # noqa: E402
from eventlog.timetext import format_time  # noqa: E402
from projections import (  # noqa: E402
    ChatMemory,
    MessageWindowChatMemory,
    MessageWindowPolicy,
    OpenAiTokenCountEstimator,
    SummarizingChatMemory,
    TokenWindowChatMemory,
)
from projections.meta import WindowMeta  # noqa: E402

DEFAULT_DSN = "host=127.0.0.1 port=5432 dbname=test"
MAX_MESSAGES = 20
MAX_TOKENS = 2000
TEXT_LEN = 200
BATCH = 1000  # messages per history-building add (one transaction)
WHAT_IF_WINDOW = 50
CHAIN_KEY = bytes(range(32))  # KW's chain key: any 32 bytes (a real one stays outside the store)
DEFAULT_SIZES = (1_000, 10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 10_000, 100_000)
MEMORY_SIZES = (1_000, 10_000, 100_000)  # a 1 M in-memory history needs gigabytes

_T0 = time.perf_counter_ns()


def log(text: str) -> None:
    """Progress on stderr, so stdout carries only the results."""
    print(f"[{(time.perf_counter_ns() - _T0) / 1e9:7.1f} s] {text}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- workload data

_WORDS = (  # noqa: SIM905 - a sentence reads better than 59 quoted words
    "the memory window keeps recent messages while every event stays in the log so a user can "
    "ask what the assistant saw at any point and an auditor can verify the hash chain from the "
    "first message to the last one tokens budget tool call answer question summary context "
    "order invoice refund shipping account password weather meeting schedule travel"
).split()


def make_texts(count: int, seed: int = 7) -> list[str]:
    """``count`` distinct English-like texts of exactly TEXT_LEN characters."""
    rng = random.Random(seed)
    texts = []
    for i in range(count):
        words = [f"#{i}"]
        while sum(len(w) + 1 for w in words) < TEXT_LEN + 1:
            words.append(rng.choice(_WORDS))
        text = " ".join(words)[:TEXT_LEN]
        texts.append(text[:-1] + "." if text.endswith(" ") else text)
    return texts


def make_messages(texts: Sequence[str]) -> list[ChatMessage]:
    """Alternating user and AI messages, as a conversation has."""
    return [UserMessage(t) if i % 2 == 0 else AiMessage(t) for i, t in enumerate(texts)]


# ---------------------------------------------------------------------------- stores


def open_store(spec: dict[str, str], key: bytes | None = None) -> EventStore:
    """Open the store a spec names (also used by the W5 writer processes); ``key``: a keyed
    chain (HMAC-SHA256, record format 3)."""
    if spec["backend"] == "sqlite":
        return SQLiteEventStore(spec["path"], chain_key=key)
    if spec["backend"] == "postgres":
        from eventlog.postgres import PostgresEventStore

        return PostgresEventStore(spec["dsn"], schema=spec["schema"], chain_key=key)
    msg = f"open_store: backend {spec['backend']!r} cannot be opened from a spec"
    raise ValueError(msg)


class Backend:
    """Names and opens the benchmark's databases: files in the work directory for SQLite,
    schemas (dropped afterwards) for Postgres, shared objects for the in-memory store."""

    def __init__(self, name: str, workdir: pathlib.Path, dsn: str) -> None:
        self.name = name
        self.workdir = workdir
        self.dsn = dsn
        self.prefix = f"bench_{os.getpid()}_{secrets.token_hex(3)}"
        self.schemas: set[str] = set()
        self._memory: dict[str, InMemoryEventStore] = {}
        self.histories_built = False  # the "hist" database (W3, W4, TT, LD) holds its histories

    def spec(self, db: str) -> dict[str, str]:
        if self.name == "sqlite":
            return {"backend": "sqlite", "path": str(self.workdir / f"{db}.db")}
        if self.name == "postgres":
            schema = f"{self.prefix}_{db}"
            self.schemas.add(schema)
            return {"backend": "postgres", "dsn": self.dsn, "schema": schema}
        return {"backend": "memory", "db": db}

    def open(self, db: str, key: bytes | None = None) -> EventStore:
        if self.name == "memory":
            # A new InMemoryEventStore would be empty: "reopening" means the same object.
            if db not in self._memory:
                self._memory[db] = InMemoryEventStore(chain_key=key)
            return self._memory[db]
        return open_store(self.spec(db), key)

    def close(self, store: EventStore) -> None:
        if self.name != "memory":
            store.close()

    def cleanup(self) -> None:
        if self.name == "postgres" and self.schemas:
            import psycopg
            from psycopg import sql

            with psycopg.connect(self.dsn, autocommit=True) as conn:
                for schema in sorted(self.schemas):
                    conn.execute(
                        sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                    )


def postgres_problem(dsn: str) -> str | None:
    """Why the Postgres backend cannot run here, or None."""
    try:
        import psycopg

        import eventlog.postgres  # noqa: F401
    except Exception as e:  # an ImportError, or a module being written right now
        return (
            f"eventlog.postgres is not importable ({type(e).__name__}: {e}); "
            "install the postgres extra: pip install -e '.[postgres]'"
        )
    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as e:
        return f"PostgreSQL at {dsn!r} is not reachable: {e}"
    return None


# ---------------------------------------------------------------------------- measuring

Run = Callable[[int], list[int]]
"""Does ``count`` operations and returns each one's duration in ns."""


@dataclass
class Contender:
    """One thing to time in a group of alternating contenders."""

    id: str
    run: Run
    count: int | None = None  # operations per round; None: calibrate to about --round-s
    warmup: int | None = None  # operations before timing; default count // 5 (or calibration)
    cap: int = 500  # most operations per round when calibrating


@dataclass
class Measured:
    """Per-round results of one contender (keys are round numbers, for paired ratios)."""

    rate: dict[int, float] = field(default_factory=dict)  # ops/s over the whole round
    p50: dict[int, float] = field(default_factory=dict)  # median ns per op in the round
    ops_ns: list[int] = field(default_factory=list)
    count: int = 0
    error: str | None = None


def split(count: int, parts: int) -> list[int]:
    """``count`` operations as ``parts`` near-equal slices."""
    base, extra = divmod(count, parts)
    return [base + (1 if k < extra else 0) for k in range(parts)]


def run_contest(
    title: str,
    contenders: Sequence[Contender],
    rounds: int,
    round_s: float,
    *,
    slices: int,
    settle: Callable[[], None] | None = None,
) -> dict[str, Measured]:
    """Warm every contender up, then time them in ``rounds`` rounds.

    A round gives each contender its ``count`` operations in up to ``slices`` slices, and the
    contenders take turns slice by slice (the order rotates every slice), so that two
    contenders' figures for one round come from the same few seconds: on a shared machine the
    speed of the disk and the CPU drifts more between seconds than between contenders.
    ``settle`` runs (untimed) before every slice.
    """
    results = {c.id: Measured() for c in contenders}
    live: list[Contender] = []
    for c in contenders:
        try:
            if c.count is None:
                sample = c.run(1) + c.run(2)  # the first call also warms caches up
                per_op = max(statistics.median(sample), 1.0)
                c.count = int(min(max(round_s * 1e9 / per_op, 1), c.cap))
                c.run(c.warmup if c.warmup is not None else min(c.count, 20))
            else:
                c.run(c.warmup if c.warmup is not None else max(1, c.count // 5))
            live.append(c)
        except Exception as e:
            results[c.id].error = f"{type(e).__name__}: {e}"
            log(f"{title}: {c.id} failed in warm-up: {results[c.id].error}")
    plans = {c.id: split(c.count, min(slices, c.count)) + [0] * slices for c in live if c.count}
    turn = 0
    for r in range(rounds):
        log(f"{title}: round {r + 1}/{rounds}")
        gc.collect()
        elapsed = dict.fromkeys(plans, 0)
        ops: dict[str, list[int]] = {c.id: [] for c in live}
        for s in range(slices):
            shift = turn % len(live)
            turn += 1
            for c in live[shift:] + live[:shift]:
                count = plans[c.id][s]
                if results[c.id].error is not None or not count:
                    continue
                if settle is not None:
                    settle()
                try:
                    start = time.perf_counter_ns()
                    ops[c.id] += c.run(count)
                    elapsed[c.id] += time.perf_counter_ns() - start
                except Exception as e:
                    results[c.id].error = f"{type(e).__name__}: {e}"
                    log(f"{title}: {c.id} failed: {results[c.id].error}")
        for c in live:
            m = results[c.id]
            if m.error is None and ops[c.id]:
                m.count = len(ops[c.id])
                m.rate[r] = m.count * 1e9 / max(elapsed[c.id], 1)
                m.p50[r] = statistics.median(ops[c.id])
                m.ops_ns.extend(ops[c.id])
    return results


def paired_ratio(a: dict[int, float], b: dict[int, float]) -> float | None:
    """Median over the rounds both ran of ``a[r] / b[r]``."""
    both = ratios(a, b)
    return statistics.median(both) if both else None


def ratios(a: dict[int, float], b: dict[int, float]) -> list[float]:
    """``a[r] / b[r]`` for every round both ran."""
    return [a[r] / b[r] for r in a if b.get(r)]


def spread(a: dict[int, float], b: dict[int, float]) -> str:
    """The per-round ratios' range, to show how much the machine's noise moved them."""
    both = ratios(a, b)
    return f"rounds {num(min(both))}-{num(max(both))} x" if len(both) > 1 else ""


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed_loop(op: Callable[[int], object]) -> Run:
    """A Run calling ``op(i)`` for a running counter i, timing each call."""
    state = {"i": 0}
    clock = time.perf_counter_ns

    def run(count: int) -> list[int]:
        ops = []
        first = state["i"]
        for i in range(first, first + count):
            t = clock()
            op(i)
            ops.append(clock() - t)
        state["i"] = first + count
        return ops

    return run


# ---------------------------------------------------------------------------- rows


@dataclass
class Row:
    """One line of the results table (and of the --json file)."""

    id: str
    workload: str
    value: float | None = None
    unit: str = ""
    ratio: float | None = None
    vs: str = ""
    detail: str = ""
    status: str = "ok"  # ok | failed: ... | not installed: ... | n/a: ... | skipped: ...
    group: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class Results:
    def __init__(self) -> None:
        self.rows: list[Row] = []

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row

    def get(self, row_id: str) -> Row | None:
        return next((r for r in self.rows if r.id == row_id and r.status == "ok"), None)


def rate_row(
    row: Row, measured: dict[str, Measured], ref: str | None = None, ops: str = "adds"
) -> Row:
    m = measured.get(row.id)
    if m is None or m.error is not None or not m.rate:
        row.status = f"failed: {m.error if m is not None else 'not measured'}"
        return row
    row.value = statistics.median(m.rate.values())
    row.unit = f"{ops}/s"
    if ref is not None and ref in measured and measured[ref].rate:
        row.ratio = paired_ratio(m.rate, measured[ref].rate)
        row.vs = ref
    row.detail = (
        f"p50 {percentile(m.ops_ns, 0.5) / 1e3:.0f} µs, p99 {percentile(m.ops_ns, 0.99) / 1e3:.0f}"
        f" µs per op; {m.count} ops x {len(m.rate)} rounds"
    )
    if row.vs and spread(m.rate, measured[row.vs].rate):
        row.detail += f"; {spread(m.rate, measured[row.vs].rate)}"
    row.extra = {
        "rounds_ops_per_s": [round(v, 1) for v in m.rate.values()],
        "p50_us": percentile(m.ops_ns, 0.5) / 1e3,
        "p99_us": percentile(m.ops_ns, 0.99) / 1e3,
        "ops_per_round": m.count,
    }
    if row.vs:
        # The same comparison on the median op, which I/O stalls (WAL checkpoints, the
        # neighbours' fsyncs) barely touch: closer to the CPU cost of each contender.
        p50_ratio = paired_ratio(measured[row.vs].p50, m.p50)
        if p50_ratio is not None:
            row.detail += f"; median op {num(p50_ratio)} x {row.vs}'s"
            row.extra["p50_ratio"] = p50_ratio
    return row


def latency_row(row: Row, measured: dict[str, Measured], unit: str, ref: str | None = None) -> Row:
    m = measured.get(row.id)
    if m is None or m.error is not None or not m.ops_ns:
        row.status = f"failed: {m.error if m is not None else 'not measured'}"
        return row
    scale = {"µs": 1e3, "ms": 1e6, "s": 1e9}[unit]
    row.value = statistics.median(m.ops_ns) / scale
    row.unit = unit
    if ref is not None and ref != row.id and ref in measured and measured[ref].p50:
        row.ratio = paired_ratio(m.p50, measured[ref].p50)
        row.vs = ref
    rounds = [v / scale for v in m.p50.values()]
    row.detail = (
        f"p90 {percentile(m.ops_ns, 0.9) / scale:.3g} {unit}; round medians "
        f"{min(rounds):.3g}-{max(rounds):.3g}; {len(m.ops_ns)} calls"
    )
    row.extra = {
        "round_medians": rounds,
        "p90": percentile(m.ops_ns, 0.9) / scale,
        "calls": len(m.ops_ns),
    }
    return row


# ---------------------------------------------------------------------------- raw loops

# The same table as SQLiteEventStore's (eventlog/recorders/sqlite_schema.py): the raw loop stores
# the same row shape, so the ratio measures chatledger's own overhead, not a difference in what is
# stored.
_RAW_DDL = """
CREATE TABLE IF NOT EXISTS events (
    position INTEGER PRIMARY KEY,
    stream_id TEXT NOT NULL, seq INTEGER NOT NULL, recorded_at TEXT NOT NULL,
    kind TEXT NOT NULL, schema_version INTEGER NOT NULL, payload TEXT NOT NULL,
    meta TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL,
    UNIQUE (stream_id, seq)
)"""
_RAW_INSERT = (
    "INSERT INTO events (stream_id, seq, recorded_at, kind, schema_version, payload, meta, "
    "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_FAKE_HASH = "0" * 64
_FAKE_META = WindowMeta([[1000001, 1000020]], 20).encode()  # as long as a real window's meta
_FAKE_TIME = "2025-01-01T00:00:00.000000Z"


def _raw_row(payloads: Sequence[str], i: int) -> tuple[object, ...]:
    """The i-th raw row: a real payload, fixed fields as long as chatledger's."""
    payload = payloads[i % len(payloads)]
    return (
        "raw",
        i + 1,
        _FAKE_TIME,
        "message_added",
        1,
        payload,
        _FAKE_META,
        _FAKE_HASH,
        _FAKE_HASH,
    )


def raw_sqlite(path: pathlib.Path, payloads: Sequence[str]) -> tuple[Run, Callable[[], None]]:
    """The physical limit: sqlite3, one INSERT + COMMIT per message, same pragmas."""
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(_RAW_DDL)
    conn.commit()

    def op(i: int) -> None:
        conn.execute(_RAW_INSERT, _raw_row(payloads, i))
        conn.commit()

    return timed_loop(op), conn.close


def floor_sqlite(
    path: pathlib.Path, messages: Sequence[ChatMessage]
) -> tuple[Run, Callable[[], bool]]:
    """FLOOR: a durable add's unavoidable work, by hand, on the store's own schema.

    What any implementation keeping chatledger's guarantees must do per add - serialize the
    message, salt and commit to it, write the window record, chain-hash the record and seal
    the head - with no validation, no objects and no window bookkeeping, then the store's own
    INSERT (its head-seal trigger included) as one autocommit statement. The gap between RAW
    and FLOOR is the guarantees' price; the gap between FLOOR and W1 is chatledger's code.
    """
    SQLiteEventStore(path).close()  # the real schema: events, heads, the head-seal trigger
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA secure_delete = ON")  # as the store sets it
    nmsg = len(messages)
    seq, prev = 0, GENESIS  # the head: FLOOR keeps it, as the store's head cache does

    def op(i: int) -> None:
        nonlocal seq, prev
        seq += 1
        payload = message_to_json(messages[i % nmsg])
        salt = os.urandom(16)
        commitment = hashlib.sha256(salt + payload.encode()).hexdigest()
        now = format_time(dt.datetime.now(dt.UTC))
        meta = WindowMeta([[max(1, seq - MAX_MESSAGES + 1), seq]], MAX_MESSAGES).encode()
        digest = chain_hash_v2(prev, "floor", seq, "message_added", 1, now, commitment, meta)
        seal = head_mac(None, "floor", seq, digest)
        conn.execute(
            _STORE_INSERT,
            (
                "floor",
                seq,
                now,
                "message_added",
                1,
                payload,
                meta,
                prev,
                digest,
                salt.hex(),
                commitment,
                2,
                seal,
            ),
        )
        prev = digest

    def close() -> bool:
        """Close; True when chatledger reads back what FLOOR wrote: ``verify()`` passes and a
        memory of that id holds a full window (so FLOOR did all of an add's work)."""
        conn.close()
        with SQLiteEventStore(path) as store:
            memory = MessageWindowChatMemory("floor", MAX_MESSAGES, store)
            full = len(memory.messages()) == min(seq, MAX_MESSAGES)
            return store.verify().ok and full and seq > 0

    return timed_loop(op), close


def raw_history_read(
    be: Backend, store: EventStore, memory_id: str
) -> tuple[Run, Callable[[], None]] | None:
    """A Run reading every row of one history with the bare sqlite3 driver on a connection
    of its own (SQLite only; None elsewhere)."""
    if be.name != "sqlite":
        return None
    first = store.read(memory_id, limit=1)
    if not first:
        return None
    conn = sqlite3.connect(be.spec("hist")["path"], check_same_thread=False)
    sql = "SELECT * FROM events WHERE stream_id = ? ORDER BY seq"
    params = (first[0].stream_id,)
    size = store.read(memory_id, desc=True, limit=1)[0].seq

    def read(_i: int) -> None:
        # In pages that are dropped as it goes, as what_if reads: a list of every row would
        # make the collector walk the harness's whole heap, a cost that is not the driver's.
        cursor = conn.execute(sql, params)
        count = 0
        while page := cursor.fetchmany(10_000):
            count += len(page)
        if count != size:
            msg = f"raw read of {memory_id}: {count} rows, expected {size}"
            raise AssertionError(msg)

    return timed_loop(read), conn.close


def raw_postgres(dsn: str, schema: str, payloads: Sequence[str]) -> tuple[Run, Callable[[], None]]:
    """The physical limit on Postgres: psycopg, one INSERT + COMMIT per message."""
    import psycopg
    from psycopg import sql

    conn = psycopg.connect(dsn)
    ident = sql.Identifier(schema)
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
    conn.execute(
        sql.SQL(
            "CREATE TABLE {}.events (position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
            'stream_id text COLLATE "C" NOT NULL, seq bigint NOT NULL, recorded_at text NOT NULL,'
            " kind text NOT NULL, schema_version integer NOT NULL, payload text NOT NULL, "
            "meta text NOT NULL, prev_hash text NOT NULL, hash text NOT NULL, "
            "UNIQUE (stream_id, seq))"
        ).format(ident)
    )
    conn.commit()
    insert = (
        sql.SQL(_RAW_INSERT.replace("?", "%s").replace("INTO events", "INTO {}.events"))
        .format(ident)
        .as_bytes(conn)
    )

    def op(i: int) -> None:
        conn.execute(insert, _raw_row(payloads, i))
        conn.commit()

    return timed_loop(op), conn.close


# ---------------------------------------------------------------------------- peers


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    # langchain-community announces its sunset with a DeprecationWarning on import.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def peer_versions() -> dict[str, str]:
    out = {}
    for dist in (
        "langchain-community",
        "langchain-core",
        "langgraph-checkpoint-sqlite",
        "sqlalchemy",
        "sqlite-utils",
        "tiktoken",
        "psycopg",
        "pydantic",
    ):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[dist] = importlib.metadata.version(dist)
    return out


def langchain_problem() -> str | None:
    try:
        with _quiet():
            from langchain_community.chat_message_histories import (  # noqa: F401
                SQLChatMessageHistory,
            )
    except Exception as e:
        return f"not installed: {type(e).__name__}: {e}"
    return None


def langgraph_problem() -> str | None:
    try:
        with _quiet():
            from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: F401
    except Exception as e:
        return f"not installed: {type(e).__name__}: {e}"
    return None


def lc_messages(texts: Sequence[str]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    return [HumanMessage(t) if i % 2 == 0 else AIMessage(t) for i, t in enumerate(texts)]


class LangChainPeer:
    """SQLChatMessageHistory on a SQLAlchemy engine with chatledger's pragmas."""

    def __init__(self, path: pathlib.Path, texts: Sequence[str]) -> None:
        with _quiet():
            from langchain_community.chat_message_histories import SQLChatMessageHistory
            from sqlalchemy import create_engine, event

        self._cls = SQLChatMessageHistory
        self.engine = create_engine(f"sqlite:///{path}")

        @event.listens_for(self.engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.execute("PRAGMA journal_mode = WAL")
            dbapi_conn.execute("PRAGMA synchronous = NORMAL")

        self.messages = lc_messages(texts)

    def history(self, session: str) -> Any:
        with _quiet():
            return self._cls(session_id=session, connection=self.engine)

    def add_run(self) -> Run:
        history, msgs = self.history("w1"), self.messages
        n = len(msgs)
        return timed_loop(lambda i: history.add_message(msgs[i % n]))

    def build(self, session: str, size: int) -> None:
        history, msgs = self.history(session), self.messages
        for start in range(0, size, BATCH):
            history.add_messages(
                [msgs[i % len(msgs)] for i in range(start, min(start + BATCH, size))]
            )

    def read_run(self, session: str, size: int) -> Run:
        history = self.history(session)

        def op(_i: int) -> None:
            got = len(history.messages)
            if got != size:
                msg = f"LangChain read of {session}: {got} messages, expected {size}"
                raise AssertionError(msg)

        return timed_loop(op)

    def close(self) -> None:
        self.engine.dispose()


class LangGraphPeer:
    """SqliteSaver: each add puts a checkpoint whose ``messages`` channel holds the window of
    the last 20 messages (a trimmed MessagesState), as LangGraph's loop would."""

    def __init__(self, path: pathlib.Path, texts: Sequence[str]) -> None:
        with _quiet():
            from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
            from langgraph.checkpoint.sqlite import SqliteSaver

        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.saver: Any = SqliteSaver(self.conn)
        self.saver.setup()
        self._create, self._empty = create_checkpoint, empty_checkpoint
        self.messages = lc_messages(texts)

    def _putter(self, thread: str) -> Callable[[int], object]:
        state: dict[str, Any] = {
            "config": {"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
            "checkpoint": self._empty(),
            "window": [],
        }
        msgs, n = self.messages, len(self.messages)

        def put(i: int) -> None:
            window = [*state["window"][-(MAX_MESSAGES - 1) :], msgs[i % n]]
            checkpoint = self._create(state["checkpoint"], None, i + 1)
            checkpoint["channel_values"] = {"messages": window}
            checkpoint["channel_versions"] = {"messages": i + 1}
            metadata = {"source": "loop", "step": i + 1, "parents": {}}
            state["config"] = self.saver.put(
                state["config"], checkpoint, metadata, {"messages": i + 1}
            )
            state["checkpoint"], state["window"] = checkpoint, window

        return put

    def put_run(self) -> Run:
        return timed_loop(self._putter("w1"))

    def build(self, thread: str, size: int) -> None:
        put = self._putter(thread)
        for i in range(size):
            put(i)

    def read_run(self, thread: str) -> Run:
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}

        def op(_i: int) -> None:
            found = self.saver.get_tuple(config)
            if found is None or len(found.checkpoint["channel_values"]["messages"]) != MAX_MESSAGES:
                msg = f"LangGraph read of {thread}: no 20-message window"
                raise AssertionError(msg)

        return timed_loop(op)

    def close(self) -> None:
        self.conn.close()


# ---------------------------------------------------------------------------- W5 workers


def worker_main(spec_json: str) -> int:
    """A W5 writer process: open, warm up, say ready, wait for go, add, report JSON."""
    spec = json.loads(spec_json)
    store = open_store(spec["store"])
    messages = make_messages(make_texts(64, seed=spec["seed"]))
    warm = MessageWindowChatMemory(f"{spec['conv']}-warm-{os.getpid()}", MAX_MESSAGES, store)
    for m in messages[:20]:
        warm.add(m)
    memory = MessageWindowChatMemory(spec["conv"], MAX_MESSAGES, store)
    memory.messages()
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 2
    errors: list[str] = []
    ops: list[int] = []
    ok = 0
    clock = time.perf_counter_ns  # CLOCK_MONOTONIC on Linux: comparable across processes
    start = clock()
    for i in range(spec["n"]):
        t = clock()
        try:
            memory.add(messages[i % len(messages)])
            ok += 1
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")
        ops.append(clock() - t)
    end = clock()
    store.close()
    result = {
        "start": start,
        "end": end,
        "ok": ok,
        "errors": len(errors),
        "first_errors": errors[:3],
        "p50_ns": statistics.median(ops) if ops else 0,
        "p99_ns": percentile(ops, 0.99),
    }
    print(json.dumps(result), flush=True)
    return 0


def run_writers(spec: dict[str, str], convs: Sequence[str], n: int) -> dict[str, Any]:
    """Start one writer process per conversation id, release them together, collect."""
    procs = []
    for k, conv in enumerate(convs):
        arg = json.dumps({"store": spec, "conv": conv, "n": n, "seed": k})
        procs.append(
            subprocess.Popen(
                [sys.executable, str(pathlib.Path(__file__).resolve()), "--worker", arg],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline().strip()
            if line != "ready":
                _, err = p.communicate(timeout=60)
                msg = f"writer did not start: {line!r} {err[-800:]}"
                raise RuntimeError(msg)
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        reports = []
        for p in procs:
            out, err = p.communicate(timeout=900)
            if p.returncode != 0:
                msg = f"writer exited with {p.returncode}: {err[-800:]}"
                raise RuntimeError(msg)
            reports.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    span = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    ok = sum(r["ok"] for r in reports)
    return {
        "rate": ok * 1e9 / max(span, 1),
        "ok": ok,
        "errors": sum(r["errors"] for r in reports),
        "first_errors": [e for r in reports for e in r["first_errors"]][:3],
        "p50_us": statistics.median(r["p50_ns"] for r in reports) / 1e3,
        "p99_us": max(r["p99_ns"] for r in reports) / 1e3,
    }


# ---------------------------------------------------------------------------- the groups


@dataclass
class Config:
    backend: str
    n: int
    sizes: list[int]
    tt_size: int
    peer_sizes: list[int]
    conversations: int
    per_conversation: int
    w5_n: int
    w5_rounds: int
    repeat: int
    round_s: float
    slices: int
    settle: bool
    peers: bool
    only: set[str]
    dsn: str


def write_group(cfg: Config, be: Backend, res: Results, messages: list[ChatMessage]) -> None:
    """RAW, W1, W2, TW and the peers' add rates, alternating round by round."""
    contenders: list[Contender] = []
    closers: list[Callable[[], None]] = []
    payloads = [message_to_json(m) for m in messages]
    if be.name == "sqlite":
        run, close = raw_sqlite(be.workdir / "raw.db", payloads)
    elif be.name == "postgres":
        run, close = raw_postgres(cfg.dsn, be.spec("raw")["schema"], payloads)
    else:
        run = None
    if run is not None:
        contenders.append(Contender("RAW", run, cfg.n))
        closers.append(close)
    floor_close = None
    if be.name == "sqlite":
        floor_run, floor_close = floor_sqlite(be.workdir / "floor.db", messages)
        contenders.append(Contender("FLOOR", floor_run, cfg.n))
    nmsg = len(messages)

    w1_store = be.open("w1")
    w1 = MessageWindowChatMemory("w1", MAX_MESSAGES, w1_store)
    contenders.append(Contender("W1", timed_loop(lambda i: w1.add(messages[i % nmsg])), cfg.n))

    kw_store = be.open("kw", CHAIN_KEY)
    kw = MessageWindowChatMemory("kw", MAX_MESSAGES, kw_store)
    contenders.append(Contender("KW", timed_loop(lambda i: kw.add(messages[i % nmsg])), cfg.n))

    w2_store = be.open("w2")
    w2 = [
        MessageWindowChatMemory(f"c{k}", MAX_MESSAGES, w2_store) for k in range(cfg.conversations)
    ]
    ncv = cfg.conversations
    contenders.append(
        Contender(
            "W2",
            timed_loop(lambda i: w2[i % ncv].add(messages[(i // ncv) % nmsg])),
            ncv * cfg.per_conversation,
            warmup=ncv,  # every conversation's first add (its head lookup) before timing
        )
    )

    tw_store = be.open("tw")
    tw_problem = None
    try:
        estimator = OpenAiTokenCountEstimator("gpt-4o-mini")
        tw = TokenWindowChatMemory("tw", MAX_TOKENS, estimator, tw_store)
        contenders.append(Contender("TW", timed_loop(lambda i: tw.add(messages[i % nmsg])), cfg.n))
    except Exception as e:
        tw_problem = f"failed: {type(e).__name__}: {e}"

    lc_status = lg_status = None
    if cfg.peers and be.name == "sqlite":
        texts = [str(getattr(m, "text", "")) for m in messages]
        lc_status = langchain_problem()
        if lc_status is None:
            lc = LangChainPeer(be.workdir / "lc_w1.db", texts)
            contenders.append(Contender("PEER.lc.add", lc.add_run(), cfg.n))
            closers.append(lc.close)
        lg_status = langgraph_problem()
        if lg_status is None:
            lg = LangGraphPeer(be.workdir / "lg_w1.db", texts)
            contenders.append(Contender("PEER.lg.put", lg.put_run(), cfg.n))
            closers.append(lg.close)

    # os.sync before each slice: otherwise the previous contender's dirty pages are written back
    # (and its WAL checkpoints fsync'ed) during this one's time, which charges heavy writers'
    # I/O to whoever runs after them.
    settle = os.sync if cfg.settle and hasattr(os, "sync") else None
    measured = run_contest(
        "write", contenders, cfg.repeat, cfg.round_s, slices=cfg.slices, settle=settle
    )

    raw = Row("RAW", "raw driver loop: INSERT + COMMIT per message (physical limit)", group="write")
    if run is None:
        raw.status = "n/a: no driver under the in-memory store"
        res.add(raw)
    else:
        res.add(rate_row(raw, measured, ops="inserts"))
    floor_row = Row(
        "FLOOR", "the least Python for W1's record (hand-written; see the docstring)", group="write"
    )
    if floor_close is not None:
        rate_row(floor_row, measured, "RAW")
        floor_row.extra["verified"] = floor_close()
        floor_row.detail += "; verify() " + ("OK" if floor_row.extra["verified"] else "FAILED")
        res.add(floor_row)
    else:
        floor_row.status = "n/a: written for the SQLite schema only"
        res.add(floor_row)
    res.add(
        rate_row(
            Row("W1", "durable add, 1 conversation, MessageWindow(20)", group="write"),
            measured,
            "RAW" if run is not None else None,
        )
    )
    res.add(
        rate_row(
            Row(
                "KW", "W1 on a keyed store (chain_key= 32 bytes: HMAC-SHA256 chain)", group="write"
            ),
            measured,
            "W1",
        )
    )
    w2_row = rate_row(
        Row("W2", f"{ncv} conversations x {cfg.per_conversation}, round-robin", group="write"),
        measured,
        "W1",
    )
    res.add(w2_row)
    tw_row = Row("TW", f"durable add, TokenWindow({MAX_TOKENS}, gpt-4o-mini)", group="write")
    if tw_problem is not None:
        tw_row.status = tw_problem
        res.add(tw_row)
    else:
        res.add(rate_row(tw_row, measured, "W1"))
    add_peer_rows(cfg, be, res, measured, problems=(lc_status, lg_status))

    for store in (w1_store, kw_store, w2_store, tw_store):
        be.close(store)
    for close in closers:
        close()


def peer_problem(cfg: Config, be: Backend, problem: str | None) -> str | None:
    """Why a peer's row has no figure (None: it was measured)."""
    if not cfg.peers:
        return "skipped: --no-peers"
    if be.name != "sqlite":
        return "n/a: peers run with --backend sqlite"
    return problem


def add_peer_rows(
    cfg: Config,
    be: Backend,
    res: Results,
    measured: dict[str, Measured],
    *,
    problems: tuple[str | None, str | None],
) -> None:
    rows = [
        Row("PEER.lc.add", "LangChain SQLChatMessageHistory.add_message", group="peers"),
        Row("PEER.lg.put", "LangGraph SqliteSaver.put (20-message window)", group="peers"),
    ]
    for row, problem in zip(rows, problems, strict=True):
        row.status = peer_problem(cfg, be, problem) or "ok"
        res.add(rate_row(row, measured, "W1") if row.status == "ok" else row)


def build_histories(cfg: Config, be: Backend, res: Results, messages: list[ChatMessage]) -> None:
    """One conversation per size in one database, built with the memory's own batch add."""
    store = be.open("hist")
    nmsg = len(messages)
    per_size: dict[str, float] = {}
    total = 0
    start_all = time.perf_counter_ns()
    for size in sorted({*cfg.sizes, cfg.tt_size}):
        log(f"build: history of {size:,} events")
        memory = MessageWindowChatMemory(f"h{size}", MAX_MESSAGES, store)
        start = time.perf_counter_ns()
        for first in range(0, size, BATCH):
            memory.add([messages[i % nmsg] for i in range(first, min(first + BATCH, size))])
        per_size[str(size)] = (time.perf_counter_ns() - start) / 1e9
        total += size
        head = store.head(f"h{size}")
        if head is None or head.seq != size:
            msg = f"build of h{size}: head is {head}, expected seq {size}"
            raise RuntimeError(msg)
    seconds = (time.perf_counter_ns() - start_all) / 1e9
    be.close(store)
    be.histories_built = True
    biggest = max(per_size, key=int)
    res.add(
        Row(
            "BUILD",
            f"history build, memory.add(list of {BATCH}) batches",
            total / seconds,
            "events/s",
            detail=f"{total:,} events in {seconds:.1f} s ({int(biggest):,}: "
            f"{per_size[biggest]:.1f} s)",
            group="read",
            extra={"seconds_per_size": per_size, "events": total, "seconds": seconds},
        )
    )


def read_group(cfg: Config, be: Backend, res: Results, messages: list[ChatMessage]) -> None:
    """W3, W4, TT and the peers' reads, alternating round by round."""
    if not be.histories_built:
        build_histories(cfg, be, res, messages)
    sizes = sorted({*cfg.sizes, cfg.tt_size})
    store = be.open("hist")
    contenders: list[Contender] = []
    warm: dict[int, MessageWindowChatMemory] = {}
    for size in sizes:
        memory = MessageWindowChatMemory(f"h{size}", MAX_MESSAGES, store)
        if len(memory.messages()) != min(size, MAX_MESSAGES):
            msg = f"W3@{size}: the window of h{size} does not hold {MAX_MESSAGES} messages"
            raise RuntimeError(msg)
        warm[size] = memory
        contenders.append(Contender(f"W3@{size}", timed_loop(reader(memory))))

    rng = random.Random(11)
    tt_memory = warm[cfg.tt_size]
    seqs = [rng.randint(1, cfg.tt_size) for _ in range(1000)]
    contenders.append(
        Contender("TT.as_of", timed_loop(lambda i: tt_memory.as_of(seq=seqs[i % len(seqs)])))
    )

    def what_if(_i: int) -> None:
        view = tt_memory.what_if(MessageWindowPolicy(WHAT_IF_WINDOW))
        if len(view) != min(WHAT_IF_WINDOW, cfg.tt_size):
            msg = f"what_if returned {len(view)} messages, expected {WHAT_IF_WINDOW}"
            raise AssertionError(msg)

    contenders.append(Contender("TT.what_if", timed_loop(what_if), count=1, warmup=1))
    raw_read = raw_history_read(be, store, f"h{cfg.tt_size}")
    if raw_read is not None:
        # What what_if reads, read by the bare driver: the floor under any replay of it.
        contenders.append(Contender("RAW.read", raw_read[0], count=1, warmup=1))

    lc_status = lg_status = None
    closers: list[Callable[[], None]] = [] if raw_read is None else [raw_read[1]]
    peer_sizes = cfg.peer_sizes if cfg.peers and be.name == "sqlite" else []
    if peer_sizes:
        texts = [str(getattr(m, "text", "")) for m in messages]
        lc_status = langchain_problem()
        if lc_status is None:
            lc = LangChainPeer(be.workdir / "lc_hist.db", texts)
            closers.append(lc.close)
            for size in peer_sizes:
                log(f"build: LangChain history of {size:,} messages")
                lc.build(f"r{size}", size)
                contenders.append(
                    Contender(f"PEER.lc.read@{size}", lc.read_run(f"r{size}", size), cap=100)
                )
        lg_status = langgraph_problem()
        if lg_status is None:
            lg = LangGraphPeer(be.workdir / "lg_hist.db", texts)
            closers.append(lg.close)
            for size in peer_sizes:
                log(f"build: LangGraph thread of {size:,} checkpoints")
                lg.build(f"r{size}", size)
                contenders.append(Contender(f"PEER.lg.read@{size}", lg.read_run(f"r{size}")))

    measured = run_contest("read", contenders, cfg.repeat, cfg.round_s, slices=cfg.slices)
    be.close(store)
    # Cold opens get their own contest, run once nothing in this process has the file open:
    # the first connection to a SQLite file sets its WAL index up again, which is what a
    # process starting cold pays (about twice the cost of opening beside another connection).
    cold = [Contender(f"W4@{size}", cold_open_run(be, size), cap=100) for size in sizes]
    measured.update(run_contest("cold", cold, cfg.repeat, cfg.round_s, slices=cfg.slices))

    base = sizes[0]
    for size in sizes:
        res.add(
            latency_row(
                Row(f"W3@{size}", f"messages(), warm memory, {size:,} events", group="read"),
                measured,
                "µs",
                f"W3@{base}",
            )
        )
    for size in sizes:
        what = "same store object" if be.name == "memory" else "new store, nothing open"
        res.add(
            latency_row(
                Row(
                    f"W4@{size}",
                    f"cold open ({what}, new memory, messages()), {size:,} events",
                    group="read",
                ),
                measured,
                "ms",
                f"W4@{base}",
            )
        )
    tt_row = latency_row(
        Row("TT.as_of", f"as_of(seq=random) in a {cfg.tt_size:,}-event history", group="read"),
        measured,
        "µs",
    )
    tt_row.extra["size"] = cfg.tt_size
    res.add(tt_row)
    raw_row = Row(
        "RAW.read",
        f"raw driver: SELECT every row of the {cfg.tt_size:,}-event history, fetchmany "
        "(10,000-row pages; no objects, no checks)",
        group="read",
    )
    if raw_read is None:
        raw_row.status = "n/a: SQLite only"
    res.add(raw_row if raw_read is None else latency_row(raw_row, measured, "ms"))
    res.add(
        latency_row(
            Row(
                "TT.what_if",
                f"what_if(MessageWindowPolicy({WHAT_IF_WINDOW})) at the "
                f"head of {cfg.tt_size:,} events",
                group="read",
            ),
            measured,
            "ms",
            "RAW.read" if raw_read is not None else None,
        )
    )
    for size in cfg.peer_sizes:
        for peer, label, status, unit in (
            ("lc", "LangChain SQLChatMessageHistory.messages (all of them)", lc_status, "ms"),
            ("lg", "LangGraph SqliteSaver.get_tuple (latest)", lg_status, "µs"),
        ):
            row = Row(f"PEER.{peer}.read@{size}", f"{label}, {size:,} in history", group="peers")
            row.status = peer_problem(cfg, be, status) or "ok"
            if row.status == "ok":
                ref = f"W3@{size}" if size in sizes else None
                latency_row(row, measured, unit, ref)
                cold_id = f"W4@{size}"
                if row.status == "ok" and cold_id in measured and measured[cold_id].ops_ns:
                    # Different contests: a ratio of medians, not of paired rounds.
                    vs_cold = statistics.median(measured[row.id].ops_ns) / statistics.median(
                        measured[cold_id].ops_ns
                    )
                    row.detail += f"; {num(vs_cold)} x {cold_id} (cold open)"
                    row.extra["ratio_vs_cold_open"] = vs_cold
            res.add(row)
    for close in closers:
        close()


def ledger_group(cfg: Config, be: Backend, res: Results, messages: list[ChatMessage]) -> None:
    """LD: digests and inclusion proofs of the history database (every W3/W4/TT history in one
    log), after the read group so that its appends change nothing the reads measured."""
    if not be.histories_built:
        build_histories(cfg, be, res, messages)
    largest = max({*cfg.sizes, cfg.tt_size})
    target = f"h{largest}"
    store = be.open("hist")
    log("ledger: first digest of the history database (builds the tree)")
    start = time.perf_counter_ns()
    d0 = store.digest()
    first_s = (time.perf_counter_ns() - start) / 1e9
    records = d0.size
    clock = time.perf_counter_ns
    nmsg = len(messages)
    tail = MessageWindowChatMemory("ld-tail", MAX_MESSAGES, store)

    def digest_after_add(i: int) -> int:
        tail.add(messages[i % nmsg])  # untimed: the digest reads the one record it adds
        t = clock()
        store.digest()
        return clock() - t

    def per_call(op: Callable[[int], int]) -> Run:
        state = {"i": 0}

        def run(count: int) -> list[int]:
            first = state["i"]
            state["i"] = first + count
            return [op(i) for i in range(first, first + count)]

        return run

    rng = random.Random(13)
    seqs = [rng.randint(1, largest) for _ in range(1000)]
    proof_bytes: list[int] = []
    path_lengths: set[int] = set()

    def prove(i: int) -> None:
        proof = store.prove(target, seqs[i % len(seqs)])
        proof_bytes.append(len(proof.to_json().encode()))
        path_lengths.add(len(proof.audit_path))

    proofs: list[InclusionProof] = [store.prove(target, seq, digest=d0) for seq in seqs[:100]]

    def check_proof(i: int) -> None:
        if not verify_inclusion(proofs[i % len(proofs)], d0):
            msg = f"verify_inclusion of {target} seq {proofs[i % len(proofs)].record.seq}: False"
            raise AssertionError(msg)

    contenders = [
        Contender("LD.digest", per_call(digest_after_add)),
        Contender("LD.prove", timed_loop(prove)),
        Contender("LD.inclusion", timed_loop(check_proof)),
    ]
    measured = run_contest("ledger", contenders, cfg.repeat, cfg.round_s, slices=cfg.slices)

    def verify(_i: int) -> int:
        t = clock()
        report = store.verify(digest=d0)
        took = clock() - t
        if not report.ok:
            msg = f"verify(digest=...) of the history database: {report.message}"
            raise AssertionError(msg)
        return took

    def cold_digest(_i: int) -> int:
        fresh = be.open("hist")  # a new store object: no tree yet
        try:
            t = clock()
            got = fresh.digest()
            took = clock() - t
        finally:
            be.close(fresh)
        if got.size < records:
            msg = f"digest of a fresh store: {got.size} records, expected >= {records}"
            raise AssertionError(msg)
        return took

    # Whole-log passes (seconds at a million records): one per round each, alternating.
    heavy = [Contender("LD.verify", per_call(verify), count=1, warmup=0)]
    if be.name != "memory":
        heavy.insert(0, Contender("LD.digest.cold", per_call(cold_digest), count=1, warmup=0))
    measured.update(run_contest("ledger-full", heavy, cfg.repeat, cfg.round_s, slices=1))
    be.close(store)

    where = f"{records:,} records (every history in one log)"
    rows = [
        latency_row(
            Row("LD.digest", f"digest() after one more add (incremental), {where}", group="ledger"),
            measured,
            "ms",
        ),
        Row(
            "LD.digest.cold",
            f"first digest() of a new store object (reads the log, builds the tree), {where}",
            group="ledger",
        ),
        latency_row(
            Row(
                "LD.verify",
                f"verify(digest=d): re-read, re-hash the whole log, {where}",
                group="ledger",
            ),
            measured,
            "s",
        ),
        latency_row(
            Row(
                "LD.prove",
                f"prove(memory_id, seq), random seq of h{largest}, tree built, {where}",
                group="ledger",
            ),
            measured,
            "ms",
        ),
        Row("LD.proof", f"inclusion proof as JSON (to_json()), {where}", group="ledger"),
        latency_row(
            Row("LD.inclusion", "verify_inclusion(proof, d), no database", group="ledger"),
            measured,
            "µs",
        ),
    ]
    cold = rows[1]
    if be.name == "memory":
        cold.status = "n/a: an in-memory store cannot be reopened"
    else:
        latency_row(cold, measured, "s")
        cold.extra["first_in_process_s"] = first_s
        if cold.status == "ok":
            cold.detail += f"; first of the run {first_s:.3g} s"
    proof = rows[4]
    if proof_bytes:
        proof.value = float(max(proof_bytes))
        proof.unit = "B"
        proof.detail = (
            f"largest of {len(proof_bytes)}; median {statistics.median(proof_bytes):,.0f} B; "
            f"audit path {'/'.join(map(str, sorted(path_lengths)))} hashes"
        )
        proof.extra = {
            "median_bytes": statistics.median(proof_bytes),
            "audit_path_lengths": sorted(path_lengths),
        }
    else:
        proof.status = "failed: no proof was made"
    for row in rows:
        row.extra["records"] = records
        res.add(row)


def reader(memory: MessageWindowChatMemory) -> Callable[[int], object]:
    return lambda _i: memory.messages()


def cold_open_run(be: Backend, size: int) -> Run:
    clock = time.perf_counter_ns

    def run(count: int) -> list[int]:
        ops = []
        for _ in range(count):
            t = clock()
            store = be.open("hist")
            memory = MessageWindowChatMemory(f"h{size}", MAX_MESSAGES, store)
            got = memory.messages()
            ops.append(clock() - t)
            be.close(store)  # closing is not part of opening
            if len(got) != min(size, MAX_MESSAGES):
                msg = f"cold open of h{size} returned {len(got)} messages"
                raise AssertionError(msg)
        return ops

    return run


def w5_group(cfg: Config, be: Backend, res: Results) -> None:
    """Writer processes on one database: 1 writer, 2 on one conversation, 2 on two."""
    ids = ("W5.single", "W5.same", "W5.separate")
    labels = {
        "W5.single": f"1 writer process x {cfg.w5_n} adds (reference)",
        "W5.same": f"2 writer processes x {cfg.w5_n} adds, same conversation",
        "W5.separate": f"2 writer processes x {cfg.w5_n} adds, one conversation each",
    }
    if be.name == "memory":
        for row_id in ids:
            res.add(
                Row(
                    row_id,
                    labels[row_id],
                    status="n/a: an in-memory store is per process",
                    group="w5",
                )
            )
        return
    spec = be.spec("w5")
    open_store(spec).close()  # create the schema once, before the writers race to
    rounds: dict[str, dict[int, dict[str, Any]]] = {row_id: {} for row_id in ids}
    failures: dict[str, str] = {}
    for r in range(cfg.w5_rounds):
        log(f"w5: round {r + 1}/{cfg.w5_rounds}")
        shift = r % len(ids)
        for row_id in ids[shift:] + ids[:shift]:
            if row_id in failures:
                continue
            convs = {
                "W5.single": [f"r{r}-single"],
                "W5.same": [f"r{r}-same", f"r{r}-same"],
                "W5.separate": [f"r{r}-sep-a", f"r{r}-sep-b"],
            }[row_id]
            try:
                report = run_writers(spec, convs, cfg.w5_n)
            except Exception as e:
                failures[row_id] = f"failed: {type(e).__name__}: {e}"
                continue
            with contextlib.closing(open_store(spec)) as store:
                stored = 0
                verified = True
                for conv in sorted(set(convs)):
                    head = store.head(conv)
                    stored += 0 if head is None else head.seq
                    verified = verified and store.verify(conv).ok
            report["lost"] = report["ok"] - stored
            report["verified"] = verified
            rounds[row_id][r] = report
    for row_id in ids:
        row = Row(row_id, labels[row_id], group="w5", unit="adds/s")
        got = rounds[row_id]
        if row_id in failures or not got:
            row.status = failures.get(row_id, "failed: not measured")
            res.add(row)
            continue
        row.value = statistics.median(g["rate"] for g in got.values())
        errors = sum(g["errors"] for g in got.values())
        lost = sum(g["lost"] for g in got.values())
        verified = all(g["verified"] for g in got.values())
        row.detail = (
            f"errors {errors}, lost {lost}, chain {'ok' if verified else 'BROKEN'}; p50 "
            f"{statistics.median(g['p50_us'] for g in got.values()):.0f} µs, p99 "
            f"{max(g['p99_us'] for g in got.values()):.0f} µs per add; {len(got)} rounds"
        )
        row.extra = {
            "errors": errors,
            "lost": lost,
            "verified": verified,
            "rounds": list(got.values()),
        }
        if row_id != "W5.single" and rounds["W5.single"]:
            mine = {r: g["rate"] for r, g in got.items()}
            single = {r: g["rate"] for r, g in rounds["W5.single"].items()}
            row.ratio = paired_ratio(mine, single)
            row.vs = "W5.single"
            row.extra["round_ratios"] = ratios(mine, single)
            if spread(mine, single):
                row.detail += f"; {spread(mine, single)}"
        res.add(row)


# ---------------------------------------------------------------------------- scale


def _child_peak_mb(argv: list[str]) -> tuple[float, float]:
    """Run a command to its end; its peak resident memory (MB) and wall time (s)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        msg = f"{' '.join(argv[-4:])}: exit {proc.returncode}: {err.strip()[-300:]}"
        raise RuntimeError(msg)
    return usage.ru_maxrss / 1024, time.perf_counter() - start  # Linux reports KiB


CACHE_TURNS = 500
CACHE_MAX_MESSAGES = 40
CACHE_MAX_TOKENS = 2_000


def prefix_hits(memory: ChatMemory, messages: list[ChatMessage], turns: int) -> tuple[float, float]:
    """Play ``turns`` turns (a user message, the messages sent to the model, the reply): the
    share of turns whose sent messages start with the previous turn's (a prompt-cache hit),
    and the mean number of messages sent."""
    sent_before: list[ChatMessage] | None = None
    hits = sizes = 0
    for turn in range(turns):
        memory.add(UserMessage(f"question {turn}: {messages[(2 * turn) % len(messages)].text}"))
        sent = memory.messages()
        sizes += len(sent)
        if sent_before is not None and sent[: len(sent_before)] == sent_before:
            hits += 1
        sent_before = sent
        memory.add(AiMessage(f"answer {turn}: {messages[(2 * turn + 1) % len(messages)].text}"))
    return 100 * hits / (turns - 1), sizes / turns


# Start-up, in fresh interpreters: what a script or a `chatledger` command pays before it
# does anything. The floor is the interpreter alone.
_STARTUP = {
    "ST.python": ("python -c pass (the floor)", "pass"),
    "ST.import": ("import eventlog, projections", "import eventlog, projections"),
    "ST.help": (
        "chatledger --help",
        "import contextlib, io\nfrom projections.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    main(['--help'])",
    ),
}


def startup_group(cfg: Config, res: Results) -> None:
    """Each start-up figure: median wall time of fresh processes, the three taking turns."""
    runs = max(11, 4 * cfg.repeat + 1)
    times: dict[str, list[float]] = {row_id: [] for row_id in _STARTUP}
    for _ in range(runs):
        for row_id, (_, code) in _STARTUP.items():
            start = time.perf_counter_ns()
            subprocess.run([sys.executable, "-c", code], check=True)
            times[row_id].append((time.perf_counter_ns() - start) / 1e6)
    floor = statistics.median(times["ST.python"])
    for row_id, (workload, _) in _STARTUP.items():
        ms = times[row_id]
        res.add(
            Row(
                row_id,
                workload,
                value=statistics.median(ms),
                unit="ms",
                ratio=None if row_id == "ST.python" else statistics.median(ms) / floor,
                vs="" if row_id == "ST.python" else "ST.python",
                detail=f"min {min(ms):.0f}, max {max(ms):.0f} ms; {runs} fresh processes",
                group="startup",
            )
        )


def cache_group(cfg: Config, be: Backend, res: Results, messages: list[ChatMessage]) -> None:
    """[windows] prompt-cache friendliness on a 500-turn conversation: the share of turns whose
    sent messages extend the previous turn's, LangChain4j's sliding window against chunked
    eviction (``evict_to``) at the same maximum size, for message and token windows."""
    store = be.open("cache")
    estimator = OpenAiTokenCountEstimator("gpt-4o-mini")
    contenders: list[tuple[str, str, Callable[[str], ChatMemory]]] = [
        ("CA.msg", f"sliding window, {CACHE_MAX_MESSAGES} messages (LangChain4j)", lambda i: (
            MessageWindowChatMemory(i, max_messages=CACHE_MAX_MESSAGES, store=store))),
        ("CA.msg70", "chunked, evict_to=0.7", lambda i: MessageWindowChatMemory(
            i, max_messages=CACHE_MAX_MESSAGES, store=store, evict_to=0.7)),
        ("CA.msg50", "chunked, evict_to=0.5", lambda i: MessageWindowChatMemory(
            i, max_messages=CACHE_MAX_MESSAGES, store=store, evict_to=0.5)),
        ("CA.sum70", "summarizing, chunked, evict_to=0.7", lambda i: SummarizingChatMemory(
            i, max_messages=CACHE_MAX_MESSAGES, store=store, evict_to=0.7,
            summarizer=lambda evicted, previous: f"{previous or ''} {len(evicted)} messages")),
        ("CA.tok", f"sliding window, {CACHE_MAX_TOKENS} tokens (LangChain4j)", lambda i: (
            TokenWindowChatMemory(i, max_tokens=CACHE_MAX_TOKENS, token_count_estimator=estimator,
                                  store=store))),
        ("CA.tok70", "chunked tokens, evict_to=0.7", lambda i: TokenWindowChatMemory(
            i, max_tokens=CACHE_MAX_TOKENS, token_count_estimator=estimator, store=store,
            evict_to=0.7)),
    ]  # fmt: skip
    try:
        for row_id, workload, make in contenders:
            memory = make(row_id)
            memory.add(SystemMessage("You are a helpful assistant."))
            share, mean = prefix_hits(memory, messages, CACHE_TURNS)
            base = res.get("CA.tok" if row_id.startswith("CA.tok") else "CA.msg")
            against = "" if base is None or base.value is None else f"; sliding: {base.value:.0f} %"
            res.add(
                Row(
                    row_id,
                    f"prompt-cache hits, {CACHE_TURNS} turns, {workload}",
                    share,
                    "% turns",
                    detail=f"{mean:.1f} messages sent per turn on average{against}",
                    group="cache",
                )
            )
    finally:
        be.close(store)


def scale_group(cfg: Config, be: Backend, res: Results, messages: list[ChatMessage]) -> None:
    """[faults] scale rows: a page of history, CLI history/diff and import peak memory on the
    largest history; on PostgreSQL, 8 writers on 8 memories and on one memory vs one writer."""
    if be.name != "memory":
        if not be.histories_built:
            build_histories(cfg, be, res, messages)
        size = max(cfg.sizes)
        _history_rows(cfg, be, res, size)
    if be.name == "postgres":
        _parallel_rows(cfg, be, res)


def _history_rows(cfg: Config, be: Backend, res: Results, size: int) -> None:
    if be.name == "postgres":
        # What autovacuum does within a minute of a bulk load: without statistics the planner
        # takes a freshly filled table for a small one and sorts a whole memory for a page.
        import psycopg
        from psycopg import sql

        with psycopg.connect(be.dsn, autocommit=True) as conn:
            table = sql.Identifier(be.spec("hist")["schema"], "events")
            conn.execute(sql.SQL("ANALYZE {}").format(table))
    store = be.open("hist")
    memory = MessageWindowChatMemory(f"h{size}", MAX_MESSAGES, store)
    page_ms: list[float] = []
    for _ in range(max(cfg.repeat, 3) * 4):
        start = time.perf_counter_ns()
        first = list(itertools.islice(memory.iter_history(), 100))
        page_ms.append((time.perf_counter_ns() - start) / 1e6)
        if len(first) != 100 or first[0].seq != 1:
            msg = f"SC.page: first page of h{size} is {len(first)} events"
            raise RuntimeError(msg)
    res.add(
        Row(
            "SC.page",
            f"memory.iter_history(): first 100 events of {size:,}",
            statistics.median(page_ms),
            "ms",
            detail=f"max {max(page_ms):.2f} ms of {len(page_ms)}",
            group="scale",
            extra={"size": size},
        )
    )
    be.close(store)
    spec = be.spec("hist")
    where = (
        ["--db", spec["path"]]
        if be.name == "sqlite"
        else ["--dsn", be.dsn, "--schema", spec["schema"]]
    )
    cli = [sys.executable, "-c", "import sys; from projections.cli import main; sys.exit(main())"]
    memory_arg = ["--id-json", json.dumps(f"h{size}")]
    export = be.workdir / f"h{size}.jsonl"
    runs = {
        "SC.cli_history": (
            f"chatledger history of {size:,} events (table, piped), peak memory",
            [*cli, "history", *memory_arg, *where],
        ),
        "SC.cli_diff": (
            f"chatledger diff 1..{size:,} (table, piped), peak memory",
            [*cli, "diff", *memory_arg, "1", str(size), *where],
        ),
        "SC.export": (
            f"chatledger export of {size:,} events, peak memory",
            [*cli, "export", *memory_arg, *where, "-o", str(export), "--force"],
        ),
    }
    for row_id, (label, argv) in runs.items():
        log(f"scale: {row_id}")
        peak, wall = _child_peak_mb(argv)
        res.add(
            Row(
                row_id,
                label,
                peak,
                "MB",
                detail=f"{wall:.1f} s",
                group="scale",
                extra={"size": size},
            )
        )
    target = be.workdir / "imported.db"
    log("scale: SC.import")
    megabytes = export.stat().st_size / 1e6
    peak, wall = _child_peak_mb([*cli, "import", str(export), "--db", str(target)])
    res.add(
        Row(
            "SC.import",
            f"chatledger import of that export ({megabytes:,.0f} MB) into a new SQLite file, "
            "peak memory",
            peak,
            "MB",
            detail=f"{wall:.1f} s",
            group="scale",
            extra={"size": size, "file_mb": megabytes},
        )
    )
    target.unlink(missing_ok=True)
    export.unlink(missing_ok=True)


def _parallel_rate(store: EventStore, memories: list[str], seconds: float) -> float:
    counts = [0] * len(memories)
    payload = [NewRecord("message_added", message_to_json(UserMessage("x" * 200)), "")]
    start = time.monotonic() + 0.1
    end = start + seconds

    def write(i: int) -> None:
        while time.monotonic() < start:
            time.sleep(0.001)
        while time.monotonic() < end:
            store.append(memories[i], payload)
            counts[i] += 1

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(memories))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / seconds


def _parallel_rows(cfg: Config, be: Backend, res: Results) -> None:
    store = be.open("parallel")
    rounds = max(cfg.repeat, 3)
    one: dict[int, float] = {}
    spread8: dict[int, float] = {}
    same8: dict[int, float] = {}
    # Rounds of several --round-s: eight threads need a moment to start, and a warm-up round
    # opens the pool's connections first (the pool opens them one at a time, on demand).
    seconds = max(cfg.round_s * 8, 0.2)
    _parallel_rate(store, [f"warm-{i}" for i in range(8)], seconds)
    for r in range(rounds):
        log(f"scale: parallel writers, round {r + 1}/{rounds}")
        one[r] = _parallel_rate(store, [f"r{r}-solo"], seconds)
        spread8[r] = _parallel_rate(store, [f"r{r}-m{i}" for i in range(8)], seconds)
        same8[r] = _parallel_rate(store, [f"r{r}-shared"] * 8, seconds)
    be.close(store)
    res.add(
        Row(
            "SC.one",
            "store.append, 1 thread, 1 memory (reference)",
            statistics.median(one.values()),
            "appends/s",
            group="scale",
        )
    )
    for row_id, label, got in (
        ("SC.par8", "8 threads of one store, 8 memories", spread8),
        ("SC.same8", "8 threads of one store, 1 memory", same8),
    ):
        row = Row(row_id, label, statistics.median(got.values()), "appends/s", group="scale")
        row.ratio, row.vs = paired_ratio(got, one), "SC.one"
        row.detail = spread(got, one)
        res.add(row)


# ---------------------------------------------------------------------------- goals


def goals(res: Results, backend: str) -> list[dict[str, str]]:
    def value(row_id: str) -> float | None:
        row = res.get(row_id)
        return None if row is None else row.value

    def ratio(row_id: str) -> float | None:
        row = res.get(row_id)
        return None if row is None else row.ratio

    def quotient(a: str, b: str) -> float | None:
        va, vb = value(a), value(b)
        return None if va is None or vb is None or not vb else va / vb

    out = []

    def goal(name: str, actual: float | None, ok: Callable[[float], bool], fmt: str) -> None:
        if actual is None:
            out.append({"goal": name, "actual": "not run", "met": "n/a"})
        else:
            out.append(
                {"goal": name, "actual": fmt.format(actual), "met": "yes" if ok(actual) else "NO"}
            )

    goal("W1 >= 0.5 x raw", ratio("W1"), lambda x: x >= 0.5, "{:.2f} x")
    r3_100k = res.get("W3@100000")
    goal(
        "W3 100k <= 1.5 x 1k",
        r3_100k.ratio if r3_100k and r3_100k.vs == "W3@1000" else None,
        lambda x: x <= 1.5,
        "{:.2f} x",
    )
    r3_1m = res.get("W3@1000000")
    goal(
        "W3 1M <= 2 x 1k",
        r3_1m.ratio if r3_1m and r3_1m.vs == "W3@1000" else None,
        lambda x: x <= 2,
        "{:.2f} x",
    )
    goal("W4 100k <= 10 ms", value("W4@100000"), lambda x: x <= 10, "{:.2f} ms")
    goal("W4 1M <= 2 x 100k", quotient("W4@1000000", "W4@100000"), lambda x: x <= 2, "{:.2f} x")
    tt = res.get("TT.as_of")
    goal(
        "TT as_of <= 1 ms median at 100k",
        tt.value / 1e3 if tt and tt.value is not None and tt.extra.get("size") == 100_000 else None,
        lambda x: x <= 1,
        "{:.3f} ms",
    )
    goal("TW >= 0.7 x W1", ratio("TW"), lambda x: x >= 0.7, "{:.2f} x")

    def at_1m(row_id: str) -> float | None:
        """A ledger row's value if its log held a million records or more."""
        row = res.get(row_id)
        if row is None or row.value is None or row.extra.get("records", 0) < 1_000_000:
            return None
        return row.value

    goal("LD digest incremental <= 5 ms at 1M", at_1m("LD.digest"), lambda x: x <= 5, "{:.3f} ms")
    goal("LD verify(digest) <= 10 s at 1M", at_1m("LD.verify"), lambda x: x <= 10, "{:.2f} s")
    goal("LD prove <= 50 ms at 1M", at_1m("LD.prove"), lambda x: x <= 50, "{:.3f} ms")
    goal("LD proof JSON <= 2 KB at 1M", at_1m("LD.proof"), lambda x: x <= 2048, "{:,.0f} B")
    for case in ("same", "separate"):
        row = res.get(f"W5.{case}")
        bad = None if row is None else float(row.extra["errors"] + abs(row.extra["lost"]))
        goal(f"W5 {case}: zero errors, nothing lost", bad, lambda x: x == 0, "{:.0f} errors+lost")
        goal(
            f"W5 {case}: total >= 0.8 x single writer",
            ratio(f"W5.{case}"),
            lambda x: x >= 0.8,
            "{:.2f} x",
        )
    what_if = res.get("TT.what_if")
    goal(
        "TT what-if <= 0.3 s at 100k",
        what_if.value / 1e3
        if what_if and what_if.value is not None and "100,000" in what_if.workload
        else None,
        lambda x: x <= 0.3,
        "{:.3f} s",
    )

    def at_size(row_id: str) -> float | None:
        row = res.get(row_id)
        return None if row is None or row.extra.get("size", 0) < 1_000_000 else row.value

    goal("SC history first page <= 50 ms at 1M", at_size("SC.page"), lambda x: x <= 50, "{:.2f} ms")
    for row_id in ("SC.cli_history", "SC.cli_diff"):
        goal(f"{row_id} peak <= 100 MB at 1M", at_size(row_id), lambda x: x <= 100, "{:.0f} MB")
    goal("SC.import peak <= 200 MB", value("SC.import"), lambda x: x <= 200, "{:.0f} MB")
    goal("SC.par8 >= 2 x one writer", ratio("SC.par8"), lambda x: x >= 2, "{:.2f} x")
    goal("SC.same8 >= 0.7 x one writer", ratio("SC.same8"), lambda x: x >= 0.7, "{:.2f} x")
    goal(
        "ST import eventlog, projections <= 100 ms",
        value("ST.import"),
        lambda x: x <= 100,
        "{:.0f} ms",
    )
    goal("ST chatledger --help <= 150 ms", value("ST.help"), lambda x: x <= 150, "{:.0f} ms")
    goal("CA chunked prefix hits >= 80 %", value("CA.msg70"), lambda x: x >= 80, "{:.0f} %")
    goal("CA chunked tokens prefix hits >= 80 %", value("CA.tok70"), lambda x: x >= 80, "{:.0f} %")
    if backend == "memory":
        for g in out:
            if g["goal"].startswith("W5"):
                g["met"] = "n/a"
    return out


# ---------------------------------------------------------------------------- output


def fmt_value(row: Row) -> str:
    if row.value is None:
        return "-"
    return f"{num(row.value)} {row.unit}"


def num(value: float) -> str:
    """Three significant digits, without exponents."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def fmt_ratio(row: Row) -> str:
    return "" if row.ratio is None else f"{num(row.ratio)} x"


def print_results(res: Results, goal_rows: list[dict[str, str]], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=180)
    table = Table(title=title, show_lines=False)
    for col in ("id", "workload", "median", "ratio", "vs", "detail"):
        table.add_column(col, overflow="fold")
    for row in res.rows:
        detail = row.detail if row.status == "ok" else row.status
        table.add_row(row.id, row.workload, fmt_value(row), fmt_ratio(row), row.vs, detail)
    console.print(table)
    gt = Table(title="goals")
    for col in ("goal", "actual", "met"):
        gt.add_column(col)
    for g in goal_rows:
        gt.add_row(g["goal"], g["actual"], g["met"])
    console.print(gt)
    print("\nsummary")
    for row in res.rows:
        if row.status != "ok":
            print(f"  {row.id:<18} {row.status}")
            continue
        ratio = f"  = {num(row.ratio)} x {row.vs}" if row.ratio is not None else ""
        print(f"  {row.id:<18} {fmt_value(row):>20}{ratio}")
    for g in goal_rows:
        print(f"  goal {g['goal']:<44} {g['actual']:>18}  met: {g['met']}")


def load_average() -> list[float] | None:
    """1, 5 and 15 minute load averages: how busy the shared machine was (None off POSIX)."""
    with contextlib.suppress(OSError, AttributeError):
        return [round(x, 2) for x in os.getloadavg()]
    return None


def machine(cfg: Config) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "packages": peer_versions(),
        "backend": cfg.backend,
        "loadavg_start": load_average(),
    }
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        ).stdout.strip()
        meta["git"] = commit + ("+dirty" if dirty else "")
    if cfg.backend == "postgres":
        with contextlib.suppress(Exception):
            import psycopg

            with psycopg.connect(cfg.dsn, connect_timeout=3) as conn:
                row = conn.execute("SHOW server_version").fetchone()
                meta["postgres"] = row[0] if row else "?"
    return meta


# ---------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=("sqlite", "postgres", "memory"), default="sqlite")
    p.add_argument(
        "--n", type=int, help="adds per round for RAW/W1/TW/peers (default 2000, quick 1000)"
    )
    p.add_argument("--sizes", help="history sizes for W3/W4, e.g. 1000,10000,100000,1000000")
    p.add_argument("--tt-size", type=int, help="history size for TT (default 100000)")
    p.add_argument("--peer-sizes", help="history sizes for peer reads (default 10000,100000)")
    p.add_argument("--conversations", type=int, help="W2 conversations (default 1000, quick 200)")
    p.add_argument("--per-conversation", type=int, default=20, help="W2 adds per conversation")
    p.add_argument("--w5-n", type=int, help="adds per W5 writer (default 2000, quick 1000)")
    p.add_argument("--repeat", type=int, help="timed rounds per group (default 5, quick 3)")
    p.add_argument(
        "--w5-rounds", type=int, help="W5 rounds (default: --repeat if given, else 8; quick 3)"
    )
    p.add_argument(
        "--round-s",
        type=float,
        default=0.2,
        help="target seconds per calibrated latency round (default 0.2)",
    )
    p.add_argument(
        "--slices", type=int, default=10, help="turns per round the contenders take (default 10)"
    )
    p.add_argument("--no-sync", action="store_true", help="do not os.sync() between write slices")
    p.add_argument("--quick", action="store_true", help="smaller defaults: under a minute")
    p.add_argument("--no-peers", action="store_true", help="skip LangChain and LangGraph")
    p.add_argument(
        "--only",
        default="write,read,ledger,w5,scale,cache,startup",
        help="groups to run: write,read,ledger,w5,scale,cache,startup",
    )
    p.add_argument("--json", type=pathlib.Path, help="write every figure to this file")
    p.add_argument("--dir", type=pathlib.Path, help="where to make the work directory (cwd)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def config(args: argparse.Namespace) -> Config:
    quick = bool(args.quick)

    def ints(text: str | None, default: Sequence[int]) -> list[int]:
        return sorted({int(x) for x in text.split(",") if x.strip()}) if text else list(default)

    default_sizes: tuple[int, ...] = QUICK_SIZES if quick else DEFAULT_SIZES
    if args.backend == "memory":
        default_sizes = tuple(s for s in default_sizes if s in MEMORY_SIZES)
    sizes = ints(args.sizes, default_sizes)
    tt_size = args.tt_size or (100_000 if 100_000 in sizes or not args.sizes else max(sizes))
    return Config(
        backend=args.backend,
        n=args.n or (1000 if quick else 2000),
        sizes=sizes,
        tt_size=tt_size,
        peer_sizes=ints(args.peer_sizes, (10_000,) if quick else (10_000, 100_000)),
        conversations=args.conversations or (200 if quick else 1000),
        per_conversation=args.per_conversation,
        w5_n=args.w5_n or (1000 if quick else 2000),
        w5_rounds=args.w5_rounds or args.repeat or (3 if quick else 8),
        repeat=args.repeat or (3 if quick else 5),
        round_s=args.round_s / 2 if quick else args.round_s,
        slices=max(1, args.slices),
        settle=not args.no_sync,
        peers=not args.no_peers,
        only={g.strip() for g in args.only.split(",") if g.strip()},
        dsn=os.environ.get("CHATLEDGER_TEST_PG_DSN", DEFAULT_DSN),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker_main(args.worker)
    cfg = config(args)
    start = time.perf_counter_ns()
    res = Results()
    meta = machine(cfg)
    title = (
        f"chatledger bench: {cfg.backend}, {meta['cpu_count']} CPUs, python "
        f"{meta['python']}, sqlite {meta['sqlite']}"
    )
    problem = postgres_problem(cfg.dsn) if cfg.backend == "postgres" else None
    base = (args.dir or pathlib.Path.cwd()).resolve()
    base.mkdir(parents=True, exist_ok=True)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="chatledger-bench-", dir=base))
    be = Backend(cfg.backend, workdir, cfg.dsn)
    failed = False
    messages = make_messages(make_texts(256))
    try:
        if problem is not None:
            print(f"postgres backend skipped: {problem}")
            res.add(Row("POSTGRES", "PostgresEventStore", status=f"skipped: {problem}"))
        else:
            groups: list[tuple[str, Callable[[], None]]] = [
                ("write", lambda: write_group(cfg, be, res, messages)),
                ("read", lambda: read_group(cfg, be, res, messages)),
                ("ledger", lambda: ledger_group(cfg, be, res, messages)),
                ("w5", lambda: w5_group(cfg, be, res)),
                ("scale", lambda: scale_group(cfg, be, res, messages)),
                ("cache", lambda: cache_group(cfg, be, res, messages)),
                ("startup", lambda: startup_group(cfg, res)),
            ]
            for name, group in groups:
                if name in cfg.only:
                    log(f"group {name}")
                    group()
    finally:
        be.cleanup()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    wall = (time.perf_counter_ns() - start) / 1e9
    meta["loadavg_end"] = load_average()
    goal_rows = goals(res, cfg.backend)
    print_results(res, goal_rows, f"{title}; wall {wall:.0f} s")
    print(
        f"\nwall time {wall:.1f} s; load average {meta['loadavg_start']} at the start, "
        f"{meta['loadavg_end']} at the end ({meta['cpu_count']} CPUs); work directory "
        f"{workdir}{' (kept)' if args.keep else ''}"
    )
    failed = any(r.status.startswith("failed") and r.group != "peers" for r in res.rows)
    if args.json:
        cfg_dict = asdict(cfg)
        cfg_dict["only"] = sorted(cfg.only)
        cfg_dict.pop("dsn")
        args.json.write_text(
            json.dumps(
                {
                    "meta": meta,
                    "config": cfg_dict,
                    "wall_s": wall,
                    "rows": [asdict(r) for r in res.rows],
                    "goals": goal_rows,
                },
                indent=2,
                ensure_ascii=False,
            )
            + "\n"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
