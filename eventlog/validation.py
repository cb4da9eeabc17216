"""What a valid record and a valid range are: the one definition every way in shares.

``append`` (through :meth:`EventStore._check_items`), the import gate
(:mod:`eventlog.import_checks`) and every backend's reads ask the functions here, so whatever
``append`` accepts, :func:`eventlog.export_jsonl` writes and :func:`eventlog.import_jsonl`
reads back, and a bad bound fails the same way on every backend.

A record is valid when:

- its stored key is at most :data:`MAX_KEY_BYTES` bytes of UTF-8 (PostgreSQL cannot index a
  much longer one) and names a memory id the way :func:`eventlog.ids.memory_key` writes it;
- its kind is one :func:`eventlog.serialization.decode_event` knows (:data:`KNOWN_KINDS`) and
  its ``schema_version`` is not newer than this chatledger's;
- its payload decodes as its kind (a clear's is a JSON object) and its meta is empty or a
  JSON object, neither nested deeper than :data:`MAX_DEPTH`;
- every text is UTF-8 (no lone surrogate) and payload and meta hold no NUL character.

The problem functions return ``None`` or what is wrong, without where or remedy: each caller
says where (an append item, a line of a file) and what to do.
"""

from __future__ import annotations

import json
import re
import typing
from datetime import UTC, datetime, timedelta
from itertools import accumulate

from eventlog.attributes import MAX_ATTRIBUTE_DEPTH
from eventlog.keyring import is_sealed
from eventlog.models import CURRENT_SCHEMA_VERSION, Event, NewRecord, Record

__all__ = [
    "KNOWN_KINDS",
    "MAX_DEPTH",
    "MAX_KEY_BYTES",
    "MAX_SEQ",
    "Checked",
    "check_at",
    "check_import_options",
    "check_range",
    "check_snapshot",
    "check_tail",
    "decoded_payload",
    "identifier_parts",
    "item_problem",
    "key_problem",
    "kind_problem",
    "meta_problem",
    "nesting_depth",
    "payload_problem",
    "pg_name",
    "shown",
    "text_problem",
    "version_problem",
]

MAX_KEY_BYTES = 2048
"""Longest stored key (UTF-8 bytes) accepted: PostgreSQL cannot index a key much longer
(a B-tree entry holds about 2.7 kB), and a real memory id is far shorter."""

MAX_DEPTH = MAX_ATTRIBUTE_DEPTH + 16
"""Deepest JSON nesting accepted in a payload or meta: the deepest ``attributes`` a message
may hold, plus the message and list around them, with room to spare. Python's ``json``
recurses once per level, so this is checked before any parser sees the text."""

MAX_SEQ = (1 << 63) - 1
"""The largest seq or position a bound may name: every backend stores them as 64-bit ints."""

KNOWN_KINDS: frozenset[str] = frozenset(
    cls.model_fields["kind"].default for cls in typing.get_args(typing.get_args(Event)[0])
)
"""The event kinds :func:`eventlog.serialization.decode_event` knows (derived from ``Event``,
so a new kind is accepted as soon as it can be decoded)."""

_SHOWN = 80  # characters of a value repeated in a message


class Checked(NewRecord):
    """A :class:`NewRecord` whose kind and payload are known valid: built by
    :mod:`eventlog.serialization` from a typed event, or read by an import whose gate decoded
    it. ``append`` then skips decoding the payload again (the hot path's largest cost); the
    cheap checks (key, text, meta, time) still run. Changing a field gives a plain
    ``NewRecord``, which is checked in full."""

    __slots__ = ()

    # A plain NewRecord on purpose: a changed payload is checked again.
    def _replace(self, /, **changes: typing.Any) -> NewRecord:  # type: ignore[override]
        return NewRecord(*self)._replace(**changes)


def shown(value: object) -> str:
    """``repr(value)`` cut to a readable length, for messages (never itself an error: an int
    of more than 4,300 digits has no repr, and the message must still say what was wrong)."""
    if isinstance(value, int) and value.bit_length() > _SHOWN_BITS:
        return f"an int of {value.bit_length():,} bits"
    try:
        text = repr(value)
    except Exception:  # any repr may fail; the message must not
        return f"a {type(value).__name__} whose repr failed"
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


_SHOWN_BITS = 256  # a longer int is named by its size: its digits would be cut anyway


# ------------------------------------------------------------------------------ text


def text_problem(text: str) -> str | None:
    """None when ``text`` is UTF-8, else where its first lone surrogate is."""
    if text.isascii():  # O(1) in CPython: the hot path
        return None
    try:
        text.encode()
    except UnicodeEncodeError as e:
        return (
            f"holds a lone surrogate {text[e.start]!r} at index {e.start}, which is not UTF-8 "
            "text and no store can keep"
        )
    return None


