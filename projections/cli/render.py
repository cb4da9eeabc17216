"""How the CLI prints: rich consoles, one-line message previews, JSON lines and counts.

rich is imported inside the functions that draw: ``chatledger --help`` never needs it and it
costs tens of milliseconds to import.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from eventlog.lc4j_json import message_to_obj
from eventlog.messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    TextContent,
    ToolExecutionResultMessage,
    UserMessage,
)
from eventlog.models import (
    CompactionRun,
    ContentErased,
    ContextSent,
    MemoryErased,
    MemoryPurged,
    MessageAdded,
    MessageRetracted,
    MessagesSet,
    Record,
    RecordQuarantined,
    SummaryRecorded,
)
from eventlog.serialization import decode_event, require_opened
from projections.adapters.langgraph_events import summary as langgraph_summary
from projections.cli.model import Ref, forked_from, window_size

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress
    from rich.text import Text

__all__ = [
    "call_names",
    "console",
    "describe",
    "emit",
    "message_obj",
    "plain",
    "plural",
    "preview",
    "progress",
    "record_json",
    "record_summary",
    "ref_text",
    "role",
    "short",
    "title",
    "when",
]

_ROLE_STYLES = {
    "system": "magenta",
    "user": "cyan",
    "ai": "green",
    "tool": "yellow",
    "custom": "blue",
    "langgraph": "blue",
}


def console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr): styled on a terminal; piped, plain lines never padded
    or wrapped (:mod:`projections.cli.consoles`)."""
    from projections.cli.consoles import PipedConsole, TerminalConsole

    # markup=False: message texts and memory ids may contain [brackets]; styles go via Text.
    out = TerminalConsole(stderr=stderr, highlight=False, markup=False)
    if not out.is_terminal:
        return PipedConsole(stderr=stderr, highlight=False, markup=False)
    return out


def emit(obj: object) -> None:
    """Write one JSON line to stdout."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 event``, ``2 events`` (``nouns`` for irregular plurals)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def when(moment: datetime) -> str:
    """A time for tables: UTC, to the second."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def ref_text(ref: Ref) -> str:
    """``5`` for the message of event 5, ``9.2`` for item 2 of the set at event 9."""
    return str(ref[0]) if ref[1] == 0 else f"{ref[0]}.{ref[1]}"


def short(text: str, width: int = 70) -> str:
    """``text`` on one line, cut with an ellipsis at ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _contents_text(contents: Sequence[Any]) -> str:
    return " ".join(
        c.text if isinstance(c, TextContent) else f"[{c.type.lower()}]" for c in contents
    )


def call_names(messages: Iterable[ChatMessage]) -> dict[str, str]:
    """Call id -> tool name of the tool calls the AI messages among ``messages`` make: how a
    tool result stored without its tool's name (the Agents SDK's ``function_call_output`` has
    only the call id) is named after its call, here and in the inspector."""
    return {
        r.id: r.name
        for m in messages
        if isinstance(m, AiMessage)
        for r in m.tool_execution_requests
        if r.id and r.name
    }


def describe(message: ChatMessage, tool_names: dict[str, str] | None = None) -> tuple[str, str]:
    """A message's role and a one-line text for humans (tool calls as ``→ name(args)``).

    Args:
        message: The message.
        tool_names: Call id -> tool name of the calls seen so far, filled here as AI messages
            pass: a tool result stored without its tool's name (the Agents SDK's
            ``function_call_output`` has only the call id) is shown with the name of its call.
    """
    if isinstance(message, SystemMessage):
        return "system", message.text
    if isinstance(message, UserMessage):
        text = _contents_text(message.contents)
        return "user", f"{message.name}: {text}" if message.name else text
    if isinstance(message, AiMessage):
        parts = [message.text] if message.text else []
        parts += [f"→ {r.name}({r.arguments or ''})" for r in message.tool_execution_requests]
        if tool_names is not None:
            tool_names.update(call_names([message]))
        return "ai", " ".join(parts)
    if isinstance(message, ToolExecutionResultMessage):
        text = _contents_text(message.contents)
        name = message.tool_name or (tool_names or {}).get(message.id or "")
        return "tool", f"{name}: {text}" if name else text
    # A LangGraph checkpoint or task's writes (LedgerSaver): what it stores, not base64.
    line = langgraph_summary(message.attributes.get("langgraph"))
    if line is not None:
        return "langgraph", line
    return _framework_message(message.attributes) or (
        "custom",
        json.dumps(message.attributes, ensure_ascii=False),
    )


# The attributes the adapters store a framework's own message under (projections.adapters:
# LANGCHAIN_KEY, ITEM_KEY), read here without importing the frameworks.
_LANGCHAIN = "langchain.message"
_AGENTS_ITEM = "openai_agents.item"
_LANGCHAIN_ROLES = {"system": "system", "human": "user", "ai": "ai", "tool": "tool"}
_AGENTS_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "ai"}


def _framework_message(attributes: dict[str, Any]) -> tuple[str, str] | None:
    """A custom message an adapter wrote, in its framework's words: LangChain keeps system
    messages as custom ones (so the history keeps every one), the Agents SDK its system and
    developer messages and items chatledger has no message type for (reasoning, ...)."""
    stored = attributes.get(_LANGCHAIN)
    if isinstance(stored, dict) and isinstance(stored.get("data"), dict):
        kind = str(stored.get("type", ""))
        data = stored["data"]
        name = data.get("role") if kind == "chat" else _LANGCHAIN_ROLES.get(kind, kind)
        return str(name or kind or "custom"), _content_text(data.get("content"))
    item = attributes.get(_AGENTS_ITEM)
    if isinstance(item, dict):
        role = item.get("role")
        if isinstance(role, str) and item.get("type", "message") == "message":
            return _AGENTS_ROLES.get(role, role), _content_text(item.get("content"))
        rest = {k: v for k, v in item.items() if k != "type"}
        return str(item.get("type", "item")), json.dumps(rest, ensure_ascii=False)
    return None


def _content_text(content: object) -> str:
    """A framework message's content as text: a string, or the text of its blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        ]
        return " ".join(p for p in parts if p)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def plain(text: str) -> Text:
    """Text shown as is (no markup, no highlighting)."""
    from rich.text import Text

    return Text(text)


