"""Store contract: one validation at the door, the same on every backend.

Whatever ``append`` accepts, export and import accept again; whatever it refuses, it refuses
with one ValueError or TypeError naming the argument, the value and the remedy, before
anything is written. Bad read bounds fail the same way everywhere (they used to raise a raw
TypeError in memory, return [] or everything on SQLite, and a driver error on PostgreSQL).
"""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from eventlog import UserMessage
from eventlog.formats.jsonl import export_jsonl, import_jsonl
from eventlog.ids import StreamKey
from eventlog.models import NewRecord
from eventlog.recorders.memory import InMemoryEventStore
from eventlog.serialization import added_record, cleared_record
from eventlog.testing.records import added, batch, settled, texts
from eventlog.validation import MAX_KEY_BYTES, MAX_SEQ

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _read(**kwargs: Any):
    return lambda store: store.read("u1", **kwargs)


class ValidationContract:
    """The validation part of the store contract."""

    @pytest.mark.parametrize(
        ("call", "error", "message"),
        [
            (_read(gt="a"), TypeError, "read: gt must be an int (a seq) or None, got 'a' (str)"),
            (_read(lte="z"), TypeError, "read: lte must be an int (a seq) or None, got 'z' (str)"),
            (_read(gt=True), TypeError, "read: gt must be an int (a seq) or None, got True (bool)"),
            (_read(gt=1.5), TypeError, "read: gt must be an int (a seq) or None, got 1.5 (float)"),
            (_read(gt=-1), ValueError, "read: gt=-1 is outside 0..9223372036854775807; seqs start"),
            (_read(lte=1 << 70), ValueError, "read: lte=1180591620717411303424 is outside 0.."),
            (_read(limit=-1), ValueError, "read: limit=-1 is outside 0..9223372036854775807; pass"),
            (
                _read(limit="2"),
                TypeError,
                "read: limit must be an int >= 0 or None (no limit), got",
            ),
            (_read(desc="yes"), TypeError, "read: desc must be True or False, got 'yes'"),
            (
                lambda store: store.read_all(gt="a"),
                TypeError,
                "read_all: gt must be an int (a position), got 'a' (str)",
            ),
            (
                lambda store: store.read_all(gt=None),
                TypeError,
                "read_all: gt must be an int (a position), got None",
            ),
            (
                lambda store: store.read_all(limit=-1),
                ValueError,
                "read_all: limit=-1 is outside 0..",
            ),
            (
                lambda store: store.seq_at("u1", "yesterday"),
                TypeError,
                "seq_at: at must be a timezone-aware datetime, got 'yesterday' (str)",
            ),
            (
                lambda store: store.seq_at("u1", datetime(2026, 1, 1)),
                ValueError,
                "seq_at: at=2026-01-01T00:00:00 has no timezone",
            ),
            (
                lambda store: store.load_snapshot("u1", "w", lte="x"),
                TypeError,
                "load_snapshot: lte must be an int (a seq) or None, got 'x' (str)",
            ),
        ],
    )
    def test_bad_bounds_fail_alike_on_every_backend(self, store, call, error, message):
        store.append("u1", batch("a", "b"))
        # Check the same exception type and the same text, naming argument and value, everywhere.
        with pytest.raises(error) as caught:
            call(store)
        assert str(caught.value).startswith(message)

    def test_edge_bounds_are_accepted(self, store):
        store.append("u1", batch("a", "b"))
        # Check zero and the largest seq are bounds, not errors.
        assert texts(store.read("u1", gt=0, lte=MAX_SEQ, limit=MAX_SEQ)) == ["a", "b"]
        assert store.read("u1", limit=0) == []
        assert store.read("u1", gt=MAX_SEQ) == []
        # Check read_all takes a position below 1 (verify looks for rows moved there by hand).
        assert len(settled(store).read_all(gt=-(1 << 62))) == 2
        assert len(store.read_all(gt=-MAX_SEQ - 1, limit=1)) == 1

    def test_a_lone_surrogate_in_an_id_is_a_value_error_naming_it(self, store):
        # Check reads and appends both refuse it, naming the id and the remedy, on every backend.
        for call in (
            lambda: store.read("a\ud800b"),
            lambda: store.append("a\ud800b", batch("x")),
            lambda: store.append(("user", "a\ud800b"), batch("x")),
            lambda: store.append(StreamKey("a\ud800b"), batch("x")),
        ):
            with pytest.raises(ValueError, match="lone surrogate") as caught:
                call()
            text = str(caught.value)
            assert "memory id" in text
            assert "a\\ud800b" in text
        with pytest.raises(ValueError, match="decode the bytes it came from as UTF-8"):
            store.append("a\ud800b", batch("x"))
        assert store.streams() == []

    def test_a_lone_surrogate_in_a_message_is_a_value_error_naming_it(self, store):
        store.append("u1", batch("a"))
        with pytest.raises(
            ValueError, match=r"item 1 \('message_added'\) payload .*lone surrogate"
        ):
            store.append("u1", [added("b"), added_record(UserMessage("oops \udcff"))])
        # Check nothing of the batch was written.
        assert texts(store.read("u1")) == ["a"]

    @pytest.mark.parametrize(
        ("item", "match"),
        [
            (
                NewRecord("message_deleted", "{}"),
                r"item 1 \('message_deleted'\) kind .* is unknown",
            ),
            (NewRecord("message_added", "not json"), r"payload 'not json' does not decode"),
            (NewRecord("message_added", '{"type":"USER"}'), r"does not decode"),
            (NewRecord("memory_cleared", "[]"), r"does not decode \(it is not a JSON object\)"),
            (NewRecord("memory_cleared", "{}", schema_version=9), r"schema_version 9 is newer"),
            (NewRecord("memory_cleared", "{}", schema_version=0), r"schema_version 0 is not"),
            (NewRecord("memory_cleared", "{}", meta="[1]"), r"meta '\[1\]' is not a JSON object"),
            (
                NewRecord("memory_cleared", "{}", meta="{oops"),
                r"meta '\{oops' is not a JSON object",
            ),
            (NewRecord("memory_cleared", "{}", meta='{"a":"\x00"}'), r"NUL character"),
            (NewRecord("memory_cleared", '{"a":"\x00"}'), r"payload .* holds a NUL character"),
            (NewRecord("memory_cleared", "{}", meta="[" * 5_000 + "]" * 5_000), r"nests JSON more"),
            (NewRecord("memory_cleared", "{}", meta='{"a":"\ud800"}'), r"lone surrogate"),
            (NewRecord("memory_cleared", 5), r"payload or meta that is not a str"),  # type: ignore[arg-type]
            (cleared_record("[]"), r"meta '\[\]' is not a JSON object"),
            (added_record(UserMessage("x"))._replace(payload="{}"), r"does not decode"),
        ],
    )
    def test_append_refuses_what_import_would(self, store, item, match):
        # Before: append took these, verify said OK, then reads failed and import refused the file.
        store.append("u1", batch("a"))
        with pytest.raises(ValueError, match=match) as caught:
            store.append("u1", [added("b"), item])
        assert "append to 'u1': item 1" in str(caught.value)
        assert "nothing was written" in str(caught.value)
        assert texts(store.read("u1")) == ["a"]

    def test_memory_ids_are_bounded_in_bytes_as_import_bounds_them(self, store):
        # Check the longest key import takes is appended, one byte more refused: on PostgreSQL it
        # used to fail with a raw "index row requires ... bytes" past about 2.7 kB.
        longest = "é" * (MAX_KEY_BYTES // 2)
        store.append(longest, batch("a"))
        for too_long in ("é" * (MAX_KEY_BYTES // 2) + "x", "x" * 1_000_000):
            with pytest.raises(ValueError, match=r"key of \d+ bytes; keys longer than 2048") as c:
                store.append(too_long, batch("a"))
            assert "use a shorter memory id" in str(c.value)
        assert [s.memory_id for s in store.streams()] == [longest]

    def test_a_stream_key_must_be_one_chatledger_writes(self, store):
        # Check a hand-made key is refused instead of aliasing another memory's key.
        for key in ("~i:007", "~x:1", "~t:[oops"):
            with pytest.raises(ValueError, match="is not a key chatledger writes"):
                store.append(StreamKey(key), batch("a"))
        store.append(StreamKey("~i:7"), batch("a"))
        store.append(StreamKey("~sys:runs"), [cleared_record()])
        assert texts(store.read(7)) == ["a"]

    def test_what_append_accepts_exports_and_imports_again(self, store):
        ids: list[Any] = [
            "plain",
            "~tilde",
            42,
            uuid.UUID(int=5),
            ("user", 7, "ü"),
            "nul\x00id",
            "",
        ]
        for i, memory_id in enumerate(ids):
            store.append(memory_id, [added(f"m{i}"), cleared_record('{"w":[]}'), added("ünï")])
        out = io.StringIO()
        export_jsonl(store, out)
        target = InMemoryEventStore()
        report = import_jsonl(target, out.getvalue().splitlines())
        assert report.records == 3 * len(ids)
        for memory_id in ids:
            assert [(r.seq, r.hash, r.payload) for r in target.read(memory_id)] == [
                (r.seq, r.hash, r.payload) for r in store.read(memory_id)
            ]
        assert target.verify().ok
