"""A LangGraph thread stored by ``LedgerSaver``, as steps a person reads.

What ``chatledger langgraph``, ``chatledger show``/``history`` of a thread and the inspector's
thread page show, computed once here: the checkpoints as steps (step, source, the channels
that changed, pending writes, and the ledger seq of the checkpoint's event, which
``chatledger prove`` takes), one checkpoint's ``messages`` channel as the conversation, and what
changed between two checkpoints. Everything is read through :class:`LedgerSaver`, so through
verified reads; nothing is written. Needs the ``langgraph`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eventlog.store import EventStore
from projections.adapters.langgraph import LedgerSaver

__all__ = ["Diff", "Line", "Step", "conversation", "diff", "line", "thread_steps"]


@dataclass(frozen=True)
class Line:
    """One message of a conversation: its LangGraph type, id and text."""

    role: str
    id: str | None
    text: str


@dataclass(frozen=True)
class Step:
    """One checkpoint of a thread, as a step."""

    checkpoint_id: str
    parent_id: str | None
    step: Any
    source: Any
    changed: list[str]
    messages: int
    pending_writes: int
    seq: int | None
    tuple: Any = field(repr=False, compare=False)  # the CheckpointTuple

    def row(self) -> dict[str, Any]:
        """The step as a JSON object (``--json``)."""
        return {
            "checkpoint_id": self.checkpoint_id,
            "parent_id": self.parent_id,
            "step": self.step,
            "source": self.source,
            "changed": self.changed,
            "messages": self.messages,
            "pending_writes": self.pending_writes,
            "seq": self.seq,
        }


@dataclass(frozen=True)
class Diff:
    """What changed from checkpoint ``low`` to ``high``."""

    low: str
    high: str
    channels: list[str]
    added: list[Line]
    dropped: list[Line]


def thread_steps(
    store: EventStore | LedgerSaver,
    thread: str,
    ns: str = "",
    *,
    before: str | None = None,
    limit: int | None = None,
) -> list[Step]:
    """The thread's checkpoints as steps, oldest first: all of them, or the ``limit`` newest
    older than checkpoint ``before``. One ``list`` call: a grown ``messages`` list is decoded
    once and older checkpoints get slices of it."""
    saver = store if isinstance(store, LedgerSaver) else LedgerSaver(store, cache_size=1)
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    later: Any = {"configurable": {"checkpoint_id": before}} if before else None
    # One more than asked: the oldest step's parent tells what that step changed.
    wanted = None if limit is None else limit + 1
    found = list(reversed(list(saver.list(config, before=later, limit=wanted))))
    by_id = {t.checkpoint["id"]: t for t in found}
    shown = found if limit is None or len(found) <= limit else found[1:]
    return [
        Step(
            checkpoint_id=t.checkpoint["id"],
            parent_id=_parent_id(t),
            step=t.metadata.get("step"),
            source=t.metadata.get("source"),
            changed=_changed(t, by_id),
            messages=len(messages_of(t)),
            pending_writes=len(t.pending_writes or []),
            seq=saver.checkpoint_seq(t.config),
            tuple=t,
        )
        for t in shown
    ]


def _parent_id(found: Any) -> str | None:
    parent = found.parent_config
    return str(parent["configurable"]["checkpoint_id"]) if parent else None


def _changed(found: Any, by_id: dict[str, Any]) -> list[str]:
    """Channels whose version differs from the parent checkpoint's (all, for a first one)."""
    versions = found.checkpoint["channel_versions"]
    parent = by_id.get(_parent_id(found) or "")
    before = parent.checkpoint["channel_versions"] if parent else {}
    return sorted(c for c, v in versions.items() if before.get(c) != v)


def messages_of(found: Any) -> list[Any]:
    """A checkpoint's ``messages`` channel (empty when it has none or it is not a list)."""
    value = found.checkpoint["channel_values"].get("messages", [])
    return value if isinstance(value, list) else []


def line(message: Any) -> Line:
    """A LangChain message (or any value in the channel) as a :class:`Line`."""
    role = str(getattr(message, "type", type(message).__name__))
    content = getattr(message, "content", message)
    text = content if isinstance(content, str) else str(content)
    ident = getattr(message, "id", None)
    return Line(role, None if ident is None else str(ident), text)


def conversation(found: Any) -> list[Line]:
    """The ``messages`` channel of a checkpoint (a ``CheckpointTuple``), as lines."""
    return [line(m) for m in messages_of(found)]


def diff(a: Any, b: Any) -> Diff:
    """What changed from checkpoint tuple ``a`` to ``b``: the channels whose version differs,
    the messages in ``b`` and not in ``a`` and those dropped (by message id)."""
    va, vb = a.checkpoint["channel_versions"], b.checkpoint["channel_versions"]
    channels = sorted(c for c in {*va, *vb} if va.get(c) != vb.get(c))
    ma, mb = messages_of(a), messages_of(b)
    ids_a = {getattr(m, "id", None) for m in ma}
    ids_b = {getattr(m, "id", None) for m in mb}
    return Diff(
        low=a.checkpoint["id"],
        high=b.checkpoint["id"],
        channels=channels,
        added=[line(m) for m in mb if getattr(m, "id", None) not in ids_a],
        dropped=[line(m) for m in ma if getattr(m, "id", None) not in ids_b],
    )
