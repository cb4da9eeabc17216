"""Opening the store a command line names, and checks of ids and seqs against it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

import eventlog
from eventlog.errors import PersistenceError
from eventlog.ids import StreamKey
from eventlog.keyring import Keyring
from eventlog.keyring_file import FileKeyring
from projections.cli.args import DEFAULT_DB, shell_id
from projections.cli.errors import Failure, UsageError, one_line

if TYPE_CHECKING:
    from eventlog.store import EventStore

__all__ = [
    "READ_COMMANDS",
    "check_seq",
    "existing",
    "missing_db",
    "open_store",
    "read_key",
    "read_keyring",
    "where",
]


# Commands that only read: their store is opened read_only=True, so they never write a row, a
# setting, a seal or a journal mode change, with or without --key-file.
READ_COMMANDS = frozenset(
    (
        "ids",
        "history",
        "show",
        "diff",
        "explain",
        "replay",
        "verify",
        "digest",
        "prove",
        "export",
        "serve",
        "checkpoint",
        "sent",
        "langgraph",
    )
)


def _read_only(args: argparse.Namespace) -> bool:
    return getattr(args, "command", None) in READ_COMMANDS


def _adopt(args: argparse.Namespace) -> bool:
    return getattr(args, "command", None) == "key"


def _open_postgres(args: argparse.Namespace, *, create: bool) -> EventStore:
    try:
        # Imported here, not at the top: psycopg is the optional [postgres] extra, and
        # eventlog.postgres cannot even be imported without it.
        from eventlog.recorders.postgres import PostgresEventStore
    except ImportError as e:
        msg = f"--dsn needs PostgreSQL support ({e}); pip install -e '.[postgres]' in the clone"
        raise Failure(msg) from e
    try:
        return PostgresEventStore(
            args.dsn,
            schema=args.schema,
            create_schema=create,
            chain_key=read_key(args),
            keyring=read_keyring(args),
            read_only=_read_only(args),
            adopt_key=_adopt(args),
            witness=args.witness,
        )
    except PersistenceError as e:
        if "lacks eventlog migrations" not in str(e):
            raise
        msg = (
            f"PostgreSQL schema {args.schema!r} holds no chatledger ledger; pass the --schema "
            f"that holds one, or create it with `chatledger import FILE --dsn URL --schema "
            f"{args.schema}`"
        )
        raise Failure(msg) from e


def read_key(args: argparse.Namespace) -> bytes | None:
    """The chain key in --key-file (its bytes as they are), or None without the option.

    Raises:
        UsageError: The file cannot be read.
    """
    if args.key_file is None:
        return None
    try:
        return Path(args.key_file).read_bytes()
    except OSError as e:
        why = "no such file" if isinstance(e, FileNotFoundError) else one_line(e)
        msg = f"--key-file {args.key_file}: {why}"
        raise UsageError(msg) from e


def read_keyring(args: argparse.Namespace) -> Keyring | None:
    """The keyring in --keyring, or None without the option.

    Raises:
        UsageError: The file does not exist (a keyring is never created by a read; a typo
            would otherwise start an empty one).
    """
    master_file = getattr(args, "keyring_master_key", None)
    if args.keyring is None:
        if master_file is not None:
            msg = "--keyring-master-key goes with --keyring FILE: the keyring it opens"
            raise UsageError(msg)
        return None
    if not Path(args.keyring).is_file():
        msg = (
            f"--keyring {args.keyring}: no such file; pass the keyring the ledger was written with"
        )
        raise UsageError(msg)
    master = None
    if master_file is not None:
        try:
            master = Path(master_file).read_bytes()
        except OSError as e:
            why = "no such file" if isinstance(e, FileNotFoundError) else one_line(e)
            msg = f"--keyring-master-key {master_file}: {why}"
            raise UsageError(msg) from e
    try:
        return FileKeyring(args.keyring, master_key=master)
    except ValueError as e:
        msg = f"--keyring-master-key {master_file}: {e}"
        raise UsageError(msg) from e


# Commands that show, check or prove records: each record is served only when its hash
# verifies, which in a keyed ledger needs the chain key. (ids, digest and export read rows as
# stored; erase, compact, quarantine and key refuse a write without the key themselves.)
KEY_COMMANDS = frozenset(
    (
        "history",
        "show",
        "diff",
        "explain",
        "replay",
        "verify",
        "prove",
        "serve",
        "sent",
        "langgraph",
        "fork",
        "erasure-receipt",
    )
)


def open_store(args: argparse.Namespace, *, create: bool = False) -> EventStore:
    """Open the store named by --db/--dsn; only ``create`` may make a new database.

    Raises:
        Failure: It does not exist, is not a ledger, or cannot be opened; or it is a keyed
            ledger and the command needs its chain key, which --key-file does not give.
    """
    store = _open_postgres(args, create=create) if args.dsn else _open_sqlite(args, create=create)
    try:
        _require_key(args, store)
    except Failure:
        store.close()
        raise
    return store


def _require_key(args: argparse.Namespace, store: EventStore) -> None:
    """Refuse a command that checks records on a keyed ledger opened without its key.

    Without the key every record fails its check, so the command would call a sound ledger
    broken (and its remedy is to restore a backup); one line saying what is missing instead.
    """
    if args.key_file is not None or args.command not in KEY_COMMANDS:
        return
    # verify() of a memory that does not exist reads nothing; its report says whether the
    # ledger is keyed (keyed_since is None only for an unkeyed one).
    if store.verify(StreamKey("~sys:chatledger-key-probe")).keyed_since is None:
        return
    msg = (
        f"{where(args)} is a keyed ledger: pass --key-file FILE (its chain key) to "
        f"{args.command}; without the key no record's hash can be checked, so none is shown "
        "(this says nothing about whether they are intact)"
    )
    raise Failure(msg)


def _open_sqlite(args: argparse.Namespace, *, create: bool) -> EventStore:
    path = Path(args.db or DEFAULT_DB)
    if path.exists() and not path.is_file():
        what = "a directory" if path.is_dir() else "not a regular file"  # a FIFO, a device
        msg = f"--db {path} is {what}; pass the path of a chatledger SQLite database"
        raise Failure(msg)
    fresh = not path.exists() or path.stat().st_size == 0
    if fresh and not create:
        how = "pass --db PATH" if args.db is None else "check --db"
        state = f"{path} is empty" if path.exists() else f"no such file: {path}"
        msg = (
            f"{state}; {how} of a chatledger database (or --dsn URL), "
            "or create one with `chatledger import FILE`"
        )
        raise Failure(msg)
    if not fresh and _read_only(args):
        from eventlog.recorders.sqlite import is_ledger_file

        if not is_ledger_file(path):
            # Told by the file's header alone: SQLite never opens it, so nothing in or beside
            # another application's file changes.
            msg = (
                f"{path} is not a chatledger database (no chatledger marker in its SQLite "
                "header); pass --db of a ledger (one written by an older chatledger is marked "
                "the next time the application opens it)"
            )
            raise Failure(msg)
    try:
        # Looked up on the package, which loads sqlite-utils only now: `--help` and usage
        # errors never pay for it.
        store = eventlog.SQLiteEventStore(
            path,
            create_schema=fresh,
            chain_key=read_key(args),
            keyring=read_keyring(args),
            read_only=_read_only(args),
            adopt_key=_adopt(args),
            witness=args.witness,
        )
    except PersistenceError as e:
        msg = f"cannot open {path} as a chatledger database ({one_line(e)})"
        raise Failure(msg) from e
    try:
        store.head(StreamKey("~sys:probe"))  # one indexed lookup: is there an events table?
    except PersistenceError as e:
        store.close()
        msg = f"{path} is not a chatledger database ({one_line(e)})"
        raise Failure(msg) from e
    return store


def missing_db(args: argparse.Namespace) -> Path | None:
    """The SQLite file --db names if it does not exist yet (import may create it)."""
    if args.dsn:
        return None
    path = Path(args.db or DEFAULT_DB)
    return None if path.exists() else path


def where(args: argparse.Namespace) -> str:
    """The store for messages; never the DSN, which may carry a password."""
    return f"PostgreSQL schema {args.schema!r}" if args.dsn else str(args.db or DEFAULT_DB)


def existing(store: EventStore, args: argparse.Namespace, key: StreamKey) -> int:
    """The head seq of the memory ``key``, which must have events.

    Raises:
        Failure: It has none.
    """
    head = store.head(key)
    if head is None:
        msg = (
            f"memory id {shell_id(key)} has no events in {where(args)}; `chatledger ids` lists them"
        )
        raise Failure(msg)
    return head.seq


def check_seq(option: str, seq: int, head: int, key: str) -> None:
    """Refuse a seq past the head.

    Raises:
        UsageError: ``seq`` is after ``head``.
    """
    if seq > head:
        msg = f"{option} {seq}: the history of {key!r} ends at seq {head}"
        raise UsageError(msg)
