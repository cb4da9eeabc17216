"""Ledger digests and inclusion proofs: the whole log as one RFC 9162 Merkle tree.

Anchors: AWS QLDB digests and proofs, Certificate Transparency (RFC 9162). Every record of a
store, in the global committed order (ascending ``position``), is one leaf; the leaf index is
the record's rank in that order, so gaps in positions do not matter. The leaf data is the 32
bytes of the record's ``hash`` (the chain hash that already covers every stored field and the
previous record of its stream); the tree hashes it as ``SHA-256(0x00 || hash bytes)`` like
any RFC 9162 leaf (see :mod:`eventlog.merkle`).

* :func:`digest` returns a :class:`LedgerDigest` (size and root of the tree now) to keep
  outside the store: printed, mailed, published.
* :func:`verify_digest` re-reads the whole log and says whether it is an append-only
  extension of a digest, and if not, what is missing or changed.
* :func:`prove` returns an :class:`InclusionProof`: one record (every hashed field) with its
  audit path, which :func:`verify_inclusion` checks against a digest with no database.

A digest is only as good as where it is kept: one read back from the store it describes
proves nothing. Retention purges (``store.purge``) erase records, so digests taken before a
purge stop verifying; the report says which tombstone explains it.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import threading
import weakref
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Final, Literal, Self

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from eventlog import ledger_scan, merkle
from eventlog.errors import ChainIntegrityError, PersistenceError, ReadOnlyError, StaleTreeError
from eventlog.hashing import record_problem
from eventlog.ids import MemoryId, memory_id_from_key
from eventlog.ledger_tree import BLOCK_LEVEL, LedgerTree, blocks_of
from eventlog.models import Record, VerifyReport, format_time

if TYPE_CHECKING:
    # Only for annotations: the store module imports this one for its digest methods.
    from eventlog.store import EventStore

__all__ = [
    "DigestReport",
    "InclusionProof",
    "LedgerDigest",
    "ProvenRecord",
    "digest",
    "prove",
    "verify_digest",
    "verify_inclusion",
]

DIGEST_FORMAT: Final = "chatledger.ledger-digest/2"
PROOF_FORMAT: Final = "chatledger.inclusion-proof/2"
# Version 1 wrote hashes as hex (and a proof's audit path as one base64 blob). It is still
# read, and upcast to version 2 on the way in, so a model never holds version 1.
DIGEST_FORMAT_V1: Final = "chatledger.ledger-digest/1"
PROOF_FORMAT_V1: Final = "chatledger.inclusion-proof/1"

_PAGE = 50_000
_PURGED = "memory_purged"
# Validators are built on first use, not at import: `import eventlog` stays cheap.
_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)

_Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
_HEX64 = re.compile("[0-9a-f]{64}").fullmatch
_Count = Annotated[int, Field(ge=0)]


# ---------------------------------------------------------------- value objects


def _b64(hex_hash: str) -> str:
    """A 64-digit hex hash as standard base64 of its 32 bytes (44 characters)."""
    return base64.b64encode(bytes.fromhex(hex_hash)).decode("ascii")


def _hex_of(value: object) -> object:
    """A hash read from JSON as hex: base64 of 32 bytes (version 2) becomes hex; anything
    else (hex of version 1, or garbage for the field's own error) passes through as it is.
    The two cannot be confused: base64 of 32 bytes is 44 characters, hex 64."""
    if isinstance(value, str) and len(value) == 44:
        try:
            return base64.b64decode(value, validate=True).hex()
        except ValueError:
            return value
    return value


def _upcast(text: str | bytes, old: str, new: str, hashes: tuple[str, ...]) -> str | bytes:
    """JSON text of version 1 or 2 as the version 2 JSON the model reads, with the hashes
    as the hex the model holds (base64 stays a wire format only).

    Done on the text, not in a model validator: a "before" validator would make pydantic
    validate the fields as Python objects, and strict mode refuses a time given as text there.
    Text that is not a JSON object passes through, for the model's own error message.
    """
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if not isinstance(data, dict):
        return text
    if data.get("format") == old:
        data["format"] = new
    for name in hashes:
        if name in data:
            data[name] = _hex_of(data[name])
    if new == PROOF_FORMAT:
        _fill_leaf_hash(data)
    return json.dumps(data)


def _fill_leaf_hash(data: dict[str, object]) -> None:
    """A version 1 proof has no leaf hash: compute it from the record's hash."""
    if "leaf_hash" in data:
        return
    record = data.get("record")
    record_hash = record.get("hash") if isinstance(record, dict) else None
    if isinstance(record_hash, str) and _HEX64(record_hash):
        data["leaf_hash"] = merkle.leaf_hash(bytes.fromhex(record_hash))


def _validation_message(what: str, error: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'text'}: {e['msg']}" for e in error.errors()[:3]
    )
    more = error.error_count() - 3
    if more > 0:
        problems += f" (and {more} more)"
    return f"read {what} from JSON: {problems}; pass the text its to_json() produced"


