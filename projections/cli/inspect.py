"""Read-only commands: ids, history, show, diff, explain, replay, verify."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from eventlog.errors import ChainIntegrityError
from eventlog.ids import StreamKey, memory_id_from_key
from eventlog.models import Record, format_time
from projections import readmodel as model
from projections.adapters.langgraph_events import is_thread_memory
from projections.audit import Change, diff_stream, explain
from projections.checked import seq_at_checked
from projections.cli import ledger, sessions
from projections.cli.args import PROG, shell_id
from projections.cli.errors import UsageError
from projections.cli.render import (
    console,
    describe,
    emit,
    json_text,
    message_obj,
    plain,
    plural,
    preview,
    record_json,
    record_summary,
    ref_text,
    role,
    title,
    when,
)
from projections.cli.store import check_seq, existing, where
from projections.replay import records

if TYPE_CHECKING:
    from rich.console import Console

    from eventlog.store import EventStore
    from projections.calls import ModelCall

__all__ = [
    "diff_cmd",
    "explain_cmd",
    "history",
    "ids",
    "policy_of",
    "replay",
    "show",
    "verify",
]

_PAGE = 1_000  # events read per query while streaming
SHOWN = 50
"""Rows a ``history`` or ``diff`` table shows before saying how many follow."""


def ids(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger ids``: the memory ids, written so they can be pasted into a command."""
    from rich.table import Column, Table

    infos = store.streams(include_system=args.include_system)
    if store.erasable_ids:  # listed by id, not by the pseudonyms' random order
        infos.sort(key=lambda info: (info.id_erased, model.shown_key(info)))
    if args.json:
        for info in infos:
            erased = model.erased_id_label(store, info)
            emit(
                {
                    "memory": model.shown_key(info),
                    **({} if erased is None else {"id_erased": erased}),
                    "events": info.event_count,
                    "last_seq": info.last_seq,
                    "first_recorded_at": format_time(info.first_recorded_at),
                    "last_recorded_at": format_time(info.last_recorded_at),
                }
            )
        return 0
    out = console()
    if not infos:
        out.print(f"no memories in {where(args)}")
        return 0
    # The id is what a user pastes into the next command: too long for a narrow terminal, it
    # is folded over lines, never cut with an ellipsis (a cut id names no memory).
    column = Column("memory id", overflow="fold")
    table = Table(column, "events", "last seq", "first activity (UTC)", "last activity (UTC)")
    for info in infos:
        erased = model.erased_id_label(store, info)
        table.add_row(
            plain(shell_id(model.shown_key(info)) if erased is None else erased),
            str(info.event_count),
            str(info.last_seq),
            when(info.first_recorded_at),
            when(info.last_recorded_at),
        )
    out.print(table)
    return 0


def _records(store: EventStore, key: StreamKey, gt: int, lte: int | None) -> Iterator[Record]:
    """The records in (gt, lte], in pages, each checked by the store before it is shown."""
    return records(store, key, gt=gt, lte=lte, page=_PAGE)


def _until_break(
    store: EventStore, key: StreamKey, gt: int, lte: int | None
) -> Iterator[Record | ChainIntegrityError]:
    """The records in (gt, lte]; on a broken chain, the verified records before the break,
    then the error (last): the intact part of a history stays readable.

    A page is checked whole before any of it is served, so a break at seq N re-reads the
    records before N, which verify on their own.
    """
    last = gt
    try:
        for record in _records(store, key, gt, lte):
            last = record.seq
            yield record
        return
    except ChainIntegrityError as e:
        error = e
    if error.stream_id == key and error.seq - 1 > last:
        try:
            yield from _records(store, key, last, error.seq - 1)
        except ChainIntegrityError as e:  # an earlier break than the first one named
            error = e
    yield error


