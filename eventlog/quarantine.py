"""A way back from damage: acknowledge one damaged record, and reads leave it out.

The read path refuses a memory whose chain does not vouch for what a read returns
(:mod:`eventlog.vouch`). When the damage cannot be undone (no backup, or the backup is older
than what would be lost), an operator acknowledges it: :meth:`EventStore.quarantine` appends a
:class:`~eventlog.models.RecordQuarantined` record naming the memory and the seq to the store's
own ``~sys:quarantine`` stream. From then on a read that the chain refuses is retried with that
record left out, and everything else must still verify as before:

* the acknowledgement is itself a ledger record, read through the read path: in a keyed ledger
  it is keyed, so write access to the database without the chain key can neither add one (an
  unkeyed record there is refused, and a store opened without the key cannot append) nor
  silence a break any other way;
* it names one seq of one memory and excludes exactly that record: every other record of the
  range must verify on its own and chain to its neighbours, the head must be the sealed one and
  the first record must start the chain (unless it is the one excluded);
* it is an acknowledgement, not a repair: ``verify()`` keeps reporting the break, and the
  history keeps the record (shown as quarantined);
* it excuses the damage it saw, and only while it lasts: the record must still be damaged and
  its row must still hold the hash acknowledged (``found_hash``; none for a missing record).
  A record restored from a backup is served again, and new damage needs a new
  acknowledgement. An import brings none for a memory the file does not bring.

Only a record that is really damaged can be acknowledged (its own check fails, it is missing,
a link to or from it does not join, or its content is gone although no erasure reached it, or
back although one did), so nothing intact can be hidden this way. A broken head
seal is not a record: it is not covered (restore from a backup, or ``verify``).

The happy path costs nothing: acknowledgements are looked up only after a read was refused.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from eventlog.errors import ChainIntegrityError
from eventlog.hashing import GENESIS
from eventlog.ids import SYSTEM_PREFIX, MemoryId, StreamKey
from eventlog.models import HeadSeal, Record, RecordQuarantined
from eventlog.validation import shown
from eventlog.vouch import NO_SEALS, REMEDY, erased_bound, head_problem, restored

if TYPE_CHECKING:
    from eventlog.store import EventStore

__all__ = ["QUARANTINE_STREAM", "quarantine", "quarantined", "read_excluding"]

QUARANTINE_STREAM = StreamKey(f"{SYSTEM_PREFIX}quarantine")
"""The stream holding every acknowledgement of the store."""

_PURGED = "memory_purged"


def _refuse(key: str, seq: int, reason: str) -> ChainIntegrityError:
    return ChainIntegrityError(key, seq, f"{reason}; {REMEDY}")


def damage(store: EventStore, key: str, seq: int) -> tuple[str, str] | None:
    """``(what is wrong, the hash stored in its row)`` when record ``seq`` of ``key`` is
    damaged - missing, failing its own check, or not joining a neighbour - else None."""
    stream = StreamKey(key)
    rows = {r.seq: r for r in store.read(stream, gt=max(seq - 2, 0), lte=seq + 1)}
    record = rows.get(seq)
    if record is None:
        return "the record is missing", ""
    problem = store.check(record) or restored(record, erased_bound(store._head_seal(key)))
    if problem is not None:
        return problem, record.hash
    previous, following = rows.get(seq - 1), rows.get(seq + 1)
    if seq == 1 and record.prev_hash != GENESIS and record.kind != _PURGED:
        return "it does not start the chain", record.hash
    if previous is not None and record.prev_hash != previous.hash:
        return f"it does not chain to seq {seq - 1}", record.hash
    if following is not None and following.prev_hash != record.hash:
        return f"seq {seq + 1} does not chain to it", record.hash
    return None


def _acknowledgements(store: EventStore, key: str) -> Iterator[tuple[Record, RecordQuarantined]]:
    """Every acknowledgement naming stream ``key``, oldest first (read through the read path)."""
    from eventlog.serialization import decode_event

    for record in store.read_verified(QUARANTINE_STREAM):
        event = decode_event(record)
        if isinstance(event, RecordQuarantined) and event.memory == key:
            yield record, event


def quarantined(store: EventStore, memory_id: MemoryId) -> dict[int, RecordQuarantined]:
    """The acknowledged records of a memory that are still damaged as acknowledged, by seq:
    the record is damaged (:func:`damage`) and its row holds the hash the acknowledgement
    found ("": still missing). One for a record since restored, or damaged anew (another hash
    in its row), excuses nothing: it was not this damage that was acknowledged.

    Raises:
        ChainIntegrityError: The acknowledgements themselves do not verify.
    """
    key = store.stream_key(memory_id)
    found: dict[int, RecordQuarantined] = {}
    for _, event in _acknowledgements(store, key):
        if event.seq not in found and _applies(store, key, event):
            found[event.seq] = event
    return found


def _applies(store: EventStore, key: str, event: RecordQuarantined) -> bool:
    now = damage(store, key, event.seq)
    return now is not None and now[1] == event.found_hash


def quarantine(store: EventStore, memory_id: MemoryId, seq: int, *, reason: str) -> Record:
    """See :meth:`EventStore.quarantine`."""
    from eventlog.erasure import check_reason
    from eventlog.serialization import encode_event

    operation = f"quarantine of {memory_id!r} seq {shown(seq)}"
    check_reason("quarantine", reason)
    store._writable("quarantine", type(store).__name__)
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        msg = f"{operation}: seq must be an int >= 1 (as `chatledger verify` names it)"
        raise ValueError(msg)
    key = store.stream_key(memory_id)
    head = store.head(StreamKey(key))
    if head is None or seq > head.seq:
        last = 0 if head is None else head.seq
        msg = (
            f"{operation}: the memory's records end at seq {last}; a missing tail is not one "
            "record (restore the database from a backup)"
        )
        raise ValueError(msg)
    found = damage(store, key, seq)
    if found is None:
        msg = (
            f"{operation}: the record verifies and chains to its neighbours, so there is "
            "nothing to quarantine; run `chatledger verify` to find the damaged seq"
        )
        raise ValueError(msg)
    for record, event in _acknowledgements(store, key):
        if event.seq == seq and event.found_hash == found[1]:
            return record  # this damage is acknowledged already: once is enough
    event = RecordQuarantined(
        memory=key,
        seq=seq,
        found=found[0],
        found_hash=found[1],
        quarantined_at=store._now(),
        reason=reason,
    )
    (stored,) = store.append(QUARANTINE_STREAM, [encode_event(event)])
    return stored


def read_excluding(
    store: EventStore,
    memory_id: MemoryId,
    skip: Collection[int] | Mapping[int, RecordQuarantined],
    *,
    gt: int | None = None,
    lte: int | None = None,
    limit: int | None = None,
    desc: bool = False,
) -> list[Record]:
    """``store.read_verified(...)`` with the records ``skip`` names left out: those are not
    checked and not returned; everything else is vouched for as usual. When ``skip`` holds
    acknowledgements (:func:`quarantined`), each excuses its record only while the row read
    holds the hash it found (a missing record only when it found none): a record restored
    or changed since is checked, and served or refused, as any other.

    Raises:
        ChainIntegrityError: Something else does not verify.
    """
    key = store.stream_key(memory_id)
    ends = store._ends(key)
    found = store.read(memory_id, gt=gt, lte=lte, limit=limit, desc=desc)
    ordered = list(reversed(found)) if desc else list(found)
    if isinstance(skip, Mapping):
        # Judged on the rows this read returned (and the ends it checks), not on rows read
        # before: what is left out is exactly what was acknowledged.
        rows = {r.seq: r.hash for r in (*ordered, *(e for e in ends[1:] if e is not None))}
        skip = {s for s, ack in skip.items() if rows.get(s, "") == ack.found_hash}
    seal, first, last = _ends_excluding(store, key, ends, skip)
    if last is None or first is None:
        if ordered:
            raise _refuse(key, ordered[0].seq, "records were read but the memory has no head")
        return []
    known = seal.seq if seal is not None and seal is not NO_SEALS else last.seq
    _range_excluding(key, [r.seq for r in ordered], first.seq, known, skip, gt, lte, desc)
    erased = erased_bound(seal)
    previous: Record | None = None
    kept: list[Record] = []
    for record in ordered:
        if record.seq in skip:
            previous = None  # no link is checked across the excluded record
            continue
        if (
            previous is not None
            and previous.seq == record.seq - 1
            and record.prev_hash != previous.hash
        ):
            raise _refuse(key, record.seq, "prev_hash does not match the previous record's hash")
        problem = store.check(record) or restored(record, erased)
        if problem is not None:
            raise _refuse(key, record.seq, problem)
        previous = record
        kept.append(record)
    if store._key is not None and any(r.format != 3 for r in kept):
        from eventlog.vouch import _vouch_legacy

        _vouch_legacy(store, key, last, kept)
    return list(reversed(kept)) if desc else kept


def _ends_excluding(
    store: EventStore,
    key: str,
    ends: tuple[HeadSeal | None, Record | None, Record | None],
    skip: Collection[int],
) -> tuple[HeadSeal | None, Record | None, Record | None]:
    """The memory's ends checked as :mod:`eventlog.vouch` does, except the excluded records'
    own checks. The head must still be the sealed one: the seal is the anchor."""
    seal, first, last = ends
    broken = head_problem(store, key, last, seal)
    if broken is not None:
        again = store._ends(key)
        seal, first, last = again
        broken = head_problem(store, key, last, seal)
        if broken is not None:
            raise _refuse(key, *broken)
    if last is None:
        return seal, first, last
    if last.seq not in skip:
        problem = store.check(last)
        if problem is not None:
            raise _refuse(key, last.seq, problem)
    if first is None:
        raise _refuse(key, 1, "its first record is missing")
    if first.seq != 1 and first.kind != _PURGED:
        gone = [s for s in range(1, first.seq) if s not in skip]
        if gone:
            raise _refuse(key, 1, f"records before seq {first.seq} are missing")
    elif first.seq not in skip:
        if first.seq == 1 and first.prev_hash != GENESIS:
            raise _refuse(key, 1, "its first record does not start the chain")
        problem = store.check(first)
        if problem is not None:
            raise _refuse(key, first.seq, problem)
    return seal, first, last


def _range_excluding(  # noqa: PLR0917 - the bounds of the read, one to one
    key: str,
    seqs: Sequence[int],
    first: int,
    known: int,
    skip: Collection[int],
    gt: int | None,
    lte: int | None,
    desc: bool,
) -> None:
    """Every seq between the ends of what came back is there or excluded, and the read starts
    (ends, when descending) where the range does, or at an excluded record next to it."""
    lo = max((gt or 0) + 1, first)
    top = known if lte is None else min(lte, known)
    present = set(seqs)
    if seqs:
        low, high = min(seqs), max(seqs)
        if low < lo or (lte is not None and high > lte):
            odd = low if low < lo else high
            raise _refuse(key, odd, f"seq {odd} is out of place")
        for s in range(low, high + 1):
            if s not in present and s not in skip:
                raise _refuse(key, s, f"seq {s} is missing")
    # The end the read starts from: nothing but excluded records before the first one read.
    start, step = (top, -1) if desc else (lo, 1)
    end = (min(seqs) - 1 if seqs else lo - 1) if desc else (max(seqs) + 1 if seqs else top + 1)
    s = start
    while (s > end if desc else s < end) and lo <= s <= top:
        if s in present:
            break
        if s not in skip:
            raise _refuse(key, s, f"seq {s} is missing")
        s += step
