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

import bisect
import contextlib
import dataclasses
import gc
import logging
import os
import pickle  # only between this process and the worker it started
import sqlite3
import subprocess
import sys
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final

from eventlog import merkle
from eventlog.hashing import GENESIS, stored_record_problem, verifies
from eventlog.ledger_tree import BLOCK

if TYPE_CHECKING:
    from eventlog.models import Record
    from eventlog.store import EventStore

__all__ = ["Scan", "scan"]

_PAGE: Final = 50_000
_PURGED: Final = "memory_purged"
# Below this many records a worker's start (a new interpreter, 0.07 s) and its findings' way
# back cost more than it saves.
PARALLEL_MIN = 200_000
_OWN_SHARE = 0.5  # of the records, checked in this process (measured: both end together)

# A stored record as a plain tuple in Record's field order (a Record is one too): the pass reads
# rows without building a Record per row, and makes one only for what it reports.
_Row = tuple[Any, ...]
_ReadRows = Callable[[int, int], "Sequence[_Row]"]
_log = logging.getLogger("chatledger.verify")
# Record's fields, by index (see eventlog.models.Record).
_POSITION, _STREAM, _SEQ, _KIND, _PREV, _HASH = 0, 1, 2, 4, 8, 9


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
    """One range's findings, as rows; links into the range are the caller's to check."""

    size: int = 0
    covered: int = 0
    bad: _Row | None = None
    purges: list[_Row] = dataclasses.field(default_factory=list)
    positions: array[int] = dataclasses.field(default_factory=lambda: array("q"))
    # The Merkle tree of this range's records alone, level by level (see _combine).
    levels: list[bytearray] = dataclasses.field(default_factory=list)
    firsts: dict[str, _Row] = dataclasses.field(default_factory=dict)
    lasts: dict[str, _Row] = dataclasses.field(default_factory=dict)


def _starts(head: _Row | None, row: _Row) -> bool:
    """The link rule of :func:`eventlog.hashing.check_stream`: a stream starts at seq 1 on
    GENESIS or at a purge tombstone, and every later record chains to the one before."""
    if head is None:
        return bool((row[_SEQ] == 1 and row[_PREV] == GENESIS) or row[_KIND] == _PURGED)
    return bool(row[_SEQ] == head[_SEQ] + 1 and row[_PREV] == head[_HASH])


def _problem(row: _Row, key: bytes | None, keyed_since: int) -> str | None:
    """:func:`stored_record_problem` of a row: the slow path, for a row :func:`verifies` did
    not pass (the import is here so that a worker loads the event models only then)."""
    from eventlog.models import Record  # here: see above

    return stored_record_problem(Record._make(row), key, keyed_since)


