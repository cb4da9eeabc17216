"""The window record: what every event a memory writes says about its window.

Each event's ``meta`` text records the window right after the event, so a past view, a cold
open and a catch-up read O(window) rows and never depend on today's limit or tokenizer. This
module is the only code that knows how that record is stored (its JSON keys); everything else
goes through :class:`WindowMeta`.

Stored form (canonical JSON: sorted keys, compact), every key but ``"w"`` optional:

* ``"w"``: the window's refs, run-length encoded (see :func:`encode_refs`);
* ``"lim"``: the limit the event was trimmed to (absent for a fork's untrimmed copy);
* ``"tok"``: token counts of the messages the event brought (an int for an add, a list for a
  set), counted by the estimator named in ``"est"``;
* ``"forked_from"``: for a fork's first event, the source memory, seq and hash;
* ``"ev"``: chunked eviction's low-water mark in thousandths of the limit (``evict_to``);
* ``"sum"``: a summarizing memory's summary in force: the seq of its ``summary_recorded`` event;
* ``"sth"``: a summarizing memory's coverage: every message that left the window by eviction
  at or before this seq is in the summary (or deferred by it), later ones are still to fold;
* ``"sys"``: the refs ``[seq, index]`` of the system messages in the window, in order, so a
  window policy applied over the events finds them without reading them all (absent: not
  known). A framework session's item list (:mod:`projections.adapters.item_list`) writes it
  on every event; a memory writes it while the system messages are the same under every
  window policy (:attr:`projections.window.Window.system_settled`), which lets a what-if
  start from a recent event (:mod:`projections.counterfactual`).
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import islice, pairwise
from typing import TYPE_CHECKING, Any

from projections.window import Entry

if TYPE_CHECKING:
    from eventlog.import_checks import Brought
    from eventlog.models import Record

__all__ = [
    "EMPTYING_KINDS",
    "UNBOUNDED_LIMIT",
    "ForkOrigin",
    "Refs",
    "WindowMeta",
    "check_window_record",
    "decode_refs",
    "encode_refs",
]

Refs = list[list[int]]
"""Run-length encoded refs: ``[a, b]`` is events a..b (index 0), ``[s, i, j]`` items i..j of
the set event s."""

UNBOUNDED_LIMIT = 2**31 - 1
"""The limit a framework session's events record: its list keeps every item, so no window was
chosen by it (readers show "no window recorded", never this number)."""

EMPTYING_KINDS = frozenset({"memory_cleared", "memory_purged", "memory_erased"})
"""Event kinds after which the window is empty, whatever their meta says: a clear, a retention
purge's tombstone, an erasure's receipt."""

_dumps = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode


def encode_refs(entries: Sequence[Entry]) -> Refs:
    """Run-length encode the refs of a window.

    ``[a, b]`` stands for refs ``(a, 0) .. (b, 0)`` (consecutive events, e.g. adds) and
    ``[s, i, j]`` for ``(s, i) .. (s, j)`` (items of one ``set``). A typical window is one or
    two runs, so recording it with every event costs a few bytes.
    """
    # Runs on every add, so the state lives in locals: `kind` 2 is an add-run [a, b], 3 a
    # set-run [a, b..c] (a = seq, b..c = indexes), 0 none yet.
    runs: Refs = []
    kind = a = b = c = 0
    for entry in entries:
        seq, idx = entry.ref
        if kind == 2:
            if idx == 0 and seq == b + 1:
                b = seq
                continue
            if idx == 1 and a == seq == b:  # (s, 0) then (s, 1): items of one set
                kind, b, c = 3, 0, 1
                continue
            runs.append([a, b])
        elif kind == 3:
            if seq == a and idx == c + 1:
                c = idx
                continue
            runs.append([a, b, c])
        if idx == 0:
            kind, a, b = 2, seq, seq
        else:
            kind, a, b, c = 3, seq, idx, idx
    if kind == 2:
        runs.append([a, b])
    elif kind == 3:
        runs.append([a, b, c])
    return runs


def decode_refs(runs: Refs) -> list[tuple[int, int]]:
    """Inverse of :func:`encode_refs`."""
    refs: list[tuple[int, int]] = []
    for run in runs:
        if len(run) == 2:
            refs.extend((s, 0) for s in range(run[0], run[1] + 1))
        else:
            refs.extend((run[0], i) for i in range(run[1], run[2] + 1))
    return refs


@dataclass(frozen=True, slots=True)
class ForkOrigin:
    """Where a forked memory's first event came from.

    Attributes:
        memory: The source memory's stored key.
        seq: The source event whose view was copied.
        hash: That event's hash.
    """

    memory: str
    seq: int
    hash: str


@dataclass(frozen=True, slots=True)
class WindowMeta:
    """The window right after an event, as recorded in the event's meta.

    Attributes:
        runs: The window's refs, run-length encoded (:attr:`refs` decodes them).
        limit: The limit the event trimmed to (None: not trimmed, e.g. a fork).
        tokens: Token counts of the messages the event brought: an int for an add, one per
            item for a set; None for a message window.
        estimator: Identity of the estimator that counted ``tokens``.
        forked_from: Set on a fork's first event.
        evict_permille: Chunked eviction's low-water mark, thousandths of the limit.
        summary: Seq of the ``summary_recorded`` event in force (summarizing memories).
        through: Seq up to which evicted messages are summarized (summarizing memories).
        system: The refs ``[seq, index]`` of the window's system messages (a framework
            session's item list records them, and a memory while every window policy would
            hold the same ones); None: not recorded.
    """

    runs: Refs
    limit: int | None = None
    tokens: int | list[int] | None = None
    estimator: str | None = None
    forked_from: ForkOrigin | None = None
    evict_permille: int | None = None
    summary: int | None = None
    through: int | None = None
    system: Refs | None = None

    @classmethod
    def of(
        cls,
        entries: Sequence[Entry],
        limit: int | None,
        tokens: int | list[int] | None = None,
        estimator: str | None = None,
        forked_from: ForkOrigin | None = None,
        *,
        evict_permille: int | None = None,
        summary: int | None = None,
        through: int | None = None,
        system: Refs | None = None,
    ) -> WindowMeta:
        """The record of a window holding ``entries``."""
        return cls(
            encode_refs(entries),
            limit,
            tokens,
            estimator,
            forked_from,
            evict_permille,
            summary,
            through,
            system,
        )

    @property
    def refs(self) -> list[tuple[int, int]]:
        """The ``(seq, index)`` refs of the window's entries, in window order."""
        return decode_refs(self.runs)

    @property
    def size(self) -> int:
        """How many messages the window holds (without decoding the refs)."""
        return sum(run[-1] - run[-2] + 1 for run in self.runs)

    def encode(self) -> str:
        """The canonical meta text (sorted keys, compact; None values left out)."""
        if (
            self.forked_from is None
            and not isinstance(self.tokens, list)
            and self.evict_permille is None
            and self.summary is None
            and self.through is None
        ):
            # A session's item list (``sys``) takes this path too: it writes on every add.
            # The add path: written directly, several times faster than the JSON encoder and
            # byte-identical to it (a test compares the two).
            window = ",".join(
                f"[{run[0]},{run[1]}]" if len(run) == 2 else f"[{run[0]},{run[1]},{run[2]}]"
                for run in self.runs
            )
            lim = "" if self.limit is None else f'"lim":{self.limit},'
            if self.system is not None:
                lim += '"sys":[' + ",".join(f"[{s},{i}]" for s, i in self.system) + "],"
            if self.tokens is None:
                return f'{{{lim}"w":[{window}]}}'
            est = _dumps(self.estimator)
            return f'{{"est":{est},{lim}"tok":{self.tokens},"w":[{window}]}}'
        return _dumps(self.to_json())

    def to_json(self) -> dict[str, Any]:
        """The stored JSON object (what :meth:`encode` serializes)."""
        obj: dict[str, Any] = {"w": self.runs}
        if self.limit is not None:
            obj["lim"] = self.limit
        if self.tokens is not None:
            obj["tok"] = self.tokens
            obj["est"] = self.estimator
        if self.forked_from is not None:
            origin = self.forked_from
            obj["forked_from"] = {"hash": origin.hash, "memory": origin.memory, "seq": origin.seq}
        if self.evict_permille is not None:
            obj["ev"] = self.evict_permille
        if self.summary is not None:
            obj["sum"] = self.summary
        if self.through is not None:
            obj["sth"] = self.through
        if self.system is not None:
            obj["sys"] = self.system
        return obj

    @classmethod
    def decode(cls, text: str) -> WindowMeta | None:
        """Read the window record from an event's meta text.

        Returns:
            The record, or None when the meta records no window (an event not written by a
            chatledger memory, e.g. a compaction run).

        Raises:
            ValueError: The meta is not JSON, or its window record is malformed.
        """
        if not text:
            return None
        try:
            obj = json.loads(text)
        except ValueError as e:
            msg = f"event meta is not JSON ({e}): {text[:80]!r}"
            raise ValueError(msg) from e
        if not isinstance(obj, dict):
            msg = f"event meta is not a JSON object: {text[:80]!r}"
            raise ValueError(msg)
        if "w" not in obj:
            return None
        return cls._from_obj(obj, text)

    @classmethod
    def _from_obj(cls, obj: dict[str, Any], text: str) -> WindowMeta:
        runs = obj["w"]
        if not isinstance(runs, list) or not all(_is_run(run) for run in runs):
            msg = f'event meta has a malformed window ("w"): {text[:80]!r}'
            raise ValueError(msg)
        limit = obj.get("lim")
        tokens = obj.get("tok")
        estimator = obj.get("est")
        origin = obj.get("forked_from")
        evict = obj.get("ev")
        summary = obj.get("sum")
        through = obj.get("sth")
        system = obj.get("sys")
        if (
            not _is_count(limit, allow_none=True)
            or not (
                _is_count(tokens, allow_none=True)
                or (isinstance(tokens, list) and all(_is_count(t) for t in tokens))
            )
            or not (estimator is None or isinstance(estimator, str))
            or not (origin is None or _is_origin(origin))
            or not (evict is None or (_is_count(evict) and 0 < evict < 1000))
            or not _is_count(summary, allow_none=True)
            or not _is_count(through, allow_none=True)
            or not (system is None or (isinstance(system, list) and all(map(_is_ref, system))))
        ):
            msg = f"event meta has a malformed window record: {text[:80]!r}"
            raise ValueError(msg)
        fork = (
            None if origin is None else ForkOrigin(origin["memory"], origin["seq"], origin["hash"])
        )
        return cls(runs, limit, tokens, estimator, fork, evict, summary, through, system)

    def holds(self, ref: Sequence[int]) -> bool:
        """True when the window's runs name ``ref`` (``[seq, index]``), without expanding them."""
        seq, index = ref[0], ref[1]
        for run in self.runs:
            if len(run) == 2:
                if index == 0 and run[0] <= seq <= run[1]:
                    return True
            elif seq == run[0] and run[1] <= index <= run[2]:
                return True
        return False


