"""Async without blocking the event loop: store and memory calls run on the store's own workers.

Every async method of a store or a memory (``aappend``, ``aadd``, ``amessages``, ...) is the
sync method run on a worker thread, so the event loop never waits on a disk, a lock or a
server. The workers belong to the store: one thread for SQLite and the in-memory store (SQLite
takes one writer at a time, and one thread keeps a conversation's calls in the order they were
awaited), one per pooled connection for PostgreSQL (``max_connections``), so concurrent
coroutines use the pool as concurrent threads would.

Why threads on PostgreSQL too, rather than psycopg's async connections: an append's outcome
when a connection drops is resolved by the store ([faults]: look the records up, retry on a
fresh connection, exactly once). That code is the subtlest in the project; an async twin would
be a second copy to keep exactly equal. One copy, called from a worker, gives async callers the
same guarantees, tested by the same suite.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

__all__ = ["caller_loop", "off_loop"]

_P = ParamSpec("_P")
_T = TypeVar("_T")

_executors: weakref.WeakKeyDictionary[object, ThreadPoolExecutor] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
# The loop that awaited the call a worker is running, in that call's context (and so in every
# task it starts on that loop, e.g. an async summarizer): None outside such a call.
_caller: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "chatledger_caller_loop", default=None
)


def caller_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop whose ``await`` the current call is running for, or None when the code
    was not reached through :func:`off_loop` (plain sync use)."""
    return _caller.get()


def _executor(store: object) -> ThreadPoolExecutor:
    with _lock:
        executor = _executors.get(store)
        if executor is None:
            workers = getattr(store, "async_workers", 1)
            executor = ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix=f"chatledger-{type(store).__name__}"
            )
            _executors[store] = executor
            # The threads end with the store: nothing keeps an idle pool alive after it.
            weakref.finalize(store, executor.shutdown, wait=False)
        return executor


async def off_loop(
    store: object, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs
) -> _T:
    """``fn(*args, **kwargs)`` on ``store``'s workers, awaited without blocking the loop.

    Awaited from inside a call a worker is running (an async summarizer within ``aadd``,
    which awaits the same store), it runs on a thread of the loop's default pool instead:
    queued on the store's workers it would wait behind the call that waits for it (SQLite
    has one worker) - a hang. The order holds: the outer call waits while it runs.
    """
    loop = asyncio.get_running_loop()
    inside = _caller.get() is not None

    def call() -> Any:
        token = _caller.set(loop)
        try:
            return fn(*args, **kwargs)
        finally:
            _caller.reset(token)

    result: _T = await loop.run_in_executor(None if inside else _executor(store), call)
    return result
