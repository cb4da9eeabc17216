"""Reading a LangGraph thread from the ledger: the read side of
:class:`~projections.adapters.langgraph.LedgerSaver` (see that module for the design).

:class:`CheckpointReader` keeps the cache of folded threads
(:mod:`projections.adapters.langgraph_events`), caught up with a verified read on every use,
decodes channel values (following append-only deltas) and answers the saver contract's reads:
``get_tuple``, ``list`` and ``checkpoint_seq``.
The saver adds the writes on top of the state kept here.

Requires the ``langgraph`` extra; from your chatledger clone: ``pip install -e '.[langgraph]'``.
"""

from __future__ import annotations

import builtins
import functools
import itertools
import logging
import pickle
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any, cast

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        BaseCheckpointSaver,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        PendingWrite,
        get_checkpoint_id,
        writes_sort_key,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
except ImportError as e:
    msg = (
        f"projections.adapters.langgraph needs the [langgraph] extra ({e}); from your "
        "chatledger clone: pip install -e '.[langgraph]'"
    )
    raise ModuleNotFoundError(msg, name=e.name) from e

from eventlog.ids import memory_key
from eventlog.store import EventStore
from eventlog.validation import shown
from projections.adapters.langgraph_events import (
    TAG,
    Found,
    Shared,
    Thread,
    array_body,
    array_head,
    bytes_of,
    is_thread_memory,
)

__all__ = ["CheckpointReader", "cache_key", "keep_list", "memory_of", "thread_text"]

_log = logging.getLogger("chatledger.langgraph")
_LISTS_KEPT = 8  # threads (the most recently used) that keep their last list put
_RELEASE_SLICE = 256  # messages freed at a time when a remembered list is dropped

# A memory's cache key, remembered: memory_key() encodes the id anew each time (tens of
# microseconds, several times per call).
cache_key = functools.lru_cache(maxsize=1024)(memory_key)


