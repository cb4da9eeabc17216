"""The refs of an item list, run-length encoded: what every event's meta records.

A ref is ``(seq, index)``: the event that brought an item and, for a ``messages_set``, which of
its items. A run is ``(first, last)`` - the adds ``first..last``, one item each - or ``(seq,
first, last)`` - items ``first..last`` of one set. Twenty thousand adds are one run, so every
operation here costs O(runs) (plus what it returns), whatever the list's length; one run is
added per ``pop`` followed by an add.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

__all__ = ["Ref", "Run", "drop_last", "extend", "length", "oldest", "remove", "tail"]

Ref = tuple[int, int]
Run = tuple[int, ...]


def extend(runs: list[Run], seq: int) -> None:
    """Add the ref ``(seq, 0)`` (an add) after the newest one, extending the last run."""
    last = runs[-1] if runs else None
    if last is not None and len(last) == 2 and last[1] == seq - 1:
        runs[-1] = (last[0], seq)
    else:
        runs.append((seq, seq))


def drop_last(runs: list[Run]) -> Ref:
    """Remove the newest ref of ``runs`` (not empty) and return it."""
    last = runs[-1]
    if len(last) == 2:
        a, b = last
        ref = (b, 0)
        if a == b:
            runs.pop()
        else:
            runs[-1] = (a, b - 1)
        return ref
    s, i, j = last
    if i == j:
        runs.pop()
    else:
        runs[-1] = (s, i, j - 1)
    return (s, j)


def tail(runs: Sequence[Run], count: int | None) -> list[Ref]:
    """The newest ``count`` refs (all of them for None), oldest first, in O(runs + count)."""
    picked: list[Ref] = []
    for run in reversed(runs):
        want = None if count is None else count - len(picked)
        if want is not None and want <= 0:
            break
        lo, hi = run[-2], run[-1]
        if want is not None:
            lo = max(lo, hi - want + 1)
        if len(run) == 2:
            picked.extend((s, 0) for s in range(hi, lo - 1, -1))
        else:
            picked.extend((run[0], i) for i in range(hi, lo - 1, -1))
    picked.reverse()
    return picked


def oldest(runs: Sequence[Run], skip: int = 0) -> Iterator[Ref]:
    """The refs of ``runs``, oldest first, lazily, after the oldest ``skip`` (skipped a run
    at a time: the newest k of a long list cost O(runs + k), not O(list))."""
    for run in runs:
        lo, hi = run[-2], run[-1]
        if skip > hi - lo:
            skip -= hi - lo + 1
            continue
        lo, skip = lo + skip, 0
        if len(run) == 2:
            yield from ((s, 0) for s in range(lo, hi + 1))
        else:
            yield from ((run[0], i) for i in range(lo, hi + 1))


def remove(runs: list[Run], ref: Ref) -> None:
    """Take ``ref`` out of ``runs`` wherever it is (splitting its run), in O(runs)."""
    seq, index = ref
    for at in range(len(runs) - 1, -1, -1):  # the newest runs first: that is where it usually is
        run = runs[at]
        pieces: list[Run]
        if len(run) == 2:
            if index != 0 or not run[0] <= seq <= run[1]:
                continue
            pieces = [(run[0], seq - 1), (seq + 1, run[1])]
        else:
            if run[0] != seq or not run[1] <= index <= run[2]:
                continue
            pieces = [(seq, run[1], index - 1), (seq, index + 1, run[2])]
        runs[at : at + 1] = [p for p in pieces if p[-2] <= p[-1]]
        return
    msg = f"ref {ref} is not in the list; it was changed under this object - run verify()"
    raise ValueError(msg)


def length(runs: Sequence[Run]) -> int:
    """How many refs ``runs`` holds."""
    return sum(run[-1] - run[-2] + 1 for run in runs)
