"""Erasure receipts a regulator can check: find one by its id, hand it out as a file that is
checked offline against a digest kept elsewhere.

A receipt is the ``memory_erased`` record :meth:`EventStore.erase` appends (never erased
itself: it holds no message). Its id is ``"<position>-<hash>"``
(:attr:`~eventlog.models.ErasureReceipt.id`). The file :func:`receipt_bundle` writes holds the
receipt as a person reads it (memory, seqs, count, time, reason), the digest it is proven
against and the inclusion proof of the receipt's record in that ledger; :func:`check_receipt`
needs nothing else, and a digest the checker trusts (or one signed as a checkpoint): the
proof ties the record to the digest's root, the record's hash ties its fields to the proof,
and the fields shown must be the record's own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NoReturn

from eventlog.errors import ChainIntegrityError
from eventlog.ids import memory_id_from_key
from eventlog.keycheck import chain_key_argument
from eventlog.ledger import prove, verify_inclusion
from eventlog.ledger_models import InclusionProof, LedgerDigest
from eventlog.models import ErasureReceipt, MemoryErased, Record
from eventlog.serialization import decode_event
from eventlog.validation import shown

if TYPE_CHECKING:
    from eventlog.checkpoint import Checkpoint
    from eventlog.store import EventStore

__all__ = ["RECEIPT_FORMAT", "ReceiptCheck", "check_receipt", "find_receipt", "receipt_bundle"]

RECEIPT_FORMAT: Final = "chatledger-erasure-receipt"
_VERSION: Final = 1
_ERASED: Final = "memory_erased"
_POSITION = re.compile("[1-9][0-9]{0,18}").fullmatch
_MAX_POSITION = (1 << 63) - 1
_HEX64 = re.compile("[0-9a-f]{64}").fullmatch


def _parse_id(receipt_id: str) -> tuple[int, str]:
    text = receipt_id if isinstance(receipt_id, str) else ""  # anything else is malformed
    position, _, digest = text.partition("-")
    # ASCII digits only: str.isdigit() also takes "\u00b2" (which int() refuses) and the
    # fullwidth digits.
    if not (_POSITION(position) and int(position) <= _MAX_POSITION and _HEX64(digest)):
        msg = (
            f"erasure receipt id {shown(receipt_id)} is not <position>-<64 hex digits>; copy it "
            "from the erase output or `chatledger history` of the memory"
        )
        raise ValueError(msg)
    return int(position), digest


def find_receipt(store: EventStore, receipt_id: str) -> ErasureReceipt:
    """The receipt with this id, read (and verified) from ``store``.

    Raises:
        ValueError: The id is malformed.
        LookupError: No receipt with this id is in the store (another ledger, or purged by
            retention since), naming the remedy.
        ChainIntegrityError: The receipt's record does not verify, or is found at another
            position than its id names (the ledger's order was changed).
    """
    position, digest = _parse_id(receipt_id)
    # By position, not through read_all: a receipt just written is found at once, also while
    # another session's transaction holds PostgreSQL's global order back.
    record = store._record_at(position)
    if record is None or record.hash != digest:
        _missing(store, receipt_id, position, digest, record)
    if record.kind != _ERASED:
        msg = f"erasure receipt {receipt_id}: record {position} is a {record.kind}, not a receipt"
        raise LookupError(msg)
    memory_id = memory_id_from_key(record.stream_id)
    (checked,) = store.read_verified(memory_id, gt=record.seq - 1, lte=record.seq)
    event = decode_event(checked)
    assert isinstance(event, MemoryErased)  # noqa: S101 - kind checked above
    return ErasureReceipt(memory_id, event, checked)


def _missing(
    store: EventStore, receipt_id: str, position: int, digest: str, there: Record | None
) -> NoReturn:
    """Raise what a receipt id that names no record at its position means. Its hash found at
    another position is tampering, not absence: a receipt id names its place in the global
    order (its proof's leaf), and rows do not move. Said as such, so an audit does not read a
    moved receipt as an erasure that never happened."""
    moved = store._position_of(digest)
    found = None if moved is None else store._record_at(moved)
    if found is not None and moved != position and found.kind == _ERASED:
        why = (
            f"erasure receipt {receipt_id}: its record is at position {moved}, not {position}: "
            "the ledger's global order was changed after the receipt was issued (`chatledger "
            "verify --digest FILE` against a digest saved before shows the change)"
        )
        raise ChainIntegrityError(found.stream_id, found.seq, why)
    another = ""
    if there is not None and there.kind == _ERASED:
        another = (
            f"; record {position} is another receipt: another ledger, or that receipt's record "
            "was changed after it was issued (`chatledger verify` shows a change)"
        )
    msg = (
        f"erasure receipt {receipt_id}: this ledger has no such receipt (wrong database, "
        f"or a retention purge removed the memory since{another}); `chatledger history` of "
        "the memory lists its receipts"
    )
    raise LookupError(msg)


def _fields(event: MemoryErased, stream_id: str, receipt_id: str) -> dict[str, Any]:
    return {
        "id": receipt_id,
        "memory": stream_id,
        "first_seq": event.first_seq,
        "last_seq": event.last_seq,
        "record_count": event.record_count,
        "erased_at": event.erased_at.isoformat().replace("+00:00", "Z"),
        "reason": event.reason,
    }


def receipt_bundle(
    store: EventStore, receipt: ErasureReceipt, *, digest: LedgerDigest | None = None
) -> str:
    """The receipt as one JSON object to hand out: its fields, ``digest`` (the store's
    current one by default) and the inclusion proof of its record against that digest.

    Raises:
        ValueError: ``digest`` does not describe this store's history or predates the receipt.
    """
    d = store.digest() if digest is None else digest
    proof = prove(store, receipt.memory_id, receipt.record.seq, digest=d)
    doc = {
        "format": RECEIPT_FORMAT,
        "version": _VERSION,
        "receipt": _fields(receipt.event, receipt.record.stream_id, receipt.id),
        "digest": json.loads(d.to_json()),
        "proof": json.loads(proof.to_json()),
    }
    return json.dumps(doc, ensure_ascii=False)


def _same(real: object, shown: object) -> bool:
    """Equal as JSON values: Python's ``==`` takes ``true`` and ``1.0`` for the seq ``1``,
    which the file would then show in place of the record's own field."""
    return type(real) is type(shown) and real == shown


@dataclass(frozen=True)
class ReceiptCheck:
    """What :func:`check_receipt` found.

    Attributes:
        ok: The receipt is in the ledger the trusted digest describes, as shown.
        reason: Why not (empty when ``ok``).
        receipt: The receipt's fields as the file shows them (empty if unreadable).
    """

    ok: bool
    reason: str
    receipt: dict[str, Any]


def check_receipt(
    text: str | bytes,
    trusted: LedgerDigest | Checkpoint,
    *,
    chain_key: bytes | None = None,
    key: bytes | None = None,
) -> ReceiptCheck:
    """Check a receipt file offline against a digest the checker trusts.

    Args:
        text: What :func:`receipt_bundle` wrote.
        trusted: A digest kept outside the database, or a checkpoint whose signature the
            caller checked (:func:`~eventlog.checkpoint.open_checkpoint`): the file's own
            digest is not trusted, it must name the same tree size and root.
        chain_key: The ledger's chain key, for a keyed ledger (format 3 records tie to
            their hash only under it).
        key: Deprecated name of ``chain_key`` (a :class:`DeprecationWarning`).

    Returns:
        ``ok`` and the reason; never raises for bad input.

    Raises:
        TypeError: Both ``chain_key`` and the deprecated ``key`` are given.
    """
    chain_key = chain_key_argument("check_receipt", chain_key, key)
    try:
        doc = json.loads(text)
        shown = doc["receipt"]
        ok_header = doc.get("format") == RECEIPT_FORMAT and _same(_VERSION, doc.get("version"))
        proof = InclusionProof.from_json(json.dumps(doc["proof"]))
        claimed = LedgerDigest.from_json(json.dumps(doc["digest"]))
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        return ReceiptCheck(False, f"not a chatledger erasure receipt ({e})", {})
    if not ok_header or not isinstance(shown, dict):
        return ReceiptCheck(False, f"not a {RECEIPT_FORMAT} version {_VERSION} file", {})
    if (claimed.size, claimed.root) != (trusted.size, trusted.root):
        return ReceiptCheck(
            False,
            f"the receipt is proven against a ledger of {claimed.size} records, not the "
            f"trusted digest's {trusted.size} (root {trusted.root}): ask for it against that "
            "digest (`chatledger erasure-receipt ID --digest FILE`)",
            shown,
        )
    record = proof.record
    # Checked equal to the trusted size and root above: the file's digest stands for them.
    if not verify_inclusion(proof, claimed, chain_key=chain_key):
        keyed = record.format == 3 and chain_key is None
        why = (
            "its record is from a keyed ledger: pass the ledger's chain key to tie it to its hash"
            if keyed
            else "its record is not in the ledger the digest describes, or was altered"
        )
        return ReceiptCheck(False, why, shown)
    if record.kind != _ERASED or not record.discloses:
        return ReceiptCheck(False, f"the proven record is a {record.kind}, not a receipt", shown)
    event = decode_event(record.to_record())
    assert isinstance(event, MemoryErased)  # noqa: S101 - kind checked above
    position = str(shown.get("id", "")).partition("-")[0]
    # A position is not hashed, so offline only its form and bounds can be checked: positions
    # start at 1 and increase (the record of rank i is at i + 1 or later), and a digest covers
    # every record up to its last_position. Unchecked, any text passed as the id's position.
    last = trusted.last_position if isinstance(trusted, LedgerDigest) else _MAX_POSITION
    if not _POSITION(position) or not proof.leaf_index < int(position) <= last:
        return ReceiptCheck(
            False,
            f"the receipt's id {str(shown.get('id'))[:80]!r} is not <position>-<hash> of its "
            f"record (a position above its rank {proof.leaf_index} and at most {last}); ask "
            "for the receipt again (`chatledger erasure-receipt ID`)",
            shown,
        )
    real = _fields(event, record.stream_id, f"{position}-{record.hash}")
    changed = sorted(k for k in real.keys() | shown.keys() if not _same(real.get(k), shown.get(k)))
    if changed:
        return ReceiptCheck(
            False, f"the receipt shows {', '.join(changed)} other than its record says", shown
        )
    return ReceiptCheck(True, "", shown)
