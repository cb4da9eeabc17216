"""`chatledger import` passes the projections' window check to the import gate."""

from __future__ import annotations

import json

import pytest

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


@pytest.mark.parametrize("edit", ["bom", "crlf", "bom+crlf"])
def test_an_export_saved_by_a_windows_editor_imports(ok, cli, ledger, tmp_path, edit):
    # Before, a file re-saved with a byte order mark was refused as "not a chatledger export
    # (the first line must be a 'chatledger-jsonl' header)" - while its first line was one.
    dump = tmp_path / "ledger.jsonl"
    ok("export", "conv", "-o", dump, "--db", ledger)
    text = dump.read_bytes()
    if "crlf" in edit:
        text = text.replace(b"\n", b"\r\n")
    if "bom" in edit:
        text = b"\xef\xbb\xbf" + text
    dump.write_bytes(text)
    target = tmp_path / "new.db"
    ok("import", dump, "--db", target)
    assert ok("verify", "--db", target).stdout.startswith("OK")
    same = ok("export", "conv", "-o", "-", "--db", ledger).stdout.splitlines()[1:]
    assert ok("export", "conv", "-o", "-", "--db", target).stdout.splitlines()[1:] == same
    # Check stdin (read as given) takes the mark too.
    again = tmp_path / "again.db"
    ok("import", "-", "--db", again, stdin=text.decode("utf-8").replace("\r\n", "\n"))
    assert ok("verify", "--db", again).stdout.startswith("OK")
