"""The command line's grammar: the parser, argument types and memory ids.

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
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from eventlog.ids import MemoryId, StreamKey, id_from_json, memory_id_from_key, memory_key
from projections.cli import langgraph_view
from projections.cli.errors import Failure, UsageError
from projections.grammar import (
    PolicySpec,
    parse_duration,
    parse_policy,
    parse_positive,
    parse_seq,
    parse_when,
    policy_spec,
)

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


def _bad_id(text: str, reason: str) -> UsageError:
    msg = (
        f"{text!r} is not a memory id ({reason}); paste it as `chatledger ids` prints it, "
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
    return StreamKey(text)


def parse_tuple_id(text: str) -> StreamKey:
    """The key of the tuple ``demo/1`` names: its parts joined by ``/``, a part written as
    Python prints an int read as that int."""
    parts = text.split("/")
    return StreamKey(memory_key(tuple(int(p) if _INT.fullmatch(p) else p for p in parts)))


def id_readings(text: str) -> tuple[StreamKey, StreamKey | None]:
    """The key an ``ID`` names literally, and the tuple its ``/`` may stand for (None: no
    ``/``, or a ``~`` key, which has one reading). :func:`settle_id` picks with the store."""
    if "/" in text and not text.startswith("~"):
        return StreamKey(text), parse_tuple_id(text)
    return parse_id(text), None


def _from_json(value: object, text: str) -> MemoryId:
    try:
        return id_from_json(value)
    except ValueError as e:
        msg = f"--id-json {text!r}: {e}"
        raise UsageError(msg) from None


def parse_id_json(text: str) -> StreamKey:
    """The stored key of an ``--id-json`` value.

    Raises:
        UsageError: It is not JSON, or not a memory id.
    """
    try:
        value = json.loads(text)
    except ValueError:
        msg = (
            f"--id-json {text!r} is not JSON; quote it for the shell, "
            "e.g. --id-json '[\"demo\",1]' or --id-json '\"a/b\"'"
        )
        raise UsageError(msg) from None
    return StreamKey(memory_key(_from_json(value, text)))


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
    return text if parse_id(text) == key else None


def shell_id(key: str) -> str:
    """How to write the memory of ``key`` as a shell word that :func:`parse_id` reads back."""
    if "/" in key and not key.startswith("~"):
        # A plain string with "/" would read as tuple shorthand: give it as a JSON string.
        key = "~s:" + json.dumps(key, ensure_ascii=False)
    return shlex.quote(key)


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


# ---------------------------------------------------------------------------- argument types


def _subject(text: str) -> tuple[object, ...]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, list) or not value:
        msg = f"--subject {text!r}: expected a non-empty JSON array, e.g. '[\"alice\"]'"
        raise argparse.ArgumentTypeError(msg)
    return tuple(value)


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


def _add_session_commands(commands: _Commands) -> None:
    """``quarantine`` and ``sent`` (run by :mod:`projections.cli.sessions`)."""
    p = commands.add(
        "quarantine",
        "Acknowledge that record SEQ of memory ID is damaged (as verify names it): reads leave "
        "that one record out instead of refusing the memory; verify keeps reporting the break. "
        "Keyed ledgers need --key-file.",
        ident="required",
    )
    p.add_argument("seq", type=parse_positive, metavar="SEQ", help="the damaged record's seq")
    p.add_argument("--reason", required=True, metavar="TEXT", help="recorded with it")

    p = commands.add(
        "sent",
        "Print as JSON exactly what the model call recorded at event SEQ of memory ID was sent "
        "(a context_sent event, written by window_callback() or a LangChain history with "
        "window=), with its policy, profile and token count, and what of the history it left "
        "out and why; with --policy, what that call would have sent under that policy.",
        ident="required",
        policy=True,
    )
    p.add_argument("seq", type=parse_positive, metavar="SEQ", help="the context_sent event's seq")


def _add_tlog_proof_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tlog-proof",
        action="store_true",
        help="write a C2SP tlog-proof bundle (index, audit path, the checkpoint) against the "
        "signed checkpoint given with --checkpoint, for any C2SP verifier",
    )
    p.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="with --tlog-proof: the signed checkpoint (`chatledger checkpoint`) to prove against",
    )


def _add_check_proof(commands: _Commands) -> None:
    p = commands.add(
        "check-proof",
        "Check a proof from `chatledger prove` against a digest, or a C2SP tlog-proof bundle "
        "(`prove --tlog-proof`) against the log's verifier key; needs no database.",
    )
    p.add_argument("proof", metavar="PROOF", help="a file written by `chatledger prove`")
    p.add_argument("--digest", metavar="FILE", help="the digest to check a JSON proof against")
    p.add_argument(
        "--verifier-key",
        metavar="FILE",
        help="for a tlog-proof bundle: the .vkey file of the checkpoint's signer",
    )
    p.add_argument(
        "--origin", metavar="ORIGIN", help="for a tlog-proof bundle: the log name it must carry"
    )


def _add_receipt_commands(commands: _Commands) -> None:
    p = commands.add(
        "erasure-receipt",
        "Print the erasure receipt RECEIPT_ID (what was erased, when, why) with the digest and "
        "inclusion proof that tie it to the ledger; -o FILE writes it for `check-receipt`.",
    )
    p.add_argument(
        "receipt_id", metavar="RECEIPT_ID", help="<position>-<hash>, as `erase` printed it"
    )
    p.add_argument("--digest", metavar="FILE", help="prove against this digest (default: now)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to a new FILE ('-': stdout)")
    p = commands.add(
        "check-receipt",
        "Check an erasure receipt file from `chatledger erasure-receipt -o` against a digest "
        "you trust; needs no database.",
    )
    p.add_argument("receipt", metavar="RECEIPT", help="a file written by `erasure-receipt -o`")
    p.add_argument("--digest", metavar="FILE", help="the trusted digest (`chatledger digest`)")
    p.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="instead: a signed checkpoint (`chatledger checkpoint`)",
    )
    p.add_argument("--verifier-key", metavar="FILE", help="with --checkpoint: its signer's .vkey")
    p.add_argument("--origin", metavar="ORIGIN", help="with --checkpoint: the log name it carries")


def _add_inspection_commands(commands: _Commands) -> None:
    p = commands.add("ids", "List memory ids with event count and first and last activity.")
    p.add_argument("--include-system", action="store_true", help="also list ~sys: streams")

    p = commands.add(
        "history", "List a memory's events: seq, time, kind and a preview.", ident="required"
    )
    p.add_argument(
        "--from", dest="start", type=parse_positive, metavar="SEQ", help="first seq to list"
    )
    p.add_argument("--to", dest="end", type=parse_positive, metavar="SEQ", help="last seq to list")

    p = commands.add(
        "show",
        "Show a memory's view now (after the head event), after a seq, or at a time.",
        ident="required",
        policy=True,
    )
    when = p.add_mutually_exclusive_group()
    when.add_argument(
        "--as-of", type=parse_seq, metavar="SEQ", help="the view right after event SEQ"
    )
    when.add_argument(
        "--at", type=parse_when, metavar="TIME", help="the view at TIME (ISO 8601, naive = UTC)"
    )

    p = commands.add(
        "diff",
        "Which messages entered and left the view between seq A and seq B, and why.",
        ident="required",
    )
    p.add_argument("a", metavar="A", type=parse_seq, help="the earlier seq")
    p.add_argument("b", metavar="B", type=parse_seq, help="the later seq")

    p = commands.add(
        "explain",
        "When the message brought by event SEQ entered the view, and why it left.",
        ident="required",
    )
    p.add_argument("seq", metavar="SEQ", type=parse_positive, help="the add or set event")
    p.add_argument(
        "--index", type=parse_seq, default=0, help="index in a set event's list (default 0)"
    )

    p = commands.add(
        "replay",
        "Step through the events, showing the view after each (paged on a terminal).",
        ident="required",
        policy=True,
    )
    p.add_argument(
        "--from", dest="start", type=parse_positive, default=1, metavar="SEQ", help="first event"
    )
    p.add_argument("--to", dest="end", type=parse_positive, metavar="SEQ", help="last event")
    p.add_argument(
        "--page-size", type=parse_positive, metavar="N", help="show N events, then how to continue"
    )
    p.add_argument("--no-pager", action="store_true", help="never page, even on a terminal")

    p = commands.add(
        "verify",
        "Check the hash chains (exit status 1 names the first bad seq); with --digest, check "
        "that the log is an append-only extension of a digest taken earlier.",
        ident="optional",
    )
    p.add_argument("--digest", metavar="FILE", help="a file written by `chatledger digest`")
    p.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="a signed checkpoint (`chatledger checkpoint`): check its signature and that the "
        "log is its tree or extends it (exit status 1 when behind it: rolled back?)",
    )
    p.add_argument(
        "--verifier-key", metavar="FILE", help="with --checkpoint: the signer's .vkey file"
    )

    p = commands.add(
        "serve",
        "Open the read-only web inspector on this ledger (needs chatledger[inspector]): step "
        "through a memory and see the window the model saw at each event, and why it changed.",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; another one lets other machines read every "
        "conversation)",
    )
    p.add_argument("--port", type=parse_positive, default=8765, help="TCP port (default 8765)")
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests for this host name (repeatable); any name but the bound "
        "address and localhost is refused, against DNS rebinding",
    )

    p = commands.add(
        "digest", "Print (or save) the size and Merkle root of the whole log: keep it elsewhere."
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write to a new FILE ('-': stdout)")

    p = commands.add(
        "prove",
        "Write an inclusion proof of event SEQ of memory ID, checkable without the database; "
        "with --since DIGEST instead, the proof that the log extends that digest.",
        ident="optional",
    )
    p.add_argument("seq", metavar="SEQ", type=parse_positive, nargs="?", help="the event to prove")
    p.add_argument("-o", "--output", metavar="FILE", help="write to a new FILE ('-': stdout)")
    p.add_argument("--digest", metavar="FILE", help="prove against this digest's log size")
    p.add_argument(
        "--no-disclose",
        action="store_true",
        help="carry the event's salted commitment instead of its content: the proof verifies "
        "the same, but its holder cannot read or confirm the message",
    )
    _add_tlog_proof_options(p)
    p.add_argument(
        "--since",
        metavar="DIGEST",
        help="print the current digest and the consistency proof (RFC 9162) that the log "
        "extends DIGEST, as one JSON object for `chatledger check-consistency`",
    )

    _add_check_proof(commands)
    _add_receipt_commands(commands)

    p = commands.add(
        "check-consistency",
        "Check that a later digest extends an earlier one, with the object `chatledger prove "
        "--since` printed; needs no database.",
    )
    p.add_argument("old", metavar="OLD", help="the earlier digest (`chatledger digest`)")
    p.add_argument("proof", metavar="PROOF", help="the output of `chatledger prove --since OLD`")

    p = commands.add(
        "keygen",
        "Write an Ed25519 signing key NAME.key (mode 0600) and its verifier key NAME.vkey, in "
        "Go's signed-note format; needs no database.",
    )
    p.add_argument("name", metavar="NAME", help="the key name, e.g. example.com/chatledger")
    p.add_argument("--out", metavar="DIR", default=".", help="directory to write to (default .)")

    p = commands.add(
        "checkpoint",
        "Print a signed checkpoint of the log (C2SP tlog-checkpoint: origin, size, root), "
        "which anyone with the verifier key checks later with `chatledger verify --checkpoint`.",
    )
    p.add_argument(
        "--origin", required=True, help="the log's name, the first line, e.g. example.com/log"
    )
    p.add_argument("--signing-key", required=True, metavar="FILE", help="a `keygen` .key file")
    p.add_argument("-o", "--output", metavar="FILE", help="write to a new FILE ('-': stdout)")


def _add_maintenance_commands(commands: _Commands) -> None:
    p = commands.add(
        "export",
        "Write the ledger (or one memory) as JSON Lines that keep seqs, times and hashes.",
        ident="optional",
    )
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="'-' writes to stdout")
    p.add_argument(
        "--after", type=parse_seq, default=0, metavar="SEQ", help="with ID: events after SEQ"
    )
    p.add_argument("--include-system", action="store_true", help="also export ~sys: streams")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")

    p = commands.add(
        "import",
        "Append an export to the store (creating --db if needed). Every hash is checked before "
        "anything is written, and nothing is overwritten: a memory that already has events is "
        "refused unless the file continues exactly from its head (see export --after).",
    )
    p.add_argument("file", metavar="FILE", help="a `chatledger export` file ('-' = stdin)")
    p.add_argument(
        "--skip-purged", action="store_true", help="leave out memories that start with a tombstone"
    )

    p = commands.add("fork", "Start memory NEW as a copy of ID's view at a seq.", ident="required")
    p.add_argument("--at", dest="seq", type=parse_positive, metavar="SEQ", help="default: the head")
    p.add_argument(
        "--to", dest="new", required=True, metavar="NEW", help="an unused id, written like ID"
    )

    p = commands.add(
        "erase",
        "ERASE the content of memory ID (or of every memory of --subject), keeping the chain "
        "provable: records stay with their hashes, a memory_erased receipt is appended.",
        ident="optional",
    )
    p.add_argument(
        "--subject",
        type=_subject,
        metavar="JSON_ARRAY",
        help="erase every memory whose tuple id starts with this prefix, e.g. '[\"alice\"]'",
    )
    p.add_argument("--reason", required=True, metavar="TEXT", help="recorded in each receipt")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    p = commands.add(
        "compact",
        "Run one compaction: snapshot idle memories; with --purge-idle-for, ERASE long-idle ones.",
    )
    p.add_argument(
        "--idle-for",
        type=parse_duration,
        default=timedelta(days=1),
        metavar="DURATION",
        help="snapshot memories idle this long (default 1d)",
    )
    p.add_argument(
        "--purge-idle-for",
        type=parse_duration,
        metavar="DURATION",
        help="erase the content of memories idle this long; hashes and a receipt stay "
        "(default: never)",
    )


def _add_key_command(commands: _Commands) -> None:
    p = commands.add(
        "key",
        "Chain key administration. `key adopt --key-file FILE` keys an unkeyed ledger: every "
        "chain is checked, the records there now are sealed as they are (a forger without the key "
        "can no longer change them), and every later record is keyed.",
    )
    p.add_argument("action", choices=["adopt"], help="adopt: key an unkeyed ledger")


def check_globals(args: argparse.Namespace) -> None:
    """Check the global options against each other and fill in the schema default.

    Raises:
        UsageError: --db with --dsn, or --schema without --dsn.
    """
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