class LedgerDigest(BaseModel):
    """The size and root of a store's ledger tree at one moment, to keep outside the store.

    Attributes:
        format: ``"chatledger.ledger-digest/2"`` (version 1 files are read and upcast).
        size: Number of records (leaves) covered.
        root: RFC 9162 root of those leaves, 64 hex digits; in JSON, base64 of the 32 bytes
            (version 1 JSON has hex, which is read too).
        last_position: Position of the last record covered (0 for an empty log); every
            record at or below it is covered, because ``read_all`` never returns a record
            below a position it has returned already.
        recorded_at: When the digest was taken (aware, UTC).
    """

    model_config = _STRICT
    format: Literal["chatledger.ledger-digest/2"] = DIGEST_FORMAT
    size: _Count
    root: _Hex64
    last_position: _Count
    recorded_at: AwareDatetime

    @field_serializer("root", when_used="json")
    def _root_base64(self, root: str) -> str:
        return _b64(root)

    @field_validator("recorded_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)

    @field_serializer("recorded_at")
    def _time_text(self, value: datetime) -> str:
        return format_time(value)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        # Positions start at 1 and strictly increase, so n records end at position n or later.
        if self.size == 0 and (self.root != merkle.EMPTY_ROOT or self.last_position != 0):
            msg = "a digest of size 0 must have the empty root and last_position 0"
            raise ValueError(msg)
        if self.last_position < self.size:
            msg = f"last_position {self.last_position} is below size {self.size}"
            raise ValueError(msg)
        return self

    def to_json(self) -> str:
        """Return the digest as compact JSON (what :meth:`from_json` reads)."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> LedgerDigest:
        """Parse and validate a digest written by :meth:`to_json`.

        Raises:
            ValueError: ``text`` is not JSON of a well-formed digest; the message says which
                field is wrong.
        """
        text = _upcast(text, DIGEST_FORMAT_V1, DIGEST_FORMAT, ("root",))
        try:
            return cls.model_validate_json(text)
        except ValidationError as e:
            raise ValueError(_validation_message("a ledger digest", e)) from None


class ProvenRecord(BaseModel):
    """Every field of a record that its hash covers, as a proof carries it.

    ``recorded_at`` is the exact stored text, because that text (not the instant) is hashed.
    """

    model_config = _STRICT
    stream_id: str
    seq: Annotated[int, Field(ge=1)]
    kind: str
    schema_version: int
    recorded_at: str
    payload: str
    meta: str
    prev_hash: _Hex64
    hash: _Hex64
    # Format 2/3 records hash a salted commitment instead of the payload; format 1 has none.
    salt: str = ""
    commitment: str = ""
    format: Annotated[int, Field(ge=1, le=3)] = 1

    @classmethod
    def of(cls, record: Record, *, disclose: bool = True) -> ProvenRecord:
        """The hashed fields of a stored record.

        Args:
            record: The stored record.
            disclose: False leaves out the payload and its salt, keeping the commitment the
                chain hash covers: the record still ties to its hash, but a holder cannot
                confirm a guessed payload (the salt is 16 random bytes).

        Raises:
            ValueError: ``disclose`` is False for a format 1 record, whose hash covers the
                payload itself.
        """
        if not disclose and record.format == 1:
            msg = (
                f"prove {record.stream_id} seq {record.seq} without disclosing its content: it "
                "is a format 1 record, whose hash covers the payload itself, so a proof must "
                "carry it; prove it with disclose=True, or prove a later (format 2) record"
            )
            raise ValueError(msg)
        return cls(
            stream_id=record.stream_id,
            seq=record.seq,
            kind=record.kind,
            schema_version=record.schema_version,
            recorded_at=record.recorded_at_text,
            payload=record.stored_payload if disclose else "",
            meta=record.meta,
            prev_hash=record.prev_hash,
            hash=record.hash,
            salt=record.salt if disclose else "",
            commitment=record.commitment,
            format=record.format,
        )

    @property
    def discloses(self) -> bool:
        """Whether the payload and its salt are here (False: withheld or erased, and only
        the salted commitment is carried)."""
        return self.format == 1 or bool(self.salt)

    def to_record(self) -> Record:
        """A :class:`Record` of these fields. Its ``position`` is 0: a proof does not carry
        the storage position (it is not hashed); the leaf index orders the ledger instead."""
        return Record(
            0,
            self.stream_id,
            self.seq,
            self.recorded_at,
            self.kind,
            self.schema_version,
            self.payload,
            self.meta,
            self.prev_hash,
            self.hash,
            self.salt,
            self.commitment,
            self.format,
        )

    @property
    def memory_id(self) -> MemoryId:
        """The memory id the stream key was made from."""
        return memory_id_from_key(self.stream_id)


class InclusionProof(BaseModel):
    """A record and the audit path that ties it to the ledger root of one tree size.

    In JSON (version 2) every hash of the tree is base64 of its 32 bytes, as C2SP and CT
    tools write them: ``root``, ``leaf_hash`` and each ``audit_path`` element. The record's
    own fields stay the hex text its hash covers. Version 1 files (hex root, the path as one
    base64 blob or a hex list, no leaf hash) are read and upcast.

    Attributes:
        format: ``"chatledger.inclusion-proof/2"``.
        record: The record's hashed fields (without payload and salt when proved with
            ``disclose=False``).
        leaf_index: The record's rank in the global order.
        tree_size: The size of the tree the proof is against (a digest's ``size``).
        root: That tree's root (a digest's ``root``).
        leaf_hash: The RFC 9162 leaf hash ``SHA-256(0x00 || record hash bytes)``, hex;
            computed from ``record.hash`` when a version 1 file lacks it.
        audit_path: RFC 9162 audit path, sibling hashes from the leaf up, hex.
    """

    model_config = _STRICT
    format: Literal["chatledger.inclusion-proof/2"] = PROOF_FORMAT
    record: ProvenRecord
    leaf_index: _Count
    tree_size: Annotated[int, Field(ge=1)]
    root: _Hex64
    leaf_hash: _Hex64
    audit_path: tuple[_Hex64, ...]

    @field_validator("audit_path", mode="before")
    @classmethod
    def _from_base64(cls, value: object) -> object:
        if isinstance(value, list | tuple):
            # Version 2 lists base64 hashes; version 1 may list hex (strict mode wants a tuple).
            return tuple(_hex_of(item) for item in value)
        if not isinstance(value, str):
            return value
        # Version 1: the raw hashes concatenated as one base64 string.
        try:
            raw = base64.b64decode(value, validate=True)
        except ValueError:
            msg = "audit_path is neither a list of hex hashes nor base64 of 32-byte hashes"
            raise ValueError(msg) from None
        if len(raw) % 32:
            msg = f"audit_path decodes to {len(raw)} bytes, not a whole number of 32-byte hashes"
            raise ValueError(msg)
        return tuple(raw[i : i + 32].hex() for i in range(0, len(raw), 32))

    @field_serializer("audit_path", when_used="json")
    def _to_base64(self, path: tuple[str, ...]) -> list[str]:
        # A third smaller than hex: the path is most of a proof, which stays under 2 KB.
        return [_b64(h) for h in path]

    @field_serializer("root", "leaf_hash", when_used="json")
    def _hash_base64(self, value: str) -> str:
        return _b64(value)

    @model_validator(mode="after")
    def _index_in_tree(self) -> Self:
        if self.leaf_index >= self.tree_size:
            msg = f"leaf_index {self.leaf_index} is not below tree_size {self.tree_size}"
            raise ValueError(msg)
        return self

    def to_json(self) -> str:
        """Return the proof as compact JSON (what :meth:`from_json` reads)."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> InclusionProof:
        """Parse and validate a proof written by :meth:`to_json`.

        Raises:
            ValueError: ``text`` is not JSON of a well-formed proof.
        """
        text = _upcast(text, PROOF_FORMAT_V1, PROOF_FORMAT, ("root", "leaf_hash"))
        try:
            return cls.model_validate_json(text)
        except ValidationError as e:
            raise ValueError(_validation_message("an inclusion proof", e)) from None


