"""What a witness may excuse after a retention purge: exactly the records the purge erased.

A purge deletes a memory's records, so the ledger no longer holds every record its witness saw.
Its tombstone names each erased record by position and hash (``MemoryPurged.leaves``), inside
the record's own hash (under the chain key, in a keyed ledger). A witness puts those records
back where they were and checks the tree it saw against that: a purge then excuses the records
it erased and nothing else. A genuine tombstone copied from a newer copy of the database into a
restored older one does not excuse the other memories' records the older copy lacks, and an
old tombstone moved to a new position no longer sits where the witness saw it.

Only tombstones that verify count (:func:`genuine`): without the chain key nobody can write
one. In an unkeyed ledger anyone can, so there the witness trusts whoever can write the
database as far as purges go (the README says so).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, NamedTuple

from eventlog.hashing import KEYED_CHAIN

if TYPE_CHECKING:
    from eventlog.models import Record
    from eventlog.store import EventStore

__all__ = ["PURGED", "Purges", "genuine", "purges_after"]

PURGED = "memory_purged"
_PAGE = 100


class Purges(NamedTuple):
    """The genuine purges after a position.

    Attributes:
        leaves: ``{position: hash}`` of every record they erased.
        tombstones: How many tombstones.
        unlisted: How many of them do not list what they erased (written before tombstones
            did, or malformed): they excuse nothing.
    """

    leaves: dict[int, str]
    tombstones: int
    unlisted: int


def genuine(store: EventStore, record: Record) -> bool:
    """Whether a purge's tombstone verifies: a row made by hand, without the chain key, must not
    restart the witness or excuse a missing record (a store without the key cannot tell)."""
    return store.check(record) in (None, KEYED_CHAIN)


def _listed(record: Record) -> list[tuple[int, str]] | None:
    """What a tombstone says it erased, or None when it does not say or says it inconsistently:
    positions rising and all before the tombstone's own, as many as ``event_count``, the last
    one the record the tombstone chains to."""
    from eventlog.models import MemoryPurged

    try:
        event = MemoryPurged.model_validate_json(record.payload)
    except ValueError:
        return None
    leaves = event.leaves
    if (
        not leaves
        or len(leaves) != event.event_count
        or leaves[-1][1] != record.prev_hash
        or leaves[-1][0] >= record.position
        or any(a[0] >= b[0] for a, b in itertools.pairwise(leaves))
    ):
        return None
    return list(leaves)


def purges_after(store: EventStore, position: int) -> Purges:
    """The genuine purges recorded after ``position`` (hand-made tombstones are left out)."""
    leaves: dict[int, str] = {}
    count = unlisted = 0
    while True:
        page = store._purges_after(position, _PAGE)
        for record in page:
            if not genuine(store, record):
                continue
            count += 1
            listed = _listed(record)
            if listed is None:
                unlisted += 1
            else:
                leaves.update(listed)
        if len(page) < _PAGE:
            return Purges(leaves, count, unlisted)
        position = page[-1].position
