"""A purge excuses, to the witness, exactly the records it erased: the attacks a tombstone could
otherwise hide, on SQLite and PostgreSQL (see eventlog.witness_purges)."""

from __future__ import annotations

import json
from typing import Literal

import pytest

from eventlog import RollbackError
from eventlog.models import MemoryPurged, Record
from eventlog.recorders import postgres_erase, sqlite_erase
from eventlog.serialization import encode_event
from eventlog.testing.records import batch, settled
from eventlog.witness import FileWitness
from eventlog.witness_purges import _listed
from tests.eventlog.test_forger import Db
from tests.eventlog.test_witness import _put_back, _restore, _snapshot, _witnessed

pytestmark = pytest.mark.skip_backend("memory")  # nothing of a memory store survives it

KEY = b"k" * 32
CHECKS: tuple[Literal["anchor", "tree"], ...] = ("anchor", "tree")


def _two_memories_witnessed(backend, path):
    store = backend.open(witness=path, chain_key=KEY)
    store.append("u1", batch("a", "b"))
    store.append("u2", batch("x"))
    store.close()


def test_a_genuine_tombstone_copied_into_a_restored_copy_does_not_hide_the_rollback(
    backend, tmp_path
):
    path = tmp_path / "w"
    _two_memories_witnessed(backend, path)
    _snapshot(backend, "old")
    store = backend.open(witness=path, chain_key=KEY)
    store.append("u2", batch("y", "z"))  # what the rollback will take away
    settled(store).close()
    assert _witnessed(path)["size"] == 5
    # The app purges u1 later, in a run the witness has not seen yet (none attached).
    backend.open(chain_key=KEY).purge("u1", expected_seq=2, reason="retention")
    _snapshot(backend, "new")
    # The attacker puts the older copy back and the genuine tombstone (and u1's seal) with it,
    # so a purge after the witnessed tree seems to explain every record that went.
    _restore(backend, "old")
    _put_back(backend, "u1", "new")
    plain = backend.open(chain_key=KEY)
    assert plain.verify().ok  # a valid ledger on its own
    assert [r.kind for r in plain.read("u1")] == ["memory_purged"]
    plain.close()
    for check in CHECKS:
        with pytest.raises(RollbackError) as caught:
            backend.open(witness=FileWitness(path, check=check), chain_key=KEY)
        assert caught.value.witnessed_size == 5 and caught.value.unlisted_purges == 0
    # Check the live ledger (the purge and nothing else after the witness) is accepted.
    _restore(backend, "new")
    for check in CHECKS:
        backend.open(witness=FileWitness(path, check=check), chain_key=KEY).close()
    assert _witnessed(path)["size"] == 4  # restarted from the ledger: x, y, z and the tombstone


def test_a_purge_the_witness_has_not_seen_passes_the_tree_check(backend, tmp_path):
    # The witnessed last record survives (it is u2's): the tree check must put u1's erased
    # records back where they were, between u2's, before comparing roots.
    path = tmp_path / "w"
    store = backend.open(witness=path, chain_key=KEY)
    for memory, text in [("u1", "a"), ("u2", "x"), ("u1", "b"), ("u2", "y")]:
        store.append(memory, batch(text))
    settled(store).close()
    plain = backend.open(chain_key=KEY)
    plain.append("u1", batch("c"))  # after the witnessed tree, purged with the rest
    plain.purge("u1", expected_seq=3, reason="retention")
    settled(plain).close()
    backend.open(witness=FileWitness(path, check="tree"), chain_key=KEY, read_only=True).close()
    backend.open(witness=FileWitness(path, check="tree"), chain_key=KEY).close()
    assert _witnessed(path)["size"] == 3  # restarted from the ledger: x, y and the tombstone


def test_a_purge_by_an_older_chatledger_is_named_when_the_witness_refuses(
    backend, tmp_path, monkeypatch
):
    path = tmp_path / "w"
    _two_memories_witnessed(backend, path)
    store = backend.open(witness=path, chain_key=KEY)
    store.append("u1", batch("c"))
    store.close()

    def unlisted(head, leaves, reason, now):  # what tombstones held before they listed leaves
        return encode_event(
            MemoryPurged(
                last_seq=head.seq,
                last_hash=head.hash,
                event_count=len(leaves),
                purged_at=now,
                reason=reason,
            )
        )

    for module in (sqlite_erase, postgres_erase):
        monkeypatch.setattr(module, "tombstone", unlisted)
    backend.open(chain_key=KEY).purge("u1", expected_seq=3, reason="retention")
    with pytest.raises(RollbackError) as caught:
        backend.open(witness=path, chain_key=KEY)
    assert caught.value.unlisted_purges == 1
    assert "do not list the records they erased" in str(caught.value)


def _tombstone(**changes) -> Record:
    leaves = changes.pop("leaves", [[1, "a" * 64], [2, "b" * 64]])
    payload = {
        "last_seq": 2,
        "last_hash": "b" * 64,
        "event_count": 2,
        "purged_at": "2026-01-01T00:00:00Z",
        "reason": "r",
        "leaves": leaves,
    } | changes
    return Record(
        3,
        "u1",
        3,
        "2026-01-01T00:00:00.000000Z",
        "memory_purged",
        1,
        json.dumps(payload),
        "",
        "b" * 64,
        "c" * 64,
        "",
        "",
        3,
        "",
    )


@pytest.mark.parametrize(
    ("changes", "listed"),
    [
        ({}, [(1, "a" * 64), (2, "b" * 64)]),
        ({"leaves": None}, None),
        ({"leaves": []}, None),
        ({"event_count": 3}, None),  # lists fewer than it erased
        ({"leaves": [[2, "b" * 64], [1, "a" * 64]]}, None),  # not in position order
        ({"leaves": [[1, "a" * 64], [3, "b" * 64]]}, None),  # not before the tombstone
        ({"leaves": [[1, "a" * 64], [2, "d" * 64]]}, None),  # the last is not what it chains to
        ({"leaves": [[1, "A" * 64], [2, "b" * 64]]}, None),  # not a hash
        ({"leaves": [[0, "a" * 64], [2, "b" * 64]]}, None),  # not a position
        ({"leaves": "x" * 10}, None),
    ],
)
def test_what_a_tombstone_lists_is_used_only_when_consistent(changes, listed):
    assert _listed(_tombstone(**changes)) == listed


def test_an_old_tombstone_moved_after_the_witnessed_tree_does_not_hide_a_rollback(
    backend, tmp_path
):
    # Positions are not hashed: a forger moves a purge's genuine tombstone, which the witness
    # saw long ago, to a position after the witnessed tree, so it seems a new purge.
    path = tmp_path / "w"
    _two_memories_witnessed(backend, path)
    store = backend.open(witness=path, chain_key=KEY)
    store.purge("u1", expected_seq=2, reason="retention")
    store.close()
    _snapshot(backend, "old")
    store = backend.open(witness=path, chain_key=KEY)
    store.append("u2", batch("y", "z"))  # what the rollback will take away
    store.close()
    _restore(backend, "old")
    db = Db(backend)
    (top,) = db.run("SELECT max(position) FROM {events}")[0]
    db.run("UPDATE {events} SET position = ? WHERE kind = 'memory_purged'", top + (1 << 20))
    for check in CHECKS:
        with pytest.raises(RollbackError):
            backend.open(witness=FileWitness(path, check=check), chain_key=KEY)
