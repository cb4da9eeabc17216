"""Time the import pre-check on the line that made it quadratic: 8 MB, the issue's line.

Outside the test run. The line is ``[`` x 300, then ``"`` and ``\\"`` repeated up to
``--size`` characters: far too deep, so the gate must refuse it, and an unterminated string
of escaped quotes, which a string regex that handles escapes itself rescans from every quote
(7.1 s at 60 KB, 29 s at 120 KB, hours at 8 MB before the fix). Prints the CPU time of
:func:`eventlog.import_checks.nesting_depth` alone and of a whole
:func:`eventlog.formats.jsonl.import_jsonl` of a header plus that line (median of ``--repeat``).

    python scripts/bench_import_check.py              # the 8 MB line
    python scripts/bench_import_check.py --size 60000 # the issue's 60 KB figure
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import time
from collections.abc import Callable

from eventlog import InMemoryEventStore
from eventlog.formats.jsonl import FORMAT, FORMAT_VERSION, import_jsonl
from eventlog.import_checks import DEFAULT_MAX_DEPTH, nesting_depth

HEADER = json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "memories": []})
EIGHT_MB = 8 * 2**20  # the line (the import's line limit when it was filed)


def pathological_line(size: int) -> str:
    """``[`` x 300, ``"``, then ``\\"`` up to ``size`` characters."""
    head = "[" * 300 + '"'
    return head + '\\"' * ((size - len(head)) // 2)


def _median_cpu_s(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        call()
        times.append(time.process_time() - start)
    return statistics.median(times)


def _import(line: str) -> None:
    try:
        import_jsonl(InMemoryEventStore(), io.StringIO(f"{HEADER}\n{line}\n"))
    except ValueError as e:
        if "nests JSON more than" not in str(e):
            raise
    else:
        msg = "the pathological line was imported; it must be refused as too deep"
        raise AssertionError(msg)


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=EIGHT_MB, help="line length (default: 8 MiB)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs (median reported)")
    args = parser.parse_args(argv)
    line = pathological_line(args.size)
    depth = nesting_depth(line, DEFAULT_MAX_DEPTH)
    assert depth > DEFAULT_MAX_DEPTH, depth
    results = {
        "line_chars": float(len(line)),
        "nesting_depth_s": _median_cpu_s(
            lambda: nesting_depth(line, DEFAULT_MAX_DEPTH), args.repeat
        ),
        "import_jsonl_s": _median_cpu_s(lambda: _import(line), args.repeat),
    }
    print(f"line: {len(line):,} characters ({len(line) / 2**20:.2f} MiB)")
    print(f"nesting_depth: {results['nesting_depth_s']:.3f} s CPU (median of {args.repeat})")
    print(f"import_jsonl refusal: {results['import_jsonl_s']:.3f} s CPU (median of {args.repeat})")
    return results


if __name__ == "__main__":
    main()
