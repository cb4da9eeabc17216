"""scripts/bench.py, run with tiny sizes in a subprocess so the benchmark cannot rot.

The numbers mean nothing at these sizes; what is checked is that the script exits 0, that its
--json file has every row with a figure (or the reason it has none) and every goal, and that the
two-writer rows lost nothing.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

from tests.conftest import require_pg

BENCH = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "bench.py"

TINY = [
    "--sizes", "100,300", "--tt-size", "300", "--peer-sizes", "100", "--n", "20",
    "--conversations", "5", "--per-conversation", "4", "--w5-n", "20", "--repeat", "1",
    "--round-s", "0.005",
]  # fmt: skip

CORE = [
    "W1", "KW", "W2", "TW", "BUILD", "W3@100", "W3@300", "W4@100", "W4@300", "TT.as_of",
    "TT.what_if", "LD.digest", "LD.verify", "LD.prove", "LD.proof", "LD.inclusion",
]  # fmt: skip
COLD_DIGEST = ["LD.digest.cold"]  # a new store object on the same database: not in memory
LEDGER = ["LD.digest", "LD.digest.cold", "LD.verify", "LD.prove", "LD.proof", "LD.inclusion"]
RAW = ["RAW", "FLOOR", "RAW.read"]
W5 = ["W5.single", "W5.same", "W5.separate"]
SCALE = ["SC.page", "SC.cli_history", "SC.cli_diff", "SC.export", "SC.import"]
PARALLEL = ["SC.one", "SC.par8", "SC.same8"]
CACHE = ["CA.msg", "CA.msg70", "CA.msg50", "CA.sum70", "CA.tok", "CA.tok70"]
STARTUP = ["ST.python", "ST.import", "ST.help"]
PEERS = ["PEER.lc.add", "PEER.lg.put", "PEER.lc.read@100", "PEER.lg.read@100"]
GOALS = [
    "W1 >= 0.5 x raw",
    "W3 100k <= 1.5 x 1k",
    "W3 1M <= 2 x 1k",
    "W4 100k <= 10 ms",
    "W4 1M <= 2 x 100k",
    "TT as_of <= 1 ms median at 100k",
    "TW >= 0.7 x W1",
    "LD digest incremental <= 5 ms at 1M",
    "LD verify(digest) <= 10 s at 1M",
    "LD prove <= 50 ms at 1M",
    "LD proof JSON <= 2 KB at 1M",
    "W5 same: zero errors, nothing lost",
    "W5 same: total >= 0.8 x single writer",
    "W5 separate: zero errors, nothing lost",
    "W5 separate: total >= 0.8 x single writer",
    "TT what-if <= 0.3 s at 100k",
    "SC history first page <= 50 ms at 1M",
    "SC.cli_history peak <= 100 MB at 1M",
    "SC.cli_diff peak <= 100 MB at 1M",
    "SC.import peak <= 200 MB",
    "SC.par8 >= 2 x one writer",
    "SC.same8 >= 0.7 x one writer",
    "ST import eventlog, projections <= 100 ms",
    "ST chatledger --help <= 150 ms",
    "CA chunked prefix hits >= 80 %",
    "CA chunked tokens prefix hits >= 80 %",
]


def _run_bench(tmp_path: pathlib.Path, backend: str) -> tuple[dict[str, Any], str]:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--backend", backend, *TINY, "--json", str(out),
         "--dir", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=os.environ.copy(),
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # Check the work directory was removed (only the JSON file is left).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.json"]
    return json.loads(out.read_text()), proc.stdout


def _check_rows(report: dict[str, Any], measured: list[str], absent: dict[str, str]) -> None:
    rows = {r["id"]: r for r in report["rows"]}
    # Check every row is there, once, and nothing else.
    assert sorted(rows) == sorted([*measured, *absent])
    assert len(report["rows"]) == len(rows)
    for row_id in measured:
        row = rows[row_id]
        assert row["status"] == "ok", row
        assert row["value"] is not None, row
        assert row["value"] > 0, row
        assert row["unit"], row
    for row_id, prefix in absent.items():
        assert rows[row_id]["status"].startswith(prefix), rows[row_id]
        assert rows[row_id]["value"] is None
    # Check ratios name the row they compare with.
    for row in rows.values():
        if row["ratio"] is not None:
            assert row["vs"] in rows, row
    assert [g["goal"] for g in report["goals"]] == GOALS
    assert {g["met"] for g in report["goals"]} <= {"yes", "NO", "n/a"}
    for key in ("date", "machine", "cpu_count", "python", "sqlite"):
        assert report["meta"][key], key


def _check_writers(report: dict[str, Any]) -> None:
    for row in report["rows"]:
        if row["id"] in W5:
            # Check two writer processes lost nothing and kept the hash chain intact.
            assert row["extra"]["errors"] == 0, row
            assert row["extra"]["lost"] == 0, row
            assert row["extra"]["verified"] is True, row


def _check_ledger(report: dict[str, Any]) -> None:
    rows = {r["id"]: r for r in report["rows"]}
    # Check the ledger rows name the log they measured: both histories, plus the rows the
    # incremental digests appended (the first digest saw 100 + 300 records).
    for row_id in LEDGER:
        if rows[row_id]["status"] == "ok":
            assert rows[row_id]["extra"]["records"] == 400, rows[row_id]
    # Check the keyed writer is compared with the unkeyed one, and proofs have a real size.
    assert rows["KW"]["vs"] == "W1"
    assert rows["LD.proof"]["unit"] == "B"
    assert 500 < rows["LD.proof"]["value"] < 10_000
    # Check the 1M goals say they were not run at these sizes, rather than claiming a result.
    for goal in report["goals"]:
        if goal["goal"].startswith("LD") or "at 1M" in goal["goal"]:
            assert goal["met"] == "n/a", goal


def _peer_rows(report: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """Peers are an optional extra: each is measured or says it is not installed."""
    rows = {r["id"]: r for r in report["rows"]}
    installed = [p for p in PEERS if rows.get(p, {}).get("status") == "ok"]
    missing = {p: "not installed" for p in PEERS if p not in installed}
    return installed, missing


def test_bench_sqlite(tmp_path):
    report, stdout = _run_bench(tmp_path, "sqlite")
    installed, missing = _peer_rows(report)
    _check_rows(
        report, [*RAW, *CORE, *COLD_DIGEST, *W5, *SCALE, *CACHE, *STARTUP, *installed], missing
    )
    rows = {r["id"]: r for r in report["rows"]}
    # The hand-written floor of an add is compared with the raw driver loop, as W1 is.
    assert rows["FLOOR"]["vs"] == "RAW" and rows["W1"]["vs"] == "RAW"
    # Check the floor did an add's whole work: chatledger verifies and reads what it wrote.
    assert rows["FLOOR"]["extra"]["verified"] is True, rows["FLOOR"]
    # Start-up is compared with the bare interpreter, the floor.
    for row_id in ("ST.import", "ST.help"):
        assert rows[row_id]["vs"] == "ST.python" and rows[row_id]["ratio"] > 0, rows[row_id]
    _check_writers(report)
    _check_ledger(report)
    assert report["meta"]["backend"] == "sqlite"
    # Check the printed table and summary carry the rows too.
    for row_id in ["W1", "KW", "LD.digest.cold", "LD.proof", "W5.same", *PEERS]:
        assert row_id in stdout


def test_bench_memory(tmp_path):
    report, _ = _run_bench(tmp_path, "memory")
    absent = {
        "RAW": "n/a",
        "FLOOR": "n/a",
        "RAW.read": "n/a",
        **dict.fromkeys(COLD_DIGEST, "n/a"),
        **dict.fromkeys(W5, "n/a"),
        **dict.fromkeys(PEERS, "n/a"),
    }
    _check_rows(report, [*CORE, *CACHE, *STARTUP], absent)
    _check_ledger(report)
    _check_cache(report)


def _check_cache(report: dict[str, Any]) -> None:
    rows = {r["id"]: r["value"] for r in report["rows"]}
    # Chunked eviction keeps the sent prefix for most turns; the sliding window almost never.
    for chunked, sliding in (
        ("CA.msg70", "CA.msg"),
        ("CA.msg50", "CA.msg"),
        ("CA.tok70", "CA.tok"),
    ):
        assert rows[chunked] >= 80, rows
        assert rows[sliding] <= 20, rows


def test_bench_postgres(tmp_path):
    require_pg()
    report, _ = _run_bench(tmp_path, "postgres")
    _check_rows(
        report,
        ["RAW", *CORE, *COLD_DIGEST, *W5, *SCALE, *CACHE, *PARALLEL, *STARTUP],
        {**dict.fromkeys(PEERS, "n/a"), "FLOOR": "n/a", "RAW.read": "n/a"},
    )
    _check_writers(report)
    _check_ledger(report)
    assert report["meta"]["postgres"]
