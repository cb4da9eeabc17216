"""The read model: what the CLI and the inspector show, in words, from the log.

Both front ends read through this module (the inspector imports nothing from the CLI): a
message as a role and one line of text (:func:`describe`, tool results named after their
calls), an event as one line (:func:`event_line`), the window a memory recorded or another
policy would have kept, step by step, and why each message left it. Every use of the window
engine (:mod:`projections.window`), the window record (:mod:`projections.meta`) and the
audit's reasons is here, behind small functions, so the front ends deal in messages, refs and
text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, TypeAlias

from eventlog.contents import TextContent
from eventlog.ids import StreamKey, memory_key
from eventlog.messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
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
    StreamInfo,
    SummaryRecorded,
)
from eventlog.serialization import decode_event
from eventlog.store import EventStore
from projections.adapters.langgraph_events import summary as langgraph_summary
from projections.audit import walk
from projections.meta import WindowMeta
from projections.replay import read_checked, replay, view_at, window_meta
from projections.tokens import OpenAiTokenCountEstimator
from projections.validity import valid_items, valid_view
from projections.window import MessageWindowPolicy, TokenWindowPolicy, WindowPolicy

__all__ = [
    "EventLine",
    "Policy",
    "Ref",
    "Step",
    "call_names",
    "describe",
    "erased_id_label",
    "event_line",
    "forked_from",
    "make_policy",
    "plural",
    "policy_steps",
    "reason_text",
    "recorded_steps",
    "recorded_view",
    "short",
    "shown_key",
    "summary_at",
    "what_if_steps",
    "what_if_view",
    "window_size",
]

Policy: TypeAlias = WindowPolicy
"""A window policy, as ``show --policy`` and ``replay --policy`` use it."""

Ref = tuple[int, int]
"""``(seq, index)``: the event that brought a message and its place in a set event's list."""

Step = tuple[Record, list[ChatMessage], list[tuple[ChatMessage, str]]]
"""An event, the view after it, and the messages that left at it with their reasons."""

_REASONS: dict[str, str] = {
    "evicted": "evicted (window full)",
    "orphan": "orphan (its tool call left)",
    "system_replaced": "system message replaced",
    "set": "set (content replaced)",
    "cleared": "cleared",
    "retracted": "retracted (popped)",
}


def shown_key(info: StreamInfo) -> str:
    """The key a listing shows for a memory, one a command takes back: its id's stored key
    (on a ledger with erasable ids, the id, not the pseudonym it is stored under)."""
    return memory_key(info.memory_id)


def erased_id_label(store: EventStore, info: StreamInfo) -> str | None:
    """``erased (receipt RECEIPT_ID)`` for a memory whose id was erased with its content
    (erasable ids), naming the newest erasure receipt in full (``purged (tombstone at seq N)``
    when a purge came after it, ``id unknown (...)`` when neither explains the missing id);
    None for any other memory.
    The old id is gone from the ledger: the receipt is what is left to name it by."""
    if not info.id_erased:
        return None
    key = StreamKey(info.stream_id)
    newest = info.last_seq
    while newest > 0:
        page = store.read(key, lte=newest, limit=100, desc=True)
        for record in page:
            if record.kind == "memory_erased":
                return f"erased (receipt {record.position}-{record.hash})"
            if record.kind == "memory_purged":
                return f"purged (tombstone at seq {record.seq})"
        if len(page) < 100:
            break
        newest = page[-1].seq - 1
    # No receipt and no tombstone: nothing erased it. Its names row went some other way (deleted
    # by hand); calling it erased would tell an auditor a request was carried out.
    return "id unknown (no names row and no erasure receipt: restore the names table)"


def reason_text(reason: str | None) -> str:
    """Why a message left the view, for humans (``""`` while it is still in it)."""
    return "" if reason is None else _REASONS.get(reason, reason)


def window_size(record: Record) -> int | None:
    """How many messages the window held right after ``record`` (None: it records no window)."""
    meta = WindowMeta.decode(record.meta)
    return None if meta is None else meta.size


def forked_from(record: Record) -> dict[str, Any] | None:
    """The origin ``{"memory", "seq", "hash"}`` a fork's first event records, if any."""
    meta = WindowMeta.decode(record.meta)
    if meta is None or meta.forked_from is None:
        return None
    origin = meta.forked_from
    return {"memory": origin.memory, "seq": origin.seq, "hash": origin.hash}


def make_policy(
    kind: str, limit: int, model: str | None, keep_first: bool, *, evict_to: float | None = None
) -> WindowPolicy:
    """The window policy of ``--policy messages:N`` or ``--policy tokens:N:MODEL`` (with
    ``:evict_to=F``, chunked eviction).

    Raises:
        ValueError: The token model is unknown.
    """
    if kind == "messages":
        return MessageWindowPolicy(
            limit, always_keep_system_message_first=keep_first, evict_to=evict_to
        )
    estimator = OpenAiTokenCountEstimator(model or "")
    return TokenWindowPolicy(
        limit, estimator, always_keep_system_message_first=keep_first, evict_to=evict_to
    )


def recorded_view(store: EventStore, key: StreamKey, seq: int) -> list[tuple[Ref, ChatMessage]]:
    """The exact recorded view right after event ``seq``, each message with its ref."""
    return [(entry.ref, entry.message) for entry in view_at(store, key, seq)]


