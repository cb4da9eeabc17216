"""The read path's checks: nothing a store returns to be shown or used is served unless the
chain vouches for it, whether or not anyone ever runs ``verify()``.

A read of a range of one memory (:meth:`EventStore.read_verified`) refuses, with
:class:`~eventlog.errors.ChainIntegrityError` naming the memory, the seq and the remedy:

* a record whose own hash or payload commitment does not verify (an edited row);
* a missing seq inside the range, or records out of order (a deleted or moved row);
* a link inside the range that does not join (a row replaced by one chained elsewhere);
* a head that is not the sealed one (:func:`eventlog.hashing.head_mac`): a truncated tail,
  or the whole memory deleted;
* a first record that is not seq 1 chained to genesis (or a purge's tombstone): deleted rows
  at the start, even outside the range read;
* content in a record the memory's erasure seal says was erased (content put back from a
  backup: it matches the commitment, so only the seal can tell);
* in a keyed ledger, an unkeyed record that the keyed chain does not bind: the memory is then
  walked once from its first record to its sealed head.

So the checks stay cheap: each read costs the records it returns, the seal, and (when the range
does not start there) the first record - independent of the history's length.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from eventlog.errors import ChainIntegrityError
from eventlog.hashing import (
    GENESIS,
    KEYED_CHAIN,
    RECEIPT_KINDS,
    check_stream,
    head_mac,
    verified_run,
)
from eventlog.models import HeadSeal, Record

if TYPE_CHECKING:
    from eventlog.store import EventStore

__all__ = [
    "NO_SEALS",
    "REMEDY",
    "Ends",
    "erased_bound",
    "head_problem",
    "records_gone",
    "restored",
    "seal_not_int",
    "seal_problem",
    "vouch",
    "vouch_rows",
]

REMEDY = (
    "not served; run `chatledger verify` to list every break, then restore the database from a "
    "backup (or from an export taken before the damage)"
)
_PURGED = "memory_purged"
_MOVING_HEAD_TRIES = 20  # looks at ends another writer keeps moving, before giving up
Ends = tuple[HeadSeal | None, Record | None, Record | None]
"""A memory's seal, first record and newest record (see ``EventStore._ends``)."""
NO_SEALS = HeadSeal(-1, "", "")
"""What a backend's ``_head_seal`` returns for a database from before head seals, opened
without migrating it (read-only): reads check all but the head."""


def _refuse(key: str, seq: int, reason: str) -> ChainIntegrityError:
    if reason.startswith(KEYED_CHAIN):
        # Not damage: a store opened without the chain key cannot check a keyed record, and
        # "restore from a backup" would send the reader after a loss that did not happen.
        return ChainIntegrityError(
            key,
            seq,
            f"{reason}; not served (nothing is known to be damaged: the CLI takes --key-file)",
        )
    return ChainIntegrityError(key, seq, f"{reason}; {REMEDY}")


def seal_problem(store: EventStore, key: str, seal: HeadSeal) -> str | None:
    """Why ``seal`` is not a valid seal of ``key`` under the store's key, or None."""
    if not seal.mac:
        return (
            "its head seal is missing (written before head seals and never sealed by a "
            "writable open, or removed)"
        )
    if store._keyed_db and store._key is None:
        return KEYED_CHAIN  # sealed under the chain key: only a store given it can check
    if seal.mac != head_mac(store._key, key, seal.seq, seal.hash, seal.erased_through):
        return (
            "its head seal does not verify (a head moved back or an erasure undone by hand, or "
            "a forged seal)"
        )
    return None


