"""Consistency proofs: today's ledger extends yesterday's digest, checked with no database.

A :class:`ConsistencyProof` is RFC 9162 section 2.1.4: the ``O(log n)`` subtree hashes that
tie the root of the first ``old_size`` leaves to the root of ``new_size`` leaves. Whoever kept
an old digest checks a new one against it with :func:`verify_consistency` and nothing else,
then keeps the new digest instead: a chain of such checks covers the whole history.

The check is :func:`eventlog.merkle.verify_consistency`, the RFC's iterative verification
algorithm, which shares no code with the prover's recursion (:meth:`MerkleTree.
consistency_proof`); the tests hold both to a literal recursive reference and to the
Certificate Transparency vectors.

JSON (``chatledger.consistency-proof/1``) writes every hash as base64 of its 32 bytes, as
C2SP and CT tools do; ``chatledger prove --since OLD`` prints the new digest and the proof
as one object, :func:`evidence_json`.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Annotated, Final, Literal, Self

from pydantic import (
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
from eventlog.errors import StaleTreeError
from eventlog.ledger import _ledger_of
from eventlog.ledger_models import LedgerDigest
from eventlog.ledger_tree import LedgerTree

if TYPE_CHECKING:
    from eventlog.store import EventStore

__all__ = [
    "CONSISTENCY_FORMAT",
    "ConsistencyProof",
    "evidence_json",
    "prove_consistency",
    "read_evidence",
    "verify_consistency",
]

CONSISTENCY_FORMAT: Final = "chatledger.consistency-proof/1"

_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)
_Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
_Count = Annotated[int, Field(ge=0)]
_B64_HASH = 44  # characters of base64 for 32 bytes


def _hex(value: object) -> object:
    """A base64 hash (44 characters) as hex; anything else as it is, for the field's error."""
    if isinstance(value, str) and len(value) == _B64_HASH:
        try:
            return base64.b64decode(value, validate=True).hex()
        except ValueError:
            return value
    return value


def _b64(hex_hash: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_hash)).decode("ascii")


class ConsistencyProof(BaseModel):
    """The proof that the ledger tree of ``old_size`` leaves is a prefix of the one of
    ``new_size`` leaves.

    Attributes:
        format: ``"chatledger.consistency-proof/1"``.
        old_size: Leaves of the earlier tree (an old digest's ``size``).
        old_root: Its root, hex (base64 in JSON).
        new_size: Leaves of the later tree, ``>= old_size``.
        new_root: Its root, hex (base64 in JSON).
        hashes: The RFC 9162 proof nodes, hex (a list of base64 in JSON); empty when
            ``old_size`` is 0 or equals ``new_size``.
    """

    model_config = _STRICT
    format: Literal["chatledger.consistency-proof/1"] = CONSISTENCY_FORMAT
    old_size: _Count
    old_root: _Hex64
    new_size: _Count
    new_root: _Hex64
    hashes: tuple[_Hex64, ...]

    @field_validator("old_root", "new_root", mode="before")
    @classmethod
    def _root_from_base64(cls, value: object) -> object:
        return _hex(value)

    @field_validator("hashes", mode="before")
    @classmethod
    def _hashes_from_base64(cls, value: object) -> object:
        if isinstance(value, list | tuple):
            return tuple(_hex(item) for item in value)
        return value

    @field_serializer("old_root", "new_root", when_used="json")
    def _root_to_base64(self, value: str) -> str:
        return _b64(value)

    @field_serializer("hashes", when_used="json")
    def _hashes_to_base64(self, value: tuple[str, ...]) -> list[str]:
        return [_b64(h) for h in value]

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.old_size > self.new_size:
            msg = f"old_size {self.old_size} is above new_size {self.new_size}"
            raise ValueError(msg)
        return self

    def to_json(self) -> str:
        """The proof as compact JSON (what :meth:`from_json` reads)."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> ConsistencyProof:
        """Parse and validate a proof written by :meth:`to_json`.

        Raises:
            ValueError: ``text`` is not JSON of a well-formed consistency proof.
        """
        try:
            return cls.model_validate_json(text)
        except ValidationError as e:
            raise ValueError(_problems("a consistency proof", e)) from None


def _problems(what: str, error: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'text'}: {e['msg']}" for e in error.errors()[:3]
    )
    return f"read {what} from JSON: {problems}; pass the text its to_json() produced"


def prove_consistency(
    store: EventStore, old: LedgerDigest, *, digest: LedgerDigest | None = None
) -> ConsistencyProof:
    """Return the proof that ``store``'s ledger now (or at ``digest``) extends ``old``.

    Args:
        store: The store ``old`` was taken of.
        old: A digest taken earlier.
        digest: Prove up to this later digest of the same store (default: the log now).
            Take it first, then prove against it, so the proof and the digest handed out
            describe the same tree even while writers append.

    The proof comes from this process's ledger tree (derived data, as for ``prove``): it
    proves what the store held when the tree absorbed it, after checking that the newest
    absorbed record is still stored. Whether the stored records still hash to a digest is
    ``store.verify(digest=old)``'s question.

    Returns:
        The proof, which :func:`verify_consistency` checks with the two digests alone.

    Raises:
        ValueError: The ledger is smaller than ``old`` (behind it: rolled back?), or its
            first ``old.size`` records do not hash to ``old.root`` (history changed), or
            ``digest`` is not of this ledger.
        StoreClosedError: The store is closed.
        PersistenceError: The database failed.
    """
    ledger = _ledger_of(store)
    with ledger.lock:
        try:
            return _prove(store, ledger, old, digest)
        except StaleTreeError as e:
            msg = f"prove consistency with the digest of size {old.size}: {e}"
            raise ValueError(msg) from None


def _prove(
    store: EventStore, ledger: LedgerTree, old: LedgerDigest, digest: LedgerDigest | None
) -> ConsistencyProof:
    """:func:`prove_consistency` with the tree's lock held."""
    ledger.absorb(store)
    if not _tail_stored(store, ledger):
        # The newest leaf this process absorbed is gone (an older copy of the database
        # restored under a running process): rebuild from what is stored now.
        ledger.rebuild(store)
        ledger.absorb(store)
    tree = ledger.tree
    new_size = tree.size if digest is None else digest.size
    if digest is not None and (new_size > tree.size or tree.root(new_size) != digest.root):
        msg = (
            f"prove consistency up to the digest of size {new_size}, root {digest.root}: "
            f"the ledger holds {tree.size} records and is not an extension of it; pass "
            "a digest of this store"
        )
        raise ValueError(msg)
    if old.size > new_size:
        msg = (
            f"prove consistency with the digest of size {old.size}: the ledger holds "
            f"{new_size} records, behind the digest: rolled back? Restore the newest "
            "copy of the database, or check which digest belongs to this store"
        )
        raise ValueError(msg)
    if tree.root(old.size) != old.root:
        msg = (
            f"prove consistency with the digest of size {old.size}, root {old.root}: the "
            f"first {old.size} records hash to {tree.root(old.size)}, so the ledger does "
            "not extend it (history changed, or another store's digest); run "
            "store.verify(digest=old) to locate the change"
        )
        raise ValueError(msg)
    return ConsistencyProof(
        old_size=old.size,
        old_root=old.root,
        new_size=new_size,
        new_root=tree.root(new_size),
        hashes=tuple(tree.consistency_proof(old.size, new_size)),
    )


