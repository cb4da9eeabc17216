"""A Merkle tree over record hashes in global order: roots, inclusion and consistency proofs.

The shapes are RFC 9162 section 2.1 (the same as RFC 6962, Certificate Transparency), so any CT
verifier can check our proofs:

* leaf hash ``SHA-256(0x00 || leaf)``, node hash ``SHA-256(0x01 || left || right)``;
* the root of the empty tree is ``SHA-256("")``;
* a tree of ``n > 1`` leaves splits at the largest power of two below ``n``.

Representation: a leaf is a record hash, i.e. its 32 raw bytes. At the public API every hash
(leaf, root, proof element) is a 64-digit hex string, because digests and proofs travel as
JSON; outputs are always lowercase, inputs are compared by value. A leaf may also be given as
``bytes``, taken as the leaf data itself, which is how arbitrary data (such as the CT test
vectors) enters the tree; ``tree.append(h)`` and ``tree.append(bytes.fromhex(h))`` are the
same leaf.

Storage: :class:`MerkleTree` keeps the hash of every *complete* subtree - level ``l``, index
``i`` covers leaves ``[i * 2**l, (i + 1) * 2**l)`` - in a :class:`NodeStore`. Any subtree the
RFC recursion asks for is either one of those or the fold of at most ``log2(n)`` of them, so a
root of any earlier size and every proof cost ``O(log n)`` lookups and never touch the leaves.
Appending costs two hashes per leaf amortized (one leaf hash plus one node per completed
subtree), and the store holds about ``2n`` nodes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Protocol

__all__ = [
    "EMPTY_ROOT",
    "InMemoryNodeStore",
    "MerkleTree",
    "NodeStore",
    "leaf_hash",
    "verify_consistency",
    "verify_inclusion",
]

_HASH_SIZE = 32
_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"
_sha256 = hashlib.sha256

EMPTY_ROOT = _sha256(b"").hexdigest()
"""The root of the tree with no leaves: the hex SHA-256 of the empty string."""


def _leaf(data: bytes) -> bytes:
    return _sha256(_LEAF_PREFIX + data).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return _sha256(_NODE_PREFIX + left + right).digest()


# Raw-bytes twins of the two hashes, for code that keeps nodes itself (eventlog.ledger_tree).
hash_leaf = _leaf
hash_children = _node


def parents(row: Sequence[bytes]) -> list[bytes]:
    """The complete parent nodes of one level's nodes (an odd last node has none yet)."""
    return [_node(row[i], row[i + 1]) for i in range(0, len(row) - 1, 2)]


def leaf_hash(data: bytes) -> str:
    """Return the RFC 9162 leaf hash ``SHA-256(0x00 || data)`` of raw leaf data, as hex."""
    return _leaf(data).hex()


def _leaf_data(leaf: str | bytes, operation: str) -> bytes:
    if isinstance(leaf, bytes):
        return leaf
    if not isinstance(leaf, str):
        msg = f"{operation}: leaf {leaf!r} is neither a hex record hash (str) nor bytes"
        raise TypeError(msg)
    # Both checks: bytes.fromhex skips whitespace, so 64 characters must also give 32 bytes.
    try:
        data = bytes.fromhex(leaf)
    except (TypeError, ValueError):
        data = b""
    if len(leaf) != 2 * _HASH_SIZE or len(data) != _HASH_SIZE:
        msg = (
            f"{operation}: leaf {leaf!r} is not a record hash; pass the record's 64-digit hex "
            "hash, or raw leaf data as bytes"
        )
        raise ValueError(msg)
    return data


def _largest_power_of_two_below(n: int) -> int:
    """The RFC's split point ``k``: the largest power of two strictly below ``n`` (``n > 1``)."""
    return 1 << ((n - 1).bit_length() - 1)


