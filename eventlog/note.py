"""Signed notes: the C2SP ``signed-note`` format of Go's ``golang.org/x/mod/sumdb/note``.

A note is UTF-8 text ending in a newline, a blank line, then one signature line per signer::

    <text, ending in "\\n">
    <empty line>
    — <key name> <base64(key hash (4 bytes, big-endian) || signature)>

The dash is the em dash U+2014. Keys are Ed25519 (algorithm byte ``0x01``) and written as
Go writes them, so ``note.NewVerifier`` / ``note.NewSigner`` read ours and we read theirs:

* verifier key ``<name>+<hash>+<base64(0x01 || 32-byte public key)>``;
* signer key ``PRIVATE+KEY+<name>+<hash>+<base64(0x01 || 32-byte seed)>``;
* ``<hash>`` is 8 lowercase hex digits: the first 4 bytes of ``SHA-256(name || "\\n" || 0x01
  || public key)``, which is also what a signature line carries, so a verifier finds its
  signature by (name, hash) and a key of the same name with another hash is someone else's.

The Ed25519 signature is over the text, final newline included. Opening a note follows Go's
``note.Open``: signatures by unknown keys are kept aside, never an error (room for witness
cosignatures); a bad signature by a known key is an error; at least one known key must sign.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
from collections.abc import Iterable, Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from eventlog.errors import EventLogError

__all__ = [
    "ALG_ED25519",
    "NoteError",
    "OpenedNote",
    "Signer",
    "Verifier",
    "generate_key",
    "key_hash",
    "open_note",
    "sign_note",
]

ALG_ED25519 = 0x01
"""The signed-note algorithm byte of Ed25519."""

_SIG_PREFIX = "\u2014 "  # em dash, space
_PRIVATE = "PRIVATE+KEY+"
_MAX_SIGNATURES = 100  # as Go's note.Open: a note with more is malformed
_KEY_BYTES = 32


class NoteError(EventLogError, ValueError):
    """A note is malformed, carries a bad signature by a known key, or none by a known key.

    Attributes:
        reason: What is wrong, as a sentence fragment.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def _valid_name(name: str) -> bool:
    # Go's isValidName: non-empty, no Unicode space, no "+".
    return bool(name) and "+" not in name and not any(c.isspace() for c in name)


def key_hash(name: str, key: bytes) -> int:
    """The signed-note key hash: the first 4 bytes, big-endian, of SHA-256(name \\n key).

    Args:
        name: The key name.
        key: The algorithm byte followed by the public key.
    """
    digest = hashlib.sha256(name.encode() + b"\n" + key).digest()
    return int.from_bytes(digest[:4], "big")


