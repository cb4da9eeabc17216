"""Erasable memory ids: streams stored under keyed pseudonyms, the ids themselves in one
erasable row each.

A ledger created with ``erasable_ids=True`` stores every memory's records under
``~p:<32 hex digits>``, an HMAC-SHA256 of the memory's stored key (:func:`~eventlog.ids.memory_key`)
under the ledger's *id key*, and keeps the id itself in a ``names`` row beside the records.
Only the pseudonym enters the chain hash, the head seal, the keyring's per-memory entries and
every receipt, so erasing a memory deletes its ``names`` row and with it every byte of the id,
while the chain, old digests, proofs and the erasure receipt keep verifying.

Where the id key lives (chosen when the ledger is created, kept in the ``ids`` setting):

- ``keyring``: in the keyring (its ``~sys:ids`` entry), and every ``names`` row is sealed under
  the memory's own content key: a copy of the database taken before an erasure reveals neither
  text nor id once the erasure shredded that key, and the database alone yields no id at all.
- ``chain``: derived from the chain key of a keyed ledger; rows hold the id in clear.
- ``stored``: a random key in the ``ids_key`` setting, for ledgers with neither. Whoever holds
  the database file can then confirm a *guessed* id of an erased memory (recompute its
  pseudonym) but not read one: use a keyring or a chain key to rule that out too.

The SQLite and PostgreSQL stores read (or, for a new ledger, choose) the mode at open with
:func:`settle_ids`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from eventlog.errors import ChainKeyError
from eventlog.ids import (
    PSEUDONYM_PREFIX,
    SYSTEM_PREFIX,
    MemoryId,
    memory_id_from_key,
)
from eventlog.keyring import (
    Keyring,
    KeyringError,
    KeyUnavailableError,
    SealBrokenError,
    is_sealed,
    open_sealed,
    seal,
    subject_of,
)
from eventlog.validation import shown

if TYPE_CHECKING:
    from eventlog.recorder import LedgerTx
    from eventlog.store import EventStore

__all__ = [
    "IDS_KEY_SETTING",
    "IDS_SETTING",
    "PSEUDONYM_PREFIX",
    "IdKeyring",
    "is_pseudonym",
    "new_mode",
    "settle_ids",
]

IDS_SETTING: Final = "ids"
"""Setting naming where a ledger's id key lives: ``keyring``, ``chain`` or ``stored``."""
IDS_KEY_SETTING: Final = "ids_key"
"""Setting holding the id key (hex) of a ``stored`` ledger."""
IDS_KEY_ID_SETTING: Final = "ids_key_id"
"""Setting naming the keyring key id of a ``keyring`` ledger's id key (an id, not the key)."""
_KEYRING_SUBJECT: Final = SYSTEM_PREFIX + "ids"
_CHAIN_LABEL: Final = b"chatledger.ids.v1"
_MODES: Final = ("keyring", "chain", "stored")
_CACHE_BOUND: Final = 100_000


def is_pseudonym(key: str) -> bool:
    """Whether a stored key is a pseudonym (its memory's id is kept in a ``names`` row)."""
    return key.startswith(PSEUDONYM_PREFIX)


def new_mode(*, keyring: Keyring | None, chain_key: bytes | None) -> tuple[str, str | None]:
    """``(mode, stored id key hex or None)`` for a ledger created now with these secrets."""
    if keyring is not None:
        return "keyring", None
    if chain_key is not None:
        return "chain", None
    return "stored", secrets.token_hex(32)


def _name_aad(pseudonym: str) -> bytes:
    # A sealed name copied to another row fails to open instead of naming that memory.
    return f"name\x1f{pseudonym}".encode()


