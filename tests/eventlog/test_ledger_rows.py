"""The rows an append writes (:mod:`eventlog.ledger_rows`): what a caller may not slip past the
append path - stream keys no store writes, records out of time order, imported salts,
commitments and formats that do not belong to the store - on every backend."""

from __future__ import annotations

from typing import Any

import pytest

from eventlog.errors import ConcurrencyError
from eventlog.hashing import GENESIS
from eventlog.ids import StreamKey
from eventlog.testing.records import batch


def test_a_stream_key_holding_a_nul_is_refused_before_anything_is_written(backend: Any) -> None:
    store = backend.open()
    # memory_key stores such an id JSON-escaped: used as is, the key is one verify() reports
    # malformed (and PostgreSQL text cannot hold it at all).
    with pytest.raises(ValueError, match=r"is not a key chatledger writes.*~s:"):
        store.append(StreamKey("a\x00b"), batch("x"))
    assert store.streams() == []
    store.append("a\x00b", batch("x"))  # the id itself is fine, stored escaped
    assert store.verify().ok


def test_a_stream_key_that_is_no_text_says_so_rather_than_what_it_would_be_stored_as(
    backend: Any,
) -> None:
    store = backend.open()
    with pytest.raises(ValueError, match="lone surrogate") as caught:
        store.append(StreamKey("a\ud800b"), batch("x"))
    assert "not a key chatledger writes" not in str(caught.value)


def test_an_expected_hash_the_head_does_not_have_names_the_head_found(backend: Any) -> None:
    store = backend.open()
    # A writer who believes the memory holds a record it does not (a restore, a failover).
    with pytest.raises(ConcurrencyError) as caught:
        store.append("u1", batch("a"), expected_hash="ab" * 32)
    assert (caught.value.actual, caught.value.actual_hash) == (0, GENESIS)
    (first,) = store.append("u1", batch("a"), expected_hash=GENESIS)
    with pytest.raises(ConcurrencyError) as caught:
        store.append("u1", batch("b"), expected_hash=GENESIS)
    assert (caught.value.actual, caught.value.actual_hash) == (1, first.hash)
    assert [r.seq for r in store.read("u1")] == [1]
