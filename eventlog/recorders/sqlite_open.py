"""What the ledger asks of SQLite at open (``eventlog.store.LedgerTx``): settings, the facts
that decide how a chain key is taken on, and the head seals to fill in."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence

from eventlog.recorders.sqlite_sql import (
    ANY_RECORDS,
    GET_SETTING,
    HEADS_EXIST,
    KEYED_RECORDS,
    LAST_POSITION,
    LEGACY_HASHES,
    PUT_SEAL,
    PUT_SETTING,
    SEALS,
    SETTINGS_EXIST,
)

__all__ = ["SQLiteLedgerTx"]


class SQLiteLedgerTx:
    """The ledger's view of one SQLite transaction at open (see ``LedgerTx``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        # create_schema=False on a database migrated by an older version: no such tables.
        self._settings = conn.execute(SETTINGS_EXIST).fetchone() is not None
        self._heads = conn.execute(HEADS_EXIST).fetchone() is not None

    def sealable(self) -> bool:
        return self._heads

    def setting(self, name: str) -> str | None:
        if not self._settings:
            return None
        row = self._conn.execute(GET_SETTING, (name,)).fetchone()
        return None if row is None else str(row[0])

    def put_setting(self, name: str, value: str) -> None:
        self._conn.execute(PUT_SETTING, (name, value))

    def facts(self) -> tuple[bool, bool, int]:
        return (
            self._conn.execute(ANY_RECORDS).fetchone() is not None,
            self._conn.execute(KEYED_RECORDS).fetchone() is not None,
            int(self._conn.execute(LAST_POSITION).fetchone()[0]),
        )

    def legacy_hashes(self, upto: int | None) -> Iterator[str]:
        bound = (1 << 62) if upto is None else upto
        for (value,) in self._conn.execute(LEGACY_HASHES, (bound,)):
            yield str(value)

    def seals(self, *, pending: bool) -> list[tuple[str, int, str, int]]:
        if not self._heads:
            return []
        sql = SEALS + (" WHERE mac = ''" if pending else "")
        return [(r[0], r[1], r[2], r[3]) for r in self._conn.execute(sql)]

    def put_seals(self, rows: Sequence[tuple[str, str]]) -> None:
        self._conn.executemany(PUT_SEAL, rows)
