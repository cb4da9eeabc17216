"""A witness against rollback: the newest ledger tree a store has seen, kept outside its database.

Restoring an older copy of a database (every byte genuine, the newest records gone) passes every
chain and seal check: the older copy was a valid ledger once. Only something kept elsewhere can
tell. A :class:`FileWitness` is a small JSON file beside (but not inside) the database, holding
the RFC 9162 tree of the ledger as last seen: its size and root, the position and hash of its
last leaf, and the tree's *frontier* (the roots of its perfect subtrees, one per set bit of the
size), so the witness moves forward by reading only the records appended since, never the whole
log again.

:class:`PostgresWitness` keeps the same JSON in a row of a table in another PostgreSQL
database instead (``witness="postgresql://..."``).

A store opened with ``witness=`` checks it on open and refuses a ledger behind it or diverging
from it (:class:`~eventlog.errors.RollbackError`); a writable store moves it forward every
``every`` appends or ``seconds`` seconds, whichever comes first, and on ``close()``. A read-only
store only checks it.

The open check is cheap by default (``check="anchor"``): the record at the witnessed last
position must still be there with the witnessed hash - one indexed read, whatever the log's
length. A restored older copy has lost that record, so it is refused. ``check="tree"``
re-reads the log up to the witnessed size and compares the root: it also catches a history
rewritten *before* the last witnessed record (an edit the chain or the seals would have to
miss), and costs a pass over the log on every open. When the anchor check fails, the log is read
once to tell "behind" from "diverging" and to name both sizes.

On PostgreSQL the tree grows only below the oldest transaction still running (``read_all``'s
watermark). A move that could not take in the store's newest record keeps it as an *anchor*
(position, hash), read by position on every check: whoever holds a transaction open cannot put
an older copy back unnoticed meanwhile.

A retention purge deletes records: it excuses exactly the ones its tombstone lists (see
:mod:`eventlog.witness_purges`), and the tree then starts again from the ledger as it is.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import heapq
import json
import operator
import os
import pathlib
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final, Literal

from eventlog.errors import PersistenceError, RollbackError
from eventlog.merkle import EMPTY_ROOT
from eventlog.validation import identifier_parts
from eventlog.witness_purges import PURGED, Purges, genuine, purges_after

if TYPE_CHECKING:
    from eventlog.models import Record
    from eventlog.store import EventStore

__all__ = ["WITNESS_FORMAT", "FileWitness", "PostgresWitness", "TreeState", "Witness", "as_witness"]

WITNESS_FORMAT: Final = "chatledger.witness/1"
_PAGE = 20_000
DEFAULT_EVERY = 1_000
DEFAULT_SECONDS = 5.0
MAX_ANCHORS = 64
"""Anchors a witness keeps (one per move that left a store's newest record out); oldest go first."""
_HEX64 = re.compile(r"[0-9a-f]{64}")
_MAX_POSITION = (1 << 63) - 1


def _leaf(record_hash: str) -> bytes:
    return hashlib.sha256(b"\x00" + bytes.fromhex(record_hash)).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


@dataclasses.dataclass
class TreeState:
    """An RFC 9162 tree as its frontier: enough to extend it and to compute its root.

    Attributes:
        size: Leaves (records) in the tree.
        frontier: Roots of the perfect subtrees, largest (leftmost) first: one per set bit
            of ``size``.
        last_position: Position of the last record absorbed (0 for none).
        last_hash: That record's chain hash, hex ("" for none).
        anchors: ``(position, hash)`` of records stores appended that the tree does not hold
            yet, oldest first (PostgreSQL: committed above the oldest running transaction,
            which the tree may not pass yet); each must still be there on every check.
    """

    size: int = 0
    frontier: list[bytes] = dataclasses.field(default_factory=list)
    last_position: int = 0
    last_hash: str = ""
    anchors: list[tuple[int, str]] = dataclasses.field(default_factory=list)

    def push(self, position: int, record_hash: str) -> None:
        """Append one record as the next leaf."""
        node, size = _leaf(record_hash), self.size
        while size & 1:  # merge with every perfect subtree of the same height
            node = _node(self.frontier.pop(), node)
            size >>= 1
        self.frontier.append(node)
        self.size += 1
        self.last_position, self.last_hash = position, record_hash

    def root(self) -> str:
        """The tree's root, hex (the RFC 9162 hash of the empty string for no leaves)."""
        if not self.frontier:
            return EMPTY_ROOT
        node = self.frontier[-1]
        for left in reversed(self.frontier[:-1]):
            node = _node(left, node)
        return node.hex()

    def copy(self) -> TreeState:
        return dataclasses.replace(self, frontier=list(self.frontier), anchors=list(self.anchors))

    def to_json(self) -> str:
        b64 = base64.b64encode
        data: dict[str, Any] = {
            "format": WITNESS_FORMAT,
            "size": self.size,
            "root": b64(bytes.fromhex(self.root())).decode(),
            "last_position": self.last_position,
            "last_hash": self.last_hash,
            "frontier": [b64(h).decode() for h in self.frontier],
        }
        if self.anchors:  # only then: a file without them reads the same in older versions
            data["anchors"] = [[position, h] for position, h in self.anchors]
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str) -> TreeState:
        """Parse a witness file.

        Raises:
            ValueError: Not a well-formed witness, or its root is not its frontier's.
        """
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != WITNESS_FORMAT:
            msg = f"not a {WITNESS_FORMAT} file"
            raise ValueError(msg)
        size, position, last = data.get("size"), data.get("last_position"), data.get("last_hash")
        frontier = [base64.b64decode(h, validate=True) for h in data.get("frontier", [])]
        if (
            type(size) is not int
            or type(position) is not int
            or not isinstance(last, str)
            or size < 0
            # n records end at position n or later, and a position fits 64 bits
            or not size <= position <= _MAX_POSITION
            or len(frontier) != size.bit_count()
            or any(len(h) != 32 for h in frontier)
            or (size > 0) != bool(last)
        ):
            msg = "malformed size, last_position, last_hash or frontier"
            raise ValueError(msg)
        anchors = data.get("anchors", [])
        if (
            not isinstance(anchors, list)
            or len(anchors) > MAX_ANCHORS
            or not all(
                isinstance(a, list)
                and len(a) == 2
                and type(a[0]) is int
                and position < a[0] <= _MAX_POSITION
                and isinstance(a[1], str)
                and _HEX64.fullmatch(a[1])
                for a in anchors
            )
        ):
            msg = f"malformed anchors (at most {MAX_ANCHORS} [position, hash] after last_position)"
            raise ValueError(msg)
        state = cls(size, frontier, position, last, [(a[0], a[1]) for a in anchors])
        if base64.b64decode(str(data.get("root")), validate=True).hex() != state.root():
            msg = "its root is not the root of its frontier (edited by hand?)"
            raise ValueError(msg)
        return state


