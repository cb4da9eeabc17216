"""scripts/bench_witness.py at tiny sizes, so the benchmark cannot rot."""

from __future__ import annotations

import importlib.util
import json
import pathlib

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "bench_witness.py"


def test_bench_witness_runs_and_writes_every_figure(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_witness", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "w.json"
    results = module.main(["--n", "40", "--round", "20", "--size", "2000", "--json", str(out)])
    assert json.loads(out.read_text()) == results
    assert results["ratio"] > 0 and results["witness writes"] >= 1
    assert "open, anchor check s" in capsys.readouterr().out
