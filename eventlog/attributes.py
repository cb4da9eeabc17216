"""The attribute rule of chat messages: ``attributes`` hold plain JSON values.

LangChain4j (Java) accepts any object as an attribute value; chatledger keeps only what
survives a JSON round trip, so a message read back equals the one written: ``dict`` with
``str`` keys, ``list``, ``str``, ``int`` (at most 1000 digits, as Jackson reads), finite
``float``, ``bool`` and ``None``, nested at most :data:`MAX_ATTRIBUTE_DEPTH` deep. The check
is iterative, so a hostile nesting depth raises ``ValueError``, not ``RecursionError``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Final, TypeAlias

__all__ = ["MAX_ATTRIBUTE_DEPTH", "check_attributes"]

MAX_ATTRIBUTE_DEPTH: Final = 256
"""Deepest nesting of lists/dicts allowed in ``attributes``.

Python's JSON codec recurses once per level and shares the interpreter's recursion limit
(1000 frames) with its caller; Jackson 2.15+ refuses documents nested deeper than 1000.
256 is far beyond any real attribute and leaves room for the caller's stack.
"""

# Jackson 2.15+ refuses to read numbers longer than 1000 digits; 10**1000 < 2**3322.
_MAX_INT_BITS: Final = 3321

# A node of the attribute walk: (container, depth, parent node, key in parent). Paths for error
# messages are rebuilt from the parent chain only when something is wrong.
_Node: TypeAlias = tuple["dict[str, Any] | list[Any]", int, "_Node | None", object]


def _path(node: _Node | None, key: object = None, *, limit: int = 8) -> str:
    keys = [] if key is None else [key]
    while node is not None and node[2] is not None:
        keys.append(node[3])
        node = node[2]
    keys.reverse()
    shown = keys if len(keys) <= limit else [*keys[: limit // 2], ..., *keys[-limit // 2 :]]
    return "attributes" + "".join("[...]" if k is ... else f"[{k!r:.40}]" for k in shown)


def check_attributes(owner: str, attributes: dict[str, Any]) -> None:
    """Raise ValueError unless ``attributes`` holds only JSON values (see the module docstring).

    Iterative, so that a hostile nesting depth produces a ValueError, not a RecursionError.
    """
    if not attributes:
        return
    stack: list[_Node] = [(attributes, 1, None, None)]
    while stack:
        node = stack.pop()
        container, depth = node[0], node[1]
        if depth > MAX_ATTRIBUTE_DEPTH:
            msg = (
                f"{owner}.{_path(node)} is nested more than {MAX_ATTRIBUTE_DEPTH} levels deep; "
                "flatten the attribute value"
            )
            raise ValueError(msg)
        is_dict = isinstance(container, dict)
        items: Iterable[tuple[object, Any]] = (
            container.items() if isinstance(container, dict) else enumerate(container)
        )
        for key, item in items:
            if isinstance(item, dict | list):
                stack.append((item, depth + 1, node, key))
            elif not (item is None or isinstance(item, str | bool)):
                _check_json_scalar(owner, node, key, item)
            if is_dict and not isinstance(key, str):
                msg = (
                    f"{owner}.{_path(node)} has key {key!r:.60} of type {type(key).__name__}; "
                    "JSON object keys must be str"
                )
                raise ValueError(msg)


def _check_json_scalar(owner: str, node: _Node, key: object, value: object) -> None:
    if isinstance(value, int):
        if value.bit_length() > _MAX_INT_BITS:
            msg = (
                f"{owner}.{_path(node, key)} is an int with more than 1000 digits, which "
                "LangChain4j (Jackson) refuses to read; store it as a string"
            )
            raise ValueError(msg)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            msg = (
                f"{owner}.{_path(node, key)} is {value!r}; JSON has no NaN or infinity, "
                "store a string"
            )
            raise ValueError(msg)
        return
    remedy = "use a list" if isinstance(value, tuple) else "convert it to a JSON value"
    msg = (
        f"{owner}.{_path(node, key)} is a {type(value).__name__} ({value!r:.60}); attribute "
        f"values must be dict, list, str, int, float, bool or None; {remedy}"
    )
    raise ValueError(msg)
