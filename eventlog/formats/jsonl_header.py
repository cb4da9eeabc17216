"""The header line of a JSON Lines export: what the file is, and how many records follow.

``records`` is the number of record lines the export wrote, each memory read up to the head
it had when the header was written (records appended meanwhile are left for the next export).
An import refuses a file holding another number: a copy interrupted or a disk that filled at
a line boundary leaves every chain valid, and the file would import as a shorter history. One
number, not one per memory, so the header stays small whatever the ledger's size. A header
without ``records`` (an export written before it existed) is read as before: the file is
taken as it is.

``memories`` lists the exported memories' keys for a reader of the file; an import never
reads it. It is left out when it would make the header longer than :data:`MEMORIES_BUDGET`:
the header is a line like any other, and a line longer than the import's bound is refused - a
genuine export of a large ledger was (some 200,000 UUID keys passed the bound of 8 MiB then;
it grows with the ledger, past any bound).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from eventlog.models import format_time

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MEMORIES_BUDGET",
    "check_complete",
    "header_line",
    "parse_header",
]

FORMAT = "chatledger-jsonl"
"""The ``format`` named in the header line of an export."""

FORMAT_VERSION = 1
"""The export format version this code writes and reads. Lines gained ``salt``, ``commitment``
and ``format`` with record format 2 (written always, read when present, format 1 when absent):
an addition, so the version stays - an older chatledger refuses such lines by name. Lines
gained ``position`` (the record's place in the global order, so the ledger's Merkle tree can be
rebuilt from an export) in the same way; an import reads it when present and ignores it: the
target store assigns its own positions. The header gained ``records`` the same way (an older
chatledger ignores it)."""

MEMORIES_BUDGET = 2**20
"""Characters the ``memories`` list may take in a header (beyond it the list is left out)."""

Refuse = Callable[[str], ValueError]


def header_line(keys: list[str], records: int) -> dict[str, Any]:
    """The header of an export of ``keys`` that writes ``records`` record lines."""
    header: dict[str, Any] = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "exported_at": format_time(datetime.now(UTC)),
        "records": records,
    }
    # Counted unescaped: JSON escapes make a key at most 6 times longer, so the header stays
    # under the import's line bound (64 MiB; even at 8 MiB) all the same.
    if sum(len(key) + 3 for key in keys) <= MEMORIES_BUDGET:
        header["memories"] = keys
    return header


def parse_header(line: str, refuse: Refuse) -> int | None:
    """Check the header line; return its ``records`` (None: the export predates it). A byte
    order mark before it (an editor on Windows saved the file) is not part of it."""
    try:
        header = json.loads(line.removeprefix("\ufeff"))
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        msg = (
            f"it is not a chatledger export (the first line must be a {FORMAT!r} header; "
            "write one with `chatledger export`)"
        )
        raise refuse(msg)
    version = header.get("version")
    if type(version) is not int or version != FORMAT_VERSION:  # true == 1 in Python
        msg = (
            f"format version {version!r} is not {FORMAT_VERSION}; use the chatledger that "
            "wrote it, or a newer one"
        )
        raise refuse(msg)
    if "records" not in header:
        return None
    records = header["records"]
    if type(records) is not int or records < 0:
        msg = (
            f'the header\'s "records" must be the number of record lines that follow (an '
            f"integer >= 0), not {records!r:.80}; export it again"
        )
        raise refuse(msg)
    return records


def check_complete(records: int, got: int, refuse: Refuse) -> None:
    """Refuse a file holding ``got`` record lines where its header announced ``records``."""
    if got == records:
        return
    if got < records:
        msg = (
            f"the file holds {got} records, but its header says the export wrote {records}: "
            "it was cut short (an interrupted copy, a full disk?); export it again"
        )
    else:
        msg = (
            f"the file holds {got} records, but its header says the export wrote {records}: "
            "records were added to it by hand; export it again"
        )
    raise refuse(msg)
