"""The key check value: what a keyed ledger stores so that a key can be checked at open and
so that the records from before the key cannot be forged by someone without it.

A ledger becomes keyed once, by its first keyed open (an empty ledger) or by an explicit
adoption (``adopt_key=True``, ``chatledger key adopt``) of a ledger that holds unkeyed records.
From then on every new record is format 3 (HMAC-SHA256 under the key). The unkeyed records
already there form the *sealed legacy prefix*: the key check value MACs their count and the
Merkle root of their hashes in global order, so ``verify()`` with the key re-derives both and
notices any unkeyed record added, changed, moved or removed - without the key nobody can
write a matching check value.

Formats of the stored text (setting ``key_check``):

* version 2: ``v2:<keyed_since>:<legacy count>:<legacy root hex>:<mac hex>``
  (:func:`eventlog.hashing.key_check_mac`);
* version 1 (chatledger before the sealed prefix): ``<keyed_since>:<mac hex>``, the MAC of
  ``chatledger key check\\x1f<keyed_since>``. Accepted with the key and upgraded to version 2
  by the next writable keyed open; until then the legacy prefix is not sealed.

Settling at open (:func:`settle_keys`, which the backends call from ``__init__``) reconciles
the store's key with this value, adopts a key when asked, and seals the heads of memories a
migration left without a seal (:data:`HEADS_SEALED`): both are decided in one read, written
in one transaction, and both change what ``verify()`` may later take for an edit.
"""

from __future__ import annotations

import dataclasses
import hmac
import re
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from eventlog.errors import ChainKeyError
from eventlog.hashing import head_mac, key_check_mac
from eventlog.merkle import MerkleTree

if TYPE_CHECKING:
    from eventlog.recorder import LedgerTx
    from eventlog.store import EventStore

__all__ = [
    "HEADS_SEALED",
    "KEY_CHECK",
    "MIN_KEY_BYTES",
    "KeyCheck",
    "chain_key_argument",
    "legacy_seal",
    "parse",
    "settle_keys",
    "v1_value",
    "v2_value",
    "valid_key",
]

KEY_CHECK = "key_check"
"""Name of the setting holding a keyed database's key check value."""
MIN_KEY_BYTES = 16
"""The shortest chain key accepted (HMAC-SHA256 keys shorter than this are guessable)."""
HEADS_SEALED = "heads"
"""Setting saying every memory's head has been sealed once (value ``sealed``): from then on a
missing or blank seal is an edit, never something to seal afresh."""
_OPEN = "open"

_V1 = re.compile(r"(\d+):([0-9a-f]{64})").fullmatch
_V2 = re.compile(r"v2:(\d+):(\d+):([0-9a-f]{64}):([0-9a-f]{64})").fullmatch


@dataclasses.dataclass(frozen=True, slots=True)
class KeyCheck:
    """A parsed key check value.

    Attributes:
        version: 1 or 2.
        keyed_since: Records at positions after this must be keyed (format 3).
        legacy_count: Unkeyed records sealed at adoption (None for version 1: not sealed).
        legacy_root: The Merkle root of their hashes in global order (None for version 1).
        mac: The stored MAC (hex).
    """

    version: int
    keyed_since: int
    legacy_count: int | None
    legacy_root: str | None
    mac: str

    def matches(self, key: bytes) -> bool:
        """Whether ``key`` made this value (constant-time)."""
        if self.version == 1:
            expected = v1_value(key, self.keyed_since)
            return hmac.compare_digest(expected, f"{self.keyed_since}:{self.mac}")
        assert self.legacy_count is not None  # noqa: S101 - version 2 always has both
        assert self.legacy_root is not None  # noqa: S101
        expected = key_check_mac(key, self.keyed_since, self.legacy_count, self.legacy_root)
        return hmac.compare_digest(expected, self.mac)


def parse(text: str) -> KeyCheck | None:
    """The key check in ``text``, or None when it is no key check value chatledger writes."""
    found = _V2(text)
    if found is not None:
        since, count, root, mac = found.groups()
        return KeyCheck(2, int(since), int(count), root, mac)
    found = _V1(text)
    if found is not None:
        return KeyCheck(1, int(found[1]), None, None, found[2])
    return None


