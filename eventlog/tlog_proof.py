"""C2SP ``tlog-proof`` bundles: one record's inclusion proof with the signed checkpoint it is
against, in the text format of https://c2sp.org/tlog-proof, checkable offline by any C2SP tool.

::

    c2sp.org/tlog-proof@v1
    extra <base64 of the record's 32 hash bytes: the leaf data>
    index <zero-based leaf index>
    <base64 audit path hash, from the leaf's sibling up; one per line>

    <the checkpoint, verbatim>

The ``extra`` line is not authenticated (the format says so): :func:`verify_tlog_proof` checks
it against the record hash the caller recomputed from the record, when one is given. See
``docs/record-format.md`` section 7.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from eventlog import merkle
from eventlog.checkpoint import Checkpoint, open_checkpoint
from eventlog.ids import MemoryId
from eventlog.ledger import prove
from eventlog.ledger_models import LedgerDigest

if TYPE_CHECKING:
    from eventlog.note import Verifier
    from eventlog.store import EventStore

__all__ = ["TLOG_PROOF_HEADER", "TlogProof", "parse_tlog_proof", "tlog_proof", "verify_tlog_proof"]

TLOG_PROOF_HEADER: Final = "c2sp.org/tlog-proof@v1"
_INDEX = re.compile(r"index (0|[1-9][0-9]{0,19})").fullmatch


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error:
        raw = b""
    if not raw or _b64(raw) != text:
        msg = f"the tlog-proof's {what} {text[:50]!r} is not canonical base64"
        raise ValueError(msg)
    return raw


def _checkpoint_body(note: str) -> Checkpoint:
    body, blank, _ = note.partition("\n\n")
    if not blank:
        msg = "the checkpoint is not a signed note (no blank line before its signatures)"
        raise ValueError(msg)
    return Checkpoint.from_text(body + "\n")


@dataclasses.dataclass(frozen=True, slots=True)
class TlogProof:
    """A parsed ``c2sp.org/tlog-proof@v1`` bundle.

    Attributes:
        index: The zero-based leaf index.
        audit_path: The inclusion proof, hex hashes from the leaf's sibling up.
        checkpoint: The signed checkpoint note, verbatim.
        extra: The opaque extra data (chatledger writes the record's hash bytes), or None.
    """

    index: int
    audit_path: tuple[str, ...]
    checkpoint: str
    extra: bytes | None = None

    def to_text(self) -> str:
        """The bundle text (every line ends with a newline)."""
        lines = [TLOG_PROOF_HEADER]
        if self.extra is not None:
            lines.append(f"extra {_b64(self.extra)}")
        lines.append(f"index {self.index}")
        lines.extend(_b64(bytes.fromhex(h)) for h in self.audit_path)
        note = self.checkpoint if self.checkpoint.endswith("\n") else self.checkpoint + "\n"
        return "\n".join(lines) + "\n\n" + note


def parse_tlog_proof(text: str | bytes) -> TlogProof:
    """Parse a bundle (signatures are not checked here: see :func:`verify_tlog_proof`).

    Raises:
        ValueError: It is not a well-formed ``c2sp.org/tlog-proof@v1`` bundle; the message
            says which line.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    head, blank, note = text.partition("\n\n")
    lines = head.split("\n")
    if not blank or lines[0] != TLOG_PROOF_HEADER:
        msg = f"not a tlog-proof: the first line must be {TLOG_PROOF_HEADER!r}, then the proof"
        raise ValueError(msg)
    rest = lines[1:]
    extra = None
    if rest and rest[0].startswith("extra "):
        extra = _unb64(rest[0].removeprefix("extra "), "extra line")
        rest = rest[1:]
    found = _INDEX(rest[0]) if rest else None
    if found is None:
        msg = "the tlog-proof has no 'index N' line (N decimal, no leading zeros)"
        raise ValueError(msg)
    path = []
    for line in rest[1:]:
        raw = _unb64(line, "proof line")
        if len(raw) != 32:
            msg = f"the tlog-proof's proof line {line[:50]!r} is not a 32-byte hash"
            raise ValueError(msg)
        path.append(raw.hex())
    _checkpoint_body(note)
    return TlogProof(int(found.group(1)), tuple(path), note, extra)


def tlog_proof(store: EventStore, memory_id: MemoryId, seq: int, checkpoint: str) -> str:
    """The bundle proving record ``seq`` of ``memory_id`` against ``checkpoint`` (a signed
    checkpoint of this ledger, e.g. from ``store.sign_checkpoint``).

    Args:
        store: The store holding the record.
        memory_id: The record's memory id.
        seq: The record's seq.
        checkpoint: The signed checkpoint note, copied into the bundle verbatim.

    Returns:
        The bundle text. It carries the record's hash (the ``extra`` line), never its content.

    Raises:
        ValueError: The checkpoint is malformed, is not of this ledger (its root is not the
            ledger's at its size), or was taken before the record.
        LookupError: There is no such record.
        ChainIntegrityError: The stored record does not verify.
    """
    body = _checkpoint_body(checkpoint)
    # prove() reads only a digest's size and root; the rest is what a digest must carry.
    d = LedgerDigest(
        size=body.size,
        root=body.root,
        last_position=body.size,
        recorded_at=datetime.now(UTC),
    )
    proof = prove(store, memory_id, seq, digest=d)
    return TlogProof(
        proof.leaf_index, proof.audit_path, checkpoint, bytes.fromhex(proof.record.hash)
    ).to_text()


def verify_tlog_proof(
    text: str | bytes,
    verifier_key: str | Verifier,
    *,
    record_hash: str | None = None,
    origin: str | None = None,
) -> bool:
    """Check a bundle offline: the checkpoint's signature by ``verifier_key`` (and origin),
    and the inclusion of the leaf in the checkpoint's tree.

    Args:
        text: The bundle.
        verifier_key: The log's verifier key (text or :class:`~eventlog.note.Verifier`).
        record_hash: The record's hash as the caller recomputed it from the record (hex); it
            must equal the ``extra`` line when that is present. None trusts the ``extra`` line
            as the leaf (then the proof says only that *some* record with that hash is in).
        origin: The log name the checkpoint must carry (None: any).

    Returns:
        True if everything holds; False for a malformed bundle, a bad signature, another
        origin, another leaf or a proof that does not reach the root.

    Raises:
        ValueError: ``verifier_key`` is malformed.
    """
    if not isinstance(verifier_key, str):
        verifier = verifier_key
    else:
        from eventlog.note import Verifier

        verifier = Verifier.from_text(verifier_key)
    try:
        bundle = parse_tlog_proof(text)
        body = open_checkpoint(bundle.checkpoint, verifier, origin=origin)
    except (ValueError, UnicodeDecodeError):
        return False
    extra = None if bundle.extra is None else bundle.extra.hex()
    leaf = record_hash if record_hash is not None else extra
    if leaf is None or (extra is not None and leaf != extra):
        return False
    return merkle.verify_inclusion(leaf, bundle.index, body.size, bundle.audit_path, body.root)
