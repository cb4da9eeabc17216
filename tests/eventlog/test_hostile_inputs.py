"""Hostile input files, handed to chatledger by someone who holds no secret key.

Each test is one attempt: an export to import, a digest, proof, checkpoint, tlog-proof bundle,
receipt, witness or keyring file made to break a guarantee the README claims. A refusal must be
a clean error (a ``ValueError`` family error naming the operation, or ``False`` from a
verifier), never a traceback, a hang or a partial write; and nothing forged may verify.
"""

from __future__ import annotations

import base64
import io
import json
import math
import shutil
import sqlite3
import time
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from eventlog import (
    ChainKeyError,
    InclusionProof,
    InMemoryEventStore,
    LedgerDigest,
    PersistenceError,
    RollbackError,
    SQLiteEventStore,
    UserMessage,
    find_receipt,
    verify_inclusion,
)
from eventlog.checkpoint import Checkpoint, open_checkpoint
from eventlog.consistency import ConsistencyProof, read_evidence, verify_consistency
from eventlog.formats.jsonl import export_jsonl, import_jsonl
from eventlog.hashing import GENESIS, record_hash
from eventlog.keyring import KeyringError
from eventlog.keyring_file import FileKeyring
from eventlog.models import Record, format_time
from eventlog.note import NoteError, generate_key, open_note, sign_note
from eventlog.receipts import check_receipt, receipt_bundle
from eventlog.tlog_proof import parse_tlog_proof, tlog_proof, verify_tlog_proof
from projections import (
    ChatMemoryProvider,
    MessageWindowChatMemory,
    MessageWindowPolicy,
    compact,
    diff,
    explain,
    fork,
    walk,
    what_if,
    what_if_call,
)
from projections.cli import main
from tests.factories import a_cut_export

KEY = b"thirty-two bytes of chain key..."
# Far deeper than Python's recursion limit: json.loads raises RecursionError on it.
DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000


def _ledger(store: Any, n: int = 3) -> None:
    for i in range(n):
        memory = MessageWindowChatMemory(id=f"m{i % 2}", max_messages=4, store=store)
        memory.add(UserMessage(f"message {i}"))


def _export(store: Any) -> list[str]:
    out = io.StringIO()
    export_jsonl(store, out)
    return out.getvalue().splitlines()


def _rehash(lines: list[str]) -> list[str]:
    """Recompute every hash and link (unkeyed, with the public function) in file order: what a
    forger without the key can do to a file they edited."""
    prev: dict[str, str] = {}
    out = [lines[0]]
    for line in lines[1:]:
        obj = json.loads(line)
        obj["prev_hash"] = prev.get(obj["memory"], GENESIS)
        obj["hash"] = record_hash(
            Record(
                0,
                obj["memory"],
                obj["seq"],
                obj["recorded_at"],
                obj["kind"],
                obj["schema_version"],
                obj["payload"],
                obj["meta"],
                obj["prev_hash"],
                "",
                obj["salt"],
                obj["commitment"],
                obj["format"],
            )
        )
        prev[obj["memory"]] = obj["hash"]
        out.append(json.dumps(obj))
    return out


def _streams(store: Any) -> list[str]:
    return [s.stream_id for s in store.streams(include_system=True)]


# ---------------------------------------------------------------------------- import


def test_a_meta_deeper_than_append_accepts_is_refused_before_any_memory_is_written():
    # Check a gate loosened with max_depth still refuses what append refuses: before the fix
    # the gate passed memory m1's meta 400 levels deep, m0 was written, then append refused
    # m1 - half the file in the store after "nothing was written" was promised.
    src = InMemoryEventStore()
    _ledger(src, 2)
    lines = _export(src)
    obj = json.loads(lines[2])
    assert obj["memory"] == "m1"
    obj["meta"] = '{"a":' + "[" * 400 + "]" * 400 + "}"
    hostile = _rehash(a_cut_export([lines[0], lines[1], json.dumps(obj)]))
    target = InMemoryEventStore()
    with pytest.raises(ValueError, match="nothing was written: line 3: the meta of 'm1'#1 nests"):
        import_jsonl(target, hostile, max_depth=1000)
    assert _streams(target) == []
    # Check the same file without the hostile line imports: the refusal was that line's.
    assert import_jsonl(target, hostile[:2], max_depth=1000).records == 1


def _three_memories() -> list[str]:
    src = InMemoryEventStore()
    for memory_id in ("a", "b", "c"):
        MessageWindowChatMemory(id=memory_id, max_messages=4, store=src).add(UserMessage("x"))
    lines = _export(src)
    assert [json.loads(line)["memory"] for line in lines[1:]] == ["a", "b", "c"]
    return lines


@pytest.mark.parametrize("given_as", ["list", "stringio"])
@pytest.mark.parametrize("brk", ["\n", "\r", "\r\n"], ids=["lf", "cr", "crlf"])
def test_a_line_break_inside_a_line_never_writes_part_of_the_file(brk, given_as):
    # Check the writing pass reads the lines the checking pass checked. Before the fix its
    # private copy split again at a break inside a line (an element of a list holding two
    # lines, or JSON whitespace "\r" read back with universal newlines), the writing pass
    # failed at memory c after appending a: "refused, nothing was written", with a written.
    lines = _three_memories()
    last = lines[3].replace('","seq"', '",' + brk + '"seq"', 1)
    assert last != lines[3]
    given = [*lines[:3], last]
    source: Any = given if given_as == "list" else io.StringIO("\n".join(given) + "\n")
    target = InMemoryEventStore()
    try:
        report = import_jsonl(target, source)
    except ValueError as e:
        assert "nothing was written" in str(e)
        assert _streams(target) == []
    else:
        # JSON whitespace inside a line: one record, as the checking pass read it.
        assert report.records == 3 and _streams(target) == ["a", "b", "c"]
        assert brk == "\r"


