"""The canonical stored text of a timestamp, in a module of its own.

Kept apart from :mod:`eventlog.models` (which re-exports both names) so that the hashing code,
and with it the worker process of ``verify(digest=)`` (:mod:`eventlog.ledger_scan`), needs
neither pydantic nor the event models: that worker's start is part of the check's time.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["format_time", "parse_time"]


def format_time(moment: datetime) -> str:
    """Return the canonical stored text of a timestamp: UTC, microseconds, fixed width.

    Fixed width makes text order equal time order, so stores can compare the stored text.

    Raises:
        ValueError: If ``moment`` is naive (no timezone): its instant would be a guess.
    """
    if moment.tzinfo is UTC:  # the hot path: the stores' own clock
        return moment.isoformat(timespec="microseconds")[:26] + "Z"
    if moment.tzinfo is None or moment.utcoffset() is None:
        msg = f"timestamp {moment.isoformat()} has no timezone; pass an aware datetime (UTC)"
        raise ValueError(msg)
    # Not strftime: its %Y does not pad a year below 1000 to four digits (glibc), which broke
    # the fixed width (an imported record may be dated in year 1).
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:26] + "Z"


def parse_time(text: str) -> datetime:
    """Inverse of :func:`format_time`."""
    return datetime.fromisoformat(text)