def v1_value(key: bytes, keyed_since: int) -> str:
    """The version 1 value (kept to read ledgers keyed by earlier versions)."""
    mac = hmac.digest(key, f"chatledger key check\x1f{keyed_since}".encode(), "sha256")
    return f"{keyed_since}:{mac.hex()}"


def v2_value(key: bytes, keyed_since: int, legacy_count: int, legacy_root: str) -> str:
    """The version 2 value sealing ``legacy_count`` unkeyed records with root ``legacy_root``."""
    mac = key_check_mac(key, keyed_since, legacy_count, legacy_root)
    return f"v2:{keyed_since}:{legacy_count}:{legacy_root}:{mac}"


def legacy_seal(hashes: Iterable[str]) -> tuple[int, str]:
    """``(count, Merkle root)`` of unkeyed record hashes in global order (RFC 9162 tree, as
    the ledger digest; the empty tree's root for none)."""
    tree = MerkleTree()
    for record_hash in hashes:
        tree.append(record_hash)
    return tree.size, tree.root()


def chain_key_argument(where: str, chain_key: bytes | None, key: bytes | None) -> bytes | None:
    """The chain key a caller passed to ``where``: ``chain_key=``, or the deprecated ``key=``.

    ``key`` alone named three things (a memory's stored key, the chain's HMAC key, a keyring's
    content key); the argument now says which. ``key=`` still works, with a
    :class:`DeprecationWarning` pointing at the caller's line (``stacklevel=3``: the caller of
    the function that calls this).
    """
    if key is None:
        return chain_key
    if chain_key is not None:
        msg = (
            f"{where}: got both chain_key= and key=; pass the chain key once, as chain_key= "
            "(key= is its deprecated name)"
        )
        raise TypeError(msg)
    warnings.warn(
        f"{where}(key=...) is deprecated: pass chain_key=... (the same bytes); key= will be "
        "removed in a future release",
        DeprecationWarning,
        stacklevel=3,
    )
    return key


def valid_key(key: bytes | None) -> bytes | None:
    """Validate a ``chain_key=`` argument (``EventStore._open_modes`` calls this first)."""
    if key is None:
        return None
    if not isinstance(key, bytes):
        msg = f"chain_key must be bytes, not {type(key).__name__}; e.g. chain_key=os.urandom(32)"
        raise TypeError(msg)
    if len(key) < MIN_KEY_BYTES:
        msg = (
            f"chain_key is {len(key)} bytes, shorter than {MIN_KEY_BYTES}; use a random key of "
            "32 bytes (os.urandom(32)) kept outside the database"
        )
        raise ValueError(msg)
    return key


def settle_keys(
    store: EventStore,
    where: str,
    read: Callable[[Callable[[LedgerTx], bool]], bool],
    write: Callable[[Callable[[LedgerTx], bool]], bool],
) -> None:
    """Reconcile the store's key with the database's key check, and seal heads a migration
    left blank. Backends call it at the end of ``__init__`` with two runners: ``read(fn)``
    runs ``fn`` in a read, ``write(fn)`` in a write transaction that keeps appends out.

    Decided in a read first, so an open that has nothing to write (almost all) writes
    nothing; a ``read_only`` store never writes at all.

    Raises:
        ChainKeyError: A wrong key, a deleted or altered key check, a key given for an
            unkeyed ledger holding records without ``adopt_key=True``, a key given to a
            read-only open of an unkeyed ledger, or an adoption of a ledger that does not
            verify.
    """
    store._adopting = False
    if not read(lambda tx: _reconcile(store, tx, where, write=False)):
        return
    if store._read_only:
        return
    if store._adopting:
        _verify_before_adoption(store, where)
    write(lambda tx: _reconcile(store, tx, where, write=True))


