"""The OpenAI Agents SDK's ``Session`` over the ledger: every item is an event, nothing is lost.

``LedgerSession`` writes the same events as the memories - one ``message_added`` per item, a
``message_retracted`` for ``pop_item``, a ``memory_cleared`` for ``clear_session`` - so time
travel, diff, verify and the ``chatledger`` command work on sessions, and a LangChain4j service
reading the same ledger sees sensible messages. Each item is stored as the closest chatledger
message (a user or assistant message, a function call as an AI tool request whose id is the
``call_id``, its output as a tool result) and carries the exact item in its attributes, so
``get_items`` returns every item exactly as it was added (ids, reasoning items, every field).
System and developer items, reasoning items and every other type are custom messages: a system
message would be subject to LangChain4j's "one system message" rule, which is a window rule,
not a history rule.

The session's own list is the raw history (nothing is evicted), read by index: each call costs
what it returns, not the history's length (see :mod:`projections.adapters.item_list`). What the
model sees is chosen by :func:`window_callback`, a ``session_input_callback`` for ``RunConfig``:
LangChain4j's window rules plus a provider-valid view, computed over the items, so the model
sees a valid window while the log keeps everything.

``session.window_callback(policy)`` does the same and also records, per model call, a
``context_sent`` event naming exactly what the model was sent (:meth:`LedgerSession.sent`
replays it).

The SDK's ``OpenAIResponsesCompactionSession`` works over a ``LedgerSession`` through the
hooks it looks for: ``_get_compaction_snapshot`` (after a turn: the newest items, and a
``replace_suffix`` that checks they are still the newest and, in the same append, retracts them
and adds the compacted output, or returns False and writes nothing) and
``_atomic_replace_items`` (a manual compaction: a clear and the adds in one append). The
history keeps every item.

Requires the ``openai-agents`` extra; from your chatledger clone:
``pip install -e '.[openai-agents]'``.
"""

from __future__ import annotations

import asyncio
import json
import operator
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from itertools import chain
from typing import TYPE_CHECKING, Any, NamedTuple, SupportsIndex, TypeVar, cast

try:
    from agents import TResponseInputItem
    from agents.memory import SessionABC
    from agents.memory.session_settings import (
        SessionSettings,
        coerce_session_settings,
        resolve_session_limit,
    )
except ImportError as e:
    msg = (
        f"projections.adapters.openai_agents needs the [openai-agents] extra ({e}); from your "
        "chatledger clone: pip install -e '.[openai-agents]'"
    )
    raise ModuleNotFoundError(msg, name=e.name) from e
if TYPE_CHECKING:
    from agents.memory.session import _CompactionSnapshot

from eventlog.aio import off_loop
from eventlog.errors import ConcurrencyError
from eventlog.formats.lc4j_json import message_from_obj
from eventlog.models import ContextSent
from eventlog.store import EventStore
from eventlog.validation import shown
from projections.adapters.item_list import CHUNK, UNBOUNDED, ItemList, Ref, describe
from projections.adapters.item_list_runs import Run
from projections.adapters.selection import (
    ITEM_KEY,
    Item,
    choose,
    item_of,
    message_of,
    units,
)
from projections.logged_window import RETRY_FOR
from projections.memories import MessageWindowChatMemory
from projections.window import TokenWindowPolicy, WindowPolicy

__all__ = ["ITEM_KEY", "LedgerSession", "item_of", "message_of", "window_callback"]

_T = TypeVar("_T")


class _Served(NamedTuple):
    """What ``get_items()`` last returned: the items in steps, their refs, the runs of the list
    they were read from (None: ``get_items()`` was not called on this object) and the limit
    it was asked for."""

    items: list[tuple[Item, ...]]
    refs: list[tuple[Ref, ...]]
    runs: list[Run] | None
    wanted: int | None


# Per task, what each session object's get_items() last returned there (see
# LedgerSession._served). One variable for every object, its map weak in the objects: a
# variable per object left an entry - holding that read's items - in every long-lived context
# (a worker task serving conversation after conversation) for each object it ever used.
_SERVED_HERE: ContextVar[weakref.WeakKeyDictionary[LedgerSession, _Served] | None] = ContextVar(
    "chatledger.openai_agents.served", default=None
)