def test_a_pseudonym_an_erasable_ledger_cannot_name_is_refused_before_writing(tmp_path):
    # Check the checking pass refuses what append refuses: before the fix a ~p: memory passed
    # it, the writing pass appended ~sys:compaction, then append refused the pseudonym with
    # its own message ("a pseudonym given as a stream key"), the system stream written.
    src = InMemoryEventStore()
    _ledger(src, 1)
    lines = _export(src)
    system, pseudonym = json.loads(lines[1]), json.loads(lines[1])
    system["memory"], pseudonym["memory"] = "~sys:compaction", "~p:" + "ab" * 16
    hostile = _rehash(a_cut_export([lines[0], json.dumps(system), json.dumps(pseudonym)]))
    with SQLiteEventStore(tmp_path / "erasable.db", erasable_ids=True) as target:
        with pytest.raises(ValueError, match=r"nothing was written: memory '~p:(ab)+' is stored"):
            import_jsonl(target, hostile)
        assert _streams(target) == []
    # Check a genuine export of an erasable ledger, continued into a copy of it, is refused
    # the same way (the copy has the names row, but a pseudonym names it only in the process
    # that appended by id).
    with SQLiteEventStore(tmp_path / "src.db", erasable_ids=True) as store:
        MessageWindowChatMemory(id="alice", max_messages=4, store=store).add(UserMessage("x"))
        out = io.StringIO()
        export_jsonl(store, out, memory_id="alice")
    with SQLiteEventStore(tmp_path / "copy.db", erasable_ids=True) as target:
        with pytest.raises(ValueError, match="nothing was written: memory '~p:"):
            import_jsonl(target, out.getvalue().splitlines())
        assert _streams(target) == []


def test_a_header_version_true_is_not_version_1():
    src = InMemoryEventStore()
    _ledger(src, 1)
    lines = _export(src)
    header = json.loads(lines[0])
    header["version"] = True  # True == 1 in Python
    target = InMemoryEventStore()
    with pytest.raises(ValueError, match="format version True is not 1"):
        import_jsonl(target, [json.dumps(header), *lines[1:]])
    assert _streams(target) == []


def test_an_unkeyed_file_is_refused_by_a_keyed_ledger_and_nothing_is_written(tmp_path):
    # The forger has no key: every record they can make is unkeyed (format 1 or 2).
    src = InMemoryEventStore()
    _ledger(src, 3)
    lines = _rehash(_export(src))
    with SQLiteEventStore(tmp_path / "keyed.db", chain_key=KEY) as target:
        MessageWindowChatMemory(id="own", max_messages=4, store=target).add(UserMessage("x"))
        before = _streams(target)
        with pytest.raises(ValueError, match=r"nothing was written.*keyed"):
            import_jsonl(target, lines)
        assert _streams(target) == before
        assert target.verify().ok


def test_a_keyed_export_does_not_import_into_an_unkeyed_ledger(tmp_path):
    # Records of a keyed ledger tie to their hash only under the key: a store without it
    # cannot check them, so it must not take them as verified.
    with SQLiteEventStore(tmp_path / "keyed.db", chain_key=KEY) as src:
        _ledger(src, 2)
        lines = _export(src)
    target = InMemoryEventStore()
    with pytest.raises(ValueError, match="nothing was written"):
        import_jsonl(target, lines)
    assert _streams(target) == []


@pytest.mark.parametrize(
    ("key", "canonical"),
    [
        ('~s:"m0"', "m0"),  # the NUL-escaping tag on an id without NUL
        ("~i:00", "~i:0"),
        ("~i:+0", "~i:0"),
        ("~i:0_0", "~i:0"),
        ("~u:A0000000-0000-0000-0000-000000000000", "~u:a0000000-0000-0000-0000-000000000000"),
        ('~t: ["m0"]', '~t:["m0"]'),
    ],
)
def test_a_hand_made_key_that_aliases_another_memory_is_refused(key, canonical):
    src = InMemoryEventStore()
    _ledger(src, 1)
    lines = _export(src)
    obj = json.loads(lines[1])
    obj["memory"] = key
    target = InMemoryEventStore()
    with pytest.raises(ValueError, match="is not canonical"):
        import_jsonl(target, _rehash([lines[0], json.dumps(obj)]))
    assert _streams(target) == []
    assert canonical  # the key the refusal points to (documented in the table)


@pytest.mark.parametrize(
    ("memory", "match"),
    [
        ("m\x00", "not canonical"),  # an id with NUL is stored as ~s:"m\u0000"
        ("m\ud800", "lone surrogate"),
        ("m" * 10_000, "bytes"),
    ],
)
def test_a_key_no_store_can_keep_is_refused(memory, match):
    src = InMemoryEventStore()
    _ledger(src, 1)
    lines = _export(src)
    obj = json.loads(lines[1])
    obj["memory"] = memory
    line = json.dumps(obj)  # ensure_ascii: the surrogate survives as \ud800
    target = InMemoryEventStore()
    with pytest.raises(ValueError, match=match):
        import_jsonl(target, [lines[0], line])
    assert _streams(target) == []


def test_unicode_normalization_forms_are_two_memories_not_one():
    # "é" precomposed and decomposed are different ids: neither aliases the other's history.
    target = InMemoryEventStore()
    MessageWindowChatMemory(id="caf\u00e9", max_messages=4, store=target).add(UserMessage("mine"))
    src = InMemoryEventStore()
    MessageWindowChatMemory(id="cafe\u0301", max_messages=4, store=src).add(UserMessage("theirs"))
    import_jsonl(target, _export(src))
    mine = MessageWindowChatMemory(id="caf\u00e9", max_messages=4, store=target)
    assert [m.text for m in mine.messages()] == ["mine"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("seq", True), ("seq", 0), ("seq", 1.0), ("schema_version", True), ("format", True)],
)
def test_bools_and_floats_are_not_integers_in_an_import(field, value):
    src = InMemoryEventStore()
    _ledger(src, 1)
    lines = _export(src)
    obj = json.loads(lines[1])
    obj[field] = value
    target = InMemoryEventStore()
    with pytest.raises(ValueError, match=f"nothing was written: line 2: {field} must be"):
        import_jsonl(target, [lines[0], json.dumps(obj)])


