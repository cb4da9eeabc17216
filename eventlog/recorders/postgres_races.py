"""A contended PostgreSQL memory's lost races, settled inside the append
(:meth:`~eventlog.store.EventStore.append_or_rebuild`): the records that won are read right
after the insert that lost (one more statement on the same connection), are vouched for as a
verified read vouches, and the caller's ``rebuild`` turns them into what to append after them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from eventlog.errors import ChainIntegrityError
from eventlog.models import NewRecord, Record, StreamHead
from eventlog.recorders import postgres_sql as pgsql
from eventlog.recorders.postgres_reads import PostgresReads

if TYPE_CHECKING:
    from eventlog.recorders.postgres_base import Conn, Row

__all__ = ["RACES", "REBUILD_READ", "LostRace", "PostgresRaces", "check_batch"]

REBUILD_READ = 64  # records since a lost race's head that append_or_rebuild folds in the append
RACES = 8  # lost races in a row one append_or_rebuild settles; then the caller catches up


class LostRace(Exception):
    """A contended insert lost its race: nothing was inserted. ``rows``: the ``since``
    statement's rows, read right after the insert; ``seq`` and ``link``: the head the insert
    chained to."""

    def __init__(self, seq: int, link: str, rows: list[tuple[Any, ...]]) -> None:
        super().__init__(seq, link)
        self.seq = seq
        self.link = link
        self.rows = rows


def check_batch(key: str, items: Sequence[NewRecord]) -> None:
    """Refuse a batch too large for one transaction's positions."""
    if len(items) > pgsql.MAX_ROWS_PER_TRANSACTION:
        msg = (
            f"append of {len(items):,} records to {key}: PostgreSQL appends at most "
            f"{pgsql.MAX_ROWS_PER_TRANSACTION:,} records at once (a position numbers the "
            "records of one transaction in 20 bits); split the batch (nothing was written)"
        )
        raise ValueError(msg)


class PostgresRaces(PostgresReads):
    """The race-settling part of :class:`~eventlog.postgres.PostgresEventStore`."""

    def _insert_racing(self, conn: Conn, key: str, rows: list[Row], lock: int) -> list[Any]:
        """The one-statement insert of a contended memory, as a plain append sends it; only
        when it inserted nothing, a read of what others appended after the head it chained to
        (one statement, one snapshot, taken once the insert has let go of the append lock).
        Returns what the insert returned.

        The read is not pipelined with the insert: the insert usually wins (one writer of a
        contended memory keeps winning while the others rebuild), and a read sent with every
        insert made each win wait for it - on two processes adding to one memory a win took
        1.2-1.8 ms instead of 0.65 ms, and the two together added 0.7 x as fast as one alone.

        Raises:
            LostRace: Nothing was inserted; it carries the rows read, to rebuild on.
        """
        chained_to = rows[0][1] - 1
        found: list[Any] = conn.execute(*self._insert_query(rows, lock=lock)).fetchall()
        if found:
            return found
        self._contend(key)  # still contended: keep racing this way
        since = conn.execute(self._q["since"], (key, key, key, key, chained_to, REBUILD_READ))
        raise LostRace(chained_to, rows[0][7], since.fetchall())

    def _rebuilt(
        self,
        key: str,
        expected_seq: int,
        expected_hash: str,
        found: list[tuple[Any, ...]],
        rebuild: Callable[[list[Record]], Sequence[NewRecord] | None],
    ) -> tuple[Sequence[NewRecord], StreamHead] | None:
        """What ``rebuild`` appends in place of records that lost the race, and the head it
        chains to, given ``found``: the ``since`` statement's rows (the memory's ends, and
        the records after ``expected_seq``). None (a plain conflict, for the caller to
        settle) unless they are all there, continue ``expected_hash`` and the chain vouches
        for them. Called with no connection held: ``rebuild`` may read."""
        from eventlog.vouch import vouch

        newer = self._opened([Record(*r[1:]) for r in found if r[0] == "r"])
        if (
            not newer
            or len(newer) >= REBUILD_READ  # maybe more: the caller reads them itself
            or newer[0].prev_hash != expected_hash
        ):
            return None
        try:
            ends = self._ends_of([r for r in found if r[0] != "r"])
            vouch(self, key, newer, ends, gt=expected_seq, lte=None, limit=None, desc=False)
        except ChainIntegrityError:
            return None  # the caller's own read reports it (or steps over acknowledged damage)
        seal = ends[0]
        if seal is None or seal.seq != newer[-1].seq:
            return None
        again = rebuild(newer)
        if not again:
            return None
        self._check_items(again, key, key)
        check_batch(key, again)
        self._note_erased(key, seal.erased_through)  # what the next insert's seal must carry
        head = StreamHead(newer[-1].seq, newer[-1].hash, newer[-1].recorded_at_text)
        self._remember(key, head)
        return again, head
