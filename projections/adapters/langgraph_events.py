"""What a LangGraph thread's events say: their stored format and the fold of them.

The pure half of :mod:`projections.adapters.langgraph` (no LangGraph import): the body of each
event (a ``checkpoint``, a task's ``writes``, checkpoints ``removed``, the origin of a
``copied`` thread), values as ``[serde type, base64]``, msgpack arrays joined without decoding
them, and :class:`Thread`, the state a saver folds from a memory's verified records.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from eventlog.messages import CustomMessage
from eventlog.models import MessageAdded, Record
from eventlog.serialization import decode_event
from eventlog.validation import shown

__all__ = [
    "KEY",
    "TAG",
    "Blob",
    "Bodies",
    "Body",
    "Found",
    "Shared",
    "Thread",
    "array_body",
    "array_head",
    "blob_of",
    "body_problem",
    "bytes_of",
    "extends",
    "frozen",
    "holder",
    "holder_any",
    "is_thread_memory",
    "moved_body",
    "removed_body",
    "summary",
    "thawed",
    "thread_memory_id",
]

TAG = "langgraph"
"""The second part of a thread's memory id: ``(thread_id, "langgraph", checkpoint_ns)``."""

KEY = "langgraph"
"""The attribute of the stored custom message that carries the event."""

Blob = Sequence[str]  # [serde type, base64 of the bytes]
Body = dict[str, Any]  # the decoded ``langgraph`` attribute of one event
Bodies = list[Body]


def thread_memory_id(thread_id: object, checkpoint_ns: object = "") -> tuple[str, str, str]:
    """The memory id that stores a thread's checkpoints in ``checkpoint_ns`` (None or empty:
    the root namespace). Both are taken as text, as ``put`` takes them: a namespace given as
    ``5`` or None is the one a later ``list``, ``copy_thread`` and ``prune`` find."""
    return (str(thread_id), TAG, str(checkpoint_ns or ""))


def is_thread_memory(memory_id: object) -> TypeGuard[tuple[str, str, str]]:
    """Whether ``memory_id`` is one :func:`thread_memory_id` makes."""
    return (
        isinstance(memory_id, tuple)
        and len(memory_id) == 3
        and memory_id[1] == TAG
        and all(isinstance(part, str) for part in memory_id)
    )


@dataclass
class Thread:
    """What one memory's events say, folded in seq order (a projection of verified reads)."""

    seq: int = 0
    hash: str = ""
    size: int = 0  # payload characters folded since the last reset: what the cache holds
    bodies: dict[int, Body] = field(default_factory=dict)  # seq -> event body
    checkpoints: dict[str, int] = field(default_factory=dict)  # checkpoint id -> seq
    # checkpoint id -> (task id, idx) -> (task id, channel, blob, task path)
    writes: dict[str, dict[tuple[str, int], tuple[str, str, Blob, str]]] = field(
        default_factory=dict
    )
    versions: dict[tuple[str, str], int] = field(default_factory=dict)  # (channel, version)
    # channel -> (seq holding it, the list put last): the base of the next append-only delta
    lists: dict[str, tuple[int, list[Any]]] = field(default_factory=dict)
    # channel -> (msgpack items of the newest list read, seq -> (count, end) of its prefixes)
    spans: dict[str, tuple[bytes, dict[int, tuple[int, int]]]] = field(default_factory=dict)

    def reset(self) -> None:
        """Forget the content (an erasure or a purge): the memory starts empty after it."""
        self.size = 0
        self.bodies.clear()
        self.checkpoints.clear()
        self.writes.clear()
        self.versions.clear()
        self.lists.clear()
        self.spans.clear()

    def apply(self, record: Record) -> None:
        """Fold a record read from the store (events of other apps on the id are skipped)."""
        if record.kind in ("memory_erased", "memory_purged"):
            self.reset()
        elif record.kind == "message_added" and not record.erased:
            event = decode_event(record)
            message = event.message if isinstance(event, MessageAdded) else None
            if isinstance(message, CustomMessage) and isinstance(message.attributes.get(KEY), dict):
                body = message.attributes[KEY]
                problem = body_problem(body, self.bodies)
                if problem is not None:
                    # Checked before folding: a body folded in part would raise KeyError or
                    # TypeError on every later read of the thread, naming nothing.
                    msg = (
                        f"LangGraph thread {record.stream_id!r}: event {record.seq} holds a "
                        f"body no LedgerSaver writes ({problem}); another writer appended it "
                        "to the thread's memory, so the thread is not served - erase the "
                        "thread (delete_thread) and write only through LedgerSaver"
                    )
                    raise ValueError(msg)
                self._fold(record.seq, body)
                self.size += len(record.payload)
        self.seq, self.hash = record.seq, record.hash

    def appended(self, record: Record, body: Body) -> None:
        """Fold a record this saver just appended (its body known: not decoded again)."""
        self._fold(record.seq, body)
        self.size += len(record.payload)
        self.seq, self.hash = record.seq, record.hash

    def _fold(self, seq: int, body: Body) -> None:
        body = frozen(body)
        op = body.get("op")
        if op == "checkpoint":
            self.bodies[seq] = body
            self.checkpoints[body["id"]] = seq
            for channel, entry in body["values"].items():
                self.versions[(channel, entry["version"])] = seq
        elif op == "writes":
            self.bodies[seq] = body
            task, path = body["task"], body["path"]
            stored = self.writes.setdefault(body["checkpoint"], {})
            for idx, channel, blob in body["writes"]:
                if idx >= 0 and (task, idx) in stored:
                    continue  # regular writes are kept once: the first one wins
                stored[(task, idx)] = (task, channel, blob, path)
        elif op == "removed":
            self.bodies[seq] = body
            for checkpoint_id in body["checkpoints"]:
                self.checkpoints.pop(checkpoint_id, None)
                self.writes.pop(checkpoint_id, None)
        elif op == "copied":
            self.bodies[seq] = body

    def live(self) -> list[str]:
        """Checkpoint ids, newest first (LangGraph's ids sort by time)."""
        return sorted(self.checkpoints, reverse=True)