def key_problem(key: str) -> str | None:
    """None when ``key`` is short enough for every store and UTF-8, else what is wrong."""
    problem = text_problem(key)
    if problem is not None:
        return problem
    size = len(key) if key.isascii() else len(key.encode())
    if size > MAX_KEY_BYTES:
        return (
            f"is a key of {size} bytes; keys longer than {MAX_KEY_BYTES} bytes cannot be "
            "indexed by every store - use a shorter memory id"
        )
    return None


# ------------------------------------------------------------------------------ records


def kind_problem(kind: object) -> str | None:
    """None for a kind chatledger can decode, else why not."""
    if kind in KNOWN_KINDS:
        return None
    return (
        f"kind {shown(kind)} is unknown (known: {', '.join(sorted(KNOWN_KINDS))}); build "
        "records with eventlog.serialization, or import a newer chatledger's file with that "
        "version"
    )


def version_problem(version: object) -> str | None:
    """None for a schema version this chatledger reads, else why not."""
    if type(version) is int and 1 <= version <= CURRENT_SCHEMA_VERSION:
        return None
    if type(version) is int and version > CURRENT_SCHEMA_VERSION:
        return (
            f"schema_version {version} is newer than this chatledger's "
            f"({CURRENT_SCHEMA_VERSION}); use the version that wrote it, or a newer one"
        )
    return f"schema_version {shown(version)} is not a version (1 to {CURRENT_SCHEMA_VERSION})"


