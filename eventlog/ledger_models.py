"""The ledger's value objects: :class:`LedgerDigest`, :class:`InclusionProof` (with the
:class:`ProvenRecord` it carries) and :class:`DigestReport`, with their JSON formats.

A digest and a proof are kept outside the store and read back later, perhaps by another
version of chatledger: each has a versioned JSON form (``to_json`` / ``from_json``), strict
models (``extra="forbid"``, no coercion), and version 1 files are upcast to version 2 on the
way in, so a model never holds version 1. The operations that make and check them (digest,
verify, prove) are :mod:`eventlog.ledger`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from datetime import UTC, datetime
from typing import Annotated, Final, Literal, Self

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

from eventlog import merkle
from eventlog.ids import MemoryId, memory_id_from_key
from eventlog.models import Record, VerifyReport, format_time

__all__ = [
    "DIGEST_FORMAT",
    "PROOF_FORMAT",
    "DigestReport",
    "InclusionProof",
    "LedgerDigest",
    "ProvenRecord",
]

DIGEST_FORMAT: Final = "chatledger.ledger-digest/2"
PROOF_FORMAT: Final = "chatledger.inclusion-proof/2"
# Version 1 wrote hashes as hex (and a proof's audit path as one base64 blob). It is still
# read, and upcast to version 2 on the way in, so a model never holds version 1.
DIGEST_FORMAT_V1: Final = "chatledger.ledger-digest/1"
PROOF_FORMAT_V1: Final = "chatledger.inclusion-proof/1"

# Validators are built on first use, not at import: `import eventlog` stays cheap.
_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)

_Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
_HEX64 = re.compile("[0-9a-f]{64}").fullmatch
_Count = Annotated[int, Field(ge=0)]


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
    except (ValueError, RecursionError):
        # Nested too deeply for json (a hostile file): pydantic's own parser refuses it
        # with a ValueError naming the problem.
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
        try:
            return value.astimezone(UTC)
        except OverflowError:  # e.g. 0001-01-01T00:00+01:00, before year 1 in UTC
            msg = f"{value.isoformat()} is outside the years 1-9999 in UTC"
            raise ValueError(msg) from None

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
