"""Moved to :mod:`eventlog.formats.jsonl` (the formats have their own corner). This path stays
importable for code written against it, e.g. ``from eventlog.jsonl import FORMAT_VERSION``; new
code imports from :mod:`eventlog` or :mod:`eventlog.formats.jsonl`."""

from __future__ import annotations

from eventlog.formats.jsonl import (
    FORMAT,
    FORMAT_VERSION,
    ImportReport,
    export_jsonl,
    import_jsonl,
)

__all__ = ["FORMAT", "FORMAT_VERSION", "ImportReport", "export_jsonl", "import_jsonl"]
