"""How the framework adapters choose what a model is sent, with no framework imported.

The OpenAI Agents SDK adapter's ``window_callback`` and the LangChain history's ``window=``
choose a model call's input here, and the read model (:mod:`projections.calls`) re-runs the
same functions to say why an item was left out of a recorded call - in the CLI and the
inspector, which do not need either framework installed. One rule, one place.

* :func:`choose` - the Agents SDK's items: LangChain4j's window over units (parallel function
  calls are one unit), a provider-valid view, reasoning items kept with what they preceded;
* :func:`fold` - a LangChain history: LangChain4j's window over the stored messages, a
  stored LangChain system message counting as a system message (:func:`rules_message`).

Both return, with what they keep, a reason code for everything they leave out: the window's
(``"evicted"``, ``"orphan"``, ``"system_replaced"``), ``"system_duplicate"`` (the same system
message as the one kept: LangChain4j ignores it) and ``"invalid"`` (dropped by the provider
profile's validity rules).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from pydantic import ValidationError

from eventlog.ids import MemoryId
from eventlog.messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from eventlog.validation import shown
from projections.adapters.item_list import LANGCHAIN_KEY
from projections.validity import valid_items
from projections.window import Departure, Entry, Window, WindowPolicy

__all__ = [
    "ITEM_KEY",
    "Choice",
    "Item",
    "choose",
    "content_text",
    "fold",
    "item_of",
    "message_of",
    "rules_message",
    "units",
]

ITEM_KEY = "openai_agents.item"
"""The attribute that carries the SDK's item, exactly as it was added."""

Item = dict[str, Any]
Ref = tuple[int, int]


