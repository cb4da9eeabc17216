"""One pass over the whole log for ``verify(digest=)``, split over two processes when it is big.

``verify(digest=)`` must re-read and re-hash every record (it never trusts a stored tree), and
at a million records the Python work per record - building it, recomputing its commitment and
chain hash, its Merkle leaf - dominates. Records of different ranges of the global order can
be checked independently except for one thing: the link from a stream's first record in a
range to its last record in the range before. So a SQLite ledger opened from a path is split
at a stored tree block's boundary (the blocks only choose the split; they decide nothing): a
worker process opens the file read-only and checks the upper half while this process checks
the lower half, each reporting its first bad record and every stream's first and last record
in its range, and the links across the boundary are checked here. Anything else - a small
log, an in-memory or PostgreSQL store, a worker that fails - takes the one-process path,
which gives the same answer.
"""

from __future__ import annotations

import dataclasses
import pickle  # only between this process and the worker it started
import subprocess
import sys
from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from eventlog import merkle
from eventlog.hashing import GENESIS, stored_record_problem
from eventlog.ledger_tree import BLOCK

if TYPE_CHECKING:
    from eventlog.models import Record
    from eventlog.store import EventStore

__all__ = ["Scan", "scan"]

_PAGE: Final = 50_000
_PURGED: Final = "memory_purged"
# Below this many records a worker's start (a new interpreter importing eventlog, ~0.3 s)
# costs more than it saves.
PARALLEL_MIN = 200_000

_ReadAll = Callable[..., "list[Record]"]


@dataclasses.dataclass
class Scan:
    """What one pass over the global order found."""

    size: int = 0
    covered: int = 0  # records at positions <= the digest's last_position
    bad: Record | None = None  # first record whose hash or chain link does not verify
    purges: list[Record] = dataclasses.field(default_factory=list)  # tombstones after the digest
    positions: array[int] = dataclasses.field(default_factory=lambda: array("q"))


@dataclasses.dataclass
class _Part:
    """One range's findings; links into the range are the caller's to check."""

    size: int = 0
    covered: int = 0
    bad: Record | None = None
    purges: list[Record] = dataclasses.field(default_factory=list)
    positions: array[int] = dataclasses.field(default_factory=lambda: array("q"))
    # The Merkle tree of this range's records alone, level by level (see _combine).
    levels: list[bytearray] = dataclasses.field(default_factory=list)
    firsts: dict[str, Record] = dataclasses.field(default_factory=dict)
    lasts: dict[str, Record] = dataclasses.field(default_factory=dict)


def _starts(head: Record | None, record: Record) -> bool:
    """The link rule of :func:`eventlog.hashing.check_stream`: a stream starts at seq 1 on
    GENESIS or at a purge tombstone, and every later record chains to the one before."""
    if head is None:
        return (record.seq == 1 and record.prev_hash == GENESIS) or record.kind == _PURGED
    return record.seq == head.seq + 1 and record.prev_hash == head.hash


def _scan_part(  # noqa: PLR0917 - private; mirrors the worker's picklable arguments
    read_all: _ReadAll,
    key: bytes | None,
    keyed_since: int,
    last_position: int,
    lo: int,
    hi: int | None,
) -> _Part:
    """Check records at positions in ``(lo, hi]`` (to the end when ``hi`` is None)."""
    part = _Part()
    heads, firsts = part.lasts, part.firsts
    nodes = merkle.InMemoryNodeStore()
    tree = merkle.MerkleTree(nodes)
    after = lo
    leaf = merkle.hash_leaf
    while True:
        page = read_all(gt=after, limit=_PAGE)
        full = len(page) == _PAGE
        if hi is not None and page and page[-1].position > hi:
            page = [r for r in page if r.position <= hi]
            full = False
        for record in page:
            if record.position <= last_position:
                part.covered += 1
            elif record.kind == _PURGED:
                part.purges.append(record)
            head = heads.get(record.stream_id)
            if head is None:
                firsts[record.stream_id] = record
                # A stream's first record in a later range links across the boundary.
                linked = lo != 0 or _starts(None, record)
            else:
                linked = _starts(head, record)
            if part.bad is None and (
                not linked or stored_record_problem(record, key, keyed_since) is not None
            ):
                part.bad = record
            heads[record.stream_id] = record
        tree.extend_hashed([leaf(bytes.fromhex(r.hash)) for r in page])
        part.positions.extend(r.position for r in page)
        part.size += len(page)
        if not full:
            part.levels = nodes.rows()
            return part
        after = page[-1].position


def worker_main() -> None:
    """The upper range, in a worker process (``python -m eventlog._scan_worker``) with its own
    read-only open of the SQLite file; arguments and result are pickles on stdin/stdout."""
    from eventlog.sqlite import SQLiteEventStore

    path, key, keyed_since, last_position, lo = pickle.load(sys.stdin.buffer)  # noqa: S301
    with SQLiteEventStore(path, read_only=True) as store:
        part = _scan_part(store.read_all, key, keyed_since, last_position, lo, None)
    pickle.dump(part, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)


