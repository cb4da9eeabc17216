"""Commands that write or copy: export, import, fork, compact."""

from __future__ import annotations

import argparse
import json
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from eventlog.formats.jsonl import export_jsonl, import_jsonl
from eventlog.formats.jsonl_damage import export_damage
from eventlog.ids import StreamKey, memory_key
from projections.audit import fork
from projections.cli.args import PROG, shell_id
from projections.cli.errors import Failure, UsageError, one_line
from projections.cli.render import console, emit, plain, plural, progress, title
from projections.cli.store import check_seq, existing, where
from projections.compaction import compact
from projections.meta import check_window_record
from projections.readmodel import forked_from

if TYPE_CHECKING:
    from eventlog.store import EventStore

__all__ = ["compact_cmd", "erase_cmd", "export", "fork_cmd", "import_cmd"]


def export(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger export [ID] -o FILE``: JSON Lines that keep seqs, times and hashes."""
    key: StreamKey | None = args.key
    if key is not None:
        head = existing(store, args, key)
        check_seq("--after", args.after, head, key)
        total = head - args.after
    else:
        if args.after:
            msg = "--after needs an ID: seqs are per memory"
            raise UsageError(msg)
        total = sum(i.event_count for i in store.streams(include_system=args.include_system))
    _check_exportable(args, store, key)
    with progress(total, "exporting") as bar:

        def advance(count: int) -> None:
            bar.update(bar.task_ids[0], completed=count)

        def write(out: TextIO) -> int:
            return export_jsonl(
                store,
                out,
                memory_id=key,
                after=args.after,
                include_system=args.include_system,
                progress=advance,
                allow_damaged=True,  # _check_exportable refused it, or was told to allow it
            )

        count = (
            write(sys.stdout) if args.output == "-" else _to_file(Path(args.output), args, write)
        )
    if args.json and args.output != "-":
        emit({"records": count, "file": args.output})
    else:
        console(stderr=True).print(f"exported {plural(count, 'record')} to {args.output}")
    return 0


def _check_exportable(args: argparse.Namespace, store: EventStore, key: StreamKey | None) -> None:
    """Refuse to export a memory whose chain does not verify, as :func:`export_jsonl` does
    (``import`` refuses such a file), in the CLI's words; with --allow-damaged, export it as
    stored and say so (forensics). The export is then written with ``allow_damaged=True``:
    checked here, the chains are not read a second time."""
    damage = export_damage(store, key, include_system=args.include_system)
    if damage.unchecked:
        # Without the chain key no record can be checked: not a sign of damage.
        console(stderr=True).print(
            plain(
                "note: a keyed ledger without --key-file: its keyed records were not "
                "checked; pass --key-file to check that the export will import"
            )
        )
    damaged = [f"{k!r:.80} at seq {seq} ({why})" for k, seq, why in damage.damaged]
    if not damaged:
        return
    more = f" and {len(damaged) - 1} more" if len(damaged) > 1 else ""
    if args.allow_damaged:
        console(stderr=True).print(
            plain(
                f"warning: exporting damaged records: {damaged[0]}{more}; the file will not import"
            )
        )
        return
    msg = (
        f"memory {damaged[0]}{more} does not verify, so `chatledger import` would refuse this "
        "export: `chatledger verify` shows the damage; pass --allow-damaged to export the "
        "records as they are stored (for forensics)"
    )
    raise Failure(msg)


def _to_file(path: Path, args: argparse.Namespace, write: Callable[[TextIO], int]) -> int:
    # Checked before anything is read: the error names FILE, not the .partial file beside it.
    if path.is_dir():
        msg = f"-o {path} is a directory; name a file in it, e.g. -o {path / 'ledger.jsonl'}"
        raise Failure(msg)
    if path.exists() and not args.force:
        msg = f"{path} exists; pass --force to overwrite it, or pick another -o FILE"
        raise Failure(msg)
    if not path.parent.is_dir():
        msg = f"-o {path}: no directory {path.parent}; create it first, or pick another -o FILE"
        raise Failure(msg)
    # Written beside, then renamed: an interrupted export never leaves a truncated FILE.
    partial = path.with_name(path.name + ".partial")
    try:
        try:
            out = partial.open("w", encoding="utf-8")
        except OSError as e:
            msg = (
                f"-o {path}: cannot write there ({e.strerror or one_line(e)}); pick another -o FILE"
            )
            raise Failure(msg) from e
        with out:
            count = write(out)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return count


def import_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger import FILE``: append an export, checking every hash first."""
    from rich.table import Table

    with progress(0, "importing") as bar:

        def advance(count: int) -> None:
            bar.update(bar.task_ids[0], completed=count)

        if args.file == "-":
            report = import_jsonl(
                store,
                sys.stdin,
                source="stdin",
                skip_purged=args.skip_purged,
                resume=args.resume,
                progress=advance,
                check=check_window_record,
            )
        else:
            with Path(args.file).open(encoding="utf-8") as lines:
                report = import_jsonl(
                    store,
                    lines,
                    source=args.file,
                    skip_purged=args.skip_purged,
                    resume=args.resume,
                    progress=advance,
                    check=check_window_record,
                )
    if args.json:
        emit(
            {
                "records": report.records,
                "imported": {k: list(v) for k, v in report.imported.items()},
                "skipped": list(report.skipped),
                "already": report.already,
            }
        )
        return 0
    out = console()
    if report.records:
        heading = f"imported {plural(report.records, 'record')} into {where(args)}"
        table = Table("memory id", "seqs", title=title(heading))
        for key, (first, last) in report.imported.items():
            table.add_row(plain(shell_id(key)), f"{first}..{last}")
        out.print(table)
    elif report.held:  # an empty table would read as a failure to import
        out.print(f"nothing to import: all {plural(report.held, 'record')} already held")
    else:
        out.print("nothing to import: the file holds no records to write")
    for key in report.skipped:
        out.print(f"skipped {key!r}: its history starts with a purge tombstone", style="yellow")
    if report.already and report.records:
        whole = sum(1 for key in report.already if key not in report.imported)
        out.print(
            f"resumed: {plural(len(report.already), 'memory', 'memories')} already held the "
            f"file's first records ({whole} of them all)"
        )
    return 0


def fork_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger fork ID --to NEW``: a new memory starting as ID's view at a seq."""
    key, new = args.key, args.new_key
    head = existing(store, args, key)
    if args.seq is not None:
        check_seq("--at", args.seq, head, key)
    if store.head(new) is not None:
        msg = f"fork --to {args.new!r}: that memory id already has events; pick an unused id"
        raise Failure(msg)
    record = fork(store, key, new, seq=args.seq)
    origin = forked_from(record) or {}
    count = len(json.loads(record.payload))
    if args.json:
        emit(
            {
                "memory": str(new),
                "seq": record.seq,
                "hash": record.hash,
                "messages": count,
                "forked_from": origin,
            }
        )
        return 0
    console().print(
        f"forked {shell_id(key)} at seq {origin.get('seq')} (hash {str(origin.get('hash'))[:12]}…) "
        f"to {shell_id(new)}: {plural(count, 'message')}"
    )
    return 0


def compact_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger compact``: snapshot idle memories; erase long-idle ones when asked."""
    if args.purge_idle_for is not None and args.purge_idle_for < args.idle_for:
        msg = "--purge-idle-for must not be shorter than --idle-for"
        raise UsageError(msg)
    report = compact(store, idle_for=args.idle_for, purge_idle_for=args.purge_idle_for)
    result = {
        "compacted": [memory_key(m) for m in report.compacted],
        "purged": [memory_key(m) for m in report.purged],
        "skipped": [memory_key(m) for m in report.skipped],
        "errors": list(report.errors),
    }
    if args.json:
        emit(result)
    else:
        out = console()
        for name, keys in result.items():
            shown = ", ".join(shell_id(k) for k in keys) if name != "errors" else "; ".join(keys)
            style = "red" if name == "errors" and keys else ""
            out.print(f"{name:>9}: {len(keys)}  {shown or '-'}", style=style)
    return 1 if report.errors else 0


def erase_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger erase ID|--subject JSON --reason TEXT [--yes]``: erase content, keep proofs.

    Without ``--yes`` it asks on a terminal, and refuses (exit 2) when stdin is not one."""
    key: StreamKey | None = args.key
    if (key is None) == (args.subject is None):
        msg = "erase needs exactly one of ID (or --id-json) and --subject"
        raise UsageError(msg)
    what = shell_id(key) if key is not None else f"every memory of subject {list(args.subject)}"
    if not args.yes:
        if not sys.stdin.isatty():
            msg = f"erase of {what} needs confirmation: stdin is not a terminal; pass --yes"
            raise UsageError(msg)
        answer = input(f"Erase the content of {what}? This cannot be undone. [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            console(stderr=True).print("nothing erased")
            return 1
    if key is not None:
        receipts = [store.erase(key, reason=args.reason)]
    else:
        receipts = store.erase_subject(args.subject, reason=args.reason)
    result: list[dict[str, str | int]] = [
        {
            "memory": memory_key(r.memory_id),
            "first_seq": r.event.first_seq,
            "last_seq": r.event.last_seq,
            "records": r.event.record_count,
            "receipt_seq": r.record.seq,
            "receipt": r.id,
        }
        for r in receipts
    ]
    pending = any(r.cleanup_pending for r in receipts)
    if args.json:
        emit({"erased": result, "cleanup_pending": pending})
    else:
        out = console()
        for r in result:
            out.print(
                f"erased {shell_id(str(r['memory']))}: {plural(int(r['records']), 'record')} "
                f"(seq {r['first_seq']}..{r['last_seq']}), receipt at seq {r['receipt_seq']}: "
                f"{r['receipt']}"
            )
        if not result:
            out.print("nothing to erase")
        if pending:
            # Not a failure: the content is gone from every read; old bytes wait in files.
            out.print(_CLEANUP_PENDING.get(type(store).__name__, _CLEANUP_PENDING[""]))
    return 0


_CLEANUP_PENDING = {
    "PostgresEventStore": (
        "erased, file cleanup pending: dead row versions keep the old text in the table "
        "files until a VACUUM (store.vacuum() or autovacuum)"
    ),
    "": (
        "erased, file cleanup pending: a reader (a backup?) held the WAL; the old text stays "
        "in the -wal file until the next erase or checkpoint finishes it"
    ),
}


def serve_cmd(args: argparse.Namespace, store: EventStore) -> int:
    """``chatledger serve``: the read-only web inspector, until interrupted."""
    try:
        from projections.inspector import LOCALHOST, serve
        from projections.inspector.web import create_app  # noqa: F401 - fails without the extra
    except ImportError as e:
        msg = (
            f"serve needs the [inspector] extra ({e.name} is not installed); from your "
            "chatledger clone: pip install -e '.[inspector]'"
        )
        raise Failure(msg) from None
    # Checked before the URL is printed: a busy port must not look like a running inspector.
    _check_port(args.host, args.port)
    if args.host != LOCALHOST:
        sys.stderr.write(
            f"{PROG}: warning: binding {args.host}: anyone who can reach it reads every "
            "conversation in this ledger (there is no login)\n"
        )
    sys.stderr.write(
        f"{PROG}: inspector on http://{_url_host(args.host)}:{args.port}/ (read-only)\n"
    )
    serve(store, host=args.host, port=args.port, allowed_hosts=args.allow_host)
    return 0


def _check_port(host: str, port: int) -> None:
    """Raise :class:`Failure` naming the port and ``--port`` when ``host:port`` cannot be bound.

    The probe binds as uvicorn does (``SO_REUSEADDR``), so a port left in TIME_WAIT by a
    previous run counts as free, and one another server listens on as busy.
    """
    if port > 65535:  # getaddrinfo would silently take it modulo 65536
        msg = f"--port {port}: a TCP port is at most 65535"
        raise UsageError(msg)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except OSError as e:
        msg = f"serve cannot resolve --host {host} ({e.strerror or e}); pass an address"
        raise Failure(msg) from None
    try:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as e:
        reason = e.strerror or str(e)
        msg = (
            f"serve cannot listen on {_url_host(host)}:{port} ({reason}); pick a free port "
            f"with --port N, or stop what holds port {port}"
        )
        raise Failure(msg) from None


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
