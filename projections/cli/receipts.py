"""Erasure receipts on the command line: ``erasure-receipt`` prints one (or writes it as a
file to hand out), ``check-receipt`` checks such a file offline against a trusted digest.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from eventlog.receipts import check_receipt, find_receipt, receipt_bundle
from projections.cli.args import shell_id
from projections.cli.errors import Failure, UsageError
from projections.cli.ledger import load_digest, load_verifier, read_file, write_evidence
from projections.cli.render import console, emit
from projections.cli.store import read_key

if TYPE_CHECKING:
    from eventlog.checkpoint import Checkpoint
    from eventlog.ledger_models import LedgerDigest
    from eventlog.store import EventStore

__all__ = ["check_receipt_cmd", "erasure_receipt_cmd"]


def erasure_receipt_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger erasure-receipt RECEIPT_ID [--digest FILE] [-o FILE] [--json]``."""
    try:
        receipt = find_receipt(store, args.receipt_id)
    except ValueError as e:
        raise UsageError(str(e)) from e
    except LookupError as e:
        raise Failure(str(e)) from e
    trusted = None if args.digest is None else load_digest(args.digest)
    try:
        text = receipt_bundle(store, receipt, digest=trusted)
    except ValueError as e:
        msg = f"erasure-receipt {receipt.id}: {e}"
        raise Failure(msg) from e
    doc = json.loads(text)
    if args.output not in (None, "-"):
        write_evidence(text, args.output, "receipt")
    if args.json or args.output == "-":
        emit(doc)
        return 0
    shown, d = doc["receipt"], doc["digest"]
    out = console()
    out.print(f"erasure receipt {shown['id']}")
    out.print(
        f"  memory {shell_id(shown['memory'])}: {shown['record_count']} records erased "
        f"(seq {shown['first_seq']}..{shown['last_seq']}) at {shown['erased_at']}"
    )
    out.print(f"  reason: {shown['reason']}")
    out.print(f"  proven against the digest of {d['size']} records, root {d['root']}")
    if args.output not in (None, "-"):
        out.print(
            f"written to {args.output}; check it anywhere with `chatledger check-receipt "
            f"{args.output} --digest DIGEST`"
        )
    return 0


def check_receipt_cmd(args: argparse.Namespace) -> int:
    """``chatledger check-receipt RECEIPT --digest FILE``: no database needed."""
    text = read_file(args.receipt, "check-receipt")
    trusted: LedgerDigest | Checkpoint
    if args.checkpoint is not None and args.digest is None:
        trusted = _signed(args)
    elif args.digest is not None and args.checkpoint is None:
        trusted = load_digest(args.digest)
    else:
        msg = (
            f"check-receipt {args.receipt} needs --digest FILE (a digest of the ledger you "
            "trust, `chatledger digest`) or --checkpoint FILE --verifier-key FILE (a signed "
            "checkpoint, `chatledger checkpoint`), one of the two"
        )
        raise UsageError(msg)
    check = check_receipt(text, trusted, chain_key=read_key(args))
    if args.json:
        emit({"ok": check.ok, "reason": check.reason, "receipt": check.receipt})
        return 0 if check.ok else 1
    from rich.text import Text  # rich costs startup time: loaded only to print

    shown = check.receipt
    if check.ok:
        label = ("OK", "bold green")
        detail = (
            f" erasure receipt {shown['id']}: memory {shell_id(shown['memory'])}, "
            f"{shown['record_count']} records erased at {shown['erased_at']} "
            f"({shown['reason']}) is in the ledger the digest describes"
        )
    else:
        label, detail = ("NOT PROVEN", "bold red"), f" {check.reason}"
    console().print(Text.assemble(label, detail))
    return 0 if check.ok else 1


def _signed(args: argparse.Namespace) -> Checkpoint:
    """The checkpoint ``--checkpoint`` names, its signature checked with ``--verifier-key``."""
    from eventlog.checkpoint import open_checkpoint

    if args.verifier_key is None:
        msg = "check-receipt --checkpoint needs --verifier-key FILE: the signer's .vkey file"
        raise UsageError(msg)
    note = read_file(args.checkpoint, "check-receipt --checkpoint")
    verifier = load_verifier(args.verifier_key)
    try:
        return open_checkpoint(note, verifier, origin=args.origin)
    except ValueError as e:
        msg = f"check-receipt: the checkpoint {args.checkpoint} does not hold: {e}"
        raise Failure(msg) from e