class NodeStore(Protocol):
    """Where a :class:`MerkleTree` keeps the hashes of its complete subtrees.

    Node ``(level, index)`` is the raw 32-byte hash of leaves ``[index * 2**level,
    (index + 1) * 2**level)``. The tree writes each level in ascending index order and only
    reads nodes it has written (or, when reopened with ``size=``, nodes a tree of that size
    wrote). Writing a node that exists must replace it: a tree reopened at a smaller size
    rewrites the nodes past that size as it grows again.
    """

    def get(self, level: int, index: int) -> bytes | None:
        """Return node ``(level, index)``, or None if it was never written."""
        ...

    def put(self, level: int, index: int, node: bytes) -> None:
        """Write node ``(level, index)``."""
        ...

    def put_many(self, level: int, start: int, nodes: Sequence[bytes]) -> None:
        """Write ``nodes`` as ``(level, start)``, ``(level, start + 1)``, ... in one go."""
        ...


class InMemoryNodeStore:
    """A :class:`NodeStore` holding each level as one contiguous ``bytearray``.

    32 bytes per node and no per-node object, so a 1 M-leaf tree (about 2 M nodes) takes
    about 64 MB instead of several hundred for a dict of ``bytes``. That layout needs the
    levels to be written without gaps, which is how :class:`MerkleTree` writes them.
    """

    def __init__(self) -> None:
        self._levels: list[bytearray] = []

    @classmethod
    def from_rows(cls, rows: list[bytearray]) -> InMemoryNodeStore:
        """A store holding ``rows[level]`` as each level's nodes (taken, not copied)."""
        store = cls()
        store._levels = rows
        return store

    def rows(self) -> list[bytearray]:
        """Each level's nodes, 32 bytes each, from index 0 (the store's own buffers)."""
        return self._levels

    def get(self, level: int, index: int) -> bytes | None:
        if level < 0 or index < 0 or level >= len(self._levels):
            return None
        start = index * _HASH_SIZE
        node = self._levels[level][start : start + _HASH_SIZE]
        return bytes(node) if len(node) == _HASH_SIZE else None

    def put(self, level: int, index: int, node: bytes) -> None:
        self.put_many(level, index, (node,))

    def put_many(self, level: int, start: int, nodes: Sequence[bytes]) -> None:
        while len(self._levels) <= level:
            self._levels.append(bytearray())
        row = self._levels[level]
        if start < 0 or start * _HASH_SIZE > len(row):
            msg = (
                f"write Merkle nodes at level {level} from index {start}: the level holds "
                f"{len(row) // _HASH_SIZE} nodes and cannot have a gap; write them in order"
            )
            raise ValueError(msg)
        data = b"".join(nodes)
        row[start * _HASH_SIZE : start * _HASH_SIZE + len(data)] = data