def _is_count(value: object, *, allow_none: bool = False) -> bool:
    if value is None:
        return allow_none
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_ref(ref: object) -> bool:
    return isinstance(ref, list) and len(ref) == 2 and all(_is_count(v) for v in ref)


def _is_run(run: object) -> bool:
    if not isinstance(run, list) or len(run) not in (2, 3) or not all(_is_count(v) for v in run):
        return False
    return bool(run[-2] <= run[-1])


def _is_origin(origin: object) -> bool:
    return (
        isinstance(origin, dict)
        and isinstance(origin.get("memory"), str)
        and _is_count(origin.get("seq"))
        and isinstance(origin.get("hash"), str)
    )


def check_window_record(record: Record, brought: Brought) -> None:
    """Refuse a window record that no chatledger memory could have written.

    The import gate's ``check`` (see :func:`eventlog.formats.jsonl.import_jsonl`): a hash proves a
    record was not altered after hashing, not that its window makes sense, and every reader
    (``messages()``, ``as_of``, ``walk``) trusts the window to name real messages. Each run is
    checked in O(1) against ``brought``, never by expanding it, so a run of a billion events
    costs nothing to refuse.

    A clear or purge has an empty window whatever its meta says (readers ignore it), and an
    event without a window record (not written by a memory) has nothing to check.

    Args:
        record: The event.
        brought: What the memory's events up to and including ``record`` brought.

    Raises:
        ValueError: The window record is malformed, or a run names events after ``record``,
            events that are not all ``message_added``, items a ``messages_set`` did not bring,
            or a message another run already names.
    """
    if record.kind in EMPTYING_KINDS:
        return
    meta = WindowMeta.decode(record.meta)
    if meta is None:
        return
    if brought.unsized == record.seq:
        _settle_erased_set(meta, record.seq, brought)
    for name, value in (("summary", meta.summary), ("coverage", meta.through)):
        if value is not None and value > record.seq:
            msg = f"names {name} seq {value}, after the event itself ({record.seq})"
            raise ValueError(msg)
    adds: list[tuple[int, int]] = []
    sets: list[tuple[int, int, int]] = []
    for run in meta.runs:
        if len(run) == 2:
            a, b = run
            if not 1 <= a <= b <= record.seq:
                msg = f"refers to events {a}..{b}, outside 1..{record.seq} (up to itself)"
                raise ValueError(msg)
            # Item 0 of a set is written in such a run too (encode_refs cannot tell it from
            # an add), so a set that brought a message counts.
            if brought.firsts(a, b) != b - a + 1:
                msg = (
                    f"refers to events {a}..{b} as added messages, but not all are "
                    "message_added (or a messages_set's item 0)"
                )
                raise ValueError(msg)
            adds.append((a, b))
        else:
            s, i, j = run
            count = brought.set_size(s) if 1 <= s <= record.seq else None
            if count is None:
                msg = f"refers to items {i}..{j} of event {s}, which is not an earlier messages_set"
                raise ValueError(msg)
            if j >= count:
                msg = f"refers to items {i}..{j} of event {s}, which brought {count}"
                raise ValueError(msg)
            sets.append((s, i, j))
    # A window holds each message once; a run repeated would multiply what readers build.
    for (_, end), (start, _) in pairwise(sorted(adds)):
        if start <= end:
            msg = f"refers to event {start} twice"
            raise ValueError(msg)
    for (s1, _, j1), (s2, i2, _) in pairwise(sorted(sets)):
        if s1 == s2 and i2 <= j1:
            msg = f"refers to item {i2} of event {s2} twice"
            raise ValueError(msg)
    # A run [a, b] names item 0 of a set in it: a set run may not name that item again.
    starts = sorted(adds)
    firsts = [a for a, _ in starts]
    for s, i, _ in sets:
        k = bisect_right(firsts, s) - 1
        if i == 0 and k >= 0 and starts[k][1] >= s:
            msg = f"refers to item 0 of event {s} twice"
            raise ValueError(msg)
    _check_system(meta)
    if (
        record.kind in ("message_added", "messages_set")
        and meta.tokens is None
        and meta.limit is not None
        and meta.size > meta.limit
    ):
        # A message window (no token counts): LangChain4j's ensureCapacity trims the whole
        # list, system message included, to the limit after every add and set.
        msg = f"holds {meta.size} messages, more than its own limit {meta.limit}"
        raise ValueError(msg)
    if meta.limit != UNBOUNDED_LIMIT:
        # A framework session's list (recorded unbounded) may reorder and leave gaps:
        # LangGraph replaces and removes messages by id. A memory's window never does.
        _check_sequence(meta, brought)


