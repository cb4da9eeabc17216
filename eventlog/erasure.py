"""Erasure: emptying a memory's content while its chain keeps verifying, and the receipts
that say so.

:meth:`EventStore.erase` and :meth:`EventStore.erase_subject` delegate here; each backend's
``_erase`` empties the rows in one transaction with the receipt :func:`erasure_record` builds,
and ``purge`` appends the :func:`tombstone`. An import may bring records an erasure emptied:
:func:`erasure_step` is the one rule of where such records may stand, shared by appends
(:func:`erased_after`) and the import gate.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from eventlog.hashing import RANGE_ROW_FIELDS, RECEIPT_KINDS
from eventlog.ids import MemoryId, memory_id_from_key, memory_key
from eventlog.keyring import Keyring, KeyringError, is_sealed, sealed_key_id, subject_of
from eventlog.models import ErasureReceipt, MemoryErased, MemoryPurged, NewRecord, StreamHead
from eventlog.names import is_pseudonym
from eventlog.validation import shown

if TYPE_CHECKING:
    from eventlog.store import EventStore

__all__ = [
    "brings_erasure",
    "check_reason",
    "content_subject",
    "erase",
    "erase_subject",
    "erased_after",
    "erasure_record",
    "erasure_step",
    "purged",
    "refuse_without_its_keyring",
    "shred",
    "snapshot_problem",
    "tombstone",
]


def check_reason(operation: str, reason: object) -> None:
    """A receipt without a reason is no receipt: an auditor must learn why content went. And
    one the receipt cannot hold (a lone surrogate: not UTF-8 text) is refused here by name,
    not by a bare UnicodeEncodeError from deep in the erasure."""
    if not isinstance(reason, str) or not reason.strip():
        msg = (
            f"{operation}: reason must be a non-empty string (why the content goes), got {reason!r}"
        )
        raise ValueError(msg)
    try:
        reason.encode("utf-8")
    except UnicodeEncodeError as e:
        msg = (
            f"{operation}: reason holds a lone surrogate {reason[e.start]!r} at index "
            f"{e.start}, which is not UTF-8 text and no receipt can keep; decode the bytes it "
            "came from as UTF-8 (errors='replace' keeps what is readable); nothing was written"
        )
        raise ValueError(msg) from e


def erasure_step(at: int, seq: int, kind: str, *, content: bool) -> int | None:
    """The seq a memory is erased through after its record ``seq`` (of ``kind``, holding
    ``content`` or emptied: no salt, no payload), ``at`` before it; None when an emptied
    record does not follow the erased prefix, or a receipt is emptied. An erasure empties a
    memory from its first record on, never a receipt, and seals it through its receipt
    (:meth:`EventStore.erase`): an emptied record may only follow that prefix directly, and a
    receipt right after it joins it. The one rule of imports, shared by appends
    (:func:`erased_after`) and the import gate (which also wants the receipt)."""
    if kind in RECEIPT_KINDS:
        if not content:
            return None  # a receipt holds no message, so no erasure empties one
        return seq if seq == at + 1 else at
    if content:
        return at
    return seq if seq == at + 1 else None


def brings_erasure(items: Sequence[NewRecord]) -> bool:
    """Whether appending ``items`` may move its memory's erased_through: an import of emptied
    records or of receipts (see :func:`erased_after`); never a plain append."""
    return any(item.salt == "" or item.kind in RECEIPT_KINDS for item in items)


def erased_after(key: str, rows: Sequence[tuple[Any, ...]], erased_through: int) -> int:
    """The seq the memory is erased through once ``rows`` (from ``EventStore._build``) are
    stored, ``erased_through`` before them (see :func:`erasure_step`): an import may bring
    records an erasure emptied, and the head seal must then say so - reads and
    :meth:`EventStore.verify` refuse an emptied record past it, since emptying a row by hand
    needs no key.

    Raises:
        ValueError: An emptied record follows one that holds content; nothing is written.
    """
    at = erased_through
    for row in rows:
        seq, kind, payload, salt, fmt = row[1], row[3], row[5], row[9], row[11]
        step = erasure_step(at, seq, kind, content=bool(salt or payload or fmt == 1))
        if step is None:
            msg = (
                f"append to {key} at seq {seq}: an emptied record (no salt, no payload) "
                f"follows records that hold content (after seq {at}), or is a receipt; an "
                "erasure empties a memory from its first record on and never its receipts, "
                "so only a memory exported as it was can be imported; nothing was written"
            )
            raise ValueError(msg)
        at = step
    return at


def erasure_record(
    key: str, pending: Sequence[tuple[int, int]], reason: str, now: datetime
) -> tuple[NewRecord, MemoryErased] | None:
    """The receipt for erasing ``pending`` ``(seq, format)`` records (those with content,
    receipts excluded), or None when there are none.

    Raises:
        ValueError: A pending record is format 1 (its hash covers the payload).
    """
    from eventlog.serialization import encode_event

    if not pending:
        return None
    legacy = [seq for seq, fmt in pending if fmt == 1]
    if legacy:
        shown = ", ".join(map(str, legacy[:5])) + (", ..." if len(legacy) > 5 else "")
        msg = (
            f"erase of {key}: {len(legacy)} record(s) (seq {shown}) are format 1, whose "
            "hash covers the payload itself, so erasing them would break the chain; nothing "
            "was erased - use purge() to delete this memory's records with a tombstone"
        )
        raise ValueError(msg)
    seqs = [seq for seq, _ in pending]
    event = MemoryErased(
        first_seq=min(seqs),
        last_seq=max(seqs),
        record_count=len(seqs),
        erased_at=now,
        reason=reason,
    )
    return encode_event(event), event


def tombstone(
    head: StreamHead, leaves: Sequence[tuple[int, str]], reason: str, now: datetime
) -> NewRecord:
    """The ``memory_purged`` record ``purge`` appends before deleting the records up to
    ``head`` (``leaves``: their positions and hashes): the chain of what is left starts from
    it, and a witness checks against ``leaves`` that nothing else went."""
    from eventlog.serialization import encode_event

    event = MemoryPurged(
        last_seq=head.seq,
        last_hash=head.hash,
        event_count=len(leaves),
        purged_at=now,
        reason=reason,
        leaves=tuple(sorted(leaves)),
    )
    return encode_event(event)


def erase(
    store: EventStore, memory_id: MemoryId, *, reason: str, expected_seq: int | None
) -> ErasureReceipt:
    """See :meth:`EventStore.erase`."""
    key = store._stream_key(memory_id, "erase")
    check_reason("erase", reason)
    store._writable("erase", type(store).__name__)
    subject = content_subject(store, key, "erase")  # before the names row that may tell it goes
    # The key goes inside the erasure's transaction (also when nothing is left to erase: a
    # rerun after a crash between the destruction and the commit finishes the job).
    receipts = _erase_then(store, [key], reason, expected_seq, lambda: shred(store, key, subject))
    store._name_rows_made.pop(key, None)  # the backend deleted the row with the content
    pending = not store._clean_files("erase")
    if not receipts:
        msg = (
            f"erase of {key}: nothing to erase (no records, or their content was erased "
            "already and nothing was added since)"
        )
        raise ValueError(msg)
    clear = None if store._names is None else store._names.clear_key(key)
    named = receipts[0].memory_id if clear is None else memory_id_from_key(clear)
    return dataclasses.replace(receipts[0], memory_id=named, cleanup_pending=pending)


def snapshot_problem(key: str, seq: int, exists: bool, erased_at: int | None) -> str | None:
    """Why a window snapshot of memory ``key`` at ``seq`` must not be saved, or None. A
    backend checks, in the transaction that saves it, whether event ``seq`` ``exists`` and
    the seq of the first erasure receipt or purge tombstone after it (``erased_at``): a
    compaction reads the window, then saves it, and an erasure landing in between would see
    its content come back in the snapshot - readable, and in every later backup."""
    if not exists:
        return f"save_snapshot of {key} at seq {seq}: no such event (purged?)"
    if erased_at is not None:
        return (
            f"save_snapshot of {key} at seq {seq}: the memory was erased at seq {erased_at}, "
            "after it, and a snapshot of the window before would bring the erased content "
            "back; snapshot the head instead"
        )
    return None


def refuse_without_its_keyring(store: EventStore, key: str, operation: str) -> None:
    """Refuse to erase memory ``key`` (stored key) when its content is sealed and this store
    cannot destroy the key that sealed it: opened without a keyring, or with a keyring that
    neither holds that key nor records destroying it (another keyring, or an older copy of
    the right one). Either way the erasure would blank the rows and write a receipt while the
    key that opens every backup's copy survives - an erasure that looks done and is not. The
    first sealed record is found in one statement on the SQL stores
    (``Recorder._first_sealed``) and read raw, never opened.

    Raises:
        KeyringError: The content is sealed and this store's keyring cannot destroy its key
            (nothing was erased).
    """
    seq = store._first_sealed(key)
    if seq is None:
        return
    ring = store._keyring
    if ring is None:
        detail = (
            f"memory {key}'s content is sealed under a keyring (seq {seq}) and this store was "
            f"opened without one, so the {operation} could not destroy the key that opens "
            "every backup's copy; open the store with keyring=... (CLI: --keyring FILE); "
            "nothing was erased"
        )
        raise KeyringError(operation, detail)
    if type(ring).destroyed is Keyring.destroyed:
        # A keyring that keeps no record of what it destroyed cannot tell "not mine" from
        # "shredded by an earlier erasure" (a backup restored over it, say): not refused.
        return
    rows = store._range_rows(key, seq - 1, seq)
    payload = rows[0][RANGE_ROW_FIELDS.index("payload")] if rows else ""
    if not is_sealed(payload):
        return  # erased or purged since _first_sealed looked: nothing sealed to check
    key_id = sealed_key_id(payload)
    if ring.get(key_id) is None and not ring.destroyed(key_id):
        detail = (
            f"memory {key}'s content is sealed under key {key_id!r} (seq {seq}), which this "
            f"store's keyring neither holds nor records destroying: it is another keyring, or "
            f"an older copy of the right one, and the {operation} could not destroy the key "
            "that opens every backup's copy; open the store with the keyring the content was "
            "sealed with (CLI: --keyring FILE); nothing was erased"
        )
        raise KeyringError(operation, detail)


def content_subject(store: EventStore, key: str, operation: str) -> tuple[str, bool] | None:
    """The keyring subject that sealed memory ``key``'s content (stored key), and whether
    the subject's own key goes with the memory's (a non-tuple id is its own subject); None
    without a keyring, or for a pseudonym whose id cannot be read here. Read it *before* an
    erasure deletes the ``names`` row that may be the only place the id is.

    Derived from the stored key, never from the id as the caller spelled it: compaction and
    the CLI erase by stored key (a :class:`~eventlog.ids.StreamKey`), whose own text is not
    the subject of a tuple id's content.

    Raises:
        KeyringError: The memory's content is sealed and this store's keyring (none, or
            another) cannot destroy its key (see :func:`refuse_without_its_keyring`).
    """
    refuse_without_its_keyring(store, key, operation)
    if store._keyring is None:
        return None
    names = store._names
    if names is not None and is_pseudonym(key) and names.clear_key(key) is None:
        store._named([key])  # reading its names row tells this process the id, if it can
    clear = key if names is None else names.clear_key(key)
    if clear is None:
        return None
    memory_id = memory_id_from_key(clear)
    return subject_of(memory_id), not isinstance(memory_id, tuple)


def _erase_then(
    store: EventStore,
    keys: Sequence[str],
    reason: str,
    expected_seq: int | None,
    before_commit: Callable[[], None],
) -> list[ErasureReceipt]:
    """``store._erase(...)`` with ``before_commit`` (the content keys' destruction) run inside
    its transaction, just before the commit, while it holds the lock every append of those
    memories takes. An append then lands before the erasure (and is erased with the rest) or
    after it, under a new key - never in between, sealed under the key being destroyed: that
    message would be unreadable, and so would every later read of the window holding it.

    The price: a commit that fails after the destruction leaves the content unreadable but
    not blanked and no receipt; the erasure raised, and running it again finishes it. A
    recorder whose ``_erase`` predates the parameter gets the old order: after the commit.
    """
    if "before_commit" in inspect.signature(type(store)._erase).parameters:
        return store._erase(keys, reason, expected_seq, before_commit=before_commit)
    receipts = store._erase(keys, reason, expected_seq)
    before_commit()
    return receipts


def purged(store: EventStore, key: str) -> None:
    """What a backend's ``purge`` does after its commit: forget the ``names`` row it deleted
    in its transaction (where it also called :func:`shred`, as :func:`erase` does). Without
    those a purge - the stronger erasure - left the id of a ledger with erasable ids in its
    ``names`` row, and the key that opens a backup's copy of the purged content in the
    keyring."""
    store._name_rows_made.pop(key, None)


def shred(store: EventStore, key: str, subject: tuple[str, bool] | None) -> None:
    """Destroy the content key of memory ``key`` (stored key) filed under ``subject`` (see
    :func:`content_subject`). Called inside the erasure's (or purge's) transaction, just
    before its commit (see :func:`_erase_then`)."""
    if store._keyring is None or subject is None:
        return
    # The memory's own key goes (content sealed before memories had their own keys shares
    # its subject's key with the subject's other memories: erase_subject destroys that); a
    # plain id is its own subject, so its subject key goes too.
    name, own = subject
    store._keyring.destroy_memory(name, key)
    if own:
        store._keyring.destroy(name)


def erase_subject(
    store: EventStore, prefix: tuple[object, ...], *, reason: str, batch: int
) -> list[ErasureReceipt]:
    """See :meth:`EventStore.erase_subject`."""
    if not isinstance(prefix, tuple):
        msg = f"erase_subject: prefix must be a tuple, not {type(prefix).__name__}"
        raise TypeError(msg)
    if not prefix:
        msg = "erase_subject: the prefix is empty and would erase every memory; name a subject"
        raise ValueError(msg)
    check_reason("erase_subject", reason)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        msg = f"erase_subject: batch must be an int >= 1, got {shown(batch)}"
        raise ValueError(msg)
    store._writable("erase", type(store).__name__)
    keys = []
    named = store._named(row[0] for row in store._stream_rows())
    for key, mid in sorted(named.items()):
        if isinstance(mid, tuple) and mid[: len(prefix)] == prefix:
            keys.append(key)
    # Memories an erasure killed between its key destruction and its commit left behind:
    # their names rows are sealed under destroyed keys, so no prefix matches them.
    keys += [key for key in store._shredded_names() if key not in named or named[key] is None]
    for key in keys:  # before anything is erased
        refuse_without_its_keyring(store, key, "erase")
    ring = store._keyring

    def destroy_keys(chunk: Sequence[str]) -> None:
        # Under a one-element prefix, every key of the subject (keyring.subject_of) at once,
        # its memories' and its own (which sealed content from before memories had keys of
        # their own), in the last batch. A longer prefix (("user-42", "tenant-a")) erases
        # some of the subject's memories, not all: each batch's own keys go in its
        # transaction, in one call per subject (one rewrite of a key file, not one per
        # memory); a rerun after a kill could not find the memories an earlier batch erased
        # (with erasable ids their names rows went with them), nor so destroy their keys.
        if ring is None:
            return
        if len(prefix) == 1:
            ring.destroy(memory_key(prefix))
            return
        by_subject: dict[str, list[str]] = {}
        for key in chunk:
            mid = named[key]
            if isinstance(mid, tuple):  # not a leftover (its keys are destroyed already)
                by_subject.setdefault(subject_of(mid), []).append(key)
        for subject, memories in by_subject.items():
            ring.destroy_memories(subject, memories)

    # The keys go in the last batch's transaction, before its commit (see _erase_then): in
    # one batch (up to `batch` memories) no append can land between the rows and the keys.
    # Always, even with nothing left to erase: a rerun destroys the keys if a crash came
    # between them and the commit, and finishes an earlier run's cleanup.
    receipts: list[ErasureReceipt] = []
    starts = range(0, len(keys), batch)
    for start in starts:
        chunk = keys[start : start + batch]
        if start == starts[-1] or len(prefix) > 1:
            destroy = functools.partial(destroy_keys, chunk)
            receipts.extend(_erase_then(store, chunk, reason, None, destroy))
        else:
            receipts.extend(store._erase(chunk, reason, None))
    if not keys:
        destroy_keys(keys)
    for key in keys:
        store._name_rows_made.pop(key, None)  # the backend deleted the rows
    pending = not store._clean_files("erase")
    return [
        dataclasses.replace(
            r, memory_id=named[r.record.stream_id] or r.memory_id, cleanup_pending=pending
        )
        for r in receipts
    ]
