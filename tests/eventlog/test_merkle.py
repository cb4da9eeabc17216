"""The Merkle tree against a naive RFC 9162 reference, the CT test vectors and tampering."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog.merkle import (
    EMPTY_ROOT,
    InMemoryNodeStore,
    MerkleTree,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)

# ---------------------------------------------------------------- the naive reference
# RFC 9162 section 2.1 written as literally as possible: recursion over the leaf list, no
# stored nodes. Everything the tree returns must equal what this computes.


def _split(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_mth(leaves: list[bytes]) -> bytes:
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = _split(len(leaves))
    return hashlib.sha256(b"\x01" + ref_mth(leaves[:k]) + ref_mth(leaves[k:])).digest()


def ref_path(m: int, leaves: list[bytes]) -> list[bytes]:
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if m < k:
        return [*ref_path(m, leaves[:k]), ref_mth(leaves[k:])]
    return [*ref_path(m - k, leaves[k:]), ref_mth(leaves[:k])]


def ref_subproof(m: int, leaves: list[bytes], whole: bool) -> list[bytes]:
    if m == len(leaves):
        return [] if whole else [ref_mth(leaves)]
    k = _split(len(leaves))
    if m <= k:
        return [*ref_subproof(m, leaves[:k], whole), ref_mth(leaves[k:])]
    return [*ref_subproof(m - k, leaves[k:], False), ref_mth(leaves[:k])]


def ref_proof(m: int, leaves: list[bytes]) -> list[bytes]:
    return [] if m in (0, len(leaves)) else ref_subproof(m, leaves, True)


def record_hashes(n: int, salt: str = "") -> list[str]:
    """Distinct 64-hex leaves shaped like the record hashes the stores will feed in."""
    return [hashlib.sha256(f"{salt}record {i}".encode()).hexdigest() for i in range(n)]


def raw(hexes: list[str]) -> list[bytes]:
    return [bytes.fromhex(h) for h in hexes]


def hexes(nodes: list[bytes]) -> list[str]:
    return [node.hex() for node in nodes]


def flip(hex_hash: str, bit: int) -> str:
    data = bytearray.fromhex(hex_hash)
    data[bit // 8] ^= 1 << (bit % 8)
    return data.hex()


LEAVES = record_hashes(300)
TREE = MerkleTree.from_leaves(LEAVES)


# ---------------------------------------------------------------- known answers
# Certificate Transparency's test data (transparency-dev/merkle testonly/constants.go and
# proof/verify_test.go, the vectors every RFC 6962 implementation checks against).
CT_LEAVES = [
    b"",
    b"\x00",
    b"\x10",
    b"\x20\x21",
    b"\x30\x31",
    b"\x40\x41\x42\x43",
    b"\x50\x51\x52\x53\x54\x55\x56\x57",
    b"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
]
CT_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
# Every complete subtree of the 8-leaf tree, by level then index.
CT_NODES = [
    [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
        "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1",
    ],
    [
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
    ],
    [
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    ["5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"],
]
# (index, size, path): the vectors number leaves from 1, these from 0.
CT_INCLUSION = [
    (0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (1, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
    (0, 1, []),
]  # fmt: skip
CT_CONSISTENCY = [
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
    (6, 7, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
]  # fmt: skip


def test_ct_vectors_roots_and_nodes():
    store = InMemoryNodeStore()
    tree = MerkleTree(store)
    # Check the root after every append, from the empty tree to the 8-leaf root.
    assert tree.root() == CT_ROOTS[0] == EMPTY_ROOT
    for size, leaf in enumerate(CT_LEAVES, start=1):
        tree.append(leaf)
        assert tree.root() == CT_ROOTS[size]
    # Check earlier sizes are answered from the stored nodes of the full tree.
    assert [tree.root(size) for size in range(9)] == CT_ROOTS
    # Check the store holds exactly the complete subtrees, and nothing past them.
    for level, nodes in enumerate(CT_NODES):
        assert [store.get(level, i).hex() for i in range(len(nodes))] == nodes
        assert store.get(level, len(nodes)) is None
    assert leaf_hash(CT_LEAVES[0]) == CT_NODES[0][0]


@pytest.mark.parametrize(("index", "size", "path"), CT_INCLUSION)
def test_ct_vectors_inclusion(index, size, path):
    tree = MerkleTree.from_leaves(CT_LEAVES)
    assert tree.inclusion_proof(index, size) == path
    assert verify_inclusion(CT_LEAVES[index], index, size, path, CT_ROOTS[size])


@pytest.mark.parametrize(("old", "new", "proof"), CT_CONSISTENCY)
def test_ct_vectors_consistency(old, new, proof):
    tree = MerkleTree.from_leaves(CT_LEAVES)
    assert tree.consistency_proof(old, new) == proof
    assert verify_consistency(old, new, CT_ROOTS[old], CT_ROOTS[new], proof)


# ---------------------------------------------------------------- roots
def test_root_of_every_size_to_300_matches_the_reference():
    grown = MerkleTree()
    for size in range(301):
        expected = ref_mth(raw(LEAVES[:size])).hex()
        # Check three routes agree: the big tree at an earlier size, a tree grown one leaf
        # at a time, and a tree bulk-built from exactly these leaves.
        assert TREE.root(size) == expected
        assert grown.root() == expected
        assert MerkleTree.from_leaves(LEAVES[:size]).root() == expected
        if size < 300:
            assert grown.append(LEAVES[size]) == size


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 1500),
    st.lists(st.integers(1, 400), max_size=8),
)
def test_any_mix_of_appends_and_extends_builds_the_same_tree(size, chunks):
    leaves = record_hashes(size, salt="mix")
    store = InMemoryNodeStore()
    tree = MerkleTree(store)
    # Extend in the drawn chunk sizes (which straddle subtree boundaries at random), with a
    # single append between chunks, then extend with whatever is left.
    done = 0
    for chunk in chunks:
        tree.extend(leaves[done : done + chunk])
        done = min(size, done + chunk)
        if done < size:
            tree.append(leaves[done])
            done += 1
    tree.extend(leaves[done:])
    assert len(tree) == tree.size == size
    assert tree.root() == ref_mth(raw(leaves)).hex()
    # Check the nodes are the ones a one-shot build stores, level by level.
    bulk = InMemoryNodeStore()
    MerkleTree.from_leaves(leaves, bulk)
    for level in range(size.bit_length()):
        count = size >> level
        assert [store.get(level, i) for i in range(count + 1)] == [
            bulk.get(level, i) for i in range(count + 1)
        ]


def test_hex_and_bytes_name_the_same_leaf():
    assert (
        MerkleTree.from_leaves(LEAVES[:7]).root() == MerkleTree.from_leaves(raw(LEAVES[:7])).root()
    )
    assert MerkleTree.from_leaves([LEAVES[0].upper()]).root() == TREE.root(1)


# ---------------------------------------------------------------- inclusion
@pytest.mark.parametrize("size", [*range(1, 70), 127, 128, 129, 255, 256, 257, 300])
def test_every_inclusion_proof_matches_the_reference_and_verifies(size):
    root = TREE.root(size)
    leaves = raw(LEAVES[:size])
    for index in range(size):
        proof = TREE.inclusion_proof(index, size)
        assert proof == hexes(ref_path(index, leaves))
        assert verify_inclusion(LEAVES[index], index, size, proof, root)
        assert verify_inclusion(leaves[index], index, size, proof, root)


def test_inclusion_proof_defaults_to_the_whole_tree():
    assert TREE.inclusion_proof(17) == TREE.inclusion_proof(17, 300)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_any_single_flipped_bit_fails_inclusion(data):
    size = data.draw(st.integers(1, 300), label="size")
    index = data.draw(st.integers(0, size - 1), label="index")
    proof = TREE.inclusion_proof(index, size)
    leaf, root = LEAVES[index], TREE.root(size)
    targets = ["leaf", "root", "index"] + (["proof"] if proof else [])
    target = data.draw(st.sampled_from(targets), label="target")
    if target == "leaf":
        leaf = flip(leaf, data.draw(st.integers(0, 255), label="bit"))
    elif target == "root":
        root = flip(root, data.draw(st.integers(0, 255), label="bit"))
    elif target == "index":
        index ^= 1 << data.draw(st.integers(0, size.bit_length()), label="bit")
    else:
        element = data.draw(st.integers(0, len(proof) - 1), label="element")
        proof = [*proof]
        proof[element] = flip(proof[element], data.draw(st.integers(0, 255), label="bit"))
    assert not verify_inclusion(leaf, index, size, proof, root)


def test_inclusion_fails_for_a_truncated_padded_or_reordered_proof():
    size, index = 300, 77
    proof, root = TREE.inclusion_proof(index, size), TREE.root(size)
    assert verify_inclusion(LEAVES[index], index, size, proof, root)
    for bad in (
        proof[:-1],
        [*proof, root],
        [root, *proof],
        [*proof[1:], proof[0]],
        [proof[0], EMPTY_ROOT, *proof[1:]],
    ):
        assert not verify_inclusion(LEAVES[index], index, size, bad, root)
    # A neighbour's leaf under this leaf's proof.
    assert not verify_inclusion(LEAVES[index + 1], index, size, proof, root)


MALFORMED_HASHES: list[Any] = [
    "",
    "ab",
    "zz" * 32,
    "00" * 31,
    "00" * 33,
    " " + "0" * 63,
    "0" * 62 + " 0",
    None,
    7,
    b"\x00" * 32,
]


@pytest.mark.parametrize("bad", MALFORMED_HASHES)
def test_verifiers_return_false_on_malformed_hashes(bad):
    size, index = 13, 6
    proof, root = TREE.inclusion_proof(index, size), TREE.root(size)
    leaf = LEAVES[index]
    if not isinstance(bad, bytes):  # raw bytes are a legitimate (different) leaf
        assert not verify_inclusion(bad, index, size, proof, root)
    assert not verify_inclusion(leaf, index, size, proof, bad)
    assert not verify_inclusion(leaf, index, size, [*proof[:-1], bad], root)
    old_root = TREE.root(5)
    cproof = TREE.consistency_proof(5, size)
    assert not verify_consistency(5, size, bad, root, cproof)
    assert not verify_consistency(5, size, old_root, bad, cproof)
    assert not verify_consistency(5, size, old_root, root, [bad, *cproof[1:]])


@pytest.mark.parametrize(
    ("index", "size"),
    [(13, 13), (14, 13), (-1, 13), (0, 0), (0, -1), (6, 26), (True, 13), (6.0, 13)],
)
def test_verify_inclusion_returns_false_for_a_wrong_or_malformed_position(index, size):
    proof, root = TREE.inclusion_proof(6, 13), TREE.root(13)
    assert not verify_inclusion(LEAVES[6], index, size, proof, root)


def test_the_size_is_bound_through_the_root():
    proof = TREE.inclusion_proof(6, 13)
    # Leaf 6 has the same path shape in trees of 12 and 13 leaves, so the proof alone does not
    # fix the size; the root of the real 12-leaf tree does. Digests carry (size, root) together.
    assert verify_inclusion(LEAVES[6], 6, 12, proof, TREE.root(13))
    assert not verify_inclusion(LEAVES[6], 6, 12, proof, TREE.root(12))


@pytest.mark.parametrize("proof", [None, "ab" * 32, {"a": 1}, 3, [[]]])
def test_verifiers_return_false_for_a_proof_that_is_not_a_list_of_hashes(proof):
    assert not verify_inclusion(LEAVES[0], 0, 2, proof, TREE.root(2))
    assert not verify_consistency(1, 2, TREE.root(1), TREE.root(2), proof)


def test_verifiers_compare_hex_by_value():
    proof = [node.upper() for node in TREE.inclusion_proof(6, 13)]
    assert verify_inclusion(LEAVES[6].upper(), 6, 13, proof, TREE.root(13).upper())


# ---------------------------------------------------------------- consistency
def test_every_consistency_proof_to_48_matches_the_reference_and_verifies():
    for new in range(49):
        leaves = raw(LEAVES[:new])
        new_root = TREE.root(new)
        for old in range(new + 1):
            proof = TREE.consistency_proof(old, new)
            assert proof == hexes(ref_proof(old, leaves)), (old, new)
            assert verify_consistency(old, new, TREE.root(old), new_root, proof), (old, new)


@pytest.mark.parametrize(("old", "new"), [(1, 300), (100, 300), (128, 256), (129, 257), (255, 300)])
def test_consistency_at_larger_sizes(old, new):
    proof = TREE.consistency_proof(old, new)
    assert proof == hexes(ref_proof(old, raw(LEAVES[:new])))
    assert verify_consistency(old, new, TREE.root(old), TREE.root(new), proof)
    assert TREE.consistency_proof(old) == TREE.consistency_proof(old, 300)


def test_consistency_fails_when_a_leaf_of_the_old_tree_changes():
    for new in range(2, 34):
        for old in range(1, new):
            proof = TREE.consistency_proof(old, new)
            new_root = TREE.root(new)
            for changed in {0, old // 2, old - 1}:
                forged = [*LEAVES[:new]]
                forged[changed] = flip(forged[changed], 0)
                other = MerkleTree.from_leaves(forged)
                # Check the rewritten history fails both ways: its old root against the
                # honest proof, and its own proof against the honest old root.
                assert not verify_consistency(old, new, other.root(old), new_root, proof)
                assert not verify_consistency(
                    old, new, TREE.root(old), other.root(new), other.consistency_proof(old, new)
                )


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_any_single_flipped_bit_fails_consistency(data):
    new = data.draw(st.integers(2, 300), label="new")
    old = data.draw(st.integers(1, new - 1), label="old")
    proof = TREE.consistency_proof(old, new)
    old_root, new_root = TREE.root(old), TREE.root(new)
    target = data.draw(st.sampled_from(["old_root", "new_root", "proof"]), label="target")
    bit = data.draw(st.integers(0, 255), label="bit")
    if target == "old_root":
        old_root = flip(old_root, bit)
    elif target == "new_root":
        new_root = flip(new_root, bit)
    else:
        element = data.draw(st.integers(0, len(proof) - 1), label="element")
        proof = [*proof]
        proof[element] = flip(proof[element], bit)
    assert not verify_consistency(old, new, old_root, new_root, proof)


def test_consistency_trivial_cases():
    root = TREE.root(9)
    # Check equal sizes need equal roots and an empty proof.
    assert verify_consistency(9, 9, root, root, [])
    assert not verify_consistency(9, 9, root, TREE.root(8), [])
    assert not verify_consistency(9, 9, root, root, [root])
    # Check a malformed proof is refused even where an empty one would hold.
    assert not verify_consistency(9, 9, root, root, ["zz"])
    assert not verify_consistency(9, 9, root, root, "not a list")
    assert not verify_consistency(0, 9, EMPTY_ROOT, root, ["zz"])
    # Check every tree extends the empty one, whose root is fixed.
    assert verify_consistency(0, 9, EMPTY_ROOT, root, [])
    assert verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    assert not verify_consistency(0, 9, root, root, [])
    assert not verify_consistency(0, 9, EMPTY_ROOT, root, [root])
    # Check sizes going backwards, negative or not integers, and a missing proof.
    assert not verify_consistency(9, 8, root, TREE.root(8), TREE.consistency_proof(8, 9))
    assert not verify_consistency(-1, 9, root, root, [])
    assert not verify_consistency(1.0, 9, TREE.root(1), root, TREE.consistency_proof(1, 9))  # type: ignore[arg-type]
    assert not verify_consistency(3, 9, TREE.root(3), root, [])
    # Check a proof for other sizes does not carry over.
    proof = TREE.consistency_proof(3, 9)
    assert not verify_consistency(3, 10, TREE.root(3), TREE.root(10), proof)
    assert not verify_consistency(2, 9, TREE.root(2), root, proof)


# ---------------------------------------------------------------- cost and storage
class CountingStore(InMemoryNodeStore):
    def __init__(self) -> None:
        super().__init__()
        self.gets = 0
        self.puts = 0

    def get(self, level, index):
        self.gets += 1
        return super().get(level, index)

    def put_many(self, level, start, nodes):
        self.puts += len(nodes)
        super().put_many(level, start, nodes)


def test_reads_cost_logarithmic_lookups_and_no_writes():
    store = CountingStore()
    n = 5000  # log2 ~ 12.3
    tree = MerkleTree.from_leaves(record_hashes(n), store)
    # About 2n nodes: n leaves plus n - popcount(n) inner nodes.
    assert store.puts == 2 * n - bin(n).count("1")
    store.gets = store.puts = 0
    for size in (1, 2, 1000, 4097, n):
        tree.root(size)
        tree.inclusion_proof(size // 3, size)
        tree.consistency_proof(size // 3, size)
    # At most one right-edge sibling needs a fold of several subtrees, so each call reads
    # O(log n) nodes - a handful of dozen here, never a pass over the 5000 leaves.
    assert store.gets < 5 * 3 * 2 * 14
    assert store.puts == 0


def test_appends_hash_each_leaf_once_and_each_inner_node_once():
    store = CountingStore()
    tree = MerkleTree(store)
    for leaf in LEAVES:
        tree.append(leaf)
    assert store.puts == 2 * 300 - bin(300).count("1")
    assert store.gets == 0  # the right edge is kept in memory


def test_reopening_a_store_continues_the_same_tree():
    store = InMemoryNodeStore()
    MerkleTree.from_leaves(LEAVES[:200], store)
    reopened = MerkleTree(store, size=200)
    assert reopened.root() == TREE.root(200)
    reopened.extend(LEAVES[200:250])
    for leaf in LEAVES[250:]:
        reopened.append(leaf)
    assert reopened.root() == TREE.root()
    # Reopen at a smaller size: the nodes past it are rewritten as the tree grows again.
    rewound = MerkleTree(store, size=100)
    rewound.extend(record_hashes(50, salt="other"))
    assert (
        rewound.root()
        == MerkleTree.from_leaves(LEAVES[:100] + record_hashes(50, salt="other")).root()
    )


def test_reopening_without_the_nodes_names_the_missing_one():
    with pytest.raises(LookupError, match=r"lacks node \(level 2, index 0\) of a tree of 5"):
        MerkleTree(InMemoryNodeStore(), size=5)


def test_in_memory_store_refuses_gaps_and_answers_none_outside():
    store = InMemoryNodeStore()
    store.put(0, 0, b"\x01" * 32)
    with pytest.raises(ValueError, match="level 0 from index 2: the level holds 1 nodes"):
        store.put(0, 2, b"\x02" * 32)
    assert store.get(0, 1) is None
    assert store.get(0, -1) is None
    assert store.get(5, 0) is None
    assert store.get(-1, 0) is None
    # Check the first level past the stored ones, and an empty store, answer None too.
    assert store.get(1, 0) is None
    assert InMemoryNodeStore().get(0, 0) is None


def test_in_memory_store_writes_over_stored_nodes_in_place():
    store = InMemoryNodeStore()
    a, b, c, d = (bytes([n]) * 32 for n in range(1, 5))
    store.put_many(0, 0, [a, b, c])
    store.put_many(0, 1, [d])
    # Check the node is replaced where it stands: nothing shifts, nothing grows.
    assert [store.get(0, i) for i in range(4)] == [a, d, c, None]
    store.put_many(0, 2, [b, a])
    assert [store.get(0, i) for i in range(4)] == [a, d, b, a]


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 8, 9, 16])
def test_node_is_each_complete_subtree_and_none_for_the_rest(size):
    tree = MerkleTree.from_leaves(LEAVES[:size])
    for level in range(6):
        for index in range(size + 2):
            first, end = index << level, (index + 1) << level
            node = tree.node(level, index)
            if end <= size:
                # Check a complete subtree's node is the root of its leaves, right edge included.
                assert node is not None
                assert node == ref_mth(raw(LEAVES[first:end])), (level, index)
            else:
                assert node is None, (level, index)


def test_node_of_a_smaller_tree_over_a_fuller_store_is_none_past_its_size():
    store = InMemoryNodeStore()
    MerkleTree(store).extend(LEAVES[:8])
    tree = MerkleTree(store, size=5)
    # Check the store's nodes past size 5 (complete in the tree of 8) are not this tree's.
    assert tree.node(1, 2) is None
    assert tree.node(2, 1) is None
    assert tree.node(0, 5) is None
    assert tree.node(0, 4) == ref_mth(raw(LEAVES[4:5]))
    assert tree.node(2, 0) == ref_mth(raw(LEAVES[:4]))


# ---------------------------------------------------------------- caller errors
@pytest.mark.parametrize("leaf", ["xyz", "ab" * 31, "AB" * 33, "0" * 63 + "g", " " * 64])
def test_a_leaf_that_is_not_a_record_hash_is_refused_and_changes_nothing(leaf):
    tree = MerkleTree.from_leaves(LEAVES[:3])
    with pytest.raises(ValueError, match=r"append leaf 3: leaf .* is not a record hash"):
        tree.append(leaf)
    with pytest.raises(ValueError, match=r"extend the tree with leaf 4: leaf .* not a record"):
        tree.extend([LEAVES[3], leaf])
    assert tree.size == 3
    assert tree.root() == TREE.root(3)


def test_a_leaf_of_another_type_is_refused():
    with pytest.raises(TypeError, match="leaf 7 is neither"):
        MerkleTree().append(7)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: t.root(301), r"compute the root at size 301: the tree has 300 leaves"),
        (lambda t: t.root(-1), r"at size -1"),
        (lambda t: t.inclusion_proof(300), r"leaf 300 in a tree of size 300: .* \[0, 300\)"),
        (lambda t: t.inclusion_proof(0, 0), r"leaf 0 in a tree of size 0"),
        (lambda t: t.inclusion_proof(-1, 5), r"leaf -1 in a tree of size 5"),
        (lambda t: t.inclusion_proof(3, 301), r"prove inclusion of leaf 3 at size 301"),
        (lambda t: t.consistency_proof(6, 5), r"size 6 with size 5: .* swap the sizes"),
        (lambda t: t.consistency_proof(-1), r"size -1 with size 300"),
        (lambda t: t.consistency_proof(1, 400), r"at size 400: the tree has 300 leaves"),
        (lambda t: MerkleTree(size=-2), r"open a Merkle tree of size -2"),
    ],
)
def test_out_of_range_requests_name_the_values(call, message):
    with pytest.raises(ValueError, match=message):
        call(TREE)
