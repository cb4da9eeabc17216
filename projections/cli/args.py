"""The command line's grammar: the parser, the global options and memory ids.

Each subcommand's own arguments and help text are in :mod:`projections.cli.subcommands`.

Global options (``--db``, ``--dsn``, ``--schema``, ``--json``) are accepted before or after the
command: the top parser defines them with real defaults and every subparser again with
``argparse.SUPPRESS``, so a value given after the command overrides one given before it and an
absent one never resets it.

A memory id ``ID`` is written one of three ways:

* as ``chatledger ids`` lists it, which is the stored key: a string id is itself (``conv-42``),
  an int ``~i:42``, a UUID ``~u:<uuid>``, a tuple ``~t:<JSON list>`` (``'~t:["demo",1]'``:
  quote it for the shell, as ``ids`` prints it), a string starting with ``~`` with the tilde
  doubled (``~~x``), a string holding ``/`` as ``~s:<JSON string>`` (``'~s:"a/b"'``);
* a tuple as shorthand, its parts joined by ``/``: ``demo/1`` is ``("demo", 1)``; a part
  written as Python prints an int (``0``, ``42``, ``-7``; no leading zeros or ``+``) is an int,
  every other part a string. ``/`` is never reinterpreted silently: ``--tuple-id demo/1`` says
  "tuple"; a bare ``demo/1`` is the string id ``"demo/1"`` when that memory exists, else the
  tuple if that one does, with a note on stderr giving the canonical spelling
  (:func:`settle_id`); a new id (``fork --to``) with ``/`` must be written canonically. So an
  ``ID`` without ``/`` and not starting with ``~`` is always the plain string itself;
* ``--id-json JSON`` instead of ``ID``: a JSON string, integer, ``{"uuid": "..."}`` or an array
  of those (a tuple), e.g. ``--id-json '["demo",1]'``.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from eventlog.ids import StreamKey, id_from_json, memory_id_from_key, memory_key
from projections.cli import langgraph_view
from projections.cli.errors import Failure, UsageError
from projections.cli.subcommands import (
    _add_inspection_commands,
    _add_key_command,
    _add_maintenance_commands,
    _add_session_commands,
)
from projections.display import BIDI_CONTROLS
from projections.grammar import PolicySpec, parse_duration, parse_policy, parse_when, policy_spec

if TYPE_CHECKING:
    from eventlog.store import EventStore

__all__ = [
    "DEFAULT_DB",
    "PROG",
    "PolicySpec",
    "build_parser",
    "check_globals",
    "id_readings",
    "parse",
    "parse_duration",
    "parse_id",
    "parse_id_json",
    "parse_policy",
    "parse_tuple_id",
    "parse_when",
    "resolve_ids",
    "settle_id",
    "shell_id",
    "shorthand",
    "shown_id",
]

PROG = "chatledger"
DEFAULT_DB = "chatledger.db"

_ID_HELP = (
    "memory id as `chatledger ids` prints it (~i:42, '~t:[\"demo\",1]', ...), "
    "or a tuple as --tuple-id demo/1 (a bare demo/1 is read with a note)"
)
_TUPLE_ID_HELP = "the tuple id whose parts are joined by /: --tuple-id demo/1 is ('demo', 1)"
_ID_JSON_HELP = "the memory id as JSON instead of ID: '\"a/b\"', 42, '[\"demo\",1]'"
_EXAMPLE = """'~t:["demo",1]'"""
_INT = re.compile(r"-?(0|[1-9][0-9]*)")


# ---------------------------------------------------------------------------- memory ids


def _cut(text: str) -> str:
    """``repr(text)`` cut to what a one-line message can hold (an id pasted from a file someone
    else wrote may be 100,000 characters)."""
    shown = repr(text)
    return shown if len(shown) <= _SHOWN_ID else shown[: _SHOWN_ID - 3] + "..."


def _bad_id(text: str, reason: str) -> UsageError:
    msg = (
        f"{_cut(text)} is not a memory id ({reason[:300]}); paste it as `chatledger ids` "
        "prints it, "
        f"in single quotes for the shell (e.g. {_EXAMPLE}), or write a tuple as demo/1 "
        "or --id-json '[\"demo\",1]'"
    )
    return UsageError(msg)


def parse_id(text: str) -> StreamKey:
    """The stored key of an ``ID`` argument, with ``/`` read as tuple shorthand (see the module
    docstring); :func:`id_readings` keeps both readings of an ``ID`` with ``/``.

    Raises:
        UsageError: ``text`` starts with ``~`` but is not a key chatledger writes.
    """
    if text.startswith("~"):
        try:
            return StreamKey(memory_key(memory_id_from_key(text)))
        except ValueError as e:
            raise _bad_id(text, str(e).replace("stored memory key ", "key ")) from e
    if "/" in text:
        return parse_tuple_id(text)
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError as e:  # bytes that are not UTF-8, passed on by the shell
            raise _bad_id(text, f"{e.object[e.start]!r} is not UTF-8 text") from None
    return StreamKey(text)


def parse_tuple_id(text: str) -> StreamKey:
    """The key of the tuple ``demo/1`` names: its parts joined by ``/``, a part written as
    Python prints an int read as that int."""
    parts = text.split("/")
    try:
        return StreamKey(memory_key(tuple(int(p) if _INT.fullmatch(p) else p for p in parts)))
    except ValueError as e:  # an int past Python's 4,300 digits, a lone surrogate
        raise _bad_id(text, str(e)) from None


def id_readings(text: str) -> tuple[StreamKey, StreamKey | None]:
    """The key an ``ID`` names literally, and the tuple its ``/`` may stand for (None: no
    ``/``, or a ``~`` key, which has one reading). :func:`settle_id` picks with the store."""
    if "/" in text and not text.startswith("~"):
        return StreamKey(text), parse_tuple_id(text)
    return parse_id(text), None


def parse_id_json(text: str) -> StreamKey:
    """The stored key of an ``--id-json`` value.

    Raises:
        UsageError: It is not JSON, or not a memory id.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        msg = f"--id-json {_cut(text)}: arrays nested too deeply for a memory id"
        raise UsageError(msg) from None
    except ValueError:
        msg = (
            f"--id-json {_cut(text)} is not JSON; quote it for the shell, "
            "e.g. --id-json '[\"demo\",1]' or --id-json '\"a/b\"'"
        )
        raise UsageError(msg) from None
    try:
        return StreamKey(memory_key(id_from_json(value)))
    except (ValueError, RecursionError) as e:  # not an id; a lone surrogate; arrays in arrays
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)[:300]
        msg = f"--id-json {_cut(text)}: {why}"
        raise UsageError(msg) from None