def _scan_part(  # noqa: PLR0917 - private; mirrors the worker's picklable arguments
    read_rows: _ReadRows,
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
    leaf, check, head_of = merkle.hash_leaf, verifies, heads.get
    # The loop below runs a million times per check: what it can leave to a pass over the
    # page in C (positions, purges, the count of covered records) it does, and the
    # common link (a stream's next record) is tested inline - each saved a tenth of a
    # microsecond per record, about a tenth of the loop's own cost.
    while True:
        page = read_rows(after, _PAGE)
        full = len(page) == _PAGE
        if hi is not None and page and page[-1][_POSITION] > hi:
            page = [r for r in page if r[_POSITION] <= hi]
            full = False
        for row in page:
            stream = row[1]  # _STREAM
            head = head_of(stream)
            if head is None:
                firsts[stream] = row
                # A stream's first record in a later range links across the boundary.
                linked = lo != 0 or _starts(None, row)
            else:  # _starts(head, row), inline: _SEQ, _PREV, _HASH
                linked = row[2] == head[2] + 1 and row[8] == head[9]
            if (
                not (linked and check(row, key, keyed_since))
                and part.bad is None
                and (not linked or _problem(row, key, keyed_since) is not None)
            ):
                part.bad = row
            heads[stream] = row
        try:
            leaves = [leaf(bytes.fromhex(r[_HASH])) for r in page]
        except (ValueError, TypeError):  # a hash edited by hand: off the hot path
            leaves = [leaf(_hash_bytes(r[_HASH])) for r in page]
        tree.extend_hashed(leaves)
        positions = [r[_POSITION] for r in page]
        covered = bisect.bisect_right(positions, last_position)  # positions ascend
        part.covered += covered
        part.purges.extend([r for r in page[covered:] if r[_KIND] == _PURGED])
        part.positions.extend(positions)
        part.size += len(page)
        if not full:
            part.levels = nodes.rows()
            return part
        after = page[-1][_POSITION]


def _hash_bytes(value: object) -> bytes:
    """A stored hash as the bytes its leaf is made of. One edited by hand into text that is not
    hex (or a BLOB, in SQLite) still enters this scan's tree, as bytes no valid hash has, so
    the roots differ and the report names it: bad data is reported, never raised. (That row
    fails its own check too, so the scan marks it bad.)"""
    if type(value) is str:
        try:
            return bytes.fromhex(value)
        except ValueError:
            pass
    return repr(value).encode()


def worker_main() -> None:
    """The upper range, in a worker process with its own read-only connection to the SQLite
    file; arguments and result are pickles on stdin/stdout. Exit status 3: the path no longer
    names the file the caller has open (renamed or replaced since).

    Plain :mod:`sqlite3` running the caller's own query, not a store object: the worker's
    start counts in the check's time, and a store would import sqlite-utils, pydantic and the
    event models (0.45 s where this needs 0.1 s). The caller opened and checked the file; the
    identity check below makes sure this is that file.
    """
    gc.disable()  # this process only scans: see _collector_paused
    args = pickle.load(sys.stdin.buffer)  # noqa: S301 - from the process that started us
    path, file_id, sql, key, keyed_since, last_position, lo = args
    # mode=ro: SQLite's own read-only mode, which never writes the file (not even a checkpoint).
    conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA busy_timeout = 5000")  # a writer's checkpoint: wait, briefly
        st = os.stat(path)
        if (st.st_dev, st.st_ino) != file_id:
            sys.exit(3)
        part = _scan_part(
            lambda gt, limit: conn.execute(sql, (gt, limit)).fetchall(),
            key,
            keyed_since,
            last_position,
            lo,
            None,
        )
    finally:
        conn.close()
    # Only what the caller's link checks need: no message text crosses the pipe.
    for ends in (part.firsts, part.lasts):
        for stream, row in ends.items():
            ends[stream] = (*row[:6], "", "", *row[8:13], "")
    pickle.dump(part, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)


# Run with -P (no current directory on sys.path: a package named eventlog there must not run
# with the chain key) and this package's own parent directory first.
_WORKER = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from eventlog.ledger_scan import worker_main; worker_main()"
)


@dataclasses.dataclass
class _Worker:
    """A started worker and where its output goes."""

    process: subprocess.Popen[bytes]
    # Anonymous in-memory files (memfd) for its stdout and stderr where the system has them:
    # the worker writes its findings (tens of MB at a million records) while this process is
    # still busy with its own range, and into a pipe nobody reads yet it would stall - the
    # stall measured 0.4-0.7 s per check. None: pipes, read by communicate() at the end.
    out: BinaryIO | None = None
    err: BinaryIO | None = None


def _memfile(name: str) -> BinaryIO | None:
    """An anonymous file in memory (never on disk: the findings name memories), or None."""
    create = getattr(os, "memfd_create", None)  # Linux; elsewhere the pipes serve
    if create is None:
        return None
    try:
        return open(create(name), "w+b")  # closed by _finish
    except OSError:
        return None


