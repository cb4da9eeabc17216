"""The import gate: every line of a JSON Lines export is checked before anything is written.

A file is input from outside, and a record that merely hashes right can still hurt every later
reader: a window run of a billion events runs ``messages()`` out of memory, a non-canonical key
(``~i:007``) aliases another memory, a record dated 9999 freezes the memory's clock (a store
never stamps a later event earlier than its head), and a line nested ten thousand levels deep
blows Python's recursion limit inside ``json``. :class:`ImportGate` refuses all of these with
one line naming the problem, where it is and what to do, so
:func:`eventlog.formats.jsonl.import_jsonl` can stay a short sequence of call sites.

The window record inside ``meta`` belongs to the projections, which eventlog never imports:
the gate takes a ``check`` callable and gives it, for each record, what the memory's events
brought so far (:class:`Brought`); the command line passes
:func:`projections.meta.check_window_record`.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, TypeAlias

from eventlog import validation
from eventlog.ids import StreamKey, memory_id_from_key, memory_key
from eventlog.messages import SystemMessage
from eventlog.models import (
    ContentErased,
    MessageAdded,
    MessageRetracted,
    MessagesSet,
    Record,
    RecordQuarantined,
    format_time,
)
from eventlog.quarantine import QUARANTINE_STREAM
from eventlog.store import EventStore
from eventlog.validation import check_import_options

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_LINE",
    "DEFAULT_SKEW",
    "KNOWN_KINDS",
    "MAX_KEY_BYTES",
    "Brought",
    "ImportGate",
    "WindowCheck",
    "nesting_depth",
]

DEFAULT_MAX_LINE = 64 * 2**20
"""Longest line (in characters) an import reads; it bounds the memory one line can take
before it is refused. Append bounds no payload, so a genuine record can be long: a message
holding a PDF or an image as base64 (providers take files of 20-32 MB, 27-43 MB as base64)
is one line of its export. At 8 MiB such exports were refused, and the command line cannot
raise the bound; 64 MiB holds any one file a provider accepts (a line that long costs some
500 MB of memory to check)."""

DEFAULT_MAX_DEPTH = validation.MAX_DEPTH
"""Deepest JSON nesting accepted in a line, key, payload or meta (see
:data:`eventlog.validation.MAX_DEPTH`)."""

DEFAULT_SKEW = timedelta(minutes=5)
"""How far after the import's clock a record's time may be (clocks of two machines differ)."""

# Re-exported: what a valid record is lives in eventlog.validation, shared with append.
MAX_KEY_BYTES = validation.MAX_KEY_BYTES
KNOWN_KINDS = validation.KNOWN_KINDS
nesting_depth = validation.nesting_depth

_SHOWN = 200  # characters of a decoding error kept in a refusal: one readable line


def _one_line(error: BaseException) -> str:
    """An error's text on one line (pydantic's span several), cut to a readable length."""
    text = " ".join(str(error).split())
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _ref(seq: int, index: int) -> int:
    """A message's ref ``(seq, index)`` as one int that sorts as the pair does."""
    return seq << 32 | index


_LAST_INDEX = (1 << 32) - 1


