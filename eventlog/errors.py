"""Errors raised by the event log.

Every error the stores raise is an :class:`EventLogError`; driver errors are wrapped at one
choke point per backend so callers never need to import ``sqlite3`` or ``psycopg``::

    EventLogError
    ├── ConcurrencyError        an append lost an optimistic-concurrency race
    ├── ChainIntegrityError     a hash chain does not verify (tampering or corruption)
    │   └── DamagedExportError  an export refused: a memory in it does not verify
    ├── ChainKeyError           a keyed store was opened with a wrong key, or written without one
    ├── SchemaVersionError      the database or a record was written by a newer chatledger
    ├── StoreClosedError        the store was used after close()
    ├── ReadOnlyError           a store opened with read_only=True was asked to write
    ├── RollbackError           the ledger is behind or diverges from its witness (restored?)
    ├── StaleTreeError          a stored ledger tree block disagrees with its records (internal:
    │                           proofs turn it into ChainIntegrityError or ValueError)
    ├── PersistenceError        the database failed (locked too long, unreachable, disk full)
    │   └── OutcomeUnknownError a write's connection died; whether it landed is unknown
    ├── KeyUnavailableError     encrypted content whose key is destroyed or not given  (keyring)
    ├── SealBrokenError         encrypted content that does not authenticate           (keyring)
    ├── KeyringError            the keyring cannot be read or written                  (keyring)
    ├── ContentErasedError      a message was asked for whose content was erased (also ValueError)
    └── EncodingUnavailableError a tokenizer encoding has no local data file (also RuntimeError)

The three keyring errors live in :mod:`eventlog.keyring`, beside the encryption they are about.
Every one of them is importable from :mod:`eventlog`. The last two are raised by projections
(a replay, a token window); they are here so that one ``except EventLogError`` catches every
error chatledger raises on purpose, and they keep their older bases, so ``except ValueError``
/ ``except RuntimeError`` written before still catches them.

Errors carry the facts as attributes (``stream_id``, ``expected``, ``actual``, ...) so code can
react without parsing messages, and their messages name the operation, the values and a remedy.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ChainIntegrityError",
    "ChainKeyError",
    "ConcurrencyError",
    "ContentErasedError",
    "DamagedExportError",
    "EncodingUnavailableError",
    "EventLogError",
    "OutcomeUnknownError",
    "PersistenceError",
    "ReadOnlyError",
    "RollbackError",
    "SchemaVersionError",
    "StaleTreeError",
    "StoreClosedError",
]


class EventLogError(Exception):
    """Base class of every error raised by the event log."""


class ConcurrencyError(EventLogError):
    """An append expected the stream's head at one seq (or hash), but another writer moved it.

    Attributes:
        stream_id: Canonical key of the stream (memory id).
        expected: The seq the caller expected the head to be at.
        actual: The head seq found in the store (None when unknown).
        expected_hash: The head hash the caller expected (None when it gave none).
        actual_hash: The head hash found (None when unknown or not compared).
    """

    def __init__(
        self,
        stream_id: str,
        expected: int,
        actual: int | None,
        *,
        expected_hash: str | None = None,
        actual_hash: str | None = None,
    ) -> None:
        self.stream_id = stream_id
        self.expected = expected
        self.actual = actual
        self.expected_hash = expected_hash
        self.actual_hash = actual_hash
        found = "unknown" if actual is None else str(actual)
        if actual_hash is not None:
            msg = (
                f"append to {stream_id} expected head hash {expected_hash}, but head (seq "
                f"{found}) has hash {actual_hash}; history changed under you (another writer, "
                "a failover or a restore): reload the memory from the store and retry"
            )
        else:
            msg = (
                f"append to {stream_id} expected head seq {expected}, but head is {found}; "
                "another writer appended first: read the new events (catch up) and retry"
            )
        super().__init__(msg)


class ChainIntegrityError(EventLogError):
    """A record's hash does not match its content or its predecessor.

    Attributes:
        stream_id: Canonical key of the stream.
        seq: The first seq whose hash does not verify.
        reason: What did not match.
    """

    def __init__(self, stream_id: str, seq: int, reason: str) -> None:
        self.stream_id = stream_id
        self.seq = seq
        self.reason = reason
        msg = f"hash chain of {stream_id} breaks at seq {seq}: {reason}"
        super().__init__(msg)


class DamagedExportError(ChainIntegrityError):
    """:func:`~eventlog.formats.jsonl.export_jsonl` refused to write a memory whose hash chain
    does not verify: :func:`~eventlog.formats.jsonl.import_jsonl` would refuse the file, and a
    backup found unrestorable only when it is needed is a backup lost. Nothing was written.

    Attributes:
        stream_id: The first damaged memory's stream key (in key order).
        seq: Its first seq that does not verify.
        reason: Why that record does not verify.
        damaged: ``(stream key, first bad seq, reason)`` of every damaged memory the export
            would have held, in key order.
    """

    def __init__(self, msg: str, damaged: Sequence[tuple[str, int, str]]) -> None:
        self.damaged = tuple(damaged)
        self.stream_id, self.seq, self.reason = self.damaged[0]
        # Not ChainIntegrityError's message: this one names the export and its remedy.
        EventLogError.__init__(self, msg)


class ChainKeyError(EventLogError):
    """The store's chain key is wrong, missing, or unusable.

    Raised when a keyed database is opened with a key that does not match its stored key
    check (or the check is missing while keyed records exist), and when a store opened
    without the key tries to append to a keyed database.

    Attributes:
        operation: What the store was doing (``"open"``, ``"append"``, ...).
    """

    def __init__(self, operation: str, detail: str) -> None:
        self.operation = operation
        msg = f"{operation} refused: {detail}"
        super().__init__(msg)


class ReadOnlyError(EventLogError):
    """A store opened with ``read_only=True`` was asked to write (append, erase, purge,
    snapshot): a read never changes the database.

    Attributes:
        operation: The write that was refused.
    """

    def __init__(self, operation: str, where: str) -> None:
        self.operation = operation
        msg = (
            f"{operation} refused: {where} was opened with read_only=True, so nothing is "
            "written; open it without read_only to write"
        )
        super().__init__(msg)


class RollbackError(EventLogError):
    """The ledger is behind its witness (an older copy restored: the newest records are
    gone) or diverges from it (the witnessed history was rewritten); it is not served.

    Attributes:
        operation: What the store was doing (``"open"``, ``"append"``, ``"close"``).
        where: The database or schema.
        witness: Where the witness is kept.
        witnessed_size: Records in the tree the witness saw last.
        ledger_size: Records in the ledger now.
        behind: True when the ledger is smaller than the witnessed tree, False when it
            diverges from it.
        unlisted_purges: Genuine purge tombstones after the witnessed tree that do not list
            what they erased (written by a chatledger before tombstones did): they excuse no
            missing record, so a purge that old code ran after the witness's last move reads
            as a rollback.
    """

    def __init__(
        self,
        operation: str,
        where: str,
        witness: str,
        *,
        witnessed_size: int,
        ledger_size: int,
        behind: bool,
        unlisted_purges: int = 0,
    ) -> None:
        self.unlisted_purges = unlisted_purges
        self.operation = operation
        self.where = where
        self.witness = witness
        self.witnessed_size = witnessed_size
        self.ledger_size = ledger_size
        self.behind = behind
        if behind:
            what = (
                f"holds {ledger_size} records, behind the {witnessed_size} its witness {witness} "
                "has seen: rolled back (an older copy restored?)"
            )
        else:
            what = (
                f"holds {ledger_size} records whose first {witnessed_size} do not match the "
                f"tree its witness {witness} has seen ({witnessed_size} records): the "
                "witnessed history was changed"
            )
        msg = (
            f"{operation} of {where} refused: the ledger {what}; restore the newest copy of the "
            "database, or - to accept the loss - move the witness file aside and open again "
            "(a new witness starts from the ledger as it is)"
        )
        if unlisted_purges:
            msg += (
                f"; {unlisted_purges} purge tombstone(s) after the witnessed tree do not list the "
                "records they erased (an older chatledger purged): if those purges are the only "
                "change, moving the witness aside loses nothing"
            )
        super().__init__(msg)


class SchemaVersionError(EventLogError):
    """Data was written by a newer version of chatledger than the one reading it.

    Attributes:
        found: The schema version found.
        supported: The newest version this code understands.
    """

    def __init__(self, what: str, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        msg = (
            f"{what} has schema version {found}, but this chatledger reads up to {supported}; "
            "upgrade chatledger to read it"
        )
        super().__init__(msg)


class StoreClosedError(EventLogError):
    """The store was used after :meth:`EventStore.close`."""

    def __init__(self, operation: str, store: str) -> None:
        self.operation = operation
        msg = f"{operation} on a closed {store}; open a new store object"
        super().__init__(msg)


class PersistenceError(EventLogError):
    """The database failed; the original driver error is the ``__cause__``.

    Attributes:
        operation: What the store was doing (``"append"``, ``"read"``, ...).
    """

    def __init__(self, operation: str, detail: str) -> None:
        self.operation = operation
        msg = f"{operation} failed: {detail}"
        super().__init__(msg)


class OutcomeUnknownError(PersistenceError):
    """An append's connection was lost after it sent its records, and the server stayed
    unreachable while the store tried to find out whether they landed. Do not retry blindly:
    check ``head()`` for the seq and hash the message names (a retry after a landed append
    would store it twice). Also raised (PostgreSQL) when the connection of an erase, a purge
    or another write transaction is lost during its COMMIT: the message names the memories
    whose ``head()`` tells whether it landed."""


class StaleTreeError(EventLogError):
    """The records of a stored ledger tree block no longer hash to it: they changed after the
    block was stored (see :mod:`eventlog.ledger_tree`).

    Attributes:
        block: The block's index (leaves ``block * 256`` to ``block * 256 + 255``).
    """

    def __init__(self, block: int, reason: str) -> None:
        self.block = block
        super().__init__(
            f"ledger tree block {block} (leaves {block * 256} to {block * 256 + 255}) does not "
            f"match the stored records: {reason}; the records changed after the tree absorbed "
            "them - run store.verify(digest=...) with a digest kept elsewhere"
        )


class ContentErasedError(EventLogError, ValueError):
    """A message was asked for whose event's content :meth:`EventStore.erase` deleted.

    Attributes:
        stream_id: The memory's stream key.
        seq: The erased event.
    """

    def __init__(self, msg: str, stream_id: str, seq: int) -> None:
        super().__init__(msg)
        self.stream_id = stream_id
        self.seq = seq


class EncodingUnavailableError(EventLogError, RuntimeError):
    """A tiktoken encoding is needed but no local copy of its data file could be used.

    Raised instead of downloading: an offline machine would otherwise hang or fail late.

    Attributes:
        encoding_name: The encoding that was needed, e.g. ``"p50k_base"``.
        looked_at: Each place that was tried, with the reason it was not usable.
    """

    def __init__(self, encoding_name: str, looked_at: Sequence[str], remedy: str) -> None:
        self.encoding_name = encoding_name
        self.looked_at = tuple(looked_at)
        places = "; ".join(self.looked_at)
        msg = (
            f"load tiktoken encoding {encoding_name!r} offline failed; looked at: {places}. "
            f"{remedy}"
        )
        super().__init__(msg)
