"""keygen, checkpoint, verify --checkpoint, prove --since, check-consistency, --no-disclose."""

from __future__ import annotations

import json
import shutil
import stat

from eventlog import SQLiteEventStore
from eventlog.note import Signer, Verifier
from eventlog.testing.records import batch
from tests.cli.conftest import json_lines, memory


def _keys(ok, tmp_path, name="example.com/log"):
    ok("keygen", name, "--out", tmp_path)
    stem = name.replace("/", "_")
    return tmp_path / f"{stem}.key", tmp_path / f"{stem}.vkey"


def test_keygen_writes_a_secret_key_and_its_verifier_key(cli, ok, tmp_path):
    result = ok("keygen", "example.com/log", "--out", tmp_path)
    key, vkey = tmp_path / "example.com_log.key", tmp_path / "example.com_log.vkey"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    signer = Signer.from_text(key.read_text())
    verifier = Verifier.from_text(vkey.read_text())
    assert signer.verifier() == verifier and verifier.name == "example.com/log"
    assert key.read_text().startswith("PRIVATE+KEY+example.com/log+")
    assert vkey.read_text() == verifier.to_text() + "\n"
    assert result.stdout.endswith(verifier.to_text() + "\n")
    # Check a key is never overwritten, and bad names and directories are one-line errors.
    cases = [
        (("keygen", "example.com/log", "--out", tmp_path), 1, "exists; a key is never overwritten"),
        (("keygen", "has space", "--out", tmp_path), 1, "a key name must be non-empty"),
        (("keygen", "k", "--out", tmp_path / "missing"), 2, "no such directory"),
    ]
    for args, status, text in cases:
        bad = cli(*args)
        assert (bad.returncode, text in bad.stderr) == (status, True), (args, bad)
    (line,) = json_lines(ok("keygen", "other", "--out", tmp_path, "--json").stdout)
    assert line["verifier_key"] == (tmp_path / "other.vkey").read_text().strip()


def test_checkpoint_then_verify_and_a_restored_older_copy_is_rolled_back(cli, ok, ledger, tmp_path):
    key, vkey = _keys(ok, tmp_path)
    older = tmp_path / "older.db"
    shutil.copy(ledger, older)  # a complete, genuine copy of the database, taken now
    with SQLiteEventStore(ledger) as store:
        memory(store).clear()
    cp = tmp_path / "checkpoint.txt"
    ok("--db", ledger, "checkpoint", "--origin", "example.com/log", "--signing-key", key, "-o", cp)
    lines = cp.read_text().split("\n")
    assert lines[:2] == ["example.com/log", "12"] and lines[3] == ""
    assert lines[4].startswith("\u2014 example.com/log ")
    printed = ok("--db", ledger, "checkpoint", "--origin", "example.com/log", "--signing-key", key)
    assert printed.stdout == cp.read_text()
    result = ok("--db", ledger, "verify", "--checkpoint", cp, "--verifier-key", vkey)
    assert result.stdout.startswith("OK the ledger is the checkpoint signed by example.com/log")
    # The older copy restored in place of the database: every byte genuine, the newest gone.
    shutil.copy(older, ledger)
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"ledger.db{suffix}").unlink(missing_ok=True)
    assert ok("--db", ledger, "verify").stdout.startswith("OK ")  # the chains cannot tell
    result = cli("--db", ledger, "verify", "--checkpoint", cp, "--verifier-key", vkey)
    assert result.returncode == 1
    assert result.stdout.startswith("ROLLED BACK behind the checkpoint: rolled back?")
    out = cli("--db", ledger, "verify", "--checkpoint", cp, "--verifier-key", vkey, "--json")
    (report,) = json_lines(out.stdout)
    assert out.returncode == 1
    assert report["behind"] is True and (report["size"], report["checkpoint_size"]) == (11, 12)


