"""The import gate's pre-checks run in time linear in their input, and decide as before.

The bounds are CPU time (``time.process_time``), at least 10x the typical figure measured on
the 2-core CI machine (``scripts/bench_import_check.py``: 0.18 s for the whole refusal of the
8 MB line), and far below what the quadratic check took (the same line at 60 KB: 18 s; at
8 MB: hours).
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import accumulate
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog import InMemoryEventStore
from eventlog.formats.jsonl import FORMAT, FORMAT_VERSION, import_jsonl
from eventlog.import_checks import DEFAULT_MAX_DEPTH, nesting_depth
from projections.meta import check_window_record

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench_import_check.py"
HEADER = json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "memories": []})
EIGHT_MB = 8 * 2**20  # the line
EIGHT_MB_BOUND_S = 2.0  # typical 0.18 s (x11); the issue's own bound
ONE_MB_BOUND_S = 1.0  # typical <= 0.1 s for any line below; the old check: minutes


@contextmanager
def _cpu_at_most(seconds: float) -> Iterator[None]:
    start = time.process_time()
    yield
    spent = time.process_time() - start
    assert spent <= seconds, f"{spent:.2f} s of CPU, bound {seconds} s"


def pathological_line(size: int) -> str:
    """The issue's line (as in the benchmark): ``[`` x 300, ``"``, then ``\\"`` to ``size``."""
    head = "[" * 300 + '"'
    return head + '\\"' * ((size - len(head)) // 2)


def _refusal(line: str, *, header: bool = True) -> str:
    target = InMemoryEventStore()
    lines = f"{HEADER}\n{line}\n" if header else f"{line}\n"
    with pytest.raises(ValueError, match=r"^import of f refused, nothing was written: ") as e:
        import_jsonl(target, io.StringIO(lines), source="f", check=check_window_record)
    assert target.streams(include_system=True) == []
    return str(e.value)


def test_the_pathological_8_mb_line_is_refused_in_linear_time():
    line = pathological_line(EIGHT_MB)
    assert len(line) == EIGHT_MB - 1
    # Check the line is refused as too deep, as a record and as the header, well in bound
    with _cpu_at_most(EIGHT_MB_BOUND_S):
        assert "line 2 nests JSON more than" in _refusal(line)
    with _cpu_at_most(EIGHT_MB_BOUND_S):
        assert "line 1 nests JSON more than" in _refusal(line, header=False)


def _record(**fields: Any) -> str:
    obj = {
        "memory": "m",
        "seq": 1,
        "recorded_at": "2026-01-01T00:00:00.000000Z",
        "kind": "messages_set",
        "schema_version": 1,
        "payload": "[]",
        "meta": "",
        "prev_hash": "0" * 64,
        "hash": "0" * 64,
    }
    return json.dumps(obj | fields)


def test_the_pathological_text_inside_a_payload_or_meta_is_refused_in_linear_time():
    # json.dumps doubles every backslash and quote: a quarter of the limit fits the line
    text = pathological_line(EIGHT_MB // 4)
    for name in ("payload", "meta"):
        with _cpu_at_most(EIGHT_MB_BOUND_S):
            assert f"line 2: {name} nests JSON more than" in _refusal(_record(**{name: text}))


# -------------------------------------------------------------------- hostile lines, fuzzed

_UNITS = ['\\"', "\\\\", "\\", '"', "[", "]", "{", "}", '"[', "[]", "][", '\\\\"', "\\[", "é"]


@st.composite
def _hostile_lines(draw: st.DrawFn, size: int = 2**20) -> str:
    """About ``size`` characters: a prefix, then a short pattern of quotes, backslashes and
    brackets repeated to the end - the shapes that make a regex rescan."""
    prefix = draw(st.sampled_from(["", "[" * 300, "[" * 300 + '"', '{"a":"', '["', "[" * 100]))
    unit = "".join(draw(st.lists(st.sampled_from(_UNITS), min_size=1, max_size=4)))
    return prefix + unit * ((size - len(prefix)) // len(unit))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_hostile_lines())
def test_a_hostile_1_mb_line_is_refused_cleanly_in_linear_time(line):
    with _cpu_at_most(ONE_MB_BOUND_S):
        _refusal(line)


# -------------------------------------------------------------------- same decisions as before

_OLD_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _quadratic_depth(text: str, limit: int) -> int:
    """The check as it was before it was made linear: the reference for valid JSON."""
    openers = text.count("[") + text.count("{")
    if openers <= limit:
        return openers
    brackets = _NOT_BRACKET.sub("", _OLD_STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


_tricky_text = st.text(st.sampled_from('[]{}"\\/ aé\u202e\n'), max_size=8)
_json_values = st.recursive(
    st.none() | st.integers() | _tricky_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_tricky_text, inner, max_size=3),
    max_leaves=30,
)


@settings(max_examples=500)
@given(_json_values, st.integers(0, 8), st.booleans())
def test_valid_json_gets_the_same_depth_as_before_and_the_true_one(value, limit, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    got = nesting_depth(text, limit)
    assert got == _quadratic_depth(text, limit)
    assert (got > limit) == (_depth(value) > limit)
    if got <= limit:
        assert got == _depth(value) or got == text.count("[") + text.count("{")


def _frames() -> int:
    frame: FrameType | None = sys._getframe()
    count = 0
    while frame is not None:
        frame, count = frame.f_back, count + 1
    return count


@settings(max_examples=500)
@given(st.text(st.sampled_from('[]{}"\\, 1a'), max_size=120))
def test_text_passed_as_shallow_never_takes_a_parser_deeper(text):
    # The check guards json.loads, which recurses once per level and fails at the first
    # syntax error: whatever the text, a depth within the limit means the parser stays
    # within it. Checked with the recursion limit set just above the allowed depth.
    limit = 12
    if nesting_depth(text, limit) > limit:
        return
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_frames() + limit + 8)
    try:
        json.loads(text)
    except ValueError:
        pass
    finally:
        sys.setrecursionlimit(old)


def test_the_recursion_probe_catches_a_text_too_deep():
    # Check the probe above is able to fail: deeper than the limit, json.loads does recurse out
    text = "[" * 40 + "]" * 40
    assert nesting_depth(text, 12) > 12
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_frames() + 12 + 8)
    try:
        with pytest.raises(RecursionError):
            json.loads(text)
    finally:
        sys.setrecursionlimit(old)


def test_depth_is_exact_within_the_limit_across_chunks():
    # Brackets are summed in chunks of 65,536: the depth carries over a chunk's end
    shallow = "[]" * 70_000 + "[[[" + "]]]"
    assert nesting_depth(shallow, 5) == 3
    deep = "[]" * 40_000 + "[" * 10 + "]" * 10
    assert nesting_depth(deep, 5) > 5
    assert nesting_depth(DEFAULT_MAX_DEPTH * "[" + "]", DEFAULT_MAX_DEPTH) == DEFAULT_MAX_DEPTH


def test_the_benchmark_prints_its_figures():
    args = [sys.executable, str(BENCH), "--size", "20000", "--repeat", "1"]
    out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=60).stdout
    assert "line: 19,999 characters" in out
    assert "import_jsonl refusal:" in out
