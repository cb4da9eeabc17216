"""scripts/bench_langgraph.py, run with tiny sizes in a subprocess so the benchmark cannot rot.

The numbers mean nothing at these sizes; what is checked is that the script exits 0 and that
its --json file has a row per saver and size with every figure, and every goal of issue 28.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("langgraph.graph", reason="the langgraph extra is not installed")

BENCH = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "bench_langgraph.py"
FIGURES = {
    "bytes", "put_ms", "put_alone_ms", "get_tuple_ms", "list10_ms", "build_s", "get_in_run_ms"
}  # fmt: skip


def test_bench_langgraph_runs_at_tiny_sizes(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--sizes", "12,15", "--no-postgres", "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    rows = {(r["saver"], r["turns"]): r for r in report["rows"]}
    # SqliteSaver is the [bench] extra's; without it LedgerSaver is measured alone.
    peer = importlib.util.find_spec("langgraph.checkpoint.sqlite") is not None
    savers = ("LedgerSaver", "SqliteSaver") if peer else ("LedgerSaver",)
    assert set(rows) == {(s, n) for s in savers for n in (12, 15)}
    for (saver, _), row in rows.items():
        assert set(row) >= FIGURES
        assert all(row[f] > 0 for f in FIGURES)
        # Only LedgerSaver has async methods to measure (SqliteSaver's are not implemented).
        assert ("heartbeat_max_ms" in row) == (saver == "LedgerSaver")
    goals = [g[0] for g in report["goals"]]
    assert goals[-4:] == [
        "sqlite heartbeat <= 10 ms at 12",
        "sqlite heartbeat without a full collection <= 10 ms at 12",
        "sqlite heartbeat <= 10 ms at 15",
        "sqlite heartbeat without a full collection <= 10 ms at 15",
    ]
    ledger = rows[("LedgerSaver", 15)]
    assert ledger["heartbeat_gc2_count"] >= 0 and ledger["heartbeat_nogc_max_ms"] >= 0
    if not peer:
        return
    assert goals[:7] == [
        "sqlite bytes <= 0.02x peer at 15",
        "sqlite put <= 1.5x peer at 12",
        "sqlite put 15 vs 12 <= 1.5x",
        "sqlite put alone 15 vs 12 <= 1.5x",
        "sqlite get_tuple <= peer at 12",
        "sqlite get_tuple <= peer at 15",
        "sqlite list(limit=10) <= 0.1x peer at 15",
    ]
    # Check a ledger of 15 turns is smaller than SqliteSaver's already (linear vs quadratic).
    assert rows[("LedgerSaver", 15)]["bytes"] < rows[("SqliteSaver", 15)]["bytes"]
