"""``chatledger langgraph THREAD``: a thread stored by LangGraph's ``LedgerSaver``, in its terms.

Without options: the checkpoints as steps, oldest first (step, source, the channels that changed,
pending writes, and the ledger seq of the checkpoint's event, which ``chatledger prove`` takes).
``--checkpoint ID`` (or ``latest``): that checkpoint's ``messages`` channel as the conversation.
``--diff A B``: what changed from checkpoint A to B (channels, and the messages added or
dropped). Decoding values needs LangGraph's serializer: the ``langgraph`` extra.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from projections.cli.errors import Failure, UsageError

if TYPE_CHECKING:
    from eventlog.store import EventStore

__all__ = ["HELP", "add_arguments", "run"]

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
        from projections.adapters.langgraph import LedgerSaver
    except ModuleNotFoundError as e:
        raise Failure(str(e)) from e
    saver = LedgerSaver(store, cache_size=1)
    config: Any = {"configurable": {"thread_id": args.thread, "checkpoint_ns": args.ns}}
    steps = list(reversed(list(saver.list(config))))
    if not steps:
        _erased(store, args)
        msg = (
            f"langgraph: thread {args.thread!r} (namespace {args.ns!r}) has no checkpoints in "
            "this ledger; `chatledger ids` lists its memories (a thread is "
            '~t:["THREAD","langgraph","NS"])'
        )
        raise Failure(msg)
    by_id = {t.checkpoint["id"]: t for t in steps}
    if args.checkpoint is not None:
        return _conversation(args, _pick(by_id, steps, args.checkpoint))
    if args.diff is not None:
        a, b = (_pick(by_id, steps, cid) for cid in args.diff)
        return _diff(args, a, b)
    return _steps(args, saver, steps, by_id)


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


def _pick(by_id: dict[str, Any], steps: list[Any], cid: str) -> Any:
    if cid == "latest":
        return steps[-1]
    if cid not in by_id:
        msg = (
            f"langgraph: no checkpoint {cid!r} in this thread; `chatledger langgraph THREAD` "
            "lists its checkpoint ids ('latest' is the newest)"
        )
        raise UsageError(msg)
    return by_id[cid]


def _changed(step: Any, by_id: dict[str, Any]) -> list[str]:
    """Channels whose version differs from the parent checkpoint's (all, for a first one)."""
    versions = step.checkpoint["channel_versions"]
    parent = step.parent_config and by_id.get(step.parent_config["configurable"]["checkpoint_id"])
    before = parent.checkpoint["channel_versions"] if parent else {}
    return sorted(c for c, v in versions.items() if before.get(c) != v)


def _messages(step: Any) -> list[Any]:
    value = step.checkpoint["channel_values"].get("messages", [])
    return value if isinstance(value, list) else []


def _message_obj(message: Any) -> dict[str, Any]:
    role = str(getattr(message, "type", type(message).__name__))
    content = getattr(message, "content", message)
    text = content if isinstance(content, str) else str(content)
    return {"role": role, "id": getattr(message, "id", None), "text": text}


def _steps(args: argparse.Namespace, saver: Any, steps: list[Any], by_id: dict[str, Any]) -> int:
    from rich.table import Table

    from projections.cli.render import console, emit, plural, title

    rows = []
    for step in steps:
        rows.append(
            {
                "checkpoint_id": step.checkpoint["id"],
                "parent_id": step.parent_config["configurable"]["checkpoint_id"]
                if step.parent_config
                else None,
                "step": step.metadata.get("step"),
                "source": step.metadata.get("source"),
                "changed": _changed(step, by_id),
                "messages": len(_messages(step)),
                "pending_writes": len(step.pending_writes or []),
                "seq": saver.checkpoint_seq(step.config),
            }
        )
    if args.json:
        for row in rows:
            emit(row)
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
        title=title(f"LangGraph thread {key}: {plural(len(rows), 'checkpoint')}"),
    )
    for row in rows:
        table.add_row(
            str(row["step"]),
            str(row["source"]),
            row["checkpoint_id"],
            str(row["seq"]),
            str(row["messages"]),
            ", ".join(row["changed"]),
            str(row["pending_writes"]),
        )
    console().print(table)
    return 0


def _conversation(args: argparse.Namespace, step: Any) -> int:
    from projections.cli.render import console, emit, plural, short

    messages = [_message_obj(m) for m in _messages(step)]
    if args.json:
        emit({"checkpoint_id": step.checkpoint["id"], "messages": messages})
        return 0
    out = console()
    out.print(f"checkpoint {step.checkpoint['id']}: {plural(len(messages), 'message')}")
    for m in messages:
        out.print(f"{m['role']:>6}: {short(m['text'], 100)}")
    return 0


def _diff(args: argparse.Namespace, a: Any, b: Any) -> int:
    from projections.cli.render import console, emit, short

    va, vb = a.checkpoint["channel_versions"], b.checkpoint["channel_versions"]
    changed = sorted(c for c in {*va, *vb} if va.get(c) != vb.get(c))
    ma, mb = _messages(a), _messages(b)
    ids_a = {getattr(m, "id", None) for m in ma}
    ids_b = {getattr(m, "id", None) for m in mb}
    added = [_message_obj(m) for m in mb if getattr(m, "id", None) not in ids_a]
    dropped = [_message_obj(m) for m in ma if getattr(m, "id", None) not in ids_b]
    result = {
        "from": a.checkpoint["id"],
        "to": b.checkpoint["id"],
        "channels_changed": changed,
        "messages_added": added,
        "messages_dropped": dropped,
    }
    if args.json:
        emit(result)
        return 0
    out = console()
    out.print(f"from {a.checkpoint['id']} to {b.checkpoint['id']}")
    out.print(f"channels changed: {', '.join(changed) or 'none'}")
    for sign, found in (("+", added), ("-", dropped)):
        for m in found:
            out.print(f"{sign} {m['role']:>6}: {short(m['text'], 100)}")
    return 0