def _records(store: EventStore, after: int) -> Iterator[tuple[int, str, bool]]:
    """``(position, hash, purge)`` of every record after position ``after``, in global order;
    ``purge``: a purge's tombstone that is :func:`~eventlog.witness_purges.genuine`."""
    while True:
        page = store.read_all(gt=after, limit=_PAGE)
        for record in page:
            purge = record.kind == PURGED and genuine(store, record)
            yield record.position, record.hash, purge
        if len(page) < _PAGE:
            return
        after = page[-1].position


def _ledger_size(store: EventStore) -> int:  # for a refusal's message
    return sum(1 for _ in _records(store, 0))


def _root_then(store: EventStore, witnessed: TreeState, erased: dict[int, str]) -> str | None:
    """The root of the ledger's first ``witnessed.size`` leaves once the records purges erased
    (``erased``: ``{position: hash}``) are put back where they were (None: fewer leaves).
    Reads the log only that far."""
    leaves = ((position, record_hash) for position, record_hash, _ in _records(store, 0))
    # Both in position order; on a tie (a listed record still there) the ledger's comes first
    # and the listed one is dropped.
    merged = heapq.merge(leaves, sorted(erased.items()), key=operator.itemgetter(0))
    tree, last = TreeState(), 0
    for position, record_hash in merged:
        if tree.size == witnessed.size:
            break
        if position != last:
            tree.push(position, record_hash)
            last = position
    return tree.root() if tree.size == witnessed.size else None