@dataclasses.dataclass(frozen=True, slots=True)
class DigestReport:
    """Result of :func:`verify_digest`.

    Attributes:
        ok: True when the log now is an append-only extension of the digest and every
            record's hash and chain link verify.
        message: What was found, naming what is missing or changed.
        digest: The digest checked.
        size: Records in the log now.
        missing: Records the digest covers that the log no longer holds.
        first_difference: ``(stream_id, seq)`` of the first covered record that differs from
            the digest, when it can be located (see :func:`verify_digest`).
        chain: The store's chain verification, run when anything failed (None when ok).
    """

    ok: bool
    message: str
    digest: LedgerDigest
    size: int
    missing: int = 0
    first_difference: tuple[str, int] | None = None
    chain: VerifyReport | None = None


# ---------------------------------------------------------------- the cached tree per store

_LEDGERS: weakref.WeakKeyDictionary[EventStore, LedgerTree] = weakref.WeakKeyDictionary()
_LEDGERS_LOCK = threading.Lock()


def _ledger_of(store: EventStore) -> LedgerTree:
    with _LEDGERS_LOCK:
        ledger = _LEDGERS.get(store)
        if ledger is None:
            ledger = _LEDGERS[store] = LedgerTree()
        return ledger


def _cached_tree_at(store: EventStore, d: LedgerDigest) -> LedgerTree | None:
    """This process's tree of ``store`` if it already holds ``d``'s exact leaves."""
    with _LEDGERS_LOCK:
        ledger = _LEDGERS.get(store)
    if ledger is None:
        return None
    with ledger.lock:
        try:
            if ledger.tree.size >= d.size and ledger.tree.root(d.size) == d.root:
                return ledger
        except StaleTreeError:
            pass
    return None


