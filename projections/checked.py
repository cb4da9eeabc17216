"""Verified reads of a memory's history: nothing is served that the chain does not vouch for.

Every read a projection makes goes through here. :func:`read_checked` and
:func:`read_checked_rows` are the store's verified reads, with acknowledged damage
(:meth:`~eventlog.store.EventStore.quarantine`) left out only once a read has been refused;
:func:`records` and :func:`row_pages` walk a whole history in pages, each page linked to the one
before it, so a walk vouches for as much as one read of the whole range.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from eventlog.errors import ChainIntegrityError
from eventlog.ids import MemoryId
from eventlog.models import Record, RecordQuarantined
from eventlog.store import EventStore

__all__ = [
    "PAGE",
    "ROW_HASH",
    "ROW_KIND",
    "ROW_PAYLOAD",
    "ROW_POSITION",
    "ROW_PREV_HASH",
    "ROW_SEQ",
    "quarantined_seqs",
    "read_checked",
    "read_checked_rows",
    "records",
    "row_pages",
    "seq_at_checked",
]

PAGE = 2_000
"""Records per read of :func:`records`: memory use stays bounded whatever the history's length."""


def read_checked(store: EventStore, memory_id: MemoryId, **bounds: Any) -> list[Record]:
    """``store.read(memory_id, **bounds)``, refused unless the chain vouches for every record
    (:meth:`~eventlog.store.EventStore.read_verified`): its own hash and commitment, the links
    and seqs of the range, the memory's sealed head and first record. Nothing a memory shows
    comes from a row the chain does not vouch for, whether or not anyone runs ``verify()``.

    Raises:
        ChainIntegrityError: Something does not verify; it names the memory, seq and remedy.
    """
    try:
        return store.read_verified(memory_id, **bounds)
    except ChainIntegrityError:
        # Only now, off the happy path: is the damage acknowledged (store.quarantine)?
        skip = _acknowledged(store, memory_id)
        if not skip:
            raise
        limit = bounds.get("limit")
        if limit is None:
            return store.read_verified_excluding(memory_id, skip, **bounds)
        # The store's limit counts the rows it reads, excluded ones too; a reader asking for
        # the newest (or oldest) n records wants n served: the newest record acknowledged as
        # damaged must not make a memory look empty.
        found = store.read_verified_excluding(
            memory_id, skip, **{**bounds, "limit": limit + len(skip)}
        )
        return found[:limit]


def seq_at_checked(store: EventStore, memory_id: MemoryId, at: datetime) -> int | None:
    """``store.seq_at(memory_id, at)``: the last seq recorded at or before ``at`` (None: none),
    vouched for. The store finds it by the stored times alone, a column anyone with write
    access can edit: a record's time moved past ``at`` makes the answer an earlier seq, whose
    view is genuine and would be served as what the memory showed at ``at``. So the records on
    both sides of the answer are read as every read is (each record's time is under its hash),
    which refuses such an edit. One or two records more than the view itself reads.

    Raises:
        ChainIntegrityError: A record beside the answer does not verify.
    """
    found = store.seq_at(memory_id, at)
    if found is None:
        read_checked(store, memory_id, limit=1)
    else:
        read_checked(store, memory_id, gt=found - 1, lte=found + 1)
    return found


def read_checked_rows(
    store: EventStore, memory_id: MemoryId, *, gt: int, lte: int | None
) -> tuple[list[tuple[Any, ...]], set[int]]:
    """:func:`read_checked` of an ascending range as bare rows
    (:meth:`~eventlog.store.EventStore.read_verified_rows`), with the acknowledged damage it
    left out (empty on the happy path).

    Raises:
        ChainIntegrityError: Something does not verify; it names the memory, seq and remedy.
    """
    try:
        return store.read_verified_rows(memory_id, gt=gt, lte=lte), set()
    except ChainIntegrityError:
        # Only now, off the happy path: is the damage acknowledged (store.quarantine)?
        skip = _acknowledged(store, memory_id)
        if not skip:
            raise
    records = store.read_verified_excluding(memory_id, skip, gt=gt, lte=lte)
    return [r.range_row(r.payload) for r in records], set(skip)