# Inside a JSON string only `\\` and `\"` matter to a bracket count (they hide a quote);
# with them gone every string is `"[^"]*"`, which no regex can scan twice (see nesting_depth).
_ESCAPES = (("\\\\", ""), ('\\"', ""))
_STRING = re.compile(r'"[^"]*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_CHUNK = 1 << 16  # brackets summed per step: a text far too deep is refused after one


def nesting_depth(text: str, limit: int) -> int:
    """How deeply the JSON in ``text`` nests, counted only as far as needed to compare it
    with ``limit``: a result <= limit means "within the limit" (it may overstate the depth:
    when the text has at most ``limit`` openers, their count is returned), a larger one
    means "too deep".

    Runs in linear time without recursion, so it is safe on text no parser should see.
    Brackets inside JSON strings do not count; after an unterminated string they do (a
    parser stops there, so counting them can only overstate the depth it would reach).
    """
    # The cheap bound first: nesting cannot exceed the number of openers, and a real record
    # has few, so this is usually the whole cost.
    openers = text.count("[") + text.count("{")
    if openers <= limit:
        return openers
    # Every step is one pass of C code. A string regex that handles escapes itself
    # ('"[^"\\]*(?:\\.[^"\\]*)*"') rescans to the end from every `"` of an unterminated
    # string: quadratic, hours for one 8 MB line of `\"`. With escapes removed first (pairs
    # of backslashes, then escaped quotes, both left to right as a parser reads them), a
    # failed match can only start at the last `"`, so the text is scanned once.
    for escape, blank in _ESCAPES:
        text = text.replace(escape, blank)
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = deepest = 0
    for start in range(0, len(brackets), _CHUNK):
        chunk = brackets[start : start + _CHUNK]
        top = max(accumulate(map(_STEP.__getitem__, chunk), initial=depth))
        deepest = max(deepest, top)
        if deepest > limit:
            break
        depth += chunk.count("[") + chunk.count("{") - chunk.count("]") - chunk.count("}")
    return deepest


def _json_text_problem(text: str, max_depth: int) -> str | None:
    """What makes ``text`` unfit to be parsed or stored: not UTF-8, a NUL, too deep."""
    problem = text_problem(text)
    if problem is not None:
        return problem
    if "\x00" in text:
        return (
            "holds a NUL character, which chatledger never writes (JSON escapes it) and "
            "PostgreSQL cannot store"
        )
    if nesting_depth(text, max_depth) > max_depth:
        return (
            f"nests JSON more than {max_depth} levels deep, which no chatledger record does "
            "(it would exhaust the parser's recursion)"
        )
    return None


def meta_problem(meta: str, max_depth: int = MAX_DEPTH) -> str | None:
    """None for meta that is empty or a JSON object, else what is wrong."""
    if not meta:
        return None
    problem = _json_text_problem(meta, max_depth)
    if problem is not None:
        return problem
    try:
        value = json.loads(meta)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        return "is not a JSON object"
    return None


def _one_line(error: BaseException) -> str:
    """An error's text on one line (pydantic's span several), cut to a readable length."""
    text = " ".join(str(error).split())
    return text if len(text) <= 200 else text[:200] + "..."


def decoded_payload(record: Record, max_depth: int = MAX_DEPTH) -> object:
    """The event ``record``'s payload decodes to (see
    :func:`eventlog.serialization.decode_event`; an erased payload always decodes), or a
    ``str`` saying what is wrong. A sealed payload must have been opened first."""
    from eventlog.errors import EventLogError
    from eventlog.serialization import decode_event

    problem = _json_text_problem(record.payload, max_depth)
    if problem is not None:
        return problem
    try:
        event = decode_event(record)
        # decode_event ignores a clear's payload; other readers (SQL, Java) expect "{}".
        if (
            record.kind == "memory_cleared"
            and not record.erased
            and not isinstance(json.loads(record.payload), dict)
        ):
            msg = "it is not a JSON object"
            raise ValueError(msg)
    except (ValueError, TypeError, EventLogError, RecursionError) as e:
        return f"does not decode ({_one_line(e)})"
    return event


def payload_problem(record: Record, max_depth: int = MAX_DEPTH) -> str | None:
    """None when ``record``'s payload decodes as its kind, else what is wrong (see
    :func:`decoded_payload`)."""
    event = decoded_payload(record, max_depth)
    return event if isinstance(event, str) else None


# ------------------------------------------------------------------------------ ranges


def item_problem(key: str, item: NewRecord) -> str | None:
    """What makes ``item`` invalid as an append to ``key`` (the rules above), or None. A
    :class:`Checked` item (typed events, checked imports) skips the payload decode, which is
    most of the cost."""
    if type(item) is not Checked:
        problem = kind_problem(item.kind) or version_problem(item.schema_version)
        if problem is not None:
            return problem
        if not isinstance(item.payload, str) or not isinstance(item.meta, str):
            return "has a payload or meta that is not a str"
        if item.format is None or not is_sealed(item.payload):
            # Only an import keeps a sealed payload as is (its gate opened and checked it);
            # any other sealed text is refused, as its decode needs the key.
            record = Record(
                0,
                key,
                1,
                "",
                item.kind,
                item.schema_version,
                item.payload,
                item.meta,
                "",
                "",
                "x" if item.salt is None else item.salt,  # None: a fresh salt is drawn
                "x" if item.commitment is None else item.commitment,
                2 if item.format is None else item.format,
            )
            problem = payload_problem(record)
            if problem is not None:
                return f"payload {shown(item.payload)} {problem}"
    else:
        problem = text_problem(item.payload)
        if problem is not None:
            return f"payload {shown(item.payload)} {problem}"
    problem = meta_problem(item.meta)
    if problem is not None:
        return f"meta {shown(item.meta)} {problem}"
    return None


def _bad_int(operation: str, name: str, value: object, what: str) -> TypeError:
    return TypeError(
        f"{operation}: {name} must be {what}, got {shown(value)} ({type(value).__name__})"
    )


def _seq_bound(operation: str, name: str, value: object, *, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        what = "an int (a seq) or None" if low >= 0 else "an int (a position)"
        raise _bad_int(operation, name, value, what)
    if not low <= value <= MAX_SEQ:
        msg = f"{operation}: {name}={shown(value)} is outside {low}..{MAX_SEQ}; " + (
            "seqs start at 1 (gt=0 or None reads from the first)"
            if value < low
            else "no seq or position is that large"
        )
        raise ValueError(msg)


def _limit(operation: str, limit: object) -> None:
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise _bad_int(operation, "limit", limit, "an int >= 0 or None (no limit)")
    if not 0 <= limit <= MAX_SEQ:
        msg = (
            f"{operation}: limit={shown(limit)} is outside 0..{MAX_SEQ}; pass a count of records, "
            "or None for no limit"
        )
        raise ValueError(msg)


def check_range(
    operation: str, gt: object, lte: object, limit: object, desc: object = False
) -> None:
    """Refuse bounds of a per-memory read (``gt``/``lte`` are seqs: ints 0..:data:`MAX_SEQ`
    or None; ``limit`` an int >= 0 or None; ``desc`` a bool), identically on every backend.

    Raises:
        TypeError: A bound is not an int (a bool is not one), or ``desc`` not a bool.
        ValueError: A bound is negative or beyond :data:`MAX_SEQ`.
    """
    if gt is not None:
        _seq_bound(operation, "gt", gt, low=0)
    if lte is not None:
        _seq_bound(operation, "lte", lte, low=0)
    _limit(operation, limit)
    if not isinstance(desc, bool):
        msg = f"{operation}: desc must be True or False, got {shown(desc)}"
        raise TypeError(msg)


def check_snapshot(operation: str, name: object, seq: object = 1, state: object = "") -> None:
    """Refuse, identically on every backend, a snapshot ``name`` or ``state`` that is not text
    every store keeps (a str, UTF-8, without NUL: PostgreSQL text cannot hold it) or a ``seq``
    that is not one.

    Raises:
        TypeError: ``name`` or ``state`` is not a str, or ``seq`` not an int.
        ValueError: Either text cannot be stored, or ``seq`` is outside 0..:data:`MAX_SEQ`.
    """
    for what, value in (("name", name), ("state", state)):
        if not isinstance(value, str):
            msg = (
                f"{operation}: the snapshot {what} must be a str, not "
                f"{type(value).__name__} {shown(value)}"
            )
            raise TypeError(msg)
        problem = text_problem(value)
        if problem is None and "\x00" in value:
            problem = "holds a NUL character, which PostgreSQL text cannot hold"
        if problem is not None:
            msg = f"{operation}: the snapshot {what} {problem}"
            raise ValueError(msg)
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise _bad_int(operation, "seq", seq, "an int (the event the snapshot is of)")
    _seq_bound(operation, "seq", seq, low=0)


def check_import_options(now: object, skew: object, max_line: object, max_depth: object) -> None:
    """Refuse ``import_jsonl`` options it cannot use, by name, before anything is read.

    Raises:
        TypeError: ``now`` is not a datetime or None, ``skew`` not a timedelta, a limit not
            an int.
        ValueError: ``now`` is naive, ``skew`` negative, ``now + skew`` past year 9999, or a
            limit below 1.
    """
    if now is not None:
        check_at("import_jsonl", now)
    if not isinstance(skew, timedelta):
        msg = f"import_jsonl: skew must be a timedelta, not {type(skew).__name__}"
        raise TypeError(msg)
    if skew < timedelta(0):
        msg = f"import_jsonl: skew must not be negative, but is {skew}"
        raise ValueError(msg)
    try:
        (datetime.now(UTC) if now is None else now) + skew  # type: ignore[operator]
    except OverflowError:
        msg = f"import_jsonl: now + skew ({skew}) is past the year 9999; pass a smaller skew"
        raise ValueError(msg) from None
    for name, limit in (("max_line", max_line), ("max_depth", max_depth)):
        if isinstance(limit, bool) or not isinstance(limit, int):
            operation = "import_jsonl"
            raise _bad_int(operation, name, limit, "an int")
        if not 1 <= limit <= MAX_SEQ:
            msg = f"import_jsonl: {name}={shown(limit)} is outside 1..{MAX_SEQ}"
            raise ValueError(msg)


def pg_name(operation: str, what: str, name: object) -> str:
    """``name`` when PostgreSQL keeps it as given: 1 to 63 bytes of UTF-8 without NUL (it cuts a
    longer name, so two long names would be one schema or table).

    Raises:
        TypeError: ``name`` is not a str.
        ValueError: It is empty, too long or not storable text.
    """
    if not isinstance(name, str):
        msg = f"{operation}: {what} must be a str, not {type(name).__name__}"
        raise TypeError(msg)
    if not 0 < len(name.encode(errors="replace")) <= 63 or "\x00" in name or text_problem(name):
        msg = (
            f"{operation}: {what} {shown(name)} is not a name PostgreSQL keeps as given: 1 to 63 "
            "bytes of UTF-8, no NUL"
        )
        raise ValueError(msg)
    return name


def identifier_parts(operation: str, dotted: object) -> tuple[str, ...]:
    """``schema.table`` or ``table`` as :func:`pg_name` names.

    Raises:
        TypeError: ``dotted`` is not a str.
        ValueError: A part is not a name PostgreSQL keeps as given.
    """
    if not isinstance(dotted, str):
        return (pg_name(operation, "a table name", dotted),)
    return tuple(pg_name(operation, "a table name part", part) for part in dotted.split(".", 1))


def check_tail(operation: str, gt: object, limit: object) -> None:
    """Refuse bounds of :meth:`~eventlog.store.EventStore.read_all`: ``gt`` is a position, any
    64-bit int (below 1 finds rows a forger moved there), ``limit`` as for
    :func:`check_range`.

    Raises:
        TypeError: A bound is not an int (a bool is not one).
        ValueError: A bound is outside the 64-bit range, or ``limit`` is negative.
    """
    _seq_bound(operation, "gt", gt, low=-MAX_SEQ - 1)
    _limit(operation, limit)


def check_at(operation: str, at: object) -> None:
    """Refuse a time bound that is not a timezone-aware datetime.

    Raises:
        TypeError: ``at`` is not a datetime.
        ValueError: ``at`` has no timezone.
    """
    if not isinstance(at, datetime):
        msg = (
            f"{operation}: at must be a timezone-aware datetime, got {shown(at)} "
            f"({type(at).__name__}); e.g. datetime.now(UTC)"
        )
        raise TypeError(msg)
    if at.tzinfo is None or at.utcoffset() is None:
        msg = (
            f"{operation}: at={at.isoformat()} has no timezone, so its instant is a guess; "
            "pass an aware datetime (e.g. at.replace(tzinfo=UTC))"
        )
        raise ValueError(msg)