# ---------------------------------------------------------------- digests


def digest(store: EventStore) -> LedgerDigest:
    """Return the digest of every record ``store`` holds now.

    The tree is kept in the database a block of 256 records at a time (see
    :mod:`eventlog.ledger_tree`), so even the first call in a process reads only the stored
    blocks and the records after the last one; later calls read only the records committed
    since. The digest covers the stored hashes as they are: check content with
    :func:`verify_digest` or ``store.verify()``.

    Args:
        store: Any event store.

    Returns:
        The size, root and last position of the log, and the time taken.

    Raises:
        StoreClosedError: The store is closed.
        PersistenceError: The database failed.
    """
    ledger = _ledger_of(store)
    with ledger.lock:
        ledger.absorb(store)
        return LedgerDigest(
            size=ledger.tree.size,
            root=ledger.tree.root(),
            last_position=ledger.last_position,
            recorded_at=datetime.now(UTC),
        )


def _first_difference(fresh: merkle.MerkleTree, cached: LedgerTree, size: int) -> int:
    """Index of the first of ``size`` leaves where ``fresh`` and ``cached`` differ.

    A binary search over prefix roots: the first ``k`` leaves of two trees agree exactly when
    their roots of size ``k`` do, so ``O(log^2 n)`` node lookups find the first change.
    Returns ``size`` when the first ``size`` leaves agree.
    """
    lo, hi = 0, size  # invariant: the prefixes of lo leaves agree; of hi leaves, maybe not
    with cached.lock:
        if fresh.root(hi) == cached.tree.root(hi):
            return size
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fresh.root(mid) == cached.tree.root(mid):
                lo = mid
            else:
                hi = mid
    return hi - 1


