"""Attacks on the audit guarantees by someone who holds neither the chain key nor the
checkpoint signing key: hand edits of the database, hostile checkpoint and note text, hostile
key and evidence files handed to the CLI, and what an operator meets with a damaged file.

Each test is one attempt the README's "Audit" and "Consistency proofs and signed checkpoints"
sections claim to stop; a refusal must be a clean one-line error or a failed report, never a
traceback, and nothing edited may pass.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from eventlog import SQLiteEventStore, UserMessage
from eventlog.checkpoint import open_checkpoint, sign_checkpoint, verify_checkpoint
from eventlog.ledger import digest, prove, verify_digest, verify_inclusion
from eventlog.note import NoteError, generate_key, open_note, sign_note
from eventlog.receipts import check_receipt, receipt_bundle
from eventlog.testing.records import settled, user_payload
from projections import MessageWindowChatMemory
from projections.cli import main
from tests.eventlog.test_ledger import _fill

ORIGIN = "example.com/chatledger/attack"
KEY = b"thirty-two bytes of chain key..."


def _say(store: Any, memory_id: str, *texts: str) -> None:
    memory = MessageWindowChatMemory(id=memory_id, max_messages=4, store=store)
    for text in texts:
        memory.add(UserMessage(text))


def _cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


# ---------------------------------------------------------------- verify --checkpoint


@pytest.mark.skip_backend("memory")  # the edit needs a second store object on the same data
@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_a_message_edited_under_its_hash_does_not_pass_verify_checkpoint(backend, keyed):
    # Attack: change a message's text by hand and leave its hash, seal and the tree alone.
    # Every stored hash still builds the signed tree, but the record is no longer what was
    # hashed: `verify --digest` refuses it, and so must `verify --checkpoint` ("both re-hash
    # everything"). Without the key a forger of a keyed ledger can do exactly this much.
    kwargs = {"chain_key": KEY} if keyed else {}
    store = backend.open(**kwargs)
    _say(store, "conv", "I agree to the terms.", "Please ship it.")
    _say(store, "other", "hello")
    signer, verifier = generate_key("example.com/log")
    note = sign_checkpoint(settled(store), ORIGIN, signer)
    d = digest(store)
    backend.tamper(store, "conv", 2, "payload", user_payload("Cancel both."))
    auditor = backend.open(**kwargs)
    assert not verify_digest(auditor, d).ok
    report = verify_checkpoint(auditor, note, verifier)
    assert not report.ok, report.reason
    assert "conv seq 2 does not verify" in report.reason
    assert "run `chatledger verify`" in report.reason
    # Check the tree itself still matched: this is the content check, not a rollback.
    assert (report.behind, report.ledger_size) == (False, 3)


def test_verify_checkpoint_on_the_command_line_exits_1_for_an_edited_message(capsys, tmp_path):
    db = tmp_path / "ledger.db"
    with SQLiteEventStore(db) as store:
        _say(store, "conv", "I agree to the terms.", "Please ship it.")
    assert _cli(capsys, "keygen", "example.com/log", "--out", tmp_path)[0] == 0
    key, vkey = tmp_path / "example.com_log.key", tmp_path / "example.com_log.vkey"
    cp = tmp_path / "cp.txt"
    assert _cli(capsys, "--db", db, "checkpoint", "--origin", ORIGIN, "--signing-key", key,
                "-o", cp)[0] == 0  # fmt: skip
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE events SET payload = ? WHERE stream_id = 'conv' AND seq = 2",
            (user_payload("Cancel both."),),
        )
    conn.close()
    status, out, _ = _cli(capsys, "--db", db, "verify", "--checkpoint", cp, "--verifier-key", vkey)
    assert status == 1
    assert out.startswith("CHANGED ") and "conv seq 2 does not verify" in out


# ---------------------------------------------------------------- reordering the global order


@pytest.mark.skip_backend("memory")  # the swap is an SQL edit of two rows
def test_two_memories_records_swapped_in_the_global_order_fail_digest_and_checkpoint(backend):
    # Attack: swap the positions of two records of *different* memories. Every memory's chain,
    # seal and record stays intact (reads serve both memories), only the global order changes,
    # which is what the digest and the checkpoint commit to.
    store = backend.open()
    _say(store, "a", "one", "two")
    _say(store, "b", "three")
    signer, verifier = generate_key("log")
    note = sign_checkpoint(settled(store), ORIGIN, signer)
    d = digest(store)
    rows = store.read_all()
    first, last = rows[0].position, rows[-1].position
    assert (rows[0].stream_id, rows[-1].stream_id) == ("a", "b")
    backend._sql("UPDATE {events} SET position = ? WHERE position = ?", (-7, first))
    backend._sql("UPDATE {events} SET position = ? WHERE position = ?", (first, last))
    backend._sql("UPDATE {events} SET position = ? WHERE position = ?", (last, -7))
    auditor = backend.open()
    assert auditor.verify().ok  # the chains cannot see it
    report = verify_digest(auditor, d)
    assert not report.ok and "history was changed" in report.message
    cp = verify_checkpoint(auditor, note, verifier)
    assert not cp.ok and not cp.behind and "does not extend the checkpoint" in cp.reason


# ---------------------------------------------------------------- hostile note and origin text


def test_a_note_holding_a_lone_surrogate_is_a_note_error_not_a_unicode_error():
    # Attack: a note given as a str that no UTF-8 file can hold (a lone surrogate, as
    # surrogateescape decoding produces). Go's note.Open refuses text that is not UTF-8; a
    # report or a NoteError is expected, never a UnicodeEncodeError from inside the check.
    signer, verifier = generate_key("log")
    store_note = sign_note("example.com/log\n1\n" + "A" * 43 + "=\n", [signer])
    hostile = store_note.replace("example", "ex\udcffample")
    with pytest.raises(NoteError, match="not UTF-8"):
        open_note(hostile, [verifier])
    with pytest.raises(NoteError, match="not UTF-8"):
        open_checkpoint(hostile, verifier)
    with pytest.raises(ValueError, match=r"sign a note: .*not UTF-8"):
        sign_note("ex\ud800ample\n", [signer])


def test_verify_checkpoint_reports_a_lone_surrogate_instead_of_raising():
    store = SQLiteEventStore(":memory:")
    _say(store, "conv", "hi")
    signer, verifier = generate_key("log")
    note = sign_checkpoint(store, ORIGIN, signer).replace("example", "ex\ud800ample")
    report = verify_checkpoint(store, note, verifier)
    assert not report.ok and report.checkpoint is None
    assert report.reason.startswith("checkpoint rejected: the note is malformed: it is not UTF-8")


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_the_checkpoint_command_with_a_unicode_line_separator_in_the_origin(
    capsys, tmp_path, separator
):
    # Attack: an origin holding a character str.splitlines() breaks at but the note format
    # does not (only "\n" ends a line there). The CLI read the signed size back with
    # splitlines(): "invalid literal for int()". The note itself is well-formed and verifies.
    db = tmp_path / "ledger.db"
    with SQLiteEventStore(db) as store:
        _say(store, "conv", "hi", "there")
    assert _cli(capsys, "keygen", "log", "--out", tmp_path)[0] == 0
    cp = tmp_path / "cp.txt"
    origin = f"example.com{separator}log"
    status, _, err = _cli(capsys, "--db", db, "checkpoint", "--origin", origin,
                          "--signing-key", tmp_path / "log.key", "-o", cp)  # fmt: skip
    assert status == 0, err
    assert "checkpoint of 2 records" in err
    key, second = tmp_path / "log.key", tmp_path / "cp2.txt"
    status, out, _ = _cli(capsys, "--db", db, "--json", "checkpoint", "--origin", origin,
                          "--signing-key", key, "-o", second)  # fmt: skip
    assert status == 0 and '"size": 2' in out
    status, out, _ = _cli(
        capsys, "--db", db, "verify", "--checkpoint", cp, "--verifier-key", tmp_path / "log.vkey"
    )
    assert status == 0 and out.startswith("OK ")


@pytest.mark.parametrize(
    "origin", ["\u0435xample.com/log", "example.com/log\u200b", "example.com/log "]
)
def test_a_confusable_origin_is_another_log(origin):
    # Attack: the signer's own checkpoint of a log whose name only looks like the expected
    # one (a Cyrillic e, a zero-width space, a trailing space): refused when the origin is
    # named, byte for byte.
    store = SQLiteEventStore(":memory:")
    _say(store, "conv", "hi")
    signer, verifier = generate_key("log")
    note = sign_checkpoint(store, origin, signer)
    report = verify_checkpoint(store, note, verifier, origin="example.com/log")
    assert not report.ok and "another log's" in report.reason


# ---------------------------------------------------------------- hostile files for the CLI


def test_a_key_file_that_is_not_utf8_is_named_in_one_line(capsys, tmp_path):
    # Operator side: a key file damaged or replaced by a binary. The error named neither the
    # option nor the file ("'utf-8' codec can't decode byte 0xff ...").
    db = tmp_path / "ledger.db"
    with SQLiteEventStore(db) as store:
        _say(store, "conv", "hi")
    bad = tmp_path / "bad.key"
    bad.write_bytes(b"\xffPRIVATE+KEY+\xfe")
    assert _cli(capsys, "keygen", "log", "--out", tmp_path)[0] == 0
    cp = tmp_path / "cp.txt"
    assert _cli(capsys, "--db", db, "checkpoint", "--origin", "o", "--signing-key",
                tmp_path / "log.key", "-o", cp)[0] == 0  # fmt: skip
    cases = [
        ("--db", db, "checkpoint", "--origin", "o", "--signing-key", bad),
        ("--db", db, "verify", "--checkpoint", cp, "--verifier-key", bad),
    ]
    for args in cases:
        status, _, err = _cli(capsys, *args)
        assert status == 1, err
        assert len(err.strip().splitlines()) == 1
        assert f"{bad}: not UTF-8 text" in err and "--" in err


def test_evidence_files_that_are_not_utf8_are_named_as_the_other_files_are(capsys, tmp_path):
    db = tmp_path / "ledger.db"
    with SQLiteEventStore(db) as store:
        _say(store, "conv", "hi")
    good = tmp_path / "digest.json"
    assert _cli(capsys, "--db", db, "digest", "-o", good)[0] == 0
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"digest": "\xff"}')
    for args in (("check-consistency", bad, bad), ("check-consistency", good, bad)):
        status, _, err = _cli(capsys, *args)
        assert status == 1 and len(err.strip().splitlines()) == 1
        assert f"{bad}: not UTF-8 text" in err and "codec" not in err


@pytest.mark.parametrize("damage", ["empty", "half", "header only"])
def test_the_audit_commands_refuse_a_damaged_database_file_in_one_line(capsys, tmp_path, damage):
    # Operator side: the database file truncated (a copy cut short, a full disk) or empty.
    db = tmp_path / "ledger.db"
    with SQLiteEventStore(db) as store:
        _fill(store)
    assert _cli(capsys, "keygen", "log", "--out", tmp_path)[0] == 0
    cp, dg = tmp_path / "cp.txt", tmp_path / "digest.json"
    assert _cli(capsys, "--db", db, "checkpoint", "--origin", "o", "--signing-key",
                tmp_path / "log.key", "-o", cp)[0] == 0  # fmt: skip
    assert _cli(capsys, "--db", db, "digest", "-o", dg)[0] == 0
    data = db.read_bytes()
    db.write_bytes(
        {"empty": b"", "half": data[: len(data) // 2], "header only": data[:100]}[damage]
    )
    for args in (
        ("verify", "--checkpoint", cp, "--verifier-key", tmp_path / "log.vkey"),
        ("verify", "--digest", dg),
        ("digest",),
        ("prove", "--since", dg),
    ):
        status, out, err = _cli(capsys, "--db", db, *args)
        assert status == 1 and out == "", (args, out)
        assert len(err.strip().splitlines()) == 1 and str(db) in err, (args, err)


# ---------------------------------------------------------------- read-only audits


def test_read_only_audits_of_a_ledger_with_a_wrong_stored_block_write_nothing(tmp_path):
    # Attack on "reads never write": a stored tree block that disagrees with the records
    # makes a writable verify(digest=) repair it; a read-only one must report and leave the
    # file alone, and a read-only proof must not be built on the wrong block.
    from eventlog.ledger_tree import BLOCK

    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path) as store:
        for i in range(BLOCK + 3):
            _say(store, f"m{i % 3}", f"message {i}")
        signer, verifier = generate_key("log")
        note = sign_checkpoint(store, ORIGIN, signer)
        d = digest(store)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE ledger_blocks SET node = ? WHERE block = 0", (b"\x00" * 32,))
    conn.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with SQLiteEventStore(path, read_only=True) as ro:
        report = verify_digest(ro, d)
        assert report.ok and "block 0 is wrong" in report.message
        assert verify_checkpoint(ro, note, verifier).ok
        first = ro.read_all(limit=1)[0]
        assert verify_inclusion(prove(ro, first.stream_id, first.seq, digest=d), d)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0


def _limited_memory() -> None:  # pragma: no cover - runs in the child before exec
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))


def test_a_gigantic_evidence_file_is_refused_in_one_line_not_read_into_memory(tmp_path):
    # Attack: a "proof" (or digest, checkpoint, key) of 20 GB (sparse: no disk is used). It was
    # read whole: a MemoryError traceback under a memory limit, the machine's memory without.
    db = tmp_path / "ledger.db"
    with SQLiteEventStore(db) as store:
        _say(store, "conv", "hi")
    giant = tmp_path / "giant.json"
    with giant.open("wb") as f:
        f.truncate(20 * 2**30)
    exe = Path(sys.executable).with_name("chatledger")
    for args in (
        ("check-proof", giant, "--digest", giant),
        ("--db", db, "verify", "--checkpoint", giant, "--verifier-key", giant),
        ("check-consistency", giant, giant),
    ):
        started = time.monotonic()
        result = subprocess.run(
            [exe, *map(str, args)],
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=_limited_memory,
            check=False,
        )
        assert result.returncode == 1, result.stderr[-500:]
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert f"{giant}: longer than 256 Mi characters" in result.stderr
        assert time.monotonic() - started < 30


# ---------------------------------------------------------------- erasure receipts


@pytest.mark.parametrize(
    ("field", "value"),
    [("first_seq", True), ("record_count", 2.0), ("last_seq", 2.0), ("reason", ["gdpr"])],
)
def test_a_receipt_showing_a_field_as_another_json_type_does_not_check(field, value):
    # Attack: show the receipt's numbers as other JSON values Python's == takes for them
    # (true for 1, 2.0 for 2). check_receipt passed them, and `check-receipt` printed
    # "2.0 records erased (seq True..2)": fields that are not the record's own.
    store = SQLiteEventStore(":memory:")
    _say(store, "conv", "a", "b")
    receipt = store.erase("conv", reason="gdpr")
    d = digest(store)
    doc = json.loads(receipt_bundle(store, receipt, digest=d))
    assert check_receipt(json.dumps(doc), d).ok
    doc["receipt"][field] = value
    check = check_receipt(json.dumps(doc), d)
    assert not check.ok
    assert check.reason == f"the receipt shows {field} other than its record says"


@pytest.mark.parametrize("version", [True, 1.0])
def test_a_receipt_whose_version_is_true_or_a_float_is_not_version_1(version):
    store = SQLiteEventStore(":memory:")
    _say(store, "conv", "a")
    receipt = store.erase("conv", reason="gdpr")
    d = digest(store)
    doc = json.loads(receipt_bundle(store, receipt, digest=d))
    doc["version"] = version
    check = check_receipt(json.dumps(doc), d)
    assert not check.ok and "version 1" in check.reason


# ---------------------------------------------------------------- rollback hidden by growth


def test_an_older_copy_grown_past_the_checkpoint_is_still_refused(tmp_path):
    # Attack: restore an older genuine copy, then append until it holds more records than the
    # signed checkpoint, so "behind the checkpoint" no longer applies. The tree of the first
    # checkpoint-size records is not the signed one: refused as changed history.
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path) as store:
        _say(store, "conv", "I agree to the terms.")
    backup = path.read_bytes()
    with SQLiteEventStore(path) as store:
        _say(store, "conv", "Cancel the order.")
        signer, verifier = generate_key("log")
        note = sign_checkpoint(store, ORIGIN, signer)
        d = digest(store)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(backup)
    with SQLiteEventStore(path) as store:
        _say(store, "conv", "Ship it.", "Thanks.")
        assert store.verify().ok  # every record genuine
        report = verify_checkpoint(store, note, verifier)
        assert not report.ok and not report.behind and report.ledger_size == 3
        assert "does not extend the checkpoint" in report.reason
        assert not verify_digest(store, d).ok


@pytest.mark.parametrize(
    "position", ["\u00b2", "\uff11", "99999999999999999999999", "9223372036854775808", "0", ""]
)
def test_a_receipt_id_whose_position_is_not_a_plain_position_is_malformed(position):
    # Attack: str.isdigit() took U+00B2 (then int() raised "invalid literal for int()"), the
    # fullwidth digit one (an alias of 1) and positions past 64 bits (read_all's range error).
    from eventlog.receipts import find_receipt

    store = SQLiteEventStore(":memory:")
    _say(store, "conv", "a")
    receipt = store.erase("conv", reason="gdpr")
    assert find_receipt(store, receipt.id).id == receipt.id
    with pytest.raises(ValueError, match="is not <position>-<64 hex digits>"):
        find_receipt(store, f"{position}-{receipt.record.hash}")


def test_a_receipt_id_whose_hash_is_not_hex_is_malformed():
    from eventlog.receipts import find_receipt

    store = SQLiteEventStore(":memory:")
    with pytest.raises(ValueError, match="is not <position>-<64 hex digits>"):
        find_receipt(store, "1-" + "z" * 64)


# ---------------------------------------------------------------- output files


def test_evidence_and_keys_are_never_written_through_a_planted_symlink(capsys, tmp_path):
    # Attack: in a shared directory, plant a dangling symlink where the auditor will write a
    # digest, checkpoint or verifier key. Path.exists() is False for it, and write_text()
    # created the link's target: a file of the planter's choosing, written as the auditor.
    db = tmp_path / "ledger.db"
    with SQLiteEventStore(db) as store:
        _say(store, "conv", "hi")
    shared, victim = tmp_path / "shared", tmp_path / "victim"
    shared.mkdir()
    victim.mkdir()
    (shared / "log.vkey").symlink_to(victim / "planted-vkey")
    status, _, err = _cli(capsys, "keygen", "log", "--out", shared)
    assert status == 1 and "exists" in err
    assert not (victim / "planted-vkey").exists() and not (shared / "log.key").exists()
    assert _cli(capsys, "keygen", "log", "--out", tmp_path)[0] == 0
    for name, args in (
        ("digest.json", ("digest",)),
        ("cp.txt", ("checkpoint", "--origin", "o", "--signing-key", tmp_path / "log.key")),
        ("proof.json", ("prove", "conv", "1")),
    ):
        (shared / name).symlink_to(victim / name)
        status, _, err = _cli(capsys, "--db", db, *args, "-o", shared / name)
        assert status == 1 and "exists; pick a new name" in err, err
        assert not (victim / name).exists()


# ---------------------------------------------------------------- signatures


def test_a_key_with_the_trusted_keys_name_and_hash_cannot_sign_or_hide_behind_it():
    # Attack: a key whose name and 4-byte key hash equal the trusted key's (a 2**32 search,
    # simulated here by building the signer directly). Its signature line is the trusted
    # key's by (name, hash), so it is checked with the trusted public key and refused; added
    # beside the genuine signature it is a second signature by that key, also refused.
    from eventlog.note import Signer

    store = SQLiteEventStore(":memory:")
    _say(store, "conv", "hi")
    signer, verifier = generate_key("example.com/log")
    other, _ = generate_key("example.com/log")
    twin = Signer(verifier.name, verifier.key_hash, other.seed)
    forged = sign_checkpoint(store, ORIGIN, twin)
    report = verify_checkpoint(store, forged, verifier)
    assert not report.ok and "does not verify" in report.reason
    genuine = sign_checkpoint(store, ORIGIN, signer)
    twin_line = forged.rsplit("\n\n", 1)[1]
    with pytest.raises(NoteError, match="signed it twice"):
        open_checkpoint(genuine + twin_line, verifier)
    assert verify_checkpoint(store, genuine, verifier).ok