def summary_at(store: EventStore, key: StreamKey, seq: int) -> tuple[int, str] | None:
    """The summary a summarizing memory showed after event ``seq``: ``(its event, text)``, or
    None (no summary in force, or not a summarizing memory)."""
    if seq == 0:
        return None
    (record,) = read_checked(store, key, gt=seq - 1, lte=seq)
    at = window_meta(record).summary
    if at is None:
        return None
    (summary,) = read_checked(store, key, gt=at - 1, lte=at)
    event = decode_event(summary)
    return (at, event.summary) if isinstance(event, SummaryRecorded) else None


def what_if_steps(
    store: EventStore, key: StreamKey, policy: WindowPolicy, *, lte: int | None
) -> Iterator[tuple[Record, list[tuple[Ref, ChatMessage]]]]:
    """Replay under ``policy``: each event with the view after it, each message with its ref."""
    for record, view, _ in replay(store, key, policy, lte=lte):
        yield record, [(e.ref, e.message) for e in view]


def what_if_view(
    store: EventStore,
    key: StreamKey,
    policy: WindowPolicy,
    seq: int,
    *,
    valid_for: str | None = None,
) -> list[tuple[Ref, ChatMessage]]:
    """What a memory with ``policy`` would have shown right after event ``seq`` (as the
    provider profile ``valid_for`` accepts it, when given)."""
    last: list[tuple[Ref, ChatMessage]] = []
    if seq == 0:
        return last
    for _, view in what_if_steps(store, key, policy, lte=seq):
        last = view
    return last if valid_for is None else valid_items(last, valid_for)


def recorded_steps(store: EventStore, key: StreamKey, start: int, end: int) -> Iterator[Step]:
    """Events ``start..end`` with the recorded view after each and what left, with reasons."""
    for step in walk(store, key, after=start - 1, upto=end):
        yield (
            step.record,
            [e.message for e in step.view],
            [(d.entry.message, d.reason) for d in step.departures],
        )


def policy_steps(
    store: EventStore,
    key: StreamKey,
    policy: WindowPolicy,
    start: int,
    end: int,
    *,
    valid_for: str | None = None,
) -> Iterator[Step]:
    """Events ``start..end`` with the view ``policy`` would have shown after each (as the
    provider profile ``valid_for`` accepts it, when given), and what left that window at
    each, with the reasons the rules gave."""
    for record, view, departures in replay(store, key, policy, lte=end):
        if record.seq >= start:
            messages = [e.message for e in view]
            yield (
                record,
                messages if valid_for is None else valid_view(messages, valid_for),
                [(d.entry.message, d.reason) for d in departures],
            )


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


class EventLine(NamedTuple):
    """One event on one line: its text, a style name for it ("", "dim", "red", "yellow",
    "cyan", "magenta"), the window's size after it (None: no window) and, for a message, the
    message's role (shown before the text, in the role's colour)."""

    text: str
    style: str
    size: int | None
    role: str | None = None

    @property
    def plain(self) -> str:
        return f"{self.role} {self.text}" if self.role is not None else self.text


def event_line(record: Record, tool_names: dict[str, str] | None = None) -> EventLine:
    """What an event did, on one line (``tool_names`` as for :func:`describe`, shared by the
    events of one listing)."""
    event = decode_event(record)
    size = window_size(record)
    if isinstance(event, MessageAdded):
        name, text = describe(event.message, tool_names)
        return EventLine(short(text), "", size, name)
    if isinstance(event, MessagesSet):
        for message in event.messages:
            describe(message, tool_names)  # learn the calls a set brings
        first = f": {describe(event.messages[0])[1]}" if event.messages else ""
        return EventLine(short(f"{plural(len(event.messages), 'message')}{first}"), "", size)
    if isinstance(event, ContentErased):
        return EventLine(f"(content erased: {event.erased_kind})", "dim", size)
    if isinstance(event, MemoryErased):
        text = f"erased the content of {plural(event.record_count, 'event')}: {event.reason}"
        return EventLine(text, "red", 0)
    if isinstance(event, MemoryPurged):
        return EventLine(f"erased {plural(event.event_count, 'event')}: {event.reason}", "red", 0)
    if isinstance(event, MessageRetracted):
        where = f"{event.seq}" if not event.index else f"{event.seq} (item {event.index})"
        return EventLine(f"retracted the message of event {where}", "yellow", size)
    if isinstance(event, SummaryRecorded):
        text = f"summary of {plural(len(event.covers), 'evicted message')}: {event.summary}"
        return EventLine(short(text), "cyan", size)
    if isinstance(event, ContextSent):
        what = f"sent {plural(len(event.sent), 'item')} to a model ({event.policy})"
        return EventLine(what, "magenta", size)
    if isinstance(event, RecordQuarantined):
        text = f"quarantined {event.memory} seq {event.seq} ({event.found}): {event.reason}"
        return EventLine(short(text), "red", 0)
    if isinstance(event, CompactionRun):
        text = (
            f"compacted {len(event.compacted)}, purged {len(event.purged)}, "
            f"skipped {len(event.skipped)}, errors {len(event.errors)}"
        )
        return EventLine(text, "", size)
    return EventLine("(window emptied)", "dim", 0 if record.kind == "memory_cleared" else size)


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 event``, ``2 events`` (``nouns`` for irregular plurals)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"
