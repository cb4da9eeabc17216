"""A contended PostgreSQL memory's lost races, settled inside the append
(:meth:`~eventlog.store.EventStore.append_or_rebuild`): the records that won come back in the
round trip that lost, are vouched for as a verified read vouches, and the caller's ``rebuild``
turns them into what to append after them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from eventlog import postgres_sql as pgsql
from eventlog.erasure import brings_erasure
from eventlog.errors import ChainIntegrityError
from eventlog.hashing import GENESIS
from eventlog.models import NewRecord, Record, StreamHead
from eventlog.postgres_reads import PostgresReads

if TYPE_CHECKING:
    from eventlog.postgres_base import Conn, Row

__all__ = ["REBUILD_READ", "PostgresRaces", "check_batch"]

REBUILD_READ = 64  # records since a lost race's head that append_or_rebuild folds in the append
_RACES = 3  # lost races in a row before a contended append_or_rebuild waits for the lock


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

    def _insert_racing(  # noqa: PLR0917 - private; called from _append only
        self,
        conn: Conn,
        key: str,
        built: list[Sequence[NewRecord]],
        rows: list[Row],
        lock: int,
        sent: list[tuple[list[Row], int]],
        rebuild: Callable[[list[Record]], Sequence[NewRecord] | None],
    ) -> tuple[list[Any], list[Row] | None]:
        """The one-statement insert of a contended memory, with what others appended since
        the head it chains to read in the same round trip (under the append lock the insert
        took): a lost race is rebuilt on their records and sent again at once, with no lock
        held while ``rebuild`` runs. After ``_RACES`` lost races in a row (a faster writer
        keeps winning), the append waits its turn for the lock instead, so it cannot starve.
        Returns what the insert that landed returned (nothing: a conflict this cannot settle),
        and the rebuilt rows not sent when it should wait for the lock instead (None else)."""
        for _ in range(_RACES):
            chained_to, link = rows[0][1] - 1, rows[0][7]
            sent.append((rows, conn.info.backend_pid))  # from here, it may land
            with self._pipeline(conn):
                cursor = conn.execute(*self._insert_query(rows, lock=lock))
                since = conn.execute(
                    self._q["since"], (key, key, key, key, chained_to, REBUILD_READ)
                )
            found: list[Any] = cursor.fetchall()
            if found:
                break
            self._contend(key)  # still contended: keep racing this way
            again = self._rebuilt(key, chained_to, link, None, since, rebuild)
            if again is None or brings_erasure(again[0]):
                break
            built[0] = again[0]
            rows = self._build(key, again[1], again[0], self._now())
        else:
            return [], rows  # rebuilt on the newest head seen, not sent: build them under the lock
        return found, None

    def _rebuilt(  # noqa: PLR0917 - private; called from the appends only
        self,
        key: str,
        expected_seq: int,
        expected_hash: str | None,
        actual: int | None,
        since: Any,
        rebuild: Callable[[list[Record]], Sequence[NewRecord] | None],
    ) -> tuple[Sequence[NewRecord], StreamHead] | None:
        """What ``rebuild`` appends in place of records that lost the race, given the records
        appended since ``expected_seq`` (``since``: the cursor of the ``since`` statement),
        and the head it chains to; None (a plain conflict, for the caller to
        settle) unless they are all there (up to ``actual``, the head read under the lock, if
        known), continue ``expected_hash`` and the chain vouches for them."""
        from eventlog.vouch import vouch

        found = since.fetchall()
        newer = self._opened([Record(*r[1:]) for r in found if r[0] == "r"])
        if (
            not newer
            or len(newer) >= REBUILD_READ  # maybe more: the caller reads them itself
            or newer[0].prev_hash != (expected_hash or GENESIS)
            or (actual is not None and newer[-1].seq != actual)
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
        self._erased[key] = seal.erased_through  # what the next insert's seal must carry
        head = StreamHead(newer[-1].seq, newer[-1].hash, newer[-1].recorded_at_text)
        self._remember(key, head)
        return again, head