def body_problem(body: dict[str, Any], bodies: dict[int, Body]) -> str | None:
    """What makes ``body`` (a thread event's ``langgraph`` attribute) other than what a saver
    writes, for the fields the fold and the reads use, or None. ``bodies`` are the thread's
    events folded before it: a delta's base and a reference must name one of its checkpoints
    holding that channel. An unknown ``op`` is not ours to judge: the fold skips it."""
    op = body.get("op")
    if op == "checkpoint":
        for name in ("id", "parent"):
            if not isinstance(body.get(name), str) and not (
                name == "parent" and body.get(name) is None
            ):
                return f"its checkpoint {name} is {shown(body.get(name))}, not a str"
        for name in ("checkpoint", "metadata"):
            if not _is_blob(body.get(name)):
                return f"its {name} is {shown(body.get(name))}, not a [type, base64] pair"
        values, refs = body.get("values"), body.get("refs")
        if not isinstance(values, dict) or not isinstance(refs, dict):
            return "its values or refs are not objects"
        for channel, entry in values.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("version"), str):
                return f"channel {shown(channel)} has no str version"
            if "base" in entry:
                if not _holds(bodies, entry["base"], channel) or not _is_blob(entry.get("append")):
                    name, at = shown(channel), shown(entry["base"])
                    return f"channel {name} appends to event {at}, which holds no such channel"
            elif not _is_blob(entry.get("value")):
                return f"channel {shown(channel)} has no [type, base64] value"
        for channel, at in refs.items():
            if not _holds(bodies, at, channel):
                name, where = shown(channel), shown(at)
                return f"channel {name} refers to event {where}, which holds no such channel"
        return None
    if op == "writes":
        if not all(isinstance(body.get(n), str) for n in ("checkpoint", "task", "path")):
            return "its checkpoint, task or path is not a str"
        writes = body.get("writes")
        if not isinstance(writes, list | tuple) or not all(
            isinstance(w, list | tuple)
            and len(w) == 3
            and type(w[0]) is int
            and isinstance(w[1], str)
            and _is_blob(w[2])
            for w in writes
        ):
            return "its writes are not [index, channel, [type, base64]] triples"
        return None
    if op == "removed":
        ids = body.get("checkpoints")
        if not isinstance(ids, list | tuple) or not all(isinstance(i, str) for i in ids):
            return "its checkpoints are not a list of ids"
    return None


def _is_blob(value: object) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], str)
    )


def _holds(bodies: dict[int, Body], at: object, channel: object) -> bool:
    """Whether event ``at`` of the thread is a checkpoint that stores ``channel``."""
    body = bodies.get(at) if type(at) is int else None
    return body is not None and body.get("op") == "checkpoint" and channel in body["values"]


