"""digest, prove, check-proof and verify --digest: an auditor's evidence, kept outside the DB."""

from __future__ import annotations

import json
import sqlite3

from eventlog import SQLiteEventStore, UserMessage
from eventlog.hashing import commit, head_mac, record_hash
from tests.cli.conftest import json_lines, memory


def _digest(ok, ledger, tmp_path, name="d.json"):
    path = tmp_path / name
    ok("--db", ledger, "digest", "-o", path)
    return path


def test_digest_then_verify_passes_and_keeps_passing_as_the_log_grows(ok, ledger, tmp_path):
    path = _digest(ok, ledger, tmp_path)
    digest = json.loads(path.read_text())
    assert digest["format"] == "chatledger.ledger-digest/2" and digest["size"] == 11
    assert ok("verify", "--digest", path, "--db", ledger).stdout.startswith("OK ")
    with SQLiteEventStore(ledger) as store:
        memory(store).clear()
    out = ok("--db", ledger, "verify", "--digest", path, "--json").stdout
    (report,) = json_lines(out)
    assert report["ok"] is True and report["size"] == 12 and report["digest_size"] == 11


def test_verify_digest_fails_after_a_rewrite_that_verify_alone_cannot_see(
    cli, ok, ledger, tmp_path
):
    path = _digest(ok, ledger, tmp_path)
    # An attacker edits the last event and recomputes its hash and the head seal with the public
    # functions: in an unkeyed ledger the chain alone cannot tell.
    with SQLiteEventStore(ledger) as store:
        (last,) = store.read("conv", desc=True, limit=1)
    forged = last._replace(payload=last.payload.replace("after clear", "forged"))
    assert forged.payload != last.payload
    forged = forged._replace(commitment=commit(bytes.fromhex(last.salt), forged.payload))
    with sqlite3.connect(ledger) as conn:
        conn.execute(
            "UPDATE events SET payload = ?, commitment = ?, hash = ? "
            "WHERE stream_id = 'conv' AND seq = ?",
            (forged.payload, forged.commitment, record_hash(forged), last.seq),
        )
        conn.execute(
            "UPDATE heads SET hash = ?, mac = ? WHERE stream_id = 'conv'",
            (record_hash(forged), head_mac(None, "conv", last.seq, record_hash(forged))),
        )
    assert ok("--db", ledger, "verify").stdout.startswith("OK ")
    result = cli("--db", ledger, "verify", "--digest", path)
    assert result.returncode == 1
    assert result.stdout.startswith("CHANGED ")


def test_verify_digest_names_missing_records(cli, ok, ledger, tmp_path):
    path = _digest(ok, ledger, tmp_path)
    with sqlite3.connect(ledger) as conn:
        conn.execute("DELETE FROM events WHERE stream_id = 'conv' AND seq >= 10")
    result = cli("--db", ledger, "verify", "--digest", path)
    assert result.returncode == 1
    assert "2 records are missing" in result.stdout


def test_a_proof_checks_with_the_two_files_alone(cli, ok, ledger, tmp_path):
    digest = _digest(ok, ledger, tmp_path)
    proof = tmp_path / "p.json"
    ok("--db", ledger, "prove", "conv", "5", "-o", proof, "--digest", digest)
    ledger.unlink()  # check-proof needs no database
    result = ok("check-proof", proof, "--digest", digest)
    assert result.stdout.startswith("OK memory conv seq 5")
    (line,) = json_lines(ok("check-proof", proof, "--digest", digest, "--json").stdout)
    assert line == {"ok": True, "memory": "conv", "seq": 5, "digest_size": 11}
    # Check a proof whose record was edited does not check.
    data = json.loads(proof.read_text())
    data["record"]["payload"] = data["record"]["payload"].replace("a", "b", 1)
    proof.write_text(json.dumps(data))
    result = cli("check-proof", proof, "--digest", digest)
    assert result.returncode == 1 and result.stdout.startswith("NOT PROVEN")


def test_check_proof_cuts_a_hostile_memory_id_and_kind_to_one_short_line(cli, ok, ledger, tmp_path):
    # Before the fix a proof file naming a memory id of 100,000 characters printed all of it.
    digest = _digest(ok, ledger, tmp_path)
    proof = tmp_path / "p.json"
    ok("--db", ledger, "prove", "conv", "5", "-o", proof, "--digest", digest)
    data = json.loads(proof.read_text())
    data["record"]["stream_id"] = "x" * 100_000
    data["record"]["kind"] = "k" * 100_000
    proof.write_text(json.dumps(data))
    result = cli("check-proof", proof, "--digest", digest)
    assert result.returncode == 1
    (line,) = result.stdout.splitlines()
    assert line.startswith("NOT PROVEN memory 'xxx") and len(line) < 300, line[:400]
    assert "x..." in line and "k..." in line
    # Check --json still gives the id as the file has it: it is data, not a message.
    (report,) = json_lines(cli("check-proof", proof, "--digest", digest, "--json").stdout)
    assert report["memory"] == "x" * 100_000


