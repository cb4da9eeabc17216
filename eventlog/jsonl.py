"""A ledger as JSON Lines: export and import that keep seqs, times and hashes.

An exported ledger imported elsewhere verifies and time-travels exactly like the original:
every hashed field is written as stored, and import recomputes every hash before writing
anything.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import IO

from eventlog.hashing import CONTENT_MISMATCH, FORMATS, GENESIS
from eventlog.ids import MemoryId, StreamKey, memory_id_from_key, memory_key
from eventlog.import_checks import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_LINE,
    DEFAULT_SKEW,
    ImportGate,
    WindowCheck,
)
from eventlog.models import NewRecord, Record, format_time, parse_time
from eventlog.store import EventStore

__all__ = ["FORMAT", "FORMAT_VERSION", "ImportReport", "export_jsonl", "import_jsonl"]

FORMAT = "chatledger-jsonl"
"""The ``format`` named in the header line of an export."""

FORMAT_VERSION = 1
"""The export format version this code writes and reads. Lines gained ``salt``, ``commitment``
and ``format`` with record format 2 (written always, read when present, format 1 when absent):
an addition, so the version stays - an older chatledger refuses such lines by name."""

_PAGE = 2_000
_AFTER_EVERYTHING = 1 << 62
_RECORD_FIELDS = frozenset(
    {
        "memory",
        "seq",
        "recorded_at",
        "kind",
        "schema_version",
        "payload",
        "meta",
        "prev_hash",
        "hash",
    }
)
_FORMAT_FIELDS = frozenset({"salt", "commitment", "format"})
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _record_line(record: Record) -> str:
    return _dumps(
        {
            "memory": record.stream_id,
            "seq": record.seq,
            "recorded_at": record.recorded_at_text,
            "kind": record.kind,
            "schema_version": record.schema_version,
            "payload": record.stored_payload,  # as stored: an export needs no keys
            "meta": record.meta,
            "prev_hash": record.prev_hash,
            "hash": record.hash,
            "salt": record.salt,
            "commitment": record.commitment,
            "format": record.format,
        }
    )


def export_jsonl(
    store: EventStore,
    out: IO[str],
    *,
    memory_id: MemoryId | None = None,
    after: int = 0,
    include_system: bool = False,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Write a ledger (or one memory) as JSON Lines that keep seqs, times and hashes.

    The first line is a header ``{"format": "chatledger-jsonl", "version": 1, ...}``; then one
    object per record, stream by stream in seq order, with the stored text of every hashed
    field: ``memory`` (the stored key), ``seq``, ``recorded_at``, ``kind``, ``schema_version``,
    ``payload``, ``meta``, ``prev_hash``, ``hash``, ``salt``, ``commitment`` and ``format``.

    Args:
        store: The store to read.
        out: A text stream to write to.
        memory_id: Export only this memory (None: every memory).
        after: With ``memory_id``: only records after this seq (an incremental export that
            :func:`import_jsonl` appends to a copy whose head is ``after``).
        include_system: Also export chatledger's own ``~sys:`` streams (compaction runs).
        progress: Called with the number of records written after each page.

    Returns:
        The number of records written.
    """
    if memory_id is not None:
        keys = [memory_key(memory_id)]
    else:
        if after:
            msg = "export after= needs a memory_id: seqs are per memory"
            raise ValueError(msg)
        keys = [info.stream_id for info in store.streams(include_system=include_system)]
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "exported_at": format_time(datetime.now(UTC)),
        "memories": keys,
    }
    out.write(_dumps(header) + "\n")
    count = 0
    for key in keys:
        gt = after
        while True:
            page = store.read(StreamKey(key), gt=gt, limit=_PAGE)
            out.writelines(_record_line(r) + "\n" for r in page)
            count += len(page)
            if progress is not None and page:
                progress(count)
            if len(page) < _PAGE:
                break
            gt = page[-1].seq
    return count


@dataclasses.dataclass(frozen=True, slots=True)
class ImportReport:
    """What :func:`import_jsonl` wrote.

    Attributes:
        imported: Stored key -> ``(first seq, last seq)`` written, per memory.
        records: Total records written.
        skipped: Stored keys left out because their history starts with a purge tombstone
            (only with ``skip_purged=True``).
    """

    imported: dict[str, tuple[int, int]]
    records: int
    skipped: tuple[str, ...] = ()


def _refuse(source: str, detail: str) -> ValueError:
    return ValueError(f"import of {source} refused, nothing was written: {detail}")


def _parse_header(line: str, source: str) -> None:
    try:
        header = json.loads(line)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise _refuse(
            source,
            f"it is not a chatledger export (the first line must be a {FORMAT!r} header; "
            "write one with `chatledger export`)",
        )
    version = header.get("version")
    if version != FORMAT_VERSION:
        raise _refuse(
            source,
            f"format version {version!r} is not {FORMAT_VERSION}; use the chatledger that "
            "wrote it, or a newer one",
        )


