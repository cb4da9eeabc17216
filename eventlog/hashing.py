"""The hash chain: pure functions over the exact stored text of each record.

Each record's SHA-256 covers its stream key, seq, kind, schema version, ``recorded_at`` (as the
canonical text the store keeps), the stored payload and meta text, and the previous record's hash
of the same stream. Editing any stored column of any record - a message, a timestamp, a kind -
therefore breaks the chain at that record, and deleting or reordering records breaks the link
of the next one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eventlog.models import Record

__all__ = ["GENESIS", "chain_hash", "first_break", "record_hash"]

GENESIS = "0" * 64
"""The ``prev_hash`` of the first record of every stream."""

# Unit separator: cannot occur in a stream key (JSON escapes control characters), a kind,
# a number or a timestamp, so the fields before the payload are unambiguous; the payload
# and meta are length-prefixed so no text can shift the boundary between them.
_SEP = "\x1f"


def chain_hash(  # noqa: PLR0917 - mirrors the hashed fields one to one
    prev_hash: str,
    stream_id: str,
    seq: int,
    kind: str,
    schema_version: int,
    recorded_at: str,
    payload: str,
    meta: str,
) -> str:
    """Return the hex SHA-256 of one record, chained to ``prev_hash``."""
    head = _SEP.join(
        (
            prev_hash,
            stream_id,
            str(seq),
            kind,
            str(schema_version),
            recorded_at,
            str(len(payload)),
            str(len(meta)),
        )
    )
    return hashlib.sha256(f"{head}{_SEP}{payload}{_SEP}{meta}".encode()).hexdigest()


def record_hash(record: Record) -> str:
    """Recompute the hash of a stored record from its stored fields."""
    return chain_hash(
        record.prev_hash,
        record.stream_id,
        record.seq,
        record.kind,
        record.schema_version,
        record.recorded_at_text,
        record.payload,
        record.meta,
    )


def first_break(records: Iterable[Record]) -> tuple[int, str] | None:
    """Find the first record of one stream whose chain does not verify.

    A stream starts at seq 1 chained to :data:`GENESIS`, or - after a retention purge - at a
    ``memory_purged`` tombstone that chains to the hash of the last erased record.

    Args:
        records: Records of ONE stream in ascending seq order.

    Returns:
        ``(seq, reason)`` of the first bad record, or None when the chain is intact.
    """
    prev_hash: str | None = None
    expected_seq = 0
    for record in records:
        if prev_hash is None:
            if record.seq == 1:
                prev_hash = GENESIS
            elif record.kind != "memory_purged":
                return record.seq, f"records before seq {record.seq} are missing"
            else:
                prev_hash = record.prev_hash
        elif record.seq != expected_seq:
            return record.seq, f"seq {expected_seq} is missing (found {record.seq} next)"
        if record.prev_hash != prev_hash:
            return record.seq, "prev_hash does not match the previous record's hash"
        if record_hash(record) != record.hash:
            return record.seq, "stored hash does not match the record's content"
        prev_hash = record.hash
        expected_seq = record.seq + 1
    return None
