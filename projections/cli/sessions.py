"""Commands for damage and for what a model was sent: ``quarantine`` and ``sent``.

``chatledger quarantine --db X ID SEQ --reason R`` acknowledges one damaged record so reads
of the memory (sessions, windows, history) leave it out; ``verify`` keeps reporting it (see
:mod:`eventlog.quarantine`). ``chatledger sent --db X ID SEQ`` prints, as JSON, exactly what the
model call recorded at event SEQ (a ``context_sent`` event) was sent, and what it left out and
why (:mod:`projections.calls`); with ``--policy``, what it would have sent under that policy.
At any other event it says "no window recorded". :func:`call_lines` is how ``show``,
``replay`` and ``diff`` print a call.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from eventlog.serialization import decode_event
from projections.cli.args import shell_id
from projections.cli.render import console, emit
from projections.cli.store import existing

if TYPE_CHECKING:
    from collections.abc import Sequence

    from eventlog.models import Record
    from eventlog.store import EventStore
    from projections.calls import CallRun, ModelCall

__all__ = [
    "call_at",
    "call_lines",
    "call_obj",
    "model_call_note",
    "quarantine_cmd",
    "sent_cmd",
]

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
    """``chatledger sent ID SEQ``: JSON of what the model call at SEQ was sent and what it
    left out, and why; with ``--policy``, what it would have sent under that policy."""
    from eventlog.models import ContextSent
    from projections.adapters.item_list import ItemList
    from projections.calls import left_json, model_call, what_if_call
    from projections.cli.errors import Failure
    from projections.replay import read_checked

    key = args.key
    existing(store, args, key)
    items = ItemList(store, key)
    try:
        entries = items.sent(args.seq)
    except ValueError as e:
        raise Failure(str(e)) from e
    if args.policy is not None:
        from projections.cli.inspect import policy_of

        run = what_if_call(store, key, args.seq, policy_of(args), args.policy.valid_for)
        emit(
            {
                "memory": key,
                "seq": args.seq,
                "what_if": run.policy,
                "profile": run.profile,
                "same_as_sent": run.same,
                "sent": _entries_shown(items, run.sent),
                "left_out": [left_json(left) for left in run.left],
            }
        )
        return 0
    (record,) = read_checked(store, key, gt=args.seq - 1, lte=args.seq)
    event = decode_event(record)
    assert isinstance(event, ContextSent)  # noqa: S101 - items.sent() refused anything else
    call = model_call(store, key, args.seq)
    assert call is not None  # noqa: S101 - a context_sent event is a call
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
            "left_out": [left_json(left) for left in call.left],
            "reproduced": call.reproduced,
        }
    )
    return 0


def _entries_shown(items: Any, entries: Sequence[dict[str, Any]]) -> list[Any]:
    """``context_sent``-style entries as ``sent`` prints them: the items themselves."""
    refs = [(e["ref"][0], e["ref"][1]) for e in entries if "ref" in e]
    stored = iter(items.objects(refs))
    return [_shown("ref", next(stored)) if "ref" in e else e["new"] for e in entries]


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


def call_lines(call: ModelCall | CallRun) -> list[str]:
    """A model call (or a what-if of one) in words: a heading, then each run of messages
    left out with its reason."""
    from projections.calls import ModelCall, call_heading, run_heading, span

    heading = call_heading(call) if isinstance(call, ModelCall) else run_heading(call)
    if not call.left:
        return [heading, "  left out: nothing"]
    return [heading, *(f"  left out {span(left)}: {left.reason}" for left in call.left)]


def model_call_note(store: EventStore, key: str, seq: int) -> str | None:
    """For ``show --as-of SEQ`` at a recorded model call: what it sent and what it left out,
    and why (None at any other event)."""
    from projections.calls import model_call

    if seq < 1:
        return None
    call = model_call(store, key, seq)
    if call is None:
        return None
    lines = call_lines(call)
    hint = f"`chatledger sent {shell_id(key)} {seq}` prints exactly what was sent"
    return "\n".join([*lines, hint])


def call_at(
    args: argparse.Namespace, store: EventStore, key: str, record: Record
) -> ModelCall | CallRun | None:
    """The model call an event of ``replay`` or ``diff`` recorded (None: not a call); with
    ``--policy``, what it would have sent under that policy."""
    from projections.calls import model_call, what_if_call
    from projections.cli.inspect import policy_of

    if record.kind != "context_sent":
        return None
    policy = getattr(args, "policy", None)
    if policy is not None:
        return what_if_call(store, key, record.seq, policy_of(args), policy.valid_for)
    return model_call(store, key, record.seq)


def call_obj(call: ModelCall | CallRun) -> dict[str, Any]:
    """A model call (or a what-if of one) as JSON."""
    from projections.calls import ModelCall, call_json, left_json

    if isinstance(call, ModelCall):
        return call_json(call)
    return {
        "seq": call.seq,
        "what_if": call.policy,
        "profile": call.profile,
        "sent": list(call.sent),
        "left_out": [left_json(left) for left in call.left],
        "same_as_sent": call.same,
    }
