"""erase prints receipt ids; erasure-receipt prints and writes one; check-receipt checks the file
offline against a trusted digest (exit 0 / 1)."""

from __future__ import annotations

import json

from eventlog import SQLiteEventStore
from eventlog.testing.records import batch
from tests.cli.conftest import json_lines


def _erase(ok, tmp_path):
    db = tmp_path / "ledger.db"
    with SQLiteEventStore(db) as store:
        store.append(("alice", "s1"), batch("my address is 1 Main St"))
        store.append("bob", batch("hello"))
    out = ok("--db", db, "erase", "--yes", "--reason", "request #7", "--id-json",
             '["alice","s1"]', "--json").stdout  # fmt: skip
    (report,) = json_lines(out)
    (erased,) = report["erased"]
    return db, erased["receipt"]


def test_erase_prints_the_receipt_id_and_erasure_receipt_finds_it(ok, tmp_path):
    db, receipt_id = _erase(ok, tmp_path)
    position, _, digest = receipt_id.partition("-")
    assert position.isdigit() and len(digest) == 64
    text = ok("--db", db, "erasure-receipt", receipt_id).stdout
    assert f"erasure receipt {receipt_id}" in text
    assert "reason: request #7" in text and "1 records erased (seq 1..1)" in text
    (doc,) = json_lines(ok("--db", db, "erasure-receipt", receipt_id, "--json").stdout)
    assert doc["receipt"]["id"] == receipt_id and doc["format"] == "chatledger-erasure-receipt"


def test_a_receipt_file_checks_offline_and_an_edited_one_does_not(cli, ok, tmp_path):
    db, receipt_id = _erase(ok, tmp_path)
    digest, receipt = tmp_path / "d.json", tmp_path / "receipt.json"
    ok("--db", db, "digest", "-o", digest)
    out = ok("--db", db, "erasure-receipt", receipt_id, "--digest", digest, "-o", receipt).stdout
    assert f"check-receipt {receipt} --digest DIGEST" in out
    db.unlink()  # the regulator has two files and no database
    result = ok("check-receipt", receipt, "--digest", digest)
    assert result.stdout.startswith("OK erasure receipt") and "request #7" in result.stdout
    doc = json.loads(receipt.read_text())
    doc["receipt"]["reason"] = "routine cleanup"
    receipt.write_text(json.dumps(doc))
    result = cli("check-receipt", receipt, "--digest", digest)
    assert result.returncode == 1
    assert "NOT PROVEN" in result.stdout and "reason other than its record says" in result.stdout
    (line,) = json_lines(cli("check-receipt", receipt, "--digest", digest, "--json").stdout)
    assert line["ok"] is False


def test_receipt_commands_say_what_is_wrong_and_the_remedy(cli, ok, tmp_path):
    db, receipt_id = _erase(ok, tmp_path)
    bad = cli("--db", db, "erasure-receipt", "12")
    assert bad.returncode == 2 and "erase output" in bad.stderr
    other = cli("--db", db, "erasure-receipt", f"1-{'0' * 64}")
    assert other.returncode == 1 and "no such receipt" in other.stderr
    no_digest = cli("check-receipt", tmp_path / "missing.json")
    assert no_digest.returncode == 2 and "no such file" in no_digest.stderr
    receipt = tmp_path / "r.json"
    ok("--db", db, "erasure-receipt", receipt_id, "-o", receipt)
    again = cli("--db", db, "erasure-receipt", receipt_id, "-o", receipt)
    assert again.returncode == 1 and "a receipt is evidence: keep each one" in again.stderr
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe not text")
    garbled = cli("check-receipt", binary, "--digest", receipt)
    assert garbled.returncode == 1 and "not UTF-8 text" in garbled.stderr
    assert "Traceback" not in garbled.stderr
    unanchored = cli("check-receipt", receipt)
    assert unanchored.returncode == 2 and "needs --digest FILE" in unanchored.stderr


def test_a_receipt_checks_against_a_signed_checkpoint_and_not_another_signers(cli, ok, tmp_path):
    db, receipt_id = _erase(ok, tmp_path)
    ok("keygen", "example.com/log", "--out", tmp_path)
    ok("keygen", "someone.else/log", "--out", tmp_path)
    key, vkey = tmp_path / "example.com_log.key", tmp_path / "example.com_log.vkey"
    cp, receipt = tmp_path / "cp.txt", tmp_path / "receipt.json"
    ok("--db", db, "checkpoint", "--origin", "example.com/log", "--signing-key", key, "-o", cp)
    ok("--db", db, "erasure-receipt", receipt_id, "-o", receipt)  # the same tree size
    db.unlink()
    signed = ("check-receipt", receipt, "--checkpoint", cp)
    result = ok(*signed, "--verifier-key", vkey, "--origin", "example.com/log")
    assert result.stdout.startswith("OK erasure receipt")
    other = cli(*signed, "--verifier-key", tmp_path / "someone.else_log.vkey")
    assert other.returncode == 1 and "does not hold" in other.stderr
    wrong_log = cli(*signed, "--verifier-key", vkey, "--origin", "another/log")
    assert wrong_log.returncode == 1 and "another/log" in wrong_log.stderr
    both = cli(*signed, "--verifier-key", vkey, "--digest", tmp_path / "d.json")
    assert both.returncode == 2 and "one of the two" in both.stderr
    unkeyed = cli(*signed)
    assert unkeyed.returncode == 2 and "needs --verifier-key" in unkeyed.stderr
    gone = cli(
        "check-receipt", receipt, "--checkpoint", tmp_path / "no.txt", "--verifier-key", vkey
    )
    assert gone.returncode == 2 and "--checkpoint" in gone.stderr and "no such file" in gone.stderr
    no_key = cli(*signed, "--verifier-key", tmp_path / "no.vkey")
    assert no_key.returncode == 2 and "chatledger keygen" in no_key.stderr
