"""The ledger tree kept in the database ([checkpoints] item 6), on every backend.

A new store object (a new process, for the tree) must read the stored blocks instead of every
record, give the same digests and proofs as a tree built from scratch, and never let the
stored blocks - derived data - vouch for records that changed after they were stored.
"""

from __future__ import annotations

import gc
import hashlib
import random
import sqlite3
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog import ChainIntegrityError, SQLiteEventStore, ledger_scan, verify_consistency
from eventlog import ledger as ledger_module
from eventlog.ids import StreamKey
from eventlog.ledger import verify_inclusion
from eventlog.ledger_models import LedgerDigest
from eventlog.ledger_tree import BLOCK
from eventlog.merkle import InMemoryNodeStore, MerkleTree
from eventlog.sqlite import SCAN_ROWS
from eventlog.testing.records import batch
from tests.conftest import PG_DSN
from tests.eventlog.test_ledger import _delete, _forge_and_rehash, digest, prove, verify_digest


def _grow(store, count, *, start=0, memories=7):
    """``count`` records spread over ``memories`` memories, in batches of up to 20."""
    i = start
    while i < start + count:
        size = min(20, start + count - i)
        store.append(f"m{i % memories}", batch(*(f"message {i + k}" for k in range(size))))
        i += size


def _all_hashes(store):
    hashes: list[str] = []
    after = 0
    while page := store.read_all(gt=after, limit=1000):
        hashes.extend(r.hash for r in page)
        after = page[-1].position
    return hashes


def _reference_root(store):
    """The root of a tree built from scratch over every stored record."""
    return MerkleTree.from_leaves(_all_hashes(store)).root()


def _fresh(backend, store):
    """Another store object on the same database: its tree starts empty, as in a new process."""
    if backend.name == "memory":
        ledger_module._LEDGERS.pop(store, None)  # one object per memory database: drop its tree
        return store
    return backend.open()


class _Counting:
    """Counts the records a store's read_all returns (wraps the real method, reads for real)."""

    def __init__(self, store, monkeypatch):
        self.rows = 0
        real = store.read_all

        def read_all(*, gt=0, limit=None):
            page = real(gt=gt, limit=limit)
            self.rows += len(page)
            return page

        monkeypatch.setattr(store, "read_all", read_all)


def test_a_new_object_reads_the_stored_blocks_not_the_records(backend, store, monkeypatch):
    _grow(store, 3 * BLOCK + 37)
    first = digest(store)
    # Check the first digest stored the three complete blocks, and only those.
    assert [b.block for b in store._tree_blocks()[1]] == [0, 1, 2]
    again = _fresh(backend, store)
    counting = _Counting(again, monkeypatch)
    second = digest(again)
    read = counting.rows
    assert (second.size, second.root, second.last_position) == (
        first.size,
        first.root,
        first.last_position,
    )
    assert second.root == _reference_root(store)
    # The newest stored block is re-hashed from its records at load, plus the 37 after it.
    assert read <= BLOCK + 37 + 1


def test_proofs_from_stored_blocks_verify(backend, store):
    rng = random.Random(7)
    sizes = (100, BLOCK, 300, 2 * BLOCK + 1)
    olds: list[LedgerDigest] = []
    for size in sizes:
        _grow(store, size - (olds[-1].size if olds else 0), start=olds[-1].size if olds else 0)
        olds.append(digest(store))
    _grow(store, 3 * BLOCK, start=olds[-1].size)
    digest(store)  # stores the blocks
    again = _fresh(backend, store)
    now = digest(again)
    assert now.root == _reference_root(store)
    # Check consistency from every earlier digest, sizes inside old blocks included.
    for old in olds:
        proof = again.prove_consistency(old, digest=now)
        assert verify_consistency(old, now, proof)
    # Check inclusion of records in old blocks, the newest block and the tail.
    infos = again.streams()
    for _ in range(12):
        info = rng.choice(infos)
        seq = rng.randint(1, info.last_seq)
        proof = prove(again, StreamKey(info.stream_id), seq, digest=now)
        assert verify_inclusion(proof, now)


@pytest.mark.skip_backend("postgres")  # each example a schema: see the SQLite/memory runs
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(st.tuples(st.integers(1, 700), st.booleans()), min_size=1, max_size=5))
def test_any_growth_and_reopening_gives_the_tree_built_from_scratch(backend, store, steps):
    # Hypothesis reuses the database between examples: grow from whatever is there.
    current = store
    digests = []
    for count, reopen in steps:
        _grow(current, count, start=len(_all_hashes(current)))
        if reopen:
            current = _fresh(backend, current)
        d = digest(current)
        assert d.root == _reference_root(current)
        digests.append(d)
    now = digests[-1]
    for old in digests:
        assert verify_consistency(old, now, current.prove_consistency(old, digest=now))


