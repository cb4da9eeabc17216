"""Encryption at rest with per-subject data keys kept outside the database (crypto-shredding).

Each *subject* (see :func:`subject_of`) has its own 256-bit AES-GCM data key, held by a
:class:`Keyring` that lives outside the database. :func:`seal` encrypts a payload under the
subject's current key and :func:`open_sealed` decrypts it. Erasing a subject destroys its keys
(:meth:`Keyring.destroy`), so every copy of the database - backups and replicas taken before
the erasure included - stops yielding that subject's content, without rewriting any row.

A sealed payload is ``enc1:<key_id>:<urlsafe base64 of nonce + ciphertext + tag>``. The
caller's ``aad`` (associated data, e.g. stream key + seq + kind) is authenticated but not
stored, so a ciphertext copied to another row fails to open instead of showing up there.
Nonces are 12 random bytes per message: with one key per subject, the ~2**32 messages per key
that random GCM nonces allow are never approached.

:class:`MemoryKeyring` keeps keys in the process; :class:`~eventlog.keyring_file.FileKeyring`
(:mod:`eventlog.keyring_file`) in a file, optionally wrapped under a master key.

What erasure cannot reach: old copies of the *keyring* itself (a backup of the key file,
blocks the filesystem freed but has not overwritten, a KMS's own retention). Keep the keyring
off the database's backup path, or back it up separately with a retention you can erase from.
"""

from __future__ import annotations

import abc
import base64
import binascii
import os
import secrets
import threading
from collections.abc import Callable, Container, Sequence
from typing import TYPE_CHECKING, Final

from eventlog.errors import EventLogError
from eventlog.ids import MemoryId, memory_key

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "KEY_BYTES",
    "NONCE_BYTES",
    "SEALED_PREFIX",
    "KeyUnavailableError",
    "Keyring",
    "KeyringError",
    "MemoryKeyring",
    "SealBrokenError",
    "cipher",
    "invalid_tag",
    "is_sealed",
    "new_key",
    "new_key_id",
    "open_sealed",
    "seal",
    "sealed_key_id",
    "subject_of",
]

SEALED_PREFIX: Final = "enc1:"
"""How every sealed payload starts (plaintext, canonical JSON, never does): SQL stores look
for it in one statement (:meth:`eventlog.recorder.Recorder._first_sealed`)."""
_PREFIX: Final = SEALED_PREFIX
KEY_BYTES: Final = 32
NONCE_BYTES: Final = 12
_TAG_BYTES: Final = 16


class KeyUnavailableError(EventLogError):
    """Sealed content cannot be opened because its key is not available.

    Either the key was destroyed by an erasure (the content is then gone for good, which is
    the point), or the reader was given no keyring or a keyring that does not hold the key.

    Attributes:
        where: The read that needed the key, e.g. ``"read of ('user-42','s1') seq 3"``.
        key_id: The id of the missing key.
    """

    def __init__(
        self, where: str, key_id: str, *, keyring_given: bool | None, destroyed: bool = False
    ) -> None:
        self.where = where
        self.key_id = key_id
        self.destroyed = destroyed
        if destroyed:  # only what the keyring itself records as shredded is called so
            msg = (
                f"{where} failed: the content is encrypted with key {key_id!r}, which the "
                "keyring records as destroyed by an erasure: the content is gone for good"
            )
            super().__init__(msg)
            return
        if keyring_given is None:  # the reader does not know (a record its store left sealed)
            why = (
                "it is still sealed: the store had no keyring (pass keyring=...), or the key "
                "was destroyed by an erasure"
            )
        elif keyring_given:
            why = (
                "the keyring does not hold that key and records no erasure of it: this is not "
                "the keyring the content was sealed with, or an older copy of it"
            )
        else:
            why = "no keyring was given"
        msg = (
            f"{where} failed: the content is encrypted with key {key_id!r} and {why}; pass "
            "keyring=... with the keyring that holds the key"
        )
        super().__init__(msg)


