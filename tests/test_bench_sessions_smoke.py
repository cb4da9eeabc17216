"""scripts/bench_sessions.py, run with tiny sizes in a subprocess so the benchmark cannot rot.

The figures mean nothing at these sizes; what is checked is that the script exits 0 after
comparing both sides' answers, and that its --json file has every figure and goal.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("langchain_community", reason="the bench extra is not installed")

BENCH = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "bench_sessions.py"


def test_the_session_benchmark_runs_and_reports_every_figure(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "sessions.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--sizes", "30,60", "--repeat", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert sorted(report["sizes"]) == ["30", "60"]
    for rows in report["sizes"].values():
        assert sorted(rows) == ["add100", "all", "cold10", "lc", "lc20"]
        for name in ("add100", "all", "cold10", "lc"):
            assert rows[name]["ratio"] > 0
    assert len(report["goals"]) == 2 * 4 + 2  # per size, plus flatness and the stall
    assert "| items |" in proc.stdout


def test_kept_databases_are_built_once_and_reused(tmp_path: pathlib.Path) -> None:
    import sqlite3

    keep = tmp_path / "dbs"
    counts = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, str(BENCH), "--sizes", "30", "--repeat", "1", "--keep", str(keep)],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        with sqlite3.connect(keep / "ledger-30.db") as db:
            (count,) = db.execute("SELECT count(*) FROM events WHERE stream_id = 's'").fetchone()
        counts.append(count)
    # Check the second run read the first run's session (30 items plus what its add_items
    # rounds wrote) and added as many again: it neither rebuilt it nor filled it twice.
    assert counts[0] > 30
    assert counts[1] == 2 * counts[0] - 30