def test_a_huge_integer_or_a_huge_line_is_refused_in_one_line_quickly():
    src = InMemoryEventStore()
    _ledger(src, 1)
    lines = _export(src)
    line = lines[1].replace('"seq":1', '"seq":' + "9" * 5000)  # beyond int's 4300 digits
    started = time.process_time()
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        import_jsonl(InMemoryEventStore(), [lines[0], line])
    with pytest.raises(ValueError, match="line 2 is longer than 1000 characters"):
        import_jsonl(
            InMemoryEventStore(), io.StringIO(lines[0] + "\n" + "x" * 10**6), max_line=1000
        )
    assert time.process_time() - started < 2


# ---------------------------------------------------------------------------- nesting


def _proof_and_digest() -> tuple[InMemoryEventStore, InclusionProof, LedgerDigest]:
    store = InMemoryEventStore()
    _ledger(store, 5)
    d = store.digest()
    return store, store.prove("m0", 1, digest=d), d


@pytest.mark.parametrize("text", [DEEP_ARRAY, DEEP_OBJECT], ids=["array", "object"])
@pytest.mark.parametrize(
    "read",
    [LedgerDigest.from_json, InclusionProof.from_json, ConsistencyProof.from_json, read_evidence],
    ids=["digest", "proof", "consistency", "evidence"],
)
def test_a_deeply_nested_evidence_file_is_a_value_error_not_a_recursion_error(read, text):
    # Before the fix a digest, a proof and consistency evidence 100,000 levels deep raised
    # RecursionError, which the command line showed as a traceback.
    with pytest.raises(ValueError, match="recursion") as caught:
        read(text)
    assert not isinstance(caught.value, RecursionError)


@pytest.mark.parametrize("text", [DEEP_ARRAY, DEEP_OBJECT], ids=["array", "object"])
def test_check_receipt_never_raises_even_on_a_deeply_nested_file(text):
    _, _, d = _proof_and_digest()
    result = check_receipt(text, d)
    assert not result.ok and "not a chatledger erasure receipt" in result.reason


@pytest.mark.parametrize(
    "args",
    [
        ("check-proof", "{deep}", "--digest", "{digest}"),
        ("check-proof", "{proof}", "--digest", "{deep}"),
        ("check-consistency", "{digest}", "{deep}"),
        ("check-receipt", "{deep}", "--digest", "{digest}"),
    ],
    ids=["proof", "digest", "consistency", "receipt"],
)
def test_the_offline_checks_refuse_a_deeply_nested_file_in_one_line(args, tmp_path, capsys):
    _, proof, d = _proof_and_digest()
    files = {"deep": DEEP_ARRAY, "digest": d.to_json(), "proof": proof.to_json()}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    status = main([a.format(**{n: tmp_path / n for n in files}) for a in args])
    out, err = capsys.readouterr()
    assert status == 1, (out, err)
    assert "Traceback" not in err and "RecursionError" not in err
    assert len((out + err).strip().splitlines()) == 1


def test_a_deeply_nested_keyring_file_is_a_keyring_error(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text(DEEP_OBJECT)
    path.chmod(0o600)
    with pytest.raises(KeyringError, match="it is not JSON"):
        FileKeyring(path)


@pytest.mark.parametrize(
    "entry",
    [
        {"subject": "s", "created_at": "t", "key": "\u00e9" * 44},  # base64 of non-ASCII
        {"subject": "s\ud800", "created_at": "t", "key": "A" * 43 + "=", "mac": "x"},
        {"subject": "s\ud800", "created_at": "t", "key": "A" * 43 + "="},
    ],
    ids=["non-ascii-key", "surrogate-with-mac", "surrogate"],
)
def test_a_keyring_entry_of_odd_text_is_a_keyring_error(tmp_path, entry):
    # Before the fix: a bare ValueError or UnicodeEncodeError from inside the parser.
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"format": 1, "keys": {"k1": entry}}))
    path.chmod(0o600)
    with pytest.raises(KeyringError, match="the file is not a valid keyring: key 'k1'"):
        FileKeyring(path)


def test_a_deeply_nested_tlog_proof_or_note_is_refused():
    _, verifier = generate_key("example.com/log")
    assert verify_tlog_proof(DEEP_ARRAY, verifier) is False
    assert verify_tlog_proof(b"\xff\xfe\x00", verifier) is False
    with pytest.raises(NoteError, match="not UTF-8"):
        open_note(b"\xff", [verifier])


# ---------------------------------------------------------------------------- inclusion proofs


def _tampered(proof: InclusionProof, **changes: Any) -> str:
    data = json.loads(proof.to_json())
    data.update(changes)
    return json.dumps(data)


def test_an_inclusion_proof_is_bound_to_its_index_size_record_and_path():
    _, proof, d = _proof_and_digest()
    assert verify_inclusion(proof, d)
    path = json.loads(proof.to_json())["audit_path"]
    other = proof.record.model_copy(update={"seq": 2})
    forged = [
        proof.model_copy(update={"leaf_index": proof.leaf_index + 1}),
        proof.model_copy(update={"audit_path": (*proof.audit_path, proof.root)}),
        proof.model_copy(update={"audit_path": proof.audit_path[:-1]}),
        proof.model_copy(update={"audit_path": proof.audit_path[::-1]}),
        proof.model_copy(update={"record": other}),
        proof.model_copy(update={"tree_size": d.size + 1}),
        InclusionProof.from_json(_tampered(proof, audit_path=[p.upper() for p in path])),
    ]
    assert [verify_inclusion(p, d) for p in forged] == [False] * len(forged)
    # Check what the strict model refuses before any hashing: an index at or past the
    # size, negative numbers, bools where ints are expected, a path that is not hashes.
    refused = [
        _tampered(proof, leaf_index=d.size, tree_size=d.size),
        _tampered(proof, leaf_index=-1),
        _tampered(proof, tree_size=True),
        _tampered(proof, leaf_index=False),
        _tampered(proof, audit_path=[*path, "AAAA"]),
        _tampered(proof, root=" " + json.loads(proof.to_json())["root"]),
    ]
    for text in refused:
        with pytest.raises(ValueError, match="read an inclusion proof from JSON"):
            InclusionProof.from_json(text)


