"""InMemoryEventStore: the contract on Python lists, for tests and ephemeral apps."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from eventlog.erasure import (
    brings_erasure,
    content_subject,
    erased_after,
    erasure_record,
    purged,
    shred,
    snapshot_problem,
    tombstone,
)
from eventlog.errors import ConcurrencyError, StoreClosedError
from eventlog.hashing import RECEIPT_KINDS
from eventlog.ids import MemoryId, memory_id_from_key
from eventlog.keycheck import chain_key_argument, legacy_seal
from eventlog.keyring import Keyring
from eventlog.ledger_tree import TreeBlock
from eventlog.models import (
    ErasureReceipt,
    HeadSeal,
    NewRecord,
    Record,
    Snapshot,
    StreamHead,
    format_time,
)
from eventlog.names import IdKeyring, new_mode
from eventlog.store import EventStore
from eventlog.validation import check_at, check_range, check_snapshot, check_tail

__all__ = ["InMemoryEventStore"]


class InMemoryEventStore(EventStore):
    """Keeps records in per-stream lists plus one global list, under one lock.

    The lock plays the role of the SQL stores' unique (stream, seq) key: the head check and
    the insert happen under it, so a conflicting append can never slip in between.

    Args:
        chain_key: Chain key (at least 16 bytes): records are format 3, HMAC-SHA256 under it.
        keyring: Encrypt each memory's content under its own content key (see
            :class:`~eventlog.keyring.Keyring`).
        erasable_ids: Store memories under keyed pseudonyms (see :mod:`eventlog.names`).
        key: Deprecated name of ``chain_key`` (a :class:`DeprecationWarning`).
    """

    def __init__(
        self,
        *,
        chain_key: bytes | None = None,
        keyring: Keyring | None = None,
        erasable_ids: bool = False,
        key: bytes | None = None,
    ) -> None:
        chain_key = chain_key_argument("InMemoryEventStore", chain_key, key)
        self._open_modes(
            chain_key, keyring, read_only=False, adopt_key=False, erasable_ids=erasable_ids
        )
        self._names_of: dict[str, str] = {}  # the names table (erasable ids)
        if erasable_ids:
            mode, stored = new_mode(keyring=keyring, chain_key=self._key)
            where = "InMemoryEventStore"
            self._names = IdKeyring(
                mode, stored_key=stored, keyring=keyring, chain_key=self._key, where=where
            )
        self._keyed_db = chain_key is not None
        self._seals_required = True  # sealed from the first record: nothing predates seals
        if chain_key is not None:
            self._legacy = legacy_seal(())  # keyed from the start: no unkeyed records
        self._lock = threading.RLock()
        self._seals: dict[str, HeadSeal] = {}
        self._streams: dict[str, list[Record]] = {}
        self._all: list[Record] = []
        self._snapshots: dict[tuple[str, str], dict[int, Snapshot]] = {}
        self._position = 0
        self._tree: list[TreeBlock] = []  # the ledger tree's blocks, as a database keeps them
        self._tree_gen = 0  # bumped by every purge (see EventStore._tree_generation)
        self._closed = False

    def _open(self, operation: str) -> None:
        if self._closed:
            raise StoreClosedError(operation, "InMemoryEventStore")

    def append(
        self,
        memory_id: MemoryId,
        items: Sequence[NewRecord],
        *,
        expected_seq: int | None = None,
        expected_hash: str | None = None,
    ) -> list[Record]:
        key = self._stream_key(memory_id, "append")
        self._check_items(items, memory_id, key)
        with self._lock:
            self._open("append")
            if not items:
                return []
            name = self._name_row(key)
            stream = self._streams.get(key, [])
            head = _head_of(stream)
            actual = 0 if head is None else head.seq
            if expected_seq is not None and expected_seq != actual:
                raise ConcurrencyError(key, expected_seq, actual)
            conflict = self._hash_conflict(key, head, expected_hash)
            if conflict is not None:
                raise conflict
            rows = self._build(key, head, items, self._now())  # validates before any write
            old = self._seals.get(key)
            erased = 0 if old is None else old.erased_through
            if brings_erasure(items):  # an import may move it (see eventlog.erasure)
                erased = erased_after(key, rows, erased)
            records = []
            for row in rows:
                self._position += 1
                records.append(Record(self._position, *row))
            self._streams.setdefault(key, []).extend(records)
            self._all.extend(records)
            if name is not None:
                self._names_of.setdefault(*name)
            self._seal(key, records[-1], erased_through=erased)
        return self._revealed(records, items)

    def _seal(self, key: str, head: Record, *, erased_through: int) -> None:
        mac = self._seal_of(key, head.seq, head.hash, erased_through)
        self._seals[key] = HeadSeal(head.seq, head.hash, mac, erased_through)

    def _tree_generation(self) -> int:
        return self._tree_gen

    def _tree_blocks(self) -> tuple[int, list[TreeBlock]]:
        with self._lock:
            self._open("read the ledger tree")
            return self._tree_gen, list(self._tree)

    def _save_tree_blocks(
        self, rows: Sequence[TreeBlock], *, replace: bool, generation: int
    ) -> bool | None:
        with self._lock:
            self._open("save the ledger tree")
            if generation != self._tree_gen:
                return False
            if replace:
                self._tree = []
            count = len(self._tree)
            if rows and rows[0].block > count:
                return False
            self._tree.extend(row for row in rows if row.block >= count)
            return True

    def _head_seal(self, key: str) -> HeadSeal | None:
        with self._lock:
            return self._seals.get(key)

    def _sealed_keys(self) -> list[str]:
        with self._lock:
            return list(self._seals)

    def _ends(self, key: str) -> tuple[HeadSeal | None, Record | None, Record | None]:
        with self._lock:  # one snapshot, as the SQL stores' one statement
            self._open("read")
            stream = self._streams.get(key) or []
            ends = [stream[0], stream[-1]] if stream else []
            seal = self._seals.get(key)
        opened = self._opened(ends)
        return seal, opened[0] if opened else None, opened[-1] if opened else None

    def purge(self, memory_id: MemoryId, *, expected_seq: int, reason: str) -> Record:
        key = self._stream_key(memory_id, "purge")
        subject = content_subject(self, key, "purge")  # before the names row goes
        with self._lock:
            self._open("purge")
            stream = self._streams.get(key, [])
            head = _head_of(stream)
            if head is None:
                msg = f"purge of {key}: the stream is empty; nothing to erase"
                raise ValueError(msg)
            if head.seq != expected_seq:
                raise ConcurrencyError(key, expected_seq, head.seq)
            now = self._now()
            tomb = tombstone(head, [(r.position, r.hash) for r in stream], reason, now)
            (row,) = self._build(key, head, [tomb], now)
            # First, under the lock appends take (see erasure._erase_then): a keyring that
            # fails leaves everything as it was.
            shred(self, key, subject)
            erased = {id(r) for r in stream}
            self._all = [r for r in self._all if id(r) not in erased]
            for snap_key in [k for k in self._snapshots if k[0] == key]:
                del self._snapshots[snap_key]
            self._tree = []  # the erased records were in it: the next digest rebuilds
            self._tree_gen += 1
            self._streams[key] = []
            self._names_of.pop(key, None)  # the id goes with the content, as in _erase
            self._position += 1
            record = Record(self._position, *row)
            self._streams[key].append(record)
            self._all.append(record)
            self._seal(key, record, erased_through=record.seq)  # purged records: never back
        purged(self, key)
        return record

    def _erase(
        self,
        keys: Sequence[str],
        reason: str,
        expected_seq: int | None,
        before_commit: Callable[[], None] | None = None,
    ) -> list[ErasureReceipt]:
        with self._lock:
            self._open("erase")
            # Build every receipt first: nothing changes unless the whole batch can.
            plans = []
            for key in keys:
                stream = self._streams.get(key, [])
                head = _head_of(stream)
                seq = 0 if head is None else head.seq
                if expected_seq is not None and seq != expected_seq:
                    raise ConcurrencyError(key, expected_seq, seq)
                pending = [
                    r
                    for r in stream
                    if r.kind not in RECEIPT_KINDS and (r.format == 1 or not r.erased)
                ]
                now = self._now()
                built = erasure_record(key, [(r.seq, r.format) for r in pending], reason, now)
                if built is None:
                    continue
                item, event = built
                (row,) = self._build(key, head, [item], now)  # validates before writing
                plans.append((key, stream, pending, row, event))
            if before_commit is not None:
                # Under the lock appends take (see erasure._erase_then), and before any change:
                # a keyring that fails leaves everything as it was.
                before_commit()
            receipts = []
            blanked: dict[int, Record] = {}
            for key in keys:
                self._names_of.pop(key, None)  # the id goes with the content
            for key, stream, pending, row, event in plans:
                blank = {r.position: r._replace(payload="", salt="") for r in pending}
                stream[:] = [blank.get(r.position, r) for r in stream]
                blanked.update(blank)
                for snap_key in [k for k in self._snapshots if k[0] == key]:
                    del self._snapshots[snap_key]
                self._position += 1
                record = Record(self._position, *row)
                stream.append(record)
                self._all.append(record)
                self._seal(key, record, erased_through=record.seq)
                receipts.append(ErasureReceipt(memory_id_from_key(key), event, record))
            if blanked:
                self._all = [blanked.get(r.position, r) for r in self._all]
            return receipts

    def save_snapshot(self, memory_id: MemoryId, name: str, seq: int, state: str) -> None:
        check_snapshot("save_snapshot", name, seq, state)
        key = self._stream_key(memory_id, "save_snapshot")
        with self._lock:
            self._open("save_snapshot")
            stream = self._streams.get(key, ())
            erased_at = min(
                (r.seq for r in stream if r.seq > seq and r.kind in RECEIPT_KINDS), default=None
            )
            problem = snapshot_problem(key, seq, any(r.seq == seq for r in stream), erased_at)
            if problem is not None:
                raise ValueError(problem)
            saved = self._snapshots.setdefault((key, name), {})
            for older in [s for s in saved if s < seq]:
                del saved[older]
            saved[seq] = Snapshot(
                key, name, seq, self._sealed_state(key, name, seq, state), self._now()
            )

    def read(
        self,
        memory_id: MemoryId,
        *,
        gt: int | None = None,
        lte: int | None = None,
        limit: int | None = None,
        desc: bool = False,
    ) -> list[Record]:
        check_range("read", gt, lte, limit, desc)
        key = self._stream_key(memory_id, "read")
        with self._lock:
            self._open("read")
            stream = self._streams.get(key, [])
            lo = 0 if gt is None else bisect.bisect_right(stream, gt, key=_seq)
            hi = len(stream) if lte is None else bisect.bisect_right(stream, lte, key=_seq)
            selected = stream[lo:hi]
        if desc:
            selected.reverse()
        return self._opened(selected if limit is None else selected[: max(limit, 0)])

    def _range_rows(self, key: str, gt: int, lte: int | None) -> list[tuple[Any, ...]]:
        with self._lock:
            self._open("read")
            stream = self._streams.get(key, [])
            lo = bisect.bisect_right(stream, gt, key=_seq)
            hi = len(stream) if lte is None else bisect.bisect_right(stream, lte, key=_seq)
            selected = stream[lo:hi]
        # The stored records: payloads as stored (sealed ones stay sealed).
        return [(*r[2:13], r[0]) for r in selected]

    def read_all(self, *, gt: int = 0, limit: int | None = None) -> list[Record]:
        check_tail("read_all", gt, limit)
        with self._lock:
            self._open("read_all")
            lo = bisect.bisect_right(self._all, gt, key=_position)
            hi = len(self._all) if limit is None else lo + max(limit, 0)
            selected = self._all[lo:hi]
        return self._opened(selected)

    def head(self, memory_id: MemoryId) -> StreamHead | None:
        key = self._stream_key(memory_id, "head")
        with self._lock:
            self._open("head")
            return _head_of(self._streams.get(key, []))

    def seq_at(self, memory_id: MemoryId, at: datetime) -> int | None:
        check_at("seq_at", at)
        key, when = self._stream_key(memory_id, "seq_at"), format_time(at)
        with self._lock:
            self._open("seq_at")
            stream = self._streams.get(key, [])
            i = bisect.bisect_right(stream, when, key=_time)
            return stream[i - 1].seq if i else None

    def load_snapshot(
        self, memory_id: MemoryId, name: str, *, lte: int | None = None
    ) -> Snapshot | None:
        check_range("load_snapshot", None, lte, None)
        check_snapshot("load_snapshot", name)
        key = self._stream_key(memory_id, "load_snapshot")
        with self._lock:
            self._open("load_snapshot")
            saved = self._snapshots.get((key, name), {})
            seqs = [s for s in saved if lte is None or s <= lte]
            found = saved[max(seqs)] if seqs else None
        return self._opened_state(found)

    def _name_rows(self) -> dict[str, str]:
        with self._lock:
            return dict(self._names_of)

    def _stream_rows(self) -> list[tuple[str, int, int, str, str]]:
        with self._lock:
            self._open("streams")
            return [
                (key, len(s), s[-1].seq, s[0].recorded_at_text, s[-1].recorded_at_text)
                for key, s in self._streams.items()
                if s
            ]

    def close(self) -> None:
        with self._lock:
            self._closed = True


def _head_of(stream: list[Record]) -> StreamHead | None:
    if not stream:
        return None
    last = stream[-1]
    return StreamHead(last.seq, last.hash, last.recorded_at_text)


def _seq(record: Record) -> int:
    return record.seq


def _position(record: Record) -> int:
    return record.position


def _time(record: Record) -> str:
    return record.recorded_at_text
