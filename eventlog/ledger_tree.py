"""The ledger's Merkle tree per store object, kept in the database a block at a time.

Rebuilding the tree of a million records reads every record (seconds), so the first
``digest()`` of each new process used to pay that. The tree is now kept beside the records
as *blocks*: block ``b`` is the complete subtree of leaves ``[b * 256, (b + 1) * 256)``
(level 8), stored with the positions of its first and last record. A new process reads the
block rows (about 4,000 at a million records), folds them into the levels above, and reads
only the records after the last block. The levels below 8 of an old block are recomputed
from its 256 records when a root or proof needs them.

The blocks are derived data, so nothing trusts them blindly (house style, rule 16):

* whenever a block's lower levels are recomputed from its records (every proof of a record
  in it, and the newest block at every load) the result must equal the stored block, or
  :class:`StaleTreeError` is raised: the records changed after the tree absorbed them;
* a load that finds the rows out of order, or the newest block's records no longer
  matching it, throws the rows away and rebuilds from the records;
* ``verify(digest=)`` never reads them: it re-hashes every record.

What that leaves: a block older than the newest one whose records were rewritten (with
their hashes recomputed, so every chain still links) is only noticed when a proof touches it
or by ``verify(digest=)``; a digest taken meanwhile still names the old root, which is what
every earlier digest and checkpoint also says. A purge deletes records, so every backend
drops the blocks in the purge's own transaction, and the next digest rebuilds them.

Only a writable store saves blocks; a read-only one uses what is saved and keeps the rest
in memory.
"""

from __future__ import annotations

import bisect
import hmac
import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, NamedTuple

from eventlog import merkle
from eventlog.errors import (
    ChainIntegrityError,
    EventLogError,
    PersistenceError,
    ReadOnlyError,
    StaleTreeError,
)
from eventlog.validation import shown
from eventlog.vouch import REMEDY

if TYPE_CHECKING:
    from eventlog.models import Record
    from eventlog.store import EventStore

__all__ = [
    "BLOCK",
    "BLOCK_LEVEL",
    "LedgerTree",
    "StaleTreeError",
    "TreeBlock",
    "block_mac",
    "blocks_of",
]

BLOCK_LEVEL: Final = 8
BLOCK: Final = 1 << BLOCK_LEVEL  # leaves per stored block
_HASH = 32
_PAGE = 50_000
_MAX_REBUILDS = 5
_CACHED_BLOCKS = 64  # old blocks whose lower levels stay in memory (about 16 KB each)
_PURGED = "memory_purged"


def _leaf(record: Record) -> bytes:
    """The Merkle leaf of ``record``: its hash, which must be the 64 hex digits every store
    writes. A hash edited by hand into something else (text that is not hex, a BLOB in SQLite)
    cannot enter the tree: refused naming the record, never fromhex()'s ValueError or
    TypeError.

    Raises:
        ChainIntegrityError: The record's stored hash is not 64 lowercase hex digits.
    """
    value = record.hash
    if type(value) is str and len(value) == 2 * _HASH:
        try:
            data = bytes.fromhex(value)
        except ValueError:
            pass
        else:
            if data.hex() == value:
                return merkle.hash_leaf(data)
    reason = (
        f"malformed hash {shown(value)}: not 64 lowercase hex digits, so the record cannot "
        f"enter the ledger's tree (digests, proofs, checkpoints); {REMEDY}"
    )
    raise ChainIntegrityError(record.stream_id, record.seq, reason)


class TreeBlock(NamedTuple):
    """One stored block: the level-8 node over leaves ``[block * 256, (block + 1) * 256)``,
    with its MAC under the chain key in a keyed ledger (empty otherwise)."""

    block: int
    first_position: int
    last_position: int
    node: bytes
    mac: bytes = b""


def block_mac(key: bytes, block: int, first: int, last: int, node: bytes) -> bytes:
    """The MAC of a stored block in a keyed ledger: without the key nobody can store a block
    (a forged root for the owner to sign) that a keyed store would load."""
    text = f"chatledger.tree-block.v1\x1f{block}\x1f{first}\x1f{last}\x1f{node.hex()}"
    return hmac.digest(key, text.encode(), "sha256")