def test_a_proof_with_an_enormous_size_or_path_is_refused_quickly():
    _, proof, d = _proof_and_digest()
    started = time.process_time()
    big = proof.model_copy(update={"tree_size": 2**63, "leaf_index": 2**63 - 1})
    assert not verify_inclusion(big, d)
    long_path = proof.model_copy(update={"audit_path": proof.audit_path * 100_000})
    assert not verify_inclusion(long_path, d)
    huge = _tampered(proof, tree_size=int("9" * 4000), leaf_index=0)
    assert not verify_inclusion(InclusionProof.from_json(huge), d)
    assert time.process_time() - started < 2


def test_a_keyed_ledgers_proof_does_not_verify_without_the_key_or_with_another(tmp_path):
    with SQLiteEventStore(tmp_path / "keyed.db", chain_key=KEY) as store:
        _ledger(store, 3)
        d = store.digest()
        proof = store.prove("m0", 1, digest=d)
    assert verify_inclusion(proof, d, chain_key=KEY)
    assert not verify_inclusion(proof, d)
    assert not verify_inclusion(proof, d, chain_key=b"another thirty-two bytes of key.")
    # Check a forger cannot rewrite the record as unkeyed and keep the leaf: the hash changes.
    unkeyed = proof.record.model_copy(update={"format": 2})
    assert not verify_inclusion(proof.model_copy(update={"record": unkeyed}), d)


def test_a_digest_with_bools_negatives_or_an_impossible_last_position_is_refused():
    _, _, d = _proof_and_digest()
    data = json.loads(d.to_json())
    changes_list: list[dict[str, Any]] = [
        {"size": True},
        {"size": -1},
        {"last_position": d.size - 1},
        # Before the fix: OverflowError (a traceback in `verify --digest`), year 0 in UTC.
        {"recorded_at": "0001-01-01T00:00:00+01:00"},
        {"recorded_at": "9999-12-31T23:59:59-01:00"},
    ]
    for changes in changes_list:
        with pytest.raises(ValueError, match="read a ledger digest from JSON"):
            LedgerDigest.from_json(json.dumps({**data, **changes}))


# ---------------------------------------------------------------------------- consistency


def test_a_consistency_proof_cannot_bridge_to_an_unrelated_or_smaller_tree():
    store = InMemoryEventStore()
    _ledger(store, 3)
    old = store.digest()
    _ledger(store, 4)
    new = store.digest()
    proof = store.prove_consistency(old, digest=new)
    assert verify_consistency(old, new, proof)
    other = InMemoryEventStore()
    _ledger(other, 7)
    unrelated = other.digest()
    assert not verify_consistency(old, unrelated, proof)
    assert not verify_consistency(new, old, proof)
    padded = proof.model_copy(update={"hashes": (*proof.hashes, new.root)})
    assert not verify_consistency(old, new, padded)
    data = json.loads(proof.to_json())
    for changes in ({"old_size": True}, {"new_size": -1}, {"old_size": 9, "new_size": 3}):
        with pytest.raises(ValueError, match="consistency proof"):
            ConsistencyProof.from_json(json.dumps({**data, **changes}))


# ---------------------------------------------------------------------------- notes, checkpoints


def _signed(text: str = "example.com/log\n3\n" + base64.b64encode(bytes(32)).decode() + "\n"):
    signer, verifier = generate_key("example.com/log")
    return signer, verifier, sign_note(text, [signer])


def test_a_note_malleated_around_its_signature_is_refused():
    _, verifier, note = _signed()
    assert open_note(note, [verifier]).signers == ("example.com/log",)
    text, _, sig = note.partition("\n\n")
    malleated = [
        note.replace("\n3\n", "\n3 \n"),  # trailing space in the signed text
        note.replace("\n3\n", "\n03\n"),
        text + "\n\n\n" + sig,  # an extra blank line before the signatures
        text + "\n\n" + sig + sig,  # the same signature twice
        note.rstrip("\n"),  # no final newline
        note.replace("\u2014 ", "- "),  # a hyphen for the em dash
        note[:-2] + "\n",  # the signature cut short
        note.replace("\n", "\r\n"),
    ]
    for bad in malleated:
        with pytest.raises(NoteError):
            open_note(bad, [verifier])


def test_a_signature_by_a_key_of_the_same_name_is_not_the_keys():
    _, verifier, _ = _signed()
    impostor, _ = generate_key("example.com/log")  # same name, another key (and key hash)
    note = sign_note(
        "example.com/log\n3\n" + base64.b64encode(bytes(32)).decode() + "\n", [impostor]
    )
    with pytest.raises(NoteError, match="no signature by a trusted key"):
        open_note(note, [verifier])
    # Check the impostor's line given the trusted key's hash does not pass either: the
    # signature is checked, not just the (name, hash) pair.
    blob64 = note.split("\n\n")[1].split(" ")[2].strip()
    blob = base64.b64decode(blob64)
    forged_blob = verifier.key_hash.to_bytes(4, "big") + blob[4:]
    forged = note.replace(blob64, base64.b64encode(forged_blob).decode())
    with pytest.raises(NoteError, match="does not verify"):
        open_note(forged, [verifier])


