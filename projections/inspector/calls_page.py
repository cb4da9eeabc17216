"""The model call a memory page's event recorded: what it sent, what it left out and why.

A framework session records each model call as a ``context_sent`` event; at such an event the
memory page shows the call as :mod:`projections.calls` reads it (the same words as
``chatledger replay``): the messages sent, in order, and each run of the history's messages
left out, with its reason. Bounded like every page: at most :data:`~views.SHOWN_MAX` messages
sent and runs left out are listed, the rest counted.
"""

from __future__ import annotations

import dataclasses
from itertools import islice

from eventlog.ids import StreamKey
from eventlog.lc4j_json import message_from_obj
from eventlog.messages import ChatMessage
from eventlog.store import EventStore
from projections.adapters.item_list import ItemList
from projections.adapters.selection import message_of
from projections.calls import call_heading, model_call, span
from projections.inspector.views import SHOWN_MAX, Listing, show, tool_names

__all__ = ["CallView", "LeftRun", "call_view"]


@dataclasses.dataclass(frozen=True, slots=True)
class LeftRun:
    """A run of the history's messages a call left out, for one reason."""

    seq: int  # the first one's event, for its link
    where: str  # "event 5", "events 1-7 (6)"
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class CallView:
    """A recorded model call, as the memory page shows it."""

    seq: int
    heading: str
    sent: Listing
    left: tuple[LeftRun, ...]
    more_left: int
    reproduced: bool | None


def call_view(store: EventStore, key: str, seq: int) -> CallView | None:
    """The model call recorded at event ``seq`` (None: that event is not one).

    Raises:
        ChainIntegrityError: A record read does not verify.
    """
    stream = StreamKey(key)
    call = model_call(store, stream, seq)
    if call is None:
        return None
    refs = [(e["ref"][0], e["ref"][1]) for e in call.sent if "ref" in e]
    stored = iter(ItemList(store, stream).objects(refs[:SHOWN_MAX]))
    messages: list[tuple[str, ChatMessage]] = []  # ("" for new input) and the message
    for entry in islice(call.sent, SHOWN_MAX):
        if "ref" in entry:
            at, index = entry["ref"]
            messages.append(
                (str(at) if not index else f"{at}.{index}", message_from_obj(next(stored)))
            )
        else:
            messages.append(("", message_of(entry["new"])))
    names = tool_names(store, stream, seq, [m for _, m in messages])
    shown = tuple(
        dataclasses.replace(
            show(m, names=names), ref=where, note="" if where else "new input, kept in the event"
        )
        for where, m in messages
    )
    left = tuple(
        LeftRun(run.first[0], span(run), run.reason) for run in islice(call.left, SHOWN_MAX)
    )
    return CallView(
        seq=seq,
        heading=call_heading(call),
        sent=Listing(shown, len(call.sent) - len(shown)),
        left=left,
        more_left=len(call.left) - len(left),
        reproduced=call.reproduced,
    )
