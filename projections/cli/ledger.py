"""Ledger digests and inclusion proofs: digest, prove, check-proof (and verify --digest).

A digest is what an auditor keeps outside the database: the size and Merkle root of the whole
log. Later, ``verify --digest`` says whether the log is still an append-only extension of it,
and ``check-proof`` checks that one record is in it with nothing but the two files.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventlog.checkpoint import open_checkpoint, sign_checkpoint, verify_checkpoint
from eventlog.consistency import (
    evidence_json,
    prove_consistency,
    read_evidence,
    verify_consistency,
)
from eventlog.ledger import digest, prove, verify_digest, verify_inclusion
from eventlog.ledger_models import DigestReport, InclusionProof, LedgerDigest
from eventlog.note import Signer, Verifier, generate_key
from eventlog.validation import shown
from projections.cli.args import shell_id, shown_id
from projections.cli.errors import Failure, UsageError
from projections.cli.render import console, emit
from projections.cli.store import check_seq, existing, read_key

if TYPE_CHECKING:
    from eventlog.store import EventStore

# Evidence files are kilobytes (a disclosing proof carries one message); this bound only
# keeps a hostile or mistaken giant file from being read into memory.
_MAX_EVIDENCE = 256 * 2**20

__all__ = [
    "check_consistency",
    "check_proof",
    "checkpoint_cmd",
    "digest_cmd",
    "key_cmd",
    "keygen",
    "load_digest",
    "load_verifier",
    "prove_cmd",
    "prove_consistency_cmd",
    "read_file",
    "verify_checkpoint_cmd",
    "verify_digest_cmd",
    "write_evidence",
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


def write_evidence(text: str, output: str | None, what: str) -> None:
    """Write ``text`` to stdout or to a new file (never over an existing one: a digest, a
    proof or a receipt is evidence, and each one is kept)."""
    if output is None or output == "-":
        sys.stdout.write(text + "\n")
        return
    path = Path(output)
    msg = f"{what} file {path} exists; pick a new name (a {what} is evidence: keep each one)"
    try:
        # "x": created here or refused, never through a symlink planted at the name (exists()
        # is False for one that dangles, and a plain write would create its target).
        with path.open("x", encoding="utf-8") as f:
            f.write(text + "\n")
    except FileExistsError:
        raise Failure(msg) from None


def _deliver(
    args: argparse.Namespace, text: str, what: str, *, is_json: bool, report: dict[str, Any]
) -> None:
    """Write evidence to stdout or ``-o FILE`` (:func:`_write`), keeping ``--json``'s promise of
    one JSON object on stdout: a file written is reported as ``{"file": ..., **report}``, and
    evidence that is not JSON (a signed note) is wrapped as ``{what: text}``."""
    to_file = args.output not in (None, "-")
    if args.json and not to_file and not is_json:
        emit({what.replace(" ", "_"): text})
        return
    write_evidence(text, args.output, what)
    if args.json and to_file:
        emit({"file": args.output, **report})


def read_file(path_text: str, option: str) -> str:
    """The text of the file an option names (a usage error, naming the option, if none)."""
    path = Path(path_text)
    if not path.is_file():
        msg = f"{option} {path_text}: no such file"
        raise UsageError(msg)
    return _text_of(path, option)


def _text_of(path: Path, option: str) -> str:
    """The UTF-8 text of an existing file (a one-line failure, naming it, if not UTF-8 or
    larger than any file chatledger writes)."""
    try:
        with path.open(encoding="utf-8") as f:
            # One character past the limit at most: a 20 GB file handed over as a proof is
            # refused here, not read into memory (a MemoryError, or the machine's exhausted).
            text = f.read(_MAX_EVIDENCE + 1)
    except UnicodeDecodeError as e:
        msg = (
            f"{option} {path}: not UTF-8 text ({e.reason} at byte {e.start}), so not a "
            "file chatledger wrote; pass the file it wrote"
        )
        raise Failure(msg) from e
    if len(text) > _MAX_EVIDENCE:
        msg = (
            f"{option} {path}: longer than {_MAX_EVIDENCE // 2**20} Mi characters, far beyond "
            "any digest, proof, checkpoint, receipt or key file chatledger writes; pass the "
            "file it wrote"
        )
        raise Failure(msg)
    return text


def load_digest(path_text: str) -> LedgerDigest:
    """Read a digest file written by ``chatledger digest``.

    Raises:
        Failure: The file is not a digest.
    """
    try:
        return LedgerDigest.from_json(read_file(path_text, "--digest"))
    except ValueError as e:
        msg = (
            f"--digest {path_text} is not a chatledger digest ({e}); "
            "write one with `chatledger digest -o FILE`"
        )
        raise Failure(msg) from e


def digest_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger digest [-o FILE]``: the size and Merkle root of the whole log, now."""
    d = digest(store)
    _deliver(args, d.to_json(), "digest", is_json=True, report={"size": d.size, "root": d.root})
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
    """``chatledger prove ID SEQ -o FILE``: an inclusion proof of one record (``--no-disclose``:
    its commitment instead of its content); ``prove --since OLD``: a consistency proof."""
    if args.since is not None:
        return prove_consistency_cmd(args, store)
    key = args.key
    if key is None or args.seq is None:
        msg = (
            "prove needs a memory ID and SEQ (an inclusion proof), or --since DIGEST (a "
            "consistency proof); `chatledger ids` lists the ids"
        )
        raise UsageError(msg)
    check_seq("SEQ", args.seq, existing(store, args, key), key)
    if args.tlog_proof or args.checkpoint is not None:
        return _tlog_proof_cmd(args, store)
    against = load_digest(args.digest) if args.digest else None
    try:
        proof = prove(store, key, args.seq, digest=against, disclose=not args.no_disclose)
    except LookupError as e:
        raise Failure(str(e)) from e
    _deliver(
        args,
        proof.to_json(),
        "proof",
        is_json=True,
        report={"memory": str(key), "seq": args.seq, "tree_size": proof.tree_size},
    )
    if args.output not in (None, "-"):
        console(stderr=True).print(
            f"proof of {shell_id(key)} seq {args.seq} in a log of {proof.tree_size} records "
            f"written to {args.output}; check it anywhere with `chatledger check-proof "
            f"{args.output} --digest DIGEST`",
            highlight=False,
        )
    return 0


