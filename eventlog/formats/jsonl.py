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

from eventlog.erasure import erasure_step
from eventlog.formats.jsonl_header import (
    FORMAT,
    FORMAT_VERSION,
    check_complete,
    header_line,
    parse_header,
)
from eventlog.hashing import CONTENT_MISMATCH, FORMATS, GENESIS, RECEIPT_KINDS
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
from eventlog.validation import Checked
from eventlog.vouch import erased_bound

__all__ = ["FORMAT", "FORMAT_VERSION", "ImportReport", "export_jsonl", "import_jsonl"]

_PAGE = 2_000
_WRITE_CHUNK = 5_000
"""Records per append when importing: a memory up to this size is written atomically; a
longer one in several appends, so memory stays bounded whatever the file's size."""
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
) -> int:
    """Write a ledger (or one memory) as JSON Lines that keep seqs, times and hashes.

    The first line is a header ``{"format": "chatledger-jsonl", "version": 1, ...}``; then one
    object per record, stream by stream in seq order: ``position`` (its place in the global
    order: sorted by it, the records' hashes are the ledger tree's leaves) and the stored text
    of every hashed field: ``memory`` (the stored key), ``seq``, ``recorded_at``, ``kind``,
    ``schema_version``, ``payload``, ``meta``, ``prev_hash``, ``hash``, ``salt``,
    ``commitment`` and ``format``.

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
        keys = [str(store.stream_key(memory_id))]
        spans = [_span(store, keys[0], after)]
    else:
        if after:
            msg = "export after= needs a memory_id: seqs are per memory"
            raise ValueError(msg)
        infos = store.streams(include_system=include_system)
        keys = [info.stream_id for info in infos]
        spans = [(info.stream_id, info.last_seq, info.event_count) for info in infos]
    if not callable(getattr(out, "write", None)):
        msg = f"export_jsonl: out must be a text stream (open(path, 'w')), not {type(out).__name__}"
        raise TypeError(msg)
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
    """

    imported: dict[str, tuple[int, int]]
    records: int
    skipped: tuple[str, ...] = ()


def _refuse(source: str, detail: str) -> ValueError:
    return ValueError(f"import of {source} refused, nothing was written: {detail}")


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
    """Each record of an export with its line number, checked on its own (the gate's line
    and record checks) while ``copy`` is given, and written to it; without ``copy`` (the
    writing pass reads the copy it checked) only parsed. ``header["records"]`` is set to the
    header's ``records``."""
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
            record = _parse_record(line, number, source, gate)
            if copy is not None:
                gate.record(record, number)
            yield number, record
    except UnicodeDecodeError as e:
        raise _refuse(source, f"it is not UTF-8 text, so not a chatledger export ({e})") from e
    if not header_seen:
        raise _refuse(source, "it is empty, not a chatledger export")


def _check_link(key: str, previous: Record, record: Record, number: int, source: str) -> None:
    """A record against the one before it in the file (file order must be seq order)."""
    if record.seq != previous.seq + 1:
        raise _refuse(
            source,
            f"records of {key!r} jump from seq {previous.seq} to {record.seq} (line {number}); "
            "the export is incomplete or out of order (an export lists each memory's records "
            "in seq order: export it again)",
        )
    if record.prev_hash != previous.hash:
        raise _refuse(
            source,
            f"the hash chain of {key!r} breaks at seq {record.seq}: prev_hash does "
            "not match the previous record's hash",
        )
    if record.recorded_at_text < previous.recorded_at_text:
        raise _refuse(source, f"record {key!r}#{record.seq} is earlier than the one before it")


def _check_hash(store: EventStore, key: str, record: Record, source: str) -> None:
    """Recompute a record's hash and commitment, format 3 ones with the target's key."""
    # Checked as if at the end of the target, where it will be written: a keyed target
    # then refuses unkeyed formats here, before anything is written.
    problem = store.check(record._replace(position=_AFTER_EVERYTHING))
    if problem is not None:
        detail = "the " + problem if problem == CONTENT_MISMATCH else problem
        raise _refuse(source, f"the hash chain of {key!r} breaks at seq {record.seq}: {detail}")


def _check_start(
    store: EventStore, key: str, first: Record, source: str, skip_purged: bool
) -> int | None:
    """The target's head seq for a memory whose first record in the file is ``first`` (0:
    none), or None when it is left out (a tombstone with ``skip_purged``)."""
    if first.seq == 1 and first.prev_hash != GENESIS:
        raise _refuse(
            source, f"the hash chain of {key!r} breaks at seq 1: prev_hash is not genesis"
        )
    if first.kind == "memory_purged" and first.seq > 1:
        if skip_purged:
            return None
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
    return 0 if head is None else head.seq


