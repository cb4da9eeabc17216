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
"""

from __future__ import annotations

import dataclasses
import hmac
import re
from collections.abc import Iterable

from eventlog.hashing import key_check_mac
from eventlog.merkle import MerkleTree

__all__ = ["KEY_CHECK", "KeyCheck", "legacy_seal", "parse", "v1_value", "v2_value"]

KEY_CHECK = "key_check"
"""Name of the setting holding a keyed database's key check value."""

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
