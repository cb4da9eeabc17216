"""Each ``chatledger`` subcommand's arguments, options and help text.

This module owns the catalogue of subcommands as the parser shows them: what each command is
called, what it says in ``--help`` and which options it takes (with the argument types only a
command's options use). It is separate from :mod:`projections.cli.args`, which owns the parser
itself (the global options accepted before or after the command, ``ID`` and ``--policy``
added through :class:`~projections.cli.args._Commands`, memory ids and the checks after
parsing): a new command or option changes this module alone.
"""

from __future__ import annotations

import argparse
import json
from datetime import timedelta
from typing import TYPE_CHECKING

from eventlog.ids import memory_key
from projections.grammar import parse_duration, parse_positive, parse_seq, parse_when

if TYPE_CHECKING:
    from projections.cli.args import _Commands

__all__: list[str] = []


# ---------------------------------------------------------------------------- argument types


def _subject(text: str) -> tuple[object, ...]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, list) or not value:
        msg = f"--subject {text!r}: expected a non-empty JSON array, e.g. '[\"alice\"]'"
        raise argparse.ArgumentTypeError(msg)
    try:
        memory_key(tuple(value))  # [true] or [1.5] is no id's start (they compare equal to 1)
    except (TypeError, ValueError) as e:
        msg = f"--subject {text!r}: not the start of a memory id ({e})"
        raise argparse.ArgumentTypeError(msg) from e
    return tuple(value)


def _add_session_commands(commands: _Commands) -> None:
    """``quarantine`` and ``sent`` (run by :mod:`projections.cli.sessions`)."""
    p = commands.add(
        "quarantine",
        "Acknowledge that record SEQ of memory ID is damaged (as verify names it): reads leave "
        "that one record out instead of refusing the memory; verify keeps reporting the break. "
        "Keyed ledgers need --key-file.",
        ident="required",
    )
    p.add_argument("seq", type=parse_positive, metavar="SEQ", help="the damaged record's seq")
    p.add_argument("--reason", required=True, metavar="TEXT", help="recorded with it")

    p = commands.add(
        "sent",
        "Print as JSON exactly what the model call recorded at event SEQ of memory ID was sent "
        "(a context_sent event, written by window_callback() or a LangChain history with "
        "window=), with its policy, profile and token count, and what of the history it left "
        "out and why; with --policy, what that call would have sent under that policy.",
        ident="required",
        policy=True,
    )
    p.add_argument("seq", type=parse_positive, metavar="SEQ", help="the context_sent event's seq")


def _add_tlog_proof_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tlog-proof",
        action="store_true",
        help="write a C2SP tlog-proof bundle (index, audit path, the checkpoint) against the "
        "signed checkpoint given with --checkpoint, for any C2SP verifier",
    )
    p.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="with --tlog-proof: the signed checkpoint (`chatledger checkpoint`) to prove against",
    )


def _add_check_proof(commands: _Commands) -> None:
    p = commands.add(
        "check-proof",
        "Check a proof from `chatledger prove` against a digest, or a C2SP tlog-proof bundle "
        "(`prove --tlog-proof`) against the log's verifier key; needs no database.",
    )
    p.add_argument("proof", metavar="PROOF", help="a file written by `chatledger prove`")
    p.add_argument("--digest", metavar="FILE", help="the digest to check a JSON proof against")
    p.add_argument(
        "--verifier-key",
        metavar="FILE",
        help="for a tlog-proof bundle: the .vkey file of the checkpoint's signer",
    )
    p.add_argument(
        "--origin", metavar="ORIGIN", help="for a tlog-proof bundle: the log name it must carry"
    )


def _add_receipt_commands(commands: _Commands) -> None:
    p = commands.add(
        "erasure-receipt",
        "Print the erasure receipt RECEIPT_ID (what was erased, when, why) with the digest and "
        "inclusion proof that tie it to the ledger; -o FILE writes it for `check-receipt`.",
    )
    p.add_argument(
        "receipt_id", metavar="RECEIPT_ID", help="<position>-<hash>, as `erase` printed it"
    )
    p.add_argument("--digest", metavar="FILE", help="prove against this digest (default: now)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to a new FILE ('-': stdout)")
    p = commands.add(
        "check-receipt",
        "Check an erasure receipt file from `chatledger erasure-receipt -o` against a digest "
        "you trust; needs no database.",
    )
    p.add_argument("receipt", metavar="RECEIPT", help="a file written by `erasure-receipt -o`")
    p.add_argument("--digest", metavar="FILE", help="the trusted digest (`chatledger digest`)")
    p.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="instead: a signed checkpoint (`chatledger checkpoint`)",
    )
    p.add_argument("--verifier-key", metavar="FILE", help="with --checkpoint: its signer's .vkey")
    p.add_argument("--origin", metavar="ORIGIN", help="with --checkpoint: the log name it carries")