class Brought(Mapping[int, int]):
    """What the events of one memory brought, as far as an import has read them.

    Maps seq -> how many messages that event brought: 1 for ``message_added``, the item
    count for ``messages_set``, 0 for the other kinds. It also keeps prefix counts of
    ``message_added`` events, so "are events a..b all adds?" costs O(1) whatever a..b is:
    a window run is checked without expanding it. And what a window check needs beyond
    counts, in O(log n) per question: which messages are system messages, which were taken
    back (``message_retracted``), the newest event of each kind, and the newest event whose
    messages' roles are unknown (its content erased).

    An erased ``messages_set`` no longer says how many items it brought: it is held with a
    count of 0 and :attr:`unsized`, until the window check reads the count from the set's own
    window record (:meth:`settle`), which every later window of it refers within.

    Args:
        first: The seq of the first event it will hold (a purged memory starts later).
    """

    __slots__ = (
        "_adds",
        "_counts",
        "_first",
        "_firsts",
        "_gone",
        "_newest",
        "_retracted",
        "_sets",
        "_system",
        "_unknown",
        "_unsized",
    )

    def __init__(self, first: int = 1) -> None:
        self._first = first
        # Flat int arrays, not lists: a million-event memory costs 16 MB here, not 60.
        self._counts = array("q")
        self._adds = array("q", [0])  # _adds[k]: adds among the first k events held
        self._firsts = array("q", [0])  # the same for events bringing a message at index 0
        self._sets: set[int] = set()
        # Sorted refs (_ref): system messages, messages taken back, and the two together.
        self._system = array("q")
        self._retracted = array("q")
        self._gone = array("q")
        self._newest: dict[str, int] = {}
        self._unknown = 0
        self._unsized = 0

    def append(
        self,
        seq: int,
        kind: str,
        count: int,
        *,
        system: Iterable[int] = (),
        retracted: tuple[int, int] | None = None,
        known: bool = True,
    ) -> None:
        """Record that event ``seq`` (the next one) of kind ``kind`` brought ``count`` messages.

        Args:
            seq: The event.
            kind: Its kind.
            count: How many messages it brought.
            system: The indexes (0 for an add) of the system messages among them.
            retracted: The ref ``(seq, index)`` a ``message_retracted`` event takes back
                (kept only when it names a message brought before it, once).
            known: False when the roles of its messages are unknown (its content erased).

        Raises:
            ValueError: ``seq`` is not the next seq.
        """
        if seq != self.last + 1:
            msg = f"Brought.append of seq {seq}: the next seq is {self.last + 1}"
            raise ValueError(msg)
        if (
            retracted is not None
            and self._brings(*retracted)
            and not self.retracted_in(retracted, retracted)
        ):
            ref = _ref(*retracted)
            insort(self._retracted, ref)
            if not self.is_system(*retracted):
                insort(self._gone, ref)
        self._counts.append(count)
        self._adds.append(self._adds[-1] + (kind == "message_added"))
        first = kind == "message_added" or (kind == "messages_set" and count > 0)
        self._firsts.append(self._firsts[-1] + first)
        if kind == "messages_set":
            self._sets.add(seq)
        for index in system:  # later refs than any held: the arrays stay sorted
            self._system.append(_ref(seq, index))
            self._gone.append(_ref(seq, index))
        self._newest[kind] = seq
        self._unsized = seq if kind == "messages_set" and not known else 0
        if not known:
            self._unknown = seq

    @property
    def unsized(self) -> int:
        """The seq of the last event held when it is a ``messages_set`` whose item count is
        unknown (its content erased) and not yet :meth:`settle`-d (0: none)."""
        return self._unsized

    def settle(self, seq: int, count: int) -> None:
        """Give the erased ``messages_set`` ``seq`` (the last event held, :attr:`unsized`) the
        item count its own window record shows.

        Raises:
            ValueError: ``seq`` is not the unsized set, or ``count`` is negative.
        """
        if seq != self._unsized or count < 0:
            msg = f"Brought.settle of seq {seq}: only the erased set {self._unsized} can be sized"
            raise ValueError(msg)
        self._counts[-1] = count
        self._firsts[-1] = self._firsts[-2] + (count > 0)
        self._unsized = 0

    def _brings(self, seq: int, index: int) -> bool:
        if not self._first <= seq <= self.last:
            return False
        size = self.set_size(seq)
        return index == 0 and self.added(seq, seq) == 1 if size is None else 0 <= index < size

    def newest(self, kind: str) -> int:
        """The seq of the newest event of ``kind`` held (0: none)."""
        return self._newest.get(kind, 0)

    @property
    def unknown(self) -> int:
        """The newest event held whose messages' roles are unknown (0: none)."""
        return self._unknown

    def is_system(self, seq: int, index: int) -> bool:
        """Whether the message ``(seq, index)`` brought is a system message."""
        return self.system_in((seq, index), (seq, index)) == 1

    def system_in(self, low: tuple[int, int], high: tuple[int, int]) -> int:
        """How many system messages were brought with refs in ``low..high`` (inclusive)."""
        return _between(self._system, low, high)

    def retracted_in(self, low: tuple[int, int], high: tuple[int, int]) -> int:
        """How many messages with refs in ``low..high`` were taken back."""
        return _between(self._retracted, low, high)

    def gone_from(self, low: tuple[int, int]) -> int:
        """How many messages with refs from ``low`` on are system messages or taken back."""
        return _between(self._gone, low, (self.last, _LAST_INDEX))

    @property
    def first(self) -> int:
        """The seq of the first event held."""
        return self._first

    @property
    def last(self) -> int:
        """The seq of the last event held (``first - 1`` when none)."""
        return self._first + len(self._counts) - 1

    def added(self, a: int, b: int) -> int:
        """How many of the events ``a..b`` are ``message_added`` (events not held count as
        none), in O(1)."""
        lo = max(a, self._first) - self._first
        hi = min(b, self.last) - self._first + 1
        return self._adds[hi] - self._adds[lo] if hi > lo else 0

    def firsts(self, a: int, b: int) -> int:
        """How many of the events ``a..b`` brought a message at index 0 - an add, or a set
        of one item or more: what a run ``[a, b]`` names (see :func:`projections.meta.
        encode_refs`) - in O(1)."""
        lo = max(a, self._first) - self._first
        hi = min(b, self.last) - self._first + 1
        return self._firsts[hi] - self._firsts[lo] if hi > lo else 0

    def set_size(self, seq: int) -> int | None:
        """The item count of ``messages_set`` event ``seq``; None when it is not one."""
        return self._counts[seq - self._first] if seq in self._sets else None

    def __getitem__(self, seq: int) -> int:
        if not self._first <= seq <= self.last:
            raise KeyError(seq)
        return self._counts[seq - self._first]

    def __iter__(self) -> Iterator[int]:
        return iter(range(self._first, self.last + 1))

    def __len__(self) -> int:
        return len(self._counts)


