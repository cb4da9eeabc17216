"""The verification badge of a page, computed when the page is made, for what the page shows.

A badge cached per head (same head seq and hash: same answer) said "verified" after a row in
the middle of the chain was edited, until the next append. Nothing cheap changes with such an
edit, so nothing is cached: a memory small enough is verified whole on every request, and a
larger one has the events the page lists verified (each record's hash and commitment, and each
link to the record before it), with the badge saying which events that covers. The whole
chain of any size stays ``chatledger verify``'s job.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from eventlog.hashing import GENESIS
from eventlog.ids import StreamKey
from eventlog.models import Record
from eventlog.store import EventStore

__all__ = ["FULL_VERIFY_MAX", "INDEX_VERIFY_BUDGET", "Badge", "memory_badge", "records_badge"]

FULL_VERIFY_MAX = 2_000
"""A memory with at most this many events is verified whole for each page (about 50 ms)."""

INDEX_VERIFY_BUDGET = 10_000
"""Events the list page verifies in all; memories past it are shown as not checked there."""


@dataclasses.dataclass(frozen=True, slots=True)
class Badge:
    """What a page's badge says.

    Attributes:
        bad: ``(seq, reason)`` of the first record that does not verify, or None.
        first: The first seq checked (0: nothing checked).
        last: The last seq checked.
        whole: Whether ``first..last`` is the memory's whole chain.
    """

    bad: tuple[int, str] | None
    first: int
    last: int
    whole: bool

    @property
    def checked(self) -> bool:
        """Whether anything was checked."""
        return self.first > 0


UNCHECKED = Badge(None, 0, 0, whole=False)


def records_badge(store: EventStore, records: Sequence[Record], *, whole: bool) -> Badge:
    """Verify consecutive records of one memory: each record's own hash and commitment
    (``store.check``), the seqs gapless, and each record's ``prev_hash`` equal to the hash of
    the one before it (GENESIS for seq 1). The first record's link is checked only when it is
    seq 1: read one record more before a range to have every link of the range checked."""
    bad: tuple[int, str] | None = None
    previous: Record | None = None
    for record in records:
        reason = None
        if previous is not None and record.seq != previous.seq + 1:
            reason = f"seq {previous.seq + 1} is missing (found {record.seq} next)"
        elif previous is not None and record.prev_hash != previous.hash:
            reason = "prev_hash does not match the previous record's hash"
        elif record.seq == 1 and record.prev_hash != GENESIS:
            reason = "prev_hash of seq 1 is not the genesis hash"
        if reason is None:
            reason = store.check(record)
        if reason is not None:
            bad = (record.seq, reason)
            break
        previous = record
    if not records:
        return UNCHECKED
    return Badge(bad, records[0].seq, records[-1].seq, whole=whole)


def memory_badge(store: EventStore, key: str, head: int) -> Badge:
    """The whole chain of memory ``key`` (``head`` events), verified now (no cache)."""
    failure = store.verify(StreamKey(key)).failures.get(key)
    return Badge(failure, 1, head, whole=True)
