"""How messages appear on the inspector's pages: one message, a capped list, a memory's label.

This module owns the building blocks every page uses to show messages: :class:`Shown` (one
message, its text, calls, images and ref), :class:`Listing` (at most :data:`SHOWN_MAX` of a
longer list, and how many were left out) and a memory id as pages write it. It is separate
from :mod:`projections.inspector.views` so that the pages built from it (the views, the panels
in :mod:`projections.inspector.step_panels`, the model-calls page) import it without importing
each other; the names stay importable from ``views``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from itertools import islice

from eventlog.contents import ImageContent, TextContent
from eventlog.ids import memory_id_from_key
from eventlog.messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    ToolExecutionResultMessage,
    UserMessage,
)
from projections.inspector.text import link_target
from projections.readmodel import describe
from projections.window import Entry

__all__ = ["SHOWN_MAX", "Listing", "Shown", "show"]

SHOWN_MAX = 200
"""Messages one list shows (a window, a what-if page, a diff page, an event's messages)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Shown:
    """One message as a page shows it (all text is escaped by the templates)."""

    role: str
    text: str
    ref: str = ""
    tokens: int | None = None
    calls: tuple[tuple[str, str, str], ...] = ()  # (id, name, arguments)
    images: tuple[tuple[str, str | None], ...] = ()  # (text, http(s) href or None): never loaded
    note: str = ""  # why it left, for departures


def show(
    message: ChatMessage,
    entry: Entry | None = None,
    note: str = "",
    names: dict[str, str] | None = None,
) -> Shown:
    """A message for a page: role, its whole text, tool calls with arguments, image links;
    ``names`` (call id -> tool name, :func:`tool_names`) names the tool of a result that does
    not carry it (the Agents SDK's outputs)."""
    role, text = describe(message, None if names is None else dict(names))
    calls: tuple[tuple[str, str, str], ...] = ()
    images: tuple[tuple[str, str | None], ...] = ()
    if isinstance(message, AiMessage):
        text = message.text or ""
        calls = tuple(
            (r.id or "", r.name or "", r.arguments or "") for r in message.tool_execution_requests
        )
        if message.thinking:
            text = f"{text}\n[thinking] {message.thinking}".strip()
    elif isinstance(message, UserMessage | ToolExecutionResultMessage):
        parts = [c.text for c in message.contents if isinstance(c, TextContent)]
        images = tuple(
            (c.url, link_target(c.url)) if c.url else ("(inline image data)", None)
            for c in message.contents
            if isinstance(c, ImageContent)
        )
        text = "\n".join(parts)
        if isinstance(message, ToolExecutionResultMessage):
            name = message.tool_name or (names or {}).get(message.id or "")
            head = f"{name or 'tool'} (call {message.id})"
            text = f"{head}{' [error]' if message.is_error else ''}: {text}"
        elif message.name:
            text = f"{message.name}: {text}"
    elif isinstance(message, SystemMessage):
        text = message.text
    ref = "" if entry is None else _ref_text(entry.ref)
    tokens = None if entry is None else entry.tokens
    return Shown(role, text, ref, tokens, calls, images, note)


def _ref_text(ref: tuple[int, int]) -> str:
    return str(ref[0]) if ref[1] == 0 else f"{ref[0]}.{ref[1]}"


def _label(key: str) -> str:
    memory_id = memory_id_from_key(key)
    return memory_id if isinstance(memory_id, str) else json.dumps(memory_id, default=str)


@dataclasses.dataclass(frozen=True, slots=True)
class Listing:
    """Up to :data:`SHOWN_MAX` messages of a longer list, and how many were left out."""

    items: tuple[Shown, ...] = ()
    more: int = 0

    def __iter__(self) -> Iterator[Shown]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def _listing(shown: Iterable[Shown], total: int) -> Listing:
    items = tuple(islice(shown, SHOWN_MAX))
    return Listing(items, total - len(items))