def head_problem(
    store: EventStore, key: str, last: Record | None, seal: HeadSeal | None
) -> tuple[int, str] | None:
    """``(seq, reason)`` when the newest record ``last`` is not the sealed head, else None."""
    if seal is NO_SEALS:
        if not store._seals_required:
            return None
        seal = None  # sealed once, so the seals cannot be missing: treated as deleted
    if last is None:
        if seal is None:
            return None
        return seal.seq, f"its records are gone, but its head seal says seq {seal.seq}"
    if seal is None:
        return last.seq, "it has records but no head seal (a seal deleted by hand)"
    if not seal.mac and not store._seals_required:
        return None  # a ledger from before seals, never opened writable since: nothing to check
    problem = seal_problem(store, key, seal)
    if problem is not None:
        return last.seq, problem
    if (last.seq, last.hash) != (seal.seq, seal.hash):
        if type(last.seq) is not int:
            # A row no store writes (a seq stored as text, say): damage, never a TypeError.
            return seal.seq, f"its newest row holds seq {last.seq!r}, not an integer"
        if last.seq < seal.seq:
            return last.seq + 1, (
                f"records after seq {last.seq} are missing: the sealed head is seq {seal.seq} "
                "(the tail was truncated)"
            )
        return last.seq, f"the newest record is not the sealed head (seq {seal.seq})"
    return None


def seal_not_int(key: str, seq: object, erased_through: object) -> ChainIntegrityError:
    """The error for a head seal whose ``erased_through`` is not an integer (SQLite keeps text
    written by hand into an INTEGER column): damage, never a ValueError of ``int()``."""
    at = seq if type(seq) is int else 0
    return _refuse(key, at, f"its head seal says erased through {erased_through!r}, not an integer")


def records_gone(key: str, seal_seq: object) -> ChainIntegrityError:
    """The error for a memory whose head seal is stored but whose records are all gone: deleted
    by hand, which needs no key. Backends raise it where they read a head (``head()`` and every
    append), so the memory is neither served as empty nor started over at seq 1 - an append
    would seal its new head over the old seal, and ``verify()`` would then pass."""
    seq = seal_seq if type(seal_seq) is int else 0
    return _refuse(key, seq, f"its records are gone, but its head seal says seq {seal_seq!r}")


def restored(record: Record, erased_through: int | None) -> str | None:
    """Why ``record`` must not be served given that its memory's seal says it was erased up to
    ``erased_through`` (None: the memory has no seal to say, a database from before seals):
    content back in an erased record (put back from a backup: it matches the commitment, only
    the seal can tell), a record emptied past it (emptied by hand: the chain hash covers the
    commitment, not the content, so only the seal can tell that no erasure did it), or an
    emptied receipt (never erased, so emptied by hand)."""
    emptied = record.format != 1 and not record.salt and not record.stored_payload
    if record.kind in RECEIPT_KINDS:
        # A receipt holds no message, so no erasure ever empties it: emptied, it was emptied
        # by hand (what was erased, when and why gone), whatever the seal says.
        return (
            "an erasure's receipt or tombstone emptied by hand (receipts are never erased)"
            if emptied
            else None
        )
    if erased_through is None:
        return None
    if record.seq <= erased_through:
        if record.salt or record.stored_payload:
            return (
                f"content is back in a record its erasure or purge (up to seq {erased_through}) "
                "removed: put back from a backup?"
            )
    elif emptied:
        return (
            "its content is gone, but no erasure reached it (the memory's seal says erased "
            f"up to seq {erased_through}): emptied by hand, not by erase()"
        )
    return None


def erased_bound(seal: HeadSeal | None) -> int | None:
    """The seq ``seal`` says its memory is erased through, for :func:`restored`: None when the
    database has no seals (:data:`NO_SEALS`), 0 when the memory has none (it is then refused
    for that)."""
    if seal is NO_SEALS:
        return None
    if seal is None or type(seal.erased_through) is not int:
        # No seal, or one edited by hand (SQLite stores text in an INTEGER column; the seal's
        # MAC then fails too): nothing is vouched erased, so no record may be emptied.
        return 0
    return seal.erased_through