def test_a_record_rewritten_under_a_stored_block_is_never_proven(backend, store):
    # "early" lives only in block 0; later memories fill blocks 1 and 2.
    store.append("early", batch(*(f"early {i}" for i in range(40))))
    _grow(store, 3 * BLOCK)
    kept = digest(store)  # stores blocks 0..2
    _forge_and_rehash(backend, store, "early", 5, '{"forged":true}')
    again = _fresh(backend, store)
    # The forged record: its block's records no longer hash to the stored block.
    with pytest.raises(ChainIntegrityError, match="does not match the stored records"):
        prove(again, StreamKey("early"), 5)
    # An untouched record in the same block cannot be proven either: the block is wrong.
    with pytest.raises(ChainIntegrityError, match="ledger tree block 0"):
        prove(again, StreamKey("early"), 30)
    # A record in another block still proves.
    newest = again.head(StreamKey("m3")).seq
    assert verify_inclusion(prove(again, StreamKey("m3"), newest, digest=kept), kept)
    # The audit re-hashes every record and names the stored tree's disagreement too.
    report = again.verify(digest=kept)
    assert not report.ok
    assert "stored ledger tree" in report.message


def test_a_wrong_newest_block_is_rebuilt_from_the_records(backend, store):
    _grow(store, 2 * BLOCK + 5)
    good = digest(store)
    blocks = store._tree_blocks()[1]
    # Check an edited stored node (or rows gone out of order) makes a new object rebuild.
    _edit_block(backend, store, blocks[-1].block, b"\x00" * 32)
    again = _fresh(backend, store)
    assert digest(again).root == good.root
    assert again._tree_blocks()[1] == blocks  # replaced with the right rows


def test_a_purge_drops_the_stored_blocks(backend, store):
    store.append("old", batch(*(f"old {i}" for i in range(300))))
    _grow(store, BLOCK)
    digest(store)
    assert len(store._tree_blocks()[1]) == 2
    head = store.head(StreamKey("old"))
    store.purge("old", expected_seq=head.seq, reason="retention")
    assert store._tree_blocks()[1] == []
    # Check the same object (its tree held the purged records) and a new one both rebuild.
    assert digest(store).root == _reference_root(store)
    again = _fresh(backend, store)
    assert digest(again).root == _reference_root(store)


def test_blocks_are_stored_again_after_a_purge(backend, store):
    store.append("old", batch(*(f"old {i}" for i in range(40))))
    _grow(store, BLOCK)
    digest(store)
    store.purge("old", expected_seq=40, reason="retention")
    _grow(store, 2 * BLOCK, start=BLOCK)
    # Check the tree rebuilt after the purge is stored (its generation read as the purge
    # left it), so a new object reads blocks again instead of every record.
    assert digest(store).root == _reference_root(store)
    assert [b.block for b in store._tree_blocks()[1]] == [0, 1, 2]
    assert digest(_fresh(backend, store)).root == _reference_root(store)


def test_a_read_only_ledger_uses_stored_blocks_and_writes_nothing(tmp_path):
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path) as store:
        _grow(store, 2 * BLOCK + 9)
        first = digest(store)
        _grow(store, BLOCK, start=2 * BLOCK + 9)  # appended after the blocks were stored
        reference = _reference_root(store)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with SQLiteEventStore(path, read_only=True) as ro:
        d = digest(ro)
        assert d.root == reference
        assert len(ro._tree_blocks()[1]) == 2  # the block completed since is not written
        assert verify_consistency(first, d, ro.prove_consistency(first, digest=d))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def _edit_block(backend, store, block, node):
    if backend.name == "memory":
        store._tree[block] = store._tree[block]._replace(node=node)
    elif backend.name == "sqlite":
        with sqlite3.connect(backend.path) as conn:
            conn.execute("UPDATE ledger_blocks SET node = ? WHERE block = ?", (node, block))
    else:
        import psycopg
        from psycopg import sql

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(
                sql.SQL("UPDATE {}.ledger_blocks SET node = %s WHERE block = %s").format(
                    sql.Identifier(backend.schema)
                ),
                (node, block),
            )