def _erased_state(store: EventStore, key: str) -> tuple[int, bool]:
    """The seq the target's memory is erased through, as its head seal says (0: none), and
    whether its newest record is emptied with no receipt after it yet (a run still open)."""
    newest = store.read(StreamKey(key), desc=True, limit=1)
    open_run = bool(newest) and newest[0].erased and newest[0].kind not in RECEIPT_KINDS
    return erased_bound(store._head_seal(key)) or 0, open_run


def _check_emptied(plan: _Plan, key: str, record: Record, number: int, source: str) -> None:
    """Move ``plan``'s erased prefix past ``record``, refusing what no erasure leaves: an
    emptied record that does not follow the erased prefix, an emptied receipt, or content
    right after emptied records (an erasure appends its receipt after what it emptied, in the
    same transaction, so a run of emptied records without one was emptied by hand - and
    importing it would seal it as an erasure)."""
    content = not record.erased
    step = erasure_step(plan.erased, record.seq, record.kind, content=content)
    if step is None:
        raise _refuse(
            source,
            f"{key!r}#{record.seq} (line {number}) is emptied (no salt, no payload) but follows "
            "records that hold content, or is a receipt: an erasure empties a memory from its "
            "first record on and never its receipts, so this is not what erase() leaves; "
            "export the memory again from its ledger",
        )
    if content and plan.open_run and record.kind not in RECEIPT_KINDS:
        raise _refuse(source, _unreceipted(key, record.seq - 1, number))
    plan.open_run = not content  # content (a receipt, or refused above) closes a run
    plan.erased = step


def _unreceipted(key: str, seq: int, number: int) -> str:
    return (
        f"{key!r}#{seq} (before line {number}) is emptied (no salt, no payload), but no "
        "erasure's receipt follows it: erase() appends one after what it empties, so these "
        "records were emptied by hand; export the memory again from its ledger"
    )


@dataclasses.dataclass(slots=True)
class _Plan:
    """What the checking pass learned about one memory: where the target's head is (None:
    left out) and the last record seen, to link the next one to."""

    head: int | None
    last: Record
    records: int = 0
    erased: int = 0  # the seq the memory is erased through after ``last`` (erasure_step)
    open_run: bool = False  # ``last`` is emptied and no receipt has followed it yet


def _validate(
    store: EventStore,
    lines: Iterable[str],
    *,
    source: str,
    gate: ImportGate,
    skip_purged: bool,
    copy: IO[str],
) -> dict[str, _Plan]:
    """The checking pass: every record of the file checked in one read, holding only the
    last record of each memory (and the gate's per-memory counts), never the file."""
    plans: dict[str, _Plan] = {}
    header: dict[str, int | None] = {}
    for number, record in _records(lines, source, gate, copy, header):
        key = record.stream_id
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = _Plan(_check_start(store, key, record, source, skip_purged), record)
            if plan.head is not None:
                gate.start(store, key, plan.head, record.seq)
                if plan.head:
                    plan.erased, plan.open_run = _erased_state(store, key)
        else:
            _check_link(key, plan.last, record, number, source)
            plan.last = record
        if plan.head is not None:
            _check_emptied(plan, key, record, number, source)
        _check_hash(store, key, record, source)
        if plan.head is not None:
            gate.window(record, number)
        plan.records += 1
    records = header.get("records")
    if records is not None:
        got = sum(plan.records for plan in plans.values())
        check_complete(records, got, lambda detail: _refuse(source, detail))
    for key, plan in plans.items():
        if plan.open_run:
            raise _refuse(source, _unreceipted(key, plan.last.seq, number + 1))
    return plans


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
    head's hash): those are appended, which makes incremental exports (``after=``) work. A
    memory of up to 5,000 records is written with one atomic ``append``, a longer one with
    one per 5,000 records (so memory stays bounded whatever the file's size: the file is read
    twice, from a private copy, and never held), and the stored hashes are compared with the
    file's.

    A memory whose history starts with a ``memory_purged`` tombstone (seq > 1) cannot be
    recreated through :meth:`EventStore.append`, which starts streams at seq 1: it is refused,
    or left out and reported with ``skip_purged=True``.

    Args:
        store: The store to write to.
        lines: The file's lines (an open text file works).
        source: The file's name, for error messages.
        skip_purged: Leave out memories that start with a tombstone instead of refusing.
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
            store, lines, source=source, gate=gate, skip_purged=skip_purged, copy=copy
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
    plans: dict[str, _Plan],
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
        if chunk and (chunk[0].stream_id != record.stream_id or len(chunk) >= _WRITE_CHUNK):
            flush()
        chunk.append(record)
    flush()
    skipped = tuple(key for key, plan in plans.items() if plan.head is None)
    return ImportReport(imported=imported, records=total, skipped=skipped)