def test_a_proof_for_another_log_size_says_how_to_fix_it(cli, ok, ledger, tmp_path):
    old = _digest(ok, ledger, tmp_path, "old.json")
    with SQLiteEventStore(ledger) as store:
        memory(store).clear()
    proof = tmp_path / "p.json"
    ok("--db", ledger, "prove", "conv", "5", "-o", proof)  # at the current size: 12
    result = cli("check-proof", proof, "--digest", old)
    assert result.returncode == 1
    assert "prove against this digest" in result.stdout


def test_ledger_command_errors_are_one_line(cli, ok, ledger, tmp_path):
    digest = _digest(ok, ledger, tmp_path)
    cases = [
        (("--db", ledger, "digest", "-o", digest), 1, "exists; pick a new name"),
        (("check-proof", tmp_path / "none.json", "--digest", digest), 2, "no such file"),
        (("check-proof", digest, "--digest", digest), 1, "is not a chatledger proof"),
        (("--db", ledger, "verify", "--digest", tmp_path / "none"), 2, "no such file"),
        (("--db", ledger, "prove", "conv", "99"), 2, "ends at seq 11"),
        (("--db", ledger, "prove", "nope", "1"), 1, "has no events"),
        (("--db", ledger, "verify", "conv", "--digest", digest), 2, "leave out the ID"),
    ]
    for args, status, text in cases:
        result = cli(*args)
        assert (result.returncode, text in result.stderr) == (status, True), (args, result)
        assert len(result.stderr.strip().splitlines()) == 1
    (tmp_path / "bad.json").write_text("{}")
    result = cli("--db", ledger, "verify", "--digest", tmp_path / "bad.json")
    assert result.returncode == 1 and "is not a chatledger digest" in result.stderr


def test_digest_prints_to_stdout_by_default(ok, ledger):
    (line,) = json_lines(ok("--db", ledger, "digest").stdout)
    assert line["size"] == 11


def test_a_keyed_ledger_needs_its_key_file(cli, ok, tmp_path):
    key = tmp_path / "key"
    key.write_bytes(b"0123456789abcdef-chain-key")
    path = tmp_path / "keyed.db"
    with SQLiteEventStore(path, chain_key=key.read_bytes()) as store:
        memory(store).add(UserMessage("hi"))
    # Check without the key verify says what is missing; with it, all is well.
    result = cli("--db", path, "verify")
    assert result.returncode == 1 and "keyed ledger: pass --key-file" in result.stderr
    assert ok("--db", path, "verify", "--key-file", key).stdout.startswith("OK ")
    digest, proof = tmp_path / "d.json", tmp_path / "p.json"
    ok("--db", path, "--key-file", key, "digest", "-o", digest)
    ok("--db", path, "--key-file", key, "prove", "conv", "1", "-o", proof)
    result = cli("check-proof", proof, "--digest", digest)
    assert result.returncode == 1 and "pass its --key-file" in result.stdout
    assert ok("check-proof", proof, "--digest", digest, "--key-file", key).stdout.startswith("OK")
    wrong = tmp_path / "wrong"
    wrong.write_bytes(b"another key, 16+ bytes long")
    result = cli("--db", path, "verify", "--key-file", wrong)
    assert result.returncode == 1 and "does not match the key check" in result.stderr
    result = cli("--db", path, "verify", "--key-file", tmp_path / "none")
    assert (
        result.returncode == 2 and "--key-file" in result.stderr and "no such file" in result.stderr
    )


def test_verify_reports_malformed_rows_and_never_crashes(cli, ledger):
    with sqlite3.connect(ledger) as conn:
        conn.execute("UPDATE events SET recorded_at = 'yesterday' WHERE seq = 2")
        conn.execute("UPDATE events SET stream_id = '~i:007' WHERE seq = 11")
    result = cli("--db", ledger, "verify")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "MALFORMED memory 'conv' seq 2:" in result.stdout
    assert "MALFORMED memory '~i:007' seq 11:" in result.stdout
    (report,) = json_lines(cli("--db", ledger, "verify", "--json").stdout)
    assert report["ok"] is False and report["records"] == 11
    assert {(m["memory"], m["seq"]) for m in report["malformed"]} == {("conv", 2), ("~i:007", 11)}