# ---------------------------------------------------------------- the split scan


@pytest.fixture
def split_small(monkeypatch):
    """Split the verification pass from a few blocks on, so a small file takes that path."""
    monkeypatch.setattr(ledger_scan, "PARALLEL_MIN", 2 * BLOCK)


def _reports(store, d, monkeypatch):
    """verify_digest's report through the split pass and through the one-process pass."""
    split = verify_digest(store, d)
    with monkeypatch.context() as m:
        m.setattr(ledger_scan, "PARALLEL_MIN", 1 << 62)
        whole = verify_digest(store, d)
    return split, whole


def test_the_split_pass_agrees_with_one_pass(tmp_path, split_small, monkeypatch):
    with SQLiteEventStore(tmp_path / "ledger.db") as store:
        _grow(store, 6 * BLOCK + 11)
        d = digest(store)
        assert ledger_scan._split(store) is not None
        split, whole = _reports(store, d, monkeypatch)
        assert split.ok and whole.ok
        assert (split.size, split.message) == (whole.size, whole.message)


@pytest.mark.parametrize("paused_before", [False, True])
def test_the_pass_pauses_the_collector_and_leaves_it_as_it_found_it(
    tmp_path, monkeypatch, paused_before
):
    with SQLiteEventStore(tmp_path / "ledger.db") as store:
        _grow(store, 2 * BLOCK)
        d = digest(store)
        seen: list[bool] = []
        scan_rows = store._scan_rows

        def observed(gt, limit):
            seen.append(gc.isenabled())
            return scan_rows(gt, limit)

        monkeypatch.setattr(store, "_scan_rows", observed)
        if paused_before:
            gc.disable()
        try:
            assert verify_digest(store, d).ok
            assert gc.isenabled() is not paused_before  # as the caller left it
        finally:
            gc.enable()
    assert seen and not any(seen)


