"""The rows an append writes (:mod:`eventlog.ledger_rows`): what a caller may not slip past the
append path - stream keys no store writes, records out of time order, imported salts,
commitments and formats that do not belong to the store - on every backend."""

from __future__ import annotations

from typing import Any

import pytest

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
