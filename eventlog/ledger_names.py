"""Where a memory's records are stored, and the keyring that seals them at rest.

Owns the stream key of a memory id (its :func:`~eventlog.ids.memory_key`, or on a ledger with
erasable ids its keyed pseudonym, see :mod:`eventlog.names`), the ``names`` rows an append makes
sure of, the memory id back from a stored key, and the keyring: its subjects, the opening of
sealed payloads on read, and the sealing of snapshots (which hold a window's messages).
:class:`~eventlog.store.EventStore` inherits it; the row builder (:mod:`eventlog.ledger_rows`)
and the verified reads (:mod:`eventlog.ledger_verify`) build on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from eventlog.hashing import RECEIPT_KINDS
from eventlog.ids import (
    PSEUDONYM_PREFIX,
    SYSTEM_PREFIX,
    MemoryId,
    StreamKey,
    memory_id_from_key,
    memory_key,
)
from eventlog.keyring import (
    Keyring,
    KeyringError,
    KeyUnavailableError,
    SealBrokenError,
    is_sealed,
    open_sealed,
    seal,
    sealed_key_id,
    subject_of,
)
from eventlog.models import Record, Snapshot
from eventlog.names import IdKeyring, is_pseudonym
from eventlog.recorder import Recorder


def _aad(key: str, seq: int, kind: str) -> bytes:
    """What a sealed payload is bound to: a ciphertext copied into another row fails to open."""
    return f"{len(key)}:{key}\x1f{seq}\x1f{kind}".encode()


def _snapshot_aad(key: str, name: str, seq: int) -> bytes:
    """What a sealed snapshot is bound to: its memory, name and seq. Never a record's
    (:func:`_aad` starts with the key's length, a digit; this with ``\x1e``)."""
    return f"\x1esnapshot\x1f{len(key)}:{key}\x1f{len(name)}:{name}\x1f{seq}".encode()


class LedgerNames(Recorder):
    """Stream keys, pseudonyms and their ``names`` rows, and the keyring (a mixin of
    :class:`~eventlog.store.EventStore`)."""

    # ---------------------------------------------------------------- encryption at rest

    _keyring: Keyring | None = None

    # ---------------------------------------------------------------- erasable ids

    _names: IdKeyring | None = None  # set at open for a ledger created with erasable_ids
    _want_erasable_ids = False

    @property
    def erasable_ids(self) -> bool:
        """Whether memories are stored under keyed pseudonyms, their ids in erasable rows
        (see :mod:`eventlog.names`): set when the ledger was created, for its whole life."""
        return self._names is not None

    def stream_key(self, memory_id: MemoryId) -> StreamKey:
        """The stored key of ``memory_id``'s stream, as a :class:`~eventlog.ids.StreamKey`
        every method takes in its place (encoding an id costs microseconds; objects that
        read one memory many times encode it once). Under erasable ids it is the pseudonym.

        Raises:
            TypeError: The id is not a memory id.
            ChainKeyError: Erasable ids keyed under a keyring or chain key this store was
                opened without.
        """
        return StreamKey(self._stream_key(memory_id, "find memory"))

    def _stream_key(self, memory_id: MemoryId, operation: str) -> str:
        """Where ``memory_id``'s records are stored: its :func:`~eventlog.ids.memory_key`,
        or its pseudonym on a ledger with erasable ids."""
        names = self._names
        if names is None:
            return memory_key(memory_id)
        if isinstance(memory_id, StreamKey):
            # A stored key: a pseudonym or a system key as is; a clear key (the CLI's, or one
            # an older object encoded) is the id, so it finds the same stream.
            clear = str(memory_id)
            if clear.startswith((PSEUDONYM_PREFIX, SYSTEM_PREFIX)):
                return clear
        else:
            clear = memory_key(memory_id)
        return names.pseudonym(clear, operation)

    def _name_row(self, key: str) -> tuple[str, str] | None:
        """The ``names`` row an append to ``key`` must make sure of (backends insert it, if
        absent, in the append's transaction), or None for a key that is not a pseudonym."""
        names = self._names
        if names is None or not is_pseudonym(key):
            return None
        row = self._name_rows_made.get(key)
        ring = self._keyring
        if (
            row is not None
            and ring is not None
            and is_sealed(row[1])
            and ring.get(sealed_key_id(row[1])) is None
        ):
            # Sealed under a key an erasure destroyed since (another store's: this one forgets
            # the rows it erases): put back, it would name nobody, and the next erasure of
            # the subject would miss the memory's new messages.
            row = None
        if row is None:
            clear = names.clear_key(key)
            if clear is None:
                msg = (
                    f"append to {key}: a pseudonym given as a stream key; append by the memory "
                    "id, so its name can be kept"
                )
                raise ValueError(msg)
            row = (key, names.stored_name(key, clear))
            self._name_rows_made[key] = row
        return row

    def _named(
        self, keys: Iterable[str], rows: dict[str, str] | None = None
    ) -> dict[str, MemoryId | None]:
        """The memory id of each stream key: the id itself, or for a pseudonym the id its
        ``names`` row holds (None when the row is gone - erased - or cannot be read here).
        ``rows``: the ``names`` rows when the caller has read them already."""
        if rows is None:
            rows = self._name_rows() if self._names is not None else {}
        out: dict[str, MemoryId | None] = {}
        for key in keys:
            if self._names is not None and is_pseudonym(key):
                stored = rows.get(key)
                out[key] = None if stored is None else self._names.read_name(key, stored)
            else:
                out[key] = memory_id_from_key(key)
        return out

    def _refuse_unreadable_names(self, operation: str, prefix: tuple[object, ...]) -> None:
        """Refuse to match ``prefix`` against ids this store cannot read: ``names`` rows sealed
        under a keyring it was opened without, or under keys its keyring neither holds nor
        records destroying (another keyring, an older copy). Those memories would be skipped
        as matching nothing, and an erasure that found nothing would look done. A row under a
        destroyed key names nobody any more (an erasure cut short after the destruction), and
        a keyring that records no destructions cannot tell the two apart: neither is refused.

        Raises:
            KeyringError: Some ``names`` row cannot be read here; nothing was erased.
        """
        if self._names is None:
            return
        rows = self._name_rows()
        self._refuse_missing_names(operation, rows)
        ring = self._keyring
        if ring is None or type(ring).destroyed is not Keyring.destroyed:
            self._refuse_unknown_keys(operation, prefix, rows)
        self._refuse_moved_names(operation, rows)

    def _refuse_unknown_keys(
        self, operation: str, prefix: tuple[object, ...], rows: dict[str, str]
    ) -> None:
        """The keyring half of :meth:`_refuse_unreadable_names`."""
        ring = self._keyring
        unknown = 0
        for stored in rows.values():
            if not is_sealed(stored):
                continue
            key_id = sealed_key_id(stored)
            if ring is None or (ring.get(key_id) is None and not ring.destroyed(key_id)):
                unknown += 1
        if unknown:
            held = (
                "this store was opened without a keyring"
                if ring is None
                else "this store's keyring neither holds nor records destroying their keys "
                "(another keyring, or an older copy of the right one)"
            )
            detail = (
                f"{unknown} memory id(s) are sealed in their names rows (erasable ids) and "
                f"{held}, so whether they start with {prefix!r} cannot be told; open the "
                "store with the keyring the ledger was created with (CLI: --keyring FILE); "
                "nothing was erased"
            )
            raise KeyringError(operation, detail)

    def _refuse_missing_names(self, operation: str, rows: dict[str, str]) -> None:
        """Refuse when a memory under a pseudonym has no ``names`` row yet holds records after
        its last erasure (an erasure deletes the row and leaves its receipt or tombstone the
        newest record; the next append stores the row again). Such a row was deleted by hand,
        which needs no key: the memory would match no prefix and look erased while every
        message stays.

        Raises:
            ValueError: Such a memory exists; nothing was erased.
        """
        for key, _count, last_seq, _first, _last in self._stream_rows():
            if not is_pseudonym(key) or key in rows:
                continue
            newest = self._ends(key)[2]
            if newest is not None and newest.kind not in RECEIPT_KINDS:
                msg = (
                    f"{operation}: memory {key} holds records after its last erasure (seq "
                    f"{last_seq} is a {newest.kind}) but has no names row: the row was deleted "
                    "since, so whose memory it is cannot be told and it would be left out; "
                    "restore the names table from a backup, or erase the memory by its id; "
                    "nothing was erased"
                )
                raise ValueError(msg)

    def _refuse_moved_names(self, operation: str, rows: dict[str, str]) -> None:
        """Refuse when a ``names`` row this store can read names no memory of its pseudonym:
        moved from another memory's row (two swapped) or edited by hand, which needs no key.
        ``read_name`` then gives None, as for a deleted row, so the memory would match no
        prefix and keep every message after an erasure that looked done.

        Raises:
            ValueError: Such a memory holds records after its last erasure; nothing was erased.
        """
        names, ring = self._names, self._keyring
        if names is None:  # no erasable ids: no names rows
            return
        for key, stored in rows.items():
            if is_sealed(stored) and (ring is None or ring.get(sealed_key_id(stored)) is None):
                continue  # not readable here: shredded, or refused by _refuse_unknown_keys
            if names.read_name(key, stored) is not None:
                continue
            newest = self._ends(key)[2]
            if newest is not None and newest.kind not in RECEIPT_KINDS:
                msg = (
                    f"{operation}: memory {key} holds records after its last erasure but its "
                    "names row names another memory (moved or edited by hand), so whose memory "
                    "it is cannot be told and it would be left out; restore the names table "
                    "from a backup, or erase the memory by its id; nothing was erased"
                )
                raise ValueError(msg)

    def _shredded_names(self) -> list[str]:
        """Pseudonyms whose ``names`` row is sealed under a key the keyring records destroyed:
        an erasure killed after destroying its keys and before its commit (every other
        erasure deletes the row with the key). Nobody can tell whose they are any more, and
        their content is gone; ``erase_subject`` finishes them (blanks, receipt, row)."""
        ring = self._keyring
        if self._names is None or ring is None:
            return []
        return sorted(
            key
            for key, stored in self._name_rows().items()
            if is_sealed(stored)
            and ring.get(sealed_key_id(stored)) is None
            and ring.destroyed(sealed_key_id(stored))
        )

    def _use_keyring(self, keyring: object) -> None:
        """Backends call this from ``__init__`` with their ``keyring=`` argument."""
        if keyring is not None and not isinstance(keyring, Keyring):
            msg = (
                f"keyring must be an eventlog.keyring.Keyring (e.g. FileKeyring(path)) or None, "
                f"not {type(keyring).__name__}"
            )
            raise TypeError(msg)
        self._keyring = keyring
        self._subjects: dict[str, str] = {}
        self._name_rows_made: dict[str, tuple[str, str]] = {}

    def _subject(self, key: str) -> str:
        """The keyring subject of a stream key (cached: parsing a key costs microseconds)."""
        cache = self._subjects
        subject = cache.get(key)
        if subject is None:
            if len(cache) > 100_000:  # a bound, not an LRU: refilling is cheap
                cache.clear()
            # A pseudonym does not say whose memory it is; its id was noted by _stream_key.
            clear = (None if self._names is None else self._names.clear_key(key)) or key
            subject = cache[key] = subject_of(memory_id_from_key(clear))
        return subject

    def _sealed_state(self, key: str, name: str, seq: int, state: str) -> str:
        """What a backend's ``save_snapshot`` stores: with a keyring, ``state`` sealed under the
        memory's content key. A window snapshot holds the window's messages: in clear it would
        put the text encryption at rest hides into every backup, where no erasure reaches."""
        ring = self._keyring
        if ring is None or key.startswith(SYSTEM_PREFIX):
            return state
        return seal(ring, self._subject(key), _snapshot_aad(key, name, seq), state, memory=key)

    def _opened_state(self, snapshot: Snapshot | None) -> Snapshot | None:
        """A backend's ``load_snapshot`` result with its state opened, or None when it is of no
        use here: sealed under a key this store lacks (or an erasure destroyed), altered, or
        in clear on a store with a keyring (written before snapshots were sealed). Snapshots
        are derived data: without one, a memory reads the events its window refers to, and
        the next compaction writes it again, sealed."""
        if snapshot is None:
            return None
        ring = self._keyring
        system = snapshot.stream_id.startswith(SYSTEM_PREFIX)
        if not is_sealed(snapshot.state):
            return snapshot if ring is None or system else None
        where = f"load_snapshot of {snapshot.stream_id} {snapshot.name!r} seq {snapshot.seq}"
        aad = _snapshot_aad(snapshot.stream_id, snapshot.name, snapshot.seq)
        try:
            state = open_sealed(ring, aad, snapshot.state, where=where)
        except (KeyUnavailableError, SealBrokenError):
            return None
        return dataclasses.replace(snapshot, state=state)

    def _opened(self, records: list[Record]) -> list[Record]:
        """``records`` with sealed payloads decrypted (``Record.sealed`` keeps the stored
        text). One that cannot be opened stays sealed: verify, digests and exports need no
        key, and decoding it raises :class:`~eventlog.keyring.KeyUnavailableError`."""
        ring = self._keyring
        if ring is None:
            return records
        out = []
        for record in records:
            opened = record
            if is_sealed(record.payload):
                where = f"read of {record.stream_id} seq {record.seq}"
                aad = _aad(record.stream_id, record.seq, record.kind)
                try:
                    plain = open_sealed(ring, aad, record.payload, where=where)
                except (KeyUnavailableError, SealBrokenError):
                    pass  # the commitment check reports an altered row; decode a missing key
                else:
                    opened = record._replace(payload=plain, sealed=record.payload)
            out.append(opened)
        return out