@pytest.mark.parametrize("where", ["lower", "upper", "boundary"])
def test_the_split_pass_finds_what_one_pass_finds(
    backend, tmp_path, split_small, monkeypatch, where
):
    if backend.name != "sqlite":
        pytest.skip("the pass splits only for a SQLite file")
    store = backend.open()
    _grow(store, 6 * BLOCK + 11, memories=3)
    d = digest(store)
    split = ledger_scan._split(store)
    assert split is not None
    boundary = split[1]
    below = [r for r in store.read_all(limit=10_000) if r.position <= boundary]
    above = [r for r in store.read_all(gt=boundary, limit=10_000)]
    if where == "lower":
        victim = below[len(below) // 2]
        _forge_and_rehash(backend, store, victim.stream_id, victim.seq, '{"x":1}')
    elif where == "upper":
        victim = above[len(above) // 2]
        backend.tamper(store, victim.stream_id, victim.seq, "payload", '{"x":1}')
    else:
        # The first record above the boundary of a memory that has records below it: only
        # the link across the boundary can tell it is gone.
        victim = next(r for r in above if r.seq > 1)
        _delete(backend, store, victim.stream_id, victim.seq)
    split, whole = _reports(store, d, monkeypatch)
    assert not split.ok and not whole.ok
    assert split.message == whole.message
    assert split.first_difference == whole.first_difference


@given(
    count=st.integers(0, 1500),
    cut=st.floats(0, 1),
    size=st.integers(0, 1600),
    aligned=st.booleans(),
)
def test_the_tree_of_two_ranges_is_the_tree_of_all_of_them(count, cut, size, aligned):
    leaves = [hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(count)]
    lower = int(count * cut)
    if aligned:
        lower -= lower % BLOCK  # as the split chooses it; the rest must hold for any cut
    parts = []
    for chunk in (leaves[:lower], leaves[lower:]):
        store = InMemoryNodeStore()
        MerkleTree(store).extend(chunk)
        part = ledger_scan._Part(size=len(chunk))
        part.levels = store.rows()
        parts.append(part)
    tree = ledger_scan._tree(parts, size)
    whole = MerkleTree.from_leaves(leaves)
    assert tree.size == min(size, count)
    assert tree.root() == whole.root(min(size, count))
    if tree.size >= BLOCK:
        assert tree.node(8, 0) == whole.node(8, 0)


# ---------------------------------------------------------------- attacks on the stored tree

_KEY = b"k" * 32


def test_a_keyed_ledger_never_loads_a_block_forged_without_the_key(backend):
    store = backend.open(chain_key=_KEY)
    _grow(store, 3 * BLOCK + 5)
    honest = digest(store)
    # Check a forger who rewrites an old block's node (records untouched, verify() passes)
    # cannot get a keyed owner's new process to digest or sign the forged root.
    _edit_block(backend, store, 0, hashlib.sha256(b"forged").digest())
    owner = _fresh(backend, store) if backend.name == "memory" else backend.open(chain_key=_KEY)
    assert digest(owner).root == honest.root == _reference_root(owner)
    from eventlog.note import generate_key

    signer, verifier = generate_key("example.com/log")
    note = owner.sign_checkpoint("example.com/log", signer)
    assert owner.verify_checkpoint(note, verifier).ok
    # The rebuild replaced the forged row with one the key vouches for.
    assert owner._tree_blocks()[1][0].node != hashlib.sha256(b"forged").digest()


@pytest.mark.skip_backend("memory")  # two objects on one database
def test_a_purge_by_another_process_is_never_missed(backend, store):
    store.append("gone", batch(*(f"gone {i}" for i in range(100))))
    _grow(store, 4 * BLOCK)
    digest(store)  # this object's tree holds "gone" in its stored blocks
    other = backend.open()
    other.purge("gone", expected_seq=100, reason="retention")
    digest(other)  # rebuilt and stored as many blocks again
    _grow(other, 10, start=5000)
    # Check the first object notices the purge (the generation moved), not only a drop in
    # the number of stored blocks.
    assert digest(store).root == _reference_root(store)


def test_blocks_read_before_a_purge_are_never_stored_after_it(backend, store):
    store.append("gone", batch(*(f"gone {i}" for i in range(40))))
    _grow(store, 2 * BLOCK)
    generation = store._tree_generation()
    rows = store._tree_blocks()[1]
    store.purge("gone", expected_seq=40, reason="retention")
    # Check a saver that read its records before the purge (even rebuilding from nothing)
    # is refused, whatever is stored now.
    assert store._save_tree_blocks(rows, replace=True, generation=generation) in (False, None)
    assert digest(_fresh(backend, store)).root == _reference_root(store)


def test_malformed_block_rows_cost_a_rebuild_never_an_error(tmp_path):
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path) as store:
        _grow(store, 4 * BLOCK)
        d = digest(store)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE ledger_blocks SET last_position = 'x' WHERE block = 1")
    with SQLiteEventStore(path) as store:
        assert verify_digest(store, d).ok
        assert digest(store).root == d.root


def test_the_worker_checks_its_range_and_sends_no_text(tmp_path):
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path) as store:
        _grow(store, 3 * BLOCK)
        file = store._reopen_path()
        assert file is not None
        boundary = store._tree_blocks()[1][0].last_position if digest(store) else 0
        worker = ledger_scan._start_worker(
            (file[0], file[1:], SCAN_ROWS, None, 0, 1 << 62, boundary)
        )
        assert worker is not None
        part = ledger_scan._result(worker, timeout=60)
        here = ledger_scan._scan_part(store._scan_rows, None, 0, 1 << 62, boundary, None)
    assert part is not None and part.bad is None
    assert (part.size, part.levels, list(part.positions)) == (
        here.size,
        here.levels,
        list(here.positions),
    )
    assert all(r[6] == "" for r in [*part.firsts.values(), *part.lasts.values()])


def test_a_worker_that_cannot_run_leaves_the_pass_to_this_process(
    tmp_path, split_small, monkeypatch
):
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path) as store:
        _grow(store, 6 * BLOCK)
        d = digest(store)
        monkeypatch.setattr(sys, "executable", "")
        assert ledger_scan._start_worker(("x",)) is None
        assert verify_digest(store, d).ok
        # A path that names another file now (renamed over it): no worker either.
        monkeypatch.undo()
        (tmp_path / "other.db").write_bytes(path.read_bytes())
        (tmp_path / "other.db").replace(path)
        assert store._reopen_path() is None


def test_a_read_only_store_says_it_cannot_repair_a_block(tmp_path):
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path) as store:
        _grow(store, 2 * BLOCK)
        d = digest(store)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE ledger_blocks SET node = zeroblob(32) WHERE block = 0")
    with SQLiteEventStore(path, read_only=True) as ro:
        report = verify_digest(ro, d)
    assert report.ok
    assert "open the store writable and verify again" in report.message
    with SQLiteEventStore(path) as store:
        report = verify_digest(store, d)
        assert "was rebuilt" in report.message
        assert verify_digest(store, d).message.endswith(f"root {d.root})")


