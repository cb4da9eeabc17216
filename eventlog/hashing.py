"""The hash chain: pure functions over the exact stored text of each record.

Each record's hash covers its stream key, seq, kind, schema version, ``recorded_at`` (as the
canonical text the store keeps), its payload, its meta text and the previous record's hash of
the same stream. Editing any stored column of any record - a message, a timestamp, a kind -
therefore breaks the chain at that record, and deleting or reordering records breaks the link
of the next one.

Three record formats (the ``format`` column):

1. SHA-256 over the payload itself (records written before format 2; still read and verified).
2. SHA-256 over a *commitment* instead of the payload: ``commitment = SHA-256(salt || payload)``
   with 16 random bytes of salt (stored as hex) and the payload's UTF-8 bytes. Deleting payload
   and salt later (erasure) leaves the commitment, so the chain and every digest built on it
   still verify, and the random salt keeps the commitment from confirming a guessed payload.
3. Format 2 with HMAC-SHA256 under the store's key instead of SHA-256 for the chain hash, so
   whoever can write the database but lacks the key cannot recompute a valid chain. The
   commitment stays plain SHA-256: the keyed chain covers it, so it cannot be swapped.

Domain separation: a format 1 preimage starts with ``prev_hash``, which :func:`record_problem`
requires to be 64 hex digits; a format 2/3 preimage starts with ``chatledger.v2``/``.v3``,
which are not hex, so no record of one format can pass for a record of another.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from eventlog.ids import memory_id_from_key, memory_key
from eventlog.timetext import format_time, parse_time

if TYPE_CHECKING:
    from eventlog.models import Record

__all__ = [
    "CONTENT_MISMATCH",
    "FORMATS",
    "GENESIS",
    "KEYED_CHAIN",
    "RECEIPT_KINDS",
    "chain_hash",
    "chain_hash_v2",
    "check_stream",
    "commit",
    "first_break",
    "head_mac",
    "key_check_mac",
    "malformed",
    "new_salt",
    "record_hash",
    "record_problem",
    "stored_record_problem",
    "verified_run",
    "verifies",
]

GENESIS = "0" * 64
"""The ``prev_hash`` of the first record of every stream."""

FORMATS = (1, 2, 3)
"""Record formats this code reads (see the module docstring)."""

KEYED_CHAIN = "keyed chain: open the store with chain_key= to verify"
"""The reason given for a format 3 record checked without the key."""

CONTENT_MISMATCH = "stored hash does not match the record's content"
"""The reason given when a record's content is not what its hash (or commitment) covers."""

_SALT_BYTES = 16
_SHA256_BLOCK = 64
_hex64 = re.compile("[0-9a-f]{64}").fullmatch
_hex32 = re.compile("[0-9a-f]{32}").fullmatch
_sha256 = hashlib.sha256
RECEIPT_KINDS = ("memory_erased", "memory_purged")
"""The kinds of an erasure's receipt and a purge's tombstone: they hold no message, so no
erasure ever empties them (nor can content be "put back" into them)."""


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
    """Return the hex SHA-256 of one format 1 record, chained to ``prev_hash``."""
    # One f-string: this runs on every append, and building a tuple to join costs more.
    text = (
        f"{prev_hash}\x1f{len(stream_id)}:{stream_id}\x1f{seq}\x1f{len(kind)}:{kind}"
        f"\x1f{schema_version}\x1f{recorded_at}\x1f{len(payload)}:{payload}"
        f"\x1f{len(meta)}:{meta}"
    )
    return _sha256(text.encode()).hexdigest()


def chain_hash_v2(  # noqa: PLR0917 - mirrors the hashed fields one to one
    prev_hash: str,
    stream_id: str,
    seq: int,
    kind: str,
    schema_version: int,
    recorded_at: str,
    commitment: str,
    meta: str,
    key: bytes | None = None,
) -> str:
    """Return the chain hash of a format 2 record, or of a format 3 record when ``key`` is given
    (HMAC-SHA256 under it). The version tag comes first (see the module docstring), and every
    field but the fixed-width ``prev_hash`` and the integers carries its length."""
    text = _preimage_v2(
        2 if key is None else 3,
        prev_hash,
        stream_id,
        seq,
        kind,
        schema_version,
        recorded_at,
        commitment,
        meta,
    )
    return _keyed_or_plain(text, key)