def test_thousands_of_signature_lines_are_refused_quickly():
    _, verifier, note = _signed()
    text, _, sig = note.partition("\n\n")
    stranger, _ = generate_key("stranger")
    other = sign_note(text + "\n", [stranger]).partition("\n\n")[2]
    started = time.process_time()
    with pytest.raises(NoteError, match="more than 100 signatures"):
        open_note(text + "\n\n" + other * 10_000 + sig, [verifier])
    assert time.process_time() - started < 2


@pytest.mark.parametrize(
    "size_line",
    ["+3", "03", " 3", "3 ", "18446744073709551616", "-1", "1e3", "\u0663"],
)
def test_a_checkpoint_size_that_is_not_plain_decimal_is_refused(size_line):
    root = base64.b64encode(bytes(32)).decode()
    with pytest.raises(ValueError, match="size line"):
        Checkpoint.from_text(f"example.com/log\n{size_line}\n{root}\n")


def test_a_checkpoint_root_in_another_base64_spelling_is_refused():
    root = base64.b64encode(b"\xfb\xff" * 16).decode()  # "+/" in it, ending "+/8="
    variants = [
        root[:-2] + "9=",  # other padding bits: the same 32 bytes, spelled another way
        root.rstrip("="),
        root.replace("+", "-").replace("/", "_"),  # the URL-safe alphabet
        " " + root,
    ]
    assert Checkpoint.from_text(f"o\n1\n{root}\n").root == "fbff" * 16
    assert base64.b64decode(variants[0]) == base64.b64decode(root)
    for variant in variants:
        with pytest.raises(ValueError, match="root line"):
            Checkpoint.from_text(f"o\n1\n{variant}\n")


def test_a_checkpoint_of_another_origin_is_refused():
    _, verifier, note = _signed()
    assert open_checkpoint(note, verifier, origin="example.com/log").size == 3
    with pytest.raises(NoteError, match=r"not 'example\.com/log2'"):
        open_checkpoint(note, verifier, origin="example.com/log2")


# ---------------------------------------------------------------------------- tlog proofs


def _bundle() -> tuple[str, Any, str]:
    store = InMemoryEventStore()
    _ledger(store, 5)
    signer, verifier = generate_key("example.com/log")
    checkpoint = store.sign_checkpoint("example.com/log", signer)
    record = store.read(store.stream_key("m0"))[0]
    return tlog_proof(store, "m0", 1, checkpoint), verifier, record.hash


def test_a_tlog_proof_bundle_malleated_in_any_line_does_not_verify():
    bundle, verifier, record_hash = _bundle()
    assert verify_tlog_proof(bundle, verifier, record_hash=record_hash)
    head, _, note = bundle.partition("\n\n")
    lines = head.split("\n")
    index = int(lines[2].removeprefix("index "))
    other_hash = "ab" * 32
    malleated = [
        bundle.replace(f"index {index}\n", f"index {index + 1}\n"),
        bundle.replace(f"index {index}\n", f"index 0{index}\n"),
        bundle.replace(f"index {index}\n", f"index {index + 2**64}\n"),
        "\n".join([*lines, lines[-1]]) + "\n\n" + note,  # one path hash too many
        "\n".join(lines[:-1]) + "\n\n" + note,  # one too few
        "\n".join([*lines[:-1], lines[-1].rstrip("=")]) + "\n\n" + note,
        bundle.replace("c2sp.org/tlog-proof@v1", "c2sp.org/tlog-proof@v2"),
        bundle.replace("\n\n", "\n\n\n", 1),
    ]
    for bad in malleated:
        assert not verify_tlog_proof(bad, verifier, record_hash=record_hash), bad
    # Check the extra line is tied to the caller's record hash, and another hash fails.
    assert not verify_tlog_proof(bundle, verifier, record_hash=other_hash)
    assert not verify_tlog_proof(bundle, verifier, record_hash=record_hash.upper())
    assert not verify_tlog_proof(bundle, verifier, record_hash=record_hash, origin="other")


def test_a_tlog_proof_whose_checkpoint_is_signed_by_another_key_does_not_verify():
    bundle, verifier, record_hash = _bundle()
    _, stranger = generate_key("example.com/log")  # same name, another key
    assert verify_tlog_proof(bundle, verifier, record_hash=record_hash)
    assert not verify_tlog_proof(bundle, stranger, record_hash=record_hash)
    with pytest.raises(ValueError, match="not canonical base64"):
        parse_tlog_proof(bundle.replace("extra ", "extra  "))


# ---------------------------------------------------------------------------- witness


def _witnessed(tmp_path: Any) -> tuple[Any, Any, dict[str, Any]]:
    db, witness = tmp_path / "app.db", tmp_path / "app.witness"
    with SQLiteEventStore(db, witness=str(witness)) as store:
        _ledger(store, 3)
    return db, witness, json.loads(witness.read_text())


@pytest.mark.parametrize(
    "changes",
    [
        {"last_position": 2**70},  # beyond a 64-bit column
        {"last_position": 2**63},
        {"last_position": -3},
        {"last_position": 0},  # below the size: positions start at 1
        {"size": True},
        {"frontier": 5},
        {"anchors": [[2**70, "a" * 64]]},  # the same for a record kept outside the tree
    ],
)
def test_a_malformed_witness_is_refused_naming_the_witness(tmp_path, changes):
    # Before the fix a last_position past 2**63 failed with read_all's own ValueError,
    # naming neither the witness file nor the remedy.
    db, witness, data = _witnessed(tmp_path)
    witness.write_text(json.dumps({**data, **changes}))
    with pytest.raises(PersistenceError, match=r"app\.witness is not a chatledger witness"):
        SQLiteEventStore(db, witness=str(witness))