class MerkleTree:
    """An append-only RFC 9162 Merkle tree whose complete subtrees live in a :class:`NodeStore`.

    Not thread-safe: the caller serializes appends, as a store does under its write lock.
    Reads (roots and proofs of sizes already appended) only look nodes up.

    Args:
        store: Where the nodes live; a fresh :class:`InMemoryNodeStore` by default.
        size: Number of leaves ``store`` already holds a tree of, to reopen it. The tree
            reads the ``O(log size)`` nodes of its right edge from the store.

    Raises:
        ValueError: ``size`` is negative.
        LookupError: ``store`` lacks a node a tree of ``size`` leaves must have.
    """

    def __init__(self, store: NodeStore | None = None, *, size: int = 0) -> None:
        if size < 0:
            msg = f"open a Merkle tree of size {size}: a size counts leaves, use 0 or more"
            raise ValueError(msg)
        self._store: NodeStore = InMemoryNodeStore() if store is None else store
        self._size = size
        # The roots of the perfect subtrees that make up the tree, largest first (one per set
        # bit of size): exactly the left siblings an append may merge with, kept here so an
        # append never reads the store.
        self._peaks: list[bytes] = [
            self._get(level, start >> level, "open the tree")
            for level, start in self._decompose(0, size)
        ]

    @classmethod
    def from_leaves(
        cls, leaves: Iterable[str | bytes], store: NodeStore | None = None
    ) -> MerkleTree:
        """Build a tree from existing leaves in one pass, level by level.

        Args:
            leaves: Leaves in global order (hex record hashes, or raw data as bytes).
            store: An empty node store; a fresh :class:`InMemoryNodeStore` by default.

        Raises:
            ValueError: A leaf is a string but not a 64-digit hex hash.
        """
        tree = cls(store)
        tree.extend(leaves)
        return tree

    @property
    def size(self) -> int:
        """The number of leaves appended so far."""
        return self._size

    def __len__(self) -> int:
        return self._size

    def append(self, leaf: str | bytes) -> int:
        """Append one leaf and return its index.

        Raises:
            ValueError: ``leaf`` is a string but not a 64-digit hex hash.
        """
        node = _leaf(_leaf_data(leaf, f"append leaf {self._size}"))
        index = self._size
        level = 0
        self._store.put(0, index, node)
        # Each trailing 1 bit of the index completes a subtree one level up.
        while index & 1:
            node = _node(self._peaks.pop(), node)
            index >>= 1
            level += 1
            self._store.put(level, index, node)
        self._peaks.append(node)
        self._size += 1
        return self._size - 1

    def extend(self, leaves: Iterable[str | bytes]) -> None:
        """Append many leaves, hashing and writing one level at a time.

        Validates every leaf before writing anything, so a bad leaf leaves the tree unchanged.

        Raises:
            ValueError: A leaf is a string but not a 64-digit hex hash.
        """
        first = self._size
        self.extend_hashed(
            [
                _leaf(_leaf_data(leaf, f"extend the tree with leaf {first + offset}"))
                for offset, leaf in enumerate(leaves)
            ]
        )

    def extend_hashed(self, leaf_nodes: list[bytes]) -> None:
        """Append leaves whose leaf hashes (:func:`hash_leaf`, 32 raw bytes each) are already
        computed, e.g. by worker processes; the list is consumed."""
        first = self._size
        nodes = leaf_nodes
        end = first + len(nodes)
        old_peaks = {
            lv: peak for (lv, _), peak in zip(self._decompose(0, first), self._peaks, strict=True)
        }
        level = 0
        while nodes:
            start = first >> level
            self._store.put_many(level, start, nodes)
            if start & 1:
                # The first new node is a right child: its left sibling is the old peak here.
                nodes.insert(0, old_peaks[level])
            nodes = parents(nodes)
            level += 1
        self._size = end
        self._peaks = [
            self._get(lv, lo >> lv, "extend the tree") for lv, lo in self._decompose(0, end)
        ]

    def node(self, level: int, index: int) -> bytes | None:
        """The stored hash of complete subtree ``(level, index)``, None if it is not complete."""
        return self._store.get(level, index) if (index + 1) << level <= self._size else None

    def root(self, size: int | None = None) -> str:
        """Return the root hash (hex) of the tree's first ``size`` leaves (default: all).

        Raises:
            ValueError: ``size`` is negative or above the tree's size.
        """
        size = self._size if size is None else size
        self._check_size(size, "compute the root")
        if size == 0:
            return EMPTY_ROOT
        return self._range_hash(0, size).hex()

    def inclusion_proof(self, index: int, size: int | None = None) -> list[str]:
        """Return the audit path (RFC 9162 2.1.3.1) of leaf ``index`` in the tree of ``size``.

        Args:
            index: The leaf's position, ``0 <= index < size``.
            size: The tree size the proof is against (default: the whole tree).

        Returns:
            Sibling hashes from the leaf up to the root, as hex.

        Raises:
            ValueError: ``size`` is above the tree's size, or ``index`` is not below it.
        """
        size = self._size if size is None else size
        self._check_size(size, f"prove inclusion of leaf {index}")
        if not 0 <= index < size:
            msg = (
                f"prove inclusion of leaf {index} in a tree of size {size}: the index must be "
                f"in [0, {size}); prove it against a larger size"
            )
            raise ValueError(msg)
        path: list[bytes] = []
        lo, hi = 0, size
        # Walk down the RFC recursion PATH(m, D[lo:hi]); the sibling found at each step goes
        # after the deeper ones, so the path is collected top-down and reversed.
        while hi - lo > 1:
            k = _largest_power_of_two_below(hi - lo)
            if index < lo + k:
                path.append(self._range_hash(lo + k, hi))
                hi = lo + k
            else:
                path.append(self._range_hash(lo, lo + k))
                lo += k
        return [node.hex() for node in reversed(path)]

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> list[str]:
        """Return the proof (RFC 9162 2.1.4.1) that the tree of ``old_size`` is a prefix.

        Args:
            old_size: The earlier tree size, ``0 <= old_size <= new_size``.
            new_size: The later tree size (default: the whole tree).

        Returns:
            The proof's hashes as hex; empty when ``old_size`` is 0 or equals ``new_size``,
            where nothing needs proving beyond comparing roots.

        Raises:
            ValueError: ``new_size`` is above the tree's size, or ``old_size`` outside
                ``[0, new_size]``.
        """
        new_size = self._size if new_size is None else new_size
        self._check_size(new_size, f"prove consistency of size {old_size}")
        if not 0 <= old_size <= new_size:
            msg = (
                f"prove consistency of size {old_size} with size {new_size}: the old size "
                f"must be in [0, {new_size}]; swap the sizes if they are reversed"
            )
            raise ValueError(msg)
        if old_size in (0, new_size):
            return []
        proof: list[bytes] = []
        lo, hi = 0, new_size
        m = old_size
        # SUBPROOF(m, D[lo:hi], b) walked top-down; `whole` is the RFC's b: whether D[lo:hi]
        # starts at leaf 0, i.e. the verifier already knows MTH(D[lo:lo+m]) as the old root.
        whole = True
        while m != hi - lo:
            k = _largest_power_of_two_below(hi - lo)
            if m <= k:
                proof.append(self._range_hash(lo + k, hi))
                hi = lo + k
            else:
                proof.append(self._range_hash(lo, lo + k))
                lo += k
                m -= k
                whole = False
        if not whole:
            proof.append(self._range_hash(lo, hi))
        return [node.hex() for node in reversed(proof)]

    def _check_size(self, size: int, operation: str) -> None:
        if not 0 <= size <= self._size:
            msg = (
                f"{operation} at size {size}: the tree has {self._size} leaves; use a size in "
                f"[0, {self._size}] or append the missing leaves first"
            )
            raise ValueError(msg)

    @staticmethod
    def _decompose(lo: int, hi: int) -> list[tuple[int, int]]:
        """Split leaves ``[lo, hi)`` into ``(level, first_leaf)`` complete subtrees, largest first.

        Holds for every range the RFC recursion produces: ``lo`` is a multiple of the power of
        two at or above ``hi - lo``, so each set bit of the width is one aligned subtree.
        """
        parts = []
        width = hi - lo
        for level in range(width.bit_length() - 1, -1, -1):
            if width >> level & 1:
                parts.append((level, lo))
                lo += 1 << level
        return parts

    def _range_hash(self, lo: int, hi: int) -> bytes:
        """MTH(D[lo:hi]) for a range of the RFC recursion: fold its subtrees right to left."""
        parts = self._decompose(lo, hi)
        level, start = parts[-1]
        node = self._get(level, start >> level, "compute a subtree hash")
        for level, start in reversed(parts[:-1]):
            node = _node(self._get(level, start >> level, "compute a subtree hash"), node)
        return node

    def _get(self, level: int, index: int, operation: str) -> bytes:
        node = self._store.get(level, index)
        if node is None:
            msg = (
                f"{operation}: the node store lacks node (level {level}, index {index}) of a "
                f"tree of {self._size} leaves; rebuild it with MerkleTree.from_leaves"
            )
            raise LookupError(msg)
        return node