def _well_formed(blocks: Sequence[TreeBlock], key: bytes | None) -> bool:
    """Consecutive blocks of increasing positions, each with its MAC when ``key`` is given."""
    for i, b in enumerate(blocks):
        if not (
            type(b.block) is int
            and type(b.first_position) is int
            and type(b.last_position) is int
            and isinstance(b.node, bytes)
            and isinstance(b.mac, bytes)
            and b.block == i
            and len(b.node) == _HASH
            and 0 < b.first_position <= b.last_position
            and (i == 0 or blocks[i - 1].last_position < b.first_position)
        ):
            return False
        if key is not None and not hmac.compare_digest(
            b.mac, block_mac(key, b.block, b.first_position, b.last_position, b.node)
        ):
            return False
    return True


class _Nodes:
    """A :class:`merkle.NodeStore` over stored blocks plus the nodes this process computed.

    Level ``l`` holds, contiguously, the nodes from index ``base[l]`` on. Levels 8 and up
    start at 0 (folded from the stored blocks at load); the levels below start at the first
    leaf this process absorbed, and older nodes there come from :meth:`_old_block`.
    """

    def __init__(self, tree: LedgerTree, start_leaf: int) -> None:
        self._tree = tree
        self._levels: list[bytearray] = []
        self._bases: list[int] = []
        self._start_leaf = start_leaf

    def _base(self, level: int) -> int:
        return self._start_leaf >> level if level < BLOCK_LEVEL else 0

    def get(self, level: int, index: int) -> bytes | None:
        if level < 0 or index < 0:
            return None
        base = self._base(level)
        if index < base:
            old = self._tree.old_block(index >> (BLOCK_LEVEL - level))
            return old.node(level, index)
        if level >= len(self._levels):
            return None
        start = (index - base) * _HASH
        node = self._levels[level][start : start + _HASH]
        return bytes(node) if len(node) == _HASH else None

    def put(self, level: int, index: int, node: bytes) -> None:
        self.put_many(level, index, (node,))

    def put_many(self, level: int, start: int, nodes: Sequence[bytes]) -> None:
        while len(self._levels) <= level:
            self._levels.append(bytearray())
        base = self._base(level)
        row = self._levels[level]
        at = (start - base) * _HASH
        if at < 0 or at > len(row):
            msg = f"write ledger tree nodes at level {level} from index {start}: out of order"
            raise ValueError(msg)
        data = b"".join(nodes)
        row[at : at + len(data)] = data


class _OldBlock:
    """The leaves' positions and lower levels of one stored block, recomputed from records."""

    def __init__(self, block: int, positions: list[int], leaves: list[bytes]) -> None:
        self.block = block
        self.positions = positions
        self.levels = [leaves]
        level = leaves
        while len(level) > 1:
            level = [merkle.hash_children(level[i], level[i + 1]) for i in range(0, len(level), 2)]
            self.levels.append(level)

    def node(self, level: int, index: int) -> bytes:
        return self.levels[level][index - (self.block << (BLOCK_LEVEL - level))]