class CheckpointReader(BaseCheckpointSaver[str]):
    """The reads of a LangGraph checkpointer whose checkpoints are events of chatledger
    memories (:class:`~projections.adapters.langgraph.LedgerSaver` adds the writes).

    Args:
        store: The ledger (SQLite, PostgreSQL or in-memory).
        serde: LangGraph's serializer for values (default: ``JsonPlusSerializer``).
        cache_size: Memories whose folded state is kept between calls.
        cache_bytes: About how much of their events (payload characters) the kept states may
            hold; the least recently used are dropped beyond it (the one in use never is).
    """

    def __init__(
        self,
        store: EventStore,
        *,
        serde: SerializerProtocol | None = None,
        cache_size: int = 256,
        cache_bytes: int = 128 * 2**20,
    ) -> None:
        super().__init__(serde=serde)
        if not isinstance(store, EventStore):
            msg = (
                f"LedgerSaver needs a chatledger EventStore (InMemoryEventStore, "
                f"SQLiteEventStore, PostgresEventStore), not {type(store).__name__}"
            )
            raise TypeError(msg)
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
            msg = f"LedgerSaver: cache_size must be an int >= 1, got {shown(cache_size)}"
            raise ValueError(msg)
        if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or cache_bytes < 0:
            msg = f"LedgerSaver: cache_bytes must be an int >= 0, got {shown(cache_bytes)}"
            raise ValueError(msg)
        self.store = store
        self._cache: OrderedDict[str, Thread] = OrderedDict()
        self._cache_size = cache_size
        self._cache_bytes = cache_bytes
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ reading the ledger

    def _thread(self, memory_id: tuple[str, str, str]) -> Thread:
        """The memory's folded state, caught up with a verified read."""
        key = cache_key(memory_id)
        state = self._cache.get(key)
        if state is not None:
            self._cache.move_to_end(key)
            # From the cached head on, that head included: a head behind it (one memory put
            # back from a backup, a failover that lost commits) or another record at its seq
            # means the history under the cache changed. Before, the cache kept serving what
            # the store no longer holds, and every put failed for RETRY_FOR seconds, spinning,
            # then raised "another writer appended first", for as long as the saver lived.
            fresh = self.store.read_verified(memory_id, gt=state.seq - 1) if state.seq else []
            if state.seq and (
                not fresh or (fresh[0].seq, fresh[0].hash) != (state.seq, state.hash)
            ):
                _log.warning(
                    "LangGraph thread %r: history changed under this saver's cache (it held "
                    "seq %d, the store %s); reading it again from the store - run verify() if "
                    "nothing restored or failed over the database",
                    memory_id,
                    state.seq,
                    f"ends at seq {fresh[-1].seq}" if fresh else "holds no such record",
                )
                state = None  # fold it again
            else:
                for record in fresh[1:] if state.seq else self.store.read_verified(memory_id):
                    state.apply(record)
        if state is None:
            state = Thread()
            for record in self.store.read_verified(memory_id):
                state.apply(record)
            self._cache[key] = state
        # The message lists kept for the append-only check hold objects the collector walks
        # on every full collection: only the threads in use lately keep theirs.
        for older in itertools.islice(reversed(self._cache.values()), _LISTS_KEPT, None):
            if not older.lists:
                break
            for _, kept in older.lists.values():
                _release(kept)
            older.lists.clear()
        # Bounded by count and by size; the newest entry (this one) always stays.
        total = sum(t.size for t in self._cache.values())
        while len(self._cache) > 1 and (
            len(self._cache) > self._cache_size or total > self._cache_bytes
        ):
            _, dropped = self._cache.popitem(last=False)
            total -= dropped.size
        return state

    def _memories(self, thread_id: str | None = None) -> builtins.list[tuple[str, str, str]]:
        """Every LangGraph memory of the store, or of one thread."""
        found = []
        for info in self.store.streams():
            memory_id = info.memory_id
            if is_thread_memory(memory_id) and thread_id in (None, memory_id[0]):
                found.append(memory_id)
        return found

    # ------------------------------------------------------------------ values

    def _value(self, state: Thread, seq: int, channel: str, shared: Shared | None = None) -> Any:
        """The value of ``channel`` stored at ``seq`` (following append-only deltas).

        ``shared`` is one :meth:`list` call's: a list that is a prefix of one decoded earlier
        in the call (an older checkpoint of the same conversation) is a slice of it, holding
        the same message objects, as the lists of successive steps do in a running graph."""
        entry = state.bodies[seq]["values"][channel]
        if "base" not in entry:
            return self.serde.loads_typed(bytes_of(entry["value"]))
        known = None if shared is None else shared.get((id(state), channel))
        if known is not None and seq in known[1]:
            return known[0][: known[1][seq]]
        items = self._items(state, seq, channel)
        if items is not None:
            # One msgpack array of every part's items: one decode, as fast as reading the
            # whole list stored in one piece.
            count, body = items
            value = self.serde.loads_typed(("msgpack", array_head(count) + body))
            if shared is not None and isinstance(value, list):
                ends = state.spans[channel][1]
                shared[(id(state), channel)] = (
                    list(value),  # a copy: the caller may change the list it was given
                    {s: n for s, (n, _) in ends.items() if n <= count},
                )
            return value
        chain = []
        while "base" in entry:
            chain.append(entry["append"])
            entry = state.bodies[entry["base"]]["values"][channel]
        value = list(self.serde.loads_typed(bytes_of(entry["value"])))
        for blob in reversed(chain):
            value.extend(self.serde.loads_typed(bytes_of(blob)))
        return value

    def _items(self, state: Thread, seq: int, channel: str) -> tuple[int, bytes] | None:
        """``(count, the msgpack items)`` of the list at ``seq``, or None when a part is not a
        msgpack array (another serde). The newest list read is kept with where each of its
        prefixes ends, so the next read (a turn later, or an older checkpoint) decodes only
        what is new."""
        memo = state.spans.get(channel)
        parts: list[tuple[int, bytes, int]] = []  # (seq, items, count), newest first
        at: int | None = seq
        start: tuple[int, bytes, dict[int, tuple[int, int]]] | None = None
        while at is not None:
            if memo is not None and at in memo[1]:
                count, end = memo[1][at]
                if not parts and end == len(memo[0]):
                    return count, memo[0]  # the newest list read, read again: no copy
                start = (count, memo[0][:end], {s: v for s, v in memo[1].items() if v[1] <= end})
                break
            entry = state.bodies[at]["values"][channel]
            kind, data = bytes_of(entry.get("append") or entry["value"])
            array = array_body(data) if kind == "msgpack" else None
            if array is None:
                return None
            parts.append((at, array[1], array[0]))
            at = entry.get("base")
        count, body, ends = start if start is not None else (0, b"", {})
        pieces = [body]
        size = len(body)
        for at, data, n in reversed(parts):
            count += n
            size += len(data)
            pieces.append(data)
            ends[at] = (count, size)
        joined = b"".join(pieces)
        if memo is None or seq not in memo[1]:
            state.spans[channel] = (joined, ends)
        return count, joined

    def _tuple(
        self,
        memory_id: tuple[str, str, str],
        state: Thread,
        cid: str,
        shared: Shared | None = None,
        *,
        remember: bool = False,
    ) -> CheckpointTuple:
        thread_id, _, ns = memory_id
        seq = state.checkpoints[cid]
        body = state.bodies[seq]
        checkpoint = cast("Checkpoint", self.serde.loads_typed(bytes_of(body["checkpoint"])))
        holders = {c: seq for c in body["values"]} | dict(body["refs"])
        values = {c: self._value(state, at, c, shared) for c, at in holders.items()}
        if remember:
            # The graph goes on from these lists; the next put compares its list with a copy
            # of the saver's own (a model comparison per message): a message the graph edits
            # in place is then seen as changed, not as the stored one.
            for channel, value in values.items():
                if isinstance(value, list) and (own := _copy(value)) is not None:
                    keep_list(state, channel, holders[channel], own)
        checkpoint["channel_values"] = values
        metadata = cast("CheckpointMetadata", self.serde.loads_typed(bytes_of(body["metadata"])))
        indexed = sorted(
            (writes_sort_key(path, task, idx), task, channel, blob)
            for (task, idx), (_, channel, blob, path) in state.writes.get(cid, {}).items()
        )
        pending: list[PendingWrite] = [
            (task, channel, self.serde.loads_typed(bytes_of(blob)))
            for _, task, channel, blob in indexed
        ]
        config: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}
        }
        parent = body.get("parent")
        parent_config: RunnableConfig | None = (
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": parent}}
            if parent
            else None
        )
        return CheckpointTuple(config, checkpoint, metadata, parent_config, pending)

    # ------------------------------------------------------------------ the saver contract

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (the newest of its thread and namespace when it
        names none), with its pending writes in ``writes_sort_key`` order; None if absent.

        Raises:
            ChainIntegrityError: The thread's events do not verify.
        """
        memory_id = memory_of(config, "get_tuple")
        with self._lock:
            state = self._thread(memory_id)
            cid = get_checkpoint_id(config)
            if cid is None:
                live = state.live()
                if not live:
                    return None
                cid = live[0]
            if cid not in state.checkpoints:
                return None
            return self._tuple(memory_id, state, cid, remember=True)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of ``config``'s thread (and namespace, when it names one;
        every thread when ``config`` is None), whose metadata has every item of ``filter``,
        older than ``before``'s checkpoint, at most ``limit``. Chosen when called; each is
        read as it is reached, so a consumer holds one checkpoint's values at a time."""
        shared: Shared = {}
        for found in self._matches(config, filter=filter, before=before, limit=limit):
            item = self._read(found, shared)
            if item is not None:
                yield item

    def _matches(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> builtins.list[Found]:
        """``(memory id, its state, checkpoint id, seq)`` of what :meth:`list` returns."""
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            msg = f"list: limit must be None or an int >= 0, got {shown(limit)}"
            raise ValueError(msg)
        if filter is not None and not isinstance(filter, Mapping):
            msg = f"list: filter must be None or a dict of metadata items, got {shown(filter)}"
            raise TypeError(msg)
        configurable = configurable_of(config, "list") if config is not None else {}
        thread_id = configurable.get("thread_id")
        checkpoint_id = configurable.get("checkpoint_id")
        before_id = None
        if before is not None:
            configurable_of(before, "list's before")
            before_id = get_checkpoint_id(before)
        with self._lock:
            if thread_id is not None and "checkpoint_ns" in configurable:
                memories = [memory_of(config, "list")]  # type: ignore[arg-type]
            else:
                memories = self._memories(
                    None if thread_id is None else thread_text(thread_id, "list")
                )
            candidates = []
            for memory_id in memories:
                state = self._thread(memory_id)
                for cid, seq in state.checkpoints.items():
                    if checkpoint_id is not None and cid != checkpoint_id:
                        continue
                    if before_id is not None and cid >= before_id:
                        continue
                    candidates.append((memory_id, state, cid, seq))
            candidates.sort(key=lambda c: c[2], reverse=True)
            found: builtins.list[Found] = []
            for memory_id, state, cid, seq in candidates:
                if limit is not None and len(found) >= limit:
                    break
                if filter:
                    metadata = self.serde.loads_typed(bytes_of(state.bodies[seq]["metadata"]))
                    if any(metadata.get(k) != v for k, v in filter.items()):
                        continue
                found.append((memory_id, state, cid, seq))
            return found

    def _read(self, found: Found, shared: Shared) -> CheckpointTuple | None:
        """One checkpoint :meth:`_matches` chose; None when an erasure took it meanwhile."""
        memory_id, state, cid, seq = found
        with self._lock:
            if state.checkpoints.get(cid) != seq:
                return None
            return self._tuple(memory_id, state, cid, shared)

    def checkpoint_seq(self, config: RunnableConfig) -> int | None:
        """The seq of the event that stores the checkpoint ``config`` names (what
        ``chatledger prove`` and ``EventStore.prove`` take), or None when it has none."""
        memory_id = memory_of(config, "checkpoint_seq")
        cid = get_checkpoint_id(config)
        with self._lock:
            return None if cid is None else self._thread(memory_id).checkpoints.get(cid)


def _copy(value: builtins.list[Any]) -> builtins.list[Any] | None:
    """A deep copy of ``value`` (None when it cannot be copied: the next put then decodes the
    stored list). A pickle round trip, three to four times as fast as ``copy.deepcopy`` on
    LangChain messages; the bytes are this process's own, made here."""
    try:
        return cast("builtins.list[Any]", pickle.loads(pickle.dumps(value, protocol=5)))  # noqa: S301
    except Exception:  # anything pickle refuses: simply not kept
        return None


def keep_list(state: Thread, channel: str, seq: int, value: builtins.list[Any]) -> None:
    """Remember ``value`` (a list of the saver's own) as ``channel``'s list at ``seq``."""
    old = state.lists.get(channel)
    state.lists[channel] = (seq, value)
    if old is not None and old[1] is not value:
        _release(old[1])


def _release(items: builtins.list[Any]) -> None:
    """Empty a list of the saver's own a slice at a time. When it holds the last references
    to a long conversation's messages, freeing them all is one C call that keeps the GIL
    for milliseconds (tens of them at 10,000 turns), an event loop's thread included; between
    slices another thread can take it."""
    while items:
        del items[-_RELEASE_SLICE:]


def memory_of(config: RunnableConfig, operation: str) -> tuple[str, str, str]:
    """The memory id of the thread and namespace ``config`` names, for ``operation``."""
    configurable = configurable_of(config, operation)
    thread_id = configurable.get("thread_id")
    if thread_id is None:
        msg = (
            f"{operation}: the config has no configurable.thread_id; pass "
            "{'configurable': {'thread_id': ...}}"
        )
        raise ValueError(msg)
    ns = configurable.get("checkpoint_ns") or ""
    return (thread_text(thread_id, operation), TAG, thread_text(ns, operation))


def configurable_of(config: object, operation: str) -> Mapping[str, Any]:
    """``config["configurable"]``, refused when the config is not shaped as LangGraph's (a
    dict with a ``configurable`` dict whose ``checkpoint_id`` is a str or None)."""
    if not isinstance(config, Mapping) or not isinstance(
        configurable := config.get("configurable") or {}, Mapping
    ):
        msg = (
            f"{operation}: the config must be a dict with a configurable dict, got "
            f"{shown(config)}; pass {{'configurable': {{'thread_id': ...}}}}"
        )
        raise TypeError(msg)
    cid = configurable.get("checkpoint_id")
    if cid is not None and not isinstance(cid, str):
        msg = (
            f"{operation}: configurable.checkpoint_id must be a str (LangGraph's checkpoint "
            f"ids are) or None, got {shown(cid)}"
        )
        raise TypeError(msg)
    return configurable


def thread_text(value: object, operation: str) -> str:
    """A thread id (or namespace) as text, as the memory id holds it: refused when it is None
    or has no text (an int of more digits than Python converts)."""
    if value is None:
        msg = f"{operation}: a thread id must not be None; pass the thread's id (a str)"
        raise ValueError(msg)
    try:
        return str(value)
    except ValueError as e:
        msg = f"{operation}: a thread id of type {type(value).__name__} has no text ({e})"
        raise ValueError(msg) from None