def _decode_hash(value: object) -> bytes | None:
    """The 32 bytes of a 64-digit hex hash, or None for anything else (verifiers never raise)."""
    if not isinstance(value, str) or len(value) != 2 * _HASH_SIZE:
        return None
    try:
        data = bytes.fromhex(value)
    except ValueError:
        return None
    return data if len(data) == _HASH_SIZE else None


def _decode_proof(proof: object) -> list[bytes] | None:
    if not isinstance(proof, list | tuple):
        return None
    nodes = []
    for item in proof:
        node = _decode_hash(item)
        if node is None:
            return None
        nodes.append(node)
    return nodes


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def verify_inclusion(
    leaf: str | bytes, index: int, size: int, proof: Sequence[str], root: str
) -> bool:
    """Check that ``leaf`` is leaf ``index`` of the tree of ``size`` leaves with ``root``.

    The algorithm of RFC 9162 section 2.1.3.2. The proof binds the leaf and its index to the
    root; the size is bound only through the root, so trust a (size, root) pair as a whole.

    Args:
        leaf: The leaf: a hex record hash, or raw leaf data as bytes.
        index: The leaf's position in global order.
        size: The tree size the proof was made for.
        proof: The audit path as hex hashes, as :meth:`MerkleTree.inclusion_proof` returns.
        root: The hex root of the tree of ``size`` leaves.

    Returns:
        True if the proof holds; False otherwise, including for malformed input of any kind.
    """
    expected = _decode_hash(root)
    path = _decode_proof(proof)
    if expected is None or path is None or not (_is_size(index) and _is_size(size)):
        return False
    if isinstance(leaf, bytes):
        data = leaf
    elif (data_or_none := _decode_hash(leaf)) is not None:
        data = data_or_none
    else:
        return False
    if index >= size:
        return False
    fn, sn = index, size - 1
    node = _leaf(data)
    for sibling in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            node = _node(sibling, node)
            # A right-edge node with no right sibling moves up without hashing.
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            node = _node(node, sibling)
        fn >>= 1
        sn >>= 1
    return sn == 0 and node == expected