def _tlog_proof_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger prove ID SEQ --tlog-proof --checkpoint FILE``: a C2SP tlog-proof bundle."""
    if not args.tlog_proof or args.checkpoint is None or args.digest or args.no_disclose:
        msg = (
            "a tlog-proof needs both --tlog-proof and --checkpoint FILE (a signed checkpoint from "
            "`chatledger checkpoint`), and takes no --digest or --no-disclose (it never carries "
            "the content)"
        )
        raise UsageError(msg)
    from eventlog.tlog_proof import tlog_proof

    note = read_file(args.checkpoint, "--checkpoint")
    try:
        text = tlog_proof(store, args.key, args.seq, note)
    except ValueError as e:
        msg = f"--checkpoint {args.checkpoint}: {e}"
        raise Failure(msg) from e
    _deliver(
        args,
        text.removesuffix("\n"),
        "tlog proof",
        is_json=False,
        report={"memory": str(args.key), "seq": args.seq},
    )
    return 0


_SHOWN_KIND = 40  # characters of a proof's kind a message repeats


def check_proof(args: argparse.Namespace) -> int:
    """``chatledger check-proof PROOF --digest FILE``, or ``PROOF --verifier-key FILE`` for a
    C2SP tlog-proof bundle: no database needed."""
    from eventlog.tlog_proof import TLOG_PROOF_HEADER

    text = read_file(args.proof, "PROOF")
    if text.startswith(TLOG_PROOF_HEADER):
        return _check_tlog_proof(args, text)
    if args.digest is None:
        msg = (
            f"check-proof {args.proof} needs --digest FILE: the digest (`chatledger digest`) "
            "the proof is against"
        )
        raise UsageError(msg)
    d = load_digest(args.digest)
    try:
        proof = InclusionProof.from_json(text)
    except ValueError as e:
        msg = f"{args.proof} is not a chatledger proof ({e}); write one with `chatledger prove`"
        raise Failure(msg) from e
    from rich.text import Text  # rich costs startup time: loaded only to print

    ok = verify_inclusion(proof, d, chain_key=read_key(args))
    record = proof.record
    # The proof file is anyone's: its id and kind are cut to fit one line.
    kind = record.kind if len(record.kind) <= _SHOWN_KIND else shown(record.kind)
    what = f"memory {shown_id(record.stream_id)} seq {record.seq} ({kind})"
    if args.json:
        emit({"ok": ok, "memory": record.stream_id, "seq": record.seq, "digest_size": d.size})
        return 0 if ok else 1
    if ok:
        label = ("OK", "bold green")
        detail = f" {what} is record {proof.leaf_index + 1} of the {d.size} the digest covers"
        if not record.discloses:
            detail += " (its content is withheld: the proof carries its commitment only)"
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


def _check_tlog_proof(args: argparse.Namespace, text: str) -> int:
    """A ``c2sp.org/tlog-proof@v1`` bundle: the checkpoint's signature, then the inclusion."""
    from eventlog.tlog_proof import parse_tlog_proof, verify_tlog_proof

    if args.verifier_key is None:
        msg = (
            f"{args.proof} is a C2SP tlog-proof bundle: check it with --verifier-key FILE, the "
            "signer's .vkey file (`chatledger keygen`)"
        )
        raise UsageError(msg)
    verifier = load_verifier(args.verifier_key)
    ok = verify_tlog_proof(text, verifier, origin=args.origin)
    try:
        bundle = parse_tlog_proof(text)
        size: int | None = open_checkpoint(bundle.checkpoint, verifier, origin=args.origin).size
    except ValueError:
        bundle, size = None, None
    if args.json:
        index = None if bundle is None else bundle.index
        emit({"ok": ok, "index": index, "checkpoint_size": size})
        return 0 if ok else 1
    from rich.text import Text  # rich costs startup time: loaded only to print

    if ok and bundle is not None:
        detail = (
            f" leaf {bundle.index} is in the tree of {size} records that {verifier.name} signed"
        )
        console().print(Text.assemble(("OK", "bold green"), detail))
        return 0
    if size is None:
        origin = "" if args.origin is None else f" for origin {args.origin!r}"
        detail = (
            f" the bundle's checkpoint is not signed by {verifier.name}{origin}, or the "
            "bundle is malformed"
        )
    else:
        detail = f" the leaf is not in the tree of {size} records the checkpoint signed"
    console().print(Text.assemble(("NOT PROVEN", "bold red"), detail))
    return 1