def vouch(
    store: EventStore,
    key: str,
    found: Sequence[Record],
    ends: Ends,
    *,
    gt: int | None,
    lte: int | None,
    limit: int | None,
    desc: bool,
) -> None:
    """Refuse ``found`` (what ``store.read(key, gt=, lte=, limit=, desc=)`` returned) unless
    the chain vouches for all of it (see the module docstring). ``ends`` is the memory's seal,
    first and newest record as read *before* ``found`` (:meth:`EventStore._ends`): every seq up
    to the seal existed when the records were read, so a shorter answer is a deletion, while
    records after it may be another writer's appends.

    Raises:
        ChainIntegrityError: The first problem found, naming memory, seq and remedy.
    """
    ordered = list(reversed(found)) if desc else list(found)
    seal, first, last = _checked_ends(store, key, ends)
    if last is None or first is None:
        if not ordered:
            return
        # The memory had no records when its ends were read, so these were appended since
        # (another connection's first write): check them against its ends as they are now,
        # the highest seq read being the one known to exist.
        seal, first, last = _checked_ends(store, key, store._ends(key))
        if last is None or first is None:
            raise _refuse(key, ordered[0].seq, "records were read but the memory has no head")
        known = max(r.seq for r in ordered)
    else:
        known = seal.seq if seal is not None and seal is not NO_SEALS else last.seq
    _check_range(key, [r.seq for r in ordered], first.seq, known, gt, lte, limit, desc)
    _check_records(store, key, ordered, erased_bound(seal))
    if store._key is not None and any(r.format != 3 for r in ordered):
        _vouch_legacy(store, key, last, ordered)


def vouch_rows(
    store: EventStore,
    key: str,
    rows: Sequence[tuple[Any, ...]],
    ends: Ends,
    *,
    gt: int | None,
    lte: int | None,
) -> bool:
    """:func:`vouch` for an ascending read without a limit, over bare rows
    (``store._range_rows(key, gt, lte)``, read after ``ends``): the memory's ends and the
    range's seqs checked as :func:`vouch` checks them (raising the same errors), then every
    row in one loop (:func:`eventlog.hashing.verified_run`).

    Returns:
        True when the chain vouches for every row; False when a row needs the full path
        (:meth:`EventStore.read_verified`), which then refuses it with its reason, or accepts
        it (a format 1 record, erased content, an unkeyed record of a keyed ledger).

    Raises:
        ChainIntegrityError: The ends or the range's seqs do not verify.
    """
    seal, first, last = _checked_ends(store, key, ends)
    if last is None or first is None:
        return not rows
    known = seal.seq if seal is not None and seal is not NO_SEALS else last.seq
    _check_range(key, [row[0] for row in rows], first.seq, known, gt, lte, None, False)
    # Without seals (None), 0: the loop leaves emptied rows to the full path either way.
    erased_through = erased_bound(seal) or 0
    return verified_run(key, rows, store._key, erased_through) == len(rows)


def _check_range(  # noqa: PLR0917 - the bounds of the read, one to one
    key: str,
    seqs: list[int],
    first: int,
    known: int,
    gt: int | None,
    lte: int | None,
    limit: int | None,
    desc: bool,
) -> None:
    """Every seq the range must hold came back, in order, and nothing outside it: ``known``
    is a seq that existed before the read (records after it may be concurrent appends)."""
    for a, b in itertools.pairwise(seqs):
        if b != a + 1:
            raise _refuse(key, a + 1, f"seq {a + 1} is missing")
    lo = max((gt or 0) + 1, first)
    top = known if lte is None else min(lte, known)
    need = max(top - lo + 1, 0)
    if limit is not None:
        need = min(need, max(limit, 0))
    if seqs and (seqs[0] < lo or (lte is not None and seqs[-1] > lte)):
        odd = seqs[0] if seqs[0] < lo else seqs[-1]
        raise _refuse(key, odd, f"seq {odd} is out of place")
    if need and not desc and (not seqs or seqs[0] != lo):
        raise _refuse(key, lo, f"seq {lo} is missing")
    if need and desc and (not seqs or seqs[-1] < top):
        gone = top if not seqs else seqs[-1] + 1
        raise _refuse(key, gone, f"seq {gone} is missing")
    if len(seqs) < need:
        gone = (seqs[-1] + 1) if not desc else (seqs[0] - 1)
        raise _refuse(key, gone, f"seq {gone} is missing")