class SealBrokenError(EventLogError):
    """A sealed payload is malformed or fails authentication.

    Authentication fails when the ciphertext was altered, or when it was moved to a row other
    than the one it was sealed for (the associated data differs).

    Attributes:
        where: The read that opened the payload.
        reason: What is wrong with it.
    """

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        msg = (
            f"{where} failed: sealed content does not open: {reason}; the stored row was "
            "altered or copied from elsewhere: restore it from a backup"
        )
        super().__init__(msg)


class KeyringError(EventLogError):
    """The keyring cannot be read or written (corrupt, unreadable, vanished, bad key).

    Attributes:
        operation: What the keyring was doing (``"load"``, ``"create a key"``, ...).
        path: The keyring file, or None for keyrings without one.
    """

    def __init__(self, operation: str, detail: str, *, path: str | None = None) -> None:
        self.operation = operation
        self.path = path
        where = f" of keyring {path!r}" if path is not None else ""
        msg = f"{operation}{where} failed: {detail}"
        super().__init__(msg)


def subject_of(memory_id: MemoryId) -> str:
    """Return the subject whose key encrypts a memory's content.

    A tuple id's subject is the first element alone, as a 1-tuple: ``("user-42", "s1")`` and
    ``("user-42", "s2")`` both belong to ``("user-42",)``, so destroying that subject erases
    every session of the user at once. Any other id is its own subject. Note that the string
    id ``"user-42"`` and the tuple ids starting with ``"user-42"`` are different subjects.

    Args:
        memory_id: A memory id (see :mod:`eventlog.ids`).

    Returns:
        The subject's canonical text (:func:`eventlog.ids.memory_key` of it).

    Raises:
        TypeError: If the id is not a valid memory id.
    """
    if isinstance(memory_id, tuple) and memory_id:
        return memory_key((memory_id[0],))
    return memory_key(memory_id)


class Keyring(abc.ABC):
    """Where data keys live; a KMS can implement it.

    Key ids appear in every sealed payload, so they must not contain the subject (that would
    leak who the content belongs to after erasure) and must be non-empty.
    """

    @abc.abstractmethod
    def current(self, subject: str) -> tuple[str, bytes]:
        """Return the subject's key, creating it if the subject has none.

        Concurrent callers (threads or processes sharing the keyring) get the same key: a
        subject never has two current keys.

        Args:
            subject: The subject, from :func:`subject_of`.

        Returns:
            ``(key_id, key)``: a short random id, never derived from the subject, and the
            32-byte key.

        Raises:
            KeyringError: If the keyring cannot be read or written.
        """

    @abc.abstractmethod
    def get(self, key_id: str) -> bytes | None:
        """Return the key with this id.

        Args:
            key_id: An id from :meth:`current`, as found in a sealed payload.

        Returns:
            The 32-byte key, or None when it was destroyed or never existed.

        Raises:
            KeyringError: If the keyring cannot be read.
        """

    @abc.abstractmethod
    def destroy(self, subject: str) -> int:
        """Destroy every key of the subject. Idempotent.

        Afterwards :meth:`current` creates a new key with a new id for the subject.

        Args:
            subject: The subject, from :func:`subject_of`.

        Returns:
            How many keys were destroyed (0 when the subject had none).

        Raises:
            KeyringError: If the keyring cannot be read or written.
        """

    def destroyed(self, key_id: str) -> bool:
        """Whether this keyring records that an erasure destroyed the key with this id.

        A read whose key is missing says "destroyed by an erasure" only when this is True;
        otherwise the key is unknown here (another keyring, an older copy of this one). The
        default, for keyrings that keep no such record, is False.
        """
        del key_id
        return False

    def memory_key(self, subject: str, memory: str) -> tuple[str, bytes]:
        """Return the key of one memory's content, creating it if the memory has none.

        Each memory having its own key is what lets ``erase(memory)`` make that memory
        unreadable in every backup (:meth:`destroy_memory`), while :meth:`destroy` of the
        subject still destroys all of them. The default, for keyrings that keep one key per
        subject, is the subject's key: ``erase`` of one memory then shreds nothing.

        Args:
            subject: The memory's subject, from :func:`subject_of`.
            memory: The memory's stored key (:func:`eventlog.ids.memory_key`).
        """
        del memory
        return self.current(subject)

    def destroy_memory(self, subject: str, memory: str) -> int:
        """Destroy the keys of one memory (see :meth:`memory_key`). Idempotent.

        Returns:
            How many keys were destroyed; the default, keeping no per-memory keys, is 0.
        """
        del subject, memory
        return 0

    def destroy_memories(self, subject: str, memories: Sequence[str]) -> int:
        """Destroy the keys of several memories of one subject (see :meth:`destroy_memory`),
        which ``erase_subject`` under a longer prefix erases together. Idempotent.

        The default calls :meth:`destroy_memory` once per memory; a keyring that writes its
        keys somewhere (a file, a KMS) should destroy them in one write: once per memory,
        a file of N keys is rewritten N times.

        Returns:
            How many keys were destroyed.
        """
        return sum(self.destroy_memory(subject, memory) for memory in memories)