class Witness(ABC):
    """Where the newest ledger tree seen is kept, outside the database (see the module
    docstring): :class:`FileWitness` or :class:`PostgresWitness`.

    Args:
        check: ``"anchor"`` (default: one indexed read per open) or ``"tree"`` (re-read the
            log to the witnessed size and compare roots on every open).
        every: Move the witness forward after this many appends (and on ``close()``).
        seconds: ... or when an append comes this long after the last move.
    """

    where: str
    """The witness, named for messages."""

    def __init__(
        self,
        *,
        check: Literal["anchor", "tree"] = "anchor",
        every: int = DEFAULT_EVERY,
        seconds: float = DEFAULT_SECONDS,
    ) -> None:
        name = type(self).__name__
        if check not in ("anchor", "tree"):
            msg = f"{name}: check must be 'anchor' or 'tree', not {check!r}"
            raise ValueError(msg)
        if every < 1 or seconds < 0:
            msg = f"{name}: every={every!r} must be >= 1 and seconds={seconds!r} >= 0"
            raise ValueError(msg)
        self.check_mode = check
        self.every = every
        self.seconds = seconds
        self._lock = threading.Lock()
        self._pending = 0
        self._last_move = time.monotonic()
        self._newest: tuple[int, str] | None = None  # the newest record appended through us
        self.writes = 0  # how often the witness was written (for tests and benchmarks)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.where!r})"

    # ------------------------------------------------------------ storage

    @abstractmethod
    def _exclusive(self) -> contextlib.AbstractContextManager[None]:
        """Serialize read-modify-write of the witness across processes."""

    @abstractmethod
    def _load(self) -> str | None:
        """The stored witness text, or None when there is none.

        Raises:
            PersistenceError: It cannot be read.
        """

    @abstractmethod
    def _store(self, text: str) -> None:
        """Replace the stored witness text atomically and durably.

        Raises:
            PersistenceError: It cannot be written.
        """

    _aside = "move it aside"
    """How to start a new witness (in messages)."""

    def read(self) -> TreeState | None:
        """The witnessed tree, or None when there is none yet.

        Raises:
            PersistenceError: It cannot be read or is not a witness.
        """
        text = self._load()
        if text is None:
            return None
        try:
            return TreeState.from_json(text)
        except (ValueError, TypeError, RecursionError) as e:
            operation = "read witness"
            detail = (
                f"{self.where} is not a chatledger witness ({e}); restore it from where it was "
                f"copied, or {self._aside} to start a new witness (which forgets what it saw)"
            )
            raise PersistenceError(operation, detail) from None

    def _write(self, state: TreeState) -> None:
        self._store(state.to_json())
        self.writes += 1

    # ------------------------------------------------------------ what the store calls

    def check(self, store: EventStore, where: str, *, write: bool) -> None:
        """On open: refuse a ledger behind or diverging from the witness; create the file
        (when ``write``) if there is none.

        Raises:
            RollbackError: The ledger is behind the witness or diverges from it.
            PersistenceError: The witness file cannot be read or written.
        """
        with self._lock:
            state = self.read()
            if state is None:
                if write:
                    with self._exclusive():
                        if self.read() is None:
                            self._write(self._extended(store, TreeState()))
                return
            if self.check_mode == "tree" or not self._anchored(store, state):
                self._compare(store, state, "open", where)
            self._check_anchors(store, state, state.anchors, "open", where)
            self._last_move = time.monotonic()

    def appended(self, store: EventStore, where: str, newest: Record | None = None) -> None:
        """After each append (``newest``: its last record): move the witness forward every
        ``every`` appends or ``seconds`` seconds."""
        if newest is not None and (self._newest is None or newest.position > self._newest[0]):
            self._newest = (newest.position, newest.hash)
        self._pending += 1
        if self._pending >= self.every or time.monotonic() - self._last_move >= self.seconds:
            self.move(store, "append", where)

    def move(self, store: EventStore, operation: str, where: str) -> None:
        """Extend the witness to the ledger now (reads only the records appended since).

        Raises:
            RollbackError: The ledger no longer holds the witnessed last record.
        """
        with self._lock, self._exclusive():
            self._pending = 0
            self._last_move = time.monotonic()
            state = self.read() or TreeState()
            if not self._anchored(store, state):
                self._compare(store, state, operation, where)
            # Our own newest record too, unless the tree holds it: gone, it was rolled back.
            mine = [self._newest] if self._newest is not None else []
            anchors = sorted({a for a in [*state.anchors, *mine] if a[0] > state.last_position})
            self._check_anchors(store, state, anchors, operation, where)
            moved = self._extended(store, state)
            # What the tree could not take in yet (PostgreSQL): kept, and checked, as anchors.
            moved.anchors = [a for a in anchors if a[0] > moved.last_position][-MAX_ANCHORS:]
            if moved.to_json() != state.to_json():  # unchanged: no write
                self._write(moved)

    # ------------------------------------------------------------ checks

    @staticmethod
    def _anchored(store: EventStore, state: TreeState) -> bool:
        """Whether the witnessed last record is still where it was, with its hash."""
        if state.size == 0:
            return True
        found = store.read_all(gt=state.last_position - 1, limit=1)
        return bool(found) and (found[0].position, found[0].hash) == (
            state.last_position,
            state.last_hash,
        )

    def _check_anchors(
        self,
        store: EventStore,
        state: TreeState,
        anchors: list[tuple[int, str]],
        operation: str,
        where: str,
    ) -> None:
        """Refuse a ledger that lost one of ``anchors`` (records after ``state``'s tree),
        unless a genuine retention purge after the tree erased that very record."""
        purges: Purges | None = None
        for position, record_hash in anchors:
            if store._hash_at(position) == record_hash:
                continue
            purges = purges or purges_after(store, state.last_position)
            if purges.leaves.get(position) == record_hash:
                continue
            raise RollbackError(
                operation,
                where,
                self.where,
                witnessed_size=state.size + len(anchors),
                ledger_size=_ledger_size(store),
                behind=True,
                unlisted_purges=purges.unlisted,
            )

    def _extended(self, store: EventStore, state: TreeState) -> TreeState:
        """``state`` extended by every record after its last position. A purge tombstone
        means records were erased, leaf indexes shift: the tree is rebuilt from the start."""
        moved = state.copy()
        for position, record_hash, purge in _records(store, state.last_position):
            if purge and state.size:
                return self._extended(store, TreeState())
            moved.push(position, record_hash)
        return moved

    def _compare(self, store: EventStore, state: TreeState, operation: str, where: str) -> None:
        """Refuse the ledger unless its first ``state.size`` leaves, with what genuine purges
        after them erased put back, have the witnessed root (see :func:`_root_then`)."""
        purges = purges_after(store, state.last_position)
        if _root_then(store, state, purges.leaves) == state.root():
            return
        size = _ledger_size(store)
        raise RollbackError(
            operation,
            where,
            self.where,
            witnessed_size=state.size,
            ledger_size=size,
            behind=size < state.size,
            unlisted_purges=purges.unlisted,
        )


