"""Window snapshots: the materialized window saved beside the log by compaction.

A snapshot is derived data (the log stays the truth): the window's entries with their messages
inline. Its row is not under the hash chain, so no read serves it as a memory's window (a
cold open reads the events its window refers to, vouched for by the chain): anyone with write
access to the database could change it, keyed ledger or not. Loading is best-effort: a
snapshot that does not match the head is still a cache of entries.
"""

from __future__ import annotations

import json
from typing import Any

from eventlog.formats.lc4j_json import message_from_obj, message_to_obj
from eventlog.ids import MemoryId
from eventlog.store import EventStore
from projections.window import Entry

__all__ = ["SNAPSHOT_NAME", "load_window_snapshot", "save_window_snapshot"]

SNAPSHOT_NAME = "window/v2"
"""v2 names the estimator ``"estimator"``; v1 snapshots are ignored (derived data: a cold open
then reads the events the window refers to)."""


def save_window_snapshot(
    store: EventStore, memory_id: MemoryId, seq: int, entries: list[Entry], identity: str | None
) -> None:
    """Save the window right after event ``seq``."""
    state: dict[str, Any] = {
        "estimator": identity,
        "entries": [[e.ref[0], e.ref[1], message_to_obj(e.message), e.tokens] for e in entries],
    }
    store.save_snapshot(
        memory_id, SNAPSHOT_NAME, seq, json.dumps(state, ensure_ascii=False, separators=(",", ":"))
    )


def load_window_snapshot(
    store: EventStore, memory_id: MemoryId, lte: int, identity: str | None = None
) -> dict[tuple[int, int], Entry]:
    """Entries of the newest snapshot at or before ``lte``, by ref ({} when there is none).

    Not vouched for by the chain (see the module docstring): for inspecting compaction's
    output, never for serving a window."""
    snapshot = store.load_snapshot(memory_id, SNAPSHOT_NAME, lte=lte)
    if snapshot is None:
        return {}
    state = json.loads(snapshot.state)
    reuse = identity is not None and state.get("estimator") == identity
    return {
        (seq, idx): Entry(message_from_obj(obj), (seq, idx), tokens if reuse else None)
        for seq, idx, obj, tokens in state["entries"]
    }