def _acknowledged(store: EventStore, memory_id: MemoryId) -> dict[int, RecordQuarantined]:
    """The acknowledged damage of a memory, by seq (none when the acknowledgements themselves
    do not verify: then the original refusal stands). Passed whole to the store's read, which
    leaves a record out only while its row holds the hash acknowledged."""
    try:
        return store.quarantined(memory_id)
    except ChainIntegrityError:
        return {}


def _quarantined(store: EventStore, memory_id: MemoryId) -> set[int]:
    """The acknowledged damaged seqs of a memory (see :func:`_acknowledged`)."""
    return set(_acknowledged(store, memory_id))


def quarantined_seqs(store: EventStore, memory_id: MemoryId) -> set[int]:
    """:meth:`EventStore.quarantined`'s seqs; empty when they do not verify."""
    return _quarantined(store, memory_id)


def records(
    store: EventStore,
    memory_id: MemoryId,
    *,
    gt: int = 0,
    lte: int | None = None,
    page: int = PAGE,
) -> Iterator[Record]:
    """The history's records in ``(gt, lte]``, read ``page`` at a time so memory use stays
    bounded whatever the history's length.

    Each record is checked on its own (:func:`read_checked`) and against the one before it:
    consecutive seqs, each ``prev_hash`` naming its predecessor's hash, across page
    boundaries too. So a walk in pages vouches for as much as one read of the whole range,
    and a row deleted or replaced between two pages is refused rather than skipped.

    Raises:
        ChainIntegrityError: A record does not verify or does not chain to the one before.
    """
    for batch in _pages(store, memory_id, gt=gt, lte=lte, page=page):
        yield from batch


_SEQ = operator.itemgetter(2)
_PREV_HASH = operator.itemgetter(8)
_HASH = operator.itemgetter(9)


def _pages(
    store: EventStore,
    memory_id: MemoryId,
    *,
    gt: int = 0,
    lte: int | None = None,
    page: int = PAGE,
) -> Iterator[list[Record]]:
    """:func:`records`, a page (list) at a time: each page checked as :func:`records`
    describes, against the page before it too (a page cut short before a record that does
    not chain, then the error).

    Raises:
        ChainIntegrityError: A record does not verify or does not chain to the one before.
    """
    after = gt
    previous: Record | None = None
    skip: set[int] | None = None
    while True:
        batch = read_checked(store, memory_id, gt=after, lte=lte, limit=page)
        if batch and not _links_hold(previous, batch):
            # Some pair does not link: across acknowledged damage that is expected, else the
            # pair is refused, after the records before it (as a walk record by record).
            for i, record in enumerate(batch):
                if previous is not None and (
                    record.seq != previous.seq + 1 or record.prev_hash != previous.hash
                ):
                    skip = quarantined_seqs(store, memory_id) if skip is None else skip
                    if not _excused(skip, previous.seq, record.seq):
                        if i:
                            yield batch[:i]
                        raise ChainIntegrityError(
                            record.stream_id,
                            record.seq,
                            f"it does not chain to seq {previous.seq} read before it (a record "
                            "was removed or replaced); not served (run verify())",
                        )
                previous = record  # past acknowledged damage, or a good link
        if batch:
            previous = batch[-1]
            yield batch
        if len(batch) < page:
            return
        after = batch[-1].seq


def _links_hold(previous: Record | None, batch: list[Record]) -> bool:
    """True when every record of ``batch`` follows the one before it (``previous`` for the
    first): the next seq, and a ``prev_hash`` naming its hash. In C loops, a page at a time;
    False sends the page through the pair-by-pair check, which alone gives reasons."""
    first = batch[0].seq if previous is None else previous.seq + 1
    seqs = list(map(_SEQ, batch))
    links = list(map(_PREV_HASH, batch))
    hashes = list(map(_HASH, batch))
    if previous is not None:
        hashes.insert(0, previous.hash)
    else:
        del links[0]
    return seqs == list(range(first, first + len(batch))) and links == hashes[: len(links)]


