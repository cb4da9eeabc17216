"""Commands for damage and for what a model was sent: ``quarantine`` (and their parsers).

``chatledger quarantine --db X ID SEQ --reason R`` acknowledges one damaged record so reads
of the memory (sessions, windows, history) leave it out; ``verify`` keeps reporting it (see
:mod:`eventlog.quarantine`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from eventlog.serialization import decode_event
from projections.cli.args import shell_id
from projections.cli.render import console, emit
from projections.cli.store import existing

if TYPE_CHECKING:
    from eventlog.store import EventStore

__all__ = ["add_commands", "quarantine_cmd"]


def add_commands(commands: Any) -> None:
    """Add this module's commands to the parser (``commands`` is args' ``_Commands``)."""
    from projections.cli.args import _positive

    p = commands.add(
        "quarantine",
        "Acknowledge that record SEQ of memory ID is damaged (as verify names it): reads leave "
        "that one record out instead of refusing the memory; verify keeps reporting the break. "
        "Keyed ledgers need --key-file.",
        ident="required",
    )
    p.add_argument("seq", type=_positive, metavar="SEQ", help="the damaged record's seq")
    p.add_argument("--reason", required=True, metavar="TEXT", help="recorded with it")


def quarantine_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger quarantine ID SEQ --reason TEXT``."""
    key = args.key
    existing(store, args, key)
    record = store.quarantine(key, args.seq, reason=args.reason)
    event = decode_event(record)
    found = getattr(event, "found", "")
    if args.json:
        emit(
            {
                "memory": key,
                "seq": args.seq,
                "found": found,
                "reason": args.reason,
                "acknowledgement_seq": record.seq,
            }
        )
        return 0
    console().print(
        f"quarantined {shell_id(key)} seq {args.seq} ({found}); reads leave it out, "
        "`chatledger verify` still reports it",
        markup=False,
        highlight=False,
    )
    return 0