def _between(refs: array[int], low: tuple[int, int], high: tuple[int, int]) -> int:
    return bisect_right(refs, _ref(*high)) - bisect_left(refs, _ref(*low))


WindowCheck: TypeAlias = Callable[[Record, Brought], None]
"""``check(record, brought)``: raise ValueError when ``record`` (its ``meta``) cannot be
right given what the memory's events up to and including it brought."""


class _Roles(NamedTuple):
    """What :meth:`Brought.append` is told of an event beyond its kind and count."""

    system: list[int]
    retracted: tuple[int, int] | None = None
    known: bool = True


def _roles(event: object) -> _Roles:
    """The system messages an event brought, the message it took back, and whether that is
    known (not for an erased record)."""
    if isinstance(event, MessageAdded):
        return _Roles([0] if isinstance(event.message, SystemMessage) else [])
    if isinstance(event, MessagesSet):
        return _Roles([i for i, m in enumerate(event.messages) if isinstance(m, SystemMessage)])
    if isinstance(event, MessageRetracted):
        return _Roles([], (event.seq, event.index))
    if isinstance(event, ContentErased):  # its roles, or what it took back, are gone
        return _Roles([], None, False)
    # A target's record this import cannot decode (sealed under a key it lacks): unknown.
    return _Roles([], None, not isinstance(event, str))


def _brought_by(record: Record, event: object) -> int:
    """Messages a record already in the target brought (it was checked when it was written;
    a payload that does not decode brings nothing, so no window may refer to it)."""
    if record.kind == "message_added":
        return 1
    return len(event.messages) if isinstance(event, MessagesSet) else 0