def content_text(content: object) -> str:
    """The text of a message item's content: a str, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def message_of(item: object) -> ChatMessage:
    """The chatledger message that stores ``item`` (the item itself is in its attributes).

    Raises:
        TypeError: ``item`` is not a JSON object (a dict of JSON values).
    """
    if not isinstance(item, dict):
        msg = (
            f"add_items: an item must be a Responses input item (a dict), not "
            f"{type(item).__name__} {shown(item)}; nothing was written"
        )
        raise TypeError(msg)
    try:
        json.dumps(item, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as e:  # RecursionError: nested too deep
        msg = f"add_items: item {shown(item)} is not JSON ({e}); nothing was written"
        raise TypeError(msg) from e
    try:
        return _stored_as(item, {ITEM_KEY: item})
    except ValidationError as e:
        # JSON-encodable but not JSON (a tuple, a non-str key): it would not come back equal.
        problem = e.errors()[0]["msg"]
        msg = f"add_items: item {shown(item)} is not JSON ({problem}); nothing was written"
        raise TypeError(msg) from None


def _stored_as(item: dict[str, Any], attributes: dict[str, Any]) -> ChatMessage:
    kind = item.get("type", "message")
    role = item.get("role")
    if kind == "message" and role == "user":
        return UserMessage(content_text(item.get("content")), attributes=attributes)
    if kind == "message" and role == "assistant":
        return AiMessage(content_text(item.get("content")), attributes=attributes)
    if kind == "function_call":
        request = ToolExecutionRequest(
            id=str(item.get("call_id", "")),
            name=str(item.get("name", "")),
            arguments=str(item.get("arguments", "")),
        )
        return AiMessage(tool_execution_requests=[request], attributes=attributes)
    if kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        return ToolExecutionResultMessage(
            str(item.get("call_id", "")), None, text, attributes=attributes
        )
    return CustomMessage(attributes)


def item_of(message: ChatMessage) -> Item:
    """The SDK item a message stores (one written by another app becomes a plain message).

    Raises:
        ValueError: A custom message that does not carry an item.
    """
    attributes = getattr(message, "attributes", None)
    if isinstance(attributes, dict) and isinstance(attributes.get(ITEM_KEY), dict):
        item: Item = attributes[ITEM_KEY]
        return item
    # Written by a LangChain4j service or another adapter on the same id: shown as what it is.
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.text if message.has_single_text() else ""}
    if isinstance(message, AiMessage) and not message.tool_execution_requests:
        return {"role": "assistant", "content": message.text or ""}
    if isinstance(message, AiMessage):
        request = message.tool_execution_requests[0]
        return {
            "type": "function_call",
            "call_id": request.id or "",
            "name": request.name or "",
            "arguments": request.arguments or "",
        }
    if isinstance(message, ToolExecutionResultMessage):
        return {"type": "function_call_output", "call_id": message.id or "", "output": message.text}
    text = getattr(message, "text", None)
    if isinstance(text, str):
        return {"role": "system", "content": text}
    msg = f"the message {message!r:.80} carries no Agents SDK item"
    raise ValueError(msg)


def units(items: Sequence[Item]) -> list[tuple[list[int], ChatMessage]]:
    """The items as window units: parallel function calls (consecutive ``function_call``
    items) are one AI message with several requests, so their outputs pair with them."""
    found: list[tuple[list[int], ChatMessage]] = []
    for index, item in enumerate(items):
        message = message_of(item)
        previous = found[-1][1] if found else None
        if (
            item.get("type") == "function_call"
            and isinstance(previous, AiMessage)
            and previous.tool_execution_requests
            and items[found[-1][0][-1]].get("type") == "function_call"
        ):
            requests = [*previous.tool_execution_requests, *message.tool_execution_requests]  # type: ignore[union-attr]
            found[-1] = ([*found[-1][0], index], AiMessage(tool_execution_requests=requests))
        else:
            found.append(([index], message))
    return found


class Choice(NamedTuple):
    """What a selection keeps and why it leaves the rest out.

    Attributes:
        chosen: The indices (or refs) kept, in order.
        left: For each one left out, its reason code.
    """

    chosen: list[Any]
    left: dict[Any, str]


def _departed(departures: list[Departure] | None, entry: Entry, left: dict[Any, str]) -> None:
    if departures is None:  # the same system message as the one kept: LangChain4j ignores it
        left[entry.ref] = "system_duplicate"
        return
    for departure in departures:
        left[departure.entry.ref] = departure.reason


def choose(
    policy: WindowPolicy, valid_for: str | None, memory_id: MemoryId, items: Sequence[Item]
) -> Choice:
    """The Agents SDK items a model call is sent (their indices in ``items``), and why the
    others are not.

    Function calls and their outputs pair by ``call_id``: a call never reaches the model
    without its output, except a call still in progress at the very end. A reasoning item
    stays with the item it preceded (the Responses API refuses one without the other).

    Args:
        policy: The window policy.
        valid_for: A provider profile (see :mod:`projections.validity`), or None.
        memory_id: What a dynamic limit is asked with.
        items: The history, then the new input.
    """
    grouped = units(items)
    window = Window(policy)
    left: dict[Any, str] = {}
    for number, (_, message) in enumerate(grouped):
        entry = Entry(message, (number + 1, 0), policy.count(message))
        _departed(window.add(entry, lambda: policy.limit_for(memory_id)), entry, left)
    view = [(e.ref[0] - 1, e.message) for e in window.view(policy.limit_for(memory_id))]
    kept = valid_items(view, valid_for) if valid_for is not None else view
    reasons = {ref[0] - 1: reason for ref, reason in left.items()}
    in_view = {unit for unit, _ in view}
    placed = in_view | reasons.keys()
    reasons.update({unit: "evicted" for unit in range(len(grouped)) if unit not in placed})
    reasons.update({unit: "invalid" for unit in in_view - {unit for unit, _ in kept}})
    chosen = {i for unit, _ in kept for i in grouped[unit][0]}
    for i in sorted(chosen):
        before = i - 1
        if before >= 0 and before not in chosen and items[before].get("type") == "reasoning":
            chosen.add(before)
    why = {
        i: reasons.get(unit, "evicted")
        for unit, (indices, _) in enumerate(grouped)
        for i in indices
        if i not in chosen
    }
    return Choice(sorted(chosen), why)


def rules_message(message: ChatMessage) -> ChatMessage:
    """The message as LangChain4j's window rules see it: a stored LangChain system message
    is one."""
    if isinstance(message, CustomMessage):
        stored = message.attributes.get(LANGCHAIN_KEY)
        if isinstance(stored, dict) and stored.get("type") == "system":
            data = stored.get("data", {})
            content = data.get("content") if isinstance(data, dict) else None
            return SystemMessage(content if isinstance(content, str) else json.dumps(content))
    return message


def fold(
    policy: WindowPolicy, memory_id: MemoryId, messages: Sequence[tuple[Ref, ChatMessage]]
) -> Choice:
    """The refs LangChain4j's window keeps after adding ``messages`` in order (a LangChain
    history's ``window=``), and why the others left."""
    window = Window(policy)
    left: dict[Any, str] = {}
    for ref, message in messages:
        rules = rules_message(message)
        entry = Entry(rules, ref, policy.count(rules))
        _departed(window.add(entry, lambda: policy.limit_for(memory_id)), entry, left)
    kept = [e.ref for e in window.view(policy.limit_for(memory_id))]
    held = set(kept)
    for ref, _ in messages:
        if ref not in held and ref not in left:
            left[ref] = "evicted"  # trimmed by the view (a limit that shrank)
    return Choice(kept, {ref: left[ref] for ref, _ in messages if ref not in held})