def history(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger history ID``: one row (or JSON line) per event.

    JSON lines stream every event in the range. The table shows the first
    :data:`SHOWN` events and how many follow, with the command that lists the next ones: a
    table must be drawn whole before it is printed, so a million rows would be held first.
    """
    from rich.table import Table

    key = args.key
    head = existing(store, args, key)
    start = args.start or 1
    check_seq("--from", start, head, key)
    if args.end is not None:
        check_seq("--to", args.end, head, key)
        if args.end < start:  # an empty table would read as "no events there"
            msg = f"--to {args.end} is before --from {start}; list from the earlier seq"
            raise UsageError(msg)
    found = _until_break(store, key, start - 1, args.end)
    if args.json:
        for record in found:
            if isinstance(record, ChainIntegrityError):
                raise record  # after the intact lines: stderr names the break, exit status 1
            emit(record_json(record))
        return 0
    table = Table(
        "seq",
        "time (UTC)",
        "kind",
        "window",
        "event",
        title=title(f"history of {shell_id(key)} ({plural(head, 'event')})"),
    )
    last = head if args.end is None else args.end
    shown = 0
    tool_names: dict[str, str] = {}
    broken: ChainIntegrityError | None = None
    # One more than SHOWN: a break right after the last row shown is still marked.
    for rows, record in enumerate(itertools.islice(found, SHOWN + 1)):
        if isinstance(record, ChainIntegrityError):
            broken = record
            what = record.reason.split(";")[0]  # the remedy follows on stderr
            mark = f"chain broken here ({what}); the events above verify"
            table.add_row(str(record.seq), "", "BROKEN", "", plain(mark), style="bold red")
            break
        if rows == SHOWN:
            break
        summary, size = record_summary(record, tool_names)
        table.add_row(
            str(record.seq),
            when(record.recorded_at),
            record.kind,
            "" if size is None else str(size),
            summary,
        )
        shown = record.seq
    out = console()
    out.print(table)
    if broken is not None:
        raise broken  # stderr names the break and the remedy, exit status 1
    if shown and shown < last:
        # Seqs are consecutive (records() refuses a gap), so the rest is counted, not read.
        more = f"{PROG} history {shell_id(key)} --from {shown + 1}{_same_range(args)}"
        out.print(
            f"… {plural(last - shown, 'more event')}: {more} (or --json for all)", style="dim"
        )
    return 0


def _same_range(args: argparse.Namespace) -> str:
    """The options that keep the next page on the same memory and range (never the DSN)."""
    words = [] if args.end is None else ["--to", str(args.end)]
    words += ["--db", args.db] if args.db else []
    words += ["--dsn", "URL", "--schema", args.schema] if args.dsn else []
    return "".join(" " + shlex.quote(w) for w in words)


def show(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger show ID``: the view at the head, after a seq, at a time, or under a policy."""
    from rich.table import Table

    key = args.key
    head = existing(store, args, key)
    if args.as_of is not None:
        check_seq("--as-of", args.as_of, head, key)
        seq = args.as_of
    elif args.at is not None:
        seq = seq_at_checked(store, key, args.at) or 0  # a time edited by hand: refused
    else:
        seq = head
    memory_id = memory_id_from_key(key)
    if args.policy is None and is_thread_memory(memory_id):
        # A LangGraph thread (LedgerSaver) records checkpoints, not a window.
        from projections.cli import langgraph_view

        return langgraph_view.show_at(args, store, memory_id, seq, head)
    if args.policy is not None:
        view = model.what_if_view(store, key, policy_of(args), seq, valid_for=args.policy.valid_for)
        how = "what-if " + args.policy.text
    else:
        view = model.recorded_view(store, key, seq)
        how = "recorded view"
    if args.json:
        # A report: one object (the view was a bare array before; the README's JSON shapes).
        emit(
            {
                "memory": str(key),
                "seq": seq,
                "head": head,
                "view": how,
                "messages": [message_obj(m) for _, m in view],
            }
        )
        return 0
    heading = f"{shell_id(key)} after seq {seq} of {head} ({how}, {plural(len(view), 'message')})"
    table = Table("#", "event", "role", "text", title=title(heading))
    tool_names: dict[str, str] = {}
    for number, (ref, message) in enumerate(view, 1):
        name, text = describe(message, tool_names)
        table.add_row(str(number), ref_text(ref), role(name), plain(text))
    console().print(table)
    if args.policy is None:
        note = sessions.model_call_note(store, key, seq)
        if note is not None:
            console().print(plain(note))
    summary = None if args.policy is not None else model.summary_at(store, key, seq)
    if summary is not None:
        # A summarizing memory sent this summary before the window (after its system message).
        console().print(plain(f"with the summary of event {summary[0]}: {summary[1]}"))
    return 0


def policy_of(args: argparse.Namespace) -> model.Policy:
    """The window policy of ``--policy`` and ``--keep-system-first`` (every command that
    takes them builds it here).

    Raises:
        UsageError: The token model is unknown.
    """
    spec = args.policy
    try:
        return model.make_policy(
            spec.kind, spec.limit, spec.model, args.keep_system_first, evict_to=spec.evict_to
        )
    except ValueError as e:
        msg = f"--policy {spec.text}: {e}"
        raise UsageError(msg) from e


def _change_json(change: Change) -> dict[str, Any]:
    return {
        "ref": list(change.entry.ref),
        "entered_at": change.entered_at,
        "left_at": change.left_at,
        "reason": change.reason,
        "message": message_obj(change.message),
    }


def diff_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger diff ID A B``: what entered and left the view, and why."""
    from rich.table import Table
    from rich.text import Text

    key = args.key
    head = existing(store, args, key)
    check_seq("A", args.a, head, key)
    check_seq("B", args.b, head, key)
    if args.a > args.b:
        msg = f"diff {args.a} {args.b}: A must not be after B (swap them)"
        raise UsageError(msg)
    # Streamed: the walk keeps a few numbers per change, messages are read back a page at a
    # time, so a diff over a million events prints in bounded memory.
    result = diff_stream(store, key, args.a, args.b)
    if args.json:
        # The same single object as ever, written change by change.
        head_obj = {"memory": str(key), "from": result.start, "to": result.end, "changes": []}
        sys.stdout.write(json_text(head_obj)[:-2])
        for i, change in enumerate(result):
            sys.stdout.write((", " if i else "") + json_text(_change_json(change)))
        calls = [sessions.call_obj(call) for call in _calls(store, key, args.a, args.b)]
        sys.stdout.write(f"], {json.dumps('model_calls')}: {json_text(calls)}}}\n")
        return 0
    entered, left, passed = result.counts()
    total = entered + left + passed
    heading = (
        f"{shell_id(key)}: seq {result.start} → {result.end}: {entered} entered, "
        f"{left} left, {passed} came and went"
    )
    table = Table("", "event", "entered", "left", "reason", "message", title=title(heading))
    for change in itertools.islice(result, SHOWN):
        if change.left_at is None:
            mark = Text("+", style="green")
        elif change.entered_at is None:
            mark = Text("-", style="red")
        else:
            mark = Text("±", style="yellow")
        table.add_row(
            mark,
            ref_text(change.entry.ref),
            "" if change.entered_at is None else str(change.entered_at),
            "" if change.left_at is None else str(change.left_at),
            model.reason_text(change.reason),
            preview(change.message, 60),
        )
    out = console()
    out.print(table)
    if total > SHOWN:
        out.print(
            f"… {plural(total - SHOWN, 'more change')}: add --json to list every one", style="dim"
        )
    for call in _calls(store, key, args.a, args.b):
        for text in sessions.call_lines(call):
            out.print(plain(text))
    return 0


def _calls(store: EventStore, key: StreamKey, a: int, b: int) -> Iterator[ModelCall]:
    """The model calls recorded by events after ``a`` up to ``b`` (what a diff spans)."""
    from projections.calls import model_calls

    return model_calls(store, key, a + 1, b) if b > a else iter(())


def explain_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger explain ID SEQ``: when a message entered the view and why it left."""
    key = args.key
    head = existing(store, args, key)
    check_seq("SEQ", args.seq, head, key)
    change = explain(store, key, args.seq, args.index)
    if args.json:
        emit({"memory": str(key), **_change_json(change)})
        return 0
    out = console()
    out.print(preview(change.message))
    reason = model.reason_text(change.reason)
    if change.left_at is None:
        out.print(f"entered the view at seq {change.entered_at}; still in it at seq {head} (head)")
    elif change.left_at == change.entered_at:
        out.print(f"brought by seq {change.left_at} but not kept: {reason}")
    else:
        out.print(
            f"entered the view at seq {change.entered_at}; left it at seq {change.left_at}: "
            f"{reason}"
        )
    return 0


@contextlib.contextmanager
def _maybe_pager(out: Console, enabled: bool) -> Iterator[None]:
    if enabled and sys.stdout.isatty() and sys.stdin.isatty():
        # As git does: colours pass through (-R), short output needs no keypress (-F), and the
        # screen is not cleared on exit (-X). A LESS the user set wins.
        os.environ.setdefault("LESS", "-FRX")
        with out.pager(styles=True):
            yield
    else:
        yield


def replay(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger replay ID``: the view after each event, paged on a terminal."""
    from rich.rule import Rule
    from rich.text import Text

    key = args.key
    head = existing(store, args, key)
    check_seq("--from", args.start, head, key)
    last = head if args.end is None else args.end
    check_seq("--to", last, head, key)
    if last < args.start:
        msg = f"--from {args.start} is after --to {last}"
        raise UsageError(msg)
    end = last if args.page_size is None else min(last, args.start + args.page_size - 1)

    def make(start: int, upto: int) -> Iterable[model.Step]:
        if args.policy is not None:
            return model.policy_steps(
                store, key, policy_of(args), start, upto, valid_for=args.policy.valid_for
            )
        return model.recorded_steps(store, key, start, upto)

    steps = _steps_until_break(make, args.start, end)
    if args.json:
        for step in steps:
            if isinstance(step, ChainIntegrityError):
                raise step  # after the intact lines: stderr names the break, exit status 1
            record, view, departures = step
            line = {
                "seq": record.seq,
                "kind": record.kind,
                "recorded_at": record.recorded_at_text,
                "view": [message_obj(m) for m in view],
                "left": [{"reason": r, "message": message_obj(m)} for m, r in departures],
            }
            call = sessions.call_at(args, store, key, record)
            emit(line if call is None else {**line, "model_call": sessions.call_obj(call)})
        return 0
    out = console()
    tool_names: dict[str, str] = {}
    broken: ChainIntegrityError | None = None
    with _maybe_pager(out, not args.no_pager):
        for step in steps:
            if isinstance(step, ChainIntegrityError):
                broken = step
                what = step.reason.split(";")[0]  # the remedy follows on stderr
                mark = (
                    f"seq {step.seq} · BROKEN · chain broken here ({what}); the steps above verify"
                )
                out.print(Text("── " + mark, style="bold red"))
                break
            record, view, departures = step
            summary, _ = record_summary(record, tool_names)
            heading = Text.assemble(
                f"seq {record.seq} · {when(record.recorded_at)} · {record.kind} · ", summary
            )
            # A rule fills the terminal's width; piped, it would fill the no-wrap width.
            out.print(Rule(heading, align="left") if out.is_terminal else Text("── ") + heading)
            for number, message in enumerate(view, 1):
                out.print(Text.assemble(f"  {number:>3} ", preview(message, tool_names=tool_names)))
            for message, reason in departures:
                left = f"  ← {model.reason_text(reason)}"
                out.print(
                    Text.assemble(
                        ("    - ", "red"), preview(message, 50, tool_names), (left, "red")
                    )
                )
            call = sessions.call_at(args, store, key, record)
            for text in [] if call is None else sessions.call_lines(call):
                out.print(Text("  " + text, style="cyan"))
        if end < last and broken is None:
            more = f"{PROG} replay {shell_id(key)} --from {end + 1}{_same_view(args)}"
            out.print(f"… {plural(last - end, 'more event')}: {more}", style="dim")
    if broken is not None:
        raise broken  # stderr names the break and the remedy, exit status 1
    return 0


def _steps_until_break(
    make: Callable[[int, int], Iterable[model.Step]], start: int, end: int
) -> Iterator[model.Step | ChainIntegrityError]:
    """The steps ``start..end``; on a broken chain, the steps before the break, then the error
    (as :func:`_until_break` does for records)."""
    last = start - 1
    try:
        for step in make(start, end):
            last = step[0].seq
            yield step
        return
    except ChainIntegrityError as e:
        error = e
    if error.seq - 1 > last:
        try:
            yield from make(last + 1, error.seq - 1)
        except ChainIntegrityError as e:  # an earlier break than the first one named
            error = e
    yield error


def _same_view(args: argparse.Namespace) -> str:
    """The options that make the next page continue this one (never the DSN: a password)."""
    words = [] if args.end is None else ["--to", str(args.end)]
    words += ["--page-size", str(args.page_size)]
    if args.policy is not None:
        words += ["--policy", args.policy.text]
        words += ["--keep-system-first"] if args.keep_system_first else []
    words += ["--db", args.db] if args.db else []
    words += ["--dsn", "URL", "--schema", args.schema] if args.dsn else []
    return "".join(" " + shlex.quote(w) for w in words)


def verify(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger verify [ID] [--digest FILE]``: exit status 1 when a hash chain is broken,
    or when the log is not an append-only extension of the digest."""
    from rich.text import Text

    if args.checkpoint is not None:
        return ledger.verify_checkpoint_cmd(args, store)
    if args.digest is not None:
        if args.key is not None:
            msg = "verify --digest checks the whole log; leave out the ID"
            raise UsageError(msg)
        return ledger.verify_digest_cmd(args, store)
    if args.key is not None:
        existing(store, args, args.key)
    # One call for the whole store: it lists streams from the raw keys, so a malformed row
    # (a key no memory id maps to, a time like "yesterday") is reported, never a crash.
    report = store.verify(args.key)
    keys, records, failures = report.checked, report.records, report.failures
    if args.json:
        emit(
            {
                "ok": report.ok,
                "memories": len(keys),
                "records": records,
                "failures": [
                    {"memory": k, "seq": s, "reason": r} for k, (s, r) in failures.items()
                ],
                "malformed": [{"memory": k, "seq": s, "reason": r} for k, s, r in report.malformed],
                "ledger_problems": list(report.ledger_problems),
                "keyed_since": report.keyed_since,
                "legacy_records": report.legacy_records,
            }
        )
        return 0 if report.ok else 1
    out = console()
    checked = f"{plural(records, 'record')} checked"
    for broken, (seq, reason) in failures.items():
        line = f" memory {broken!r}: first bad seq {seq}: {reason}"
        out.print(Text.assemble(("BROKEN", "bold red"), line))
    for key, seq, reason in report.malformed:
        line = f" memory {key!r} seq {seq}: {reason}"
        out.print(Text.assemble(("MALFORMED", "bold red"), line))
    for problem in report.ledger_problems:
        out.print(Text.assemble(("BROKEN", "bold red"), f" ledger: {problem}"))
    keyed = (
        ""
        if report.keyed_since is None
        else f"; keyed after position {report.keyed_since}, "
        f"{plural(report.legacy_records, 'unkeyed record')} sealed before it"
    )
    if report.ledger_problems and not failures:
        out.print(f"the ledger does not verify ({checked}{keyed})")
        return 1
    if failures:
        verb = "is" if len(failures) == 1 else "are"
        out.print(f"{len(failures)} of {plural(len(keys), 'hash chain')} {verb} broken ({checked})")
    else:
        intact = f" {plural(len(keys), 'hash chain')} intact, {checked}{keyed}"
        out.print(Text.assemble(("OK", "bold green"), intact))
    return 1 if failures else 0