def _preimage_v2(  # noqa: PLR0917 - mirrors the hashed fields one to one
    version: int,
    prev_hash: str,
    stream_id: str,
    seq: int,
    kind: str,
    schema_version: int,
    recorded_at: str,
    commitment: str,
    meta: str,
) -> bytes:
    """The bytes a format 2 or 3 chain hash covers (``docs/record-format.md``): the one
    definition, shared by writing (:func:`chain_hash_v2`) and the verify pass (:func:`verifies`)."""
    return (
        f"chatledger.v{version}\x1f{prev_hash}\x1f{len(stream_id)}:{stream_id}"
        f"\x1f{seq}\x1f{len(kind)}:{kind}\x1f{schema_version}\x1f{len(recorded_at)}:{recorded_at}"
        f"\x1f{len(commitment)}:{commitment}\x1f{len(meta)}:{meta}"
    ).encode()


@functools.lru_cache(maxsize=16)
def _hmac_states(key: bytes) -> tuple[hashlib._Hash, hashlib._Hash]:
    """HMAC-SHA256 (RFC 2104) with the padded key absorbed once: copying these two states per
    record costs half of ``hmac.digest``, which re-pads the key on every call."""
    if len(key) > _SHA256_BLOCK:
        key = _sha256(key).digest()
    padded = key.ljust(_SHA256_BLOCK, b"\0")
    return (
        _sha256(bytes(b ^ 0x36 for b in padded)),
        _sha256(bytes(b ^ 0x5C for b in padded)),
    )


def _keyed_or_plain(text: bytes, key: bytes | None) -> str:
    """SHA-256 of ``text``, or HMAC-SHA256 under ``key`` (see :func:`_hmac_states`)."""
    if key is None:
        return _sha256(text).hexdigest()
    inner, outer = _hmac_states(key)
    inner = inner.copy()
    inner.update(text)
    outer = outer.copy()
    outer.update(inner.digest())
    return outer.hexdigest()


# A head seal says "seq N with this hash is the LAST record of this memory, and every record up
# to seq E had its content erased": a record's own hash cannot say either, so without it
# deleting the newest records (truncation) would leave a chain that verifies, and content put
# back into an erased record from a backup would match its commitment. Keyed, a forger without
# the key can neither move the head back nor forget the erasure. Its own tag keeps it from
# ever equalling a record hash or another seal.
def head_mac(
    key: bytes | None, stream_id: str, seq: int, head_hash: str, erased_through: int = 0
) -> str:
    """The seal of a memory's head: HMAC-SHA256 under the chain key (SHA-256 without one)."""
    text = (
        f"chatledger.head.v1\x1f{len(stream_id)}:{stream_id}\x1f{seq}\x1f{head_hash}"
        f"\x1f{erased_through}"
    )
    return _keyed_or_plain(text.encode(), key)


def key_check_mac(key: bytes, keyed_since: int, legacy_count: int, legacy_root: str) -> str:
    """The MAC of a version 2 key check value: where keying began and the count and Merkle
    root of the unkeyed records it found (the sealed legacy prefix), so a forger without the
    key can neither add unkeyed records nor change or remove the ones there were."""
    text = (f"chatledger.key-check.v2\x1f{keyed_since}\x1f{legacy_count}\x1f{legacy_root}").encode()
    return _keyed_or_plain(text, key)


def new_salt() -> bytes:
    """16 fresh random bytes for a payload commitment."""
    return os.urandom(_SALT_BYTES)


def commit(salt: bytes, payload: str) -> str:
    """The hex commitment ``SHA-256(salt || UTF-8 payload)``."""
    return _sha256(salt + payload.encode()).hexdigest()