def _start_worker(args: tuple[object, ...]) -> _Worker | None:
    """Start the worker for the upper range, or None where this interpreter cannot be run.

    A plain subprocess, not multiprocessing: spawning would re-import the caller's __main__
    (a script without a main guard would run again), and forking a process that holds
    database connections and threads is unsafe.
    """
    executable = sys.executable or ""
    if not os.path.basename(executable).startswith("python"):
        return None  # an embedding application (PyInstaller, uWSGI): not an interpreter
    root = str(Path(__file__).resolve().parent.parent)
    out, err = _memfile("chatledger-verify-out"), _memfile("chatledger-verify-err")
    try:
        process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
            [executable, "-P", "-c", _WORKER, root],
            stdin=subprocess.PIPE,
            stdout=out or subprocess.PIPE,
            stderr=err or subprocess.PIPE,
        )
    except OSError:
        _close(out, err)
        return None
    worker = _Worker(process, out, err)
    assert process.stdin is not None  # noqa: S101 - stdin=PIPE
    try:
        # The key travels over the pipe only; a few hundred bytes never fill its buffer.
        pickle.dump(args, process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        process.stdin.close()
    except OSError:
        _stop(worker)
        return None
    process.stdin = None  # closed: communicate() must not touch it
    return worker


def _close(*files: BinaryIO | None) -> None:
    for file in files:
        if file is not None:
            file.close()


def _finish(worker: _Worker, *, kill: bool) -> None:
    if kill:
        worker.process.kill()
        with contextlib.suppress(Exception):
            worker.process.communicate(timeout=5)
    _close(worker.out, worker.err)


def _stop(worker: _Worker) -> None:
    _finish(worker, kill=True)


def _output(worker: _Worker, timeout: float) -> tuple[bytes, bytes]:
    """The worker's stdout and stderr once it exited (``TimeoutExpired`` after ``timeout``)."""
    process = worker.process
    if worker.out is None or worker.err is None:
        out, err = process.communicate(timeout=timeout)
        return out or b"", err or b""
    process.communicate(timeout=timeout)  # waits; reads whichever streams are pipes (none)
    texts = []
    for file in (worker.out, worker.err):
        file.seek(0)
        texts.append(file.read())
    return texts[0], texts[1]


def _result(worker: _Worker, timeout: float) -> _Part | None:
    """The worker's findings, or None if it failed or took longer than ``timeout`` seconds
    (the caller then checks the range itself)."""
    process = worker.process
    try:
        out, err = _output(worker, timeout)
        part = pickle.loads(out) if process.returncode == 0 else None  # noqa: S301
    except Exception:  # any failure there: check the range here instead
        _stop(worker)
        return None
    _finish(worker, kill=False)
    if part is None and process.returncode != 3:
        _log.warning(
            "verify's worker process failed (exit %s): checking its range here instead; %s",
            process.returncode,
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
    # Half each: the worker's start (an interpreter, 0.07 s) and its findings' way back (read
    # here after this process's range) are about what this process's store reads cost more.
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

    The pass allocates a tuple per row, pages of 50,000 at a time, and the
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
        from eventlog.recorders.sqlite_sql import SCAN_ROWS  # here: only a SQLite file is split

        (path, dev, ino), boundary = split
        worker = _start_worker(
            (path, (dev, ino), SCAN_ROWS, key, keyed_since, last_position, boundary)
        )
    rows = store._scan_rows
    if worker is not None and split is not None:
        started = time.monotonic()
        try:
            parts.append(_scan_part(rows, key, keyed_since, last_position, 0, boundary))
        except BaseException:
            _stop(worker)
            raise
        # The worker does about as much as this process did: a generous bound on its wait.
        upper = _result(worker, timeout=max(60.0, 4 * (time.monotonic() - started)))
        if upper is None:
            upper = _scan_part(rows, key, keyed_since, last_position, boundary, None)
        parts.append(upper)
    else:
        parts.append(_scan_part(rows, key, keyed_since, last_position, 0, None))
    return _combine(parts), _tree(parts, size)


def _combine(parts: list[_Part]) -> Scan:
    from eventlog.models import Record  # here: not in the worker (see _problem)

    out = Scan()
    bad: list[_Row] = []
    lasts: dict[str, _Row] = {}
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
        out.purges.extend(map(Record._make, part.purges))
        out.positions.extend(part.positions)
    if bad:
        first_bad: _Row = min(bad, key=lambda r: r[_POSITION])
        out.bad = Record._make(first_bad)
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
