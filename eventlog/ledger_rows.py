"""The rows an append writes: what backends call inside their write transaction.

Owns the checks of new records (:meth:`LedgerRows._check_items`), chaining them onto a head into
rows ready to insert (:meth:`LedgerRows._build`, sealing payloads under the keyring and taking
imported records as exported), the head seal stored with each append, the refusal to write to a
read-only or keyed-without-key store, the conflict of an ``expected_hash``, and the time of an
append. :class:`~eventlog.store.EventStore` inherits it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from hashlib import sha256

from eventlog import clock, validation
from eventlog.errors import ChainKeyError, ConcurrencyError, ReadOnlyError
from eventlog.hashing import (
    FORMATS,
    GENESIS,
    RECEIPT_KINDS,
    chain_hash,
    chain_hash_v2,
    commit,
    head_mac,
    new_salt,
)
from eventlog.ids import SYSTEM_PREFIX, StreamKey, memory_id_from_key, memory_key
from eventlog.keyring import seal
from eventlog.ledger_names import LedgerNames, _aad
from eventlog.models import NewRecord, StreamHead, format_time

_Row = tuple[str, int, str, str, int, str, str, str, str, str, str, int]


class LedgerRows(LedgerNames):
    """The append path shared by every backend (a mixin of :class:`~eventlog.store.EventStore`)."""

    # Set at open (EventStore._open_modes, eventlog.keycheck.settle_keys); the class defaults
    # are on EventStore.
    _key: bytes | None
    _keyed_db: bool
    _read_only: bool

    # ---------------------------------------------------------------- shared by backends

    @staticmethod
    def _now() -> datetime:
        # Filtered: one reading from a clock that jumped ahead would otherwise pin every later
        # time of the memory it stamps (times never go backwards). See eventlog.clock.
        return clock.CLOCK.now()

    @staticmethod
    def _check_items(items: Sequence[NewRecord], memory_id: object, key: str) -> None:
        """Refuse, before anything is written, what export or import would not take back:
        the one definition of a valid record (:mod:`eventlog.validation`), shared with the
        import gate.

        Raises:
            TypeError: An item is not a :class:`NewRecord`.
            ValueError: The key or an item is not valid (see :mod:`eventlog.validation`).
        """
        problem = validation.key_problem(key)
        if problem is None and isinstance(memory_id, StreamKey):
            # A stored key used as is must be one memory_key writes, or it aliases another
            # (a tagged key) or is one verify() reports malformed (a NUL: such ids are stored
            # JSON-escaped), so every stream key is checked, not only the tagged ones.
            try:
                canonical = memory_key(memory_id_from_key(key))
            except ValueError as e:
                canonical = str(e)
            if canonical != key:
                problem = f"is not a key chatledger writes (its id is stored as {canonical!r:.80})"
        if problem is not None:
            msg = f"append to memory {validation.shown(key)}: the memory id {problem}"
            raise ValueError(msg)
        for i, item in enumerate(items):
            if not isinstance(item, NewRecord):
                msg = (
                    f"append item {i} is a {type(item).__name__}, not a NewRecord; "
                    "build records with eventlog.serialization (nothing was written)"
                )
                raise TypeError(msg)
            problem = validation.item_problem(key, item)
            if problem is not None:
                msg = (
                    f"append to {validation.shown(key)}: item {i} ({validation.shown(item.kind)}) "
                    f"{problem}; nothing was written"
                )
                raise ValueError(msg)

    def _build(
        self,
        key: str,
        head: StreamHead | None,
        items: Sequence[NewRecord],
        now: datetime,
    ) -> list[_Row]:
        """Chain ``items`` onto ``head``: rows ``(key, seq, time, kind, version, payload,
        meta, prev_hash, hash, salt, commitment, format)`` ready to insert. Pure but for the
        random salts; backends call it inside their write transaction, after reading the head
        under the same lock."""
        seq, prev, floor = (
            (0, GENESIS, "") if head is None else (head.seq, head.hash, head.recorded_at_text)
        )
        now_text = format_time(now)
        chain_key = self._key
        own_format = 2 if chain_key is None else 3
        ring = self._keyring
        # System streams and receipts hold no person's message: they stay readable without keys.
        subject = None if ring is None or key.startswith(SYSTEM_PREFIX) else self._subject(key)
        rows = []
        for item in items:
            seq += 1
            if item.recorded_at is None:
                # Clamp to the head's time: a clock that steps back must not make time order
                # disagree with seq order, which as_of(at=...) relies on.
                when = now_text if now_text >= floor else floor
            else:
                when = format_time(item.recorded_at)
                if when < floor:
                    msg = (
                        f"append to {key} at seq {seq}: recorded_at {when} is earlier than the "
                        f"previous record's {floor}; keep records in time order"
                    )
                    raise ValueError(msg)
            payload = item.payload
            if item.format is None and item.salt is None and item.commitment is None:
                if subject is not None and ring is not None and item.kind not in RECEIPT_KINDS:
                    # The commitment (and so the chain) covers the ciphertext: verify, digests
                    # and proofs need no key, and destroying the key erases every copy.
                    payload = seal(ring, subject, _aad(key, seq, item.kind), payload, memory=key)
                # The hot path, spelled out: hashing.commit/new_salt cost a call each.
                raw = os.urandom(16)
                fmt, salt = own_format, raw.hex()
                commitment = sha256(raw + payload.encode()).hexdigest()
            else:
                # An import keeps the payload as exported (sealed or not): its commitment
                # covers those exact bytes.
                fmt, salt, commitment = self._imported(key, seq, item, own_format)
            if fmt == 1:
                digest = chain_hash(
                    prev, key, seq, item.kind, item.schema_version, when, item.payload, item.meta
                )
            else:
                digest = chain_hash_v2(
                    prev,
                    key,
                    seq,
                    item.kind,
                    item.schema_version,
                    when,
                    commitment,
                    item.meta,
                    chain_key,
                )
            rows.append(
                (
                    key,
                    seq,
                    when,
                    item.kind,
                    item.schema_version,
                    payload,
                    item.meta,
                    prev,
                    digest,
                    salt,
                    commitment,
                    fmt,
                )
            )
            prev, floor = digest, when
        return rows

    def _imported(
        self, key: str, seq: int, item: NewRecord, own_format: int
    ) -> tuple[int, str, str]:
        """``(format, salt, commitment)`` of an item that names its own (an import)."""
        fmt = own_format if item.format is None else item.format
        where = f"append to {key} at seq {seq}"
        if fmt not in FORMATS:
            msg = f"{where}: format {fmt!r} is unknown; use 1, 2 or 3 (or None for the store's)"
            raise ValueError(msg)
        if fmt != own_format and (fmt == 3 or self._key is not None):
            msg = f"{where}: a format {fmt} record cannot go into " + (
                "a keyed store, which writes only format 3 (import into an unkeyed store)"
                if self._key is not None
                else "a store without a key; open it with the key the records were keyed with"
            )
            raise ValueError(msg)
        if fmt == 1:
            if item.salt or item.commitment:
                msg = f"{where}: a format 1 record has no salt or commitment"
                raise ValueError(msg)
            return 1, "", ""
        salt = item.salt if item.salt is not None else new_salt().hex()
        try:
            raw = bytes.fromhex(salt)
        except ValueError:
            raw = b""
        if salt and (len(raw) != 16 or raw.hex() != salt):
            msg = f"{where}: salt {salt!r} is not 32 lowercase hex digits"
            raise ValueError(msg)
        if not salt and (item.payload or item.commitment is None):
            msg = (
                f"{where}: an empty salt is only for an erased record (empty payload, "
                "commitment given)"
            )
            raise ValueError(msg)
        commitment = commit(raw, item.payload) if salt else ""
        if item.commitment is not None and salt and item.commitment != commitment:
            msg = f"{where}: commitment {item.commitment!r} does not match the payload and salt"
            raise ValueError(msg)
        return fmt, salt, item.commitment if item.commitment is not None else commitment

    # ---------------------------------------------------------------- keys
    # Settling the key and the seals at open is eventlog.keycheck.settle_keys; the seal of
    # each append stays here, beside _build, as part of the append path of every backend.

    def _seal_of(self, key: str, seq: int, head_hash: str, erased_through: int) -> str:
        """The head seal backends store with each append (see :func:`head_mac`).
        ``erased_through`` is the memory's, as cached with its head: it changes only by an
        erasure, which appends a receipt, so a stale value comes with a stale head and the
        append is refused as any append to a moved head is."""
        return head_mac(self._key, key, seq, head_hash, erased_through)

    def _writable(self, operation: str, where: str) -> None:
        if self._read_only:
            raise ReadOnlyError(operation, where)
        if self._keyed_db and self._key is None:
            detail = (
                f"{where} is a keyed store and this store was opened without its key; "
                "open it with chain_key= to write"
            )
            raise ChainKeyError(operation, detail)

    def _hash_conflict(
        self, key: str, head: StreamHead | None, expected_hash: str | None
    ) -> ConcurrencyError | None:
        """The error for an ``expected_hash`` the head does not have, else None."""
        actual = GENESIS if head is None else head.hash
        if expected_hash is None or expected_hash == actual:
            return None
        seq = 0 if head is None else head.seq
        return ConcurrencyError(key, seq, seq, expected_hash=expected_hash, actual_hash=actual)