def _locate(
    store: EventStore, d: LedgerDigest, fresh: merkle.MerkleTree, scan: ledger_scan.Scan
) -> tuple[str | None, tuple[str, int] | None]:
    """Name the first covered record that changed, when this process's tree holds ``d``.

    Returns:
        A sentence for the report (None when it cannot tell) and ``(stream_id, seq)`` of the
        first changed record (None when it was deleted rather than changed).
    """
    cached = _cached_tree_at(store, d)
    if cached is None:
        return None, None
    common = min(d.size, fresh.size)
    try:
        index = _first_difference(fresh, cached, common)
        with cached.lock:
            was_at = cached.position_of(index) if index < d.size else None
    except StaleTreeError:
        # The stored blocks were built from the records as they were: their lower levels
        # cannot be recomputed now, so the change is not located beyond the chain checks.
        return None, None
    if index == common:
        if was_at is None:
            return None, None
        gone = f"the last {d.size - common} digested records, from leaf {index} (position "
        return gone + f"{was_at}) on, are gone", None
    rows = store.read_all(gt=scan.positions[index - 1] if index else 0, limit=1)
    if not rows:  # deleted since the pass: nothing left to name
        return None, None
    now = rows[0]
    where = f"leaf {index}: {now.stream_id} seq {now.seq} at position {now.position}"
    if now.position == was_at:
        return f"the first difference is {where}, which was changed", (now.stream_id, now.seq)
    if was_at is not None and now.position > was_at:
        return (
            f"the first difference is {where}: the record digested at position {was_at} is gone",
            None,
        )
    return f"the first difference is {where}, which was inserted", (now.stream_id, now.seq)


def verify_digest(store: EventStore, d: LedgerDigest) -> DigestReport:
    """Check that the log now is an append-only extension of the log ``d`` was taken of.

    Re-reads every record (never a cached tree): the first ``d.size`` records in global
    order must hash to ``d.root``, every record's hash must match its fields and every
    stream's chain must link. When something fails, ``store.verify()`` names the broken
    chains, and when this process built the tree ``d`` came from, the first changed record
    is located exactly; a fresh process can only locate changes that break a chain.

    Args:
        store: The store the digest was taken of.
        d: The digest, e.g. ``LedgerDigest.from_json(text_kept_elsewhere)``.

    Returns:
        A report with ``.ok`` and a message naming what is missing or changed.

    Raises:
        StoreClosedError: The store is closed.
        PersistenceError: The database failed.
    """
    generation = store._tree_generation()  # before any record is read: see _store_fresh_tree
    scan, fresh = ledger_scan.scan(store, d.last_position, d.size)
    problems = _count_problems(d, scan)
    if fresh.size == d.size and (root_now := fresh.root()) != d.root:
        problems.append(
            f"the first {d.size} records hash to root {root_now}, not the digest's {d.root}: "
            "history was changed"
        )
    first: tuple[str, int] | None = None
    if problems:
        sentence, first = _locate(store, d, fresh, scan)
        if sentence is not None:
            problems.append(sentence)
    stale = _stale_block(store, fresh)
    if scan.bad is None and not problems:
        message = (
            f"the log ({scan.size} records) is an append-only extension of the digest "
            f"({d.size} records, root {d.root})"
        )
        if stale is not None:
            # The records verify and the stored tree (derived data) does not: replace it.
            if _store_fresh_tree(store, fresh, scan, generation):
                message += f"; the stored ledger tree was rebuilt: its block {stale} was wrong"
            else:
                message += (
                    f"; the stored ledger tree's block {stale} is wrong (derived data, not "
                    "the records): open the store writable and verify again to rebuild it"
                )
        return DigestReport(ok=True, message=message, digest=d, size=scan.size)
    if stale is not None:
        problems.append(
            f"the stored ledger tree's block {stale} does not match the records: they were "
            "rewritten after the tree stored it, and proofs of its records are refused"
        )
    if first is None and scan.bad is not None and scan.bad.position <= d.last_position:
        first = (scan.bad.stream_id, scan.bad.seq)
    chain = store.verify()
    problems.extend(
        f"the chain of {key} breaks at seq {seq}: {reason}"
        for key, (seq, reason) in list(chain.failures.items())[:3]
    )
    if scan.bad is not None and chain.ok:
        # Only a record changed between the pass and verify() gets here; name it anyway.
        problems.append(f"{scan.bad.stream_id} seq {scan.bad.seq} did not verify")
    message = (
        "; ".join(problems)
        + ". Restore the records from a backup, or compare with digests kept elsewhere"
    )
    return DigestReport(
        ok=False,
        message=message,
        digest=d,
        size=scan.size,
        missing=max(0, d.size - scan.covered),
        first_difference=first,
        chain=chain,
    )