# Fields of a range row (eventlog.hashing.RANGE_ROW_FIELDS) that row_pages and what_if read.
ROW_SEQ, ROW_KIND, ROW_PAYLOAD, ROW_PREV_HASH, ROW_HASH, ROW_POSITION = 0, 2, 4, 6, 7, 11


def row_pages(
    store: EventStore, memory_id: MemoryId, key: str, *, lte: int | None, page: int
) -> Iterator[list[tuple[Any, ...]]]:
    """The history up to ``lte`` as bare rows (:meth:`EventStore.read_verified_rows`), ``page``
    seqs at a time, vouched for as :func:`records` vouches for its records: each page by the
    store, its first row linked to the page before it here (the store leaves that link to
    the caller), acknowledged damage left out as :func:`read_checked` leaves it out.

    Raises:
        ChainIntegrityError: A row does not verify or does not chain to the one before.
    """
    after = 0
    previous: tuple[Any, ...] | None = None
    skip: set[int] | None = None
    while lte is None or after < lte:
        top = after + page if lte is None else min(after + page, lte)
        rows, excluded = read_checked_rows(store, memory_id, gt=after, lte=top)
        if rows and (
            excluded  # links across the damage left out: checked pair by pair, as _pages does
            or (
                previous is not None
                and (
                    rows[0][ROW_SEQ] != previous[ROW_SEQ] + 1
                    or rows[0][ROW_PREV_HASH] != previous[ROW_HASH]
                )
            )
        ):
            skip = _quarantined(store, memory_id) if skip is None else skip
            _check_row_links(key, previous, rows, skip=skip)
        if not rows and previous is None and not excluded:
            # Nothing yet: the history may start past this page (a purge's tombstone keeps
            # its seq), or be empty. One record read says which.
            first = read_checked(store, memory_id, gt=after, lte=lte, limit=1)
            if not first:
                return
            after = first[0].seq - 1
            continue
        if rows:
            previous = rows[-1]
            yield rows
        last = rows[-1][ROW_SEQ] if rows else after
        # A store refuses a range missing a seq up to its head, so a page ending short of its
        # top ends the history, unless only acknowledged damage is missing after its last row.
        if last < top and not (excluded and all(s in excluded for s in range(last + 1, top + 1))):
            return
        after = top


def _check_row_links(
    key: str,
    previous: tuple[Any, ...] | None,
    rows: list[tuple[Any, ...]],
    *,
    skip: set[int],
) -> None:
    """Refuse the first pair of rows (``previous``, then ``rows``) where one does not follow
    the other - the next seq, a ``prev_hash`` naming its hash - unless acknowledged damage
    lies between or in them (as :func:`_pages` does).

    Raises:
        ChainIntegrityError: A row does not chain to the one read before it.
    """
    for row in rows:
        if previous is None:  # the history's first row: the store checked it is the first
            previous = row
            continue
        seq, before = row[ROW_SEQ], previous[ROW_SEQ]
        if (seq != before + 1 or row[ROW_PREV_HASH] != previous[ROW_HASH]) and not _excused(
            skip, before, seq
        ):
            raise ChainIntegrityError(
                key,
                seq,
                f"it does not chain to seq {before} read before it (a record was removed or "
                "replaced); not served (run verify())",
            )
        previous = row


def _excused(skip: set[int], before: int, seq: int) -> bool:
    """True when a broken link from seq ``before`` to ``seq`` is acknowledged damage: every
    seq between them is quarantined, and so is one of the pair if they are adjacent."""
    return all(s in skip for s in range(before + 1, seq)) and (
        seq != before + 1 or seq in skip or before in skip
    )