class LedgerSession(SessionABC):
    """An OpenAI Agents SDK session whose items are events of a chatledger memory.

    Each call costs what it returns, whatever the history's length (see
    :mod:`projections.adapters.item_list`): a new object per request is cheap.

    Args:
        session_id: The session id; it is the memory id (``chatledger history <id>``).
        store: The ledger (SQLite, PostgreSQL or in-memory).
        session_settings: The SDK's settings (``limit`` for ``get_items``).
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        *,
        store: EventStore,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self.store = store
        self.items = ItemList(store, session_id)
        self._memory: MessageWindowChatMemory | None = None
        self._closed = False
        # What get_items() last returned: window_callback() names the history items it
        # sends by their refs, and records the list they were read from. Per task first: two
        # runs sharing this object each record what *their* get_items() returned (with one
        # slot, a run recorded another's read - its limit, its refs - and the audit said the
        # call left out items it sent); the slot serves a callback run in another task.
        self._served = _Served([], [], None, None)

    @property
    def memory(self) -> MessageWindowChatMemory:
        """The session as a chatledger memory, for its history and time travel (``history()``,
        ``as_of``); its first use reads the whole list."""
        if self._memory is None:
            self._memory = MessageWindowChatMemory(
                self.session_id, max_messages=UNBOUNDED, store=self.store
            )
        return self._memory

    def close(self) -> None:
        """Refuse further calls on this object (the store stays open: it may be shared)."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            msg = f"{type(self).__name__} is closed: open a new session object"
            raise RuntimeError(msg)

    async def get_items(
        self, limit: int | None = None, *, wrapper: Any = None
    ) -> list[TResponseInputItem]:
        """The items in order; with ``limit`` (or the settings' limit) the newest ``limit``."""
        self._check_open()
        wanted = _limit(resolve_session_limit(limit, self.session_settings))
        if wanted is not None and wanted < 0:  # SQLiteSession: a negative limit means no limit
            wanted = None
        return await self._get(wanted)

    async def _get(self, wanted: int | None) -> list[TResponseInputItem]:
        if wanted is not None and wanted <= CHUNK:
            items, served = await off_loop(self.store, self._items, wanted)
            self._remember(served)  # here, in the caller's task: the worker has no context
            return items
        # A long list in steps on the worker, the event loop running between them. The steps
        # stay tuples until the end: the collector untracks a tuple of untracked items (plain
        # JSON objects) the first time it sees it, so a full collection while the read runs
        # does not walk every item read so far, as it walks every item of a list.
        refs: list[Ref] = []
        runs: list[Run] = []
        steps = self.items.chunks(wanted, _item_of_stored, refs_out=refs, runs_out=runs)
        parts: list[tuple[Item, ...]] = []
        ref_parts: list[tuple[Ref, ...]] = []
        while (step := await off_loop(self.store, _step, steps, refs)) is not None:
            parts.append(step[0])
            ref_parts.append(step[1])
        self._remember(_Served(parts, ref_parts, runs, wanted))  # tuples: the caller may edit
        return await off_loop(self.store, _joined, parts)

    def _items(self, wanted: int) -> tuple[list[TResponseInputItem], _Served]:
        runs: list[Run] = []
        stored, refs = self.items.newest_refs(wanted, runs_out=runs)
        items = _items_of_stored(stored)
        return items, _Served([tuple(cast("list[Item]", items))], [tuple(refs)], runs, wanted)

    def _remember(self, served: _Served) -> None:
        self._served = served
        here = _SERVED_HERE.get()
        # Copied, not changed in place: a task started from this one inherits the map and
        # must keep what it saw when it started (contexts are copied, the map would be shared).
        mine: weakref.WeakKeyDictionary[LedgerSession, _Served] = (
            weakref.WeakKeyDictionary() if here is None else here.copy()
        )
        mine[self] = served
        _SERVED_HERE.set(mine)

    def _read_for(self, history: list[Item]) -> _Served:
        """The get_items() read ``history`` came from: this task's, else the object's last
        one; the first of them holding as many items as ``history`` (a task that read a
        turn ago and leaves this turn's read to a task it started holds a stale one)."""
        here = _SERVED_HERE.get()
        mine = None if here is None else here.get(self)
        candidates = [self._served] if mine is None else [mine, self._served]
        for served in candidates:
            if served.runs is not None and sum(map(len, served.items)) == len(history):
                return served
        return candidates[0]

    async def add_items(self, items: list[TResponseInputItem], *, wrapper: Any = None) -> None:
        """Append the items as one atomic write (a bad item: nothing is written)."""
        self._check_open()
        if not items:
            return
        messages = _messages(items, "add_items")  # every item checked before writing
        await _outcome(off_loop(self.store, self.items.add, messages))

    async def pop_item(
        self, *, wrapper: Any = None, check: Callable[[Item], object] | None = None
    ) -> TResponseInputItem | None:
        """Take back the newest item: a ``message_retracted`` event; the history keeps it.

        Args:
            wrapper: The SDK's run context (accepted; not needed here).
            check: Called with the item before anything is written; if it raises, nothing is
                written (e.g. authenticate an encrypted item before removing it).
        """
        self._check_open()
        seen = None if check is None else (lambda obj: check(_item_of_stored(obj)))
        obj = await _outcome(off_loop(self.store, self.items.pop, seen))
        return None if obj is None else cast("TResponseInputItem", _item_of_stored(obj))

    async def clear_session(self, *, wrapper: Any = None) -> None:
        """Empty the session: a ``memory_cleared`` event; the history keeps every item."""
        self._check_open()
        await _outcome(off_loop(self.store, self.items.clear))

    # ------------------------------------------- hooks of OpenAIResponsesCompactionSession

    def _stores_items_as_given(self) -> bool:
        """True unless a subclass changes how items are read or written: the compaction
        hooks write through :class:`ItemList` directly, so such a subclass must supply its own
        (as the SDK's SQLiteSession and RedisSession require of theirs)."""
        cls = type(self)
        return all(
            getattr(cls, name) is getattr(LedgerSession, name)
            for name in ("get_items", "add_items", "pop_item", "clear_session")
        )

    async def _get_compaction_snapshot(
        self, limit: int, *, prune_prefix: Callable[[Item], bool] | None = None
    ) -> _CompactionSnapshot | None:
        """The SDK's (0.24+) compaction snapshot: the newest ``limit`` items, whether they are
        the whole list, and ``replace_suffix(start, output)``, which replaces the items from
        ``start`` on by ``output`` only if they are still the newest - checked and written in
        one append whose expected head is the one checked: a ``message_retracted`` per item
        replaced, a ``message_added`` per output item (and, with ``prune_prefix``, a
        retraction per expired older item). It returns False and writes nothing when another
        writer added, popped or cleared since the read. The history keeps every item.

        None (the SDK then falls back to its own checks) for a subclass that changes how items
        are read or written.
        """
        from agents.memory.session import (  # the SDK's private type (0.24+): imported late
            _CompactionSnapshot,
        )

        self._check_open()
        if not self._stores_items_as_given():
            return None
        stored, refs, whole = await off_loop(self.store, self.items.newest_snapshot, limit)
        items = _items_of_stored(stored)
        prune = None if prune_prefix is None else (lambda obj: prune_prefix(_item_of_stored(obj)))

        async def replace_suffix(start: int, output: list[TResponseInputItem]) -> bool:
            self._check_open()
            messages = _messages(output, "replace_suffix")  # checked before writing
            replace = self.items.replace_newest
            return await _outcome(off_loop(self.store, replace, refs[start:], messages, prune))

        return _CompactionSnapshot(items, whole, replace_suffix)

    async def _atomic_replace_items(self, items: list[TResponseInputItem]) -> bool:
        """The SDK's (0.24+) whole-history replacement for a manual ``run_compaction()``: a
        ``memory_cleared`` and the items' ``message_added`` events in one append, so the
        session is never seen empty in between and a failed write changes nothing. False for
        a subclass that changes how items are read or written (the SDK then clears and adds)."""
        self._check_open()
        if not self._stores_items_as_given():
            return False
        messages = _messages(items, "_atomic_replace_items")  # checked before writing
        await _outcome(off_loop(self.store, self.items.replace_all, messages))
        return True

    def window_callback(
        self, policy: WindowPolicy, *, valid_for: str | None = "openai"
    ) -> Callable[[list[Item], list[Item]], Awaitable[list[Item]]]:
        """:func:`window_callback` that also records, per model call, a ``context_sent`` event
        naming exactly what was sent: the history items by the seqs of their events (as
        :meth:`get_items` returned them), anything else - the new input, an item the SDK
        changed - kept in the event as sent; with the policy, the profile and, for a token
        policy, the token count. One append per call. :meth:`sent` gives it back.

        Args:
            policy: E.g. ``MessageWindowPolicy(20)`` or ``TokenWindowPolicy(4000, estimator)``.
            valid_for: A provider profile (see :mod:`projections.validity`), or None.
        """
        select = window_callback(policy, valid_for=valid_for, memory_id=self.session_id)

        async def record(history: list[Item], new_input: list[Item]) -> list[Item]:
            deadline = 0.0
            while True:
                chosen = select(history, new_input)
                served = self._read_for(history)
                entries = await off_loop(self.store, self._sent_entries, chosen, served)
                runs, wanted = served.runs, served.wanted
                event = ContextSent(
                    sent=tuple(entries),
                    policy=describe(policy, self.session_id),
                    profile=valid_for,
                    tokens=_tokens(policy, chosen),
                    adapter="openai_agents",
                    # The history was the newest `wanted` items: the audit re-runs the policy
                    # over those, not over the whole list (it would choose more).
                    history_limit=wanted if runs is not None else None,
                )
                try:
                    # With the list the history was read from, which the audit re-runs the
                    # policy over (not the list as another writer left it meanwhile).
                    await _outcome(
                        off_loop(
                            self.store,
                            self.items.record_sent,
                            event,
                            chosen_from=runs,
                        )
                    )
                except ConcurrencyError:
                    # Another writer changed the list since get_items(): nothing was written;
                    # read it again (as the SDK asked for it) and choose again from it.
                    now = time.monotonic()
                    deadline = deadline or now + RETRY_FOR
                    if runs is None or now > deadline:
                        raise
                    history = cast("list[Item]", await self._get(wanted))
                    continue
                return chosen

        return record

    def _sent_entries(self, chosen: list[Item], served_by: _Served) -> list[dict[str, Any]]:
        """Each chosen item as a ref to the event holding an equal item that get_items()
        served (each served item used once), else the item itself. A ref is checked against
        the item its event stores (one verified read of the refs): a served item the caller
        edited in place since get_items() is kept as sent, not named by the event it no
        longer equals."""
        served, refs = served_by.items, served_by.refs
        by_text: dict[str, list[Ref]] = {}
        for item, ref in zip(chain.from_iterable(served), chain.from_iterable(refs), strict=True):
            by_text.setdefault(_canonical(item), []).append(ref)
        entries: list[dict[str, Any]] = []
        for item in chosen:
            free = by_text.get(_canonical(item))
            if free:
                entries.append({"ref": list(free.pop(0))})
            else:
                entries.append({"new": item})
        at = [i for i, entry in enumerate(entries) if "ref" in entry]
        stored = self.items.objects([tuple(entries[i]["ref"]) for i in at]) if at else []
        if len(stored) != len(at):  # acknowledged damage left out meanwhile: keep them all
            stored = [None] * len(at)
        for i, obj in zip(at, stored, strict=True):
            if obj is None or _canonical(_item_of_stored(obj)) != _canonical(chosen[i]):
                entries[i] = {"new": chosen[i]}
        return entries

    async def sent(self, seq: int) -> list[TResponseInputItem]:
        """The input of the model call recorded at event ``seq`` (by :meth:`window_callback`),
        exactly as it was sent.

        Raises:
            ValueError: Event ``seq`` records no window ("no window recorded").
        """
        entries = await off_loop(self.store, self.items.sent, seq)
        return [
            cast("TResponseInputItem", _item_of_stored(obj) if kind == "ref" else obj)
            for kind, obj in entries
        ]