# ---------------------------------------------------------------- consistency and checkpoints


def _evidence_file(path_text: str, what: str, hint: str) -> str:
    path = Path(path_text)
    if not path.is_file():
        msg = f"{what} {path_text}: no such file; {hint}"
        raise UsageError(msg)
    return _text_of(path, what)


def prove_consistency_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger prove --since OLD.json``: the new digest and the proof that it extends OLD,
    as one JSON object that ``check-consistency`` checks without the database."""
    if args.key is not None or args.seq is not None:
        msg = "prove --since proves the whole log's growth; leave out ID and SEQ"
        raise UsageError(msg)
    try:
        old = LedgerDigest.from_json(read_file(args.since, "--since"))
    except ValueError as e:
        msg = (
            f"--since {args.since} is not a chatledger digest ({e}); "
            "write one with `chatledger digest -o FILE`"
        )
        raise Failure(msg) from e
    new = digest(store)
    proof = prove_consistency(store, old, digest=new)
    _deliver(
        args,
        evidence_json(new, proof),
        "consistency proof",
        is_json=True,
        report={"old_size": old.size, "new_size": new.size},
    )
    if args.output not in (None, "-"):
        console(stderr=True).print(
            f"proof that the log of {new.size} records extends the digest of {old.size} written "
            f"to {args.output}; check it anywhere with `chatledger check-consistency "
            f"{args.since} {args.output}`",
            highlight=False,
        )
    return 0


def check_consistency(args: argparse.Namespace) -> int:
    """``chatledger check-consistency OLD PROOF``: no database needed."""
    hint = "write it with `chatledger digest -o FILE`"
    try:
        old = LedgerDigest.from_json(_evidence_file(args.old, "OLD", hint))
    except ValueError as e:
        msg = f"OLD {args.old} is not a chatledger digest ({e}); {hint}"
        raise Failure(msg) from e
    hint = "write it with `chatledger prove --since OLD -o FILE`"
    try:
        new, proof = read_evidence(_evidence_file(args.proof, "PROOF", hint))
    except ValueError as e:
        msg = f"PROOF {args.proof} is not a chatledger consistency proof ({e}); {hint}"
        raise Failure(msg) from e
    ok = verify_consistency(old, new, proof)
    if args.json:
        emit({"ok": ok, "old_size": old.size, "new_size": new.size, "new_root": new.root})
        return 0 if ok else 1
    from rich.text import Text  # rich costs startup time: loaded only to print

    if ok:
        label = ("OK", "bold green")
        detail = (
            f" the log of {new.size} records (root {new.root}) extends the digest of {old.size} "
            "records; keep the new digest from now on"
        )
    elif (proof.old_size, proof.old_root) != (old.size, old.root):
        label = ("NOT CONSISTENT", "bold red")
        detail = (
            f" the proof starts from a log of {proof.old_size} records, not from this digest "
            f"of {old.size}; prove against it: `chatledger prove --since {args.old}`"
        )
    else:
        label = ("NOT CONSISTENT", "bold red")
        detail = (
            f" the log of {new.size} records does not extend the digest of {old.size}: "
            "history was changed, or the proof was altered"
        )
    console().print(Text.assemble(label, detail))
    return 0 if ok else 1


def _key_stem(name: str) -> str:
    # A key name may hold "/" (example.com/log); a file name may not.
    return name.replace("/", "_")


def keygen(args: argparse.Namespace) -> int:
    """``chatledger keygen NAME [--out DIR]``: an Ed25519 signed-note key pair, NAME.key
    (mode 0600) and NAME.vkey."""
    signer, verifier = generate_key(args.name)
    out = Path(args.out)
    if not out.is_dir():
        msg = f"keygen --out {args.out}: no such directory; create it first"
        raise UsageError(msg)
    key_path = out / f"{_key_stem(args.name)}.key"
    vkey_path = out / f"{_key_stem(args.name)}.vkey"
    for path in (key_path, vkey_path):
        if os.path.lexists(path):  # a dangling symlink too: the key is not written through it
            msg = (
                f"keygen {args.name}: {path} exists; a key is never overwritten (checkpoints "
                "signed with it would stop verifying), pick another NAME or --out DIR"
            )
            raise Failure(msg)
    # O_EXCL and the mode at creation: the secret is never readable by others, not even briefly.
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(signer.to_text() + "\n")
    with vkey_path.open("x", encoding="utf-8") as f:  # as the key: never through a symlink
        f.write(verifier.to_text() + "\n")
    if args.json:
        emit({"key": str(key_path), "vkey": str(vkey_path), "verifier_key": verifier.to_text()})
        return 0
    sys.stdout.write(
        f"signing key written to {key_path} (keep it secret); verifier key written to "
        f"{vkey_path}; publish it:\n{verifier.to_text()}\n"
    )
    return 0


def _read_key_file(path_text: str, option: str) -> str:
    path = Path(path_text)
    if not path.is_file():
        msg = f"{option} {path_text}: no such file; make a key pair with `chatledger keygen NAME`"
        raise UsageError(msg)
    return _text_of(path, option)


def load_verifier(path_text: str) -> Verifier:
    """The verifier key ``--verifier-key`` names (``chatledger keygen`` wrote it).

    Raises:
        UsageError: No such file.
        Failure: The file is not a verifier key.
    """
    try:
        return Verifier.from_text(_read_key_file(path_text, "--verifier-key"))
    except ValueError as e:
        msg = f"--verifier-key {path_text}: {e}"
        raise Failure(msg) from e


def checkpoint_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger checkpoint --origin ORIGIN --signing-key FILE``: a signed C2SP checkpoint."""
    key_text = _read_key_file(args.signing_key, "--signing-key")
    try:
        signer = Signer.from_text(key_text)
    except ValueError as e:
        msg = f"--signing-key {args.signing_key}: {e}"
        raise Failure(msg) from e
    note = sign_checkpoint(store, args.origin, signer)
    # Note lines end at "\n" only: an origin may hold U+2028, where str.splitlines() breaks.
    size = note.split("\n")[1]
    _deliver(
        args,
        note.removesuffix("\n"),
        "checkpoint",
        is_json=False,
        report={"size": int(size), "origin": args.origin},
    )
    if args.output not in (None, "-"):
        console(stderr=True).print(
            f"checkpoint of {size} records signed by {signer.name} written to "
            f"{args.output}; check the ledger against it with `chatledger verify --checkpoint "
            f"{args.output} --verifier-key {_key_stem(signer.name)}.vkey`",
            highlight=False,
        )
    return 0


