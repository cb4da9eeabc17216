"""The header line of a JSON Lines export: what the file is, and how far each memory goes.

``last`` maps each memory the file brings to the seq of its last record in it, read before
the records are written (records appended meanwhile are left for the next export). An import
then refuses a file that stops short of it - a copy interrupted or a disk that filled at a
line boundary leaves every chain valid, and would import as a shorter history - or that brings
a memory the header does not name. A header without ``last`` (an export written before it
existed) is read as before: the file is taken as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from eventlog.models import format_time

__all__ = ["FORMAT", "FORMAT_VERSION", "check_complete", "header_line", "parse_header"]

FORMAT = "chatledger-jsonl"
"""The ``format`` named in the header line of an export."""

FORMAT_VERSION = 1
"""The export format version this code writes and reads. Lines gained ``salt``, ``commitment``
and ``format`` with record format 2 (written always, read when present, format 1 when absent):
an addition, so the version stays - an older chatledger refuses such lines by name. Lines
gained ``position`` (the record's place in the global order, so the ledger's Merkle tree can be
rebuilt from an export) in the same way; an import reads it when present and ignores it: the
target store assigns its own positions. The header gained ``last`` the same way (an older
chatledger ignores it)."""

Refuse = Callable[[str], ValueError]


def header_line(keys: list[str], last: Mapping[str, int]) -> dict[str, Any]:
    """The header of an export of ``keys`` whose records go up to ``last``."""
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "exported_at": format_time(datetime.now(UTC)),
        "memories": keys,
        "last": dict(last),
    }


def parse_header(line: str, refuse: Refuse) -> dict[str, int] | None:
    """Check the header line; return its ``last`` (None: the export predates it). A byte
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
    if "last" not in header:
        return None
    last = header["last"]
    if not isinstance(last, dict) or not all(
        type(seq) is int and seq >= 1 for seq in last.values()
    ):
        msg = (
            'the header\'s "last" must map each memory key to the seq of its last record '
            f"in the file (an integer >= 1), not {last!r:.80}; export it again"
        )
        raise refuse(msg)
    return last


def check_complete(last: Mapping[str, int], reached: Mapping[str, int], refuse: Refuse) -> None:
    """Refuse a file whose records (``reached``: key -> the seq of its last record in the
    file) are not those its header's ``last`` announces."""
    for key in reached:
        if key not in last:
            msg = (
                f"the file brings records of {key!r:.80}, which its header does not name "
                '("last"); it was put together by hand - export it again'
            )
            raise refuse(msg)
    for key, seq in last.items():
        got = reached.get(key)
        if got == seq:
            continue
        if got is None:
            msg = (
                f"the export's header says {key!r:.80} goes to seq {seq}, but the file holds "
                "none of its records: it was cut short (an interrupted copy, a full disk?); "
                "export it again"
            )
        else:
            msg = (
                f"the records of {key!r:.80} end at seq {got}, but the export's header says "
                f"{seq}: the file was cut short (an interrupted copy, a full disk?); export "
                "it again"
            )
        raise refuse(msg)