def record_hash(record: Record, key: bytes | None = None) -> str:
    """Recompute the chain hash of a stored record from its stored fields.

    Raises:
        ValueError: The record is format 3 and ``key`` is None, or its format is unknown.
    """
    if record.format not in (1, 2, 3) or (record.format == 3 and key is None):
        msg = f"record_hash of {record.stream_id}#{record.seq}: format {record.format!r} " + (
            "needs the store's key" if record.format == 3 else "is unknown"
        )
        raise ValueError(msg)
    return _chain_digest(record, key)


def _chain_digest(record: Record, key: bytes | None) -> str:
    """The chain hash of a record of a known format (format 3 needs ``key``)."""
    if record.format == 1:
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
    return chain_hash_v2(
        record.prev_hash,
        record.stream_id,
        record.seq,
        record.kind,
        record.schema_version,
        record.recorded_at_text,
        record.commitment,
        record.meta,
        key if record.format == 3 else None,
    )


def record_problem(record: Record, key: bytes | None = None) -> str | None:
    """Check one record on its own: its commitment and its chain hash (keyed with ``key``).

    Cheap by design (one SHA-256 or HMAC, plus one more for a commitment): readers call it on
    every record they serve. Links between records are :func:`check_stream`'s job.

    Returns:
        None when the record verifies, else the reason.
    """
    fmt = record.format
    if not isinstance(record.prev_hash, str) or not _hex64(record.prev_hash):
        return "malformed prev_hash: not 64 lowercase hex digits"
    if fmt not in (1, 2, 3):
        return f"malformed format {fmt!r}: not 1, 2 or 3"
    if fmt == 3 and key is None:
        return KEYED_CHAIN
    if fmt != 1:
        salt = record.salt
        if salt:
            if not _hex32(salt):
                return "malformed salt: not 32 lowercase hex digits"
            if commit(bytes.fromhex(salt), record.stored_payload) != record.commitment:
                # The same words as a chain hash mismatch: either way the stored content is
                # not what was hashed, and tools match this reason.
                return CONTENT_MISMATCH
        elif record.payload:
            return "salt missing: the payload is kept but its salt was deleted"
    if _chain_digest(record, key) != record.hash:
        return CONTENT_MISMATCH
    return None


def stored_record_problem(record: Record, key: bytes | None, keyed_since: int) -> str | None:
    """:func:`record_problem` plus what a ledger's own rules add for a record read from it:
    a positive position, and every record after ``keyed_since`` keyed when ``key`` is given.
    The body of ``EventStore.check``, as a pure function so a worker process can run it."""
    if record.position <= 0:
        # Positions start at 1 in every backend; one at or below 0 was put there by hand,
        # e.g. to slip forged unkeyed records below a keyed ledger's legacy boundary.
        return f"position {record.position} is not positive: the row was moved by hand"
    if key is not None and record.format != 3 and record.position > keyed_since:
        # Without this a forger would rewrite keyed records as format 1 or 2, which need
        # no key; the boundary is covered by the key check value, so it cannot be moved.
        return (
            f"unkeyed record (format {record.format!r}) in a keyed store: it was written "
            "after the store was keyed, so only a forger without the key wrote it"
        )
    return record_problem(record, key)