def verify_consistency(
    old_size: int, new_size: int, old_root: str, new_root: str, proof: Sequence[str]
) -> bool:
    """Check that the tree of ``old_size`` leaves with ``old_root`` is a prefix of the new one.

    The algorithm of RFC 9162 section 2.1.4.2 for ``0 < old_size < new_size``. The trivial
    cases need an empty proof: equal sizes hold when the roots are equal, and ``old_size`` 0
    holds when ``old_root`` is :data:`EMPTY_ROOT` (every tree extends the empty one).

    Args:
        old_size: The earlier tree size.
        new_size: The later tree size.
        old_root: The hex root of the earlier tree.
        new_root: The hex root of the later tree.
        proof: The proof as hex hashes, as :meth:`MerkleTree.consistency_proof` returns.

    Returns:
        True if the proof holds; False otherwise, including for malformed input of any kind.
    """
    first_hash = _decode_hash(old_root)
    second_hash = _decode_hash(new_root)
    path = _decode_proof(proof)
    if first_hash is None or second_hash is None or path is None:
        return False
    if not (_is_size(old_size) and _is_size(new_size)) or old_size > new_size:
        return False
    if old_size == new_size:
        return not path and first_hash == second_hash
    if old_size == 0:
        return not path and first_hash == bytes.fromhex(EMPTY_ROOT)
    if not path:
        return False
    # When the old tree is one perfect subtree its root is the proof's implicit first node.
    if old_size & (old_size - 1) == 0:
        path.insert(0, first_hash)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for node in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = _node(node, fr)
            sr = _node(node, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = _node(sr, node)
        fn >>= 1
        sn >>= 1
    return fr == first_hash and sr == second_hash and sn == 0