def _limit(limit: object) -> int | None:
    """``get_items``'s limit as an int (None: no limit), or a TypeError naming it."""
    if limit is None:
        return None
    try:
        if isinstance(limit, bool):
            raise TypeError  # True is not "one item"
        return operator.index(cast("SupportsIndex", limit))  # TypeError: not an int
    except TypeError:
        msg = (
            f"get_items: limit must be an int (the newest N items; negative: all) or None, "
            f"got {limit!r} ({type(limit).__name__})"
        )
        raise TypeError(msg) from None


def _messages(items: object, operation: str) -> list[Any]:
    """The messages storing ``items``, refused whole when ``items`` is not a list of items: a
    single item (a dict) was taken as the list of its keys, and refused naming its first key
    as the bad item; a str as the list of its characters."""
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        msg = (
            f"{operation}: items must be a list of Responses input items (dicts), got "
            f"{type(items).__name__} {shown(items)}; pass [item] for one item; nothing was written"
        )
        raise TypeError(msg)
    return [message_of(item) for item in items]


def _canonical(item: object) -> str:
    return json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _tokens(policy: WindowPolicy, chosen: list[Item]) -> int | None:
    """The token count of what was sent, under a token policy's estimator."""
    if not isinstance(policy, TokenWindowPolicy):
        return None
    grouped = [message for _, message in units(chosen)]
    return int(policy.estimator.estimate_token_count_in_messages(grouped))