def shorthand(key: str) -> str | None:
    """``demo/1`` for the key of ``("demo", 1)``; None when no shorthand gives back ``key``."""
    try:
        memory_id = memory_id_from_key(key)
    except ValueError:
        return None
    if not isinstance(memory_id, tuple) or len(memory_id) < 2:
        return None
    if not all(isinstance(p, str | int) and "/" not in str(p) for p in memory_id):
        return None
    text = "/".join(str(p) for p in memory_id)
    if text.startswith("~"):  # read as a stored key, never as the tuple
        return None
    return text if parse_id(text) == key else None


# What a terminal or a listing would not show as typed: every C0 control (tab and newline
# too: a tab shows as spaces, a newline splits an id over two lines of `ids`), DEL, the C1
# controls and the bidi controls (shown as U+FFFD, which names another id).
_UNSHOWABLE = re.compile(f"[\x00-\x1f\x7f-\x9f{BIDI_CONTROLS}]")


def shell_id(key: str) -> str:
    """How to write the memory of ``key`` as a shell word that :func:`parse_id` reads back."""
    if not key.startswith("~") and (
        "/" in key or key.startswith("-") or _UNSHOWABLE.search(key) is not None
    ):
        # As a JSON string: a plain string with "/" would read as tuple shorthand, one starting
        # with "-" as an option, and one holding a control would be shown as another word.
        text = json.dumps(key, ensure_ascii=False)  # escapes C0 controls, not DEL, C1, bidi
        key = "~s:" + _UNSHOWABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return shlex.quote(key)


_SHOWN_ID = 80  # characters of an id a message repeats (as eventlog.validation.shown cuts)


def shown_id(key: str) -> str:
    """:func:`shell_id` of ``key`` for a message, or, when that is longer than a line can
    hold (an id read from a file someone else wrote may be 100,000 characters), ``key``'s
    repr cut with ``...`` (:func:`eventlog.validation.shown`): visibly not a word to paste."""
    word = shell_id(key)
    if len(word) <= _SHOWN_ID:
        return word
    from eventlog.validation import shown  # pydantic: not loaded for `chatledger --help`

    return shown(key)


