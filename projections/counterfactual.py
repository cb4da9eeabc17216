"""What-if: the window another policy would have kept, replayed from the log.

:func:`what_if` folds a memory's events through a policy it did not use. A window with a fixed
limit and LangChain4j's eviction (no ``evict_to``) - a message window, or a token window whose
estimator counts a list as ``messages_overhead`` plus its messages - is folded over the newest
events only (:func:`_tail_window`), which reads O(window) events whatever the history's
length; every other policy, and a tail that cannot settle the answer, replays the whole
history.

Why a tail can be enough. Such a window is its system message (if any) plus the newest
non-system messages from some front on: adds append, evictions take the first non-system
message (and, behind an AI tool request, the tool results after it) until what is left fits
the limit, which only the counts of what is left decide (they add up). Fold the
newest events twice, from an empty window seeded with the right system message and from the
real window: the real one holds everything the seeded one holds, plus older messages, or -
after an orphan cascade from an older AI request - lacks some tool results at the seeded
window's front. At the first eviction the seeded window makes, the real one (as large or
larger) evicts down to the same front, unless it is ahead, which the seeded window shows by
starting with a tool result. So: once the seeded fold has evicted and does not start with a
tool result, it *is* the real window; otherwise fold more events. A clear, a set or an erasure
in the tail starts the fold exactly, with nothing to seed.

The seed is the system message the window held before the tail. A memory records it in each
event's window record (``sys``) while it is the same under every policy
(:attr:`~projections.window.Window.system_settled`); an event without it (an older history, or
a set of two or more system messages since the last clear) sends the fold back to the start.
"""

from __future__ import annotations

from datetime import datetime

from eventlog.ids import MemoryId
from eventlog.messages import ChatMessage, SystemMessage, ToolExecutionResultMessage, UserMessage
from eventlog.models import Record
from eventlog.store import EventStore
from projections.checked import PAGE, ROW_KIND, ROW_PAYLOAD, ROW_SEQ, read_checked, row_pages
from projections.meta import EMPTYING_KINDS, WindowMeta
from projections.replay import (
    _brought,
    _counted,
    _limit_of,
    apply,
    materialize,
    purged_before,
    quarantined_seqs,
    resolve_seq,
)
from projections.validity import profile_of, valid_view
from projections.window import (
    Entry,
    MessageWindowPolicy,
    TokenWindowPolicy,
    Window,
    WindowPolicy,
    check_policy,
)

__all__ = ["what_if", "what_if_newest"]

# what_if's pages are seq ranges of bare rows (EventStore.read_verified_rows). Not larger: a
# page's rows live until it is folded, and in a process with a big heap the collector's full
# passes over them cost more than fewer reads save (10,000-record pages of records took 1.46 s
# against 0.99 s at 100 k events with 3 M other objects alive).
_WHAT_IF_PAGE = PAGE

_TOKEN_SPAN = 64  # a token window's first tail, in events; four times as many each retry
_RESETS = EMPTYING_KINDS | {"messages_set"}  # after these the window owes nothing to before
_LEFT = frozenset({"evicted", "orphan"})


def what_if(
    store: EventStore,
    memory_id: MemoryId,
    policy: WindowPolicy,
    *,
    seq: int | None = None,
    at: datetime | None = None,
    valid_for: str | None = None,
) -> list[ChatMessage]:
    """What a memory with ``policy`` would have shown after event ``seq`` (or at time ``at``).

    Nothing is written. With neither ``seq`` nor ``at``, the answer is for the head.
    ``policy`` may use chunked eviction (``evict_to=``); ``valid_for`` names a provider profile
    whose valid view is returned (see :mod:`projections.validity`). A summarizing memory's
    summaries are not replayed: they summarize what *its* policy evicted.

    A window with a fixed limit and no ``evict_to`` (a message window, or a token window
    whose estimator declares ``messages_overhead``) reads only the newest events (see the
    module docstring), as ``as_of`` reads only the window: like it, it vouches for what it
    reads, not for the older history (``verify()`` does).

    Args:
        store: The store holding the history.
        memory_id: The memory id.
        policy: E.g. ``MessageWindowPolicy(20)`` or ``TokenWindowPolicy(2000, estimator)``.
        seq: The event after which to look.
        at: Or a time: the last event recorded at or before it.
        valid_for: ``"openai"``, ``"anthropic"``, ``"gemini"`` or None (the window as is).

    Raises:
        TypeError: ``policy`` is not a :class:`~projections.window.WindowPolicy`.
    """
    check_policy("what_if", policy)
    if valid_for is not None:
        profile_of(valid_for)  # refused before any read
        return valid_view(what_if(store, memory_id, policy, seq=seq, at=at), valid_for)
    target = None if seq is None and at is None else resolve_seq(store, memory_id, seq=seq, at=at)
    if target == 0:
        return []
    if seq is not None:
        purged_before(store, memory_id, seq, f"what_if(seq={seq})")
    tail = _tail_window(store, memory_id, policy, target)
    if tail is not None:
        return [e.message for e in tail]
    return _replayed(store, memory_id, policy, target)


