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
import functools
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

__all__ = ["off_loop"]

_P = ParamSpec("_P")
_T = TypeVar("_T")

_executors: weakref.WeakKeyDictionary[object, ThreadPoolExecutor] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_worker = threading.local()  # .active is True on the workers' threads


def _mark_worker() -> None:
    _worker.active = True


def _executor(store: object) -> ThreadPoolExecutor:
    with _lock:
        executor = _executors.get(store)
        if executor is None:
            workers = getattr(store, "async_workers", 1)
            executor = ThreadPoolExecutor(
                max_workers=workers,
                thread_name_prefix=f"chatledger-{type(store).__name__}",
                initializer=_mark_worker,
            )
            _executors[store] = executor
            # The threads end with the store: nothing keeps an idle pool alive after it.
            weakref.finalize(store, executor.shutdown, wait=False)
        return executor


async def off_loop(
    store: object, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs
) -> _T:
    """``fn(*args, **kwargs)`` on ``store``'s workers, awaited without blocking the loop.

    Awaited on a worker itself (an async summarizer inside ``aadd`` runs its own loop there),
    it runs right there instead: queued, it would wait for the call that is waiting for it
    (SQLite has one worker) - a hang. That loop is the call's own, not the application's.
    """
    if getattr(_worker, "active", False):
        return fn(*args, **kwargs)
    loop = asyncio.get_running_loop()
    call: Callable[[], Any] = functools.partial(fn, *args, **kwargs)
    result: _T = await loop.run_in_executor(_executor(store), call)
    return result