def test_verify_rejects_edited_checkpoints_and_wrong_keys(cli, ok, ledger, tmp_path):
    key, vkey = _keys(ok, tmp_path)
    _, stranger = _keys(ok, tmp_path, "stranger")
    cp = tmp_path / "checkpoint.txt"
    ok("--db", ledger, "checkpoint", "--origin", "o", "--signing-key", key, "-o", cp)
    edited = tmp_path / "edited.txt"
    edited.write_text(cp.read_text().replace("\n11\n", "\n12\n", 1))
    for note, verifier in ((edited, vkey), (cp, stranger)):
        result = cli("--db", ledger, "verify", "--checkpoint", note, "--verifier-key", verifier)
        assert result.returncode == 1 and result.stdout.startswith("REJECTED checkpoint rejected")
    (line,) = json_lines(
        ok("--db", ledger, "verify", "--checkpoint", cp, "--verifier-key", vkey, "--json").stdout
    )
    assert line["ok"] is True and line["origin"] == "o" and line["size"] == 11


def test_verify_says_changed_when_the_signed_root_is_not_this_ledgers(cli, ok, ledger, tmp_path):
    key, vkey = _keys(ok, tmp_path)
    signer = Signer.from_text(key.read_text())
    from eventlog.note import sign_note

    forged = tmp_path / "forged.txt"
    forged.write_text(sign_note("o\n5\n" + "A" * 43 + "=\n", [signer]))
    result = cli("--db", ledger, "verify", "--checkpoint", forged, "--verifier-key", vkey)
    assert result.returncode == 1 and result.stdout.startswith("CHANGED the ledger (11 records)")


def test_checkpoint_command_errors_are_one_line(cli, ok, ledger, tmp_path):
    key, vkey = _keys(ok, tmp_path)
    cp = tmp_path / "cp.txt"
    ok("--db", ledger, "checkpoint", "--origin", "o", "--signing-key", key, "-o", cp)
    cases = [
        (("--db", ledger, "checkpoint", "--origin", "o", "--signing-key", vkey), 1, "PRIVATE+KEY"),
        (("--db", ledger, "checkpoint", "--origin", "o", "--signing-key", "nope"), 2, "keygen"),
        (("--db", ledger, "checkpoint", "--origin", "", "--signing-key", key), 1, "origin"),
        (("--db", ledger, "verify", "--checkpoint", cp), 2, "needs --verifier-key FILE"),
        (("--db", ledger, "verify", "--checkpoint", cp, "--verifier-key", key), 1, "of the form"),
        (("--db", ledger, "verify", "--checkpoint", tmp_path / "x", "--verifier-key", vkey), 2,
         "no such file"),
        (("--db", ledger, "verify", "conv", "--checkpoint", cp, "--verifier-key", vkey), 2,
         "leave out the ID"),
    ]  # fmt: skip
    for args, status, text in cases:
        result = cli(*args)
        assert (result.returncode, text in result.stderr) == (status, True), (args, result)
        assert len(result.stderr.strip().splitlines()) == 1


def test_prove_since_and_check_consistency_need_only_the_files(cli, ok, ledger, tmp_path):
    old = tmp_path / "old.json"
    ok("--db", ledger, "digest", "-o", old)
    with SQLiteEventStore(ledger) as store:
        memory(store).clear()
    evidence = tmp_path / "since.json"
    ok("--db", ledger, "prove", "--since", old, "-o", evidence)
    data = json.loads(evidence.read_text())
    assert set(data) == {"digest", "proof"} and data["digest"]["size"] == 12
    printed = json.loads(ok("--db", ledger, "prove", "--since", old).stdout)
    assert printed["proof"] == data["proof"] and printed["digest"]["root"] == data["digest"]["root"]
    ledger.unlink()  # no database from here on
    result = ok("check-consistency", old, evidence)
    assert result.stdout.startswith("OK the log of 12 records")
    assert "extends the digest of 11 records" in result.stdout
    (line,) = json_lines(ok("check-consistency", old, evidence, "--json").stdout)
    assert line["ok"] is True and (line["old_size"], line["new_size"]) == (11, 12)
    # Check an altered proof and a proof from another digest are NOT CONSISTENT (exit 1).
    altered = json.loads(evidence.read_text())
    altered["proof"]["hashes"][0] = "A" * 43 + "="
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(altered))
    result = cli("check-consistency", old, bad)
    assert result.returncode == 1 and result.stdout.startswith("NOT CONSISTENT the log of 12")
    other = json.loads(evidence.read_text())
    other["proof"]["old_size"] = 10
    bad.write_text(json.dumps(other))
    result = cli("check-consistency", old, bad)
    assert result.returncode == 1 and "starts from a log of 10 records" in result.stdout