def _parse_record(line: str, number: int, source: str, gate: ImportGate) -> Record:
    where = f"line {number}"
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise _refuse(source, f"{where} is not JSON ({e})") from e
    if not isinstance(obj, dict) or set(obj) not in (
        _RECORD_FIELDS,
        _RECORD_FIELDS | _FORMAT_FIELDS,
    ):
        got = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        raise _refuse(
            source,
            f"{where} is not a record: expected fields {sorted(_RECORD_FIELDS)} "
            f"(plus {sorted(_FORMAT_FIELDS)}), got {got}",
        )
    obj.setdefault("salt", "")  # a line written before format 2: a format 1 record
    obj.setdefault("commitment", "")
    obj.setdefault("format", 1)
    for name in (
        "memory",
        "recorded_at",
        "kind",
        "payload",
        "meta",
        "prev_hash",
        "hash",
        "salt",
        "commitment",
    ):
        if not isinstance(obj[name], str):
            raise _refuse(source, f"{where}: {name} must be a string")
    if isinstance(obj["format"], bool) or obj["format"] not in FORMATS:
        raise _refuse(source, f"{where}: format must be 1, 2 or 3, not {obj['format']!r}")
    for name in ("seq", "schema_version"):
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _refuse(source, f"{where}: {name} must be an integer >= 1, not {value!r}")
    gate.fields(obj, number)
    try:
        canonical = format_time(parse_time(obj["recorded_at"]))
        memory_id_from_key(obj["memory"])
    except ValueError as e:
        raise _refuse(source, f"{where}: {e}") from e
    if canonical != obj["recorded_at"]:
        raise _refuse(
            source, f"{where}: recorded_at {obj['recorded_at']!r} is not canonical UTC text"
        )
    return Record(
        position=0,  # not stored yet: the target store assigns the global order
        stream_id=obj["memory"],
        seq=obj["seq"],
        recorded_at_text=obj["recorded_at"],
        kind=obj["kind"],
        schema_version=obj["schema_version"],
        payload=obj["payload"],
        meta=obj["meta"],
        prev_hash=obj["prev_hash"],
        hash=obj["hash"],
        salt=obj["salt"],
        commitment=obj["commitment"],
        format=obj["format"],
    )


def _parse(lines: Iterable[str], source: str, gate: ImportGate) -> dict[str, list[Record]]:
    """Every record of an export, by stream key; raises on anything that is not one."""
    streams: dict[str, list[Record]] = {}
    header_seen = False
    try:
        for number, raw in enumerate(gate.lines(lines), 1):
            line = raw.strip()
            if not line:
                continue
            gate.line(line, number)
            if not header_seen:
                _parse_header(line, source)
                header_seen = True
                continue
            record = _parse_record(line, number, source, gate)
            gate.record(record, number)
            streams.setdefault(record.stream_id, []).append(record)
    except UnicodeDecodeError as e:
        raise _refuse(source, f"it is not UTF-8 text, so not a chatledger export ({e})") from e
    if not header_seen:
        raise _refuse(source, "it is empty, not a chatledger export")
    return streams


def _check_chain(
    store: EventStore, key: str, records: list[Record], source: str, gate: ImportGate
) -> None:
    """Recompute every hash, commitment and link of one stream's records (file order = seq
    order), format 3 ones with the target store's key."""
    first = records[0]
    if first.seq == 1 and first.prev_hash != GENESIS:
        raise _refuse(
            source, f"the hash chain of {key!r} breaks at seq 1: prev_hash is not genesis"
        )
    previous: Record | None = None
    for record in records:
        if previous is not None:
            if record.seq != previous.seq + 1:
                raise _refuse(
                    source,
                    f"records of {key!r} jump from seq {previous.seq} to {record.seq} "
                    f"(line {gate.line_of(record)}); the export is incomplete or out of order",
                )
            if record.prev_hash != previous.hash:
                raise _refuse(
                    source,
                    f"the hash chain of {key!r} breaks at seq {record.seq}: prev_hash does "
                    "not match the previous record's hash",
                )
            if record.recorded_at_text < previous.recorded_at_text:
                raise _refuse(
                    source, f"record {key!r}#{record.seq} is earlier than the one before it"
                )
        # Checked as if at the end of the target, where it will be written: a keyed target
        # then refuses unkeyed formats here, before anything is written.
        problem = store.check(record._replace(position=_AFTER_EVERYTHING))
        if problem is not None:
            detail = "the " + problem if problem == CONTENT_MISMATCH else problem
            raise _refuse(source, f"the hash chain of {key!r} breaks at seq {record.seq}: {detail}")
        previous = record


