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
log, an in-memory or PostgreSQL store, a path that no longer names the open file, a worker
that cannot start, fails or hangs - takes the one-process path, which gives the same answer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import os
import pickle  # only between this process and the worker it started
import subprocess
import sys
import time
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

from eventlog import merkle
from eventlog.hashing import GENESIS, stored_record_problem, verifies
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
_OWN_SHARE = 0.52  # of the records, checked in this process (measured: both end together)

_ReadAll = Callable[..., "list[Record]"]
_log = logging.getLogger("chatledger.verify")


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
            stream = record.stream_id
            head = heads.get(stream)
            if head is None:
                firsts[stream] = record
                # A stream's first record in a later range links across the boundary.
                linked = lo != 0 or _starts(None, record)
            else:
                linked = _starts(head, record)
            if (
                part.bad is None
                and not (linked and verifies(record, key, keyed_since))
                and (not linked or stored_record_problem(record, key, keyed_since) is not None)
            ):
                part.bad = record
            heads[stream] = record
        tree.extend_hashed([leaf(bytes.fromhex(r.hash)) for r in page])
        part.positions.extend([r.position for r in page])
        part.size += len(page)
        if not full:
            part.levels = nodes.rows()
            return part
        after = page[-1].position


def worker_main() -> None:
    """The upper range, in a worker process with its own read-only open of the SQLite file;
    arguments and result are pickles on stdin/stdout. Exit status 3: the path no longer names
    the file the caller has open (renamed or replaced since)."""
    from eventlog.sqlite import SQLiteEventStore

    gc.disable()  # this process only scans: see _collector_paused
    path, file_id, key, keyed_since, last_position, lo = pickle.load(sys.stdin.buffer)  # noqa: S301
    with SQLiteEventStore(path, read_only=True) as store:
        st = os.stat(path)
        if (st.st_dev, st.st_ino) != file_id:
            sys.exit(3)
        part = _scan_part(store.read_all, key, keyed_since, last_position, lo, None)
    # Only what the caller's link checks need: no message text crosses the pipe.
    for ends in (part.firsts, part.lasts):
        for stream, record in ends.items():
            ends[stream] = record._replace(payload="", meta="", sealed="")
    pickle.dump(part, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)


# Run with -P (no current directory on sys.path: a package named eventlog there must not run
# with the chain key) and this package's own directory first.
_WORKER = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from eventlog.ledger_scan import worker_main; worker_main()"
)


def _start_worker(args: tuple[object, ...]) -> subprocess.Popen[bytes] | None:
    """Start the worker for the upper range, or None where this interpreter cannot be run.

    A plain subprocess, not multiprocessing: spawning would re-import the caller's __main__
    (a script without a main guard would run again), and forking a process that holds
    database connections and threads is unsafe.
    """
    executable = sys.executable or ""
    if not os.path.basename(executable).startswith("python"):
        return None  # an embedding application (PyInstaller, uWSGI): not an interpreter
    root = str(Path(__file__).resolve().parent.parent)
    try:
        worker = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
            [executable, "-P", "-c", _WORKER, root],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError:
        return None
    assert worker.stdin is not None  # noqa: S101 - stdin=PIPE
    try:
        # The key travels over the pipe only; a few hundred bytes never fill its buffer.
        pickle.dump(args, worker.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        worker.stdin.close()
    except OSError:
        _stop(worker)
        return None
    worker.stdin = None  # closed: communicate() must not touch it
    return worker


def _stop(worker: subprocess.Popen[bytes]) -> None:
    worker.kill()
    with contextlib.suppress(Exception):
        worker.communicate(timeout=5)


def _result(worker: subprocess.Popen[bytes], timeout: float) -> _Part | None:
    """The worker's findings, or None if it failed or took longer than ``timeout`` seconds
    (the caller then checks the range itself)."""
    try:
        out, err = worker.communicate(timeout=timeout)
        part = pickle.loads(out) if worker.returncode == 0 else None  # noqa: S301
    except Exception:  # any failure there: check the range here instead
        _stop(worker)
        return None
    if part is None and worker.returncode != 3:
        _log.warning(
            "verify's worker process failed (exit %s): checking its range here instead; %s",
            worker.returncode,
            err.decode("utf-8", "replace").strip().splitlines()[-1:] or "no output",
        )
    return part if isinstance(part, _Part) else None


def _split(store: EventStore) -> tuple[tuple[str, int, int], int] | None:
    """``((path, st_dev, st_ino), boundary position)`` when the log is big enough to split.

    The lower range ends at a stored block whose leaf count is a multiple of ``2**m`` for an
    ``m`` close to the log's height, so each range's own Merkle levels up to ``m`` are the
    whole tree's, side by side (see :func:`_tree`), within 1/32 of the share aimed at. The
    blocks only choose the boundary; a wrong one costs speed, never a wrong answer.
    """
    file = store._reopen_path()
    if file is None:
        return None
    _, blocks = store._tree_blocks()
    total = len(blocks) * BLOCK
    if total < PARALLEL_MIN:
        return None
    step = _step(total)
    # This process takes a little more: the worker also starts an interpreter (~0.3 s) and
    # sends its findings back, which this process then loads.
    leaves = max(step, round(total * _OWN_SHARE / step) * step)
    boundary = blocks[leaves // BLOCK - 1].last_position
    return (file, boundary) if type(boundary) is int else None


def _step(total: int) -> int:
    """The alignment of the split: a power of two, at least a block, about total / 16."""
    return max(BLOCK, 1 << max(0, total.bit_length() - 5))


def scan(store: EventStore, last_position: int, size: int) -> tuple[Scan, merkle.MerkleTree]:
    """Read the whole log once: every record's hash and link checked, and the Merkle tree of
    the first ``size`` records.

    Args:
        store: The store to check.
        last_position: The digest's last position (records up to it are "covered").
        size: How many records, in global order, the returned tree holds (at most).
    """
    with _collector_paused():
        return _scan(store, last_position, size)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the pass.

    The pass allocates a tuple and a record per row, pages of 50,000 at a time, and the
    collector runs every few hundred allocations and now and then walks everything alive:
    about 9 % of the pass's time at a million records, freeing nothing, since rows hold no
    cycles. Reference counting still frees every page; the collector resumes afterwards
    (unless someone else had paused it) and catches up on other threads' garbage then.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _scan(store: EventStore, last_position: int, size: int) -> tuple[Scan, merkle.MerkleTree]:
    key, keyed_since = store._key, store._keyed_since
    split = _split(store)
    parts: list[_Part] = []
    worker = None
    if split is not None:
        (path, dev, ino), boundary = split
        worker = _start_worker((path, (dev, ino), key, keyed_since, last_position, boundary))
    if worker is not None and split is not None:
        started = time.monotonic()
        try:
            parts.append(_scan_part(store.read_all, key, keyed_since, last_position, 0, boundary))
        except BaseException:
            _stop(worker)
            raise
        # The worker does about as much as this process did: a generous bound on its wait.
        upper = _result(worker, timeout=max(60.0, 4 * (time.monotonic() - started)))
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
            nodes = [bytes(row[i : i + 32]) for i in range(0, len(row), 32)]
            rows.append(bytearray(b"".join(merkle.parents(nodes))))
    elif len(parts) > 1 and parts[1].size:
        rows = parts[1].levels
    leaf_count = len(rows[0]) // 32 if rows else 0
    return merkle.MerkleTree(merkle.InMemoryNodeStore.from_rows(rows), size=min(size, leaf_count))