def test_consistency_command_errors_are_one_line(cli, ok, ledger, tmp_path):
    old = tmp_path / "old.json"
    ok("--db", ledger, "digest", "-o", old)
    evidence = tmp_path / "since.json"
    ok("--db", ledger, "prove", "--since", old, "-o", evidence)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{}")
    bigger = tmp_path / "bigger.json"
    with SQLiteEventStore(ledger) as store:
        memory(store).clear()
    ok("--db", ledger, "digest", "-o", bigger)
    older = tmp_path / "older.db"
    shutil.copy(ledger, older)
    cases = [
        (("check-consistency", tmp_path / "none", evidence), 2, "OLD"),
        (("check-consistency", old, tmp_path / "none"), 2, "PROOF"),
        (("check-consistency", garbage, evidence), 1, "is not a chatledger digest"),
        (("check-consistency", old, garbage), 1, "is not a chatledger consistency proof"),
        (("--db", ledger, "prove", "--since", garbage), 1, "is not a chatledger digest"),
        (("--db", ledger, "prove", "conv", "1", "--since", old), 2, "leave out ID and SEQ"),
        (("--db", ledger, "prove"), 2, "needs a memory ID and SEQ"),
        (("--db", ledger, "prove", "conv"), 2, "needs a memory ID and SEQ"),
    ]
    for args, status, text in cases:
        result = cli(*args)
        assert (result.returncode, text in result.stderr) == (status, True), (args, result)
        assert len(result.stderr.strip().splitlines()) == 1
    # Check a ledger behind the old digest says so instead of proving anything.
    with SQLiteEventStore(ledger) as store:
        memory(store).clear()
    ok("--db", ledger, "digest", "-o", tmp_path / "newest.json")
    shutil.copy(older, ledger)
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"ledger.db{suffix}").unlink(missing_ok=True)
    result = cli("--db", ledger, "prove", "--since", tmp_path / "newest.json")
    assert result.returncode == 1 and "behind the digest: rolled back?" in result.stderr


def test_prove_no_disclose_withholds_the_content(cli, ok, ledger, tmp_path):
    digest = tmp_path / "d.json"
    ok("--db", ledger, "digest", "-o", digest)
    sealed = tmp_path / "sealed.json"
    ok("--db", ledger, "prove", "conv", "5", "--no-disclose", "--digest", digest, "-o", sealed)
    data = json.loads(sealed.read_text())
    assert (data["record"]["payload"], data["record"]["salt"]) == ("", "")
    assert data["record"]["commitment"]
    result = ok("check-proof", sealed, "--digest", digest)
    assert result.stdout.startswith("OK memory conv seq 5")
    assert "content is withheld" in " ".join(result.stdout.split())


def test_witness_refuses_a_restored_older_copy(cli, ok, ledger, tmp_path):
    witness = tmp_path / "ledger.witness"
    # Check a read never creates the witness; a writing command does, from the ledger as it is.
    ok("ids", "--db", ledger, "--witness", witness)
    assert not witness.exists()
    ok("--witness", witness, "compact", "--db", ledger)
    size = json.loads(witness.read_text())["size"]
    assert size > 0
    old = tmp_path / "old.db"
    shutil.copyfile(ledger, old)
    with SQLiteEventStore(ledger, witness=witness) as store:
        store.append("other", batch("one more"))
    assert json.loads(witness.read_text())["size"] > size
    shutil.copyfile(old, ledger)
    # Check every command with the witness refuses the copy, naming sizes and the remedy.
    bad = cli("ids", "--db", ledger, "--witness", witness)
    assert bad.returncode == 1
    assert f"holds {size} records, behind the" in bad.stderr
    assert "restore the newest copy of the database" in bad.stderr
    assert "Traceback" not in bad.stderr
    ok("ids", "--db", ledger)  # without it, nothing notices


