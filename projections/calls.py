"""Recorded model calls: what each was sent, what it left out and why, and what-if.

A framework session records, per model call, a ``context_sent`` event (``window_callback``, a
LangChain history with ``window=``): exactly what was sent, the policy, the provider profile
and the token count. This module is the read model over those events, shared by the CLI
(``replay``, ``diff``, ``sent --policy``) and the inspector:

* :func:`model_call` - one call: what it sent, and every message of the history it left out,
  with the reason. The reasons come from re-running the recorded policy and profile over the
  list as it was at the call (the event's meta records it), with the adapters' own selection
  (:mod:`projections.adapters.selection`): outside the window, over the token budget, dropped
  for validity, a system message replaced; and from the log: retracted at a seq, before the
  last clear. The re-run is checked against what was recorded (``reproduced``).
* :func:`what_if_call` - what that call would have sent under another policy.

A call's cost is the events since the memory's last clear before it (the list the policy
ran over, and the retractions among them): the same order as the call itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from eventlog.errors import ContentErasedError
from eventlog.formats.lc4j_json import message_from_obj
from eventlog.ids import MemoryId
from eventlog.messages import AiMessage, ToolExecutionResultMessage
from eventlog.models import (
    ContextSent,
    MessageRetracted,
    Record,
)
from eventlog.serialization import decode_event, require_opened
from eventlog.store import EventStore
from eventlog.validation import shown
from projections.adapters.item_list import loads, tail
from projections.adapters.selection import ITEM_KEY, Choice, choose, fold, item_of
from projections.replay import read_checked, records, window_meta
from projections.window import TokenWindowPolicy, WindowPolicy, check_policy

__all__ = [
    "NO_WINDOW",
    "CallRun",
    "LeftOut",
    "ModelCall",
    "call_heading",
    "call_json",
    "left_json",
    "model_call",
    "model_calls",
    "parse_recorded_policy",
    "run_heading",
    "span",
    "what_if_call",
]

NO_WINDOW = "no window recorded"
"""What the CLI and the inspector say where no model call recorded what it was sent."""

Ref = tuple[int, int]
_PAGE = 1_000  # events per read walking back to the last clear


class LeftOut(NamedTuple):
    """Messages of the history a call did not send, for one reason: refs ``first`` to
    ``last`` (``size`` of them, consecutive among those left out)."""

    first: Ref
    last: Ref
    size: int
    reason: str


class ModelCall(NamedTuple):
    """One recorded model call (a ``context_sent`` event).

    Attributes:
        seq: The event's seq.
        adapter: Which adapter recorded it.
        policy: The policy, as recorded (e.g. ``"messages:20"``).
        profile: The provider profile (None: none).
        tokens: The token count under a token policy (None for a message window).
        sent: What was sent, in order, as the event names it: ``{"ref": [seq, index]}`` or
            ``{"new": item}``.
        left: What of the history was not sent, with why.
        reproduced: Whether re-running the recorded policy gives exactly what was sent
            (None: it cannot be re-run here; ``left`` then says why).
    """

    seq: int
    adapter: str
    policy: str
    profile: str | None
    tokens: int | None
    sent: tuple[dict[str, Any], ...]
    left: list[LeftOut]
    reproduced: bool | None


class CallRun(NamedTuple):
    """What a recorded call would have sent under ``policy`` (:func:`what_if_call`).

    Attributes:
        seq: The call's seq.
        policy: The policy re-run (as ``context_sent`` records one).
        profile: The provider profile re-run with (None: none).
        sent: In order, ``{"ref": [seq, index]}`` or ``{"new": item}`` (the call's new input).
        left: What of the history it would have left out, with why.
        same: Whether that is exactly what the call was sent.
    """

    seq: int
    policy: str
    profile: str | None
    sent: tuple[dict[str, Any], ...]
    left: list[LeftOut]
    same: bool


class _Context(NamedTuple):
    """A call as recorded, with the log around it: the list it ran over and what left it."""

    event: ContextSent
    refs: list[Ref]  # the list at the call, oldest first
    stored: dict[Ref, Any]  # stored objects of the list (and of what was retracted since)
    gone: dict[Ref, str]  # left the list before the call: retracted, cleared


def parse_recorded_policy(text: str) -> WindowPolicy:
    """The window policy a ``context_sent`` event recorded (``messages:N`` or
    ``tokens:N:ESTIMATOR``, then ``:keep-system-first`` and ``:evict-to=F`` when set).

    Raises:
        ValueError: It is not one this install can build (e.g. a custom token estimator).
    """
    from projections.readmodel import make_policy

    parts = text.split(":")
    keep = "keep-system-first" in parts
    evict = [p.partition("=")[2] for p in parts if p.startswith("evict-to=")]
    core = [p for p in parts if p != "keep-system-first" and not p.startswith("evict-to=")]
    evict_to = float(evict[0]) if evict else None
    if len(core) == 2 and core[0] == "messages" and core[1].isdigit():
        return make_policy("messages", int(core[1]), None, keep, evict_to=evict_to)
    if len(core) >= 4 and core[0] == "tokens" and core[1].isdigit() and core[2] == "openai":
        return make_policy("tokens", int(core[1]), core[3], keep, evict_to=evict_to)
    msg = (
        f"policy {text!r} cannot be re-run here: only messages:N and OpenAI token estimators "
        "(tokens:N:openai:MODEL:...) are rebuilt from what a call recorded"
    )
    raise ValueError(msg)


def model_call(store: EventStore, memory_id: MemoryId, seq: int) -> ModelCall | None:
    """The model call recorded at event ``seq``, or None when that event is not one (the
    front ends then say :data:`NO_WINDOW`).

    Raises:
        TypeError: ``seq`` is not an int.
        ChainIntegrityError: A record read does not verify.
    """
    _check_seq("model_call", seq)
    found = read_checked(store, memory_id, gt=seq - 1, lte=seq) if seq >= 1 else []
    if not found or found[0].kind != "context_sent" or found[0].erased:
        return None
    return _call(store, memory_id, found[0])


def model_calls(
    store: EventStore, memory_id: MemoryId, start: int, end: int | None
) -> Iterator[ModelCall]:
    """The model calls recorded by events ``start..end`` (None: to the head), in order.

    Raises:
        ChainIntegrityError: A record read does not verify.
    """
    for record in records(store, memory_id, gt=start - 1, lte=end):
        if record.kind == "context_sent" and not record.erased:
            yield _call(store, memory_id, record)


def what_if_call(
    store: EventStore,
    memory_id: MemoryId,
    seq: int,
    policy: WindowPolicy,
    valid_for: str | None = None,
) -> CallRun:
    """What the model call recorded at event ``seq`` would have been sent under ``policy``
    (and the provider profile ``valid_for``; None: none): the same list and new input, the
    other rules. Under the recorded policy and profile it is what was sent.

    Args:
        store: The ledger.
        memory_id: The memory (session) id.
        seq: The ``context_sent`` event's seq.
        policy: The window policy to re-run, e.g. ``MessageWindowPolicy(5)``.
        valid_for: A provider profile (see :mod:`projections.validity`), or None.

    Raises:
        ValueError: Event ``seq`` is not a recorded model call ("no window recorded"), or
            the content it ran over was erased.
        TypeError: ``policy`` is not a :class:`~projections.window.WindowPolicy`, or ``seq``
            not an int.
        ChainIntegrityError: A record read does not verify.
    """
    check_policy("what_if_call", policy)
    _check_seq("what_if_call", seq)
    found = read_checked(store, memory_id, gt=seq - 1, lte=seq) if seq >= 1 else []
    if not found or found[0].kind != "context_sent" or found[0].erased:
        what = (
            ("its content was erased" if found[0].erased else f"a {found[0].kind} event")
            if found
            else "no such event"
        )
        msg = (
            f"what_if_call({shown(seq)}): {NO_WINDOW} at seq {shown(seq)} of {memory_id!r} "
            f"({what}); only model calls made through window_callback() or a history with "
            "window= can be re-run"
        )
        raise ValueError(msg)
    context = _context(store, memory_id, found[0])
    sent, reasons = _rerun(context, policy, valid_for, memory_id)
    chosen = {tuple(e["ref"]) for e in sent if "ref" in e}
    left = [(ref, reasons.get(ref, "evicted")) for ref in context.refs if ref not in chosen]
    text = {
        ref: _reason_text(code, policy, valid_for, context.stored.get(ref), memory_id)
        for ref, code in left
    }
    return CallRun(
        seq=seq,
        policy=_describe(policy, memory_id),
        profile=valid_for,
        sent=sent,
        left=_grouped({**context.gone, **text}),
        same=_content(sent, context) == _content(context.event.sent, context),
    )


def _check_seq(operation: str, seq: object) -> None:
    if isinstance(seq, bool) or not isinstance(seq, int):
        msg = (
            f"{operation}({seq!r}): a seq is an int (the context_sent event's), not "
            f"{type(seq).__name__}"
        )
        raise TypeError(msg)


def _call(store: EventStore, memory_id: MemoryId, record: Record) -> ModelCall:
    event = decode_event(record)
    assert isinstance(event, ContextSent)  # noqa: S101 - the caller checked the kind
    try:
        context = _context(store, memory_id, record)
    except ContentErasedError:
        return _call_of(record.seq, event, [], None)
    sent = {tuple(e["ref"]) for e in event.sent if isinstance(e.get("ref"), list)}
    unsent = [ref for ref in context.refs if ref not in sent]
    try:
        policy = parse_recorded_policy(event.policy)
    except ValueError as e:
        left = {ref: f"not sent ({e})" for ref in unsent}
        return _call_of(record.seq, event, _grouped({**context.gone, **left}), None)
    rerun, reasons = _rerun(context, policy, event.profile, memory_id)
    reproduced = _content(rerun, context) == _content(event.sent, context)
    again = {tuple(e["ref"]) for e in rerun if "ref" in e}
    text = {
        ref: (
            "not sent, though re-running the recorded policy sends it (not reproduced)"
            if ref in again
            else _reason_text(
                reasons.get(ref, "evicted"),
                policy,
                event.profile,
                context.stored.get(ref),
                memory_id,
            )
        )
        for ref in unsent
    }
    return _call_of(record.seq, event, _grouped({**context.gone, **text}), reproduced)


def _call_of(
    seq: int, event: ContextSent, left: list[LeftOut], reproduced: bool | None
) -> ModelCall:
    return ModelCall(
        seq, event.adapter, event.policy, event.profile, event.tokens, event.sent, left, reproduced
    )


def _context(store: EventStore, memory_id: MemoryId, record: Record) -> _Context:
    """The call at ``record`` with the list it ran over (its meta) and, walking back to the
    last clear, the messages of that list and what left it before the call."""
    event = decode_event(record)
    assert isinstance(event, ContextSent)  # noqa: S101 - the callers checked the kind
    refs = tail([tuple(run) for run in window_meta(record).runs], None)
    stored: dict[Ref, Any] = {}
    gone: dict[Ref, str] = {}
    retracted: dict[Ref, int] = {}
    start = _walk_back(store, memory_id, record.seq - 1, stored, retracted)
    for ref, at in retracted.items():
        gone[ref] = f"retracted at seq {at}"
    limit = event.history_limit
    if limit is not None and limit < len(refs):
        # The history was read with a limit: the policy ran over the newest `limit` items.
        for ref in refs[: len(refs) - limit]:
            gone[ref] = f"not in the history read (get_items(limit={limit}))"
        refs = refs[len(refs) - limit :]
    # A record acknowledged as damaged stays in the list's refs but is left out where it is
    # read (store.quarantine): the re-run runs over what the list reads.
    for ref in refs:
        if ref not in stored:
            gone[ref] = "left out as damaged (quarantined)"
    refs = [ref for ref in refs if ref in stored]
    if start is not None and start > 1:
        # The event before the clear: gone after a purge, left out when acknowledged as
        # damaged - then there is no list to name.
        before = read_checked(store, memory_id, gt=start - 2, lte=start - 1)
        try:
            runs = window_meta(before[0]).runs if before else []
        except ValueError:  # an event no chatledger memory wrote: nothing to name
            runs = []
        for ref in tail([tuple(run) for run in runs], None):
            gone.setdefault(ref, f"before the last clear (seq {start})")
    return _Context(event, refs, stored, gone)


def _walk_back(
    store: EventStore,
    memory_id: MemoryId,
    upto: int,
    stored: dict[Ref, Any],
    retracted: dict[Ref, int],
) -> int | None:
    """Read events ``upto`` down to the last clear (or set), newest first, keeping the
    stored objects of the messages they brought (as the item list reads them: no message
    is built that the re-run does not need) and the refs retracted (with the seq that
    retracted them).

    Returns:
        The seq of that clear or set; None when there was none.
    """
    while upto >= 1:
        page = read_checked(store, memory_id, lte=upto, limit=_PAGE, desc=True)
        for record in page:
            kind = record.kind
            if kind in {"memory_cleared", "memory_purged", "memory_erased"}:
                return record.seq
            if kind not in {"message_added", "messages_set", "message_retracted"}:
                continue
            if record.erased:
                msg = f"event {record.seq} of {memory_id!r} was erased: the call cannot be re-run"
                raise ContentErasedError(msg, str(memory_id), record.seq)
            if kind == "message_retracted":
                event = decode_event(record)
                assert isinstance(event, MessageRetracted)  # noqa: S101 - its kind
                retracted.setdefault((event.seq, event.index), record.seq)
                continue
            require_opened(record)
            obj = loads(record.payload)
            if kind == "message_added":
                stored[(record.seq, 0)] = obj
            else:
                stored.update({(record.seq, i): o for i, o in enumerate(obj)})
                return record.seq
        if len(page) < _PAGE:
            break
        upto = page[-1].seq - 1
    return None


def _rerun(
    context: _Context, policy: WindowPolicy, valid_for: str | None, memory_id: MemoryId
) -> tuple[tuple[dict[str, Any], ...], dict[Ref, str]]:
    """What ``policy`` (with ``valid_for``) chooses over the call's list and new input, as
    ``context_sent`` entries, and the reason code of each list ref it leaves out."""
    event, refs = context.event, context.refs
    if event.adapter == "langchain":
        folded = fold(
            policy, memory_id, [(ref, message_from_obj(context.stored[ref])) for ref in refs]
        )
        return tuple({"ref": list(ref)} for ref in folded.chosen), dict(folded.left)
    new = [e["new"] for e in event.sent if "new" in e]
    items = [_item(context.stored[ref]) for ref in refs] + new
    choice: Choice = choose(policy, valid_for, memory_id, items)
    entries = tuple(
        {"ref": list(refs[i])} if i < len(refs) else {"new": new[i - len(refs)]}
        for i in choice.chosen
    )
    return entries, {refs[i]: code for i, code in choice.left.items() if i < len(refs)}


def _item(obj: Any) -> Any:
    """The Agents SDK item a stored object carries (as the session reads it back)."""
    attributes = obj.get("attributes") if isinstance(obj, dict) else None
    if isinstance(attributes, dict) and isinstance(attributes.get(ITEM_KEY), dict):
        return attributes[ITEM_KEY]
    return item_of(message_from_obj(obj))


def _content(entries: Sequence[dict[str, Any]], context: _Context) -> list[str]:
    """What entries send, as canonical JSON: for the Agents SDK, refs to equal items compare
    equal (the adapter names a sent item by the first served item equal to it)."""
    out = []
    items = context.event.adapter != "langchain"  # a history's messages are named by ref only
    for entry in entries:
        ref = entry.get("ref")
        if items and isinstance(ref, list) and len(ref) == 2 and tuple(ref) in context.stored:
            value: Any = _item(context.stored[(ref[0], ref[1])])
        else:
            value = entry.get("new", entry)
        out.append(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
    return out


def _reason_text(
    code: str,
    policy: WindowPolicy,
    valid_for: str | None,
    stored: Any,
    memory_id: MemoryId,
) -> str:
    """A reason code of :mod:`projections.adapters.selection` in words (``stored``: the
    message's stored object, read only for a validity reason)."""
    limit = policy.limit_for(memory_id)
    if code == "evicted":
        if isinstance(policy, TokenWindowPolicy):
            return f"over the {limit:,}-token budget"
        return "outside the last item" if limit == 1 else f"outside the last {limit:,} items"
    if code == "invalid":
        message = None if stored is None else message_from_obj(stored)
        if isinstance(message, ToolExecutionResultMessage):
            what = "tool result without its call"
        elif isinstance(message, AiMessage) and message.tool_execution_requests:
            what = "tool call without its result"
        else:
            what = "message the provider refuses where it stands"
        return f"{what} dropped for validity for {valid_for}"
    return {
        "orphan": "tool result whose call left the window",
        "system_replaced": "system message replaced by a newer one",
        "system_duplicate": "the same system message as the one kept",
    }.get(code, code)


def _grouped(reasons: dict[Ref, str]) -> list[LeftOut]:
    """Refs with their reasons as runs: consecutive refs (in order) with the same reason."""
    out: list[LeftOut] = []
    for ref in sorted(reasons):
        reason = reasons[ref]
        if out and out[-1].reason == reason:
            last = out[-1]
            out[-1] = LeftOut(last.first, ref, last.size + 1, reason)
        else:
            out.append(LeftOut(ref, ref, 1, reason))
    return out


def _describe(policy: WindowPolicy, memory_id: MemoryId) -> str:
    from projections.adapters.item_list import describe

    return describe(policy, memory_id)


def span(left: LeftOut) -> str:
    """Where a run of left-out messages is: ``event 5``, ``events 1-7 (6)`` (how many: a
    run may skip events that brought none; ``seq.index`` for a message of a set's list)."""

    def one(ref: Ref) -> str:
        return str(ref[0]) if not ref[1] else f"{ref[0]}.{ref[1]}"

    if left.size == 1:
        return f"event {one(left.first)}"
    return f"events {one(left.first)}-{one(left.last)} ({left.size})"


def left_json(left: LeftOut) -> dict[str, Any]:
    """A run of left-out messages as JSON: ``from``, ``to`` (refs), ``count``, ``reason``."""
    return {
        "from": list(left.first),
        "to": list(left.last),
        "count": left.size,
        "reason": left.reason,
    }


def call_json(call: ModelCall) -> dict[str, Any]:
    """A recorded model call as JSON, as ``replay``, ``diff`` and the inspector give it."""
    return {
        "seq": call.seq,
        "adapter": call.adapter,
        "policy": call.policy,
        "profile": call.profile,
        "tokens": call.tokens,
        "sent": list(call.sent),
        "left_out": [left_json(left) for left in call.left],
        "reproduced": call.reproduced,
    }


def call_heading(call: ModelCall, *, checked: bool = True) -> str:
    """One line: the call's policy, profile, tokens and how much it sent, and (``checked``)
    whether re-running the policy reproduces it."""
    refs = sum(1 for entry in call.sent if "ref" in entry)
    new = len(call.sent) - refs
    profile = f", valid for {call.profile}" if call.profile else ""
    tokens = f", {call.tokens:,} tokens" if call.tokens is not None else ""
    check = {
        True: "re-running the policy reproduces it",
        False: "re-running the policy does NOT reproduce it",
        None: "the policy cannot be re-run here",
    }[call.reproduced]
    return (
        f"model call at seq {call.seq} ({_short_policy(call.policy)}{profile}{tokens}): sent "
        f"{refs} history item{'' if refs == 1 else 's'} and {new} new"
    ) + (f"; {check}" if checked else "")


def _short_policy(text: str) -> str:
    """A recorded policy without its token estimator's versions (``tokens:N:openai:MODEL``)."""
    parts = text.split(":")
    if parts[0] == "tokens" and len(parts) > 4 and parts[2] == "openai":
        extras = [p for p in parts if p == "keep-system-first" or p.startswith("evict-to=")]
        return ":".join([*parts[:4], *extras])
    return text


def run_heading(run: CallRun) -> str:
    """One line for :func:`what_if_call`'s answer."""
    refs = sum(1 for entry in run.sent if "ref" in entry)
    new = len(run.sent) - refs
    profile = f", valid for {run.profile}" if run.profile else ""
    same = "the same as was sent" if run.same else "not what was sent"
    return (
        f"what-if model call at seq {run.seq} ({_short_policy(run.policy)}{profile}): would "
        f"send {refs} history item{'' if refs == 1 else 's'} and {new} new; {same}"
    )
