"""Moved to :mod:`eventlog.recorders.postgres` (the backends have their own package). This path
stays importable for code written against it and is where the PostgreSQL store is imported
from (``from eventlog.postgres import PostgresEventStore``; it needs psycopg, the [postgres]
extra, so :mod:`eventlog` does not export it)."""

from __future__ import annotations

from eventlog.recorders.postgres import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_STATEMENT_TIMEOUT,
    MIGRATIONS,
    PostgresEventStore,
)

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_STATEMENT_TIMEOUT",
    "MIGRATIONS",
    "PostgresEventStore",
]
