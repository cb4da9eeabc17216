"""The stores' wall clock, filtered so that one bad reading cannot freeze a memory's time.

A memory's times never go backwards (a store stamps a record no earlier than the head), so a
single reading from a clock that jumped ahead - a VM resumed with a stale offset, a manual
``date`` command, NTP stepping the wrong way - would stamp one record in the future and pin
every later record of that memory to that future time: ``as_of(at=now)`` would be empty and
retention would never find it idle.

:class:`WallClock` checks each wall-clock reading against the monotonic clock, which does not
step. A reading that disagrees with where the monotonic clock says the wall clock should be
(by more than a tolerance that grows with the time since the last agreeing reading, for NTP
slewing) is taken to be a step; while a step is younger than ``settle`` seconds, the clock
answers the monotonic estimate instead. A step that persists for ``settle`` is a real
correction, and the wall clock is followed again. This is the check hybrid logical clocks apply
to remote timestamps (Kulkarni et al., "Logical Physical Clocks", 2014: refuse readings beyond
a maximum offset), applied to the local clock against the local monotonic clock.

A monotonic clock that goes backwards or jumps by years cannot be compared (freezegun replaces
both clocks in tests; a process may be checkpointed and restored): the reading is then trusted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

__all__ = ["CLOCK", "WallClock"]

_INCOMPARABLE = 10 * 365 * 86_400.0  # a monotonic jump this large is not a real elapsed time


def _wall() -> datetime:
    # datetime.now (not time.time) so freezegun moves it in tests.
    return datetime.now(UTC)


def _mono() -> float:
    return time.monotonic()  # looked up per call, so freezegun's replacement is seen


class WallClock:
    """UTC wall-clock readings with one-off jumps filtered out (see the module docstring).

    Args:
        tolerance: Seconds of disagreement with the monotonic estimate always accepted.
        drift: Extra tolerance per second since the last agreeing reading (NTP slews the wall
            clock by up to 500 ppm).
        settle: Seconds a step must persist before the wall clock is followed again.
        wall: The wall clock (aware UTC datetimes); for tests.
        mono: The monotonic clock (seconds); for tests.
    """

    def __init__(
        self,
        *,
        tolerance: float = 1.0,
        drift: float = 0.001,
        settle: float = 60.0,
        wall: Callable[[], datetime] = _wall,
        mono: Callable[[], float] = _mono,
    ) -> None:
        self._tolerance = tolerance
        self._drift = drift
        self._settle = settle
        self._wall = wall
        self._mono = mono
        self._lock = threading.Lock()
        self._anchor: tuple[datetime, float] | None = None  # last trusted (wall, mono)
        self._step: tuple[float, float] | None = None  # (seconds off, mono when first seen)

    def now(self) -> datetime:
        """The current UTC time: the wall clock, unless it just stepped away from the
        monotonic clock's estimate (then the estimate)."""
        wall, mono = self._wall(), self._mono()
        with self._lock:
            anchor = self._anchor
            if anchor is None:
                self._anchor = (wall, mono)
                return wall
            elapsed = mono - anchor[1]
            if not 0.0 <= elapsed <= _INCOMPARABLE:
                self._anchor, self._step = (wall, mono), None
                return wall
            expected = anchor[0] + timedelta(seconds=elapsed)
            off = (wall - expected).total_seconds()
            if abs(off) <= self._tolerance + self._drift * elapsed:
                self._anchor, self._step = (wall, mono), None
                return wall
            step = self._step
            if step is None or abs(off - step[0]) > self._tolerance:
                self._step = step = (off, mono)  # a new step (or a different one)
            if mono - step[1] >= self._settle:
                self._anchor, self._step = (wall, mono), None  # it held: a real correction
                return wall
            return expected


CLOCK = WallClock()
"""The process's clock, shared by every store (the clocks it reads are process-wide too)."""