def _start_worker(args: tuple[object, ...]) -> subprocess.Popen[bytes]:
    # A plain subprocess, not multiprocessing: spawning would re-import the caller's
    # __main__ (a script without a main guard would run again), and forking a process that
    # holds database connections and threads is unsafe.
    worker = subprocess.Popen(
        [sys.executable, "-m", "eventlog._scan_worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert worker.stdin is not None  # noqa: S101 - stdin=PIPE
    # The key travels over the pipe only; a few hundred bytes never fill the pipe's buffer.
    pickle.dump(args, worker.stdin, protocol=pickle.HIGHEST_PROTOCOL)
    worker.stdin.close()
    return worker


def _result(worker: subprocess.Popen[bytes]) -> _Part | None:
    """The worker's findings, or None if it failed (the caller then checks the range)."""
    assert worker.stdout is not None  # noqa: S101 - stdout=PIPE
    try:
        with worker:  # closes the pipes and waits, however this ends
            out = worker.stdout.read()
            status = worker.wait()
        part = pickle.loads(out) if status == 0 else None  # noqa: S301
    except Exception:  # any failure there: check the range here instead
        worker.kill()
        return None
    return part if isinstance(part, _Part) else None


def _split(store: EventStore) -> tuple[str, int] | None:
    """``(path, boundary position)`` when the log is big enough to split, else None.

    The lower range ends at a stored block whose leaf count is a multiple of ``2**m`` for an
    ``m`` close to the log's height, so each range's own Merkle levels up to ``m`` are the
    whole tree's, side by side (see :func:`_combine`), within 1/16 of an even split.
    """
    path = store._reopen_path()
    if path is None:
        return None
    blocks = store._tree_blocks()
    total = len(blocks) * BLOCK
    if total < PARALLEL_MIN:
        return None
    step = _step(total)
    leaves = max(step, round(total / 2 / step) * step)
    return path, blocks[leaves // BLOCK - 1].last_position


def _step(total: int) -> int:
    """The alignment of the split: a power of two, at least a block, about total / 8."""
    return max(BLOCK, 1 << max(0, total.bit_length() - 4))


def scan(store: EventStore, last_position: int, size: int) -> tuple[Scan, merkle.MerkleTree]:
    """Read the whole log once: every record's hash and link checked, and the Merkle tree of
    the first ``size`` records.

    Args:
        store: The store to check.
        last_position: The digest's last position (records up to it are "covered").
        size: How many records, in global order, the returned tree holds (at most).
    """
    key, keyed_since = store._key, store._keyed_since
    split = _split(store)
    parts: list[_Part] = []
    if split is not None:
        path, boundary = split
        worker = _start_worker((path, key, keyed_since, last_position, boundary))
        try:
            parts.append(_scan_part(store.read_all, key, keyed_since, last_position, 0, boundary))
        finally:
            upper = _result(worker)
        if upper is None:
            upper = _scan_part(store.read_all, key, keyed_since, last_position, boundary, None)
        parts.append(upper)
    else:
        parts.append(_scan_part(store.read_all, key, keyed_since, last_position, 0, None))
    return _combine(parts), _tree(parts, size)


def _combine(parts: list[_Part]) -> Scan:
    out = Scan()
    bad: list[Record] = []
    lasts: dict[str, Record] = {}
    for i, part in enumerate(parts):
        if part.bad is not None:
            bad.append(part.bad)
        if i:
            bad.extend(
                first
                for stream, first in part.firsts.items()
                if not _starts(lasts.get(stream), first)
            )
        lasts.update(part.lasts)
        out.size += part.size
        out.covered += part.covered
        out.purges.extend(part.purges)
        out.positions.extend(part.positions)
    out.bad = min(bad, key=lambda r: r.position) if bad else None
    return out


def _tree(parts: list[_Part], size: int) -> merkle.MerkleTree:
    """The tree of the first ``size`` records, from the parts' own trees.

    When the lower range holds a multiple of ``2**m`` leaves (the split is chosen so, for an
    ``m`` near the tree's height), every node of the upper range's tree up to level ``m`` is
    the whole tree's node at that level, shifted right by the lower range's node count: those
    levels are concatenated, and only the nodes above ``m`` are hashed here.
    """
    rows = parts[0].levels
    if len(parts) > 1 and parts[0].size and parts[1].size:
        lower, upper = parts
        top = (lower.size & -lower.size).bit_length() - 1  # 2**top divides lower.size
        rows = [
            lower.levels[level] + (upper.levels[level] if level < len(upper.levels) else b"")
            for level in range(top + 1)
        ]
        while len(rows[-1]) >= 64:
            row = rows[-1]
            rows.append(
                bytearray(
                    b"".join(
                        merkle.hash_children(bytes(row[i : i + 32]), bytes(row[i + 32 : i + 64]))
                        for i in range(0, len(row) - 63, 64)
                    )
                )
            )
    elif len(parts) > 1 and parts[1].size:
        rows = parts[1].levels
    leaf_count = len(rows[0]) // 32 if rows else 0
    return merkle.MerkleTree(merkle.InMemoryNodeStore.from_rows(rows), size=min(size, leaf_count))
