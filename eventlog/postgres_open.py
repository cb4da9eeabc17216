"""What the ledger asks of PostgreSQL at open (``eventlog.store.LedgerTx``): settings, the
facts that decide how a chain key is taken on, and the head seals to fill in."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["PostgresLedgerTx"]


class PostgresLedgerTx:
    """The ledger's view of one PostgreSQL transaction (or read) at open.

    Args:
        conn: The connection, inside the transaction.
        queries: The store's rendered statements (``postgres_sql.statements``).
    """

    def __init__(self, conn: Any, queries: dict[str, bytes]) -> None:
        self._conn = conn
        self._q = queries

    def sealable(self) -> bool:
        return True  # migration 3 is applied before any store reads or writes

    def setting(self, name: str) -> str | None:
        row = self._conn.execute(self._q["get_setting"], (name,)).fetchone()
        return None if row is None else str(row[0])

    def put_setting(self, name: str, value: str) -> None:
        self._conn.execute(self._q["put_setting"], (name, value))

    def facts(self) -> tuple[bool, bool, int]:
        (any_records,) = self._conn.execute(self._q["any_records"]).fetchone()
        (keyed,) = self._conn.execute(self._q["keyed_records"]).fetchone()
        (last,) = self._conn.execute(self._q["last_position"]).fetchone()
        return bool(any_records), bool(keyed), int(last)

    def legacy_hashes(self, upto: int | None) -> Iterator[str]:
        bound = (1 << 62) if upto is None else upto
        # A server-side cursor would hold the transaction longer; legacy prefixes are what
        # ledgers held before keying, read once at adoption.
        for (value,) in self._conn.execute(self._q["legacy_hashes"], (bound,)).fetchall():
            yield str(value)

    def seals(self, *, pending: bool) -> list[tuple[str, int, str, int]]:
        query = self._q["pending_seals" if pending else "seals"]
        return [(r[0], int(r[1]), r[2], int(r[3])) for r in self._conn.execute(query)]

    def put_seals(self, rows: Sequence[tuple[str, str]]) -> None:
        if rows:
            with self._conn.cursor() as cursor:
                cursor.executemany(self._q["put_seal"], rows)
