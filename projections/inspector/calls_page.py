"""The model call a memory page's event recorded: what it sent, what it left out and why.

A framework session records each model call as a ``context_sent`` event; at such an event the
memory page shows the call as :mod:`projections.calls` reads it (the same words as
``chatledger replay``): the messages sent, in order, and each run of the history's messages
left out, with its reason. Bounded like every page: at most :data:`~shown.SHOWN_MAX` messages
sent and runs left out are listed, the rest counted, and the reasons are worked out only for
a call over a list of at most :data:`CALL_LIST_MAX` messages.
"""

from __future__ import annotations

import dataclasses
from itertools import islice

from eventlog.formats.lc4j_json import message_from_obj
from eventlog.ids import StreamKey
from eventlog.messages import ChatMessage
from eventlog.models import ContextSent
from eventlog.serialization import decode_event
from eventlog.store import EventStore
from projections.adapters.item_list import ItemList
from projections.adapters.selection import message_of
from projections.calls import ModelCall, call_heading, model_call, span
from projections.inspector.shown import SHOWN_MAX, Listing, show
from projections.inspector.views import tool_names
from projections.readmodel import window_size
from projections.replay import read_checked

__all__ = ["CALL_LIST_MAX", "CallView", "LeftRun", "call_view"]

CALL_LIST_MAX = 20_000
"""The longest list a page re-runs a call's policy over to say why messages were left out
(about 3 s on the 2-core CI machine: the cost grows with the list the call ran over); beyond,
the page shows what was sent and says which command works out the rest."""


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
    refused: str = ""  # why what was left out was not worked out (the list was too long)


def call_view(store: EventStore, key: str, seq: int) -> CallView | None:
    """The model call recorded at event ``seq`` (None: that event is not one).

    Raises:
        ChainIntegrityError: A record read does not verify.
    """
    stream = StreamKey(key)
    (record,) = read_checked(store, stream, gt=seq - 1, lte=seq)
    if record.kind != "context_sent":
        return None
    size = window_size(record) or 0
    if size > CALL_LIST_MAX:
        event = decode_event(record)
        assert isinstance(event, ContextSent)  # noqa: S101 - checked above
        refused = (
            f"what was left out is not worked out here: the call ran over a list of {size:,} "
            f"messages, more than {CALL_LIST_MAX:,} (a page's budget); "
            f"`chatledger sent {key} {seq}` does it"
        )
        call = ModelCall(
            seq, event.adapter, event.policy, event.profile, event.tokens, event.sent, [], None
        )
    else:
        found = model_call(store, stream, seq)
        assert found is not None  # noqa: S101 - a context_sent event is a call
        call, refused = found, ""
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
        heading=call_heading(call, checked=not refused),
        sent=Listing(shown, len(call.sent) - len(shown)),
        left=left,
        more_left=len(call.left) - len(left),
        reproduced=call.reproduced,
        refused=refused,
    )
