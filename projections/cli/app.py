"""The entry point: parse, open the store, run one command, turn failures into exit statuses."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from eventlog.errors import EventLogError
from projections.cli.args import PROG, build_parser, parse, settle_id
from projections.cli.errors import Failure, UsageError, message

if TYPE_CHECKING:
    from eventlog.store import EventStore

__all__ = ["main"]

Command = Callable[[argparse.Namespace, "EventStore"], int]

# Each command's function as "module:function" in projections.cli, imported when the command
# runs: `chatledger --help` and every command pay only for their own imports (pydantic,
# sqlite-utils, cryptography, rich ...), not for all of them.
COMMANDS: dict[str, str] = {
    "ids": "inspect:ids",
    "history": "inspect:history",
    "show": "inspect:show",
    "diff": "inspect:diff_cmd",
    "explain": "inspect:explain_cmd",
    "replay": "inspect:replay",
    "verify": "inspect:verify",
    "digest": "ledger:digest_cmd",
    "prove": "ledger:prove_cmd",
    "export": "maintain:export",
    "import": "maintain:import_cmd",
    "fork": "maintain:fork_cmd",
    "compact": "maintain:compact_cmd",
    "erase": "maintain:erase_cmd",
    "serve": "maintain:serve_cmd",
    "key": "ledger:key_cmd",
    "checkpoint": "ledger:checkpoint_cmd",
    "quarantine": "sessions:quarantine_cmd",
    "sent": "sessions:sent_cmd",
    "langgraph": "langgraph_view:run",
    "erasure-receipt": "receipts:erasure_receipt_cmd",
}

# Commands checked or made with files alone: the point is that no database is needed.
STORELESS: dict[str, str] = {
    "check-proof": "ledger:check_proof",
    "check-consistency": "ledger:check_consistency",
    "check-receipt": "receipts:check_receipt_cmd",
    "keygen": "ledger:keygen",
}


def command(name: str) -> Callable[..., int]:
    """The function that runs command ``name`` (from :data:`COMMANDS` or :data:`STORELESS`)."""
    module, _, function = (COMMANDS.get(name) or STORELESS[name]).partition(":")
    run: Callable[..., int] = getattr(
        importlib.import_module(f"projections.cli.{module}"), function
    )
    return run


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``chatledger`` command line.

    Args:
        argv: The arguments after the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 ok (also when a reader such as ``head`` closes the pipe early),
        1 failure (a check failed, or the command could not do its job), 2 usage error
        (--help: 0), 130 interrupted.
    """
    try:
        args = parse(build_parser(), argv)
    except SystemExit as e:  # argparse's usage errors, --help and --version
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    except UsageError as e:
        sys.stderr.write(f"{PROG}: error: {message(e)}\n")
        return 2
    except BrokenPipeError:  # `chatledger --version | head -0`
        return _reader_gone()
    if args.command in STORELESS:
        return _run_without_store(args)
    # import is the one command that may create its SQLite file; a refused import must not
    # leave an empty database behind.
    from projections.cli.store import missing_db  # here: see COMMANDS

    creating = args.command == "import"
    new_file = missing_db(args) if creating else None
    status = 1
    try:
        status = _run(args, create=creating)
    finally:
        if new_file is not None and status != 0:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{new_file}{suffix}").unlink(missing_ok=True)
    return status


def _reader_gone() -> int:
    """The reader (e.g. ``| head``) went away: it has what it wanted, so stop quietly with
    status 0 (a ``set -o pipefail`` script must not fail on it)."""
    # To devnull, so the interpreter's final flush of what is still buffered cannot fail again.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _run_without_store(args: argparse.Namespace) -> int:
    try:
        status = command(args.command)(args)
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at exit
        return status
    except BrokenPipeError:
        return _reader_gone()
    except UsageError as e:
        sys.stderr.write(f"{PROG}: error: {message(e)}\n")
        return 2
    except (Failure, ValueError, OSError) as e:
        sys.stderr.write(f"{PROG}: error: {message(e)}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130


def _run(args: argparse.Namespace, *, create: bool) -> int:
    from projections.cli.store import open_store  # here: see COMMANDS

    store: EventStore | None = None
    try:
        store = open_store(args, create=create)
        settle_id(args, store)
        status = command(args.command)(args, store)
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at exit
        return status
    except UsageError as e:
        sys.stderr.write(f"{PROG}: error: {message(e)}\n")
        return 2
    except BrokenPipeError:
        return _reader_gone()
    except (Failure, EventLogError, ValueError, OSError, RuntimeError) as e:
        # RuntimeError: tiktoken's EncodingUnavailableError when a --policy needs an encoding.
        sys.stderr.write(f"{PROG}: error: {message(e)}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    finally:
        if store is not None:
            store.close()