_MAX_ITEMS = (1 << 63) - 1
"""The most items an erased ``messages_set`` is taken to have brought (what the import gate's
counts hold)."""


def _settle_erased_set(meta: WindowMeta, seq: int, brought: Brought) -> None:
    """Size the erased ``messages_set`` ``seq`` from its own window record.

    Raises:
        ValueError: The window names an item past what a set can hold (a hand-made file).
    """
    size = _erased_set_size(meta, seq)
    if size > _MAX_ITEMS:
        msg = (
            f"names item {size - 1} of its own erased messages_set, past the {_MAX_ITEMS} "
            "items a set can hold"
        )
        raise ValueError(msg)
    brought.settle(seq, size)


def _erased_set_size(meta: WindowMeta, seq: int) -> int:
    """How many items the ``messages_set`` ``seq``, whose content was erased, brought, as its
    own window record shows: a token window counted each item (``tok``); otherwise the set's
    last item is the newest message of its window (trimming takes from the front), so one
    past the highest index the window names. Later windows name only items this one holds."""
    if isinstance(meta.tokens, list):
        return len(meta.tokens)
    size = 0
    for run in meta.runs:
        if len(run) == 3 and run[0] == seq:
            size = max(size, run[2] + 1)
        elif len(run) == 2 and run[0] <= seq <= run[1]:
            size = max(size, 1)
    return size


