"""The filtered wall clock, and what it buys: one jumped reading never freezes a memory's time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from eventlog import SQLiteEventStore, UserMessage, clock
from eventlog.clock import WallClock
from projections import MessageWindowChatMemory

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class _Clocks:
    """A wall clock and a monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.wall = T0
        self.mono = 1000.0

    def tick(self, seconds: float, *, wall_extra: timedelta = timedelta(0)) -> None:
        self.mono += seconds
        self.wall += timedelta(seconds=seconds) + wall_extra

    def clock(self, **kwargs: float) -> WallClock:
        return WallClock(wall=lambda: self.wall, mono=lambda: self.mono, **kwargs)


def test_a_one_off_forward_jump_is_replaced_by_the_monotonic_estimate():
    c = _Clocks()
    wall_clock = c.clock()
    assert wall_clock.now() == T0
    c.tick(5, wall_extra=timedelta(days=30))  # one reading a month ahead
    assert wall_clock.now() == T0 + timedelta(seconds=5)
    c.wall -= timedelta(days=30)  # the clock is right again
    c.tick(5)
    assert wall_clock.now() == T0 + timedelta(seconds=10)


def test_a_step_that_persists_for_settle_seconds_is_followed():
    c = _Clocks()
    wall_clock = c.clock(settle=60.0)
    wall_clock.now()
    c.tick(1, wall_extra=timedelta(hours=1))  # NTP corrects a clock that was an hour slow
    assert wall_clock.now() == T0 + timedelta(seconds=1)
    c.tick(30)
    assert wall_clock.now() == T0 + timedelta(seconds=31)  # still settling
    c.tick(31)
    assert wall_clock.now() == c.wall  # it held for 60 s: followed
    c.tick(1)
    assert wall_clock.now() == c.wall


def test_slew_within_tolerance_is_trusted_and_incomparable_monotonic_jumps_trust_the_wall():
    c = _Clocks()
    wall_clock = c.clock()
    wall_clock.now()
    c.tick(3600, wall_extra=timedelta(seconds=1.5))  # 417 ppm over an hour: slewing
    assert wall_clock.now() == c.wall
    c.mono -= 50_000.0  # a monotonic clock that went back (restored process, test clock)
    c.wall += timedelta(days=400)
    assert wall_clock.now() == c.wall


@pytest.mark.parametrize("jump", [timedelta(days=365), timedelta(minutes=10)])
def test_one_jumped_reading_does_not_freeze_a_memory(tmp_path, monkeypatch, jump):
    c = _Clocks()
    monkeypatch.setattr(clock, "CLOCK", c.clock())
    with SQLiteEventStore(tmp_path / "chat.db") as store:
        memory = MessageWindowChatMemory(id="conv", max_messages=10, store=store)
        memory.add(UserMessage("one"))
        c.tick(2, wall_extra=jump)
        memory.add(UserMessage("two"))  # written during the jump
        c.wall -= jump
        c.tick(2)
        memory.add(UserMessage("three"))
        times = [r.recorded_at for r in store.read("conv")]
        # Check times stay in order and near the real time, never pinned to the jumped one.
        assert times == sorted(times)
        assert times[-1] - T0 < timedelta(seconds=10)
        assert [m.text for m in memory.as_of(at=T0 + timedelta(seconds=5))] == [
            "one",
            "two",
            "three",
        ]


def test_a_jump_with_no_monotonic_time_elapsed_is_still_a_jump():
    c = _Clocks()
    wall_clock = c.clock()
    assert wall_clock.now() == T0
    c.wall += timedelta(hours=1)  # the wall clock moved, the monotonic clock did not
    assert wall_clock.now() == T0


def test_a_monotonic_gap_of_exactly_the_incomparable_span_is_still_compared():
    c = _Clocks()
    wall_clock = c.clock()
    wall_clock.now()
    span = 10 * 365 * 86_400.0
    # Past tolerance plus drift over that span (0.001 x 315,360,000 s): a step, not trusted.
    c.tick(span, wall_extra=timedelta(seconds=400_000))
    assert wall_clock.now() == T0 + timedelta(seconds=span)


def test_an_offset_of_exactly_the_tolerance_is_trusted():
    c = _Clocks()
    wall_clock = c.clock(tolerance=1.0, drift=0.0)
    wall_clock.now()
    c.tick(5, wall_extra=timedelta(seconds=1))
    assert wall_clock.now() == T0 + timedelta(seconds=6)


def test_a_step_held_for_exactly_settle_seconds_is_followed_even_if_it_wobbles_by_the_tolerance():
    c = _Clocks()
    wall_clock = c.clock(tolerance=1.0, drift=0.0, settle=60.0)
    wall_clock.now()
    c.tick(10, wall_extra=timedelta(seconds=100))
    assert wall_clock.now() == T0 + timedelta(seconds=10)  # a step: the estimate
    # 60 s after the step was first seen, 1 s further off (the tolerance): the same step.
    c.tick(60, wall_extra=timedelta(seconds=1))
    assert wall_clock.now() == c.wall


def test_a_step_held_for_exactly_settle_seconds_is_followed():
    c = _Clocks()
    wall_clock = c.clock(tolerance=1.0, drift=0.0, settle=60.0)
    wall_clock.now()
    c.tick(10, wall_extra=timedelta(seconds=100))
    assert wall_clock.now() == T0 + timedelta(seconds=10)
    c.tick(59)
    assert wall_clock.now() == T0 + timedelta(seconds=69)  # not yet
    c.tick(1)
    assert wall_clock.now() == c.wall
