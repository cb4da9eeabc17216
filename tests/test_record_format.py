"""docs/record-format.md is the truth: its test vectors are checked against an implementation
written here from the document's text alone (hashlib and hmac, never eventlog.hashing or
eventlog.merkle), and that implementation is checked against real stores and exports."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import itertools
import json
import pathlib
import re
from typing import Any

import pytest

from eventlog import InMemoryEventStore, SQLiteEventStore
from eventlog.formats.jsonl import export_jsonl
from eventlog.keyring import MemoryKeyring
from eventlog.testing.records import batch

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "record-format.md"
US = "\x1f"
GENESIS = "0" * 64


# ---------------------------------------------------------------- the document's rules


def code_points(text: str) -> int:
    """L(x): the number of Unicode code points (counted without len(), as a stranger would:
    UTF-32 has four bytes per code point)."""
    return len(text.encode("utf-32-le")) // 4


def lp(text: str) -> str:
    return f"{code_points(text)}:{text}"


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def preimage(r: dict[str, Any]) -> str:
    """Sections 2-4."""
    if r["format"] == 1:
        parts = [
            r["prev_hash"],
            lp(r["stream_id"]),
            str(r["seq"]),
            lp(r["kind"]),
            str(r["schema_version"]),
            r["recorded_at"],
            lp(r["payload"]),
            lp(r["meta"]),
        ]
    else:
        parts = [
            f"chatledger.v{r['format']}",
            r["prev_hash"],
            lp(r["stream_id"]),
            str(r["seq"]),
            lp(r["kind"]),
            str(r["schema_version"]),
            lp(r["recorded_at"]),
            lp(r["commitment"]),
            lp(r["meta"]),
        ]
    return US.join(parts)


def commitment(salt_hex: str, payload: str) -> str:
    return hashlib.sha256(bytes.fromhex(salt_hex) + payload.encode("utf-8")).hexdigest()


def record_hash(r: dict[str, Any], key: bytes | None = None) -> str:
    text = preimage(r)
    if r["format"] == 3:
        assert key is not None
        return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()
    return sha256_hex(text)


def seal_preimage(v: dict[str, Any]) -> str:
    parts = [
        "chatledger.head.v1",
        lp(v["stream_id"]),
        str(v["seq"]),
        v["head_hash"],
        str(v["erased_through"]),
    ]
    return US.join(parts)


def leaf_hash(record_hash_hex: str) -> bytes:
    return hashlib.sha256(b"\x00" + bytes.fromhex(record_hash_hex)).digest()


def mth(leaves: list[bytes]) -> bytes:
    """RFC 6962 section 2.1 over leaf *hashes*."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def vectors() -> list[dict[str, Any]]:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```json vector\n(.*?)```", text, flags=re.DOTALL)
    return [json.loads(b) for b in blocks]


# ---------------------------------------------------------------- the vectors


def test_the_document_has_vectors_of_every_kind():
    kinds = [v["vector"] for v in vectors()]
    assert kinds.count("record") >= 4 and "head_seal" in kinds and "merkle" in kinds
    assert {v["format"] for v in vectors() if v["vector"] == "record"} == {1, 2, 3}
    # Check the vectors exercise what the length rule is about: text beyond ASCII and the BMP.
    texts = "".join(v["payload"] + v["stream_id"] for v in vectors() if v["vector"] == "record")
    assert any(ord(c) > 0xFFFF for c in texts) and any(0x7F < ord(c) <= 0xFFFF for c in texts)


@pytest.mark.parametrize("number", range(len(vectors())))
def test_vector(number):
    v = vectors()[number]
    if v["vector"] == "record":
        key = bytes.fromhex(v["key"]) if v.get("key") else None
        assert preimage(v) == v["preimage"]
        if v["format"] != 1 and v["salt"]:
            assert commitment(v["salt"], v["payload"]) == v["commitment"]
        if v["format"] != 1 and not v["salt"]:
            assert v["payload"] == ""  # erased: nothing to commit to
        assert record_hash(v, key) == v["hash"]
    elif v["vector"] == "head_seal":
        text = seal_preimage(v)
        assert text == v["preimage"]
        if v["key"] is None:
            assert sha256_hex(text) == v["seal"]
        else:
            key = bytes.fromhex(v["key"])
            assert hmac.new(key, text.encode(), hashlib.sha256).hexdigest() == v["seal"]
    else:
        leaves = [leaf_hash(h) for h in v["record_hashes"]]
        assert [x.hex() for x in leaves] == v["leaf_hashes"]
        for size, root in v["roots"].items():
            assert mth(leaves[: int(size)]).hex() == root
        root3 = base64.b64encode(mth(leaves)).decode()
        assert root3 == v["root_base64_size_3"]


def test_the_chain_of_the_vectors_links():
    records = [v for v in vectors() if v["vector"] == "record" and "note" not in v]
    assert records[0]["prev_hash"] == GENESIS
    for before, after in itertools.pairwise(records):
        assert after["prev_hash"] == before["hash"] and after["seq"] == before["seq"] + 1
    merkle = next(v for v in vectors() if v["vector"] == "merkle")
    assert merkle["record_hashes"] == [r["hash"] for r in records]


# ---------------------------------------------------------------- against real stores


def _export(store) -> list[dict[str, Any]]:
    out = io.StringIO()
    export_jsonl(store, out)
    return [json.loads(line) for line in out.getvalue().splitlines()[1:]]


def _as_vector(line: dict[str, Any]) -> dict[str, Any]:
    return {**line, "stream_id": line["memory"]}


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_an_export_is_recomputed_from_the_document_alone(tmp_path, keyed):
    key = bytes(range(32)) if keyed else None
    store = SQLiteEventStore(tmp_path / "x.db", chain_key=key)
    store.append("Zoë/会話", batch("Grüße 🌍", "👍🏽 ok"))
    store.append(("user-42", 7), batch("naïve café"))
    store.append("Zoë/会話", batch("日本語"))
    store.erase("Zoë/会話", reason="test", expected_seq=3)
    lines = _export(store)
    # Check every record's commitment and hash, from the fields an export carries.
    for line in lines:
        r = _as_vector(line)
        if r["salt"]:
            assert commitment(r["salt"], r["payload"]) == r["commitment"]
        assert record_hash(r, key) == r["hash"], r
    # Check the ledger tree: leaves sorted by the exported position give the digest's root.
    ordered = sorted(lines, key=lambda line: line["position"])
    d = store.digest()
    assert d.size == len(ordered)
    assert mth([leaf_hash(line["hash"]) for line in ordered]).hex() == d.root
    # Check the head seals as stored beside the records.
    seals = store.db.execute("SELECT stream_id, seq, hash, erased_through, mac FROM heads")
    for stream_id, seq, head_hash, erased, mac in seals.fetchall():
        text = seal_preimage(
            {"stream_id": stream_id, "seq": seq, "head_hash": head_hash, "erased_through": erased}
        )
        expected = (
            sha256_hex(text)
            if key is None
            else hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
        )
        assert mac == expected
    store.close()


def test_a_sealed_payload_is_committed_as_stored():
    store = InMemoryEventStore(keyring=MemoryKeyring())
    store.append("conv", batch("secret ✓"))
    (line,) = _export(store)
    assert "secret" not in line["payload"]  # encrypted at rest: the stored text is exported
    assert commitment(line["salt"], line["payload"]) == line["commitment"]
    assert record_hash(_as_vector(line)) == line["hash"]
