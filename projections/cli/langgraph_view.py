"""``chatledger langgraph THREAD``: a thread stored by LangGraph's ``LedgerSaver``, in its terms.

Without options: the checkpoints as steps, oldest first (step, source, the channels that changed,
pending writes, and the ledger seq of the checkpoint's event, which ``chatledger prove`` takes).
``--checkpoint ID`` (or ``latest``): that checkpoint's ``messages`` channel as the conversation.
``--diff A B``: what changed from checkpoint A to B (channels, and the messages added or
dropped). Decoding values needs LangGraph's serializer: the ``langgraph`` extra.
"""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING

from projections.cli.errors import Failure, UsageError

if TYPE_CHECKING:
    from eventlog.store import EventStore
    from projections.adapters.langgraph_steps import Step

__all__ = ["HELP", "add_arguments", "run", "show_at"]

HELP = (
    "Show a LangGraph thread stored by LedgerSaver: its checkpoints as steps, one "
    "checkpoint's conversation (--checkpoint), or what changed between two (--diff)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's own arguments (the global ones are added by the caller)."""
    parser.add_argument("thread", metavar="THREAD", help="the LangGraph thread_id")
    parser.add_argument(
        "--ns", default="", metavar="NS", help="checkpoint namespace (default: the root graph's)"
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--checkpoint", metavar="ID", help="show this checkpoint's conversation ('latest')"
    )
    which.add_argument(
        "--diff", nargs=2, metavar=("A", "B"), help="what changed from checkpoint A to B"
    )


def run(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger langgraph THREAD [--ns NS] [--checkpoint ID | --diff A B]``."""
    try:
        from projections.adapters.langgraph_steps import thread_steps
    except ModuleNotFoundError as e:
        raise Failure(str(e)) from e
    steps = thread_steps(store, args.thread, args.ns)
    if not steps:
        _erased(store, args)
        msg = (
            f"langgraph: thread {args.thread!r} (namespace {args.ns!r}) has no checkpoints in "
            "this ledger; `chatledger ids` lists its memories (a thread is "
            '~t:["THREAD","langgraph","NS"])'
        )
        raise Failure(msg)
    by_id = {s.checkpoint_id: s for s in steps}
    if args.checkpoint is not None:
        return _conversation(args, _pick(by_id, steps, args.checkpoint))
    if args.diff is not None:
        a, b = (_pick(by_id, steps, cid) for cid in args.diff)
        return _diff(args, a, b)
    return _steps(args, steps)


def _erased(store: EventStore, args: argparse.Namespace) -> None:
    """Say so when the thread is empty because it was erased (``delete_thread``)."""
    from eventlog.serialization import decode_event
    from projections.adapters.langgraph import thread_memory_id

    newest = store.read(thread_memory_id(args.thread, args.ns), desc=True, limit=1)
    if newest and newest[0].kind == "memory_erased":
        receipt = decode_event(newest[0])
        msg = (
            f"langgraph: thread {args.thread!r} was erased: receipt at seq {newest[0].seq} "
            f"({getattr(receipt, 'reason', '')}); `chatledger history` shows what is left"
        )
        raise Failure(msg)


def _pick(by_id: dict[str, Step], steps: list[Step], cid: str) -> Step:
    if cid == "latest":
        return steps[-1]
    if cid not in by_id:
        msg = (
            f"langgraph: no checkpoint {cid!r} in this thread; `chatledger langgraph THREAD` "
            "lists its checkpoint ids ('latest' is the newest)"
        )
        raise UsageError(msg)
    return by_id[cid]


def _steps(args: argparse.Namespace, steps: list[Step]) -> int:
    from rich.table import Table

    from projections.cli.render import console, emit, plural, title

    if args.json:
        for step in steps:
            emit(step.row())
        return 0
    key = f"{args.thread} (namespace {args.ns!r})" if args.ns else args.thread
    table = Table(
        "step",
        "source",
        "checkpoint id",
        "seq",
        "messages",
        "changed",
        "writes",
        title=title(f"LangGraph thread {key}: {plural(len(steps), 'checkpoint')}"),
    )
    for step in steps:
        table.add_row(
            str(step.step),
            str(step.source),
            step.checkpoint_id,
            str(step.seq),
            str(step.messages),
            ", ".join(step.changed),
            str(step.pending_writes),
        )
    console().print(table)
    return 0


def _conversation(args: argparse.Namespace, step: Step) -> int:
    from projections.adapters.langgraph_steps import conversation
    from projections.cli.render import console, emit, plural, short

    lines = conversation(step.tuple)
    if args.json:
        emit({"checkpoint_id": step.checkpoint_id, "messages": [vars(m) for m in lines]})
        return 0
    out = console()
    out.print(f"checkpoint {step.checkpoint_id}: {plural(len(lines), 'message')}")
    for m in lines:
        out.print(f"{m.role:>6}: {short(m.text, 100)}")
    return 0


def _diff(args: argparse.Namespace, a: Step, b: Step) -> int:
    from projections.adapters.langgraph_steps import diff
    from projections.cli.render import console, emit, short

    found = diff(a.tuple, b.tuple)
    if args.json:
        emit(
            {
                "from": found.low,
                "to": found.high,
                "channels_changed": found.channels,
                "messages_added": [vars(m) for m in found.added],
                "messages_dropped": [vars(m) for m in found.dropped],
            }
        )
        return 0
    out = console()
    out.print(f"from {found.low} to {found.high}")
    out.print(f"channels changed: {', '.join(found.channels) or 'none'}")
    for sign, lines in (("+", found.added), ("-", found.dropped)):
        for m in lines:
            out.print(f"{sign} {m.role:>6}: {short(m.text, 100)}")
    return 0


def show_at(
    args: argparse.Namespace,
    store: EventStore,
    memory_id: tuple[str, str, str],
    seq: int,
    head: int,
) -> int:
    """``chatledger show`` of a LangGraph thread: the conversation (``messages`` channel) of
    its newest checkpoint stored at or before ``seq``."""
    try:
        from projections.adapters.langgraph_steps import conversation, thread_steps
    except ModuleNotFoundError as e:
        raise Failure(str(e)) from e
    from projections.cli.render import console, emit, plain, plural, role, title

    thread, _, ns = memory_id
    steps = [s for s in thread_steps(store, thread, ns) if s.seq is not None and s.seq <= seq]
    if not steps:
        msg = (
            f"show: LangGraph thread {thread!r} has no checkpoint at or before seq {seq}; "
            "`chatledger history` lists its events"
        )
        raise Failure(msg)
    step = steps[-1]
    lines = conversation(step.tuple)
    if args.json:
        emit(
            {
                "checkpoint_id": step.checkpoint_id,
                "seq": step.seq,
                "step": step.step,
                "source": step.source,
                "messages": [vars(m) for m in lines],
            }
        )
        return 0
    from rich.table import Table

    heading = (
        f"LangGraph thread {thread!r} after seq {seq} of {head}: checkpoint "
        f"{step.checkpoint_id} (step {step.step}, {step.source}, seq {step.seq}), "
        f"{plural(len(lines), 'message')}"
    )
    table = Table("#", "role", "text", title=title(heading))
    for number, m in enumerate(lines, 1):
        table.add_row(str(number), role(m.role), plain(m.text))
    console().print(table)
    from eventlog.ids import memory_key
    from projections.cli.args import shell_id

    where = shell_id(memory_key(memory_id))
    console().print(
        plain(
            f"its steps: chatledger langgraph {shlex.quote(thread)} · an inclusion proof of "
            f"this checkpoint: chatledger prove {where} {step.seq}"
        )
    )
    return 0