def what_if_newest(
    store: EventStore,
    memory_id: MemoryId,
    policy: WindowPolicy,
    *,
    seq: int,
    most: int,
    valid_for: str | None = None,
) -> list[ChatMessage] | None:
    """:func:`what_if` after event ``seq`` from at most ``most`` of the newest events up to it
    (a page's bounded work, see :mod:`projections.inspector.step_panels`); None when they do
    not settle it, or the policy cannot be folded from them (see :func:`what_if`)."""
    if valid_for is not None:
        profile_of(valid_for)  # refused before any read
    tail = _tail_window(store, memory_id, policy, seq, most=most)
    if tail is None:
        return None
    view = [e.message for e in tail]
    return view if valid_for is None else valid_view(view, valid_for)


def _tail_window(
    store: EventStore,
    memory_id: MemoryId,
    policy: WindowPolicy,
    target: int | None,
    *,
    most: int | None = None,
) -> list[Entry] | None:
    """The view ``policy`` shows after event ``target`` (None: the head), folded over the
    newest events (at most ``most``); None when the whole history must be replayed
    instead."""
    limit = policy.static_limit
    if limit is None or policy.evict_permille is not None:
        return None
    if isinstance(policy, MessageWindowPolicy):
        span = 2 * limit + 16
    elif isinstance(policy, TokenWindowPolicy) and policy.additive:
        span = _TOKEN_SPAN  # how many messages fit is not known before they are counted
    else:
        return None
    if target is None:
        head = store.head(memory_id)
        if head is None:
            return []
        target = head.seq
    # Acknowledged damage is left out of a full replay; a tail cannot know what it changed.
    if quarantined_seqs(store, memory_id):
        return None
    while target - span >= 1 and (most is None or span <= most):
        first = target - span  # the event whose window record seeds the fold
        found = read_checked(store, memory_id, gt=first - 1, lte=target)
        if len(found) != span + 1 or found[0].seq != first:
            return None  # a purge's tombstone ahead of the range, or left-out damage
        window = _folded(store, memory_id, policy, found)
        if window is not None:
            return window.view(limit)
        span *= 4
    return None


def _folded(
    store: EventStore, memory_id: MemoryId, policy: WindowPolicy, found: list[Record]
) -> Window | None:
    """``found[1:]`` folded onto the window before them; None when that is not settled."""
    limit = _limit_of(policy, memory_id)
    resets = [i for i, record in enumerate(found) if record.kind in _RESETS]
    if resets:
        # Exact: the last clear, set or erasure leaves a window that owes nothing to before.
        window = Window(policy)
        for record in found[resets[-1] :]:
            apply(window, record, _counted(policy, _brought(store, record)), limit)
        return window
    seed = _seed(store, memory_id, found[0])
    if seed is None:
        return None
    window = Window(policy, seed)
    evicted = False
    for record in found[1:]:
        left = apply(window, record, _counted(policy, _brought(store, record)), limit)
        evicted = evicted or any(d.reason in _LEFT for d in left)
    front = next((e for e in window.entries if not isinstance(e.message, SystemMessage)), None)
    if not evicted:
        return None
    if front is not None and isinstance(front.message, ToolExecutionResultMessage):
        return None
    return window


