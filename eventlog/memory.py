"""Moved to :mod:`eventlog.recorders.memory` (the backends have their own package). This path
stays importable for code written against it, e.g. ``from eventlog.memory import
InMemoryEventStore``; new code imports from :mod:`eventlog`."""

from __future__ import annotations

from eventlog.recorders.memory import InMemoryEventStore

__all__ = ["InMemoryEventStore"]