def _stale_block(store: EventStore, fresh: merkle.MerkleTree) -> int | None:
    """The first stored tree block that the records just re-hashed do not give, if any."""
    for block in store._tree_blocks()[1]:
        node = fresh.node(BLOCK_LEVEL, block.block) if type(block.block) is int else None
        if node is None:
            return None  # past the records the digest covers: not compared
        if node != block.node:
            return block.block
    return None


def _store_fresh_tree(
    store: EventStore, fresh: merkle.MerkleTree, scan: ledger_scan.Scan, generation: int
) -> bool:
    """Replace the stored blocks with the ones of ``fresh``, built from verified records,
    unless a purge happened since the pass began (then the next digest rebuilds anyway).
    Returns whether they were replaced."""
    rows = blocks_of(store, fresh, scan.positions)
    try:
        stored = store._save_tree_blocks(rows, replace=True, generation=generation)
    except (PersistenceError, ReadOnlyError):
        return False
    with _LEDGERS_LOCK:
        _LEDGERS.pop(store, None)  # this process's tree came from the wrong blocks
    return bool(stored)


def _records(count: int, *, verb: bool = False) -> str:
    """``1 record``, ``2 records`` (``1 record is``, ``2 records are`` with ``verb``)."""
    text = f"{count} record{'' if count == 1 else 's'}"
    return f"{text} {'is' if count == 1 else 'are'}" if verb else text


def _count_problems(d: LedgerDigest, scan: ledger_scan.Scan) -> list[str]:
    """What the record counts alone tell: covered records missing, or records inserted."""
    problems = []
    if scan.size < d.size:
        problems.append(
            f"the log holds {_records(scan.size)} but the digest covers {d.size}: "
            f"{_records(d.size - scan.size, verb=True)} missing"
        )
    elif scan.covered < d.size:
        problems.append(
            f"{d.size - scan.covered} of the digest's {d.size} records (positions up to "
            f"{d.last_position}) are missing"
        )
    elif scan.covered > d.size:
        problems.append(
            f"{scan.covered - d.size} records appeared at positions up to {d.last_position} "
            "after the digest was taken"
        )
    if scan.covered < d.size and scan.purges:
        names = ", ".join(f"{r.stream_id} (tombstone seq {r.seq})" for r in scan.purges[:3])
        problems.append(f"retention purges since the digest erased records of {names}")
    return problems


# ---------------------------------------------------------------- proofs