def import_jsonl(
    store: EventStore,
    lines: Iterable[str],
    *,
    source: str = "the file",
    skip_purged: bool = False,
    progress: Callable[[int], None] | None = None,
    check: WindowCheck | None = None,
    now: datetime | None = None,
    skew: timedelta = DEFAULT_SKEW,
    max_line: int = DEFAULT_MAX_LINE,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> ImportReport:
    """Append an export written by :func:`export_jsonl`, keeping every seq, time and hash.

    Everything is checked before anything is written: the header, every record's fields, and
    every hash chain (each hash is recomputed from the record's content and link), plus what a
    hash cannot vouch for (:mod:`eventlog.import_checks`): line length and JSON nesting,
    known kinds and schema versions, canonical keys, times not in the future, payloads that
    decode, and - through ``check`` - each record's window. Then, per
    memory, the target store must have no events for it - import never overwrites - unless
    the file's records for it continue exactly from the target's head (next seq, chained to the
    head's hash): those are appended, which makes incremental exports (``after=``) work. Each
    memory is written with one atomic ``append``, and the stored hashes are compared with the
    file's.

    A memory whose history starts with a ``memory_purged`` tombstone (seq > 1) cannot be
    recreated through :meth:`EventStore.append`, which starts streams at seq 1: it is refused,
    or left out and reported with ``skip_purged=True``.

    Args:
        store: The store to write to.
        lines: The file's lines (an open text file works).
        source: The file's name, for error messages.
        skip_purged: Leave out memories that start with a tombstone instead of refusing.
        progress: Called with the number of records written after each memory.
        check: Run on each record with what its memory's events brought; raises ValueError
            to refuse it. Pass :func:`projections.meta.check_window_record` (the command line
            does); None leaves window records unchecked.
        now: The import's clock, for the future-time check (None: now).
        skew: How far after ``now`` a record's time may be.
        max_line: Longest line accepted, in characters.
        max_depth: Deepest JSON nesting accepted in a line or in a key, payload or meta.

    Returns:
        What was written.

    Raises:
        ValueError: The file is not a valid export, a chain does not verify, a memory already
            has events the file does not continue, or starts with a tombstone (nothing is
            written in all these cases).
        ConcurrencyError: Another writer appended to a memory during the import; the memories
            before it were written.
    """
    gate = ImportGate(
        lambda detail: _refuse(source, detail),
        now=now,
        skew=skew,
        max_line=max_line,
        max_depth=max_depth,
        check=check,
        opener=lambda record: store._opened([record])[0],
    )
    streams = _parse(lines, source, gate)
    plan: list[tuple[str, int, list[Record]]] = []
    skipped: list[str] = []
    for key, records in streams.items():
        records.sort(key=lambda r: r.seq)
        _check_chain(store, key, records, source, gate)
        first = records[0]
        if first.kind == "memory_purged" and first.seq > 1:
            if skip_purged:
                skipped.append(key)
                continue
            raise _refuse(
                source,
                f"the history of {key!r} starts with a memory_purged tombstone at seq "
                f"{first.seq}, which EventStore.append cannot recreate (streams start at seq 1); "
                "import with skip_purged (--skip-purged) to leave such memories out",
            )
        head = store.head(StreamKey(key))
        if head is None and first.seq != 1:
            raise _refuse(
                source,
                f"the records of {key!r} start at seq {first.seq}, but the target has none of "
                "its earlier events; import the full export first",
            )
        if head is not None and (
            first.seq != head.seq + 1
            or first.prev_hash != head.hash
            or first.recorded_at_text < head.recorded_at_text
        ):
            raise _refuse(
                source,
                f"memory {key!r} already has events 1..{head.seq} in the target, and import "
                f"never overwrites: import into a new database or schema (or a file that "
                f"continues exactly from seq {head.seq}, see `chatledger export --after`)",
            )
        gate.stream(store, key, 0 if head is None else head.seq, records)
        plan.append((key, 0 if head is None else head.seq, records))
    imported: dict[str, tuple[int, int]] = {}
    total = 0
    for key, head_seq, records in plan:
        items = [
            NewRecord(
                r.kind,
                r.payload,
                r.meta,
                r.schema_version,
                recorded_at=r.recorded_at,
                format=r.format,
                salt=r.salt if r.format != 1 else None,
                commitment=r.commitment if r.format != 1 else None,
            )
            for r in records
        ]
        stored = store.append(StreamKey(key), items, expected_seq=head_seq)
        for want, got in zip(records, stored, strict=True):
            if (want.seq, want.hash) != (got.seq, got.hash):
                msg = (
                    f"import of {source}: {key!r}#{got.seq} was stored with hash {got.hash}, "
                    f"not the file's {want.hash}; the records were written - run "
                    "`chatledger verify` and report this as a bug"
                )
                raise ValueError(msg)
        imported[key] = (records[0].seq, records[-1].seq)
        total += len(records)
        if progress is not None:
            progress(total)
    return ImportReport(imported=imported, records=total, skipped=tuple(skipped))