def _add_inspection_commands(commands: _Commands) -> None:
    p = commands.add("ids", "List memory ids with event count and first and last activity.")
    p.add_argument("--include-system", action="store_true", help="also list ~sys: streams")

    p = commands.add(
        "history", "List a memory's events: seq, time, kind and a preview.", ident="required"
    )
    p.add_argument(
        "--from", dest="start", type=parse_positive, metavar="SEQ", help="first seq to list"
    )
    p.add_argument("--to", dest="end", type=parse_positive, metavar="SEQ", help="last seq to list")

    p = commands.add(
        "show",
        "Show a memory's view now (after the head event), after a seq, or at a time.",
        ident="required",
        policy=True,
    )
    when = p.add_mutually_exclusive_group()
    when.add_argument(
        "--as-of", type=parse_seq, metavar="SEQ", help="the view right after event SEQ"
    )
    when.add_argument(
        "--at",
        type=parse_when,
        metavar="TIME",
        help="the view at TIME (ISO 8601, naive = UTC; to the second, as history prints it, "
        "includes that second's events)",
    )

    p = commands.add(
        "diff",
        "Which messages entered and left the view between seq A and seq B, and why.",
        ident="required",
    )
    p.add_argument("a", metavar="A", type=parse_seq, help="the earlier seq")
    p.add_argument("b", metavar="B", type=parse_seq, help="the later seq")

    p = commands.add(
        "explain",
        "When the message brought by event SEQ entered the view, and why it left.",
        ident="required",
    )
    p.add_argument("seq", metavar="SEQ", type=parse_positive, help="the add or set event")
    p.add_argument(
        "--index", type=parse_seq, default=0, help="index in a set event's list (default 0)"
    )

    p = commands.add(
        "replay",
        "Step through the events, showing the view after each (paged on a terminal).",
        ident="required",
        policy=True,
    )
    p.add_argument(
        "--from", dest="start", type=parse_positive, default=1, metavar="SEQ", help="first event"
    )
    p.add_argument("--to", dest="end", type=parse_positive, metavar="SEQ", help="last event")
    p.add_argument(
        "--page-size", type=parse_positive, metavar="N", help="show N events, then how to continue"
    )
    p.add_argument("--no-pager", action="store_true", help="never page, even on a terminal")

    p = commands.add(
        "verify",
        "Check the hash chains (exit status 1 names the first bad seq); with --digest, check "
        "that the log is an append-only extension of a digest taken earlier.",
        ident="optional",
    )
    p.add_argument("--digest", metavar="FILE", help="a file written by `chatledger digest`")
    p.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="a signed checkpoint (`chatledger checkpoint`): check its signature and that the "
        "log is its tree or extends it (exit status 1 when behind it: rolled back?)",
    )
    p.add_argument(
        "--verifier-key", metavar="FILE", help="with --checkpoint: the signer's .vkey file"
    )

    p = commands.add(
        "serve",
        "Open the read-only web inspector on this ledger (needs chatledger[inspector]): step "
        "through a memory and see the window the model saw at each event, and why it changed.",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; another one lets other machines read every "
        "conversation)",
    )
    p.add_argument("--port", type=parse_positive, default=8765, help="TCP port (default 8765)")
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests for this host name (repeatable); any name but the bound "
        "address and localhost is refused, against DNS rebinding",
    )

    p = commands.add(
        "digest", "Print (or save) the size and Merkle root of the whole log: keep it elsewhere."
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write to a new FILE ('-': stdout)")

    p = commands.add(
        "prove",
        "Write an inclusion proof of event SEQ of memory ID, checkable without the database; "
        "with --since DIGEST instead, the proof that the log extends that digest.",
        ident="optional",
    )
    p.add_argument("seq", metavar="SEQ", type=parse_positive, nargs="?", help="the event to prove")
    p.add_argument("-o", "--output", metavar="FILE", help="write to a new FILE ('-': stdout)")
    p.add_argument("--digest", metavar="FILE", help="prove against this digest's log size")
    p.add_argument(
        "--no-disclose",
        action="store_true",
        help="carry the event's salted commitment instead of its content: the proof verifies "
        "the same, but its holder cannot read or confirm the message",
    )
    _add_tlog_proof_options(p)
    p.add_argument(
        "--since",
        metavar="DIGEST",
        help="print the current digest and the consistency proof (RFC 9162) that the log "
        "extends DIGEST, as one JSON object for `chatledger check-consistency`",
    )

    _add_check_proof(commands)
    _add_receipt_commands(commands)

    p = commands.add(
        "check-consistency",
        "Check that a later digest extends an earlier one, with the object `chatledger prove "
        "--since` printed; needs no database.",
    )
    p.add_argument("old", metavar="OLD", help="the earlier digest (`chatledger digest`)")
    p.add_argument("proof", metavar="PROOF", help="the output of `chatledger prove --since OLD`")

    p = commands.add(
        "keygen",
        "Write an Ed25519 signing key NAME.key (mode 0600) and its verifier key NAME.vkey, in "
        "Go's signed-note format; needs no database.",
    )
    p.add_argument("name", metavar="NAME", help="the key name, e.g. example.com/chatledger")
    p.add_argument("--out", metavar="DIR", default=".", help="directory to write to (default .)")

    p = commands.add(
        "checkpoint",
        "Print a signed checkpoint of the log (C2SP tlog-checkpoint: origin, size, root), "
        "which anyone with the verifier key checks later with `chatledger verify --checkpoint`.",
    )
    p.add_argument(
        "--origin", required=True, help="the log's name, the first line, e.g. example.com/log"
    )
    p.add_argument("--signing-key", required=True, metavar="FILE", help="a `keygen` .key file")
    p.add_argument("-o", "--output", metavar="FILE", help="write to a new FILE ('-': stdout)")


def _add_maintenance_commands(commands: _Commands) -> None:
    p = commands.add(
        "export",
        "Write the ledger (or one memory) as JSON Lines that keep seqs, times and hashes.",
        ident="optional",
    )
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="'-' writes to stdout")
    p.add_argument(
        "--after", type=parse_seq, default=0, metavar="SEQ", help="with ID: events after SEQ"
    )
    p.add_argument("--include-system", action="store_true", help="also export ~sys: streams")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.add_argument(
        "--allow-damaged",
        action="store_true",
        help="export memories whose chain does not verify as stored (for forensics; such a "
        "file does not import)",
    )

    p = commands.add(
        "import",
        "Append an export to the store (creating --db if needed). Every hash is checked before "
        "anything is written, and nothing is overwritten: a memory that already has events is "
        "refused unless the file continues exactly from its head (see export --after), or, with "
        "--resume, the file holds its history so far (an interrupted import of FILE).",
    )
    p.add_argument("file", metavar="FILE", help="a `chatledger export` file ('-' = stdin)")
    p.add_argument(
        "--skip-purged", action="store_true", help="leave out memories that start with a tombstone"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="finish an interrupted import of this FILE: memories the target already holds up "
        "to some seq of the file (same hash there) get the rest",
    )

    p = commands.add("fork", "Start memory NEW as a copy of ID's view at a seq.", ident="required")
    p.add_argument("--at", dest="seq", type=parse_positive, metavar="SEQ", help="default: the head")
    p.add_argument(
        "--to", dest="new", required=True, metavar="NEW", help="an unused id, written like ID"
    )

    p = commands.add(
        "erase",
        "ERASE the content of memory ID (or of every memory of --subject), keeping the chain "
        "provable: records stay with their hashes, a memory_erased receipt is appended.",
        ident="optional",
    )
    p.add_argument(
        "--subject",
        type=_subject,
        metavar="JSON_ARRAY",
        help="erase every memory whose tuple id starts with this prefix, e.g. '[\"alice\"]'",
    )
    p.add_argument("--reason", required=True, metavar="TEXT", help="recorded in each receipt")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    p = commands.add(
        "compact",
        "Run one compaction: snapshot idle memories; with --purge-idle-for, ERASE long-idle ones.",
    )
    p.add_argument(
        "--idle-for",
        type=parse_duration,
        default=timedelta(days=1),
        metavar="DURATION",
        help="snapshot memories idle this long (default 1d)",
    )
    p.add_argument(
        "--purge-idle-for",
        type=parse_duration,
        metavar="DURATION",
        help="erase the content of memories idle this long; hashes and a receipt stay "
        "(default: never)",
    )


def _add_key_command(commands: _Commands) -> None:
    p = commands.add(
        "key",
        "Chain key administration. `key adopt --key-file FILE` keys an unkeyed ledger: every "
        "chain is checked, the records there now are sealed as they are (a forger without the key "
        "can no longer change them), and every later record is keyed.",
    )
    p.add_argument("action", choices=["adopt"], help="adopt: key an unkeyed ledger")
