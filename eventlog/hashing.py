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


# The preimage joins the fields with a unit separator (\x1f) and gives every free-text
# field - stream key, kind, payload, meta - its length first, so no text, whatever characters
# it holds, can shift a boundary and make two different records hash the same input.
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
    # One f-string: this runs on every append, and building a tuple to join costs more.
    text = (
        f"{prev_hash}\x1f{len(stream_id)}:{stream_id}\x1f{seq}\x1f{len(kind)}:{kind}"
        f"\x1f{schema_version}\x1f{recorded_at}\x1f{len(payload)}:{payload}"
        f"\x1f{len(meta)}:{meta}"
    )
    return hashlib.sha256(text.encode()).hexdigest()


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
