"""eventlog.validation at its edges: what is shown of a value, how deep JSON may nest, and
which time bounds are refused (the rules every way in shares; the conformance kit checks
that each backend applies them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo

import pytest

from eventlog.validation import (
    MAX_DEPTH,
    _one_line,
    check_at,
    check_tail,
    meta_problem,
    nesting_depth,
    shown,
)


def _nested(depth: int) -> str:
    """A JSON object nested ``depth`` levels deep (objects and lists in turn)."""
    text = "1"
    for level in range(depth - 1):
        text = f"[{text}]" if level % 2 else f'{{"a":{text}}}'
    return f'{{"a":{text}}}'


def test_shown_keeps_a_value_up_to_the_limit_and_cuts_a_longer_one():
    exact = "x" * 78  # repr adds the two quotes: 80 characters
    assert shown(exact) == repr(exact)
    longer = "x" * 79
    cut = shown(longer)
    assert len(cut) == 80
    assert cut.endswith("...")
    assert cut.startswith("'xxx")


@pytest.mark.parametrize("depth", [1, 2, 5, MAX_DEPTH - 1, MAX_DEPTH])
def test_meta_nested_up_to_the_limit_is_accepted(depth):
    assert meta_problem(_nested(depth)) is None


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, MAX_DEPTH + 5])
def test_meta_nested_past_the_limit_is_refused_naming_the_limit(depth):
    assert meta_problem(_nested(depth)) == (
        f"nests JSON more than {MAX_DEPTH} levels deep, which no chatledger record does "
        "(it would exhaust the parser's recursion)"
    )


def test_nesting_depth_counts_both_kinds_of_bracket():
    # Four openers, two of each kind, four levels: past a limit of 3 whichever kind nests.
    text = '{"a":[{"b":[1]}]}'
    assert nesting_depth(text, 3) == 4
    assert nesting_depth('[{"a":[{"b":1}]}]', 3) == 4
    # Within the limit the answer says only "not deeper than the limit".
    assert nesting_depth(text, 4) <= 4
    # Brackets inside strings do not count.
    assert nesting_depth('{"a":"[[[[{{{{"}', 2) == 1


class _NoOffset(tzinfo):
    """A tzinfo that does not know its offset: the instant is still a guess."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str | None:
        return None


def test_check_at_refuses_a_time_whose_zone_gives_no_offset():
    with pytest.raises(ValueError, match="has no timezone, so its instant is a guess"):
        check_at("as_of", datetime(2026, 1, 1, tzinfo=_NoOffset()))
    with pytest.raises(ValueError, match="has no timezone"):
        check_at("as_of", datetime(2026, 1, 1))  # naive: the case refused
    with pytest.raises(TypeError, match="at must be a timezone-aware datetime, got '2026'"):
        check_at("as_of", "2026")
    check_at("as_of", datetime(2026, 1, 1, tzinfo=UTC))


def _chunked(first: str, second: str) -> str:
    """Balanced pairs, then ``first`` ending exactly one scanning chunk in, then ``second``:
    nesting that only the depth carried from one chunk into the next can see."""
    pad = 65536 - len(first)
    assert pad % 4 == 0
    return "[]" * (pad // 4) + "{}" * (pad // 4) + first + second


@pytest.mark.parametrize(
    ("first", "second", "limit", "deeper"),
    [
        # Opened with one kind of bracket and closed partly with the other within the first
        # chunk: the carried depth must count all four.
        ("{" * 10 + "[" * 10 + "]" * 4 + "}" * 4, "[" * 37, 48, True),
        ("{" * 10 + "[" * 10 + "]" * 4 + "}" * 4, "[" * 36, 48, False),
        # Exactly at the limit in the first chunk, past it only in the second.
        ("[" * 48 + "]" * 48, "[" * 49, 48, True),
        ("{" * 48, "[", 48, True),
        ("{" * 48, "}", 48, False),
    ],
)
def test_nesting_depth_carries_the_depth_across_chunks(first, second, limit, deeper):
    text = _chunked(first, second)
    assert len(text) == 65536 + len(second)
    assert (nesting_depth(text, limit) > limit) is deeper


def test_check_tail_accepts_any_64_bit_position_and_nothing_below():
    check_tail("read_all", -(2**63), None)
    check_tail("read_all", 2**63 - 1, 0)
    with pytest.raises(ValueError, match=r"read_all: gt=-9223372036854775809 is outside"):
        check_tail("read_all", -(2**63) - 1, None)


def test_a_long_error_is_put_on_one_line_and_cut_after_200_characters():
    assert _one_line(ValueError("a\n  b\tc")) == "a b c"
    exact = "x" * 200
    assert _one_line(ValueError(exact)) == exact
    assert _one_line(ValueError("x" * 201)) == exact + "..."
    assert _one_line(ValueError("y " * 150)) == ("y " * 100)[:200] + "..."