def resolve_ids(args: argparse.Namespace) -> None:
    """Turn ``ID``/``--id-json`` into ``args.key`` (None where the ID is optional and absent).

    Raises:
        UsageError: Both or (where required) neither were given, or one does not parse.
    """
    if not hasattr(args, "id"):
        return
    given = [
        f"{option}{value!r}"
        for option, value in (
            ("", args.id),
            ("--id-json ", args.id_json),
            ("--tuple-id ", args.tuple_id),
        )
        if value is not None
    ]
    if len(given) > 1:
        msg = f"pass the memory id once: {' and '.join(given)}"
        raise UsageError(msg)
    args.tuple_reading = None
    if args.id_json is not None:
        args.key = parse_id_json(args.id_json)
    elif args.tuple_id is not None:
        args.key = parse_tuple_id(args.tuple_id)
    elif args.id is not None:
        # "/" is never reinterpreted silently: settle_id picks a reading with the store.
        args.key, args.tuple_reading = id_readings(args.id)
    elif args.id_required:
        msg = f"{args.command} needs a memory ID (or --id-json JSON); `chatledger ids` lists them"
        raise UsageError(msg)
    else:
        args.key = None
    if getattr(args, "new", None) is not None:
        new, other = id_readings(args.new)
        if other is not None:  # a new id has no store to settle it: say which one
            msg = (
                f"--to {args.new!r} could be the string {shell_id(new)} or the tuple "
                f"{shell_id(other)}; write the one you mean"
            )
            raise UsageError(msg)
        args.new_key = new


def settle_id(args: argparse.Namespace, store: EventStore) -> None:
    """Pick the reading of an ``ID`` holding ``/`` (see :func:`id_readings`) by what the store
    holds, saying so on stderr when it is not the literal string: the string id if it has
    events, else the tuple if it has; neither, and the failure names both.

    Raises:
        Failure: Neither reading names a memory with events.
    """
    other = getattr(args, "tuple_reading", None)
    if other is None:
        return
    literal = args.key
    if store.head(literal) is not None:
        if store.head(other) is not None:
            _note(
                f"{args.id} is the string id {shell_id(literal)}; for the tuple write "
                f"{shell_id(other)} or --tuple-id {args.id}"
            )
        return
    if store.head(other) is not None:
        args.key = other
        _note(
            f"read {args.id} as the tuple id {shell_id(other)} (no memory is named "
            f"{shell_id(literal)}); write {shell_id(other)} or --tuple-id {args.id}"
        )
        return
    msg = (
        f"no memory is named {args.id}: neither the string id {shell_id(literal)} nor the "
        f"tuple id {shell_id(other)} has events; `chatledger ids` lists them"
    )
    raise Failure(msg)


def _note(text: str) -> None:
    sys.stderr.write(f"{PROG}: note: {text}\n")


# ---------------------------------------------------------------------------- parser


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage block: scripts grep stderr, humans have --help.
        self.exit(2, f"{PROG}: error: {message} (see `{self.prog} --help`)\n")


