"""Signed checkpoints: the ledger's size and root in the C2SP ``tlog-checkpoint`` format.

A checkpoint is a signed note (:mod:`eventlog.note`) whose text is::

    <origin>                  a name for the log, e.g. example.com/chatledger/prod
    <tree size>               decimal, no leading zeros
    <root hash>               standard base64 of the 32-byte RFC 9162 root

followed by the blank line and the signature lines. Any transparency-log tool (Go's
``golang.org/x/mod/sumdb/note`` and ``tlog``, the transparency-dev witnesses) reads it. Unlike
a digest, a checkpoint names its log and carries a signature, so it proves something to
someone who did not take it: hand it out, and whoever keeps it can later check, with the
verifier key alone, that the ledger they are shown is the same tree or extends it - and
notice a ledger *behind* it (an older copy of the database restored: rolled back).

Signature lines by other keys are ignored, as the format requires; they leave room for
witness cosignatures.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
from typing import TYPE_CHECKING

from eventlog import ledger_scan, merkle
from eventlog.note import NoteError, Signer, Verifier, open_note, sign_note

if TYPE_CHECKING:
    from eventlog.store import EventStore

__all__ = [
    "Checkpoint",
    "CheckpointReport",
    "open_checkpoint",
    "sign_checkpoint",
    "verify_checkpoint",
]

_SIZE = re.compile(r"0|[1-9][0-9]{0,19}").fullmatch
_MAX_SIZE = 2**64 - 1
_ALL = 2**63  # a tree size above any ledger's: "the tree of every record"


@dataclasses.dataclass(frozen=True, slots=True)
class Checkpoint:
    """The body of a checkpoint note.

    Attributes:
        origin: The log's name (first line).
        size: The tree size.
        root: The root hash, hex (base64 in the note).
        extensions: Any further non-empty lines, kept as they are.
    """

    origin: str
    size: int
    root: str
    extensions: tuple[str, ...] = ()

    def to_text(self) -> str:
        """The note text: origin, size, base64 root, extension lines, each with a newline.

        Raises:
            ValueError: The origin is empty or holds a line break.
        """
        _check_origin(self.origin)
        root64 = base64.b64encode(bytes.fromhex(self.root)).decode("ascii")
        lines = [self.origin, str(self.size), root64, *self.extensions]
        return "".join(line + "\n" for line in lines)

    @classmethod
    def from_text(cls, text: str) -> Checkpoint:
        """Parse a checkpoint body (the text of the note, without signatures).

        Raises:
            ValueError: It is not a C2SP checkpoint body; the message says which line.
        """
        lines = text.split("\n")
        if len(lines) < 4 or lines[-1] != "":
            msg = "the checkpoint text is not three lines (origin, size, root hash)"
            raise ValueError(msg)
        origin, size_text, root64, *extensions = lines[:-1]
        if not origin:
            msg = "the checkpoint's origin line is empty"
            raise ValueError(msg)
        if not _SIZE(size_text) or int(size_text) > _MAX_SIZE:
            msg = f"the checkpoint's size line {size_text[:30]!r} is not a decimal tree size"
            raise ValueError(msg)
        try:
            root = base64.b64decode(root64, validate=True)
        except binascii.Error:
            root = b""
        if len(root) != 32 or base64.b64encode(root).decode() != root64:
            msg = f"the checkpoint's root line {root64[:50]!r} is not base64 of a 32-byte hash"
            raise ValueError(msg)
        if any(not line for line in extensions):
            msg = "the checkpoint has an empty extension line"
            raise ValueError(msg)
        return cls(origin, int(size_text), root.hex(), tuple(extensions))


def _check_origin(origin: str) -> None:
    if not origin or any(c < " " for c in origin):
        msg = (
            f"sign a checkpoint with origin {origin!r}: the origin is one non-empty line "
            "without control characters; name the log, e.g. example.com/chatledger/prod"
        )
        raise ValueError(msg)


def _signer(key: str | Signer) -> Signer:
    return key if isinstance(key, Signer) else Signer.from_text(key)


def _verifier(key: str | Verifier) -> Verifier:
    return key if isinstance(key, Verifier) else Verifier.from_text(key)


def sign_checkpoint(store: EventStore, origin: str, signing_key: str | Signer) -> str:
    """Return a signed checkpoint of the ledger as it is now.

    Args:
        store: The store.
        origin: The log's name, the checkpoint's first line (e.g. ``example.com/log``).
        signing_key: A :class:`~eventlog.note.Signer`, or its text
            ``PRIVATE+KEY+name+hash+base64`` (``chatledger keygen`` writes one).

    Returns:
        The note: checkpoint text, blank line, the signature line.

    Raises:
        ValueError: The origin is not one line, or the key is not a signer key.
        StoreClosedError: The store is closed.
        PersistenceError: The database failed.
    """
    _check_origin(origin)
    signer = _signer(signing_key)
    d = store.digest()
    return sign_note(Checkpoint(origin, d.size, d.root).to_text(), [signer])


def open_checkpoint(
    note: str | bytes, verifier_key: str | Verifier, *, origin: str | None = None
) -> Checkpoint:
    """Check a checkpoint's signature (and origin) with no database, and return its body.

    Args:
        note: The signed checkpoint.
        verifier_key: The key that must have signed it (others' signatures are ignored).
        origin: The log name expected on the first line (None: any).

    Raises:
        ValueError: The verifier key is malformed; or the note is malformed, unsigned by the
            key, signed but edited since, or not a checkpoint of ``origin``
            (:class:`~eventlog.note.NoteError`, with ``.reason``).
    """
    verifier = _verifier(verifier_key)
    opened = open_note(note, [verifier])
    try:
        checkpoint = Checkpoint.from_text(opened.text)
    except ValueError as e:
        raise NoteError(str(e)) from None
    if origin is not None and checkpoint.origin != origin:
        msg = f"the checkpoint is of origin {checkpoint.origin!r}, not {origin!r}: another log's"
        raise NoteError(msg)
    return checkpoint


@dataclasses.dataclass(frozen=True, slots=True)
class CheckpointReport:
    """What :func:`verify_checkpoint` found.

    Attributes:
        ok: True when the signature verifies and the ledger is the checkpointed tree or an
            extension of it.
        reason: One sentence: what holds, or what failed and what to do.
        checkpoint: The checkpoint's body, when its signature verified (else None).
        ledger_size: Records in the ledger now (None when the signature failed first).
        behind: True when the ledger is smaller than the checkpoint (rolled back?).
    """

    ok: bool
    reason: str
    checkpoint: Checkpoint | None = None
    ledger_size: int | None = None
    behind: bool = False


def verify_checkpoint(
    store: EventStore,
    note: str | bytes,
    verifier_key: str | Verifier,
    *,
    origin: str | None = None,
) -> CheckpointReport:
    """Check a signed checkpoint, then that ``store``'s ledger is that tree or extends it.

    The signature first (with the verifier key alone); then one pass over the log, as
    ``verify(digest=)`` makes: every record re-hashed and its chain link checked (a record
    edited under its stored hash builds the signed tree but is not what was hashed), and the
    ledger's Merkle tree rebuilt from those records (never a cached tree); a consistency proof
    from the checkpoint's size to the ledger's is made and checked against the checkpoint's
    root with the RFC 9162 verifier.

    Args:
        store: The store the checkpoint was signed of.
        note: The signed checkpoint (what :func:`sign_checkpoint` returned).
        verifier_key: The signer's verifier key, a :class:`~eventlog.note.Verifier` or its
            text ``name+hash+base64``.
        origin: The log name the checkpoint must carry (None: any).

    Returns:
        A report with ``.ok`` and ``.reason``; ``.behind`` when the ledger is smaller than
        the checkpoint ("behind the checkpoint: rolled back?").

    Raises:
        ValueError: The verifier key is malformed.
        StoreClosedError: The store is closed.
        PersistenceError: The database failed.
    """
    verifier = _verifier(verifier_key)
    try:
        checkpoint = open_checkpoint(note, verifier, origin=origin)
    except NoteError as e:
        return CheckpointReport(
            ok=False,
            reason=(
                f"checkpoint rejected: {e.reason}; get the checkpoint and the verifier key "
                "from their publisher again"
            ),
        )
    # Every record, whatever the checkpoint's size: a tree that is too big is never built.
    scan, tree = ledger_scan.scan(store, 0, _ALL)
    size, where = tree.size, f"{checkpoint.origin} at size {checkpoint.size}"
    if size < checkpoint.size:
        return CheckpointReport(
            ok=False,
            reason=(
                f"behind the checkpoint: rolled back? The ledger holds {size} records, the "
                f"checkpoint signed by {verifier.name} ({where}) covers {checkpoint.size}; "
                "restore the newest copy of the database"
            ),
            checkpoint=checkpoint,
            ledger_size=size,
            behind=True,
        )
    proof = tree.consistency_proof(checkpoint.size, size)
    if not merkle.verify_consistency(checkpoint.size, size, checkpoint.root, tree.root(), proof):
        return CheckpointReport(
            ok=False,
            reason=(
                f"the ledger ({size} records) does not extend the checkpoint ({where}): its "
                f"first {checkpoint.size} records hash to another root, so history was "
                "changed (or records purged since); run `chatledger verify` to locate it"
            ),
            checkpoint=checkpoint,
            ledger_size=size,
        )
    if scan.bad is not None:
        return CheckpointReport(
            ok=False,
            reason=(
                f"{scan.bad.stream_id} seq {scan.bad.seq} does not verify: the ledger's stored "
                f"hashes build the tree of the checkpoint ({where}), but that record is not "
                "what was hashed, or its chain link is broken; run `chatledger verify` to "
                "locate every break"
            ),
            checkpoint=checkpoint,
            ledger_size=size,
        )
    grown = "is" if size == checkpoint.size else f"extends ({size} records)"
    return CheckpointReport(
        ok=True,
        reason=f"the ledger {grown} the checkpoint signed by {verifier.name} ({where})",
        checkpoint=checkpoint,
        ledger_size=size,
    )