def _items_of_stored(stored: list[Any]) -> list[TResponseInputItem]:
    return [cast("TResponseInputItem", _item_of_stored(obj)) for obj in stored]


def _step(
    steps: Iterator[list[Item]], refs: list[Ref]
) -> tuple[tuple[Item, ...], tuple[Ref, ...]] | None:
    """The next step of :meth:`ItemList.chunks` and the refs it added to ``refs`` (emptied)."""
    part = next(steps, None)
    if part is None:
        return None
    step = (tuple(part), tuple(refs))
    refs.clear()
    return step


def _joined(parts: list[tuple[Item, ...]]) -> list[TResponseInputItem]:
    """``parts`` as one list, a part per loop turn: the interpreter can switch threads between
    them (one call copying a million items would hold the GIL, and stall the event loop)."""
    items: list[TResponseInputItem] = []
    for part in parts:
        items.extend(cast("tuple[TResponseInputItem, ...]", part))
    return items


def _item_of_stored(obj: Any) -> Item:
    """The item a stored message object carries, without building the message when it is
    one this adapter wrote (the item sits in its attributes)."""
    if isinstance(obj, dict):
        attributes = obj.get("attributes")
        if isinstance(attributes, dict):
            item = attributes.get(ITEM_KEY)
            if isinstance(item, dict):
                return item
    return item_of(message_from_obj(obj))


