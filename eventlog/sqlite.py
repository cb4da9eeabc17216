"""Moved to :mod:`eventlog.recorders.sqlite` (the backends have their own package). This path
stays importable for code written against it, e.g. ``from eventlog.sqlite import
SQLiteEventStore``; new code imports from :mod:`eventlog`."""

from __future__ import annotations

from eventlog.recorders.sqlite import (
    APPLICATION_ID,
    CLEANUP_WAIT,
    MIGRATIONS,
    SCAN_ROWS,
    SQLiteEventStore,
    is_ledger_file,
)

__all__ = [
    "APPLICATION_ID",
    "CLEANUP_WAIT",
    "MIGRATIONS",
    "SCAN_ROWS",
    "SQLiteEventStore",
    "is_ledger_file",
]
