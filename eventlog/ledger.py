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

The value objects and their JSON formats are :mod:`eventlog.ledger_models`; this module holds
the operations.

A digest is only as good as where it is kept: one read back from the store it describes
proves nothing. Retention purges (``store.purge``) erase records, so digests taken before a
purge stop verifying; the report says which tombstone explains it.
"""

from __future__ import annotations

import threading
import weakref
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from eventlog import ledger_scan, merkle
from eventlog.errors import ChainIntegrityError, PersistenceError, ReadOnlyError, StaleTreeError
from eventlog.hashing import record_problem
from eventlog.ids import MemoryId
from eventlog.keycheck import chain_key_argument
from eventlog.ledger_models import DigestReport, InclusionProof, LedgerDigest, ProvenRecord
from eventlog.ledger_tree import BLOCK_LEVEL, LedgerTree, blocks_of
from eventlog.models import Record
from eventlog.validation import shown
from eventlog.vouch import erased_bound, restored

if TYPE_CHECKING:
    # Only for annotations: the store module imports this one for its digest methods.
    from eventlog.store import EventStore

# The value objects live in eventlog.ledger_models; they are exported here too, because this
# module is where the store and code outside have always imported them from.
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


_PAGE = 50_000
_PURGED = "memory_purged"


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


def digest(store: EventStore, *, save: bool = True) -> LedgerDigest:
    """Return the digest of every record ``store`` holds now.

    The tree is kept in the database a block of 256 records at a time (see
    :mod:`eventlog.ledger_tree`), so even the first call in a process reads only the stored
    blocks and the records after the last one; later calls read only the records committed
    since. The digest covers the stored hashes as they are: check content with
    :func:`verify_digest` or ``store.verify()``.

    Args:
        store: Any event store.
        save: False: write nothing, not even the tree's blocks (a reader such as the inspector,
            which promises not to write; a later call saves them).

    Returns:
        The size, root and last position of the log, and the time taken.

    Raises:
        StoreClosedError: The store is closed.
        PersistenceError: The database failed.
    """
    ledger = _ledger_of(store)
    with ledger.lock:
        ledger.absorb(store, save=save)
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
        LookupError: The memory id has no record ``seq``, or the ledger tree does not reach
            it yet (PostgreSQL: a transaction still running in the database holds it back).
        ValueError: ``digest`` does not describe this store's history, or does not cover
            the record; or ``disclose`` is False for a format 1 record.
        ChainIntegrityError: The stored record does not match its hash, or is not the one
            the ledger tree holds (changed behind the store's back).
    """
    key = store.stream_key(memory_id)
    found = store.read(memory_id, gt=seq - 1, lte=seq) if seq >= 1 else []
    if not found:
        msg = (
            f"prove {key} seq {shown(seq)}: no such record; pass a seq between 1 and the memory's "
            "head seq (store.head(memory_id))"
        )
        raise LookupError(msg)
    record = found[0]
    proven = ProvenRecord.of(record, disclose=disclose)
    # Its own check, and its memory's erasure seal: content put back into an erased record
    # from a backup matches its commitment, and a proof discloses the content by default.
    problem = store.check(record) or restored(record, erased_bound(store._head_seal(key)))
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
    if index is None and record.position > ledger.last_position:
        # Not tampering: PostgreSQL's tree grows only below the oldest transaction still
        # running anywhere in the database (read_all's watermark), which holds this one back.
        msg = (
            f"prove {key} seq {seq}: the record (position {record.position}) is not in the "
            "ledger tree yet: a transaction still running in the database holds the tree "
            "below it; retry once that transaction ends"
        )
        raise LookupError(msg)
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


def verify_inclusion(
    proof: InclusionProof,
    d: LedgerDigest,
    *,
    chain_key: bytes | None = None,
    key: bytes | None = None,
) -> bool:
    """Check, with no database, that ``proof``'s record is in the ledger ``d`` describes.

    Recomputes the record's payload commitment (when the proof discloses the payload) and
    hash from the fields the proof carries, checks its leaf hash, and checks the audit path
    against ``d.root`` at ``d.size``. A proof made for another tree size does not verify:
    prove with ``prove(..., digest=d)``.

    Args:
        proof: From :func:`prove`.
        d: A digest kept outside the database.
        chain_key: The ledger's chain key, needed for a record of a keyed chain (format 3):
            without it the record's content cannot be tied to its hash, so the proof does not
            verify.
        key: Deprecated name of ``chain_key`` (a :class:`DeprecationWarning`).

    Returns:
        True if the proof holds; False otherwise, including for malformed input of any kind.

    Raises:
        TypeError: Both ``chain_key`` and the deprecated ``key`` are given.
    """
    chain_key = chain_key_argument("verify_inclusion", chain_key, key)
    if not isinstance(proof, InclusionProof) or not isinstance(d, LedgerDigest):
        return False
    if proof.tree_size != d.size or proof.root != d.root:
        return False
    record = proof.record
    if record_problem(record.to_record(), chain_key) is not None:
        return False
    if proof.leaf_hash != merkle.leaf_hash(bytes.fromhex(record.hash)):
        return False
    return merkle.verify_inclusion(
        record.hash, proof.leaf_index, d.size, list(proof.audit_path), d.root
    )