async def _outcome(write: Awaitable[_T]) -> _T:
    """Await a write; if the caller is cancelled meanwhile, wait for the write's outcome
    before passing the cancellation on, so nobody retries a write that landed (the SDK's
    own sessions behave the same way)."""
    task = asyncio.ensure_future(write)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = cancelled or not task.done() or task.cancelled()
        except Exception:  # noqa: S110 - the outcome is read from the task below
            pass
    if cancelled:
        raise asyncio.CancelledError
    return task.result()


def window_callback(
    policy: WindowPolicy, *, valid_for: str | None = "openai", memory_id: str = "session"
) -> Callable[[list[Item], list[Item]], list[Item]]:
    """A ``session_input_callback`` for ``RunConfig``: the history plus the new input, cut to
    ``policy``'s LangChain4j window and made valid for ``valid_for``.

    Function calls and their outputs pair by ``call_id``: a call never reaches the model
    without its output, except a call still in progress at the very end. A reasoning item
    stays with the item it preceded (the Responses API refuses one without the other).

    Args:
        policy: E.g. ``MessageWindowPolicy(20)`` or ``TokenWindowPolicy(4000, estimator)``.
        valid_for: A provider profile (see :mod:`projections.validity`), or None.
        memory_id: What a dynamic limit is asked with.

    Raises:
        TypeError: ``policy`` is not a window policy.
    """
    if not isinstance(policy, WindowPolicy):
        msg = (
            f"window_callback: policy must be a window policy, got {type(policy).__name__} "
            f"{policy!r:.60}; pass e.g. MessageWindowPolicy(20) or TokenWindowPolicy(4000, "
            "estimator)"
        )
        raise TypeError(msg)

    def select(history: list[Item], new_input: list[Item]) -> list[Item]:
        items = [*history, *new_input]
        return [items[i] for i in choose(policy, valid_for, memory_id, items).chosen]

    return select
