"""The ``chatledger`` command: inspect, audit, copy and maintain a ledger from the shell.

Every command is a thin layer over :mod:`projections.audit`, :mod:`projections.replay` and the
store API. Run ``chatledger --help`` or ``chatledger COMMAND --help`` for the options.

Memory ids are written as their stored key, exactly as ``chatledger ids`` lists them: a string
id is itself (``conv-42``); an int id is ``~i:42``, a UUID ``~u:<uuid>``, a tuple
``~t:<JSON list>``; a string that starts with ``~`` is written with the tilde doubled (``~~x``).

Exit status: 0 on success, 1 on a failure (missing database, unknown id, broken chain, refused
import), 2 on a usage error. Errors are one line on stderr: ``chatledger: error: ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from eventlog.ids import StreamKey
    from eventlog.messages import ChatMessage
    from eventlog.models import Record
    from eventlog.store import EventStore
    from projections.audit import Change, LeaveReason
    from projections.windows import WindowPolicy

__all__ = ["main"]

_PROG = "chatledger"
_DEFAULT_DB = "chatledger.db"
_ID_HELP = (
    "memory id as listed by `chatledger ids`: a string id as is, an int as ~i:42, "
    "a UUID as ~u:<uuid>, a tuple as ~t:<JSON list>"
)
_REASONS: dict[str, str] = {
    "evicted": "evicted (window full)",
    "orphan": "orphan (its tool call left)",
    "system_replaced": "system message replaced",
    "set": "set (content replaced)",
    "clear": "clear",
}
_ROLE_STYLES = {
    "system": "magenta",
    "user": "cyan",
    "ai": "green",
    "tool": "yellow",
    "custom": "blue",
}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class _UsageError(Exception):
    """A well-formed command line whose values do not fit the data (exit status 2)."""


class _Failure(Exception):
    """The command could not do its job (exit status 1)."""


# ---------------------------------------------------------------------------- argument types


def _parse_duration(text: str) -> timedelta:
    """Parse ``30m``, ``12h``, ``1d``, ``90d``, ``2w`` or a sum like ``1d12h``.

    Raises:
        argparse.ArgumentTypeError: The text is not a duration.
    """
    compact = text.replace(" ", "").lower()
    if not compact or _DURATION.sub("", compact):
        msg = f"{text!r} is not a duration; write e.g. 30m, 12h, 1d, 90d or 1d12h"
        raise argparse.ArgumentTypeError(msg)
    parts: dict[str, float] = {}
    for number, unit in _DURATION.findall(compact):
        parts[_UNITS[unit]] = parts.get(_UNITS[unit], 0.0) + float(number)
    return timedelta(**parts)


def _parse_when(text: str) -> datetime:
    """Parse an ISO 8601 time; a time without an offset is taken as UTC.

    Raises:
        argparse.ArgumentTypeError: The text is not an ISO 8601 time.
    """
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        msg = f"{text!r} is not an ISO 8601 time; write e.g. 2025-06-01T12:00:00Z (no offset = UTC)"
        raise argparse.ArgumentTypeError(msg) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _seq(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        msg = f"{text!r} is not a seq; write a whole number >= 0"
        raise argparse.ArgumentTypeError(msg)
    return value


def _positive(text: str) -> int:
    value = _seq(text)
    if value == 0:
        msg = "must be at least 1"
        raise argparse.ArgumentTypeError(msg)
    return value


def _policy_spec(text: str) -> tuple[str, int, str | None]:
    parts = text.split(":")
    try:
        if parts[0] == "messages" and len(parts) == 2:
            return "messages", _positive(parts[1]), None
        if parts[0] == "tokens" and len(parts) == 3 and parts[2]:
            return "tokens", _positive(parts[1]), parts[2]
    except argparse.ArgumentTypeError:
        pass
    msg = f"{text!r} is not a policy; write messages:N or tokens:N:MODEL (e.g. tokens:2000:gpt-4o)"
    raise argparse.ArgumentTypeError(msg)


# ---------------------------------------------------------------------------- parser


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage block: scripts grep stderr, humans have --help.
        self.exit(2, f"{_PROG}: error: {message} (see `{self.prog} --help`)\n")


class _Commands:
    """Adds subcommands sharing the store options (and optionally ID, --json, --policy)."""

    def __init__(self, sub: Any) -> None:
        self._sub = sub
        self.store = _Parser(add_help=False)
        where = self.store.add_mutually_exclusive_group()
        where.add_argument(
            "--db",
            metavar="PATH",
            help=f"SQLite ledger file (default: ./{_DEFAULT_DB}); never created, except by import",
        )
        where.add_argument(
            "--dsn", metavar="URL", help="PostgreSQL connection URL or libpq string instead of --db"
        )
        self.store.add_argument(
            "--schema", default="public", help="PostgreSQL schema with --dsn (default: public)"
        )
        self.json = _Parser(add_help=False)
        self.json.add_argument("--json", action="store_true", help="machine-readable JSON output")
        self.ident = _Parser(add_help=False)
        self.ident.add_argument("id", metavar="ID", help=_ID_HELP)
        self.policy = _Parser(add_help=False)
        self.policy.add_argument(
            "--policy",
            type=_policy_spec,
            metavar="SPEC",
            help="what-if window instead of the recorded one: messages:N or tokens:N:MODEL",
        )
        self.policy.add_argument(
            "--keep-system-first",
            action="store_true",
            help="with --policy: always_keep_system_message_first",
        )

    def add(
        self,
        name: str,
        help_text: str,
        run: Callable[[argparse.Namespace, EventStore], int],
        *,
        ident: bool = False,
        policy: bool = False,
    ) -> _Parser:
        parents = [self.store, *([self.ident] if ident else []), self.json]
        parents += [self.policy] if policy else []
        parser: _Parser = self._sub.add_parser(
            name, help=help_text, description=help_text, parents=parents
        )
        parser.set_defaults(run=run)
        return parser


def _build_parser() -> _Parser:
    parser = _Parser(
        prog=_PROG,
        description="Inspect, audit and maintain a chatledger event log.",
        epilog=(
            "Times are ISO 8601; a time without an offset is UTC. Durations: 30m, 12h, 1d, 90d. "
            "Exit status: 0 ok, 1 failure, 2 usage error."
        ),
    )
    parser.add_argument("--version", action="version", version=f"{_PROG} {_version()}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    commands = _Commands(sub)
    _add_inspection_commands(commands)
    _add_maintenance_commands(commands)
    return parser


def _add_inspection_commands(commands: _Commands) -> None:
    p = commands.add(
        "ids", "List memory ids with event count and first and last activity.", _cmd_ids
    )
    p.add_argument("--include-system", action="store_true", help="also list ~sys: streams")

    p = commands.add(
        "history",
        "List a memory's events: seq, time, kind and a preview.",
        _cmd_history,
        ident=True,
    )
    p.add_argument("--from", dest="start", type=_positive, metavar="SEQ", help="first seq to list")
    p.add_argument("--to", dest="end", type=_positive, metavar="SEQ", help="last seq to list")

    p = commands.add(
        "show",
        "Show a memory's view now (after the head event), after a seq, or at a time.",
        _cmd_show,
        ident=True,
        policy=True,
    )
    when = p.add_mutually_exclusive_group()
    when.add_argument("--as-of", type=_seq, metavar="SEQ", help="the view right after event SEQ")
    when.add_argument(
        "--at", type=_parse_when, metavar="TIME", help="the view at TIME (ISO 8601, naive = UTC)"
    )

    p = commands.add(
        "diff",
        "Which messages entered and left the view between seq A and seq B, and why.",
        _cmd_diff,
        ident=True,
    )
    p.add_argument("a", metavar="A", type=_seq, help="the earlier seq")
    p.add_argument("b", metavar="B", type=_seq, help="the later seq")

    p = commands.add(
        "explain",
        "When the message brought by event SEQ entered the view, and why it left.",
        _cmd_explain,
        ident=True,
    )
    p.add_argument("seq", metavar="SEQ", type=_positive, help="the add or set event")
    p.add_argument(
        "--index", type=_seq, default=0, help="position in a set event's list (default 0)"
    )

    p = commands.add(
        "replay",
        "Step through the events, showing the view after each (paged on a terminal).",
        _cmd_replay,
        ident=True,
        policy=True,
    )
    p.add_argument(
        "--from", dest="start", type=_positive, default=1, metavar="SEQ", help="first event"
    )
    p.add_argument("--to", dest="end", type=_positive, metavar="SEQ", help="last event")
    p.add_argument(
        "--page-size", type=_positive, metavar="N", help="show N events, then how to continue"
    )
    p.add_argument("--no-pager", action="store_true", help="never page, even on a terminal")


def _add_maintenance_commands(commands: _Commands) -> None:
    only = "only this memory id (" + _ID_HELP + ")"
    p = commands.add(
        "verify", "Check the hash chains; exit status 1 names the first bad seq.", _cmd_verify
    )
    p.add_argument("id", metavar="ID", nargs="?", help=only)

    p = commands.add(
        "export",
        "Write the ledger (or one memory) as JSON Lines that keep seqs, times and hashes.",
        _cmd_export,
    )
    p.add_argument("id", metavar="ID", nargs="?", help=only)
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="'-' writes to stdout")
    p.add_argument("--after", type=_seq, default=0, metavar="SEQ", help="with ID: events after SEQ")
    p.add_argument("--include-system", action="store_true", help="also export ~sys: streams")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")

    p = commands.add(
        "import",
        "Append an export to the store (creating --db if needed). Every hash is checked before "
        "anything is written, and nothing is overwritten: a memory that already has events is "
        "refused unless the file continues exactly from its head (see export --after).",
        _cmd_import,
    )
    p.add_argument("file", metavar="FILE", help="a `chatledger export` file ('-' = stdin)")
    p.add_argument(
        "--skip-purged", action="store_true", help="leave out memories that start with a tombstone"
    )

    p = commands.add(
        "fork", "Start memory NEW as a copy of ID's view at a seq.", _cmd_fork, ident=True
    )
    p.add_argument("--at", dest="seq", type=_positive, metavar="SEQ", help="default: the head")
    p.add_argument("--to", dest="new", required=True, metavar="NEW", help="an id with no events")

    p = commands.add(
        "compact",
        "Run one compaction: snapshot idle memories; with --purge-idle-for, ERASE long-idle ones.",
        _cmd_compact,
    )
    p.add_argument(
        "--idle-for",
        type=_parse_duration,
        default=timedelta(days=1),
        metavar="DURATION",
        help="snapshot memories idle this long (default 1d)",
    )
    p.add_argument(
        "--purge-idle-for",
        type=_parse_duration,
        metavar="DURATION",
        help="erase memories idle this long, leaving a tombstone (default: never)",
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("chatledger")
    except PackageNotFoundError:
        return "unknown"


# ---------------------------------------------------------------------------- store and ids


def _open_store(args: argparse.Namespace, *, create: bool = False) -> EventStore:
    """Open the store named by --db/--dsn; only ``create`` may make a new database."""
    if args.dsn:
        try:
            from eventlog.postgres import PostgresEventStore
        except ImportError as e:
            msg = f"--dsn needs PostgreSQL support ({e}); pip install 'chatledger[postgres]'"
            raise _Failure(msg) from e
        return PostgresEventStore(args.dsn, schema=args.schema, create_schema=create)
    path = Path(args.db or _DEFAULT_DB)
    fresh = not path.exists() or (path.is_file() and path.stat().st_size == 0)
    if path.exists() and not path.is_file():
        msg = f"--db {path} is not a file; pass the path of a chatledger SQLite database"
        raise _Failure(msg)
    if fresh and not create:
        state = "is empty" if path.exists() else "does not exist"
        msg = (
            f"database {path} {state}; pass --db PATH of a chatledger database "
            "(or --dsn URL), or create one with `chatledger import`"
        )
        raise _Failure(msg)
    from eventlog.errors import PersistenceError
    from eventlog.ids import StreamKey
    from eventlog.sqlite import SQLiteEventStore

    try:
        store = SQLiteEventStore(path, create_schema=fresh)
    except PersistenceError as e:
        msg = f"cannot open {path} as a chatledger database ({_one_line(e)})"
        raise _Failure(msg) from e
    try:
        store.head(StreamKey("~sys:probe"))  # one indexed lookup: is there an events table?
    except PersistenceError as e:
        store.close()
        msg = f"{path} is not a chatledger database ({_one_line(e)})"
        raise _Failure(msg) from e
    return store


def _where(args: argparse.Namespace) -> str:
    # Never echo the DSN: it may carry a password.
    return f"PostgreSQL schema {args.schema!r}" if args.dsn else str(args.db or _DEFAULT_DB)


def _key(text: str) -> StreamKey:
    from eventlog.ids import StreamKey, memory_id_from_key, memory_key

    try:
        return StreamKey(memory_key(memory_id_from_key(text)))
    except ValueError as e:
        msg = f"{text!r} is not a memory id ({e}); write an id as `chatledger ids` lists it"
        raise _UsageError(msg) from e


def _existing(store: EventStore, args: argparse.Namespace, text: str) -> tuple[StreamKey, int]:
    """The key of a memory id given on the command line and its head seq; it must exist."""
    key = _key(text)
    head = store.head(key)
    if head is None:
        msg = f"memory id {text!r} has no events in {_where(args)}; `chatledger ids` lists them"
        raise _Failure(msg)
    return key, head.seq


def _check_seq(option: str, seq: int, head: int, key: str) -> None:
    if seq > head:
        msg = f"{option} {seq}: the history of {key!r} ends at seq {head}"
        raise _UsageError(msg)


def _make_policy(spec: tuple[str, int, str | None], keep_first: bool) -> WindowPolicy:
    from projections.windows import MessageWindowPolicy, TokenWindowPolicy

    kind, limit, model = spec
    if kind == "messages":
        return MessageWindowPolicy(limit, always_keep_system_message_first=keep_first)
    from projections.tokens import OpenAiTokenCountEstimator

    try:
        estimator = OpenAiTokenCountEstimator(model or "")
    except ValueError as e:
        msg = f"--policy tokens:{limit}:{model}: {e}"
        raise _UsageError(msg) from e
    return TokenWindowPolicy(limit, estimator, always_keep_system_message_first=keep_first)


# ---------------------------------------------------------------------------- output helpers


def _console(*, stderr: bool = False) -> Console:
    from rich.console import Console

    # markup=False: message texts and memory ids may contain [brackets]; styles go via Text.
    return Console(stderr=stderr, highlight=False, markup=False)


def _emit(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def _iso(moment: datetime) -> str:
    from eventlog.models import format_time

    return format_time(moment)


def _plain(text: str) -> Text:
    from rich.text import Text

    return Text(text)


def _records(store: EventStore, key: StreamKey, gt: int, lte: int | None) -> Iterator[Record]:
    """The records in (gt, lte], read in pages so a long history never sits in memory."""
    while True:
        page = store.read(key, gt=gt, lte=lte, limit=1_000)
        yield from page
        if len(page) < 1_000:
            return
        gt = page[-1].seq


def _ref(ref: tuple[int, int]) -> str:
    """``5`` for the message of event 5, ``9.2`` for item 2 of the set at event 9."""
    return str(ref[0]) if ref[1] == 0 else f"{ref[0]}.{ref[1]}"


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _short(text: str, width: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _contents_text(contents: Sequence[Any]) -> str:
    from eventlog.messages import TextContent

    return " ".join(
        c.text if isinstance(c, TextContent) else f"[{c.type.lower()}]" for c in contents
    )


def _describe(message: ChatMessage) -> tuple[str, str]:
    """A message's role and a one-line text for humans (tool calls as ``→ name(args)``)."""
    from eventlog.messages import AiMessage, SystemMessage, ToolExecutionResultMessage, UserMessage

    if isinstance(message, SystemMessage):
        return "system", message.text
    if isinstance(message, UserMessage):
        text = _contents_text(message.contents)
        return "user", f"{message.name}: {text}" if message.name else text
    if isinstance(message, AiMessage):
        parts = [message.text] if message.text else []
        parts += [f"→ {r.name}({r.arguments or ''})" for r in message.tool_execution_requests]
        return "ai", " ".join(parts)
    if isinstance(message, ToolExecutionResultMessage):
        text = _contents_text(message.contents)
        return "tool", f"{message.tool_name}: {text}" if message.tool_name else text
    return "custom", json.dumps(message.attributes, ensure_ascii=False)