class ImportGate:
    """The checks of one import, run before anything is written.

    Args:
        refuse: Turns "what is wrong, where, and the remedy" into the refusal to raise.
        now: The import's clock (None: the time the gate is made).
        skew: How far after ``now`` a record's time may be.
        max_line: Longest line accepted, in characters.
        max_depth: Deepest JSON nesting accepted in a line or in any text field.
        check: Run on each record with what the memory's events brought (see
            :data:`WindowCheck`); None skips that check.
    """

    def __init__(
        self,
        refuse: Callable[[str], ValueError],
        *,
        now: datetime | None = None,
        skew: timedelta = DEFAULT_SKEW,
        max_line: int = DEFAULT_MAX_LINE,
        max_depth: int = DEFAULT_MAX_DEPTH,
        check: WindowCheck | None = None,
        opener: Callable[[Record], Record] | None = None,
    ) -> None:
        check_import_options(now, skew, max_line, max_depth)
        self._refuse = refuse
        # The target store's decryption: a sealed payload is checked as the plaintext it
        # opens to (and refused, naming the missing key, when the store cannot open it).
        self._opener = opener
        clock = datetime.now(UTC) if now is None else now
        self._latest = format_time(clock + skew)
        self._skew = skew
        self._max_line = max_line
        self._max_depth = max_depth
        self._check = check
        self._set_size = 0  # items of the last record checked, when it is a messages_set
        self._roles = _Roles([])  # and what else it brought (system messages, a retraction)
        self._brought: dict[str, Brought] = {}
        self._acks: list[tuple[str, str, int]] = []  # (line, memory, seq) of each one

    # ------------------------------------------------------------------ lines

    def lines(self, lines: Iterable[str]) -> Iterator[str]:
        """The lines of ``lines``, refusing one longer than ``max_line`` before reading it
        whole when ``lines`` is a text file."""
        if isinstance(lines, str | bytes | bytearray):
            # A str would be read a character per line, bytes an int per line.
            raise _not_lines(lines, None)
        readline = getattr(lines, "readline", None)
        if readline is None:
            for number, line in enumerate(lines, 1):
                if not isinstance(line, str):
                    raise _not_lines(line, number)
                if line.find("\n") not in (-1, len(line) - 1):
                    # One element holding two lines: the private copy the writing pass reads
                    # would split it in two, and that pass fail after writing some memories.
                    msg = (
                        f"line {number} holds a line break before its end; pass the file's "
                        "lines (an open file, or text.splitlines())"
                    )
                    raise self._refuse(msg)
                yield line
            return
        # readline(n) returns at most n characters: a 10 GB line costs max_line of memory.
        for number, chunk in enumerate(iter(lambda: readline(self._max_line + 1), ""), 1):
            if not isinstance(chunk, str):  # a file opened in binary mode
                raise _not_lines(chunk, number)
            if len(chunk) > self._max_line and not chunk.endswith("\n"):
                raise self._too_long(number)
            yield chunk

    def _too_long(self, number: int) -> ValueError:
        return self._refuse(
            f"line {number} is longer than {self._max_line} characters, the import's bound "
            "on one record; if the file is genuine, import it with a larger max_line "
            "(eventlog.import_jsonl(store, lines, max_line=N))"
        )

    def named(self, store: EventStore, key: str) -> None:
        """Refuse a pseudonym ``key`` the target cannot append to: a pseudonym names its
        memory only through a ``names`` row this process made by appending by id, and an
        export carries no names - append would refuse it after earlier memories were written."""
        try:
            store._name_row(key)
        except ValueError:
            msg = (
                f"memory {key!r} is stored under a pseudonym, which this ledger cannot name: "
                "an export carries pseudonyms, not memory ids (those stay in the ledger it "
                "came from); copy that ledger's database instead"
            )
            raise self._refuse(msg) from None

    def line(self, line: str, number: int) -> None:
        """Refuse a line too long or nested too deeply for a parser to be given it."""
        if len(line) > self._max_line:
            raise self._too_long(number)
        self._depth(line, f"line {number}")

    def _depth(self, text: str, what: str) -> None:
        depth = nesting_depth(text, self._max_depth)
        if depth > self._max_depth:
            msg = (
                f"{what} nests JSON more than {self._max_depth} levels deep, which no "
                "chatledger record does (it would exhaust the parser's recursion); "
                "the file was not written by `chatledger export`"
            )
            raise self._refuse(msg)

    def fields(self, obj: Mapping[str, Any], number: int) -> None:
        """Refuse text fields of a parsed line that no parser or store should be given:
        a key too long or too nested to decode, lone surrogates (not UTF-8), NUL characters
        (PostgreSQL cannot store them) and payload or meta nested too deeply."""
        for name in ("memory", "payload", "meta"):
            text = obj.get(name)
            if not isinstance(text, str):
                continue
            where = f"line {number}: {name}"
            problem = validation.text_problem(text)
            if problem is not None:
                msg = f"{where} {problem}; the file was not written by `chatledger export`"
                raise self._refuse(msg)
            if name == "memory":
                problem = validation.key_problem(text)
                if problem is not None:
                    msg_0 = f"{where} {problem}"
                    raise self._refuse(msg_0)
            elif "\x00" in text:
                msg = (
                    f"{where} holds a NUL character, which chatledger never writes (JSON "
                    "escapes it) and PostgreSQL cannot store"
                )
                raise self._refuse(msg)
            self._depth(text, where)

    # ------------------------------------------------------------------ records

    def record(self, record: Record, line: int) -> None:
        """Refuse a record whose kind, version, key, time, payload or meta is not one this
        chatledger wrote; ``line`` is its line number in the file."""
        where = f"line {line}"
        key = record.stream_id
        problem = validation.kind_problem(record.kind) or validation.version_problem(
            record.schema_version
        )
        if problem is not None:
            msg = f"{where}: {problem}"
            raise self._refuse(msg)
        canonical = memory_key(memory_id_from_key(key))
        if canonical != key:
            msg = (
                f"{where}: memory key {key!r:.80} is not canonical (its id is stored as "
                f"{canonical!r:.80}); a hand-made key would alias another memory or split "
                "one in two - write the key chatledger writes"
            )
            raise self._refuse(msg)
        if record.recorded_at_text > self._latest:
            msg = (
                f"{where}: recorded_at {record.recorded_at_text} is later than this import's "
                f"clock allows ({self._latest}, {self._skew} of skew); a future time would "
                "freeze the memory's clock - check the clock of the machine that wrote it"
            )
            raise self._refuse(msg)
        self._payload(record, where)
        self._meta(record, where)

    def _payload(self, record: Record, where: str) -> None:
        what = f"{where}: the payload of {record.stream_id!r:.80}#{record.seq} ({record.kind})"
        if self._opener is not None:
            record = self._opener(record)
        event = validation.decoded_payload(record, self._max_depth)
        if isinstance(event, str):
            msg = f"{what} {event}; the record is malformed"
            raise self._refuse(msg)
        self._set_size = len(event.messages) if isinstance(event, MessagesSet) else 0
        self._roles = _roles(event)
        if isinstance(event, RecordQuarantined) and record.stream_id == QUARANTINE_STREAM:
            self._acks.append((where, event.memory, event.seq))

    def _meta(self, record: Record, where: str) -> None:
        # Never deeper than append accepts, whatever max_depth allows elsewhere: a meta the
        # gate passed and append refused would fail the import after earlier memories were
        # written.
        problem = validation.meta_problem(record.meta, min(self._max_depth, validation.MAX_DEPTH))
        if problem is not None:
            msg = (
                f"{where}: the meta of {record.stream_id!r:.80}#{record.seq} {problem}; "
                "the record is malformed"
            )
            raise self._refuse(msg)

    # ------------------------------------------------------------------ streams

    def start(self, store: EventStore, key: str, head: int, first: int) -> None:
        """Begin checking the windows of memory ``key``, whose first record in the file is
        seq ``first``: the target's events ``1..head`` are read (in pages) for what they
        brought, since a continued import's windows may refer to them."""
        if self._check is None:
            return
        brought: Brought | None = None
        after = 0
        while after < head:
            page = store.read(StreamKey(key), gt=after, lte=head, limit=2_000)
            if not page:
                break
            for old in page:
                brought = brought or Brought(old.seq)
                opened = old if self._opener is None else self._opener(old)
                event = validation.decoded_payload(opened, self._max_depth)
                roles = _roles(event)
                brought.append(
                    old.seq,
                    old.kind,
                    _brought_by(old, event),
                    system=roles.system,
                    retracted=roles.retracted,
                    known=roles.known,
                )
            after = page[-1].seq
        self._brought[key] = brought or Brought(first)

    def window(self, record: Record, line: int) -> None:
        """Run ``check`` on ``record``, just checked by :meth:`record` (so its set size is
        known), with what its memory's events brought up to and including it; records come
        in seq order per memory (chain already checked), after :meth:`start`."""
        if self._check is None:
            return
        key = record.stream_id
        brought = self._brought[key]
        count = 1 if record.kind == "message_added" else self._set_size
        roles = self._roles
        brought.append(
            record.seq,
            record.kind,
            count,
            system=roles.system,
            retracted=roles.retracted,
            known=roles.known,
        )
        try:
            self._check(record, brought)
        except ValueError as e:
            msg = (
                f"line {line}: the window record of {key!r:.80}#{record.seq} "
                f"({record.kind}) {_one_line(e)}; the file was not written by a chatledger "
                "memory, or was altered and re-hashed"
            )
            raise self._refuse(msg) from e

    def acknowledgements(self, brought: Collection[str]) -> None:
        """Refuse an acknowledgement of damage (``~sys:quarantine``, :mod:`eventlog.quarantine`)
        naming a memory the import does not bring (``brought``: the keys it writes). It
        would land next to records it never saw: the target's own, or ones a later write
        makes, excusing them if they ever matched it."""
        for where, memory, seq in self._acks:
            if memory not in brought:
                msg = (
                    f"{where}: {QUARANTINE_STREAM} acknowledges damage to {memory!r:.80} seq "
                    f"{seq}, a memory this file does not bring; an acknowledgement travels "
                    "with its memory only - leave the system streams out (export without "
                    "--include-system), or export the memory with it"
                )
                raise self._refuse(msg)


def _not_lines(given: object, number: int | None) -> TypeError:
    name = type(given).__name__
    what = f"a whole {name}" if number is None else f"line {number} is a {name}"
    return TypeError(
        f"import_jsonl: lines must be the file's lines as str - an open text file (open(path, "
        f"encoding='utf-8')) or text.splitlines(keepends=True) - but {what}; nothing was written"
    )