def test_a_deeply_nested_witness_is_refused_naming_the_witness(tmp_path):
    db, witness, _ = _witnessed(tmp_path)
    witness.write_text(DEEP_ARRAY)
    with pytest.raises(PersistenceError, match=r"app\.witness is not a chatledger witness"):
        SQLiteEventStore(db, witness=str(witness))


def test_a_witness_with_a_giant_frontier_is_refused_quickly(tmp_path):
    db, witness, data = _witnessed(tmp_path)
    size = 2**4000 - 1
    frontier = [base64.b64encode(bytes(32)).decode()] * size.bit_count()
    witness.write_text(json.dumps({**data, "size": size, "frontier": frontier}))
    started = time.process_time()
    with pytest.raises(PersistenceError, match=r"app\.witness is not a chatledger witness"):
        SQLiteEventStore(db, witness=str(witness))
    assert time.process_time() - started < 2


def test_the_genuine_witness_still_opens_after_these_checks(tmp_path):
    db, witness, data = _witnessed(tmp_path)
    with SQLiteEventStore(db, witness=str(witness)) as store:
        assert store.verify().ok
    assert data["size"] == 3 and data["last_position"] == 3


def test_a_keyed_ledger_refuses_to_open_without_adoption_for_an_unkeyed_file(tmp_path):
    # An import target made from a hostile file, then opened with a key: never adopted silently.
    target = tmp_path / "plain.db"
    with SQLiteEventStore(target) as store:
        src = InMemoryEventStore()
        _ledger(src, 2)
        import_jsonl(store, _rehash(_export(src)))
    with pytest.raises(ChainKeyError, match="adopt_key=True"):
        SQLiteEventStore(target, chain_key=KEY)


# ---------------------------------------------------------------------------- receipts


@pytest.mark.parametrize(
    "position",
    ["garbage", "", " 4", "04", "0", "3", "5", "\u0664"],
    ids=["text", "empty", "space", "leading-zero", "zero", "below-rank", "past-digest", "digit"],
)
def test_a_receipt_whose_id_is_not_its_records_does_not_check(position):
    # Before the fix the id's position was never checked: "garbage-<hash>" checked OK.
    store = InMemoryEventStore()
    _ledger(store, 3)
    receipt = store.erase("m0", reason="request #7")
    trusted = store.digest()
    doc = json.loads(receipt_bundle(store, receipt))
    genuine = doc["receipt"]["id"]
    assert genuine == f"4-{receipt.record.hash}" and doc["proof"]["leaf_index"] == 3
    assert trusted.last_position == 4
    assert check_receipt(json.dumps(doc), trusted).ok
    doc["receipt"]["id"] = f"{position}-{receipt.record.hash}"
    check = check_receipt(json.dumps(doc), trusted)
    assert not check.ok
    assert "is not <position>-<hash> of its record" in check.reason


def _restore(backup: Any, db: Any) -> None:
    shutil.copyfile(backup, db)
    for suffix in ("-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)


def test_a_hand_made_purge_row_does_not_make_the_witness_accept_a_restored_copy(tmp_path):
    # Before the fix one row that merely said memory_purged, above the witnessed position,
    # made a keyed ledger's witness skip its check and start again from the restored copy:
    # the newest message gone, no RollbackError, and the witness rewritten to forget it.
    db, witness = tmp_path / "app.db", tmp_path / "app.witness"
    with SQLiteEventStore(db, chain_key=KEY, witness=str(witness)) as store:
        MessageWindowChatMemory(id="conv", max_messages=4, store=store).add(UserMessage("hi"))
    shutil.copyfile(db, tmp_path / "backup.db")
    with SQLiteEventStore(db, chain_key=KEY, witness=str(witness)) as store:
        MessageWindowChatMemory(id="conv", max_messages=4, store=store).add(UserMessage("Cancel"))
    witnessed = witness.read_text()
    _restore(tmp_path / "backup.db", db)
    # The forger has write access to the database file, not the chain key.
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO events (position, stream_id, seq, recorded_at, kind, schema_version, "
            "payload, meta, prev_hash, hash, salt, commitment, format) VALUES (100, 'zz', 1, "
            "'2026-01-01T00:00:00.000000Z', 'memory_purged', 1, '{}', '{}', ?, ?, '', '', 1)",
            (GENESIS, "1" * 64),
        )
    conn.close()
    with pytest.raises(RollbackError) as caught:
        SQLiteEventStore(db, chain_key=KEY, witness=str(witness))
    assert caught.value.witnessed_size == 2
    assert witness.read_text() == witnessed


def test_a_genuine_purge_in_a_keyed_ledger_still_restarts_the_witness(tmp_path):
    db, witness = tmp_path / "app.db", tmp_path / "app.witness"
    with SQLiteEventStore(db, chain_key=KEY, witness=str(witness)) as store:
        MessageWindowChatMemory(id="new", max_messages=4, store=store).add(UserMessage("b"))
        MessageWindowChatMemory(id="old", max_messages=4, store=store).add(UserMessage("a"))
    # Check the witnessed last record is the one the purge deletes: only the tombstone says
    # why it is gone.
    assert json.loads(witness.read_text())["last_position"] == 2
    with SQLiteEventStore(db, chain_key=KEY) as store:  # no witness: it never moved
        store.purge("old", expected_seq=1, reason="retention")
    for key in (KEY, None):  # opened without the key, a keyed tombstone is taken as it is
        with SQLiteEventStore(db, chain_key=key, witness=str(witness), read_only=True):
            pass
    with SQLiteEventStore(db, chain_key=KEY, witness=str(witness)) as store:
        assert store.verify().ok
    assert json.loads(witness.read_text())["size"] == 2  # "new" and the tombstone


# ---------------------------------------------------------------------------- time travel


@pytest.mark.parametrize(
    "tz",
    [timezone(timedelta(hours=1)), ZoneInfo("UTC"), ZoneInfo("Europe/Berlin")],
    ids=["+01:00", "zoneinfo-utc", "berlin"],
)
def test_time_travel_to_year_1_is_exact_whatever_the_time_zone(tmp_path, tz):
    # An imported file may date its records in year 1 (only future times are refused).
    # Before the fix format_time wrote an instant outside UTC with strftime, whose %Y gives
    # "1", not "0001": the text sorted after every stored time and as_of served record 2.
    src = InMemoryEventStore()
    memory = MessageWindowChatMemory(id="c", max_messages=4, store=src)
    memory.add(UserMessage("a"))
    memory.add(UserMessage("b"))
    lines = _export(src)
    first, second = json.loads(lines[1]), json.loads(lines[2])
    first["recorded_at"] = "0001-01-01T00:00:00.000000Z"
    second["recorded_at"] = "0001-01-01T00:00:00.000001Z"
    with SQLiteEventStore(tmp_path / "old.db") as store:
        import_jsonl(store, _rehash([lines[0], json.dumps(first), json.dumps(second)]))
        memory = MessageWindowChatMemory(id="c", max_messages=4, store=store)
        at = datetime(1, 1, 1, tzinfo=UTC).astimezone(tz)  # the first record's instant
        assert at.tzinfo is not UTC
        assert [m.text for m in memory.as_of(at=at)] == ["a"]
        assert format_time(at) == "0001-01-01T00:00:00.000000Z"


HUGE = 10**5000  # past Python's int-to-text limit (4,300 digits): str() of it raises
HUGE_ANY: Any = HUGE  # where a type checker would refuse an int


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: s.read(HUGE), r"memory id: an int of 16,610 bits has more digits"),
        (lambda s: s.read(("user", -HUGE)), r"memory id: an int of 16,610 bits"),
        (lambda s: s.head(HUGE), r"memory id: an int of 16,610 bits"),
        (lambda s: s.read("a", gt=HUGE), r"read: gt=an int of 16,610 bits is outside 0\.\."),
        (lambda s: s.read("a", limit=-HUGE), r"read: limit=an int of 16,610 bits is outside"),
        (lambda s: s.read_all(gt=-HUGE), r"gt=an int of 16,610 bits is outside"),
        (
            lambda s: MessageWindowChatMemory("a", max_messages=HUGE, store=s),
            r"max_messages must be at most 9223372036854775807, but is: an int of 16,610 bits",
        ),
        (
            lambda s: MessageWindowChatMemory("a", max_messages=-HUGE, store=s),
            r"max_messages must be greater than zero, but is: an int of 16,610 bits",
        ),
    ],
    ids=["id", "tuple-id", "head", "gt", "limit", "read_all", "limit-huge", "limit-negative"],
)
def test_an_int_too_long_to_print_gets_the_error_that_names_it(tmp_path, call, match):
    """Before: Python's own "Exceeds the limit (4300 digits) for integer string conversion",
    raised while building the key or the error message, naming no operation and no value."""
    with SQLiteEventStore(tmp_path / "big.db") as store:
        with pytest.raises(ValueError, match=match):
            call(store)
        assert store.read_all() == []