class _Version(argparse.Action):
    """``--version``, reading the installed version only when asked (it costs a metadata scan)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("chatledger")
        except PackageNotFoundError:
            found = "unknown"
        sys.stdout.write(f"{PROG} {found}\n")
        parser.exit(0)


def _add_globals(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # See the module docstring: real defaults on the top parser, SUPPRESS on subparsers.
    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    group = parser.add_argument_group("store and output (before or after the command)")
    group.add_argument(
        "--db",
        metavar="PATH",
        default=default(None),
        help=f"SQLite ledger file (default: ./{DEFAULT_DB}); never created, except by import",
    )
    group.add_argument(
        "--dsn",
        metavar="URL",
        default=default(None),
        help="PostgreSQL connection URL or libpq string, instead of --db",
    )
    group.add_argument(
        "--schema",
        metavar="S",
        default=default(None),
        help="PostgreSQL schema, with --dsn only (default: public)",
    )
    group.add_argument(
        "--key-file",
        metavar="FILE",
        default=default(None),
        help="the chain key of a keyed ledger (the file's bytes; at least 16)",
    )
    group.add_argument(
        "--keyring",
        metavar="FILE",
        default=default(None),
        help="keyring file of a ledger encrypted at rest; erase --subject destroys keys in it",
    )
    group.add_argument(
        "--keyring-master-key",
        metavar="FILE",
        default=default(None),
        help="with --keyring: the file holding the 32-byte master key its keys are wrapped "
        "under (keep it apart from the keyring)",
    )
    group.add_argument(
        "--witness",
        metavar="PATH",
        default=default(None),
        help=(
            "witness file (or postgresql:// URL of another database) kept outside the "
            "database: refuse a ledger behind it (an older copy restored) or diverging from it; "
            "created by the first writing command, moved forward by writes, only checked by reads"
        ),
    )
    group.add_argument(
        "--json", action="store_true", default=default(False), help="machine-readable JSON output"
    )


class _Commands:
    """Adds subcommands that share the global options and, optionally, ID and --policy."""

    def __init__(self, sub: Any) -> None:
        self._sub = sub

    def add(
        self, name: str, help_text: str, *, ident: str | None = None, policy: bool = False
    ) -> _Parser:
        """Add command ``name``; ``ident`` is "required" or "optional" for an ID argument."""
        parser: _Parser = self._sub.add_parser(name, help=help_text, description=help_text)
        if ident is not None:
            parser.add_argument("id", metavar="ID", nargs="?", help=_ID_HELP)
            parser.add_argument("--id-json", metavar="JSON", help=_ID_JSON_HELP)
            parser.add_argument("--tuple-id", metavar="A/B", help=_TUPLE_ID_HELP)
            parser.set_defaults(id_required=ident == "required")
        if policy:
            parser.add_argument(
                "--policy",
                type=policy_spec,
                metavar="SPEC",
                help="what-if window instead of the recorded one: messages:N or tokens:N:MODEL",
            )
            parser.add_argument(
                "--keep-system-first",
                action="store_true",
                help="with --policy: always_keep_system_message_first",
            )
        _add_globals(parser, top=False)
        return parser


def build_parser() -> argparse.ArgumentParser:
    """The ``chatledger`` parser; ``args.command`` names the command to run."""
    parser = _Parser(
        prog=PROG,
        description="Inspect, audit and maintain a chatledger event log.",
        epilog=(
            "IDs: as `chatledger ids` prints them; a tuple also as --tuple-id demo/1 or --id-json "
            "'[\"demo\",1]'. Times are ISO 8601; a time without an offset is UTC. Durations: "
            "30m, 12h, 1d, 90d. Exit status: 0 ok, 1 failure, 2 usage error."
        ),
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    _add_globals(parser, top=True)
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    commands = _Commands(sub)
    _add_inspection_commands(commands)
    _add_maintenance_commands(commands)
    _add_key_command(commands)
    _add_session_commands(commands)
    langgraph_view.add_arguments(commands.add("langgraph", langgraph_view.HELP))
    return parser


def check_globals(args: argparse.Namespace) -> None:
    """Check the global options against each other and fill in the schema default.

    Raises:
        UsageError: An empty --db, --db with --dsn, or --schema without --dsn.
    """
    if args.db == "":
        # An unset shell variable (`--db "$LEDGER"`): never the default file in the cwd, which
        # an import would create.
        msg = (
            "--db is empty; pass the path of a chatledger SQLite database "
            "(or leave --db out for ./chatledger.db)"
        )
        raise UsageError(msg)
    if args.db is not None and args.dsn is not None:
        msg = "--db and --dsn name two stores; pass one of them"
        raise UsageError(msg)
    if args.schema is not None and args.dsn is None:
        msg = (
            f"--schema {args.schema} names a PostgreSQL schema, so it needs --dsn URL; "
            "an SQLite --db file has no schemas"
        )
        raise UsageError(msg)
    args.schema = args.schema or "public"
    if getattr(args, "keep_system_first", False) and getattr(args, "policy", None) is None:
        # It shapes a what-if window only: without --policy it was silently ignored.
        msg = "--keep-system-first shapes a what-if window: pass it with --policy SPEC"
        raise UsageError(msg)


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv`` and check what argparse cannot (exclusive options, the ID).

    Raises:
        SystemExit: argparse's own usage errors, --help and --version.
        UsageError: See :func:`check_globals` and :func:`resolve_ids`.
    """
    args = parser.parse_args(argv)
    check_globals(args)
    resolve_ids(args)
    return args
