"""LangChain's ``BaseChatMessageHistory`` over the ledger: the full history, or a window of it.

``LedgerChatMessageHistory`` writes the same events as the memories (one ``message_added`` per
message, a clear for ``clear``), so time travel, diff, verify and the ``chatledger`` command
work on LangChain conversations, and a LangChain4j service reading the same ledger sees
sensible messages: a human message is a user message, an AI message with tool calls an AI
message with tool requests (the call ids kept), a tool message a tool result. Each stored
message also carries the LangChain message itself (``message_to_dict``) in its attributes, so
reading it back gives an equal message - ids, names, metadata, content blocks, tool calls.

System messages are stored as custom messages: in the full history every one is kept, while
LangChain4j's rules would let a new system message replace the previous one. When a window is
asked for, they count as system messages again, with LangChain4j's rules.

Requires the ``langchain`` extra; from your chatledger clone: ``pip install -e '.[langchain]'``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        message_to_dict,
        messages_from_dict,
    )
except ImportError as e:
    msg = (
        f"projections.adapters.langchain needs the [langchain] extra ({e}); from your "
        "chatledger clone: pip install -e '.[langchain]'"
    )
    raise ModuleNotFoundError(msg, name=e.name) from e

from eventlog import messages as cl
from eventlog.store import EventStore
from projections.memories import MessageWindowChatMemory
from projections.window import Entry, Window, WindowPolicy

__all__ = ["MESSAGE_KEY", "LedgerChatMessageHistory", "from_langchain", "to_langchain"]

MESSAGE_KEY = "langchain.message"
"""The attribute that carries the LangChain message (its ``message_to_dict`` form)."""

UNBOUNDED = 2**31 - 1  # the history keeps every message: its window never evicts


def _text(message: BaseMessage) -> str:
    text = message.text
    return text if isinstance(text, str) else str(text)


def from_langchain(message: BaseMessage) -> cl.ChatMessage:
    """The chatledger message that stores ``message`` (the message itself in its attributes).

    Raises:
        TypeError: ``message`` is not a LangChain message, or does not serialize to JSON.
    """
    if not isinstance(message, BaseMessage):
        msg = (
            f"add_messages: {type(message).__name__} {message!r:.60} is not a LangChain "
            "message (HumanMessage, AIMessage, ToolMessage, SystemMessage, ...); nothing was "
            "written"
        )
        raise TypeError(msg)
    stored = message_to_dict(message)
    try:
        json.dumps(stored, allow_nan=False)
    except (TypeError, ValueError) as e:
        msg = f"add_messages: {type(message).__name__} is not JSON ({e}); nothing was written"
        raise TypeError(msg) from e
    attributes = {MESSAGE_KEY: stored}
    if isinstance(message, HumanMessage):
        return cl.UserMessage(_text(message), attributes=attributes)
    if isinstance(message, AIMessage):
        requests = [
            cl.ToolExecutionRequest(
                id=call.get("id") or "",
                name=call["name"],
                arguments=json.dumps(call.get("args", {}), ensure_ascii=False, sort_keys=True),
            )
            for call in message.tool_calls
        ]
        return cl.AiMessage(
            _text(message) or None, tool_execution_requests=requests, attributes=attributes
        )
    if isinstance(message, ToolMessage):
        return cl.ToolExecutionResultMessage(
            message.tool_call_id,
            message.name,
            _text(message),
            is_error=message.status == "error",
            attributes=attributes,
        )
    return cl.CustomMessage(attributes)


def to_langchain(message: cl.ChatMessage) -> BaseMessage:
    """The LangChain message a stored message carries; a message written by another app
    (a LangChain4j service, the Agents SDK adapter) becomes the closest LangChain message."""
    attributes = getattr(message, "attributes", None)
    if isinstance(attributes, dict) and isinstance(attributes.get(MESSAGE_KEY), dict):
        (restored,) = messages_from_dict([attributes[MESSAGE_KEY]])
        return restored
    if isinstance(message, cl.SystemMessage):
        return SystemMessage(message.text)
    if isinstance(message, cl.UserMessage):
        return HumanMessage(message.text if message.has_single_text() else "")
    if isinstance(message, cl.AiMessage):
        calls = [
            {"name": r.name or "", "args": _args(r.arguments), "id": r.id, "type": "tool_call"}
            for r in message.tool_execution_requests
        ]
        return AIMessage(message.text or "", tool_calls=calls)
    if isinstance(message, cl.ToolExecutionResultMessage):
        return ToolMessage(message.text, tool_call_id=message.id or "", name=message.tool_name)
    return SystemMessage(json.dumps(message.attributes, ensure_ascii=False))


def _args(arguments: str | None) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": value}


def _for_rules(message: cl.ChatMessage) -> cl.ChatMessage:
    """The message as LangChain4j's window rules see it: a stored system message is one."""
    if isinstance(message, cl.CustomMessage):
        stored = message.attributes.get(MESSAGE_KEY)
        if isinstance(stored, dict) and stored.get("type") == "system":
            data = stored.get("data", {})
            content = data.get("content") if isinstance(data, dict) else None
            return cl.SystemMessage(content if isinstance(content, str) else json.dumps(content))
    return message


class LedgerChatMessageHistory(BaseChatMessageHistory):
    """LangChain chat history stored in a chatledger memory.

    Args:
        memory_id: The memory id (``chatledger history <id>``).
        store: The ledger (SQLite, PostgreSQL or in-memory).
        window: A policy (e.g. ``MessageWindowPolicy(20)``): ``messages`` is the window that
            policy keeps, by LangChain4j's rules; None: the full history since the last clear.
    """

    def __init__(
        self, memory_id: Any, *, store: EventStore, window: WindowPolicy | None = None
    ) -> None:
        self.memory = MessageWindowChatMemory(memory_id, max_messages=UNBOUNDED, store=store)
        self.window = window

    def _shown(self, stored: list[cl.ChatMessage]) -> list[BaseMessage]:
        if self.window is None:
            return [to_langchain(m) for m in stored]
        policy = self.window
        folded = Window(policy)
        for index, message in enumerate(stored):
            rules = _for_rules(message)
            entry = Entry(rules, (index + 1, 0), policy.count(rules))
            folded.add(entry, lambda: policy.limit_for(self.memory.id))
        view = folded.view(policy.limit_for(self.memory.id))
        return [to_langchain(stored[e.ref[0] - 1]) for e in view]

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The full history since the last clear, or the window of ``window``."""
        return self._shown(self.memory.messages())

    async def aget_messages(self) -> list[BaseMessage]:
        """:attr:`messages`, without blocking the event loop."""
        return self._shown(await self.memory.amessages())

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages as one atomic write (a bad one: nothing is written)."""
        stored = [from_langchain(m) for m in messages]
        if stored:
            self.memory.add(stored)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """:meth:`add_messages`, without blocking the event loop."""
        stored = [from_langchain(m) for m in messages]
        if stored:
            await self.memory.aadd(stored)

    def clear(self) -> None:
        """Empty the conversation: one ``memory_cleared`` event; the history keeps all."""
        self.memory.clear()

    async def aclear(self) -> None:
        """:meth:`clear`, without blocking the event loop."""
        await self.memory.aclear()