def frozen(value: Any) -> Any:
    """``value`` with every list made a tuple. A folded thread keeps its events' bodies for as
    long as it is cached; tuples, and dicts holding only strings, numbers and tuples, are
    untracked by Python's garbage collector (a dict holding a dict never is), so a task's writes
    and a checkpoint's values add nothing to a full collection's pause, and a checkpoint's body
    three objects."""
    if isinstance(value, dict):
        return {k: frozen(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    return value


Found = tuple[tuple[str, str, str], Thread, str, int]  # memory id, its state, id, seq
# (id of a thread's state, channel) -> (a list decoded in this list() call, seq -> its length)
Shared = dict[tuple[int, str], tuple[list[Any], dict[int, int]]]


def blob_of(typed: tuple[str, bytes]) -> Blob:
    """A serde ``(type, bytes)`` as stored: ``[type, base64]``."""
    kind, data = typed
    return [kind, base64.b64encode(data).decode("ascii")]


def bytes_of(blob: Blob) -> tuple[str, bytes]:
    """The serde ``(type, bytes)`` of a stored ``[type, base64]``."""
    return blob[0], base64.b64decode(blob[1])


def array_body(data: bytes) -> tuple[int, bytes] | None:
    """``(length, items)`` of a msgpack array, None when ``data`` is not one."""
    if not data:
        return None
    head = data[0]
    if 0x90 <= head <= 0x9F:
        return head & 0x0F, data[1:]
    if head == 0xDC and len(data) >= 3:
        return int.from_bytes(data[1:3], "big"), data[3:]
    if head == 0xDD and len(data) >= 5:
        return int.from_bytes(data[1:5], "big"), data[5:]
    return None


def array_head(length: int) -> bytes:
    """The msgpack header of an array of ``length`` items."""
    if length < 16:
        return bytes([0x90 | length])
    if length < 1 << 16:
        return b"\xdc" + length.to_bytes(2, "big")
    return b"\xdd" + length.to_bytes(4, "big")


def holder(
    parent_seq: int | None, parent: Body | None, channel: str, version: str, state: Thread
) -> int | None:
    """The seq of the event holding ``channel`` at ``version``: the parent's (the usual case),
    else the newest event that stored that version."""
    if parent_seq is not None and parent is not None:
        entry = parent["values"].get(channel)
        if entry is not None and entry["version"] == version:
            return parent_seq
        at = parent["refs"].get(channel)
        if at is not None and state.bodies[at]["values"][channel]["version"] == version:
            return int(at)
    return state.versions.get((channel, version))


def holder_any(parent_seq: int | None, parent: Body | None, channel: str) -> int | None:
    """The seq of the event holding the parent's value of ``channel``, whatever its version."""
    if parent_seq is None or parent is None:
        return None
    if channel in parent["values"]:
        return parent_seq
    at = parent["refs"].get(channel)
    return None if at is None else int(at)


def extends(value: list[Any], previous: list[Any]) -> bool:
    """``value`` is ``previous`` plus items at the end (same objects, or equal ones)."""
    # List equality compares identity first, item by item in C: the usual case (LangGraph
    # hands back the same message objects) costs a pointer comparison per message.
    return len(value) >= len(previous) and value[: len(previous)] == previous


def removed_body(checkpoint_ids: Sequence[str], why: str) -> Body:
    return {"op": "removed", "checkpoints": sorted(checkpoint_ids), "reason": why}


def moved_body(body: Body, moved: dict[int, int]) -> Body:
    """A copy of a folded event, to append again (JSON lists, not the fold's tuples), whose
    references to other events follow them to their new seqs."""
    if body["op"] != "checkpoint":
        return thawed(body)  # type: ignore[no-any-return]
    values = {
        channel: {**entry, "base": moved[entry["base"]]} if "base" in entry else entry
        for channel, entry in body["values"].items()
    }
    refs = {channel: moved[at] for channel, at in body["refs"].items()}
    return thawed({**body, "values": values, "refs": refs})  # type: ignore[no-any-return]


def thawed(value: Any) -> Any:
    """The inverse of :func:`frozen`: tuples made lists again (what JSON attributes take)."""
    if isinstance(value, dict):
        return {k: thawed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thawed(v) for v in value]
    return value


def summary(body: object) -> str | None:
    """One line for a person about a stored event's body (the ``langgraph`` attribute), for
    ``chatledger history``/``show`` and the inspector's timeline; None when it is not one of
    ours. Decodes no value (no LangGraph needed): a list's new items are counted from its
    msgpack header."""
    if not isinstance(body, dict):
        return None
    op = body.get("op")
    try:
        if op == "checkpoint":
            stored = []
            for channel, entry in body["values"].items():
                if "base" in entry:
                    kind, data = bytes_of(entry["append"])
                    array = array_body(data) if kind == "msgpack" else None
                    count = f"+{array[0]}" if array else "+"
                    stored.append(f"{channel} {count} after seq {entry['base']}")
                else:
                    stored.append(channel)
            changed = ", ".join(stored) or "no channel changed"
            return f"checkpoint: {changed} · id {body['id']}"
        if op == "writes":
            channels = ", ".join(str(w[1]) for w in body["writes"])
            return f"writes: {channels} · task {body['task']} · to {body['checkpoint']}"
        if op == "removed":
            ids = body["checkpoints"]
            return f"hid {len(ids)} checkpoint{'' if len(ids) == 1 else 's'} ({body['reason']})"
        if op == "copied":
            return (
                f"copy of thread {body['from']!r} (namespace {body['namespace']!r}) at its "
                f"seq {body['seq']}"
            )
    except (KeyError, TypeError, ValueError, IndexError):
        return None  # not shaped as ours: shown raw
    return None