def verifies(record: tuple[Any, ...], key: bytes | None, keyed_since: int) -> bool:
    """True only when :func:`stored_record_problem` finds nothing, for the common record (format 2
    or 3 with its salt kept); False means "ask :func:`stored_record_problem`", which alone gives
    reasons and handles the rest (format 1, erased content, every kind of damage).

    ``verify(digest=)`` re-checks every record of the log, a million at a time: this is that
    check as one frame over the unpacked row, without the reasons, and 8 % fewer instructions
    per record than :func:`stored_record_problem` (measured with cachegrind). Property tests hold
    it to "True implies no problem" and "a good record is True". ``record`` may be a plain
    tuple in :class:`Record`'s field order (the pass reads rows so).
    """
    # One unpack of all 14 fields: two slices cost 85 ns more per record.
    (
        position, stream_id, seq, at, kind, version, payload, meta,
        prev, digest, salt, commitment, fmt, sealed,
    ) = record  # fmt: skip
    if fmt == 3:
        if key is None:
            return False
    elif fmt != 2 or (key is not None and position > keyed_since):
        return False
    # Anything but text in these columns (a BLOB put there by hand) is left to the slow path.
    if not (type(salt) is type(prev) is type(payload) is type(sealed) is str and salt):
        return False
    # Canonical hex (what _hex32 / _hex64 accept) tested by a round trip: a third of the
    # regular expressions' cost, and the salt's bytes are needed anyway.
    try:
        salt_bytes = bytes.fromhex(salt)
        canonical = (
            len(salt) == 32  # 16 bytes of salt, as hex
            and salt_bytes.hex() == salt
            and len(prev) == 64  # a SHA-256, as hex
            and bytes.fromhex(prev).hex() == prev
        )
    except ValueError:  # not hex at all
        return False
    return bool(
        canonical
        and position > 0
        and _sha256(salt_bytes + (sealed or payload).encode()).hexdigest() == commitment
        and _keyed_or_plain(
            _preimage_v2(fmt, prev, stream_id, seq, kind, version, at, commitment, meta),
            key if fmt == 3 else None,
        )
        == digest
    )


RANGE_ROW_FIELDS = (
    "seq", "recorded_at_text", "kind", "schema_version", "payload", "meta", "prev_hash", "hash",
    "salt", "commitment", "format", "position",
)  # fmt: skip
"""The fields of a range row (``Recorder._range_rows``, :func:`verified_run`), in order: the
record's fields without ``stream_id`` (one key for the whole range), ``payload`` the stored text."""


def verified_run(
    stream_id: str, rows: Sequence[tuple[Any, ...]], key: bytes | None, erased_through: int
) -> int:
    """How many of ``rows`` (consecutive records of ``stream_id``, ascending, shaped as
    :data:`RANGE_ROW_FIELDS`) pass the common case of the read path's per-record checks: each
    row what :func:`verifies` accepts, linked to the row before it (``prev_hash`` equal to that
    row's hash, itself just recomputed), and holding no content its memory's erasure (up to
    seq ``erased_through``) emptied. The first row's own link, the range's seqs and the
    memory's ends are the caller's.

    A row short of the returned count is not necessarily bad: the caller re-checks the range on
    the full path (:func:`eventlog.vouch.vouch`), which gives the reasons and accepts records
    this loop leaves to it (format 1, erased content, unkeyed records of a keyed ledger, which
    only its keyed records bind).

    A whole-history read checks every record it serves: this is :func:`verifies` as one loop
    over bare rows, without building a record per row or calling a function per field (the
    preimage is :func:`_preimage_v2`, the one definition). Property-tested against
    :func:`verifies` and the links of :func:`check_stream`.
    """
    sha, fromhex = _sha256, bytes.fromhex
    previous = ""
    for done, row in enumerate(rows):
        (
            seq, at, kind, version, payload, meta, prev, digest, salt, commitment, fmt, position,
        ) = row  # fmt: skip
        if fmt == 3:
            if key is None:
                return done
        elif fmt != 2 or key is not None:
            return done  # format 1, or an unkeyed record of a keyed ledger: the full path
        if not (type(salt) is type(prev) is type(payload) is str and salt) or position <= 0:
            return done
        if seq <= erased_through and kind not in RECEIPT_KINDS:
            return done  # content back after an erasure, or an erased record: the full path
        try:
            salt_bytes = fromhex(salt)
            if len(salt) != 32 or salt_bytes.hex() != salt:  # 16 bytes, as hex
                return done
            # The link first: a row chained to the one before is chained to a hash just
            # recomputed (canonical hex); only the first row's prev_hash needs the round trip.
            if previous:
                if prev != previous:
                    return done
            elif len(prev) != 64 or fromhex(prev).hex() != prev:  # a SHA-256, as hex
                return done
        except ValueError:  # not hex at all
            return done
        if sha(salt_bytes + payload.encode()).hexdigest() != commitment:
            return done
        text = _preimage_v2(fmt, prev, stream_id, seq, kind, version, at, commitment, meta)
        if (sha(text).hexdigest() if fmt == 2 else _keyed_or_plain(text, key)) != digest:
            return done
        previous = digest
    return len(rows)