def _tail_stored(store: EventStore, ledger: LedgerTree) -> bool:
    """Whether the last record the cached tree absorbed is still stored, with its hash."""
    if not ledger.size:
        return True
    last = ledger.position_of(ledger.size - 1)
    rows = store.read_all(gt=last - 1, limit=1)
    leaf = ledger.leaf(ledger.size - 1)
    return bool(rows) and rows[0].position == last and leaf == _leaf_of(rows[0].hash)


def _leaf_of(record_hash: str) -> bytes:
    return bytes.fromhex(merkle.leaf_hash(bytes.fromhex(record_hash)))


def verify_consistency(old: LedgerDigest, new: LedgerDigest, proof: ConsistencyProof) -> bool:
    """Check, with no database, that the ledger ``new`` describes extends the one of ``old``.

    Args:
        old: The digest kept from before.
        new: The later digest, as handed out with the proof.
        proof: From :func:`prove_consistency` (``store.prove_consistency(old)``).

    Returns:
        True when the proof names exactly these two trees and ties the old root to the new
        one; False otherwise, including for malformed input of any kind (never raises).
    """
    if not (
        isinstance(old, LedgerDigest)
        and isinstance(new, LedgerDigest)
        and isinstance(proof, ConsistencyProof)
    ):
        return False
    if (proof.old_size, proof.old_root) != (old.size, old.root):
        return False
    if (proof.new_size, proof.new_root) != (new.size, new.root):
        return False
    # Positions only grow, so a later digest of the same store never ends at a lower one.
    if new.last_position < old.last_position:
        return False
    return merkle.verify_consistency(old.size, new.size, old.root, new.root, list(proof.hashes))


def evidence_json(new: LedgerDigest, proof: ConsistencyProof) -> str:
    """One JSON object holding the new digest and the proof: ``{"digest": ..., "proof": ...}``,
    what ``chatledger prove --since`` prints and ``check-consistency`` reads."""
    return json.dumps(
        {"digest": json.loads(new.to_json()), "proof": json.loads(proof.to_json())},
        separators=(",", ":"),
    )


def read_evidence(text: str | bytes) -> tuple[LedgerDigest, ConsistencyProof]:
    """Read what :func:`evidence_json` wrote.

    Raises:
        ValueError: ``text`` is not such an object; the message says what is wrong.
    """
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        msg = (
            f"read consistency evidence: not JSON ({e}); pass what `chatledger prove --since` "
            "printed"
        )
        raise ValueError(msg) from None
    if not isinstance(data, dict) or set(data) != {"digest", "proof"}:
        msg = (
            "read consistency evidence: expected an object with exactly the keys digest and "
            "proof; pass what `chatledger prove --since` printed"
        )
        raise ValueError(msg)
    new = LedgerDigest.from_json(json.dumps(data["digest"]))
    return new, ConsistencyProof.from_json(json.dumps(data["proof"]))
