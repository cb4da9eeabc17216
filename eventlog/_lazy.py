"""Exported names loaded on first access (PEP 562), for the two packages' ``__init__``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, MutableMapping

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: dict[str, str], namespace: MutableMapping[str, object]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's module ``__getattr__`` and ``__dir__``: ``where`` maps each exported name
    to the module that defines it; a name is imported when first looked up and then stored
    in ``namespace`` (the package's globals), so later lookups are plain attributes."""

    def getattr_(name: str) -> object:
        module = where.get(name)
        if module is None:
            msg = f"module '{package}' has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *where})

    return getattr_, dir_