def verify_checkpoint_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger verify --checkpoint FILE --verifier-key FILE``: exit status 1 unless the
    checkpoint's signature verifies and the ledger is its tree or extends it."""
    if args.verifier_key is None:
        msg = "verify --checkpoint needs --verifier-key FILE: the signer's .vkey file"
        raise UsageError(msg)
    if args.key is not None or args.digest is not None:
        msg = "verify --checkpoint checks the whole log; leave out the ID and --digest"
        raise UsageError(msg)
    note = read_file(args.checkpoint, "--checkpoint")
    verifier = load_verifier(args.verifier_key)
    report = verify_checkpoint(store, note, verifier)
    if args.json:
        cp = report.checkpoint
        emit(
            {
                "ok": report.ok,
                "behind": report.behind,
                "origin": None if cp is None else cp.origin,
                "checkpoint_size": None if cp is None else cp.size,
                "size": report.ledger_size,
                "message": report.reason,
            }
        )
        return 0 if report.ok else 1
    from rich.text import Text  # rich costs startup time: loaded only to print

    if report.ok:
        label = ("OK", "bold green")
    elif report.behind:
        label = ("ROLLED BACK", "bold red")
    elif report.checkpoint is None:
        label = ("REJECTED", "bold red")
    else:
        label = ("CHANGED", "bold red")
    console().print(Text.assemble(label, f" {report.reason}"))
    return 0 if report.ok else 1
