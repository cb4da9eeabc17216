"""A time copied from `history` shows the view after that event; ranges and options that would
read as something else are refused (found trying the commands as a user debugging a memory)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from freezegun import freeze_time

from eventlog import SQLiteEventStore, UserMessage
from projections import MessageWindowChatMemory
from projections.grammar import parse_when


@pytest.fixture
def subsecond(tmp_path):
    """Three events at 10:00:00.250, .500 and .750 of one second."""
    path = tmp_path / "t.db"
    with SQLiteEventStore(path) as store:
        memory = MessageWindowChatMemory("c", max_messages=5, store=store)
        for i, text in enumerate(("one", "two", "three"), 1):
            with freeze_time(datetime(2026, 1, 1, 10, 0, 0, 250_000 * i, tzinfo=UTC)):
                memory.add(UserMessage(text))
    return path


def test_a_time_copied_from_history_shows_the_view_after_its_events(ok, subsecond) -> None:
    """`history` prints times to the second; before, `show --at` that time showed the view
    before every event of that second (here: no messages at all)."""
    listing = ok("--db", subsecond, "history", "c").stdout
    assert "2026-01-01 10:00:00" in listing
    shown = ok("--db", subsecond, "show", "c", "--at", "2026-01-01 10:00:00").stdout
    assert "after seq 3 of 3" in shown
    # Check a time with a fraction is exact, as before.
    exact = ok("--db", subsecond, "show", "c", "--at", "2026-01-01T10:00:00.600").stdout
    assert "after seq 2 of 3" in exact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-01 10:00:00", datetime(2026, 1, 1, 10, 0, 0, 999_999, tzinfo=UTC)),
        ("2026-01-01T10:00:00.000", datetime(2026, 1, 1, 10, 0, tzinfo=UTC)),
        ("2026-01-01T10:00:00,5+00:00", datetime(2026, 1, 1, 10, 0, 0, 500_000, tzinfo=UTC)),
    ],
)
def test_a_time_without_a_fraction_names_its_whole_second(text, expected) -> None:
    assert parse_when(text) == expected


def test_a_range_ending_before_it_starts_is_refused(cli, subsecond) -> None:
    # Before: an empty table, which reads as "no events there".
    result = cli("--db", subsecond, "history", "c", "--from", "3", "--to", "2")
    assert result.returncode == 2
    assert "--to 2 is before --from 3" in result.stderr


def test_keep_system_first_without_a_policy_is_refused(cli, subsecond) -> None:
    # Before: silently ignored (it shapes a what-if window, and there was none).
    result = cli("--db", subsecond, "show", "c", "--keep-system-first")
    assert result.returncode == 2
    assert "pass it with --policy SPEC" in result.stderr


def test_show_at_refuses_a_time_moved_past_it_by_hand(cli, tmp_path) -> None:
    """The stored times find the seq; a record's time edited past `--at` made them name the
    record before it, whose genuine view was shown as the one at that time."""
    import sqlite3

    path = tmp_path / "t.db"
    with SQLiteEventStore(path) as store:
        for day, text in enumerate(("one", "two", "three", "four", "five"), 1):
            with freeze_time(datetime(2026, 1, day, tzinfo=UTC)):
                MessageWindowChatMemory("c", max_messages=2, store=store).add(UserMessage(text))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET recorded_at = '2026-01-03T23:00:00.000000Z' WHERE seq = 3")
    conn.close()
    result = cli("--db", path, "show", "c", "--at", "2026-01-03 12:00")
    # Check it refuses, naming the record, instead of "after seq 2" (one, two).
    assert result.returncode != 0
    assert "breaks at seq 3" in result.stderr
    assert "Traceback" not in result.stderr
