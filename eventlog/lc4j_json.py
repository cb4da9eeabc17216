"""Moved to :mod:`eventlog.formats.lc4j_json` (the formats have their own corner). This path
stays importable for code written against it, e.g. ``from eventlog.lc4j_json import
message_from_obj``; new code imports from :mod:`eventlog` or :mod:`eventlog.formats.lc4j_json`."""

from __future__ import annotations

from eventlog.formats.lc4j_json import (
    message_from_json,
    message_from_obj,
    message_to_json,
    message_to_obj,
    messages_from_json,
    messages_to_json,
)

__all__ = [
    "message_from_json",
    "message_from_obj",
    "message_to_json",
    "message_to_obj",
    "messages_from_json",
    "messages_to_json",
]