def new_key_id(taken: Container[str]) -> str:
    # 64 random bits: unrelated to the subject, so a sealed row does not say whose it is.
    while True:
        key_id = secrets.token_hex(8)
        if key_id not in taken:
            return key_id


class MemoryKeyring(Keyring):
    """Keys in a dict of this process, for tests and demos: they die with the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # key_id -> (subject, memory or "" for the subject's own key, key)
        self._keys: dict[str, tuple[str, str, bytes]] = {}
        self._current: dict[tuple[str, str], str] = {}  # (subject, memory) -> key_id
        self._destroyed: set[str] = set()

    def current(self, subject: str) -> tuple[str, bytes]:
        return self._scoped(subject, "")

    def memory_key(self, subject: str, memory: str) -> tuple[str, bytes]:
        return self._scoped(subject, memory)

    def _scoped(self, subject: str, memory: str) -> tuple[str, bytes]:
        with self._lock:
            key_id = self._current.get((subject, memory))
            if key_id is None:
                key_id = new_key_id(self._keys)
                self._keys[key_id] = (subject, memory, new_key())
                self._current[subject, memory] = key_id
            return key_id, self._keys[key_id][2]

    def get(self, key_id: str) -> bytes | None:
        with self._lock:
            entry = self._keys.get(key_id)
            return None if entry is None else entry[2]

    def destroy(self, subject: str) -> int:
        return self._destroy(lambda s, _: s == subject)

    def destroy_memory(self, subject: str, memory: str) -> int:
        return self._destroy(lambda s, m: (s, m) == (subject, memory))

    def destroy_memories(self, subject: str, memories: Sequence[str]) -> int:
        wanted = set(memories)
        return self._destroy(lambda s, m: s == subject and m in wanted)

    def _destroy(self, doomed_if: Callable[[str, str], bool]) -> int:
        with self._lock:
            doomed = [k for k, (s, m, _) in self._keys.items() if doomed_if(s, m)]
            for key_id in doomed:
                subject, memory, _ = self._keys.pop(key_id)
                self._current.pop((subject, memory), None)
            self._destroyed.update(doomed)
            return len(doomed)

    def destroyed(self, key_id: str) -> bool:
        with self._lock:
            return key_id in self._destroyed


# cryptography is imported on first use: a store without a keyring (and every CLI command
# that never opens one) does not pay its ~15 ms import.
_AESGCM: type[AESGCM] | None = None
_INVALID_TAG: type[Exception] | None = None


def cipher(key: bytes) -> AESGCM:
    # Objects are not cached: a cache would keep destroyed keys alive in the process (and one
    # costs ~1 us to make). The class is, once imported.
    global _AESGCM  # noqa: PLW0603 - a lazily imported class, set once
    if _AESGCM is None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        _AESGCM = AESGCM
    return _AESGCM(key)


def invalid_tag() -> type[Exception]:
    global _INVALID_TAG  # noqa: PLW0603 - see cipher
    if _INVALID_TAG is None:
        from cryptography.exceptions import InvalidTag

        _INVALID_TAG = InvalidTag
    return _INVALID_TAG


def new_key() -> bytes:
    return os.urandom(KEY_BYTES)  # what AESGCM.generate_key does: 32 bytes from the OS CSPRNG


def _split(payload: str) -> tuple[str, str, str]:
    # base64 never contains ":", so the last one ends the key id (a KMS id may hold colons).
    return payload[len(_PREFIX) :].rpartition(":")


def sealed_key_id(payload: str) -> str:
    """The key id a sealed payload names ("" when it names none)."""
    return _split(payload)[0]


def is_sealed(payload: str) -> bool:
    """Return whether a stored payload is sealed content (a prefix check, for hot paths).

    Plaintext payloads must never start with ``enc1:`` for this to be unambiguous; canonical
    JSON (which starts with ``{``) never does. Anything but text (a BLOB put in the column by
    hand) is not sealed content: the record's own check then refuses it by name.
    """
    return type(payload) is str and payload.startswith(_PREFIX)


def seal(keyring: Keyring, subject: str, aad: bytes, plaintext: str, *, memory: str = "") -> str:
    """Encrypt text under the memory's own key (:meth:`Keyring.memory_key`), or under the
    subject's current key when ``memory`` is empty.

    Args:
        keyring: Holds (or creates) the key.
        subject: Whose content this is, from :func:`subject_of`.
        aad: Where the payload will be stored (e.g. stream key, seq and kind, encoded
            unambiguously); :func:`open_sealed` must be given the same bytes.
        plaintext: The content.
        memory: The memory's stored key, so that erasing the memory can destroy its key.

    Returns:
        ``"enc1:<key_id>:<urlsafe base64 of nonce + ciphertext>"``.

    Raises:
        KeyringError: If the keyring fails or returns an unusable key.
    """
    key_id, key = keyring.memory_key(subject, memory) if memory else keyring.current(subject)
    if len(key) != KEY_BYTES or not key_id:
        operation = f"seal for subject {subject!r}"
        msg = (
            f"{type(keyring).__name__}.current() returned key id {key_id!r} and a key of "
            f"{len(key)} bytes; it must return a non-empty id and a {KEY_BYTES}-byte key"
        )
        raise KeyringError(operation, msg)
    nonce = os.urandom(NONCE_BYTES)
    sealed = cipher(key).encrypt(nonce, plaintext.encode("utf-8"), aad)
    return f"{_PREFIX}{key_id}:{base64.urlsafe_b64encode(nonce + sealed).decode('ascii')}"


def open_sealed(keyring: Keyring | None, aad: bytes, payload: str, *, where: str) -> str:
    """Decrypt a payload made by :func:`seal`.

    Args:
        keyring: The keyring holding the payload's key (None when the caller has none).
        aad: The same bytes that were given to :func:`seal`.
        payload: The sealed payload.
        where: The read being done, for error messages, e.g. ``"read of 'user-42' seq 3"``.

    Returns:
        The plaintext.

    Raises:
        KeyUnavailableError: If ``keyring`` is None or does not hold the key (destroyed by an
            erasure, or the wrong keyring).
        SealBrokenError: If the payload is malformed, altered, or sealed for other ``aad``.
    """
    key_id, sep, body = _split(payload)
    if not is_sealed(payload) or not sep or not key_id:
        msg = f"the payload does not look like {_PREFIX}<key_id>:<data>"
        raise SealBrokenError(where, msg)
    key = None if keyring is None else keyring.get(key_id)
    if key is None:
        destroyed = keyring is not None and keyring.destroyed(key_id)
        raise KeyUnavailableError(
            where, key_id, keyring_given=keyring is not None, destroyed=destroyed
        )
    try:
        blob = base64.b64decode(body, altchars=b"-_", validate=True)
    except binascii.Error as e:
        raise SealBrokenError(where, f"its data is not base64 ({e})") from e
    if len(blob) < NONCE_BYTES + _TAG_BYTES:
        raise SealBrokenError(where, f"its data is {len(blob)} bytes, too short to be sealed")
    try:
        plain = cipher(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], aad)
    except invalid_tag() as e:
        msg = "authentication failed (the ciphertext was altered, or it belongs to another row)"
        raise SealBrokenError(where, msg) from e
    return plain.decode("utf-8")
