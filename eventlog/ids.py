"""Memory ids and the canonical stream key they are stored under.

A memory id may be a ``str`` (any, including empty), an ``int``, a ``uuid.UUID`` or a tuple of
those, e.g. ``(user_id, session_id)``. Each id maps to exactly one stored key and different ids
never share one. A string is its own key - what ``sqlite3`` users see in the ``stream_id`` column
is the id they chose - unless it starts with ``~``, the tag character, which is then doubled.
Other types are tagged: ``~i:42``, ``~u:<uuid>``, ``~t:<compact JSON of the tagged parts>``, and
a string holding NUL (which PostgreSQL text cannot store) is ``~s:<JSON string>``.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from typing import TypeAlias

__all__ = [
    "PSEUDONYM_PREFIX",
    "SYSTEM_PREFIX",
    "MemoryId",
    "StreamKey",
    "id_from_json",
    "memory_id_from_key",
    "memory_key",
]

MemoryId: TypeAlias = "str | int | uuid.UUID | tuple[MemoryId, ...]"

_TAG = "~"
PSEUDONYM_PREFIX = "~p:"
"""Keys of streams whose memory id is kept in an erasable row (see :mod:`eventlog.names`)."""
SYSTEM_PREFIX = "~sys:"
"""Keys of chatledger's own streams (e.g. the compaction run log); no memory id maps to one."""


class StreamKey(str):
    """A stored key used as is, without encoding: for chatledger's own ``~sys:`` streams and for
    tools that already hold a key read from the store."""

    __slots__ = ()


def _int_part(part: int) -> int:
    """``part``, unless its digits could never fit a stored key (which must be at most 2,048
    bytes): refused here by its size, before Python's int-to-text limit (4,300 digits) fails
    with an error that names nothing."""
    if part.bit_length() > _MAX_INT_BITS:
        msg = (
            f"memory id: an int of {part.bit_length():,} bits has more digits than a stored key "
            "may hold (2,048 bytes); use a shorter id (a str, an int or a uuid.UUID)"
        )
        raise ValueError(msg)
    return part


_MAX_INT_BITS = 6_804  # 10**2048 has 6,804 bits: a longer int has at least 2,049 digits


def _tagged(part: object, whole: object) -> object:
    # bool is an int subclass; True would silently become 1, so it is refused like any other type.
    if isinstance(part, str):
        return part
    if isinstance(part, int) and not isinstance(part, bool):
        return _int_part(part)
    if isinstance(part, uuid.UUID):
        return {"uuid": str(part)}
    if isinstance(part, tuple):
        return [_tagged(p, whole) for p in part]
    msg = (
        f"memory id {whole!r} contains a {type(part).__name__}; a memory id must be a str, "
        "an int, a uuid.UUID or a tuple of those"
    )
    raise TypeError(msg)


def memory_key(memory_id: object) -> str:
    """Return the canonical stored key of a memory id.

    Args:
        memory_id: A str, int, uuid.UUID or tuple of those.

    Returns:
        The key: the string itself for most string ids, a tagged form otherwise.

    Raises:
        TypeError: If the id (or a part of a tuple id) has any other type.
        ValueError: If a string in the id holds a lone surrogate (it is not UTF-8 text).
    """
    if type(memory_id) is str:
        if "\x00" in memory_id:
            # PostgreSQL text cannot hold NUL: such ids are stored JSON-escaped on every backend.
            return "~s:" + json.dumps(memory_id)
        if not memory_id.isascii():
            _require_utf8(memory_id, memory_id)
        return memory_id if not memory_id.startswith(_TAG) else _TAG + memory_id
    if isinstance(memory_id, StreamKey):
        return str(memory_id)
    if isinstance(memory_id, str):  # a str subclass: store its plain value
        # str.__str__, not str(): a (str, Enum) member's str() is "Cls.NAME", not the value
        # it equals (and JSON writes inside a tuple id).
        return memory_key(str.__str__(memory_id))
    if isinstance(memory_id, int) and not isinstance(memory_id, bool):
        return f"~i:{_int_part(int(memory_id))}"
    if isinstance(memory_id, uuid.UUID):
        return f"~u:{memory_id}"
    tagged = _tagged(memory_id, memory_id)
    # ensure_ascii=False keeps keys readable; NUL and other control characters are escaped.
    key = "~t:" + json.dumps(tagged, ensure_ascii=False, separators=(",", ":"))
    if not key.isascii():
        _require_utf8(memory_id, key)
    return key


def _require_utf8(memory_id: object, text: str) -> None:
    """Refuse an id no store can keep: a lone surrogate is not UTF-8 (SQLite and PostgreSQL
    would fail with a bare UnicodeEncodeError, the memory store would keep what export cannot
    write)."""
    try:
        text.encode()
    except UnicodeEncodeError as e:
        shown = repr(memory_id)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        msg = (
            f"memory id {shown} holds a lone surrogate {text[e.start]!r}, which is not UTF-8 "
            "text and no store can keep; decode the bytes it came from as UTF-8 "
            "(errors='replace' keeps what is readable) rather than with "
            "errors='surrogateescape'"
        )
        raise ValueError(msg) from None


def id_from_json(value: object) -> MemoryId:
    """The memory id a decoded JSON value spells: a string, an integer, ``{"uuid": "..."}`` or
    an array of those. The one grammar of tagged stored keys and of the CLI's ``--id-json``.

    Raises:
        ValueError: Naming the first part that is none of those.
    """
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, list):
        return tuple(id_from_json(part) for part in value)
    if isinstance(value, dict) and set(value) == {"uuid"} and isinstance(value["uuid"], str):
        with contextlib.suppress(ValueError):
            return uuid.UUID(value["uuid"])
    msg = (
        f"{json.dumps(value)} is not a memory id part; write a string, an integer, "
        '{"uuid": "..."} or an array of those'
    )
    raise ValueError(msg)


def _untagged(value: object, key: str) -> MemoryId:
    try:
        return id_from_json(value)
    except ValueError:
        msg = f"stored memory key {key!r} is not a chatledger key"
        raise ValueError(msg) from None


def memory_id_from_key(key: str) -> MemoryId:
    """Return the memory id a stored key was made from (inverse of :func:`memory_key`).

    Raises:
        ValueError: If ``key`` was not produced by :func:`memory_key`.
    """
    if not key.startswith(_TAG):
        return key
    if key.startswith((SYSTEM_PREFIX, PSEUDONYM_PREFIX)):
        # A pseudonym (erasable ids, eventlog.names) says nothing of its id: the key itself
        # names the stream, as a system stream's does.
        return StreamKey(key)
    try:
        if key.startswith("~~"):
            return key[1:]
        if key.startswith("~s:"):
            value = json.loads(key[3:])
            if isinstance(value, str):
                return value
        if key.startswith("~i:"):
            return int(key[3:])
        if key.startswith("~u:"):
            return uuid.UUID(key[3:])
        if key.startswith("~t:"):
            value = json.loads(key[3:])
            if isinstance(value, list):
                return _untagged(value, key)
    except RecursionError:
        # A key from a URL or a command line, nested deeper than any id: never a traceback.
        msg = f"stored memory key {key[:40]!r}... is not a chatledger key: nested too deeply"
        raise ValueError(msg) from None
    except ValueError as e:
        msg = f"stored memory key {key!r} is not a chatledger key: {e}"
        raise ValueError(msg) from e
    msg = f"stored memory key {key!r} is not a chatledger key (unknown tag)"
    raise ValueError(msg)
