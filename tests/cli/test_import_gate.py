"""`chatledger import` passes the projections' window check to the import gate."""

from __future__ import annotations

import json

from tests.eventlog.test_import_gate import _rehash


def test_import_refuses_a_rehashed_hostile_window_in_one_line(ok, cli, ledger, tmp_path):
    dump = tmp_path / "ledger.jsonl"
    ok("export", "conv", "-o", dump, "--db", ledger)
    lines = dump.read_text().splitlines()
    record = json.loads(lines[3])
    record["meta"] = '{"lim":4,"w":[[1,999999999]]}'
    lines[3] = json.dumps(record)
    dump.write_text("\n".join(_rehash(lines)) + "\n")
    target = tmp_path / "new.db"
    refused = cli("import", dump, "--db", target)
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1
    assert "refused, nothing was written: line 4: the window record of 'conv'#3" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not target.exists()