def test_a_limit_past_64_bits_is_refused_and_one_below_still_works(tmp_path):
    with SQLiteEventStore(tmp_path / "lim.db") as store:
        with pytest.raises(ValueError, match="max_messages must be at most"):
            MessageWindowChatMemory("a", max_messages=2**63, store=store)
        memory = MessageWindowChatMemory("a", max_messages=2**63 - 1, store=store)
        memory.add(UserMessage("kept"))
        assert [m.text for m in memory.messages()] == ["kept"]
        # Check the id limit refuses only ids that could never be stored: 2,048 digits is a
        # key too long for every store (refused as before, by its length), not by this check.
        with pytest.raises(ValueError, match=r"the memory id is a key of 2051 bytes"):
            MessageWindowChatMemory(10**2047, max_messages=2, store=store).add(UserMessage("x"))


def _memory(memory_id: Any) -> MessageWindowChatMemory:
    return MessageWindowChatMemory(memory_id, max_messages=2)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: what_if(s, "m", HUGE_ANY), r"what_if: policy must be a WindowPolicy"),
        (lambda s: what_if(s, "m", MessageWindowPolicy(2), seq=HUGE), r"as_of\(seq=an int of"),
        (lambda s: what_if(s, "m", MessageWindowPolicy(2), valid_for=HUGE_ANY), "valid_for=an"),
        (lambda s: fork(s, "m", "f", seq=HUGE), r"fork of memory 'm' at seq an int of"),
        (lambda s: explain(s, "m", HUGE), r"explain event an int of 16,610 bits"),
        (lambda s: explain(s, "m", 1, HUGE), r"none at index an int of 16,610 bits"),
        (lambda s: diff(s, "m", HUGE, 1), r"=an int of 16,610 bits for memory 'm'"),
        (lambda s: list(walk(s, "m", upto=HUGE)), r"=an int of 16,610 bits for memory 'm'"),
        (lambda s: what_if_call(s, "m", HUGE, MessageWindowPolicy(2)), r"read: gt=an int of"),
        (lambda s: s.erase_subject(("m",), reason="r", batch=-HUGE), r"batch must be an int >= 1"),
        (lambda s: s.prove("m", HUGE), r"an int of 16,610 bits"),
        (lambda s: s.quarantine("m", HUGE, reason="r"), r"an int of 16,610 bits"),
        (lambda s: find_receipt(s, HUGE_ANY), r"erasure receipt id an int of 16,610 bits is not"),
        (lambda s: SQLiteEventStore(HUGE_ANY), r"path must be a file path .* not int"),
        (
            lambda s: ChatMemoryProvider(_memory, max_size=-HUGE),
            r"max_size must be at least 1, but is an int of",
        ),
        (
            lambda s: ChatMemoryProvider(_memory, wait_timeout=-HUGE),
            r"wait_timeout must be positive seconds or None, but is an int of",
        ),
    ],
    ids=[
        "what_if-policy", "what_if-seq", "what_if-valid_for", "fork", "explain-seq",
        "explain-index", "diff", "walk", "what_if_call", "erase_subject-batch", "prove",
        "quarantine", "find_receipt", "sqlite-path", "provider-max_size", "provider-wait",
    ],
)  # fmt: skip
def test_an_int_too_long_to_print_is_named_by_its_size_everywhere(tmp_path, call, match):
    """Before: each failed building its own error message with Python's "Exceeds the limit
    (4300 digits) for integer string conversion", which names neither operation nor value."""
    with SQLiteEventStore(tmp_path / "big.db") as store:
        MessageWindowChatMemory("m", max_messages=3, store=store).add(UserMessage("x"))
        with pytest.raises((TypeError, ValueError), match=match):
            call(store)