def test_prove_writes_a_c2sp_tlog_proof_bundle(cli, ok, ledger, tmp_path):
    from eventlog.tlog_proof import parse_tlog_proof, verify_tlog_proof

    key, vkey = _keys(ok, tmp_path)
    cp = tmp_path / "cp.txt"
    ok("checkpoint", "--db", ledger, "--origin", "example.com/log", "--signing-key", key, "-o", cp)
    out = tmp_path / "proof.tlog-proof"
    ok("prove", "conv", "3", "--db", ledger, "--tlog-proof", "--checkpoint", cp, "-o", out)
    text = out.read_text()
    assert text.startswith("c2sp.org/tlog-proof@v1\nextra ")
    assert text.endswith("\n\n" + cp.read_text())
    with SQLiteEventStore(ledger, read_only=True) as store:
        (record,) = store.read("conv", gt=2, lte=3)
    bundle = parse_tlog_proof(text)
    assert bundle.extra == bytes.fromhex(record.hash)
    assert verify_tlog_proof(text, vkey.read_text().strip(), record_hash=record.hash)
    assert record.stored_payload not in text  # never the content
    # Check the option pair is required together, and a checkpoint of another log is refused.
    bad = cli("prove", "conv", "3", "--db", ledger, "--tlog-proof")
    assert bad.returncode == 2 and "needs both --tlog-proof and --checkpoint" in bad.stderr
    other = tmp_path / "other.db"
    with SQLiteEventStore(other) as store:
        store.append("conv", batch("a", "b", "c"))
    bad = cli("prove", "conv", "3", "--db", other, "--tlog-proof", "--checkpoint", cp)
    assert bad.returncode == 1 and f"--checkpoint {cp}:" in bad.stderr


def test_check_proof_checks_a_tlog_proof_bundle_offline(cli, ok, ledger, tmp_path):
    key, vkey = _keys(ok, tmp_path)
    cp = tmp_path / "cp.txt"
    ok("checkpoint", "--db", ledger, "--origin", "example.com/log", "--signing-key", key, "-o", cp)
    bundle = tmp_path / "proof.tlog-proof"
    ok("prove", "conv", "3", "--db", ledger, "--tlog-proof", "--checkpoint", cp, "-o", bundle)
    ledger.unlink()  # no database from here on
    good = ok("check-proof", bundle, "--verifier-key", vkey)
    assert good.stdout.startswith("OK leaf ")
    assert ok("check-proof", bundle, "--verifier-key", vkey, "--origin", "example.com/log")
    # Check a wrong origin, another signer's key, and an edited audit path each exit 1.
    bad = cli("check-proof", bundle, "--verifier-key", vkey, "--origin", "other.example/log")
    assert bad.returncode == 1 and "NOT PROVEN" in bad.stdout
    (tmp_path / "other").mkdir()
    _, other_vkey = _keys(ok, tmp_path / "other")
    bad = cli("check-proof", bundle, "--verifier-key", other_vkey)
    assert bad.returncode == 1 and "not signed by" in bad.stdout
    lines = bundle.read_text().split("\n")
    path_line = 3  # header, extra, index, then the audit path
    lines[path_line] = ("A" if lines[path_line][0] != "A" else "B") + lines[path_line][1:]
    edited = tmp_path / "edited.tlog-proof"
    edited.write_text("\n".join(lines))
    bad = cli("check-proof", edited, "--verifier-key", vkey)
    assert bad.returncode == 1 and "is not in the tree" in bad.stdout
    # Check a bundle without --verifier-key, and a JSON proof without --digest, are usage errors.
    bad = cli("check-proof", bundle)
    assert bad.returncode == 2 and "--verifier-key FILE" in bad.stderr
    json_proof = tmp_path / "proof.json"
    json_proof.write_text("{}")
    bad = cli("check-proof", json_proof)
    assert bad.returncode == 2 and "needs --digest FILE" in bad.stderr
