"""Time the Merkle tree at ledger scale: build, roots, proofs and their verification.

Outside the test run (a 1 M-leaf build takes seconds). Builds an in-memory tree over ``--n``
synthetic record hashes in one bulk pass, then times (median of ``--repeat`` calls, with
``time.perf_counter_ns``) the current root, the root of an earlier size, inclusion and
consistency proofs at random positions and their verification, and prints each proof's size
as the JSON a client would receive (a list of 64-digit hex strings).

    python scripts/bench_merkle.py --n 1000000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import time
from collections.abc import Callable

from eventlog.merkle import MerkleTree, verify_consistency, verify_inclusion


def _median_ms(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1e6


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="leaves (default 1,000,000)")
    parser.add_argument("--repeat", type=int, default=200, help="timed calls per operation")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    n: int = args.n
    rng = random.Random(args.seed)

    leaves = [hashlib.sha256(i.to_bytes(8, "big")).hexdigest() for i in range(n)]
    start = time.perf_counter()
    tree = MerkleTree.from_leaves(leaves)
    build_s = time.perf_counter() - start

    start = time.perf_counter()
    grown = MerkleTree()
    appended = min(n, 100_000)
    for leaf in leaves[:appended]:
        grown.append(leaf)
    append_us = (time.perf_counter() - start) / max(appended, 1) * 1e6

    root = tree.root()
    old_size = rng.randrange(1, n)
    index = rng.randrange(n)
    inclusion = tree.inclusion_proof(index)
    consistency = tree.consistency_proof(old_size)
    old_root = tree.root(old_size)
    assert verify_inclusion(leaves[index], index, n, inclusion, root)
    assert verify_consistency(old_size, n, old_root, root, consistency)

    results = {
        "build_s": build_s,
        "append_us_per_leaf": append_us,
        "root_ms": _median_ms(tree.root, args.repeat),
        "root_earlier_size_ms": _median_ms(lambda: tree.root(rng.randrange(1, n)), args.repeat),
        "inclusion_proof_ms": _median_ms(
            lambda: tree.inclusion_proof(rng.randrange(n)), args.repeat
        ),
        "consistency_proof_ms": _median_ms(
            lambda: tree.consistency_proof(rng.randrange(1, n)), args.repeat
        ),
        "verify_inclusion_ms": _median_ms(
            lambda: verify_inclusion(leaves[index], index, n, inclusion, root), args.repeat
        ),
        "verify_consistency_ms": _median_ms(
            lambda: verify_consistency(old_size, n, old_root, root, consistency), args.repeat
        ),
        "inclusion_proof_hashes": len(inclusion),
        "inclusion_proof_json_bytes": len(json.dumps(inclusion)),
        "consistency_proof_hashes": len(consistency),
        "consistency_proof_json_bytes": len(json.dumps(consistency)),
    }
    print(f"Merkle tree, {n:,} leaves (inclusion of leaf {index}, consistency from {old_size})")
    for name, value in results.items():
        print(f"  {name:30} {value:12.4f}" if isinstance(value, float) else f"  {name:30} {value}")
    return results


if __name__ == "__main__":
    main()