@pytest.mark.parametrize(
    ("busy_timeout", "error"),
    [(-1, ValueError), (math.nan, ValueError), (HUGE, ValueError), ("5", TypeError),
     (None, TypeError), (True, TypeError)],
    ids=["negative", "nan", "huge", "str", "none", "bool"],
)  # fmt: skip
def test_a_busy_timeout_that_is_not_seconds_is_refused(tmp_path, busy_timeout, error):
    """Before: -1, nan and True were taken (a nan deadline never passes: a locked file would
    be waited for forever), "5" and None failed with a bare TypeError on the first lock, a
    huge int with an OverflowError."""
    with pytest.raises(error, match="SQLiteEventStore: busy_timeout must be"):
        SQLiteEventStore(tmp_path / "b.db", busy_timeout=busy_timeout)
    with SQLiteEventStore(tmp_path / "b.db", busy_timeout=math.inf) as store:
        assert store.read("m") == []


@pytest.mark.parametrize("now", [True, "2026-01-01", 5, date(2026, 1, 1)])
def test_compact_refuses_a_now_that_is_not_a_datetime(tmp_path, now):
    # Before: AttributeError: 'bool' object has no attribute 'tzinfo'.
    with (
        SQLiteEventStore(tmp_path / "c.db") as store,
        pytest.raises(TypeError, match="compact: now must be an aware datetime"),
    ):
        compact(store, idle_for=timedelta(days=1), now=now)


def _exported(tmp_path: Any) -> tuple[Any, list[str]]:
    store = InMemoryEventStore()
    MessageWindowChatMemory("m", max_messages=3, store=store).add(UserMessage("x"))
    path = tmp_path / "e.jsonl"
    with path.open("w", encoding="utf-8") as f:
        export_jsonl(store, f)
    return path, path.read_text(encoding="utf-8").splitlines(keepends=True)


@pytest.mark.parametrize("given", ["text", "bytes", "binary-file", "list-of-bytes"])
def test_import_refuses_what_is_not_the_lines_of_a_text_file(tmp_path, given):
    """Before: bytes failed with AttributeError ('int' object has no attribute 'find'), a file
    opened in binary mode with a TypeError from str.endswith, a whole str as one character per
    line with a misleading "not a chatledger export"."""
    path, lines = _exported(tmp_path)
    target = SQLiteEventStore(tmp_path / "t.db")
    with path.open("rb") as binary:
        source: Any = {
            "text": "".join(lines),
            "bytes": path.read_bytes(),
            "binary-file": binary,
            "list-of-bytes": [line.encode() for line in lines],
        }[given]
        with pytest.raises(TypeError, match=r"import_jsonl: lines must be the file's lines"):
            import_jsonl(target, source)
    assert target.read_all() == []
    assert import_jsonl(target, lines).records == 1  # the same lines, as text, import


@pytest.mark.parametrize(
    ("option", "error", "match"),
    [
        ({"now": timedelta(days=1)}, TypeError, "at must be a timezone-aware datetime"),
        ({"now": datetime(9999, 12, 31, 23, 59, tzinfo=UTC)}, ValueError, "past the year 9999"),
        ({"skew": timedelta.max}, ValueError, "past the year 9999"),
        ({"skew": timedelta(seconds=-1)}, ValueError, "skew must not be negative"),
        ({"skew": 300}, TypeError, "skew must be a timedelta"),
        ({"max_line": HUGE}, ValueError, "max_line=an int of 16,610 bits is outside 1.."),
        ({"max_line": 0}, ValueError, "max_line=0 is outside 1.."),
        ({"max_depth": HUGE}, ValueError, "max_depth=an int of 16,610 bits is outside"),
        ({"max_depth": "9"}, TypeError, "max_depth must be an int"),
    ],
    ids=["now-timedelta", "now-9999", "skew-max", "skew-negative", "skew-int", "line-huge",
         "line-zero", "depth-huge", "depth-str"],
)  # fmt: skip
def test_import_options_it_cannot_use_are_refused_by_name(tmp_path, option, error, match):
    """Before: AttributeError (now), OverflowError (now + skew past 9999, a huge max_line),
    Python's int-to-text error (a huge max_depth in its own message)."""
    _, lines = _exported(tmp_path)
    target = InMemoryEventStore()
    with pytest.raises(error, match=match):
        import_jsonl(target, lines, **option)
    assert target.read_all() == []


def test_export_to_something_that_is_not_a_stream_is_refused(tmp_path):
    # Before: AttributeError: 'NoneType' object has no attribute 'write'.
    store = InMemoryEventStore()
    with pytest.raises(TypeError, match="export_jsonl: out must be a text stream"):
        export_jsonl(store, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", ["", ".", "dir"])
def test_a_keyring_path_that_is_a_directory_is_a_keyring_error(tmp_path, monkeypatch, path):
    # Before: a bare IsADirectoryError ("[Errno 21] Is a directory: 6", the descriptor).
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dir").mkdir()
    with pytest.raises(KeyringError, match="it is not a regular file"):
        FileKeyring(path)