def _check_system(meta: WindowMeta) -> None:
    """A session's system refs name messages of its window, once each, in order."""
    if meta.system is None:
        return
    for ref in meta.system:
        if not meta.holds(ref):
            msg = f"names system message {ref} outside its window"
            raise ValueError(msg)
    for a, b in pairwise(meta.system):
        if (a[0], a[1]) >= (b[0], b[1]):
            msg = f"names system messages {a} and {b} out of order"
            raise ValueError(msg)


def _check_sequence(meta: WindowMeta, brought: Brought) -> None:
    """What the window rules (:class:`projections.window.Window`) keep under every policy:
    nothing from before the newest set or clear; messages in the order they were brought,
    but for a system message put first (``always_keep_system_message_first``); and the
    non-system messages held are all those brought from the oldest held on (see
    :func:`_check_gaps`). Roles are known when no content since the newest set or clear was
    erased; otherwise only the order is checked."""
    runs = meta.runs
    if not runs:
        return
    floor, reset = 0, ""
    for kind in ("messages_set", *sorted(EMPTYING_KINDS)):
        seq = brought.newest(kind)
        after = seq if kind == "messages_set" else seq + 1
        if seq and after > floor:
            floor, reset = after, f"event {seq} ({kind})"
    low = min(run[0] for run in runs)
    if low < floor:
        msg = f"refers to event {low}, but after {reset} the window holds nothing older"
        raise ValueError(msg)
    spans = [_span(run) for run in runs]
    known = brought.unknown == 0 or brought.unknown < floor
    # A system message may be put first, with a later ref than the message after it.
    lead = len(spans) > 1 and spans[0][0] == spans[0][1] and spans[0][1] > spans[1][0]
    if lead and known and not brought.is_system(*spans[0][0]):
        msg = (
            f"puts message {list(spans[0][0])} first, before earlier ones, which only a "
            "system message can be"
        )
        raise ValueError(msg)
    for (_, end), (start, _) in pairwise(spans[1:] if lead else spans):
        if end >= start:
            msg = f"holds message {list(start)} after {list(end)}, out of the order brought"
            raise ValueError(msg)
    if known:
        _check_gaps(runs, spans, brought, lead=lead, size=meta.size)


