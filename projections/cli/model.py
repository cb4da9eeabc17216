"""The one module of the CLI that knows how windows are recorded and replayed.

Every use the CLI makes of the window engine (:mod:`projections.window`), the window record
(:mod:`projections.meta`) and the audit's reasons is here, behind small functions, so the rest
of the CLI deals in messages, refs and text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeAlias

from eventlog.ids import StreamKey
from eventlog.messages import ChatMessage
from eventlog.models import Record, SummaryRecorded
from eventlog.serialization import decode_event
from eventlog.store import EventStore
from projections.audit import walk
from projections.meta import WindowMeta
from projections.replay import read_checked, replay, view_at, window_meta
from projections.tokens import OpenAiTokenCountEstimator
from projections.validity import valid_items, valid_view
from projections.window import MessageWindowPolicy, TokenWindowPolicy, WindowPolicy

__all__ = [
    "Policy",
    "Ref",
    "Step",
    "forked_from",
    "make_policy",
    "policy_steps",
    "reason_text",
    "recorded_steps",
    "recorded_view",
    "what_if_steps",
    "what_if_view",
    "window_size",
]

Policy: TypeAlias = WindowPolicy
"""A window policy, as ``show --policy`` and ``replay --policy`` use it."""

Ref = tuple[int, int]
"""``(seq, index)``: the event that brought a message and its place in a set event's list."""

Step = tuple[Record, list[ChatMessage], list[tuple[ChatMessage, str]]]
"""An event, the view after it, and the messages that left at it with their reasons."""

_REASONS: dict[str, str] = {
    "evicted": "evicted (window full)",
    "orphan": "orphan (its tool call left)",
    "system_replaced": "system message replaced",
    "set": "set (content replaced)",
    "cleared": "cleared",
    "retracted": "retracted (popped)",
}


def reason_text(reason: str | None) -> str:
    """Why a message left the view, for humans (``""`` while it is still in it)."""
    return "" if reason is None else _REASONS.get(reason, reason)


def window_size(record: Record) -> int | None:
    """How many messages the window held right after ``record`` (None: it records no window)."""
    meta = WindowMeta.decode(record.meta)
    return None if meta is None else meta.size


def forked_from(record: Record) -> dict[str, Any] | None:
    """The origin ``{"memory", "seq", "hash"}`` a fork's first event records, if any."""
    meta = WindowMeta.decode(record.meta)
    if meta is None or meta.forked_from is None:
        return None
    origin = meta.forked_from
    return {"memory": origin.memory, "seq": origin.seq, "hash": origin.hash}


def make_policy(
    kind: str, limit: int, model: str | None, keep_first: bool, *, evict_to: float | None = None
) -> WindowPolicy:
    """The window policy of ``--policy messages:N`` or ``--policy tokens:N:MODEL`` (with
    ``:evict_to=F``, chunked eviction).

    Raises:
        ValueError: The token model is unknown.
    """
    if kind == "messages":
        return MessageWindowPolicy(
            limit, always_keep_system_message_first=keep_first, evict_to=evict_to
        )
    estimator = OpenAiTokenCountEstimator(model or "")
    return TokenWindowPolicy(
        limit, estimator, always_keep_system_message_first=keep_first, evict_to=evict_to
    )


def recorded_view(store: EventStore, key: StreamKey, seq: int) -> list[tuple[Ref, ChatMessage]]:
    """The exact recorded view right after event ``seq``, each message with its ref."""
    return [(entry.ref, entry.message) for entry in view_at(store, key, seq)]


def summary_at(store: EventStore, key: StreamKey, seq: int) -> tuple[int, str] | None:
    """The summary a summarizing memory showed after event ``seq``: ``(its event, text)``, or
    None (no summary in force, or not a summarizing memory)."""
    if seq == 0:
        return None
    (record,) = read_checked(store, key, gt=seq - 1, lte=seq)
    at = window_meta(record).summary
    if at is None:
        return None
    (summary,) = read_checked(store, key, gt=at - 1, lte=at)
    event = decode_event(summary)
    return (at, event.summary) if isinstance(event, SummaryRecorded) else None


def what_if_steps(
    store: EventStore, key: StreamKey, policy: WindowPolicy, *, lte: int | None
) -> Iterator[tuple[Record, list[tuple[Ref, ChatMessage]]]]:
    """Replay under ``policy``: each event with the view after it, each message with its ref."""
    for record, view, _ in replay(store, key, policy, lte=lte):
        yield record, [(e.ref, e.message) for e in view]


def what_if_view(
    store: EventStore,
    key: StreamKey,
    policy: WindowPolicy,
    seq: int,
    *,
    valid_for: str | None = None,
) -> list[tuple[Ref, ChatMessage]]:
    """What a memory with ``policy`` would have shown right after event ``seq`` (as the
    provider profile ``valid_for`` accepts it, when given)."""
    last: list[tuple[Ref, ChatMessage]] = []
    if seq == 0:
        return last
    for _, view in what_if_steps(store, key, policy, lte=seq):
        last = view
    return last if valid_for is None else valid_items(last, valid_for)


def recorded_steps(store: EventStore, key: StreamKey, start: int, end: int) -> Iterator[Step]:
    """Events ``start..end`` with the recorded view after each and what left, with reasons."""
    for step in walk(store, key, after=start - 1, upto=end):
        yield (
            step.record,
            [e.message for e in step.view],
            [(d.entry.message, d.reason) for d in step.departures],
        )


def policy_steps(
    store: EventStore,
    key: StreamKey,
    policy: WindowPolicy,
    start: int,
    end: int,
    *,
    valid_for: str | None = None,
) -> Iterator[Step]:
    """Events ``start..end`` with the view ``policy`` would have shown after each (as the
    provider profile ``valid_for`` accepts it, when given), and what left that window at
    each, with the reasons the rules gave."""
    for record, view, departures in replay(store, key, policy, lte=end):
        if record.seq >= start:
            messages = [e.message for e in view]
            yield (
                record,
                messages if valid_for is None else valid_view(messages, valid_for),
                [(d.entry.message, d.reason) for d in departures],
            )
