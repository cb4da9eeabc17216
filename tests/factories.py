"""Builders for test scenarios.

Tests say *what kind* of thing they need and override only the fields the scenario is about:
``a_message("ai", text="2 + 2 = 4")``, ``a_conversation(6, system="Be brief")``,
``a_tool_exchange(call_id="7")``, ``a_record(seq=3, prev_hash=...)``. Every call without an
explicit text makes a fresh text, so two built messages are never equal by accident (equality
is by value, and the window memories' system-message dedup depends on it).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Sequence
from typing import Any

from eventlog import (
    AiMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from eventlog.hashing import GENESIS, chain_hash
from eventlog.models import CURRENT_SCHEMA_VERSION, Record

__all__ = [
    "Step",
    "a_conversation",
    "a_cut_export",
    "a_message",
    "a_record",
    "a_tool_exchange",
    "add",
    "clear",
    "play",
    "set_to",
]

_unique = itertools.count(1)


def a_cut_export(lines: Sequence[str]) -> list[str]:
    """Export ``lines`` (the header first) with the header's ``records`` left out, as a file
    written before the header counted them: so a test may cut it, or put records of several
    exports together, and import what is left."""
    header = json.loads(lines[0])
    header.pop("records", None)
    end = "\n" if lines[0].endswith("\n") else ""
    return [json.dumps(header) + end, *lines[1:]]


def _fresh(prefix: str) -> str:
    return f"{prefix} {next(_unique)}"


def a_message(kind: str = "user", text: str | None = None, **fields: Any) -> Any:
    """Build one chat message.

    Args:
        kind: ``"system"``, ``"user"``, ``"ai"`` or ``"tool_result"``.
        text: The text; a fresh unique text when omitted.
        **fields: Passed to the message class (``name=`` for users, ``id=``/``tool_name=`` for
            tool results, ``tool_execution_requests=`` for AI messages).

    Returns:
        The message.
    """
    if kind == "system":
        return SystemMessage(text if text is not None else _fresh("system"), **fields)
    if kind == "user":
        return UserMessage(text if text is not None else _fresh("user"), **fields)
    if kind == "ai":
        if "tool_execution_requests" in fields and text is None:
            return AiMessage(**fields)
        return AiMessage(text if text is not None else _fresh("ai"), **fields)
    if kind == "tool_result":
        fields.setdefault("id", "1")
        fields.setdefault("tool_name", "calculator")
        return ToolExecutionResultMessage(
            text=text if text is not None else _fresh("result"), **fields
        )
    msg = f"a_message kind {kind!r} is unknown; use system, user, ai or tool_result"
    raise ValueError(msg)


def a_conversation(n: int, *, system: str | None = None) -> list[Any]:
    """Build ``n`` alternating user/AI messages (user first), optionally after a system message."""
    turns = [a_message("user" if i % 2 == 0 else "ai") for i in range(n)]
    return ([SystemMessage(system)] if system is not None else []) + turns


def a_tool_exchange(
    call_id: str = "1",
    name: str = "calculator",
    arguments: str = '{"a": 2, "b": 2}',
    result: str = "4",
) -> tuple[Any, Any]:
    """Build an AI message with one tool request and the matching tool result."""
    request = ToolExecutionRequest(id=call_id, name=name, arguments=arguments)
    return (
        AiMessage(tool_execution_requests=[request]),
        ToolExecutionResultMessage.from_request(request, result),
    )


def a_record(
    *,
    stream_id: str = "default",
    seq: int = 1,
    position: int | None = None,
    kind: str = "memory_cleared",
    payload: str = '{"kind":"memory_cleared"}',
    meta: str = "",
    recorded_at_text: str = "2025-01-01T00:00:00.000000Z",
    prev_hash: str = GENESIS,
    schema_version: int = CURRENT_SCHEMA_VERSION,
) -> Record:
    """Build a stored record whose ``hash`` is correctly chained to ``prev_hash``.

    Override ``hash`` afterwards (``record._replace(hash=...)``) to build a tampered record.
    """
    return Record(
        position=seq if position is None else position,
        stream_id=stream_id,
        seq=seq,
        recorded_at_text=recorded_at_text,
        kind=kind,
        schema_version=schema_version,
        payload=payload,
        meta=meta,
        prev_hash=prev_hash,
        hash=chain_hash(
            prev_hash, stream_id, seq, kind, schema_version, recorded_at_text, payload, meta
        ),
    )


# --- Window scenarios -------------------------------------------------------------------------
# A scenario is a list of ``(step, expected messages() right after it)``; ``play`` runs it on a
# memory and checks, after EVERY step, the visible list, how many events the step appended,
# that history only grew at its end, and finally that ``as_of(seq=k)`` reproduces what
# ``messages()`` showed right after event k.


@dataclasses.dataclass(frozen=True)
class Step:
    """One operation on a memory and the number of events it must append."""

    op: str
    args: tuple[Any, ...]
    events: int

    def apply(self, memory: Any) -> None:
        """Run the operation on ``memory``."""
        getattr(memory, self.op)(*self.args)

    def __repr__(self) -> str:
        return f"{self.op}({', '.join(map(repr, self.args))})"


def add(*messages: Any, events: int | None = None) -> Step:
    """``memory.add(*messages)``; appends one event per message unless ``events`` says otherwise
    (0 for a duplicate system message)."""
    return Step("add", messages, len(messages) if events is None else events)


def set_to(*messages: Any) -> Step:
    """``memory.set([...])``: always exactly one ``messages_set`` event."""
    return Step("set", (list(messages),), 1)


def clear() -> Step:
    """``memory.clear()``: always exactly one ``memory_cleared`` event."""
    return Step("clear", (), 1)


def play(memory: Any, steps: Sequence[tuple[Step, list[Any]]]) -> None:
    """Run ``steps`` on ``memory``, asserting the expected state after each one."""
    seen: dict[int, list[Any]] = {}
    for number, (step, expected) in enumerate(steps, 1):
        before = memory.history()
        step.apply(memory)
        history = memory.history()
        grew = len(history) - len(before)
        assert grew == step.events, (
            f"step {number} {step!r}: expected {step.events} new event(s), got {grew}"
        )
        assert history[: len(before)] == before, f"step {number} {step!r} rewrote history"
        got = memory.messages()
        assert got == expected, f"step {number} {step!r}: messages() is {got}, not {expected}"
        if grew:
            seen[history[-1].seq] = got
    history = memory.history()
    assert [event.seq for event in history] == list(range(1, len(history) + 1))
    for seq, shown in seen.items():
        assert memory.as_of(seq=seq) == shown, f"as_of(seq={seq}) differs from messages()"


def lose_last_commit(path: Any, stream: str, seq: int, chain_key: bytes | None = None) -> None:
    """Make a SQLite ledger look like a replica that missed the last commit (or a restored older
    copy): record ``seq`` gone and the memory's head seal what it was before that commit (what
    the same transaction wrote, so a real replica or backup has it that way too)."""
    import sqlite3

    from eventlog.hashing import head_mac

    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM events WHERE stream_id = ? AND seq = ?", (stream, seq))
        row = conn.execute(
            "SELECT seq, hash FROM events WHERE stream_id = ? ORDER BY seq DESC LIMIT 1", (stream,)
        ).fetchone()
        if row is None:
            conn.execute("DELETE FROM heads WHERE stream_id = ?", (stream,))
            return
        (erased,) = conn.execute(
            "SELECT erased_through FROM heads WHERE stream_id = ?", (stream,)
        ).fetchone()
        conn.execute(
            "UPDATE heads SET seq = ?, hash = ?, mac = ? WHERE stream_id = ?",
            (row[0], row[1], head_mac(chain_key, stream, row[0], row[1], erased), stream),
        )
