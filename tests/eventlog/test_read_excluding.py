"""``read_verified_excluding``: the records named are left out, and only they. Every other
record, link, seq, end and bound is checked as ``read_verified`` checks it. Damage is done with
SQL on a real SQLite file and a real PostgreSQL schema."""

from __future__ import annotations

from typing import Any

import pytest

from eventlog import ChainIntegrityError
from eventlog.testing.records import batch, user_payload
from tests.eventlog.test_forger import Db

pytestmark = pytest.mark.skip_backend("memory")  # the damage is done with SQL

OTHER_HASH = "ab" * 32


def _conv(backend: Any, count: int = 8) -> tuple[Any, Db]:
    """``conv`` with ``count`` records, closed, and SQL access to it."""
    store = backend.open()
    store.append("conv", batch(*[f"m{i}" for i in range(1, count + 1)]))
    store.close()
    return backend.open(), Db(backend)


def _edit(db: Db, seq: int) -> None:
    db.run(
        "UPDATE {events} SET payload = ? WHERE stream_id = ? AND seq = ?",
        user_payload("damaged"),
        "conv",
        seq,
    )


def _delete(db: Db, *seqs: int) -> None:
    for seq in seqs:
        db.run("DELETE FROM {events} WHERE stream_id = ? AND seq = ?", "conv", seq)


def _seqs(store: Any, skip: set[int], **bounds: Any) -> list[int]:
    return [r.seq for r in store.read_verified_excluding("conv", skip, **bounds)]


def _refused(store: Any, skip: set[int], **bounds: Any) -> tuple[int, str]:
    with pytest.raises(ChainIntegrityError) as caught:
        store.read_verified_excluding("conv", skip, **bounds)
    return caught.value.seq, str(caught.value)


def test_a_missing_seq_is_refused_unless_it_is_excluded(backend) -> None:
    store, db = _conv(backend)
    _delete(db, 4, 5)
    # Check each deleted record must be excluded by name; excluding one is not enough.
    assert _refused(store, {4})[0] == 5
    assert "seq 5 is missing" in _refused(store, {4})[1]
    assert _refused(store, {5})[0] == 4
    assert _seqs(store, {4, 5}) == [1, 2, 3, 6, 7, 8]
    assert _seqs(store, {4, 5}, desc=True) == [8, 7, 6, 3, 2, 1]


def test_links_are_checked_between_neighbours_but_not_across_an_excluded_record(backend) -> None:
    store, db = _conv(backend)
    # Seq 4's row holds another hash: its own check fails and seq 5 no longer chains to it.
    db.run("UPDATE {events} SET hash = ? WHERE stream_id = ? AND seq = 4", OTHER_HASH, "conv")
    assert _refused(store, set())[0] == 4
    assert _seqs(store, {4}) == [1, 2, 3, 5, 6, 7, 8]
    # Check a broken link between two records that are both read is refused, naming the link.
    db.run("UPDATE {events} SET prev_hash = ? WHERE stream_id = ? AND seq = 7", OTHER_HASH, "conv")
    seq, reason = _refused(store, {4})
    assert seq == 7
    assert "prev_hash does not match the previous record's hash" in reason


def test_the_first_record_may_be_excluded_but_nothing_before_it_may_be_missing(backend) -> None:
    store, db = _conv(backend)
    _edit(db, 1)
    assert _refused(store, set())[0] == 1
    assert _refused(store, {2})[0] == 1  # excluding another record does not cover it
    assert _seqs(store, {1}) == [2, 3, 4, 5, 6, 7, 8]
    assert _seqs(store, {1}, gt=5) == [6, 7, 8]  # the first record is checked outside the range
    _delete(db, 1, 2)
    # Check with seqs 1 and 2 gone, excluding only seq 1 leaves seq 2 missing.
    seq, reason = _refused(store, {1})
    assert seq == 1
    assert "records before seq 3 are missing" in reason
    assert _seqs(store, {1, 2}) == [3, 4, 5, 6, 7, 8]


def test_a_first_record_that_does_not_start_the_chain_is_refused_unless_excluded(backend) -> None:
    store, db = _conv(backend)
    db.run("UPDATE {events} SET prev_hash = ? WHERE stream_id = ? AND seq = 1", OTHER_HASH, "conv")
    seq, reason = _refused(store, {5}, gt=4)
    assert seq == 1
    assert "does not start the chain" in reason
    assert _seqs(store, {1}, gt=4) == [5, 6, 7, 8]


def test_the_newest_record_may_be_excluded_and_is_checked_otherwise(backend) -> None:
    store, db = _conv(backend)
    _edit(db, 8)
    assert _refused(store, {7})[0] == 8
    assert _refused(store, {7}, lte=3)[0] == 8  # the head is checked whatever the range
    assert _seqs(store, {8}) == [1, 2, 3, 4, 5, 6, 7]
    assert _seqs(store, {8}, desc=True, limit=3) == [7, 6]  # the limit counts rows read


def test_a_range_starts_where_it_should_or_at_excluded_records_next_to_it(backend) -> None:
    store, db = _conv(backend)
    _delete(db, 3, 4)
    # Check an ascending read from gt=2 must begin at seq 3, or after excluded records only.
    assert _refused(store, {3}, gt=2)[0] == 4
    assert _seqs(store, {3, 4}, gt=2, limit=3) == [5, 6, 7]  # deleted rows are not read
    assert _seqs(store, {3, 4}, gt=2) == [5, 6, 7, 8]
    # Check a descending read up to lte=4 must end at seq 4, or before excluded records only.
    assert _refused(store, {4}, lte=4, desc=True)[0] == 3
    assert _seqs(store, {3, 4}, lte=4, desc=True) == [2, 1]
    assert _seqs(store, {3, 4}, gt=1, lte=6) == [2, 5, 6]


def test_content_emptied_by_hand_is_refused_where_it_is_not_excluded(backend) -> None:
    store, db = _conv(backend)
    _edit(db, 2)
    db.run("UPDATE {events} SET payload = '', salt = '' WHERE stream_id = ? AND seq = 6", "conv")
    seq, reason = _refused(store, {2})
    assert seq == 6
    assert "no erasure reached it" in reason
    assert _seqs(store, {2, 6}) == [1, 3, 4, 5, 7, 8]


def test_a_truncated_tail_is_refused_whatever_is_excluded(backend) -> None:
    store, db = _conv(backend)
    _delete(db, 8)
    # Check the sealed head is the anchor: excluding the missing newest record does not cover a
    # truncation (a broken seal is not a record), nor does excluding another one.
    for skip in ({8}, {3}, set()):
        seq, reason = _refused(store, skip)
        assert seq == 8
        assert "the tail was truncated" in reason
    assert _refused(store, {8}, lte=2)[0] == 8  # whatever the range