class IdKeyring:
    """The id key of one open ledger and what it does: pseudonyms, ``names`` rows, their
    reading back. One per store; thread-safe (its caches are plain dicts, filled idempotently).

    Args:
        mode: The ledger's ``ids`` setting.
        stored_key: The ``ids_key`` setting (``stored`` mode).
        keyring: The store's keyring (``keyring`` mode needs it for any id lookup).
        chain_key: The store's chain key (``chain`` mode needs it for any id lookup).
        where: The ledger, for error messages.
    """

    def __init__(
        self,
        mode: str,
        *,
        stored_key: str | None,
        keyring: Keyring | None,
        chain_key: bytes | None,
        where: str,
        key_id: str | None = None,
    ) -> None:
        if mode not in _MODES:
            msg = (
                f"open of {where}: its ids setting is {mode!r}, not one of {', '.join(_MODES)}: "
                "the setting was altered, or a newer chatledger wrote it; restore the settings "
                "table from a backup or upgrade chatledger"
            )
            raise ValueError(msg)
        self.mode = mode
        self._keyring = keyring if mode == "keyring" else None
        self._where = where
        self._key_id = key_id
        self._key: bytes | None = None
        if mode == "stored":
            try:
                self._key = bytes.fromhex(stored_key or "")
            except ValueError:
                self._key = b""
            if len(self._key) != 32:
                msg = (
                    f"open of {where}: its ids_key setting is not 64 hex digits; without it no "
                    "memory id can be found: restore the settings table from a backup"
                )
                raise ValueError(msg)
        elif mode == "chain" and chain_key is not None:
            self._key = hmac.new(chain_key, _CHAIN_LABEL, hashlib.sha256).digest()
        self._pseudonyms: dict[str, str] = {}  # stored key -> pseudonym
        # pseudonym -> stored key, unbounded (one short string per memory this process
        # touched): a StreamKey made by stream_key() appends by pseudonym, and its names row
        # and keyring subject need the id back.
        self._clear: dict[str, str] = {}

    def _id_key(self, operation: str) -> bytes:
        if self._key is not None:
            return self._key
        if self.mode == "keyring":
            if self._keyring is None:
                msg = (
                    f"{operation} of {self._where}: its memory ids are keyed under its keyring "
                    "(erasable ids); pass keyring=... (CLI: --keyring FILE) to find a memory "
                    "by its id"
                )
                raise ChainKeyError(operation, msg)
            if self._key_id is None:  # a ledger created before its id key's id was recorded
                self._key = self._keyring.current(_KEYRING_SUBJECT)[1]
                return self._key
            # get(), not current(): another ledger's keyring (or a new, empty one) would
            # answer current() with a key of its own, and every id would silently map to
            # another pseudonym - reads empty, appends split into new streams.
            key = self._keyring.get(self._key_id)
            if key is None:
                raise KeyringError(
                    operation,
                    f"{self._where}'s memory ids are keyed under key {shown(self._key_id)} of "
                    f"its keyring, which {self._keyring!r} does not hold: it is another "
                    "ledger's keyring, a new one, or an older copy; pass the keyring this "
                    "ledger was created with (CLI: --keyring FILE)",
                )
            self._key = key
            return self._key
        msg = (
            f"{operation} of {self._where}: its memory ids are keyed under its chain key "
            "(erasable ids); open it with chain_key=... (CLI: --key-file FILE) to find a memory by "
            "its id"
        )
        raise ChainKeyError(operation, msg)

    def pseudonym(self, clear: str, operation: str) -> str:
        """The stored key of the stream of the memory whose :func:`~eventlog.ids.memory_key`
        is ``clear``."""
        found = self._pseudonyms.get(clear)
        if found is None:
            mac = hmac.new(self._id_key(operation), clear.encode(), hashlib.sha256)
            found = PSEUDONYM_PREFIX + mac.hexdigest()[:32]
            if len(self._pseudonyms) > _CACHE_BOUND:  # a bound, not an LRU: refilling is cheap
                self._pseudonyms.clear()
            self._pseudonyms[clear] = found
            self._clear[found] = clear
        return found

    def clear_key(self, pseudonym: str) -> str | None:
        """The stored key whose pseudonym this process computed, or None."""
        return self._clear.get(pseudonym)

    def stored_name(self, pseudonym: str, clear: str) -> str:
        """What the ``names`` row of ``pseudonym`` holds: the clear stored key, or in
        ``keyring`` mode that key sealed under the memory's own content key (so shredding the
        memory's key shreds its id in every copy of the database too)."""
        if self._keyring is None:
            return clear
        subject = subject_of(memory_id_from_key(clear))
        return seal(self._keyring, subject, _name_aad(pseudonym), clear, memory=pseudonym)

    def read_name(self, pseudonym: str, stored: str) -> MemoryId | None:
        """The memory id a ``names`` row holds, or None when it cannot be read here (sealed
        under a key this store does not hold, e.g. opened without the keyring)."""
        if is_sealed(stored):
            if self._keyring is None:
                return None
            try:
                clear = open_sealed(self._keyring, _name_aad(pseudonym), stored, where="names")
            except (KeyUnavailableError, SealBrokenError):
                return None  # shredded, or not this keyring's: shown as unreadable
        elif self.mode == "keyring":
            return None  # a keyring ledger never stores a name in clear: someone wrote this
        else:
            clear = stored
        try:
            memory_id = memory_id_from_key(clear)
        except ValueError:
            return None
        # A row moved to another pseudonym must not name that memory (the check needs the id
        # key; without it - a keyed ledger opened without its key - the row is all there is).
        try:
            expected = self.pseudonym(clear, "read names")
        except ChainKeyError:
            expected = pseudonym
        if expected != pseudonym:
            return None
        return memory_id