def _title(text: str) -> Text:
    """A table title: left-aligned and never wrapped to the table's width (rich's default)."""
    from rich.text import Text

    return Text(text, style="bold", justify="left", no_wrap=True, overflow="ignore")


def _role(role: str) -> Text:
    from rich.text import Text

    return Text(role, style=_ROLE_STYLES.get(role, ""))


def _preview(message: ChatMessage, width: int = 70) -> Text:
    from rich.text import Text

    role, text = _describe(message)
    return Text.assemble((role, _ROLE_STYLES.get(role, "")), " ", _short(text, width))


def _message_obj(message: ChatMessage) -> Any:
    from eventlog.lc4j_json import message_to_obj

    return message_to_obj(message)


def _record_summary(record: Record) -> tuple[Text, int | None]:
    """A preview of an event and the size of the window after it (None: no window)."""
    from rich.text import Text

    from eventlog.models import CompactionRun, MemoryPurged, MessageAdded, MessagesSet
    from eventlog.serialization import decode_event, decode_meta
    from projections.replay import decode_refs

    event = decode_event(record)
    meta = decode_meta(record)
    size = len(decode_refs(meta["w"])) if "w" in meta else None
    if isinstance(event, MessageAdded):
        return _preview(event.message), size
    if isinstance(event, MessagesSet):
        first = f": {_describe(event.messages[0])[1]}" if event.messages else ""
        return Text(_short(f"{len(event.messages)} message(s){first}")), size
    if isinstance(event, MemoryPurged):
        text = f"erased {event.event_count} event(s): {event.reason}"
        return Text(text, style="red"), 0
    if isinstance(event, CompactionRun):
        text = (
            f"compacted {len(event.compacted)}, purged {len(event.purged)}, "
            f"skipped {len(event.skipped)}, errors {len(event.errors)}"
        )
        return Text(text), size
    return Text("(window emptied)", style="dim"), 0 if record.kind == "memory_cleared" else size


