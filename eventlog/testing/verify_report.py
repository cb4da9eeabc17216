"""Store contract: verify() reports every bad stream and malformed row, and never aborts."""

from __future__ import annotations

import pytest

from eventlog.hashing import CONTENT_MISMATCH
from eventlog.testing.records import batch, user_payload


def _rename(backend, store, old, new):
    """Move a stream's rows to another stored key behind the store's back."""
    backend.rename_stream(store, old, new)


class VerifyReportContract:
    """The verify report part of the contract."""

    @pytest.mark.parametrize(
        ("column", "value", "reason"),
        [
            (
                "recorded_at",
                "yesterday",
                "malformed recorded_at 'yesterday': not canonical UTC time text",
            ),
            (
                "recorded_at",
                "2026-01-01T00:00:00+00:00",
                "malformed recorded_at '2026-01-01T00:00:00+00:00': not canonical UTC time text",
            ),
            ("hash", "zz" * 32, f"malformed hash {'zz' * 32!r}: not 64 lowercase hex digits"),
            (
                "prev_hash",
                "AB" * 32,
                f"malformed prev_hash {'AB' * 32!r}: not 64 lowercase hex digits",
            ),
            ("format", 7, "malformed format 7: not 1, 2 or 3"),
            ("commitment", "c0ffee", "malformed commitment 'c0ffee': not 64 lowercase hex digits"),
            ("salt", "x" * 32, f"malformed salt {'x' * 32!r}: not 32 lowercase hex digits"),
        ],
    )
    def test_malformed_rows_are_reported_as_such(self, backend, store, column, value, reason):
        store.append("u1", batch("a", "b", "c"))
        store.append("u2", batch("fine"))
        backend.tamper(store, "u1", 2, column, value)
        report = backend.open().verify()
        # Check the row is named malformed, the other stream verifies, and nothing raised.
        assert report.failures == {"u1": (2, reason)}
        assert report.malformed == (("u1", 2, reason),)
        assert report.records == 4
        assert backend.open().verify("u1").failures == {"u1": (2, reason)}

    @pytest.mark.parametrize("key", ["~i:007", "~x:nope", "~t:[1"])
    def test_a_stream_key_that_is_not_canonical_is_reported(self, backend, store, key):
        store.append("u1", batch("a", "b"))
        store.append("u2", batch("fine"))
        _rename(backend, store, "u1", key)
        report = backend.open().verify()
        reason = f"malformed stream key {key!r}: not the canonical key of a memory id"
        # Check every row of the stream is reported, and the listing of keys did not abort.
        # ("u1" keeps its head seal with no rows left: a backend that lists its seals,
        # Recorder._sealed_keys, reports that deletion as well.)
        assert report.failures[key] == (1, reason)
        assert set(report.failures) - {key} <= {"u1"}
        assert report.malformed == ((key, 1, reason), (key, 2, reason))
        assert set(report.checked) - {"u1"} == {key, "u2"}
        assert report.records == 3

    def test_the_report_is_complete(self, backend, store):
        store.append("a", batch("1", "2", "3", "4"))
        store.append("b", batch("1", "2", "3"))
        store.append("c", batch("ok"))
        backend.tamper(store, "a", 2, "meta", '{"forged":true}')
        backend.tamper(store, "a", 4, "recorded_at", "yesterday")
        backend.tamper(store, "b", 3, "payload", user_payload("forged"))
        report = backend.open().verify()
        # Check every bad stream is listed with its first bad seq, every record is counted (also
        # those after a break), and a malformed row after a stream's first break is still listed.
        assert report.failures == {"a": (2, CONTENT_MISMATCH), "b": (3, CONTENT_MISMATCH)}
        assert report.records == 8
        assert report.malformed == (
            ("a", 4, "malformed recorded_at 'yesterday': not canonical UTC time text"),
        )
        assert report.checked == ("a", "b", "c")
        assert report.first_bad_seq("c") is None
        assert not report.ok