def _seed(store: EventStore, memory_id: MemoryId, record: Record) -> list[Entry] | None:
    """The system message every policy's window held right after ``record`` (as an entry, or
    none), from its window record; None when the record does not say."""
    try:
        meta = WindowMeta.decode(record.meta)
    except ValueError:
        return None  # not a memory's window record: the full replay says what it is
    if meta is None or meta.system is None or len(meta.system) > 1:
        return None
    refs = [(s, i) for s, i in meta.system]
    if not all(meta.holds(ref) for ref in meta.system):
        return None  # a record no memory writes: the full replay refuses or reads it
    entries = materialize(store, memory_id, refs)
    if len(entries) != len(refs) or not all(isinstance(e.message, SystemMessage) for e in entries):
        return None
    return entries


def _replayed(
    store: EventStore, memory_id: MemoryId, policy: WindowPolicy, target: int | None
) -> list[ChatMessage]:
    """The whole history up to ``target`` folded through ``policy``."""
    window = Window(policy)
    limit = _limit_of(policy, memory_id)
    # A message window's rules look at a message only for its class (system, AI with tool
    # requests, tool result) and compare system messages: every other message is folded as
    # a stand-in and decoded only if it is still in the window at the end. Under a fixed
    # limit, a run of them is folded at once (Window.add_plain), and only the refs of its
    # last `limit` are made into entries: the ones before would be evicted anyway.
    lazy = isinstance(policy, MessageWindowPolicy)
    fixed = policy.static_limit if lazy else None
    # The history is read as bare rows (read_verified_rows: the same checks as records(), no
    # record built per row); a Record is made only for a row that is not a plain add.
    run: list[int] = []  # seqs of the plain adds not folded yet (fixed limit only)
    key = str(store.stream_key(memory_id))
    for page in row_pages(store, memory_id, key, lte=target, page=_WHAT_IF_PAGE):
        for row in page:
            if (
                lazy
                and row[ROW_KIND] == "message_added"
                # _plain_text's first test inline (most messages pass it), the rest in the call
                and (row[ROW_PAYLOAD].endswith(_PLAIN_ENDS) or _plain_text(row[ROW_PAYLOAD]))
            ):
                if fixed is not None:
                    run.append(row[ROW_SEQ])
                else:
                    window.add(Entry(_STAND_IN, (row[ROW_SEQ], 0)), limit)  # as apply() adds
                continue
            if run:
                _fold_plain(window, run, fixed)
                run = []
            record = Record.from_range_row(key, row)
            apply(window, record, _counted(policy, _brought(store, record)), limit)
        if run:
            _fold_plain(window, run, fixed)
            run = []
    view = window.view(limit())
    unread = [e.ref for e in view if e.message is _STAND_IN]
    if unread:
        read = {e.ref: e.message for e in materialize(store, memory_id, unread)}
        return [read[e.ref] if e.message is _STAND_IN else e.message for e in view]
    return [e.message for e in view]


def _fold_plain(window: Window, seqs: list[int], limit: int | None) -> None:
    """Fold the plain adds of ``seqs`` as stand-ins (see :meth:`Window.add_plain`)."""
    assert limit is not None  # noqa: S101 - runs are collected under a fixed limit only
    if window.policy.evict_permille is None:
        seqs = seqs[-limit:]
    window.add_plain([Entry(_STAND_IN, (seq, 0)) for seq in seqs], limit)


_STAND_IN: ChatMessage = UserMessage("stand-in for a message what_if has not decoded")
_PLAIN_ENDS = ('"type":"USER"}', '"type":"CUSTOM"}')


def _plain_text(payload: str) -> bool:
    """True when the stored message is surely one the message-window rules treat like any
    other (a user or custom message, or an AI message without tool requests), judged from
    the payload's text without decoding it; False means "decode it to know".

    Sound for any payload that decodes: the top-level ``"type"`` closes the object as
    chatledger writes it, and an escaped quote inside a string cannot form ``"type":"`` or
    ``"toolExecutionRequests"`` (it carries a backslash), so those texts are keys. Text
    written another way is simply decoded. An erased payload (``""`` in a row) or a still
    encrypted one is decoded too, so it raises as it always did.
    """
    if payload.endswith(_PLAIN_ENDS):
        return True
    # An AI message is plain when its one request list is empty (a key given twice counts
    # as "decode it": the last one would win).
    return (
        payload.endswith('"type":"AI"}')
        and payload.count('"toolExecutionRequests"') == 1
        and '"toolExecutionRequests":[]' in payload
    )