class FileWitness(Witness):
    """The newest ledger tree seen, in a JSON file (see :class:`Witness` for the other
    arguments).

    Args:
        path: The witness file; created (with the ledger's tree) on the first writable open.
            Keep it on another disk or machine than the database, out of reach of whoever
            could restore the database.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        check: Literal["anchor", "tree"] = "anchor",
        every: int = DEFAULT_EVERY,
        seconds: float = DEFAULT_SECONDS,
    ) -> None:
        super().__init__(check=check, every=every, seconds=seconds)
        self.path = pathlib.Path(path)
        self.where = str(self.path)

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        # A sidecar lock file: the witness itself is replaced atomically, so it cannot hold it.
        # fcntl imported here, as in eventlog.keyring: the module imports where it does not exist.
        import fcntl

        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            operation, detail = "write witness", f"cannot write {lock_path}: {e}"
            raise PersistenceError(operation, detail) from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _load(self) -> str | None:
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as e:
            operation, detail = "read witness", f"cannot read {self.path}: {e}"
            raise PersistenceError(operation, detail) from e

    def _store(self, text: str) -> None:
        # Temporary file, fsync, rename, fsync of the directory: never half a witness.
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            with tmp.open("w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(self.path)
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as e:
            operation, detail = "write witness", f"cannot write {self.path}: {e}"
            raise PersistenceError(operation, detail) from e


class PostgresWitness(Witness):
    """The newest ledger tree seen, in a row of a table of another PostgreSQL database (see
    :class:`Witness` for the other arguments). It connects for each check and move, so it
    holds no connection between them.

    Args:
        dsn: Connection string or URL of the witness database - not the ledger's own: whoever
            could restore the ledger's database must not be able to restore this one.
        name: The row: one per ledger kept in the same table.
        table: The table, created on the first write (``schema.table`` or ``table``).
    """

    _aside = "delete its row"

    def __init__(
        self,
        dsn: str,
        *,
        name: str = "default",
        table: str = "chatledger_witness",
        check: Literal["anchor", "tree"] = "anchor",
        every: int = DEFAULT_EVERY,
        seconds: float = DEFAULT_SECONDS,
    ) -> None:
        super().__init__(check=check, every=every, seconds=seconds)
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(dsn)
        host = params.get("host") or params.get("hostaddr") or "localhost"
        dbname = params.get("dbname") or params.get("user") or ""
        self._dsn, self.name = dsn, name
        self._table = identifier_parts("PostgresWitness", table)
        # Never the DSN in messages: it may carry a password.
        self.where = f"witness {name!r} in {table} at {host}:{params.get('port') or 5432}/{dbname}"

    @contextlib.contextmanager
    def _connect(self, operation: str) -> Iterator[Any]:
        import psycopg

        try:
            with psycopg.connect(self._dsn, autocommit=True, connect_timeout=10) as conn:
                yield conn
        except psycopg.Error as e:
            detail = f"{self.where}: {' '.join(str(e).split())}"
            raise PersistenceError(operation, detail) from e

    def _sql(self, template: str) -> Any:
        from psycopg import sql

        return sql.SQL(template).format(table=sql.Identifier(*self._table))

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        # A session advisory lock keyed by the row, held for the read-modify-write.
        key = int.from_bytes(hashlib.sha256(self.where.encode()).digest()[:8], "big", signed=True)
        with self._connect("write witness") as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def _load(self) -> str | None:
        with self._connect("read witness") as conn:
            # The name quoted as the other statements quote it: unquoted, to_regclass folds
            # "Witness" to witness and never finds the table, so every open would start anew.
            exists = conn.execute(
                "SELECT to_regclass(%s) IS NOT NULL", (self._sql("{table}").as_string(conn),)
            ).fetchone()
            if not exists or not exists[0]:
                return None
            row = conn.execute(
                self._sql("SELECT state FROM {table} WHERE name = %s"), (self.name,)
            ).fetchone()
        return None if row is None else str(row[0])

    def _store(self, text: str) -> None:
        with self._connect("write witness") as conn:
            conn.execute(
                self._sql("CREATE TABLE IF NOT EXISTS {table} (name text PRIMARY KEY, state text)")
            )
            conn.execute(
                self._sql(
                    "INSERT INTO {table} (name, state) VALUES (%s, %s) "
                    "ON CONFLICT (name) DO UPDATE SET state = EXCLUDED.state"
                ),
                (self.name, text),
            )


def as_witness(witness: str | os.PathLike[str] | Witness) -> Witness:
    """A ``witness=`` argument as a :class:`Witness`: a ``postgresql://`` or ``postgres://``
    URL is a :class:`PostgresWitness`, any other text or path a :class:`FileWitness`."""
    if isinstance(witness, Witness):
        return witness
    text = os.fspath(witness)
    if isinstance(text, str) and text.startswith(("postgresql://", "postgres://")):
        return PostgresWitness(text)
    return FileWitness(witness)
