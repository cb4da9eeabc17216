"""Opening a PostgreSQL ledger: the schema's migrations applied (:meth:`setup`) or checked,
and what the ledger asks of PostgreSQL at open (``eventlog.store.LedgerTx``): settings, the facts
that decide how a chain key is taken on, and the head seals to fill in."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
import psycopg.errors

from eventlog.errors import PersistenceError, SchemaVersionError
from eventlog.keycheck import settle_keys
from eventlog.names import settle_ids
from eventlog.recorders import postgres_sql as pgsql
from eventlog.recorders.postgres_base import PostgresBase
from eventlog.recorders.postgres_sql import MIGRATIONS
from eventlog.store import LedgerTx

if TYPE_CHECKING:
    from eventlog.witness import Witness

__all__ = ["PostgresLedgerTx", "PostgresSchema"]


class PostgresSchema(PostgresBase):
    """:class:`~eventlog.postgres.PostgresEventStore`'s schema setup and check at open."""

    # ------------------------------------------------------------ schema

    def setup(self) -> None:
        """Create the schema and apply pending :data:`MIGRATIONS`; idempotent.

        Safe when several processes call it at once: they queue on an advisory lock, and each
        applies only the versions missing from ``eventlog_migrations`` when its turn comes.

        Raises:
            SchemaVersionError: The schema was migrated by a newer chatledger.
            PersistenceError: The database refused (e.g. no CREATE privilege).
        """
        if self._up_to_date("setup"):
            return
        with self._guard("setup") as conn, conn.transaction():
            conn.execute(pgsql.LOCK, (self._setup_key,))
            # Check first: CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege on the
            # database even when the schema exists.
            if conn.execute(pgsql.SCHEMA_EXISTS, (self._schema,)).fetchone() is None:
                conn.execute(self._q["create_schema"])
            conn.execute(self._q["create_migrations"])
            applied = {row[0] for row in conn.execute(self._q["versions"])}
            self._check_version(applied)
            for version, ddl in enumerate(MIGRATIONS):
                if version not in applied:
                    conn.execute(pgsql.render(ddl, self._ident))
                    conn.execute(self._q["record_version"], (version,))
            # ledger_blocks holds derived data, checked against the records whenever it is
            # used: a table dropped by hand is created again, empty, and the next digest
            # refills it (until then, and where no open may migrate, the tree is rebuilt from
            # the records in memory: see PostgresReads._tree_blocks).
            if pgsql.TREE_MIGRATION in applied and not self._has_tree(conn):
                conn.execute(pgsql.render(MIGRATIONS[pgsql.TREE_MIGRATION], self._ident))

    def _up_to_date(self, operation: str) -> bool:
        """Whether every migration is applied, in one round trip and without the setup lock
        (a store opens far more often than a schema changes)."""
        with self._guard(operation) as conn:
            try:
                row = conn.execute(self._q["version"], (self._tree_table,)).fetchone()
            except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
                # Not an error to translate but the answer "not set up yet"; the slow path
                # creates the schema or reports what is missing.
                conn.rollback()
                return False
        count, newest, tree = row if row is not None else (0, None, False)
        if newest is None:
            return False
        self._check_version({newest})
        return bool(count == len(MIGRATIONS) and newest == len(MIGRATIONS) - 1 and tree)

    def _check_schema(self) -> None:
        if self._up_to_date("open"):
            return
        with self._guard("open") as conn:
            table = f"{self._ident.as_string()}.eventlog_migrations"
            row = conn.execute(pgsql.MIGRATIONS_EXIST, (table,)).fetchone()
            applied = (
                set()
                if not row or not row[0]
                else {r[0] for r in conn.execute(self._q["versions"])}
            )
        self._check_version(applied)
        missing = sorted(set(range(len(MIGRATIONS))) - applied)
        if missing:
            msg = (
                f"schema {self._schema!r} at {self._where} lacks eventlog migrations {missing}; "
                "call store.setup() once (or open with create_schema=True), or apply "
                "eventlog.postgres.MIGRATIONS with your migration tool"
            )
            operation = "open"
            raise PersistenceError(operation, msg)

    def _check_version(self, applied: set[int]) -> None:
        newest = max(applied, default=-1)
        if newest >= len(MIGRATIONS):
            what = f"PostgreSQL schema {self._schema!r} at {self._where}"
            raise SchemaVersionError(what, newest, len(MIGRATIONS) - 1)

    def _load_key_check(self, witness: str | os.PathLike[str] | Witness | None) -> None:
        """Settle the chain key and head seals (see ``eventlog.keycheck.settle_keys``), then check
        the witness (see ``EventStore._attach_witness``)."""
        where = f"schema {self._schema!r} at {self._where}"

        def read(fn: Callable[[LedgerTx], bool]) -> bool:
            return self._read("open", lambda conn: fn(PostgresLedgerTx(conn, self._q)))

        def write(fn: Callable[[LedgerTx], bool]) -> bool:
            # With the events table locked against inserts: two first opens with different
            # keys are serialized, and no append moves what is being sealed.
            with self._write("open", whole_log=True) as conn:
                return fn(PostgresLedgerTx(conn, self._q))

        settle_keys(self, where, read, write)
        settle_ids(self, where, read, write)
        self._attach_witness(witness, where)


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
