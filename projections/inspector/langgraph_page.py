"""The inspector's page for a LangGraph thread stored by ``LedgerSaver``: its checkpoints as
steps, one checkpoint's ``messages`` channel as the conversation, and what changed between two
checkpoints, each with the ledger seq of its event (what ``chatledger prove`` takes).

Read like every other page: through :class:`~projections.adapters.langgraph.LedgerSaver`'s
verified reads (a checkpoint the chain does not vouch for is refused), nothing written, and
bounded whatever the URL asks: at most :data:`STEPS_PAGE` checkpoints a page (newest first,
with a link to older ones) and :data:`~projections.inspector.shown.SHOWN_MAX` messages a list.
Needs the ``langgraph`` extra; without it the page says how to install it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from eventlog.ids import memory_id_from_key
from eventlog.store import EventStore
from eventlog.validation import shown
from projections.adapters.langgraph_events import is_thread_memory
from projections.inspector.shown import SHOWN_MAX

__all__ = ["STEPS_PAGE", "ThreadPage", "link", "thread_page"]

STEPS_PAGE = 100
"""Checkpoints one page lists (each one is a decoded checkpoint: bounded like a window)."""


@dataclass(frozen=True)
class ThreadPage:
    """What the page shows."""

    key: str
    thread: str
    ns: str
    steps: list[Any]  # Step, newest first
    selected: Any  # the Step shown as the conversation
    conversation: list[Any]  # Line, at most SHOWN_MAX
    total_messages: int
    diff: Any  # Diff from diff_from to selected, or None
    older: str | None  # the checkpoint id to list older steps before, when there are some


def link(key: str) -> str | None:
    """The thread page's path for the memory of ``key``, None when it is not a LangGraph
    thread."""
    try:
        memory_id = memory_id_from_key(key)
    except (TypeError, ValueError):
        return None
    return "/lg/" + quote(key, safe="") if is_thread_memory(memory_id) else None


def thread_page(
    store: EventStore,
    key: str,
    checkpoint: str | None = None,
    *,
    diff_from: str | None = None,
    before: str | None = None,
) -> ThreadPage:
    """The page of the thread whose memory key is ``key``.

    Args:
        checkpoint: The checkpoint shown as the conversation (default: the newest).
        diff_from: Show what changed from this checkpoint to ``checkpoint``.
        before: List the steps older than this checkpoint (the next page).

    Raises:
        LookupError: ``key`` is not a LangGraph thread with checkpoints, or a checkpoint id
            is not one of its.
        ModuleNotFoundError: The ``langgraph`` extra is not installed.
    """
    from projections.adapters.langgraph import LedgerSaver
    from projections.adapters.langgraph_steps import conversation, diff, thread_steps

    memory_id = memory_id_from_key(key)
    if not is_thread_memory(memory_id):
        msg = f"memory {shown(key)} is not a LangGraph thread; LedgerSaver stores one per thread"
        raise LookupError(msg)
    thread, _, ns = memory_id
    saver = LedgerSaver(store, cache_size=1)
    steps = thread_steps(saver, thread, ns, before=before, limit=STEPS_PAGE + 1)
    older = steps[1].checkpoint_id if len(steps) > STEPS_PAGE else None
    steps = list(reversed(steps[-STEPS_PAGE:]))
    if not steps and before is None:
        msg = (
            f"LangGraph thread {shown(thread)} (namespace {shown(ns)}) has no checkpoints: it was "
            "erased, or nothing was put yet"
        )
        raise LookupError(msg)
    if checkpoint:
        selected = _one(saver, thread, ns, checkpoint)
    elif steps and before is None:
        selected = steps[0]
    else:
        selected = _one(saver, thread, ns, None)
    lines = conversation(selected.tuple)
    changed = None
    if diff_from:
        changed = diff(_one(saver, thread, ns, diff_from).tuple, selected.tuple)
        changed = dataclasses.replace(
            changed, added=changed.added[:SHOWN_MAX], dropped=changed.dropped[:SHOWN_MAX]
        )
    return ThreadPage(
        key=key,
        thread=thread,
        ns=ns,
        steps=steps,
        selected=selected,
        conversation=lines[-SHOWN_MAX:],
        total_messages=len(lines),
        diff=changed,
        older=older,
    )


def _one(saver: Any, thread: str, ns: str, checkpoint: str | None) -> Any:
    """The step of one checkpoint (the newest when None), with its parent's channel versions
    to tell what it changed."""
    from projections.adapters.langgraph_steps import thread_steps

    if checkpoint is None:
        found = thread_steps(saver, thread, ns, limit=1)
    else:
        later = _successor(checkpoint)
        found = thread_steps(saver, thread, ns, before=later, limit=1)
        found = [s for s in found if s.checkpoint_id == checkpoint]
    if not found:
        # Cut (shown): the id comes from the URL, and an error page must not echo a megabyte.
        msg = f"LangGraph thread {shown(thread)} has no checkpoint {shown(checkpoint)}"
        raise LookupError(msg)
    return found[0]


def _successor(checkpoint_id: str) -> str:
    """An id just after ``checkpoint_id`` in LangGraph's order (``list(before=)`` is
    exclusive): the id with a character past the end."""
    return checkpoint_id + "\x7f"