def _checked_ends(
    store: EventStore, key: str, ends: Ends
) -> tuple[HeadSeal | None, Record | None, Record | None]:
    """``ends`` checked: the newest record is the sealed head and verifies on its own, the
    first starts the chain. A backend whose ends are not one snapshot may have met another
    writer's append between its reads: a mismatch counts only if a second look agrees."""
    for _ in range(_MOVING_HEAD_TRIES):
        seal, first, last = ends
        broken = head_problem(store, key, last, seal)
        if broken is None:
            break
        again = store._ends(key)
        if again == ends:
            raise _refuse(key, *broken)
        ends = again
    else:
        raise _refuse(key, 0, "its head kept moving while it was checked")
    if last is not None:
        problem = store.check(last)
        if problem is not None:
            raise _refuse(key, last.seq, problem)
        if first is None:
            raise _refuse(key, 1, "its first record is missing")
        _check_first(store, key, first)
    return seal, first, last


def _check_first(store: EventStore, key: str, first: Record) -> None:
    """The memory's first record: seq 1 chained to genesis, or a purge's tombstone."""
    if first.seq != 1 and first.kind != _PURGED:
        raise _refuse(key, 1, f"records before seq {first.seq} are missing")
    if first.seq == 1 and first.prev_hash != GENESIS:
        raise _refuse(key, 1, "its first record does not start the chain")
    problem = store.check(first)
    if problem is not None:
        raise _refuse(key, first.seq, problem)


def _check_records(
    store: EventStore, key: str, ordered: list[Record], erased_through: int | None
) -> None:
    """Each record on its own, its link to the one before, and no content after its erasure."""
    check = store.check
    previous: Record | None = None
    for record in ordered:
        if previous is not None and record.prev_hash != previous.hash:
            raise _refuse(key, record.seq, "prev_hash does not match the previous record's hash")
        problem = check(record)
        if problem is not None:
            raise _refuse(key, record.seq, problem)
        problem = restored(record, erased_through)
        if problem is not None:
            raise _refuse(key, record.seq, problem)
        previous = record


_LEGACY_CACHE_BYTES = 64 << 20  # the walked hashes kept per store, all memories together
_PREFIX = 8  # bytes of each walked hash kept: a forger would need a 64-bit collision


def _vouch_legacy(store: EventStore, key: str, last: Record, served: Sequence[Record]) -> None:
    """Unkeyed records in a keyed ledger are bound only through the keyed records after them
    (or the keyed head seal): walk the memory once to its head, keeping each record's hash,
    then trust it at that head for exactly those hashes. A read of a range that stops before
    the next link (``as_of``, one record) is not bound by its own links: an unkeyed record
    rewritten since the walk (a forger recomputes its SHA-256) must still be refused, so each
    unkeyed record ``served`` is compared with the hash the walk saw at its seq."""
    cache: dict[str, tuple[str, int, bytes]] = store.__dict__.setdefault("_legacy_vouched", {})
    walked = cache.get(key)
    if walked is not None and walked[0] == last.hash and _as_walked(walked, served):
        return
    first = 0
    hashes = bytearray()

    def kept(records: Iterator[Record]) -> Iterator[Record]:
        nonlocal first
        for record in records:
            if not hashes:
                first = record.seq
            hashes.extend(str(record.hash).encode()[:_PREFIX].ljust(_PREFIX, b"\0"))
            yield record

    failure, _ = check_stream(kept(store._pages(key)), store.check)
    if failure is not None:
        raise _refuse(key, *failure)
    fresh = (last.hash, first, bytes(hashes))
    if not _as_walked(fresh, served):  # changed between the read and the walk: refuse, re-read
        changed = next(r.seq for r in served if not _as_walked(fresh, [r]))
        raise _refuse(key, changed, "an unkeyed record changed while it was read")
    total = sum(len(entry[2]) for entry in cache.values())
    if len(cache) > 10_000 or total + len(hashes) > _LEGACY_CACHE_BYTES:
        cache.clear()
    cache[key] = fresh


def _as_walked(walked: tuple[str, int, bytes], served: Sequence[Record]) -> bool:
    """Whether every unkeyed record of ``served`` has the hash the walk saw at its seq."""
    _, first, hashes = walked
    for record in served:
        if record.format == 3:
            continue
        at = (record.seq - first) * _PREFIX
        want = hashes[at : at + _PREFIX] if 0 <= at < len(hashes) else b""
        if record.hash.encode()[:_PREFIX].ljust(_PREFIX, b"\0") != want:
            return False
    return True