_Span = tuple[tuple[int, int], tuple[int, int]]


def _span(run: Sequence[int]) -> _Span:
    """The first and last ref of a run."""
    if len(run) == 2:
        return (run[0], 0), (run[1], 0)
    return (run[0], run[1]), (run[0], run[2])


def _check_gaps(runs: Refs, spans: list[_Span], brought: Brought, *, lead: bool, size: int) -> None:
    """The non-system messages held are every message brought from the oldest of them on
    that is neither a system message nor taken back: eviction takes from the front (the
    orphan cascade too), and only a replaced system message or a message taken back
    (``message_retracted``) leaves from the middle. Counted, never expanded."""
    system = 0
    first: tuple[int, int] | None = None
    for k, (run, (start, end)) in enumerate(zip(runs, spans, strict=True)):
        if _in_run(brought.retracted_in, run):
            msg = f"holds a message taken back (message_retracted) in {list(start)}..{list(end)}"
            raise ValueError(msg)
        inside = _in_run(brought.system_in, run)
        system += inside
        if first is None and not (lead and k == 0):
            first = _first_not_system(run, inside, brought)
    held = size - system
    if first is None or held == 0:
        return  # only system messages: the newest may have been evicted behind one
    seq, index = first
    count = brought.set_size(seq)
    since = brought.added(seq + (count is not None), brought.last)
    if count is not None:
        since += count - index
    expected = since - brought.gone_from(first)
    if held != expected:
        msg = (
            f"holds {held} non-system messages from {list(first)} on, but {expected} were "
            "brought there that no eviction leaves out (it takes the oldest first): a "
            "message is missing from the window"
        )
        raise ValueError(msg)


def _in_run(count: Callable[[tuple[int, int], tuple[int, int]], int], run: Sequence[int]) -> int:
    """``count(low, high)`` over the refs of ``run`` alone: a run ``[a, b]`` names item 0 of
    each event, and only event ``a`` can be a set with later items (a set after it would
    have left nothing of ``a``: checked first), so those are left out of the range."""
    if len(run) == 3:
        return count((run[0], run[1]), (run[0], run[2]))
    a, b = run
    return count((a, 0), (a, 0)) + (count((a + 1, 0), (b, 0)) if b > a else 0)


def _first_not_system(run: Sequence[int], system: int, brought: Brought) -> tuple[int, int] | None:
    """The first ref of ``run`` that is not a system message (None: all are); ``system`` of
    its refs are, so at most that many are stepped over."""
    if len(run) == 2:
        refs: Iterable[tuple[int, int]] = ((seq, 0) for seq in range(run[0], run[1] + 1))
    else:
        refs = ((run[0], i) for i in range(run[1], run[2] + 1))
    for ref in islice(refs, system + 1):
        if not brought.is_system(*ref):
            return ref
    return None