def _reconcile(store: EventStore, tx: LedgerTx, where: str, *, write: bool) -> bool:
    """One pass of :func:`settle_keys`; returns whether there is something to write."""
    stored = tx.setting(KEY_CHECK)
    key = store._key
    sealed = tx.setting(HEADS_SEALED) is not None
    if stored is None:
        store._keyed_db = False
        if key is None:
            store._seals_required = sealed
            if sealed or not tx.sealable():
                return False
            if write:
                _seal_heads(store, tx, None, pending=True)
            return True
        return _first_key(store, tx, key, where, write=write)
    check = parse(stored)
    store._keyed_db = True
    # A version 2 check is written together with the seals: from then on they cannot be
    # missing, even if a forger deletes the setting that says so.
    store._seals_required = sealed or (check is not None and check.version == 2)
    if check is not None:
        store._keyed_since = check.keyed_since
    if key is None:
        return False  # reads only; keyed records report as not verifiable without it
    if check is None or not check.matches(key):
        detail = (
            f"the key does not match the key check stored in {where} (a wrong key, or an "
            "altered check value); open it with the key it was created with"
        )
        raise ChainKeyError(_OPEN, detail)
    if check.version == 2:
        assert check.legacy_count is not None  # noqa: S101 - version 2 has both
        assert check.legacy_root is not None  # noqa: S101
        store._legacy = (check.legacy_count, check.legacy_root)
        return False
    # Version 1 (an earlier chatledger): seal the unkeyed records below its boundary now.
    # Whatever a forger did to them before this open cannot be undone here; from now on
    # any change to them fails verify().
    if not write:
        return True
    count, root = legacy_seal(tx.legacy_hashes(check.keyed_since))
    tx.put_setting(KEY_CHECK, v2_value(key, check.keyed_since, count, root))
    if not sealed:
        _seal_heads(store, tx, key, pending=True)
        tx.put_setting(HEADS_SEALED, "sealed")
    # Sealed now, under a version 2 check: a seal missing later is an edit, also to this store
    # object (it read the version 1 check, so it took seals as optional).
    store._seals_required, store._legacy = True, (count, root)
    return False


def _first_key(store: EventStore, tx: LedgerTx, key: bytes, where: str, *, write: bool) -> bool:
    """A key for a database without a key check: key it, if that is safe and asked."""
    any_records, keyed_records, last = tx.facts()
    if keyed_records:
        detail = (
            f"{where} holds keyed records but no key check value (it was deleted); "
            "restore the settings table from a backup"
        )
        raise ChainKeyError(_OPEN, detail)
    remedy = (
        f"if you trust its records as they are now, adopt the key: "
        f"adopt_key=True (Python) or `chatledger key adopt --db {where} --key-file FILE`; "
        "otherwise open it without a key"
    )
    if store._read_only:
        detail = f"{where} is not keyed, and a read never writes a key check; {remedy}"
        raise ChainKeyError(_OPEN, detail)
    if any_records and not store._adopt_key:
        detail = (
            f"{where} holds unkeyed records and no key check: a key is never adopted "
            f"silently, since its records stay forgeable by anyone until sealed; {remedy}"
        )
        raise ChainKeyError(_OPEN, detail)
    if not write:
        store._adopting = any_records
        return True
    count, root = legacy_seal(tx.legacy_hashes(None))
    tx.put_setting(KEY_CHECK, v2_value(key, last, count, root))
    # Every head, sealed or not, is sealed again under the key: an unkeyed seal is a plain
    # SHA-256 anyone can recompute.
    _seal_heads(store, tx, key, pending=False)
    tx.put_setting(HEADS_SEALED, "sealed")
    store._keyed_db, store._seals_required = True, True
    store._keyed_since, store._legacy = last, (count, root)
    return False


def _seal_heads(store: EventStore, tx: LedgerTx, key: bytes | None, *, pending: bool) -> None:
    tx.put_seals(
        [
            (head_mac(key, stream, seq, head_hash, erased), stream)
            for stream, seq, head_hash, erased in tx.seals(pending=pending)
        ]
    )
    if key is None:
        tx.put_setting(HEADS_SEALED, "sealed")
        store._seals_required = True


def _verify_before_adoption(store: EventStore, where: str) -> None:
    """A key adopted vouches for the records there: refuse to vouch for a broken chain."""
    key, store._key = store._key, None  # checked as the unkeyed chains they are
    try:
        report = store._verify_streams(None)
    finally:
        store._key = key
    if not report.ok:
        stream, (seq, reason) = next(iter(report.failures.items()))
        detail = (
            f"{where} does not verify ({stream} seq {seq}: {reason}), and adopting a key would "
            "seal it as it is; repair or restore it first"
        )
        operation = "adopt key"
        raise ChainKeyError(operation, detail)