def prove(
    store: EventStore,
    memory_id: MemoryId,
    seq: int,
    *,
    digest: LedgerDigest | None = None,
    disclose: bool = True,
) -> InclusionProof:
    """Return the proof that record ``seq`` of ``memory_id`` is in the ledger.

    Args:
        store: The store holding the record.
        memory_id: The record's memory id.
        seq: The record's seq.
        digest: Prove against this digest's size (the record must be covered by it);
            None proves against the log now (``proof.tree_size`` and ``proof.root`` name
            that tree; check it against a digest of the same size).
        disclose: False carries the record's salted commitment instead of its payload and
            salt: the proof verifies the same way, but its holder learns nothing of the
            content and cannot confirm a guess. Hand out this one unless the holder must
            read the message (and may keep it after an erasure).

    Returns:
        The proof, which :func:`verify_inclusion` checks with the digest alone.

    Raises:
        LookupError: The memory id has no record ``seq``.
        ValueError: ``digest`` does not describe this store's history, or does not cover
            the record; or ``disclose`` is False for a format 1 record.
        ChainIntegrityError: The stored record does not match its hash, or is not the one
            the ledger tree holds (changed behind the store's back).
    """
    key = store.stream_key(memory_id)
    found = store.read(memory_id, gt=seq - 1, lte=seq) if seq >= 1 else []
    if not found:
        msg = (
            f"prove {key} seq {seq}: no such record; pass a seq between 1 and the memory's "
            "head seq (store.head(memory_id))"
        )
        raise LookupError(msg)
    record = found[0]
    proven = ProvenRecord.of(record, disclose=disclose)
    problem = store.check(record)
    if problem is not None:
        raise ChainIntegrityError(key, seq, f"{problem}; nothing to prove")
    ledger = _ledger_of(store)
    with ledger.lock:
        try:
            index, size, path, root = _audit_path(
                store, ledger, key=key, seq=seq, record=record, digest=digest
            )
        except StaleTreeError as e:
            raise ChainIntegrityError(key, seq, str(e)) from None
    return InclusionProof(
        record=proven,
        leaf_index=index,
        tree_size=size,
        root=root,
        leaf_hash=merkle.leaf_hash(bytes.fromhex(record.hash)),
        audit_path=tuple(path),
    )


def _audit_path(
    store: EventStore,
    ledger: LedgerTree,
    *,
    key: str,
    seq: int,
    record: Record,
    digest: LedgerDigest | None,
) -> tuple[int, int, list[str], str]:
    """``(leaf index, tree size, audit path, root)`` of ``record``; the caller holds the lock."""
    ledger.absorb(store)
    tree = ledger.tree
    size = tree.size if digest is None else digest.size
    if digest is not None and (size > tree.size or tree.root(size) != digest.root):
        msg = (
            f"prove {key} seq {seq} against digest of size {digest.size}, root "
            f"{digest.root}: the log holds {tree.size} records and is not an extension "
            "of it; run verify_digest(store, digest), or pass this store's digest"
        )
        raise ValueError(msg)
    index = ledger.index_of(record.position)
    leaf = None if index is None else ledger.leaf(index)
    if index is None:
        raise ChainIntegrityError(key, seq, f"position {record.position} is not in the ledger tree")
    if leaf != merkle.hash_leaf(bytes.fromhex(record.hash)):
        raise ChainIntegrityError(
            key, seq, "the stored record changed after the ledger tree absorbed it"
        )
    if index >= size:
        msg = (
            f"prove {key} seq {seq} against digest of size {size}: the record is leaf "
            f"{index}, appended after the digest; take a new digest"
        )
        raise ValueError(msg)
    return index, size, tree.inclusion_proof(index, size), tree.root(size)


def verify_inclusion(proof: InclusionProof, d: LedgerDigest, *, key: bytes | None = None) -> bool:
    """Check, with no database, that ``proof``'s record is in the ledger ``d`` describes.

    Recomputes the record's payload commitment (when the proof discloses the payload) and
    hash from the fields the proof carries, checks its leaf hash, and checks the audit path
    against ``d.root`` at ``d.size``. A proof made for another tree size does not verify:
    prove with ``prove(..., digest=d)``.

    Args:
        proof: From :func:`prove`.
        d: A digest kept outside the database.
        key: The store's key, needed for a record of a keyed chain (format 3): without it
            the record's content cannot be tied to its hash, so the proof does not verify.

    Returns:
        True if the proof holds; False otherwise, including for malformed input of any kind.
    """
    if not isinstance(proof, InclusionProof) or not isinstance(d, LedgerDigest):
        return False
    if proof.tree_size != d.size or proof.root != d.root:
        return False
    record = proof.record
    if record_problem(record.to_record(), key) is not None:
        return False
    if proof.leaf_hash != merkle.leaf_hash(bytes.fromhex(record.hash)):
        return False
    return merkle.verify_inclusion(
        record.hash, proof.leaf_index, d.size, list(proof.audit_path), d.root
    )
