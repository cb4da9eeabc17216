"""Reading a PostgreSQL ledger: records by memory and in log order, heads, snapshots and the
ledger tree's stored blocks."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from eventlog.ids import MemoryId
from eventlog.ledger_tree import TreeBlock
from eventlog.models import HeadSeal, Record, Snapshot, StreamHead, format_time, parse_time
from eventlog.recorders import postgres_sql as pgsql
from eventlog.recorders.postgres_base import EMPTY_HEAD, PostgresBase
from eventlog.validation import check_at, check_range, check_snapshot, check_tail

if TYPE_CHECKING:
    from eventlog.recorders.postgres_base import Conn

__all__ = ["PostgresReads"]

_NO_UPPER = 1 << 62
_SETTLE_WAIT = 2.0  # seconds read_all waits for the store's own appends to pass the watermark


class PostgresReads(PostgresBase):
    """:class:`~eventlog.postgres.PostgresEventStore`'s reads, and the ledger tree's blocks."""

    def read(
        self,
        memory_id: MemoryId,
        *,
        gt: int | None = None,
        lte: int | None = None,
        limit: int | None = None,
        desc: bool = False,
    ) -> list[Record]:
        check_range("read", gt, lte, limit, desc)
        key = self._stream_key(memory_id, "read")
        # One statement shape per direction (absent bounds become ones that match every
        # seq, LIMIT NULL is no limit), so psycopg's automatic prepare reuses its plan.
        params = (
            key,
            0 if gt is None else gt,
            _NO_UPPER if lte is None else lte,
            None if limit is None else max(limit, 0),
        )
        query = self._q["read_desc" if desc else "read"]
        return self._opened(
            self._read("read", lambda conn: [Record(*r) for r in conn.execute(query, params)])
        )

    def _range_rows(self, key: str, gt: int, lte: int | None) -> list[tuple[Any, ...]]:
        params = (key, gt, _NO_UPPER if lte is None else lte)
        query = self._q["range_rows"]
        return self._read("read", lambda conn: conn.execute(query, params).fetchall())

    def read_all(self, *, gt: int = 0, limit: int | None = None) -> list[Record]:
        """See :meth:`EventStore.read_all`. Returns records only below the oldest transaction
        still running anywhere on the server (see ``_Q_READ_ALL``): a record committed while
        an older transaction is open shows once that transaction ends. Records this store
        object appended itself are waited for (up to ``_SETTLE_WAIT``), so an append followed
        by ``read_all`` or ``digest()`` sees it."""
        check_tail("read_all", gt, limit)
        params = (gt, None if limit is None else max(limit, 0))
        query = self._q["read_all"]
        deadline = None
        while True:
            records = self._opened(
                self._read(
                    "read_all", lambda conn: [Record(*r) for r in conn.execute(query, params)]
                )
            )
            seen = records[-1].position if records else gt
            full = limit is not None and len(records) >= limit
            own = self._own_last
            if full or own <= seen:
                return records
            now = time.monotonic()
            if deadline is None:
                deadline = now + _SETTLE_WAIT
            elif now > deadline or self._closed:
                # Our record did not show (a purge by another process deleted it, or a long
                # transaction holds the watermark back): what is returned is still exact, only
                # shorter; stop waiting for that record next time.
                with self._heads_lock:
                    if self._own_last == own:
                        self._own_last = seen
                return records
            time.sleep(0.002)

    def _record_at(self, position: int) -> Record | None:
        query = self._q["record_at"]
        rows = self._read(
            "read", lambda conn: [Record(*r) for r in conn.execute(query, (position,))]
        )
        return self._opened(rows)[0] if rows else None

    def _position_of(self, digest: str) -> int | None:
        query = self._q["position_of"]
        row = self._read("read", lambda conn: conn.execute(query, (digest,)).fetchone())
        return None if row is None else int(row[0])

    def _unkeyed_hashes(self) -> list[str]:
        query, bound = self._q["legacy_hashes"], (1 << 62,)
        return self._read("verify", lambda conn: [r[0] for r in conn.execute(query, bound)])

    def _hash_at(self, position: int) -> str | None:
        query = self._q["hash_at"]
        row = self._read("witness", lambda conn: conn.execute(query, (position,)).fetchone())
        return None if row is None else str(row[0])

    def _purges_after(self, position: int, limit: int) -> list[Record]:
        query = self._q["purges_after"]
        return self._read(
            "witness", lambda conn: [Record(*r) for r in conn.execute(query, (position, limit))]
        )

    def head(self, memory_id: MemoryId) -> StreamHead | None:
        key = self._stream_key(memory_id, "head")
        # Always asks the server (other processes append too); what it learns feeds the next
        # append's cached head, which a memory's add() then chains to without a read.
        head = self._read("head", lambda conn: self._head(conn, key))
        self._remember(key, head or EMPTY_HEAD)
        return head

    def _ends(self, key: str) -> tuple[HeadSeal | None, Record | None, Record | None]:
        seal, first, last = self._read(
            "read",
            lambda conn: self._ends_of(conn.execute(self._q["ends"], (key, key, key)).fetchall()),
        )
        if seal is not None and last is not None:
            # What a verified read saw feeds the next append's cached head, as head() does: a
            # writer that caught up after a lost race appends in one statement again, instead
            # of reading the head under the lock (and, while others keep writing, losing again).
            # The append uses it only if it is the head the caller expects, and the insert still
            # checks it is the stored head.
            self._note_erased(key, seal.erased_through)
            self._remember(key, StreamHead(last.seq, last.hash, last.recorded_at_text))
        return seal, first, last

    def _ends_of(
        self, rows: list[tuple[Any, ...]]
    ) -> tuple[HeadSeal | None, Record | None, Record | None]:
        """The seal, first and newest record from the ``ends`` statement's tagged rows."""
        seal = first = last = None
        for tag, *row in rows:
            if tag == "s":
                seal = HeadSeal(int(row[0]), row[1], row[3], int(row[2]))
            elif tag == "f":
                first = Record(*row)
            else:
                last = Record(*row)
        opened = self._opened([r for r in (first, last) if r is not None])
        return seal, opened[0] if first else None, opened[-1] if last else None

    def _generation_in(self, conn: Conn) -> int:
        row = conn.execute(self._q["tree_gen"]).fetchone()
        return int(row[0]) if row is not None else 0

    def _tree_generation(self) -> int:
        return self._read("read the ledger tree", self._generation_in)

    def _tree_blocks(self) -> tuple[int, list[TreeBlock]]:
        def run(conn: Conn) -> tuple[int, list[TreeBlock]]:
            generation = self._generation_in(conn)
            if not self._has_tree(conn):
                return generation, []
            rows = conn.execute(self._q["tree_read"]).fetchall()
            return generation, [
                TreeBlock(int(b), int(first), int(last), bytes(node), bytes(mac))
                for b, first, last, node, mac in rows
            ]

        return self._read("read the ledger tree", run)

    def _save_tree_blocks(
        self, rows: Sequence[TreeBlock], *, replace: bool, generation: int
    ) -> bool | None:
        if self._read_only:
            return None
        with self._write("save the ledger tree") as conn:
            # Savers (other processes too) and purges queue here, so what is read below still
            # holds when the rows go in.
            conn.execute(pgsql.LOCK, (self._tree_key,))
            if self._generation_in(conn) != generation:
                return False  # a purge since the rows' records were read: rebuild instead
            if not self._has_tree(conn):
                return None  # dropped by hand: the next writable open creates it again
            if replace:
                conn.execute(self._q["tree_drop"])
            row = conn.execute(self._q["tree_count"]).fetchone()
            count = int(row[0]) if row else 0
            if rows and rows[0].block > count:
                return False
            new = [r for r in rows if r.block >= count]
            if new:
                conn.execute(
                    self._q["tree_insert"],
                    (
                        [r.block for r in new],
                        [r.first_position for r in new],
                        [r.last_position for r in new],
                        [r.node for r in new],
                        [r.mac for r in new],
                    ),
                )
            return True

    def _head_seal(self, key: str) -> HeadSeal | None:
        def run(conn: Conn) -> HeadSeal | None:
            row = conn.execute(self._q["head_seal"], (key,)).fetchone()
            return None if row is None else HeadSeal(row[0], row[1], row[2], row[3])

        return self._read("read", run)

    def _sealed_keys(self) -> list[str]:
        def run(conn: Conn) -> list[str]:
            return [str(r[0]) for r in conn.execute(self._q["seals"])]

        return self._read("streams", run)

    def seq_at(self, memory_id: MemoryId, at: datetime) -> int | None:
        check_at("seq_at", at)
        params = (self._stream_key(memory_id, "seq_at"), format_time(at))

        def run(conn: Conn) -> int | None:
            row = conn.execute(self._q["seq_at"], params).fetchone()
            return None if row is None else int(row[0])

        return self._read("seq_at", run)

    def load_snapshot(
        self, memory_id: MemoryId, name: str, *, lte: int | None = None
    ) -> Snapshot | None:
        check_range("load_snapshot", None, lte, None)
        check_snapshot("load_snapshot", name)
        params = (
            self._stream_key(memory_id, "load_snapshot"),
            name,
            _NO_UPPER if lte is None else lte,
        )

        def run(conn: Conn) -> Snapshot | None:
            row = conn.execute(self._q["load_snapshot"], params).fetchone()
            return (
                None
                if row is None
                else Snapshot(row[0], row[1], row[2], row[3], parse_time(row[4]))
            )

        return self._opened_state(self._read("load_snapshot", run))

    def _name_rows(self) -> dict[str, str]:
        if self._names is None:
            return {}
        return self._read("names", lambda conn: dict(conn.execute(self._q["names"]).fetchall()))

    def _stream_rows(self) -> list[tuple[str, int, int, str, str]]:
        def run(conn: Conn) -> list[tuple[str, int, int, str, str]]:
            return [
                (r[0], int(r[1]), int(r[2]), r[3], r[4]) for r in conn.execute(self._q["streams"])
            ]

        return self._read("streams", run)
