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
import time
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError

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
from eventlog.aio import off_loop
from eventlog.errors import ConcurrencyError
from eventlog.formats.lc4j_json import message_from_obj
from eventlog.models import ContextSent
from eventlog.store import EventStore
from eventlog.validation import shown
from projections.adapters.item_list import (
    LANGCHAIN_KEY,
    UNBOUNDED,
    ItemList,
    Ref,
    describe,
    tail,
)
from projections.adapters.item_list_runs import Run
from projections.adapters.selection import ITEM_KEY, content_text, fold
from projections.adapters.selection import rules_message as _for_rules
from projections.logged_window import RETRY_FOR
from projections.memories import MessageWindowChatMemory
from projections.window import MessageWindowPolicy, TokenWindowPolicy, WindowPolicy

__all__ = ["MESSAGE_KEY", "LedgerChatMessageHistory", "from_langchain", "to_langchain"]

MESSAGE_KEY = LANGCHAIN_KEY
"""The attribute that carries the LangChain message (its ``message_to_dict`` form)."""


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
            f"add_messages: {type(message).__name__} {shown(message)} is not a LangChain "
            "message (HumanMessage, AIMessage, ToolMessage, SystemMessage, ...); nothing was "
            "written"
        )
        raise TypeError(msg)
    stored = message_to_dict(message)
    try:
        # Encoded as UTF-8 too: a lone surrogate is refused here, with the others, rather than
        # deep in the message's construction.
        json.dumps(stored, allow_nan=False, ensure_ascii=False).encode()
    except (TypeError, ValueError, RecursionError) as e:  # RecursionError: nested too deep
        msg = f"add_messages: {type(message).__name__} is not JSON ({e}); nothing was written"
        raise TypeError(msg) from e
    try:
        return _stored_as(message, {MESSAGE_KEY: stored})
    except ValidationError as e:
        # JSON-encodable but not JSON (a tuple, a non-str key): it would not come back equal.
        problem = e.errors()[0]["msg"]
        msg = f"add_messages: {type(message).__name__} is not JSON ({problem}); nothing was written"
        raise TypeError(msg) from None


