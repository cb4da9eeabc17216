"""Commands for damage and for what a model was sent: ``quarantine`` and ``sent``.

``chatledger quarantine --db X ID SEQ --reason R`` acknowledges one damaged record so reads
of the memory (sessions, windows, history) leave it out; ``verify`` keeps reporting it (see
:mod:`eventlog.quarantine`). ``chatledger sent --db X ID SEQ`` prints, as JSON, exactly what the
model call recorded at event SEQ (a ``context_sent`` event) was sent; at any other event it
says "no window recorded".
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from eventlog.serialization import decode_event
from projections.cli.args import shell_id
from projections.cli.render import console, emit
from projections.cli.store import existing

if TYPE_CHECKING:
    from eventlog.store import EventStore

__all__ = ["model_call_note", "quarantine_cmd", "sent_cmd"]

_CARRIED = ("openai_agents.item", "langchain.message")  # what the adapters keep in attributes


def quarantine_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger quarantine ID SEQ --reason TEXT``."""
    key = args.key
    existing(store, args, key)
    record = store.quarantine(key, args.seq, reason=args.reason)
    event = decode_event(record)
    found = getattr(event, "found", "")
    if args.json:
        emit(
            {
                "memory": key,
                "seq": args.seq,
                "found": found,
                "reason": args.reason,
                "acknowledgement_seq": record.seq,
            }
        )
        return 0
    console().print(
        f"quarantined {shell_id(key)} seq {args.seq} ({found}); reads leave it out, "
        "`chatledger verify` still reports it",
        markup=False,
        highlight=False,
    )
    return 0


def sent_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger sent ID SEQ``: JSON of what the model call at SEQ was sent."""
    from eventlog.models import ContextSent
    from projections.adapters.item_list import ItemList
    from projections.cli.errors import Failure
    from projections.replay import read_checked

    key = args.key
    existing(store, args, key)
    items = ItemList(store, key)
    try:
        entries = items.sent(args.seq)
    except ValueError as e:
        raise Failure(str(e)) from e
    (record,) = read_checked(store, key, gt=args.seq - 1, lte=args.seq)
    event = decode_event(record)
    assert isinstance(event, ContextSent)  # noqa: S101 - items.sent() refused anything else
    emit(
        {
            "memory": key,
            "seq": args.seq,
            "recorded_at": record.recorded_at_text,
            "adapter": event.adapter,
            "policy": event.policy,
            "profile": event.profile,
            "tokens": event.tokens,
            "sent": [_shown(kind, obj) for kind, obj in entries],
        }
    )
    return 0


def _shown(kind: str, obj: Any) -> Any:
    """A sent entry as the framework had it: the item or message an adapter stored in the
    message's attributes, else the chatledger message; new input as it was sent."""
    if kind == "ref" and isinstance(obj, dict):
        attributes = obj.get("attributes")
        if isinstance(attributes, dict):
            for name in _CARRIED:
                if isinstance(attributes.get(name), dict):
                    return attributes[name]
    return obj


def model_call_note(store: EventStore, key: str, seq: int, shown: list[Any]) -> str | None:
    """For ``show --as-of SEQ`` at a recorded model call: what it sent of the list shown and
    what it left out (None at any other event)."""
    from eventlog.ids import StreamKey
    from eventlog.models import ContextSent
    from projections.replay import read_checked

    if seq < 1:
        return None
    found = read_checked(store, StreamKey(key), gt=seq - 1, lte=seq)
    event = decode_event(found[0]) if found else None
    if not isinstance(event, ContextSent):
        return None
    sent = {tuple(entry["ref"]) for entry in event.sent if isinstance(entry.get("ref"), list)}
    new = sum(1 for entry in event.sent if "new" in entry)
    left = [ref for ref in shown if tuple(ref) not in sent]
    where = ", ".join(str(ref[0]) if not ref[1] else f"{ref[0]}.{ref[1]}" for ref in left)
    profile = f", valid for {event.profile}" if event.profile else ""
    tokens = f", {event.tokens} tokens" if event.tokens is not None else ""
    return (
        f"model call at seq {seq} ({event.policy}{profile}{tokens}): sent {len(sent)} of these "
        f"and {new} new input item(s); left out: {'events ' + where if left else 'none'} - "
        f"`chatledger sent {shell_id(key)} {seq}` prints exactly what was sent"
    )
