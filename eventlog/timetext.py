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
        ValueError: If ``moment`` is naive (no timezone): its instant would be a guess; or if
            it falls outside the years 1-9999 in UTC.
    """
    if moment.tzinfo is UTC:  # the hot path: the stores' own clock
        return moment.isoformat(timespec="microseconds")[:26] + "Z"
    if moment.tzinfo is None or moment.utcoffset() is None:
        msg = f"timestamp {moment.isoformat()} has no timezone; pass an aware datetime (UTC)"
        raise ValueError(msg)
    try:
        utc = moment.astimezone(UTC)
    except OverflowError:
        msg = (
            f"timestamp {moment.isoformat()} is outside the years 1-9999 once converted to UTC; "
            "pass a time within them"
        )
        raise ValueError(msg) from None
    # isoformat, not strftime: strftime's %Y does not pad years before 1000 on every platform,
    # and a short year would sort after every four-digit one.
    return utc.isoformat(timespec="microseconds")[:26] + "Z"


def parse_time(text: str) -> datetime:
    """Inverse of :func:`format_time`."""
    return datetime.fromisoformat(text)