def title(text: str) -> Text:
    """A table title: left-aligned and never wrapped to the table's width (rich's default)."""
    from rich.text import Text

    return Text(text, style="bold", justify="left", no_wrap=True, overflow="ignore")


def role(name: str) -> Text:
    """A role name in its colour."""
    from rich.text import Text

    return Text(name, style=_ROLE_STYLES.get(name, ""))


def preview(
    message: ChatMessage, width: int = 70, tool_names: dict[str, str] | None = None
) -> Text:
    """``role text`` on one line (``tool_names`` as for :func:`describe`)."""
    from rich.text import Text

    name, text = describe(message, tool_names)
    return Text.assemble((name, _ROLE_STYLES.get(name, "")), " ", short(text, width))


def message_obj(message: ChatMessage) -> Any:
    """A message as its LangChain4j JSON object."""
    return message_to_obj(message)


def record_summary(
    record: Record, tool_names: dict[str, str] | None = None
) -> tuple[Text, int | None]:
    """A preview of an event and the size of the window after it (None: no window);
    ``tool_names`` as for :func:`describe`, shared by the events of one listing."""
    from rich.text import Text

    event = decode_event(record)
    size = window_size(record)
    if isinstance(event, MessageAdded):
        return preview(event.message, tool_names=tool_names), size
    if isinstance(event, MessagesSet):
        for message in event.messages:
            describe(message, tool_names)  # learn the calls a set brings
        first = f": {describe(event.messages[0])[1]}" if event.messages else ""
        return Text(short(f"{plural(len(event.messages), 'message')}{first}")), size
    if isinstance(event, ContentErased):
        return Text(f"(content erased: {event.erased_kind})", style="dim"), size
    if isinstance(event, MemoryErased):
        text = f"erased the content of {plural(event.record_count, 'event')}: {event.reason}"
        return Text(text, style="red"), 0
    if isinstance(event, MemoryPurged):
        text = f"erased {plural(event.event_count, 'event')}: {event.reason}"
        return Text(text, style="red"), 0
    if isinstance(event, MessageRetracted):
        where = f"{event.seq}" if not event.index else f"{event.seq} (item {event.index})"
        return Text(f"retracted the message of event {where}", style="yellow"), size
    if isinstance(event, SummaryRecorded):
        text = f"summary of {plural(len(event.covers), 'evicted message')}: {event.summary}"
        return Text(short(text), style="cyan"), size
    if isinstance(event, ContextSent):
        what = f"sent {plural(len(event.sent), 'item')} to a model ({event.policy})"
        return Text(what, style="magenta"), size
    if isinstance(event, RecordQuarantined):
        text = f"quarantined {event.memory} seq {event.seq} ({event.found}): {event.reason}"
        return Text(short(text), style="red"), 0
    if isinstance(event, CompactionRun):
        text = (
            f"compacted {len(event.compacted)}, purged {len(event.purged)}, "
            f"skipped {len(event.skipped)}, errors {len(event.errors)}"
        )
        return Text(text), size
    return Text("(window emptied)", style="dim"), 0 if record.kind == "memory_cleared" else size


def record_json(record: Record) -> dict[str, Any]:
    """One event of ``history --json``."""
    obj: dict[str, Any] = {
        "seq": record.seq,
        "kind": record.kind,
        "recorded_at": record.recorded_at_text,
        "hash": record.hash,
        "window_size": window_size(record),
    }
    if record.erased:
        obj["erased"] = True
        return obj
    require_opened(record)
    payload = json.loads(record.payload)
    if record.kind == "message_added":
        obj["message"] = payload
    elif record.kind == "messages_set":
        obj["messages"] = payload
    elif record.kind in (
        "memory_purged",
        "memory_erased",
        "compaction_run",
        "summary_recorded",
        "message_retracted",
        "record_quarantined",
        "context_sent",
    ):
        obj["event"] = payload
    origin = forked_from(record)
    if origin is not None:
        obj["forked_from"] = origin
    return obj


def progress(total: int, label: str) -> Progress:
    """A transient progress bar on stderr, shown only when stderr is a terminal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    err = console(stderr=True)
    bar = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    bar.add_task(label, total=total or None)
    return bar