def malformed(record: Record) -> str | None:
    """What in a row no store would ever write, or None: a non-canonical stream key or time,
    a non-integer seq, a hash or commitment that is not hex. Pure, never raises."""
    key, when = record.stream_id, record.recorded_at_text
    for name in ("seq", "schema_version", "format"):
        value = getattr(record, name)
        if type(value) is not int:
            return f"malformed {name} {value!r}: not an integer"
    try:
        canonical = isinstance(key, str) and memory_key(memory_id_from_key(key)) == key
    except ValueError:
        canonical = False
    if not canonical:
        return f"malformed stream key {key!r}: not the canonical key of a memory id"
    try:
        good_time = isinstance(when, str) and format_time(parse_time(when)) == when
    except (ValueError, TypeError):
        good_time = False
    if not good_time:
        return f"malformed recorded_at {when!r}: not canonical UTC time text"
    for name in ("hash", "prev_hash"):
        value = getattr(record, name)
        if not isinstance(value, str) or not _hex64(value):
            return f"malformed {name} {value!r}: not 64 lowercase hex digits"
    if record.format not in FORMATS:
        return f"malformed format {record.format!r}: not 1, 2 or 3"
    if record.format != 1 and not _hex64(str(record.commitment)):
        return f"malformed commitment {record.commitment!r}: not 64 lowercase hex digits"
    if record.format != 1 and record.salt and not _hex32(str(record.salt)):
        return f"malformed salt {record.salt!r}: not 32 lowercase hex digits"
    return None


def check_stream(
    records: Iterable[Record],
    problem: Callable[[Record], str | None],
    *,
    full: bool = False,
) -> tuple[tuple[int, str] | None, list[tuple[int, str]]]:
    """Walk one stream: well-formed rows, gapless seqs, links, and ``problem`` per record.

    A stream starts at seq 1 chained to :data:`GENESIS`, or - after a retention purge - at a
    ``memory_purged`` tombstone that chains to the hash of the last erased record.

    Args:
        records: Records of ONE stream in ascending seq order.
        problem: The per-record check (:func:`record_problem` with the store's key).
        full: Check every row for malformed text (:func:`malformed`), and read to the end of
            the stream even after the first failure, for a complete report.

    Returns:
        ``(first failure, malformed rows)``: the first bad ``(seq, reason)`` or None, and
        ``(seq, reason)`` of every malformed row (only with ``full``).
    """
    bad_rows: list[tuple[int, str]] = []
    failure: tuple[int, str] | None = None
    prev_hash: str | None = None
    expected_seq = 0
    for record in records:
        if full:
            odd = malformed(record)
            if odd is not None:
                bad_rows.append((record.seq, odd))
                if failure is None:
                    failure = (record.seq, odd)
        if failure is not None:
            if not full:
                break
            continue
        reason: str | None = None
        if prev_hash is None:
            if record.seq == 1:
                prev_hash = GENESIS
            elif record.kind != "memory_purged":
                reason = f"records before seq {record.seq} are missing"
            else:
                prev_hash = record.prev_hash  # a tombstone start: its link is trusted
        elif record.seq != expected_seq:
            reason = f"seq {expected_seq} is missing (found {record.seq} next)"
        if reason is None and record.prev_hash != prev_hash:
            reason = "prev_hash does not match the previous record's hash"
        if reason is None:
            reason = problem(record)
        if reason is not None:
            failure = (record.seq, reason)
            continue
        prev_hash = record.hash
        expected_seq = record.seq + 1
    return failure, bad_rows


def first_break(records: Iterable[Record], key: bytes | None = None) -> tuple[int, str] | None:
    """Find the first record of one stream that does not verify (see :func:`check_stream`).

    Args:
        records: Records of ONE stream in ascending seq order.
        key: The store's key, to check format 3 records.

    Returns:
        ``(seq, reason)`` of the first bad record, or None when the chain is intact.
    """
    return check_stream(records, lambda r: record_problem(r, key))[0]
