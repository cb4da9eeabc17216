"""A ledger as JSON Lines: export and import that keep seqs, times and hashes.

An exported ledger imported elsewhere verifies and time-travels exactly like the original:
every hashed field is written as stored, and import recomputes every hash before writing
anything.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import IO

from eventlog.formats.jsonl_damage import export_damage
from eventlog.formats.jsonl_header import (
    FORMAT,
    FORMAT_VERSION,
    check_complete,
    header_line,
    parse_header,
)
from eventlog.formats.jsonl_plan import (
    Plan,
    check_ahead,
    check_emptied,
    check_hash,
    check_link,
    check_overlap,
    check_receipt_start,
    erased_state,
    start_plan,
    unreceipted,
)
from eventlog.formats.jsonl_plan import refuse as _refuse
from eventlog.hashing import FORMATS
from eventlog.ids import PSEUDONYM_PREFIX, SYSTEM_PREFIX, MemoryId, StreamKey, memory_id_from_key
from eventlog.import_checks import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_LINE,
    DEFAULT_SKEW,
    ImportGate,
    WindowCheck,
)
from eventlog.models import Record, format_time, parse_time
from eventlog.store import EventStore
from eventlog.validation import Checked, shown

__all__ = ["FORMAT", "FORMAT_VERSION", "ImportReport", "export_jsonl", "import_jsonl"]

_PAGE = 2_000
_WRITE_CHUNK = 5_000
"""Records per append when importing: a memory up to this size is written atomically; a
longer one in several appends, so memory stays bounded whatever the file's size."""
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
_POSITION = frozenset({"position"})
_LINE_SHAPES = tuple(
    _RECORD_FIELDS | extra | position
    for extra in (frozenset(), _FORMAT_FIELDS)
    for position in (frozenset(), _POSITION)
)
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _record_line(record: Record) -> str:
    return _dumps(
        {
            "position": record.position,
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
    allow_damaged: bool = False,
) -> int:
    """Write a ledger (or one memory) as JSON Lines that keep seqs, times and hashes.

    The first line is a header ``{"format": "chatledger-jsonl", "version": 1, ...}``; then one
    object per record, stream by stream in seq order: ``position`` (its place in the global
    order: sorted by it, the records' hashes are the ledger tree's leaves) and the stored text
    of every hashed field: ``memory`` (the stored key), ``seq``, ``recorded_at``, ``kind``,
    ``schema_version``, ``payload``, ``meta``, ``prev_hash``, ``hash``, ``salt``,
    ``commitment`` and ``format``.

    First, every chain the file would hold is verified (one more read of those records):
    :func:`import_jsonl` refuses a file holding a record that does not verify, and a backup
    found unrestorable only when it is needed is a backup lost, so a damaged memory is refused
    before anything is written to ``out``; ``allow_damaged=True`` exports it as stored, for
    forensics. Damage in ``~sys:`` streams the file leaves out does not count. In a keyed
    ledger opened without its chain key, keyed chains cannot be checked: they are exported
    unchecked, not refused (not known damaged; an import into a store given the key checks
    them) - :func:`eventlog.formats.jsonl_damage.export_damage` tells which.

    Args:
        store: The store to read.
        out: A text stream to write to.
        memory_id: Export only this memory (None: every memory).
        after: With ``memory_id``: only records after this seq (an incremental export that
            :func:`import_jsonl` appends to a copy whose head is ``after``).
        include_system: Also export chatledger's own ``~sys:`` streams (compaction runs).
        progress: Called with the number of records written after each page.
        allow_damaged: Export without verifying first: a damaged memory is written as stored
            (the file will not import).

    Returns:
        The number of records written.

    Raises:
        DamagedExportError: A memory the file would hold does not verify (and not
            ``allow_damaged``); it names the memory, the seq and why. Nothing was written.
        ValueError: ``after`` without ``memory_id``, or a memory purged during the export.
        TypeError: ``out`` is not a text stream, or ``allow_damaged`` is not a bool.
    """
    if memory_id is None and after:
        msg = "export after= needs a memory_id: seqs are per memory"
        raise ValueError(msg)
    if not callable(getattr(out, "write", None)):
        msg = f"export_jsonl: out must be a text stream (open(path, 'w')), not {type(out).__name__}"
        raise TypeError(msg)
    if not isinstance(allow_damaged, bool):  # "no" would be true, and export the damage
        msg = f"export_jsonl: allow_damaged must be True or False, not {shown(allow_damaged)}"
        raise TypeError(msg)
    if not allow_damaged:
        damage = export_damage(store, memory_id, include_system=include_system)
        if damage.damaged:
            raise damage.error()
    if memory_id is not None:
        keys = [str(store.stream_key(memory_id))]
        spans = [_span(store, keys[0], after)]
    else:
        infos = store.streams(include_system=include_system)
        keys = [info.stream_id for info in infos]
        spans = [(info.stream_id, info.last_seq, info.event_count) for info in infos]
    # Each memory up to the head it had when the header was written: the header says how many
    # records follow, so an import can tell a file cut short from a whole one.
    announced = sum(records for _, _, records in spans)
    out.write(_dumps(header_line(keys, announced)) + "\n")
    count = 0
    for key, lte, _ in spans:
        gt = after
        while True:
            page = store.read(StreamKey(key), gt=gt, lte=lte, limit=_PAGE)
            out.writelines(_record_line(r) + "\n" for r in page)
            count += len(page)
            if progress is not None and page:
                progress(count)
            if len(page) < _PAGE:
                break
            gt = page[-1].seq
    if count != announced:
        msg = (
            f"export wrote {count} records where the ledger held {announced} when it began: "
            "a memory was purged meanwhile; export again"
        )
        raise ValueError(msg)
    return count


def _span(store: EventStore, key: str, after: int) -> tuple[str, int, int]:
    """``(key, head seq, records after seq after)`` of one memory (a purged one's records
    start at its tombstone)."""
    head = store.head(StreamKey(key))
    first = store.read(StreamKey(key), gt=after, limit=1)
    if head is None or not first or first[0].seq > head.seq:
        return key, after, 0
    return key, head.seq, head.seq - first[0].seq + 1


@dataclasses.dataclass(frozen=True, slots=True)
class ImportReport:
    """What :func:`import_jsonl` wrote.

    Attributes:
        imported: Stored key -> ``(first seq, last seq)`` written, per memory.
        records: Total records written.
        skipped: Stored keys left out because their history starts with a purge tombstone
            (only with ``skip_purged=True``).
        already: Stored key -> the seq up to which the target already held the file's
            records of that memory (only with ``resume=True``; a memory the target held
            whole is here and not in ``imported``).
        held: How many of the file's records the target already held, not written (only
            with ``resume=True``).
    """

    imported: dict[str, tuple[int, int]]
    records: int
    skipped: tuple[str, ...] = ()
    already: dict[str, int] = dataclasses.field(default_factory=dict)
    held: int = 0


def _parse_record(line: str, number: int, source: str, gate: ImportGate) -> Record:
    where = f"line {number}"
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise _refuse(source, f"{where} is not JSON ({e})") from e
    if not isinstance(obj, dict) or set(obj) not in _LINE_SHAPES:
        got = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        raise _refuse(
            source,
            f"{where} is not a record: expected fields {sorted(_RECORD_FIELDS)} "
            f"(plus {sorted(_FORMAT_FIELDS | _POSITION)}), got {got}",
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
    for name in ("seq", "schema_version", "position"):
        value = obj.get(name, 1)
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


def _records(
    lines: Iterable[str],
    source: str,
    gate: ImportGate,
    copy: IO[str] | None,
    header: dict[str, int | None] | None = None,
) -> Iterator[tuple[int, Record]]:
    """Each record of an export with its line number, parsed (the gate's line checks), and
    written to ``copy`` when given (the writing pass reads the copy the checking pass wrote).
    ``header["records"]`` is set to the header's ``records``."""
    header_seen = False
    try:
        for number, raw in enumerate(gate.lines(lines), 1):
            if copy is not None:
                copy.write(raw if raw.endswith("\n") else raw + "\n")
            line = raw.strip()
            if not line:
                continue
            gate.line(line, number)
            if not header_seen:
                records = parse_header(line, lambda detail: _refuse(source, detail))
                if header is not None:
                    header["records"] = records
                header_seen = True
                continue
            yield number, _parse_record(line, number, source, gate)
    except UnicodeDecodeError as e:
        raise _refuse(source, f"it is not UTF-8 text, so not a chatledger export ({e})") from e
    if not header_seen:
        raise _refuse(source, "it is empty, not a chatledger export")


def _validate(
    store: EventStore,
    lines: Iterable[str],
    *,
    source: str,
    gate: ImportGate,
    skip_purged: bool,
    resume: bool,
    copy: IO[str],
) -> dict[str, Plan]:
    """The checking pass: every record of the file checked in one read, holding only the
    last record of each memory (and the gate's per-memory counts), never the file."""
    plans: dict[str, Plan] = {}
    header: dict[str, int | None] = {}
    number = 0
    for number, record in _records(lines, source, gate, copy, header):
        key = record.stream_id
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = start_plan(
                store, key, record, source, skip_purged=skip_purged, resume=resume
            )
        else:
            check_link(key, plan.last, record, number, source)
            plan.last = record
        held = plan.head is not None and check_overlap(plan, key, record, source)
        if not held:
            # A record the target holds is not checked on its own: the target's copy is the
            # one kept, and may since have lost what the file's needs (a key its erasure
            # destroyed opens no payload of the file's).
            gate.record(record, number)
        if plan.head is not None and not held:
            if not plan.begun:  # the memory's first record to write
                _begin(store, gate, plan, key, record.seq)
                check_receipt_start(store, plan, key, record, source)
            check_emptied(plan, key, record, number, source)
        check_hash(store, key, record, source)
        if plan.head is not None and not held:
            gate.window(record, number)
        plan.records += 1
    records = header.get("records")
    if records is not None:
        got = sum(plan.records for plan in plans.values())
        check_complete(records, got, lambda detail: _refuse(source, detail))
    for key, plan in plans.items():
        if plan.overlap:
            check_ahead(store, plan, key, source)
        if plan.open_run:
            raise _refuse(source, unreceipted(key, plan.last.seq, number + 1))
    return plans


def _begin(store: EventStore, gate: ImportGate, plan: Plan, key: str, first: int) -> None:
    """Start checking the records of a memory the import writes, from seq ``first`` on: the
    window checks read what the target's events brought, the erasure rules its sealed state."""
    assert plan.head is not None  # noqa: S101 - only memories the import writes
    plan.begun = True
    gate.start(store, key, plan.head, first)
    if plan.head:
        plan.erased, plan.open_run = erased_state(store, key)


def import_jsonl(
    store: EventStore,
    lines: Iterable[str],
    *,
    source: str = "the file",
    skip_purged: bool = False,
    resume: bool = False,
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
    head's hash): those are appended, which makes incremental exports (``after=``) work. A
    memory of up to 5,000 records is written with one atomic ``append``, a longer one with
    one per 5,000 records (so memory stays bounded whatever the file's size: the file is read
    twice, from a private copy, and never held), and the stored hashes are compared with the
    file's.

    A memory whose history starts with a ``memory_purged`` tombstone (seq > 1) cannot be
    recreated through :meth:`EventStore.append`, which starts streams at seq 1: it is refused,
    or left out and reported with ``skip_purged=True``.

    ``resume=True`` finishes an import of the same file that was interrupted (a memory is
    written whole or, past 5,000 records, in whole chunks, so an interruption leaves each
    memory at some seq of the file): a memory the target already holds up to seq H is taken
    as the file's when the file's record H has the target's head hash (the chain then makes
    every earlier record the same); the file's records after H are appended, those up to H
    are checked as part of the file's chain but not written (``ImportReport.already``). A
    memory whose stored history differs from the file's is refused as without ``resume``.

    Args:
        store: The store to write to.
        lines: The file's lines (an open text file works).
        source: The file's name, for error messages.
        skip_purged: Leave out memories that start with a tombstone instead of refusing.
        resume: Finish an interrupted import of this file (see above).
        progress: Called with the number of records written after each append.
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
        ConcurrencyError: Another writer appended to a memory during the import; the records
            before it were written (for a memory over 5,000 records, possibly a prefix of it:
            chained and verifiable, continued by importing ``export --after`` its head).
    """
    if not isinstance(resume, bool):
        msg = f"import_jsonl: resume must be True or False, not {type(resume).__name__}"
        raise TypeError(msg)
    gate = ImportGate(
        lambda detail: _refuse(source, detail),
        now=now,
        skew=skew,
        max_line=max_line,
        max_depth=max_depth,
        check=check,
        opener=lambda record: store._opened([record])[0],
    )
    # Two passes over a private copy: the first checks everything (nothing is written unless
    # every record passes), the second writes. The copy makes the second pass read exactly
    # what the first checked - stdin cannot be read twice, and a file could change between
    # the passes - and memory holds one record per memory, not the file.
    # newline="\n": the copy splits where the first pass did (universal newlines would also
    # split at a "\r" inside a line, and the writing pass fail after writing some memories).
    with tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n") as copy:
        plans = _validate(
            store,
            lines,
            source=source,
            gate=gate,
            skip_purged=skip_purged,
            resume=resume,
            copy=copy,
        )
        gate.acknowledgements({key for key, plan in plans.items() if plan.head is not None})
        if store.erasable_ids:
            clear = sorted(k for k in plans if not k.startswith((PSEUDONYM_PREFIX, SYSTEM_PREFIX)))
            if clear:
                # Their hashes cover the id in clear: stored under a pseudonym they would
                # not verify, and stored as they are the id could never be erased.
                raise _refuse(
                    source,
                    f"memory {clear[0]!r} (and {len(clear) - 1} more) has its id in clear, and "
                    "this ledger stores ids erasably (erasable_ids): import into a ledger "
                    "created without erasable_ids; nothing was written",
                )
            for key, plan in plans.items():
                if plan.head is not None and key.startswith(PSEUDONYM_PREFIX):
                    gate.named(store, key)
        copy.seek(0)
        return _write(store, copy, plans, source=source, gate=gate, progress=progress)


def _write(
    store: EventStore,
    copy: IO[str],
    plans: dict[str, Plan],
    *,
    source: str,
    gate: ImportGate,
    progress: Callable[[int], None] | None,
) -> ImportReport:
    """The writing pass: appends of up to :data:`_WRITE_CHUNK` records, each memory's
    records in file order, every stored hash compared with the file's."""
    imported: dict[str, tuple[int, int]] = {}
    heads = {key: plan.head for key, plan in plans.items() if plan.head is not None}
    total = 0
    chunk: list[Record] = []

    def flush() -> None:
        nonlocal total
        if not chunk:
            return
        key = chunk[0].stream_id
        # Checked: the first pass decoded every payload through the same definition append
        # uses (eventlog.validation), so append does not decode them again.
        items = [
            Checked(
                r.kind,
                r.payload,
                r.meta,
                r.schema_version,
                recorded_at=r.recorded_at,
                format=r.format,
                salt=r.salt if r.format != 1 else None,
                commitment=r.commitment if r.format != 1 else None,
            )
            for r in chunk
        ]
        stored = store.append(StreamKey(key), items, expected_seq=heads[key])
        for want, got in zip(chunk, stored, strict=True):
            if (want.seq, want.hash) != (got.seq, got.hash):
                msg = (
                    f"import of {source}: {key!r}#{got.seq} was stored with hash {got.hash}, "
                    f"not the file's {want.hash}; the records were written - run "
                    "`chatledger verify` and report this as a bug"
                )
                raise ValueError(msg)
        heads[key] = stored[-1].seq
        first = imported.get(key, (chunk[0].seq, 0))[0]
        imported[key] = (first, chunk[-1].seq)
        total += len(chunk)
        chunk.clear()
        if progress is not None:
            progress(total)

    for _, record in _records(copy, source, gate, None):
        if record.stream_id not in heads:
            continue  # left out: starts with a tombstone
        if record.seq <= plans[record.stream_id].overlap:
            continue  # resuming: the target holds it already (checked in the first pass)
        if chunk and (chunk[0].stream_id != record.stream_id or len(chunk) >= _WRITE_CHUNK):
            flush()
        chunk.append(record)
    flush()
    skipped = tuple(key for key, plan in plans.items() if plan.head is None)
    already = {key: min(plan.overlap, plan.last.seq) for key, plan in plans.items() if plan.overlap}
    # Every record of a memory not left out was written or held.
    held = sum(plan.records for plan in plans.values() if plan.head is not None) - total
    return ImportReport(
        imported=imported, records=total, skipped=skipped, already=already, held=held
    )