def settle_ids(
    store: EventStore,
    where: str,
    read: Callable[[Callable[[LedgerTx], bool]], bool],
    write: Callable[[Callable[[LedgerTx], bool]], bool],
) -> None:
    """Install the ledger's id key (erasable ids), or choose one for a new ledger created
    with ``erasable_ids=True``. Backends call it from ``__init__`` after
    :func:`~eventlog.keycheck.settle_keys`."""
    settings: dict[str, str | None] = {}

    def look(tx: LedgerTx) -> bool:
        settings["mode"] = tx.setting(IDS_SETTING)
        settings["key"] = tx.setting(IDS_KEY_SETTING)
        settings["key_id"] = tx.setting(IDS_KEY_ID_SETTING)
        return settings["mode"] is None and store._want_erasable_ids

    if read(look):
        if store._read_only:
            msg = (
                f"open of {where} with erasable_ids=True: the ledger has no erasable ids "
                "and a read-only store cannot set them up; open it writable once"
            )
            raise ValueError(msg)

        def choose(tx: LedgerTx) -> bool:
            if look(tx):
                if tx.facts()[0]:
                    msg = (
                        f"open of {where} with erasable_ids=True: the ledger already holds "
                        "records whose stream keys are the ids in clear, and those keys are "
                        "hashed into the chain; erasable ids are chosen when a ledger is "
                        "created - start a new ledger (chatledger export + import keeps "
                        "the history verifiable in the old one)"
                    )
                    raise ValueError(msg)
                mode, stored = new_mode(keyring=store._keyring, chain_key=store._key)
                tx.put_setting(IDS_SETTING, mode)
                if stored is not None:
                    tx.put_setting(IDS_KEY_SETTING, stored)
                if store._keyring is not None:
                    # Recorded so a later open with another keyring is refused, not served.
                    key_id = store._keyring.current(_KEYRING_SUBJECT)[0]
                    tx.put_setting(IDS_KEY_ID_SETTING, key_id)
                    settings["key_id"] = key_id
                settings["mode"], settings["key"] = mode, stored
            return True

        write(choose)
    mode = settings["mode"]
    if mode is not None:
        store._names = IdKeyring(
            mode,
            stored_key=settings["key"],
            keyring=store._keyring,
            chain_key=store._key,
            where=where,
            key_id=settings["key_id"],
        )