class LedgerTree:
    """One store object's tree: stored blocks plus the records read since.

    Derived data, trusted only for speed: :func:`eventlog.ledger.verify_digest` never reads
    it, and proofs recompute the block of the record they prove. Not thread-safe on its own:
    callers hold :attr:`lock`.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._store: EventStore | None = None
        self._loaded = False
        self._replace = False  # the stored blocks are wrong: the next save replaces them all
        self._generation = 0  # the purge generation the tree's records were read under
        self._start(())

    def _start(self, blocks: Sequence[TreeBlock]) -> None:
        self._blocks_first = array("q", (b.first_position for b in blocks))
        self._blocks_last = array("q", (b.last_position for b in blocks))
        self._start_leaf = len(blocks) * BLOCK
        self._saved_blocks = len(blocks)
        self._old: OrderedDict[int, _OldBlock] = OrderedDict()
        self.nodes = _Nodes(self, self._start_leaf)
        self._fold_upper([b.node for b in blocks])
        self.tree = merkle.MerkleTree(self.nodes, size=self._start_leaf)
        # Positions of the leaves absorbed by this process (from _start_leaf on).
        self._positions = array("q")
        # Streams with a record absorbed by this process: a purge tombstone of one of them
        # means records the tree holds were erased (a purge erases a stream's earlier records).
        self._streams: set[str] = set()
        self.last_position = blocks[-1].last_position if blocks else 0

    def _fold_upper(self, row: list[bytes]) -> None:
        """Write the stored blocks and every level above them, as MerkleTree.extend would."""
        level = BLOCK_LEVEL
        self.nodes.put_many(level, 0, row)
        while len(row) > 1:
            row = merkle.parents(row)
            level += 1
            self.nodes.put_many(level, 0, row)

    # ---------------------------------------------------------------- reading the tree

    @property
    def size(self) -> int:
        return self.tree.size

    def leaf(self, index: int) -> bytes | None:
        """The leaf node (``SHA-256(0x00 || record hash)``) at ``index``."""
        return self.nodes.get(0, index) if 0 <= index < self.tree.size else None

    def position_of(self, index: int) -> int:
        """The position of the record at leaf ``index`` (``0 <= index < size``)."""
        if index >= self._start_leaf:
            return self._positions[index - self._start_leaf]
        return self.old_block(index >> BLOCK_LEVEL).positions[index % BLOCK]

    def index_of(self, position: int) -> int | None:
        """The leaf index of the record at ``position``, or None if the tree has none there."""
        if self._positions and position >= self._positions[0]:
            i = bisect.bisect_left(self._positions, position)
            found = i < len(self._positions) and self._positions[i] == position
            return self._start_leaf + i if found else None
        block = bisect.bisect_right(self._blocks_first, position) - 1
        if block < 0 or block >= self._start_leaf // BLOCK:
            return None
        if position > self._blocks_last[block]:
            return None
        positions = self.old_block(block).positions
        i = bisect.bisect_left(positions, position)
        found = i < len(positions) and positions[i] == position
        return block * BLOCK + i if found else None

    def old_block(self, block: int) -> _OldBlock:
        """A stored block's lower levels, recomputed from its records and checked against it.

        Raises:
            StaleTreeError: The records do not hash to the stored block.
        """
        cached = self._old.get(block)
        if cached is not None:
            self._old.move_to_end(block)
            return cached
        if self._store is None or not 0 <= block < self._start_leaf // BLOCK:
            raise StaleTreeError(block, "no such stored block")
        first, last = self._blocks_first[block], self._blocks_last[block]
        records = self._store.read_all(gt=first - 1, limit=BLOCK)
        if len(records) < BLOCK or records[0].position != first:
            raise StaleTreeError(block, "records of the block are missing")
        if records[-1].position != last:
            raise StaleTreeError(block, "records were deleted from the block or inserted into it")
        leaves = [_leaf(r) for r in records]
        old = _OldBlock(block, [r.position for r in records], leaves)
        if old.levels[BLOCK_LEVEL][0] != self.nodes.get(BLOCK_LEVEL, block):
            raise StaleTreeError(block, "a record's hash differs from the one the block covers")
        self._old[block] = old
        if len(self._old) > _CACHED_BLOCKS:
            self._old.popitem(last=False)
        return old

    # ---------------------------------------------------------------- growing the tree

    def absorb(self, store: EventStore, *, save: bool = True) -> None:
        """Bring the tree up to every record committed now; save complete blocks (not with
        ``save=False``: a reader that promises to write nothing; a later absorb saves them).

        The first call loads the stored blocks; a purge of records the tree holds (seen as a
        tombstone of a stream it holds, or as a new purge generation) makes it rebuild.

        Raises:
            EventLogError: Purges kept erasing records while the tree was rebuilt.
        """
        self._store = store
        if not self._loaded:
            self._load(store)
        for _ in range(_MAX_REBUILDS):
            if self._absorb_pages(store) and (
                self._save(store) if save else store._tree_generation() == self._generation
            ):
                return
            self.rebuild(store)
        msg = (
            f"build the ledger tree: purges kept erasing records while it was read "
            f"({_MAX_REBUILDS} attempts); retry when the retention run is over"
        )
        raise EventLogError(msg)

    def rebuild(self, store: EventStore) -> None:
        """Forget everything, stored blocks included; the next :meth:`absorb` reads the log."""
        self._store = store
        self._loaded = True
        # Read before any record: a purge from here on changes it, and the save is refused.
        self._generation = store._tree_generation()
        self._start(())
        self._replace = True

    def _load(self, store: EventStore) -> None:
        self._loaded = True
        self._replace = False
        self._generation, blocks = store._tree_blocks()
        if not blocks:
            return
        # A keyed ledger read without its key cannot check the blocks' MACs: use none.
        trusted = not (store._keyed_db and store._key is None)
        if trusted and _well_formed(blocks, store._key):
            self._start(blocks)
            try:
                self.old_block(len(blocks) - 1)
                return
            except StaleTreeError:
                pass
        # Rows malformed or out of order, a MAC that fails, or the newest block's records
        # changed or gone (an older copy of the database restored, say): rebuild from the
        # records and replace the rows.
        self.rebuild(store)

    def _absorb_pages(self, store: EventStore) -> bool:
        while True:
            page = store.read_all(gt=self.last_position, limit=_PAGE)
            for i, record in enumerate(page):
                if record.kind == _PURGED and self._purges_tree(store, record):
                    self._take(page[:i])
                    return False
            self._take(page)
            if len(page) < _PAGE:
                return True

    def _purges_tree(self, store: EventStore, tombstone: Record) -> bool:
        """Whether a purge tombstone erased records this tree holds."""
        if tombstone.stream_id in self._streams:
            return True
        # Records of stored blocks: every purge bumps the generation in its transaction.
        return store._tree_generation() != self._generation

    def _take(self, records: Sequence[Record]) -> None:
        if not records:
            return
        before = self.tree.size
        self.tree.extend_hashed([_leaf(r) for r in records])
        self._positions.extend(r.position for r in records)
        self._streams.update(r.stream_id for r in records)
        self.last_position = records[-1].position
        for block in range(before // BLOCK, self.tree.size // BLOCK):
            first = block * BLOCK - self._start_leaf
            self._blocks_first.append(self._positions[first])
            self._blocks_last.append(self._positions[first + BLOCK - 1])

    def _save(self, store: EventStore) -> bool:
        """Store the blocks completed since the last save. Best effort: a store that cannot
        write now (read-only, locked, a standby) keeps the tree in memory and tries again
        later. Returns False only when a purge happened since the tree's records were read
        (the generation moved): the tree must be rebuilt."""
        complete = self.tree.size // BLOCK
        if complete <= self._saved_blocks and not self._replace:
            return True
        start = 0 if self._replace else self._saved_blocks
        rows = [self._row(store, block) for block in range(start, complete)]
        try:
            stored = store._save_tree_blocks(
                rows, replace=self._replace, generation=self._generation
            )
        except (PersistenceError, ReadOnlyError):
            return True
        if stored is None:
            return True
        if stored:
            self._saved_blocks = complete
            self._replace = False
            return True
        return store._tree_generation() == self._generation

    def _row(self, store: EventStore, block: int) -> TreeBlock:
        node = self.nodes.get(BLOCK_LEVEL, block)
        assert node is not None  # noqa: S101 - a complete block always has its node
        return _block(store, block, self._blocks_first[block], self._blocks_last[block], node)


def _block(store: EventStore, block: int, first: int, last: int, node: bytes) -> TreeBlock:
    """A row to store, MACed under the chain key when ``store`` has one."""
    key = store._key
    mac = b"" if key is None else block_mac(key, block, first, last, node)
    return TreeBlock(block, first, last, node, mac)


def blocks_of(
    store: EventStore, tree: merkle.MerkleTree, positions: Sequence[int]
) -> list[TreeBlock]:
    """The stored rows for every complete block of ``tree`` (leaf ``i`` at ``positions[i]``)."""
    rows = []
    for block in range(tree.size // BLOCK):
        node = tree.node(BLOCK_LEVEL, block)
        assert node is not None  # noqa: S101 - a complete block of the tree
        first, last = positions[block * BLOCK], positions[(block + 1) * BLOCK - 1]
        rows.append(_block(store, block, first, last, node))
    return rows