def _stored_as(message: BaseMessage, attributes: dict[str, Any]) -> cl.ChatMessage:
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
    (a LangChain4j service, the Agents SDK adapter) becomes the closest LangChain message. Only
    a system message (or an Agents SDK system or developer item) becomes a ``SystemMessage``:
    any other custom message is a ``HumanMessage`` holding its JSON."""
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
    item = attributes.get(ITEM_KEY) if isinstance(attributes, dict) else None
    if (
        isinstance(item, dict)
        and item.get("type", "message") == "message"
        and item.get("role") in {"system", "developer"}
    ):
        return SystemMessage(content_text(item.get("content")))
    # Anything else another app wrote (an Agents SDK reasoning item, a shell's, a file
    # search's or an MCP server's output, a LangChain4j custom message) is data whose author
    # may be anyone: it goes to the model in the role that carries no authority, never as a
    # system message, which would let such text give the model instructions.
    return HumanMessage(json.dumps(message.attributes, ensure_ascii=False))


def _args(arguments: str | None) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": value}


class LedgerChatMessageHistory(BaseChatMessageHistory):
    """LangChain chat history stored in a chatledger memory.

    Each read costs what it returns (the full list, or O(window) with ``window=``) and each
    write what it writes, whatever the history's length (see
    :mod:`projections.adapters.item_list`): a new object per request is cheap.

    Args:
        memory_id: The memory id (``chatledger history <id>``).
        store: The ledger (SQLite, PostgreSQL or in-memory).
        window: A policy (e.g. ``MessageWindowPolicy(20)``): ``messages`` is the window that
            policy keeps, by LangChain4j's rules, and each read of it appends a
            ``context_sent`` event naming exactly the messages returned (what the model is
            sent; :meth:`sent` gives them back); None: the full history since the last clear.
        record: False: a window read records nothing (a reader that may not write, e.g. a
            read-only store or a keyed one opened without its key).
    """

    def __init__(
        self,
        memory_id: Any,
        *,
        store: EventStore,
        window: WindowPolicy | None = None,
        record: bool = True,
    ) -> None:
        if window is not None and not isinstance(window, WindowPolicy):
            msg = (
                f"LedgerChatMessageHistory: window must be a window policy or None, got "
                f"{type(window).__name__} {shown(window)}; pass e.g. "
                "window=MessageWindowPolicy(20) or TokenWindowPolicy(4000, estimator)"
            )
            raise TypeError(msg)
        if not isinstance(store, EventStore):
            msg = (
                f"LedgerChatMessageHistory needs a chatledger EventStore (InMemoryEventStore, "
                f"SQLiteEventStore, PostgresEventStore) as store=, not {type(store).__name__} "
                f"{shown(store)}"
            )
            raise TypeError(msg)
        if not isinstance(record, bool):
            msg = f"LedgerChatMessageHistory: record must be True or False, got {shown(record)}"
            raise TypeError(msg)
        self.items = ItemList(store, memory_id)
        self.store = store
        self.window = window
        self.record = record
        self._memory: MessageWindowChatMemory | None = None

    @property
    def memory(self) -> MessageWindowChatMemory:
        """The history as a chatledger memory, for time travel (``history()``, ``as_of``);
        its first use reads the whole list."""
        if self._memory is None:
            self._memory = MessageWindowChatMemory(
                self.items.id, max_messages=UNBOUNDED, store=self.store
            )
        return self._memory

    def _read(self) -> list[BaseMessage]:
        if self.window is None:
            # As aget_messages reads it: each message built as soon as its event is decoded.
            return [m for part in self.items.chunks(None, _to_langchain_one) for m in part]
        policy = self.window
        deadline = 0.0  # set at the first lost race, as the list's own writes retry
        while True:
            stored, refs, runs = windowed_at(self.items, policy)
            if not self.record:
                return _to_langchain_all(stored)
            # What the model is sent, recorded: one append per read of the window.
            tokens = None
            if isinstance(policy, TokenWindowPolicy):
                rules = [_for_rules(message_from_obj(obj)) for obj in stored]
                tokens = int(policy.estimator.estimate_token_count_in_messages(rules))
            event = ContextSent(
                sent=tuple({"ref": list(ref)} for ref in refs),
                policy=describe(policy, self.items.id),
                tokens=tokens,
                adapter="langchain",
            )
            try:
                # With the list the window was chosen from, which the audit re-runs it over.
                self.items.record_sent(event, chosen_from=runs)
            except ConcurrencyError:
                # Another writer changed the list meanwhile: choose the window again.
                now = time.monotonic()
                deadline = deadline or now + RETRY_FOR
                if now > deadline:
                    raise
                continue
            return _to_langchain_all(stored)

    def sent(self, seq: int) -> list[BaseMessage]:
        """The messages the window read recorded at event ``seq`` returned (what the model was
        sent from this history), exactly.

        Raises:
            ValueError: Event ``seq`` records no window ("no window recorded").
        """
        return _to_langchain_all([obj for _, obj in self.items.sent(seq)])

    async def asent(self, seq: int) -> list[BaseMessage]:
        """:meth:`sent`, without blocking the event loop."""
        return await off_loop(self.store, self.sent, seq)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The full history since the last clear, or the window of ``window``."""
        return self._read()

    async def aget_messages(self) -> list[BaseMessage]:
        """:attr:`messages`, without blocking the event loop (a long history is read in
        steps, the event loop running between them)."""
        if self.window is not None:
            return await off_loop(self.store, self._read)
        steps = self.items.chunks(None, _to_langchain_one)
        messages: list[BaseMessage] = []
        while (part := await off_loop(self.store, next, steps, None)) is not None:
            messages.extend(part)
        return messages

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages as one atomic write (a bad one: nothing is written)."""
        stored = _stored(messages, "add_messages")
        if stored:
            self.items.add(stored)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """:meth:`add_messages`, without blocking the event loop."""
        stored = _stored(messages, "aadd_messages")
        if stored:
            await off_loop(self.store, self.items.add, stored)

    def clear(self) -> None:
        """Empty the conversation: one ``memory_cleared`` event; the history keeps all."""
        self.items.clear()

    async def aclear(self) -> None:
        """:meth:`clear`, without blocking the event loop."""
        await off_loop(self.store, self.items.clear)


def _stored(messages: Sequence[BaseMessage], operation: str) -> list[cl.ChatMessage]:
    """The chatledger messages to append for ``messages``, refused when it is not a list."""
    if isinstance(messages, str | bytes | BaseMessage) or not isinstance(messages, Iterable):
        msg = (
            f"{operation}: messages must be a list of LangChain messages, got "
            f"{type(messages).__name__} {shown(messages)}; nothing was written"
        )
        raise TypeError(msg)
    return [from_langchain(m) for m in messages]


def _to_langchain_all(stored: list[Any]) -> list[BaseMessage]:
    """The LangChain messages of stored message objects (see :func:`_to_langchain_one`)."""
    return [_to_langchain_one(obj) for obj in stored]


def _to_langchain_one(obj: Any) -> BaseMessage:
    """The LangChain message of a stored message object: one this adapter wrote is rebuilt
    from the message it carries, with ``messages_from_dict`` as ``SQLChatMessageHistory``
    does, without building the chatledger message first."""
    attributes = obj.get("attributes") if isinstance(obj, dict) else None
    carried = attributes.get(MESSAGE_KEY) if isinstance(attributes, dict) else None
    if isinstance(carried, dict):
        (message,) = messages_from_dict([carried])
        return message
    return to_langchain(message_from_obj(obj))


def windowed_at(items: ItemList, policy: WindowPolicy) -> tuple[list[Any], list[Ref], list[Run]]:
    """The stored objects of the window ``policy`` keeps over the list, by LangChain4j's rules,
    reading O(window) items, their refs, and the list they were chosen from (its runs).

    The rules evict from the front and keep the newest system message, so the window is that
    system message plus a suffix of the list. It is folded over the newest ``span`` items
    (seeded with the newest system message before them, which the list's meta names) and over
    the newest ``2 * span``; when both agree, earlier items cannot change it, else ``span``
    grows. Chunked eviction (``evict_to``) depends on the whole path, so it folds everything.
    """
    runs, system = items.snapshot()
    refs = tail(runs, None) if policy.evict_permille is not None or system is None else None
    cache: dict[Ref, Any] = {}
    if refs is not None:
        kept = _fold(items, policy, refs, None, cache)
        return [cache[ref] for ref in kept], kept, runs
    size = sum(run[-1] - run[-2] + 1 for run in runs)
    limit = policy.limit_for(items.id)
    span = limit + 8 if isinstance(policy, MessageWindowPolicy) else 32
    while True:
        if 2 * span >= size:
            kept = _fold(items, policy, tail(runs, None), None, cache)
            return [cache[ref] for ref in kept], kept, runs
        wide = tail(runs, 2 * span)
        narrow = _fold(
            items, policy, wide[span:], _seed(items, system or [], wide[span], cache), cache
        )
        broad = _fold(items, policy, wide, _seed(items, system or [], wide[0], cache), cache)
        if narrow == broad:
            return [cache[ref] for ref in broad], broad, runs
        span *= 4


def _seed(items: ItemList, system: list[Ref], start: Ref, cache: dict[Ref, Any]) -> Ref | None:
    """The system message the window holds when ``start`` is added: the newest one before it,
    or the first of the run of equal ones that ends with it (LangChain4j ignores a system
    message equal to the one the window has, so the window keeps the earlier one)."""
    before = [ref for ref in system if ref < start]
    if not before:
        return None
    kept = before.pop()
    newest = _system_rules(items, [kept], cache)[0]
    while before:
        # Pages from the back: a history that repeats its system message reads only that run.
        page = before[-_SYSTEM_PAGE:]
        del before[-_SYSTEM_PAGE:]
        for ref, rules in zip(
            reversed(page), reversed(_system_rules(items, page, cache)), strict=True
        ):
            if rules != newest:
                return kept
            kept = ref
    return kept


_SYSTEM_PAGE = 64


def _system_rules(items: ItemList, refs: list[Ref], cache: dict[Ref, Any]) -> list[Any]:
    """The messages the window rules see for ``refs`` (their objects cached)."""
    missing = [ref for ref in refs if ref not in cache]
    for ref, obj in zip(missing, items.objects(missing), strict=True):
        cache[ref] = obj
    return [_for_rules(message_from_obj(cache[ref])) for ref in refs]


def _fold(
    items: ItemList,
    policy: WindowPolicy,
    refs: list[Ref],
    seed: Ref | None,
    cache: dict[Ref, Any],
) -> list[Ref]:
    """The refs the window keeps after adding ``seed`` then ``refs`` (their objects cached)."""
    order = ([seed] if seed is not None else []) + refs
    missing = [ref for ref in order if ref not in cache]
    for ref, obj in zip(missing, items.objects(missing), strict=True):
        cache[ref] = obj
    return fold(policy, items.id, [(ref, message_from_obj(cache[ref])) for ref in order]).chosen