def _record_json(record: Record) -> dict[str, Any]:
    from eventlog.serialization import decode_meta
    from projections.replay import decode_refs

    meta = decode_meta(record)
    obj: dict[str, Any] = {
        "seq": record.seq,
        "kind": record.kind,
        "recorded_at": record.recorded_at_text,
        "hash": record.hash,
        "window_size": len(decode_refs(meta["w"])) if "w" in meta else None,
    }
    payload = json.loads(record.payload)
    if record.kind == "message_added":
        obj["message"] = payload
    elif record.kind == "messages_set":
        obj["messages"] = payload
    elif record.kind in ("memory_purged", "compaction_run"):
        obj["event"] = payload
    if "forked_from" in meta:
        obj["forked_from"] = meta["forked_from"]
    return obj


def _progress(total: int, label: str) -> Any:
    """A transient progress bar on stderr, shown only when stderr is a terminal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    console = _console(stderr=True)
    bar = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    bar.add_task(label, total=total or None)
    return bar


# ---------------------------------------------------------------------------- commands


def _cmd_ids(args: argparse.Namespace, store: EventStore) -> int:
    from rich.table import Table

    infos = store.streams(include_system=args.include_system)
    if args.json:
        for info in infos:
            _emit(
                {
                    "memory": info.stream_id,
                    "events": info.event_count,
                    "last_seq": info.last_seq,
                    "first_recorded_at": _iso(info.first_recorded_at),
                    "last_recorded_at": _iso(info.last_recorded_at),
                }
            )
        return 0
    console = _console()
    if not infos:
        console.print(f"no memories in {_where(args)}")
        return 0
    table = Table("memory id", "events", "last seq", "first activity (UTC)", "last activity (UTC)")
    for info in infos:
        table.add_row(
            _plain(info.stream_id),
            str(info.event_count),
            str(info.last_seq),
            _when(info.first_recorded_at),
            _when(info.last_recorded_at),
        )
    console.print(table)
    return 0


def _cmd_history(args: argparse.Namespace, store: EventStore) -> int:
    from rich.table import Table

    key, head = _existing(store, args, args.id)
    start = args.start or 1
    _check_seq("--from", start, head, key)
    if args.end is not None:
        _check_seq("--to", args.end, head, key)
    records = _records(store, key, start - 1, args.end)
    if args.json:
        for record in records:
            _emit(_record_json(record))
        return 0
    table = Table(
        "seq",
        "time (UTC)",
        "kind",
        "window",
        "event",
        title=_title(f"history of {key} ({head} events)"),
    )
    for record in records:
        preview, size = _record_summary(record)
        table.add_row(
            str(record.seq),
            _when(record.recorded_at),
            record.kind,
            "" if size is None else str(size),
            preview,
        )
    _console().print(table)
    return 0


def _cmd_show(args: argparse.Namespace, store: EventStore) -> int:
    from rich.table import Table

    from eventlog.lc4j_json import messages_to_json
    from projections.replay import view_at, what_if

    key, head = _existing(store, args, args.id)
    if args.as_of is not None:
        _check_seq("--as-of", args.as_of, head, key)
        seq = args.as_of
    elif args.at is not None:
        seq = store.seq_at(key, args.at) or 0
    else:
        seq = head
    refs: list[str | None]
    if args.policy is not None:
        messages = what_if(store, key, _make_policy(args.policy, args.keep_system_first), seq=seq)
        refs = [None] * len(messages)
        how = "what-if " + ":".join(str(part) for part in args.policy if part is not None)
    else:
        entries = view_at(store, key, seq)
        messages = [e.message for e in entries]
        refs = [_ref(e.ref) for e in entries]
        how = "recorded view"
    if args.json:
        sys.stdout.write(messages_to_json(messages) + "\n")
        return 0
    title = f"{key} after seq {seq} of {head} ({how}, {len(messages)} messages)"
    table = Table("#", "event", "role", "text", title=_title(title))
    for number, (message, ref) in enumerate(zip(messages, refs, strict=True), 1):
        role, text = _describe(message)
        table.add_row(str(number), ref or "", _role(role), _plain(text))
    _console().print(table)
    return 0


def _change_json(change: Change) -> dict[str, Any]:
    return {
        "ref": list(change.entry.ref),
        "entered_at": change.entered_at,
        "left_at": change.left_at,
        "reason": change.reason,
        "message": _message_obj(change.message),
    }


def _reason(reason: LeaveReason | None) -> str:
    return "" if reason is None else _REASONS[reason]


def _cmd_diff(args: argparse.Namespace, store: EventStore) -> int:
    from rich.table import Table
    from rich.text import Text

    from projections.audit import diff

    key, head = _existing(store, args, args.id)
    _check_seq("A", args.a, head, key)
    _check_seq("B", args.b, head, key)
    if args.a > args.b:
        msg = f"diff {args.a} {args.b}: A must not be after B (swap them)"
        raise _UsageError(msg)
    result = diff(store, key, args.a, args.b)
    if args.json:
        _emit(
            {
                "memory": str(key),
                "from": result.start,
                "to": result.end,
                "changes": [_change_json(c) for c in result.changes],
            }
        )
        return 0
    title = (
        f"{key}: seq {result.start} → {result.end}: {len(result.entered)} entered, "
        f"{len(result.left)} left, {len(result.passed)} came and went"
    )
    table = Table("", "event", "entered", "left", "reason", "message", title=_title(title))
    for change in result.changes:
        if change.left_at is None:
            mark = Text("+", style="green")
        elif change.entered_at is None:
            mark = Text("-", style="red")
        else:
            mark = Text("±", style="yellow")
        table.add_row(
            mark,
            _ref(change.entry.ref),
            "" if change.entered_at is None else str(change.entered_at),
            "" if change.left_at is None else str(change.left_at),
            _reason(change.reason),
            _preview(change.message, 60),
        )
    _console().print(table)
    return 0


def _cmd_explain(args: argparse.Namespace, store: EventStore) -> int:
    from projections.audit import explain

    key, head = _existing(store, args, args.id)
    _check_seq("SEQ", args.seq, head, key)
    change = explain(store, key, args.seq, args.index)
    if args.json:
        _emit({"memory": str(key), **_change_json(change)})
        return 0
    console = _console()
    console.print(_preview(change.message))
    if change.left_at is None:
        console.print(
            f"entered the view at seq {change.entered_at}; still in it at seq {head} (head)"
        )
    elif change.left_at == change.entered_at:
        console.print(f"brought by seq {change.left_at} but not kept: {_reason(change.reason)}")
    else:
        console.print(
            f"entered the view at seq {change.entered_at}; left it at seq {change.left_at}: "
            f"{_reason(change.reason)}"
        )
    return 0


@contextlib.contextmanager
def _maybe_pager(console: Console, enabled: bool) -> Iterator[None]:
    if enabled and sys.stdout.isatty() and sys.stdin.isatty():
        # As git does: colours pass through (-R), short output needs no keypress (-F), and the
        # screen is not cleared on exit (-X). A LESS the user set wins.
        os.environ.setdefault("LESS", "-FRX")
        with console.pager(styles=True):
            yield
    else:
        yield


def _cmd_replay(args: argparse.Namespace, store: EventStore) -> int:
    from rich.rule import Rule
    from rich.text import Text

    from projections.audit import walk
    from projections.replay import replay_views

    key, head = _existing(store, args, args.id)
    _check_seq("--from", args.start, head, key)
    last = head if args.end is None else args.end
    _check_seq("--to", last, head, key)
    if last < args.start:
        msg = f"--from {args.start} is after --to {last}"
        raise _UsageError(msg)
    end = last
    if args.page_size is not None:
        end = min(end, args.start + args.page_size - 1)
    if args.policy is not None:
        policy = _make_policy(args.policy, args.keep_system_first)
        steps: Iterator[tuple[Record, list[ChatMessage], list[tuple[ChatMessage, str]]]] = (
            (record, view, [])
            for record, view in replay_views(store, key, policy, lte=end)
            if record.seq >= args.start
        )
    else:
        steps = (
            (
                step.record,
                [e.message for e in step.view],
                [(d.entry.message, d.reason) for d in step.departures],
            )
            for step in walk(store, key, after=args.start - 1, upto=end)
        )
    if args.json:
        for record, view, departures in steps:
            _emit(
                {
                    "seq": record.seq,
                    "kind": record.kind,
                    "recorded_at": record.recorded_at_text,
                    "view": [_message_obj(m) for m in view],
                    "left": [{"reason": r, "message": _message_obj(m)} for m, r in departures],
                }
            )
        return 0
    console = _console()
    with _maybe_pager(console, not args.no_pager):
        for record, view, departures in steps:
            preview, _ = _record_summary(record)
            title = Text.assemble(
                f"seq {record.seq} · {_when(record.recorded_at)} · {record.kind} · ", preview
            )
            console.print(Rule(title, align="left"))
            for number, message in enumerate(view, 1):
                console.print(Text.assemble(f"  {number:>3} ", _preview(message)))
            for message, reason in departures:
                console.print(
                    Text.assemble(
                        ("    - ", "red"), _preview(message, 50), (f"  ← {_REASONS[reason]}", "red")
                    )
                )
        if end < last:
            more = f"chatledger replay {shlex.quote(key)} --from {end + 1}"
            console.print(f"… {last - end} more event(s): {more}", style="dim")
    return 0


def _cmd_verify(args: argparse.Namespace, store: EventStore) -> int:
    from rich.text import Text

    from eventlog.ids import StreamKey

    if args.id is not None:
        keys = [_existing(store, args, args.id)[0]]
    else:
        keys = [StreamKey(info.stream_id) for info in store.streams(include_system=True)]
    failures: dict[str, tuple[int, str]] = {}
    records = 0
    with _progress(len(keys), "verifying") as bar:
        for key in keys:
            report = store.verify(key)
            records += report.records
            failures.update(report.failures)
            bar.advance(bar.task_ids[0])
    if args.json:
        _emit(
            {
                "ok": not failures,
                "memories": len(keys),
                "records": records,
                "failures": [
                    {"memory": k, "seq": s, "reason": r} for k, (s, r) in failures.items()
                ],
            }
        )
    else:
        console = _console()
        for broken, (seq, reason) in failures.items():
            console.print(
                Text.assemble(
                    ("BROKEN", "bold red"), f" memory {broken!r}: first bad seq {seq}: {reason}"
                )
            )
        if failures:
            console.print(
                f"{len(failures)} of {len(keys)} hash chains are broken ({records} records checked)"
            )
        else:
            console.print(
                Text.assemble(
                    ("OK", "bold green"),
                    f" {len(keys)} hash chain(s) intact, {records} records checked",
                )
            )
    return 1 if failures else 0


def _cmd_export(args: argparse.Namespace, store: EventStore) -> int:
    from projections.audit import export_jsonl

    key = None
    if args.id is not None:
        key, head = _existing(store, args, args.id)
        _check_seq("--after", args.after, head, key)
        total = head - args.after
    else:
        if args.after:
            msg = "--after needs an ID: seqs are per memory"
            raise _UsageError(msg)
        total = sum(i.event_count for i in store.streams(include_system=args.include_system))
    with _progress(total, "exporting") as bar:

        def advance(count: int) -> None:
            bar.update(bar.task_ids[0], completed=count)

        if args.output == "-":
            count = export_jsonl(
                store,
                sys.stdout,
                memory_id=key,
                after=args.after,
                include_system=args.include_system,
                progress=advance,
            )
        else:
            count = _export_to_file(Path(args.output), args, store, key, advance)
    summary = {"records": count, "file": args.output}
    if args.json and args.output != "-":
        _emit(summary)
    else:
        _console(stderr=True).print(f"exported {count} records to {args.output}")
    return 0


def _export_to_file(
    path: Path,
    args: argparse.Namespace,
    store: EventStore,
    key: StreamKey | None,
    advance: Callable[[int], None],
) -> int:
    from projections.audit import export_jsonl

    if path.exists() and not args.force:
        msg = f"{path} exists; pass --force to overwrite it, or pick another -o FILE"
        raise _Failure(msg)
    # Written beside, then renamed: an interrupted export never leaves a truncated FILE.
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as out:
            count = export_jsonl(
                store,
                out,
                memory_id=key,
                after=args.after,
                include_system=args.include_system,
                progress=advance,
            )
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return count


def _cmd_import(args: argparse.Namespace, store: EventStore) -> int:
    from rich.table import Table

    from projections.audit import import_jsonl

    with _progress(0, "importing") as bar:

        def advance(count: int) -> None:
            bar.update(bar.task_ids[0], completed=count)

        if args.file == "-":
            report = import_jsonl(
                store, sys.stdin, source="stdin", skip_purged=args.skip_purged, progress=advance
            )
        else:
            with Path(args.file).open(encoding="utf-8") as lines:
                report = import_jsonl(
                    store, lines, source=args.file, skip_purged=args.skip_purged, progress=advance
                )
    if args.json:
        _emit(
            {
                "records": report.records,
                "imported": {k: list(v) for k, v in report.imported.items()},
                "skipped": list(report.skipped),
            }
        )
        return 0
    console = _console()
    table = Table(
        "memory id", "seqs", title=_title(f"imported {report.records} records into {_where(args)}")
    )
    for key, (first, last) in report.imported.items():
        table.add_row(_plain(key), f"{first}..{last}")
    console.print(table)
    for key in report.skipped:
        console.print(f"skipped {key!r}: its history starts with a purge tombstone", style="yellow")
    return 0


def _cmd_fork(args: argparse.Namespace, store: EventStore) -> int:
    from projections.audit import fork

    key, head = _existing(store, args, args.id)
    new = _key(args.new)
    if args.seq is not None:
        _check_seq("--at", args.seq, head, key)
    if store.head(new) is not None:
        msg = f"fork --to {args.new!r}: that memory id already has events; pick an unused id"
        raise _Failure(msg)
    record = fork(store, key, new, seq=args.seq)
    origin = json.loads(record.meta)["forked_from"]
    count = len(json.loads(record.payload))
    if args.json:
        _emit(
            {
                "memory": str(new),
                "seq": record.seq,
                "hash": record.hash,
                "messages": count,
                "forked_from": origin,
            }
        )
        return 0
    _console().print(
        f"forked {key} at seq {origin['seq']} (hash {origin['hash'][:12]}…) to {new}: "
        f"{count} messages"
    )
    return 0


def _cmd_compact(args: argparse.Namespace, store: EventStore) -> int:
    from eventlog.ids import memory_key
    from projections.compaction import compact

    if args.purge_idle_for is not None and args.purge_idle_for < args.idle_for:
        msg = "--purge-idle-for must not be shorter than --idle-for"
        raise _UsageError(msg)
    report = compact(store, idle_for=args.idle_for, purge_idle_for=args.purge_idle_for)
    result = {
        "compacted": [memory_key(m) for m in report.compacted],
        "purged": [memory_key(m) for m in report.purged],
        "skipped": [memory_key(m) for m in report.skipped],
        "errors": list(report.errors),
    }
    if args.json:
        _emit(result)
    else:
        console = _console()
        for name, keys in result.items():
            shown = ", ".join(keys) if keys else "-"
            console.print(
                f"{name:>9}: {len(keys)}  {shown}", style="red" if name == "errors" and keys else ""
            )
    return 1 if report.errors else 0


# ---------------------------------------------------------------------------- entry point


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``chatledger`` command line.

    Args:
        argv: The arguments after the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 ok, 1 failure, 2 usage error.
    """
    args = _build_parser().parse_args(argv)
    # import is the one command that may create its SQLite file; a refused import must not
    # leave an empty database behind.
    creating = args.command == "import"
    new_file = _missing_db(args) if creating else None
    status = 1
    try:
        status = _run(args, create=creating)
    finally:
        if new_file is not None and status != 0:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{new_file}{suffix}").unlink(missing_ok=True)
    return status


def _missing_db(args: argparse.Namespace) -> Path | None:
    if args.dsn:
        return None
    path = Path(args.db or _DEFAULT_DB)
    return None if path.exists() else path


def _run(args: argparse.Namespace, *, create: bool) -> int:
    from eventlog.errors import EventLogError

    run: Callable[[argparse.Namespace, EventStore], int] = args.run
    store: EventStore | None = None
    try:
        store = _open_store(args, create=create)
        status = run(args, store)
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at exit
        return status
    except _UsageError as e:
        sys.stderr.write(f"{_PROG}: error: {_one_line(e)}\n")
        return 2
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (_Failure, EventLogError, ValueError, OSError, RuntimeError) as e:
        # RuntimeError: tiktoken's EncodingUnavailableError when a --policy needs an encoding.
        sys.stderr.write(f"{_PROG}: error: {_one_line(e)}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{_PROG}: interrupted\n")
        return 130
    finally:
        if store is not None:
            store.close()


if __name__ == "__main__":  # pragma: no cover - the console script calls main()
    sys.exit(main())
