"""Ledger digests and inclusion proofs: digest, prove, check-proof (and verify --digest).

A digest is what an auditor keeps outside the database: the size and Merkle root of the whole
log. Later, ``verify --digest`` says whether the log is still an append-only extension of it,
and ``check-proof`` checks that one record is in it with nothing but the two files.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from eventlog.ledger import (
    DigestReport,
    InclusionProof,
    LedgerDigest,
    digest,
    prove,
    verify_digest,
    verify_inclusion,
)
from projections.cli.args import shell_id
from projections.cli.errors import Failure, UsageError
from projections.cli.render import console, emit
from projections.cli.store import check_seq, existing, read_key

if TYPE_CHECKING:
    from eventlog.store import EventStore

__all__ = [
    "check_proof",
    "digest_cmd",
    "key_cmd",
    "load_digest",
    "prove_cmd",
    "verify_digest_cmd",
]


def key_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger key adopt --key-file FILE``: key an unkeyed ledger. The store was opened with
    ``adopt_key=True``, which checked every chain and sealed the unkeyed records as they are (the
    legacy prefix); this reports what was sealed."""
    if args.key_file is None:
        msg = "key adopt needs --key-file FILE: the chain key to adopt (at least 16 bytes)"
        raise UsageError(msg)
    report = store.verify()
    if not report.ok:
        msg = "the ledger does not verify after adopting the key; run `chatledger verify`"
        raise Failure(msg)
    if args.json:
        emit(
            {
                "keyed_since": report.keyed_since,
                "legacy_records": report.legacy_records,
                "records": report.records,
            }
        )
        return 0
    sys.stdout.write(
        f"keyed: every record after position {report.keyed_since} is keyed; "
        f"{report.legacy_records} unkeyed record(s) before it are sealed as the legacy prefix "
        f"({report.records} records verified)\n"
    )
    return 0


def _write(text: str, output: str | None, what: str) -> None:
    """Write ``text`` to stdout or to a new file (never over an existing one)."""
    if output is None or output == "-":
        sys.stdout.write(text + "\n")
        return
    path = Path(output)
    if path.exists():
        msg = f"{what} file {path} exists; pick a new name (a digest is evidence: keep each one)"
        raise Failure(msg)
    path.write_text(text + "\n", encoding="utf-8")


def _read(path_text: str, option: str) -> str:
    path = Path(path_text)
    if not path.is_file():
        msg = f"{option} {path_text}: no such file"
        raise UsageError(msg)
    return path.read_text(encoding="utf-8")


def load_digest(path_text: str) -> LedgerDigest:
    """Read a digest file written by ``chatledger digest``.

    Raises:
        Failure: The file is not a digest.
    """
    try:
        return LedgerDigest.from_json(_read(path_text, "--digest"))
    except ValueError as e:
        msg = (
            f"--digest {path_text} is not a chatledger digest ({e}); "
            "write one with `chatledger digest -o FILE`"
        )
        raise Failure(msg) from e


def digest_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger digest [-o FILE]``: the size and Merkle root of the whole log, now."""
    d = digest(store)
    _write(d.to_json(), args.output, "digest")
    if args.output not in (None, "-"):
        console(stderr=True).print(
            f"digest of {d.size} records written to {args.output}; keep it outside the database "
            f"and check the log later with `chatledger verify --digest {args.output}`",
            highlight=False,
        )
    return 0


def verify_digest_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger verify --digest FILE``: exit status 1 unless the log extends the digest."""
    d = load_digest(args.digest)
    report: DigestReport = verify_digest(store, d)
    if args.json:
        emit(
            {
                "ok": report.ok,
                "digest_size": d.size,
                "size": report.size,
                "missing": report.missing,
                "first_difference": None
                if report.first_difference is None
                else {"memory": report.first_difference[0], "seq": report.first_difference[1]},
                "message": report.message,
            }
        )
        return 0 if report.ok else 1
    from rich.text import Text  # rich costs startup time: loaded only to print

    out = console()
    label = ("OK", "bold green") if report.ok else ("CHANGED", "bold red")
    out.print(Text.assemble(label, f" {report.message}"))
    if report.chain is not None:
        for key, (seq, reason) in report.chain.failures.items():
            out.print(
                f"  broken chain: memory {key!r}: first bad seq {seq}: {reason}", highlight=False
            )
    return 0 if report.ok else 1


def prove_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger prove ID SEQ -o FILE``: an inclusion proof of one record."""
    key = args.key
    check_seq("SEQ", args.seq, existing(store, args, key), key)
    against = load_digest(args.digest) if args.digest else None
    try:
        proof = prove(store, key, args.seq, digest=against)
    except LookupError as e:
        raise Failure(str(e)) from e
    _write(proof.to_json(), args.output, "proof")
    if args.output not in (None, "-"):
        console(stderr=True).print(
            f"proof of {shell_id(key)} seq {args.seq} in a log of {proof.tree_size} records "
            f"written to {args.output}; check it anywhere with `chatledger check-proof "
            f"{args.output} --digest DIGEST`",
            highlight=False,
        )
    return 0


def check_proof(args: argparse.Namespace) -> int:
    """``chatledger check-proof PROOF --digest FILE``: no database needed."""
    d = load_digest(args.digest)
    try:
        proof = InclusionProof.from_json(_read(args.proof, "PROOF"))
    except ValueError as e:
        msg = f"{args.proof} is not a chatledger proof ({e}); write one with `chatledger prove`"
        raise Failure(msg) from e
    from rich.text import Text  # rich costs startup time: loaded only to print

    ok = verify_inclusion(proof, d, key=read_key(args))
    record = proof.record
    what = f"memory {shell_id(record.stream_id)} seq {record.seq} ({record.kind})"
    if args.json:
        emit({"ok": ok, "memory": record.stream_id, "seq": record.seq, "digest_size": d.size})
        return 0 if ok else 1
    if ok:
        label = ("OK", "bold green")
        detail = f" {what} is record {proof.leaf_index + 1} of the {d.size} the digest covers"
    elif proof.tree_size != d.size:
        label = ("NOT PROVEN", "bold red")
        detail = (
            f" the proof is for a log of {proof.tree_size} records, the digest for {d.size}; "
            "prove against this digest: `chatledger prove ID SEQ --digest FILE`"
        )
    elif record.format == 3 and args.key_file is None:
        label = ("NOT PROVEN", "bold red")
        detail = f" {what} is from a keyed ledger: pass its --key-file to check the record"
    else:
        label = ("NOT PROVEN", "bold red")
        detail = f" {what} is not in the log the digest describes"
    console().print(Text.assemble(label, detail))
    return 0 if ok else 1