def _raw_public(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


def _decode_key(text: str, what: str, hint: str) -> tuple[str, int, bytes]:
    """Split ``name+hash+base64`` into the name, the hash and the raw key after the alg byte."""
    name, _, rest = text.partition("+")
    hash_text, _, key64 = rest.partition("+")
    try:
        key = base64.b64decode(key64, validate=True)
        hash_value = int(hash_text, 16)
    except (binascii.Error, ValueError):
        key, hash_value = b"", -1
    if not _valid_name(name) or len(hash_text) != 8 or hash_value < 0 or len(key) != 1 + _KEY_BYTES:
        msg = f"read {what} {text[:60]!r}: not of the form {hint}; {_REMEDY}"
        raise ValueError(msg)
    if key[0] != ALG_ED25519:
        msg = (
            f"read {what} {name!r}: algorithm byte {key[0]:#04x} is not Ed25519 (0x01), the "
            f"only one supported; {_REMEDY}"
        )
        raise ValueError(msg)
    return name, hash_value, key[1:]


_REMEDY = "make a key pair with `chatledger keygen NAME` (or Go's note.GenerateKey)"


@dataclasses.dataclass(frozen=True, slots=True)
class Verifier:
    """A signed-note verifier key: a name, its key hash and an Ed25519 public key.

    Attributes:
        name: The key name, as signature lines carry it.
        key_hash: The 32-bit key hash (see the module docstring).
        public_key: The raw 32-byte Ed25519 public key.
    """

    name: str
    key_hash: int
    public_key: bytes

    @classmethod
    def from_text(cls, text: str) -> Verifier:
        """Read a verifier key ``name+hash+base64`` (surrounding whitespace ignored).

        Raises:
            ValueError: It is not a well-formed Ed25519 verifier key, or its hash does not
                match its name and key.
        """
        name, hash_value, public = _decode_key(
            text.strip(), "verifier key", "NAME+HASH+BASE64 (one line)"
        )
        if key_hash(name, bytes([ALG_ED25519]) + public) != hash_value:
            msg = (
                f"read verifier key {name!r}: its hash {hash_value:08x} does not match its "
                f"name and key, so the key was altered; {_REMEDY}"
            )
            raise ValueError(msg)
        return cls(name, hash_value, public)

    def to_text(self) -> str:
        """The key as one line ``name+hash+base64`` (no newline)."""
        key64 = base64.b64encode(bytes([ALG_ED25519]) + self.public_key).decode()
        return f"{self.name}+{self.key_hash:08x}+{key64}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's Ed25519 signature of ``message``."""
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class Signer:
    """A signed-note signer key (Ed25519). Its repr hides the seed.

    Attributes:
        name: The key name.
        key_hash: The 32-bit key hash.
        seed: The raw 32-byte Ed25519 private key seed.
    """

    name: str
    key_hash: int
    seed: bytes

    def __repr__(self) -> str:
        return f"Signer(name={self.name!r}, key_hash={self.key_hash:08x})"

    @classmethod
    def from_text(cls, text: str) -> Signer:
        """Read a signer key ``PRIVATE+KEY+name+hash+base64`` (surrounding whitespace ignored).

        Raises:
            ValueError: It is not a well-formed Ed25519 signer key, or its hash does not
                match its name and key.
        """
        text = text.strip()
        if not text.startswith(_PRIVATE):
            msg = (
                "read signer key: it does not start with PRIVATE+KEY+ (is it the .vkey "
                f"verifier key? sign with the .key file); {_REMEDY}"
            )
            raise ValueError(msg)
        name, hash_value, seed = _decode_key(
            text.removeprefix(_PRIVATE), "signer key", "PRIVATE+KEY+NAME+HASH+BASE64"
        )
        signer = cls(name, hash_value, seed)
        if key_hash(name, bytes([ALG_ED25519]) + signer.verifier().public_key) != hash_value:
            msg = (
                f"read signer key {name!r}: its hash {hash_value:08x} does not match its name "
                f"and key, so the key was altered; {_REMEDY}"
            )
            raise ValueError(msg)
        return signer

    def to_text(self) -> str:
        """The key as one line ``PRIVATE+KEY+name+hash+base64`` (no newline). Keep it secret."""
        key64 = base64.b64encode(bytes([ALG_ED25519]) + self.seed).decode()
        return f"{_PRIVATE}{self.name}+{self.key_hash:08x}+{key64}"

    def verifier(self) -> Verifier:
        """The matching verifier key."""
        private = Ed25519PrivateKey.from_private_bytes(self.seed)
        return Verifier(self.name, self.key_hash, _raw_public(private.public_key()))

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message``."""
        return Ed25519PrivateKey.from_private_bytes(self.seed).sign(message)


def generate_key(name: str) -> tuple[Signer, Verifier]:
    """Make a fresh Ed25519 key pair named ``name``.

    Raises:
        ValueError: ``name`` is empty, or holds a space or ``+``.
    """
    if not _valid_name(name):
        msg = (
            f"generate a key named {name!r}: a key name must be non-empty, with no spaces "
            "and no '+'; pick a name like example.com/log"
        )
        raise ValueError(msg)
    private = Ed25519PrivateKey.generate()
    seed = private.private_bytes_raw()
    public = _raw_public(private.public_key())
    hash_value = key_hash(name, bytes([ALG_ED25519]) + public)
    return Signer(name, hash_value, seed), Verifier(name, hash_value, public)


def _text_problem(text: str) -> str | None:
    # Go's note rules: UTF-8, no ASCII control character but the newline. A str is UTF-8
    # unless it holds a lone surrogate (as surrogateescape decoding leaves for a bad byte).
    for c in text:
        if c < " " and c != "\n":
            return f"it holds the control character {c!r}"
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError as e:
            return f"it is not UTF-8 text (a lone surrogate {text[e.start]!r} at {e.start})"
    return None


def sign_note(text: str, signers: Iterable[Signer]) -> str:
    """Sign ``text`` and return the note: text, blank line, one signature line per signer.

    Args:
        text: The note text; it must end with a newline and hold no control characters
            but newlines.
        signers: At least one signer key.

    Raises:
        ValueError: The text is not note text, or there is no signer.
    """
    problem = _text_problem(text)
    if not text.endswith("\n") or problem is not None:
        why = problem or "it does not end with a newline"
        msg = f"sign a note: {why}; note text is lines each ending in a newline"
        raise ValueError(msg)
    lines = []
    message = text.encode()
    for signer in signers:
        blob = signer.key_hash.to_bytes(4, "big") + signer.sign(message)
        lines.append(f"{_SIG_PREFIX}{signer.name} {base64.b64encode(blob).decode()}\n")
    if not lines:
        msg = "sign a note: no signer key given; pass at least one"
        raise ValueError(msg)
    return text + "\n" + "".join(lines)


@dataclasses.dataclass(frozen=True, slots=True)
class OpenedNote:
    """A note whose signatures checked out.

    Attributes:
        text: The signed text, final newline included.
        signers: Names of the known keys whose signatures verified.
        unverified: Signature lines by keys not given to :func:`open_note` (ignored).
    """

    text: str
    signers: tuple[str, ...]
    unverified: tuple[str, ...]


def open_note(note: str | bytes, verifiers: Sequence[Verifier]) -> OpenedNote:
    """Parse ``note`` and check its signatures against ``verifiers`` (Go's ``note.Open``).

    Args:
        note: The whole note.
        verifiers: The keys to trust; signatures by other keys are ignored.

    Returns:
        The text and the names that signed it.

    Raises:
        NoteError: The note is malformed, a known key's signature does not verify, or no
            known key signed it.
    """
    if isinstance(note, bytes):
        try:
            note = note.decode()
        except UnicodeDecodeError:
            msg = "the note is not UTF-8 text"
            raise NoteError(msg) from None
    problem = _text_problem(note)
    if problem is not None:
        msg = f"the note is malformed: {problem}"
        raise NoteError(msg)
    split = note.rfind("\n\n")
    if split < 0:
        msg = "the note is malformed: no blank line before its signatures"
        raise NoteError(msg)
    text, block = note[: split + 1], note[split + 2 :]
    if not block or not block.endswith("\n"):
        msg = "the note is malformed: its signature block does not end with a newline"
        raise NoteError(msg)
    known = {(v.name, v.key_hash): v for v in verifiers}
    seen: set[tuple[str, int]] = set()
    signed: list[str] = []
    unverified: list[str] = []
    lines = block[:-1].split("\n")
    if len(lines) > _MAX_SIGNATURES:
        msg = f"the note is malformed: more than {_MAX_SIGNATURES} signatures"
        raise NoteError(msg)
    for line in lines:
        name, blob = _signature_line(line)
        hash_value = int.from_bytes(blob[:4], "big")
        verifier = known.get((name, hash_value))
        if verifier is None:
            if line not in unverified:
                unverified.append(line)
            continue
        if (name, hash_value) in seen:
            msg = f"the note is malformed: {name} signed it twice"
            raise NoteError(msg)
        seen.add((name, hash_value))
        if not verifier.verify(text.encode(), blob[4:]):
            msg = (
                f"the signature by {name} ({hash_value:08x}) does not verify: the note was "
                "edited after it was signed"
            )
            raise NoteError(msg)
        signed.append(name)
    if not signed:
        names = ", ".join(f"{v.name}+{v.key_hash:08x}" for v in verifiers) or "none"
        msg = f"no signature by a trusted key (trusted: {names})"
        raise NoteError(msg)
    return OpenedNote(text, tuple(signed), tuple(unverified))


def _signature_line(line: str) -> tuple[str, bytes]:
    if not line.startswith(_SIG_PREFIX):
        msg = (
            f"the note is malformed: signature line {line[:40]!r} does not start with "
            "'\u2014 ' (an em dash and a space)"
        )
        raise NoteError(msg)
    name, _, blob64 = line.removeprefix(_SIG_PREFIX).partition(" ")
    try:
        blob = base64.b64decode(blob64, validate=True)
    except binascii.Error:
        blob = b""
    if not _valid_name(name) or len(blob) < 5:
        msg = f"the note is malformed: signature line {line[:40]!r} is not NAME BASE64"
        raise NoteError(msg)
    return name, blob