# ---------------------------------------------------------------- edges


def test_a_tree_of_whole_blocks_proves_from_a_new_object(backend, store):
    _grow(store, 2 * BLOCK)  # no record after the last block: the newest leaf is in a block
    old = digest(store)
    again = _fresh(backend, store)
    assert again.prove_consistency(old).hashes == ()  # its newest leaf checked in its block
    _grow(store, 3, start=2 * BLOCK)
    now = digest(again)
    assert verify_consistency(old, now, again.prove_consistency(old, digest=now))


def test_a_record_deleted_under_a_stored_block_is_named(backend, store):
    _grow(store, 3 * BLOCK)
    digest(store)
    (first,) = store.read_all(limit=1)
    _delete(backend, store, first.stream_id, first.seq + 1)
    again = _fresh(backend, store)
    with pytest.raises(ChainIntegrityError, match="deleted from the block or inserted"):
        prove(again, StreamKey(first.stream_id), first.seq)


@pytest.mark.parametrize("backend", ["memory"], indirect=True)
def test_many_old_blocks_are_proven_with_a_bounded_cache(backend, store):
    from eventlog.ledger_tree import _CACHED_BLOCKS

    _grow(store, (_CACHED_BLOCKS + 4) * BLOCK, memories=1)
    d = digest(store)
    again = _fresh(backend, store)
    for block in range(_CACHED_BLOCKS + 4):  # each proof touches another old block
        proof = prove(again, StreamKey("m0"), block * BLOCK + 1, digest=d)
        assert verify_inclusion(proof, d)
    assert len(ledger_module._LEDGERS[again]._old) == _CACHED_BLOCKS


def test_a_locked_database_keeps_the_tree_in_memory(tmp_path):
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path, busy_timeout=0.2) as store:
        _grow(store, 2 * BLOCK)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # a writer holding the lock: the save must not wait
        d = digest(store)
        assert d.root == _reference_root(store)
        assert store._tree_blocks()[1] == []
        other.execute("COMMIT")
        other.close()
        _grow(store, 1, start=2 * BLOCK)
        digest(store)  # saved now
        assert len(store._tree_blocks()[1]) == 2


def test_a_failing_or_slow_worker_leaves_its_range_here(tmp_path, caplog):
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path) as store:
        _grow(store, 3 * BLOCK)
        file = store._reopen_path()
    assert file is not None
    # A path that is not a ledger: the worker fails, says so in the log, and returns nothing.
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database")
    st = junk.stat()
    worker = ledger_scan._start_worker(
        (str(junk), (st.st_dev, st.st_ino), SCAN_ROWS, None, 0, 0, 0)
    )
    assert worker is not None
    assert ledger_scan._result(worker, timeout=60) is None
    assert "worker process failed" in caplog.text
    # Another file's identity: the worker refuses quietly (exit 3).
    caplog.clear()
    worker = ledger_scan._start_worker((file[0], (st.st_dev, st.st_ino), SCAN_ROWS, None, 0, 0, 0))
    assert worker is not None
    assert ledger_scan._result(worker, timeout=60) is None
    assert "worker process failed" not in caplog.text
    # A worker past its time is stopped.
    worker = ledger_scan._start_worker((file[0], file[1:], SCAN_ROWS, None, 0, 1 << 62, 0))
    assert worker is not None
    assert ledger_scan._result(worker, timeout=0.001) is None
    assert worker.process.returncode is not None


def test_a_package_planted_in_the_working_directory_never_runs_with_the_key(tmp_path, monkeypatch):
    # An attacker who can write to the caller's working directory plants an `eventlog`
    # package there: the worker, which is handed the chain key, must import ours.
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path, chain_key=_KEY) as store:
        _grow(store, 2 * BLOCK)
        file = store._reopen_path()
    assert file is not None
    planted = tmp_path / "cwd" / "eventlog"
    planted.mkdir(parents=True)
    stolen = tmp_path / "stolen"
    (planted / "__init__.py").write_text(
        f"open({str(stolen)!r}, 'w').write('key taken')\n", encoding="utf-8"
    )
    monkeypatch.chdir(planted.parent)
    worker = ledger_scan._start_worker((file[0], file[1:], SCAN_ROWS, _KEY, 0, 1 << 62, 0))
    assert worker is not None
    part = ledger_scan._result(worker, timeout=60)
    assert part is not None and part.size == 2 * BLOCK and part.bad is None
    assert not stolen.exists()
