"""A LangGraph checkpointer on the ledger: ``LedgerSaver``, a ``BaseCheckpointSaver``.

Each thread (and checkpoint namespace) is one chatledger memory, id
``(thread_id, "langgraph", checkpoint_ns)``; checkpoints, pending writes and channel values are
its events, so ``chatledger verify`` and inclusion proofs cover them, a read is refused when the
chain does not vouch for it, and :meth:`LedgerSaver.delete_thread` is an erasure with a receipt.
Every event is a ``message_added`` of a :class:`~eventlog.messages.CustomMessage` whose
``langgraph`` attribute says what it is (``op``): a ``checkpoint``, the ``writes`` of a task,
checkpoints ``removed`` (``prune``, ``delete_for_runs``: hidden from LangGraph, kept in the
history), or the origin of a ``copied`` thread. Values go through the saver's ``serde``
(LangGraph's serializer) and are stored as ``[type, base64]``. A custom message rather than a
new event kind: the ledger's format stays as it is, and every reader of it (``chatledger``, the
inspector, a LangChain4j service) already handles one. The format and the fold of these events
are :mod:`projections.adapters.langgraph_events`; the saver's reads (the cache of folded
threads, the decoding of values) are :mod:`projections.adapters.langgraph_reads`.

A checkpoint stores only the channels that changed (``new_versions``); the others refer to the
event that holds their value. A list channel that grew by appending, like ``messages`` with the
``add_messages`` reducer, stores only the new items and refers to its previous value, so a
thread's storage grows with the conversation, not with its square. "Grew by appending" is
decided by comparing the list with the last one put or read for the thread (the same objects,
or equal ones): a message changed in place afterwards, not through a state update, is taken
for the one already stored - LangGraph's state is updated by returning updates, not by
mutating it.

Requires the ``langgraph`` extra; from your chatledger clone: ``pip install -e '.[langgraph]'``.
"""

from __future__ import annotations

import builtins
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        get_checkpoint_id,
        get_serializable_checkpoint_metadata,
    )
except ImportError as e:
    msg = (
        f"projections.adapters.langgraph needs the [langgraph] extra ({e}); from your "
        "chatledger clone: pip install -e '.[langgraph]'"
    )
    raise ModuleNotFoundError(msg, name=e.name) from e

from eventlog.aio import off_loop
from eventlog.errors import ConcurrencyError
from eventlog.hashing import GENESIS
from eventlog.messages import CustomMessage
from eventlog.models import ErasureReceipt, Record
from eventlog.serialization import added_record
from eventlog.validation import key_problem, shown
from projections.adapters.langgraph_events import (
    KEY,
    TAG,
    Bodies,
    Body,
    Shared,
    Thread,
    blob_of,
    bytes_of,
    extends,
    holder,
    holder_any,
    moved_body,
    removed_body,
    thread_memory_id,
)
from projections.adapters.langgraph_reads import (
    CheckpointReader,
    cache_key,
    keep_list,
    memory_of,
    thread_text,
)
from projections.logged_window import RETRY_FOR

__all__ = ["KEY", "TAG", "LedgerSaver", "thread_memory_id"]


class LedgerSaver(CheckpointReader):
    """A LangGraph checkpointer whose checkpoints are events of chatledger memories.

    Thread-safe; the async methods run the store's calls on its worker threads, so they never
    block the event loop. A small cache of folded threads (``cache_size`` memories) catches up
    from the store on every read, with a verified read (:meth:`EventStore.read_verified`), so
    other writers (another process, another saver) are seen and nothing is served that the
    chain does not vouch for. A write builds on the cached thread and appends with its head's
    seq and hash expected: when another writer moved the head, the store refuses it and the
    saver catches up and builds it again.

    Args:
        store: The ledger (SQLite, PostgreSQL or in-memory).
        serde: LangGraph's serializer for values (default: ``JsonPlusSerializer``).
        cache_size: Memories whose folded state is kept between calls.
        cache_bytes: About how much of their events (payload characters) the kept states may
            hold; the least recently used are dropped beyond it (the one in use never is).
    """

    # ------------------------------------------------------------------ writing the ledger

    def _append(
        self, memory_id: tuple[str, str, str], build: Callable[[Thread], Bodies]
    ) -> builtins.list[Record]:
        """Append what ``build(state)`` returns after the head it was built on (seq and hash);
        when another writer moved the head meanwhile, catch up and build again, for up to
        :data:`RETRY_FOR` seconds (as the memories do)."""
        deadline: float | None = None
        # The first try builds on the cached state without reading the store: the append's
        # expected seq and hash refuse it if anyone else wrote meanwhile (then it catches up
        # and builds again). A read per write saved: a write's time stays flat, and a write
        # in LangGraph's background thread waits less for the graph's thread to hand back
        # the GIL (each query releases it).
        key = cache_key(memory_id)
        state = self._cache.get(key)
        if state is not None:
            self._cache.move_to_end(key)
        while True:
            if state is None:
                state = self._thread(memory_id)
            bodies = build(state)
            if not bodies:
                return []
            items = [added_record(CustomMessage({KEY: body})) for body in bodies]
            try:
                records = self.store.append(
                    memory_id, items, expected_seq=state.seq, expected_hash=state.hash or GENESIS
                )
            except ConcurrencyError as e:
                now = time.monotonic()
                deadline = deadline or now + RETRY_FOR
                if now > deadline:
                    raise
                if e.actual is not None and self._thread(memory_id).seq < e.actual:
                    time.sleep(0.001)  # the new head is not visible to this reader yet
                state = None
                continue
            for record, body in zip(records, bodies, strict=True):
                state.appended(record, body)
            return records

    # ------------------------------------------------------------------ the saver contract

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint: the channels in ``new_versions`` with their values (only the
        new items of a list that grew by appending), the others as references."""
        memory_id = memory_of(config, "put")
        _check_checkpoint(memory_id, checkpoint, metadata, new_versions)
        parent = get_checkpoint_id(config)
        bare = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        head = blob_of(self._dumps(bare, f"put on {memory_id!r}: the checkpoint"))
        meta = blob_of(
            self._dumps(
                get_serializable_checkpoint_metadata(config, metadata),
                f"put on {memory_id!r}: the metadata",
            )
        )
        channel_values = checkpoint["channel_values"]
        versions = checkpoint["channel_versions"]
        lists: dict[str, builtins.list[Any]] = {}

        def build(state: Thread) -> Bodies:
            parent_seq = state.checkpoints.get(parent or "")
            parent_body = None if parent_seq is None else state.bodies[parent_seq]
            values: dict[str, Any] = {}
            refs: dict[str, int] = {}
            for channel, version in versions.items():
                wanted = str(version)
                if channel in new_versions:
                    if channel in channel_values:
                        base = holder_any(parent_seq, parent_body, channel)
                        values[channel] = self._entry(
                            state,
                            base,
                            channel,
                            channel_values[channel],
                            version=wanted,
                            lists=lists,
                        )
                    continue
                at = holder(parent_seq, parent_body, channel, wanted, state)
                if at is not None:
                    refs[channel] = at
            return [
                {
                    "op": "checkpoint",
                    "id": checkpoint["id"],
                    "parent": parent,
                    "checkpoint": head,
                    "metadata": meta,
                    "values": values,
                    "refs": refs,
                }
            ]

        with self._lock:
            (record,) = self._append(memory_id, build)
            state = self._cache.get(cache_key(memory_id)) or self._thread(memory_id)
            for channel, value in lists.items():
                keep_list(state, channel, record.seq, value)
        return {
            "configurable": {
                "thread_id": config["configurable"]["thread_id"],
                "checkpoint_ns": memory_id[2],
                "checkpoint_id": checkpoint["id"],
            }
        }

    def _entry(
        self,
        state: Thread,
        base: int | None,
        channel: str,
        value: Any,
        *,
        version: str,
        lists: dict[str, builtins.list[Any]],
    ) -> dict[str, Any]:
        """How a changed channel is stored: the new items after its previous value (held by
        the event at seq ``base``) when it is a list that grew by appending, else the whole
        value."""
        # The list kept for the next put's comparison is decoded from what is stored, never
        # the caller's objects: a message the graph then edits in place must not compare
        # equal to itself and be left out of the next checkpoint as "already stored".
        if isinstance(value, list):
            if base is not None:
                previous = self._previous_list(state, base, channel)
                if previous is not None and extends(value, previous):
                    added = self._dumps(value[len(previous) :], f"put: channel {channel!r}")
                    lists[channel] = [*previous, *self.serde.loads_typed(added)]
                    return {"version": version, "base": base, "append": blob_of(added)}
            whole = self._dumps(value, f"put: channel {channel!r}")
            lists[channel] = list(self.serde.loads_typed(whole))
            return {"version": version, "value": blob_of(whole)}
        return {
            "version": version,
            "value": blob_of(self._dumps(value, f"put: channel {channel!r}")),
        }

    def _dumps(self, value: Any, what: str) -> tuple[str, bytes]:
        """``serde.dumps_typed(value)``; a value it refuses is a TypeError naming ``what``."""
        try:
            return self.serde.dumps_typed(value)
        except (TypeError, ValueError, OverflowError, RecursionError) as e:
            msg = (
                f"{what}: {type(self.serde).__name__} cannot serialize {shown(value)} "
                f"({type(e).__name__}: {e}); store values it can (nothing was written)"
            )
            raise TypeError(msg) from e

    def _previous_list(self, state: Thread, seq: int, channel: str) -> builtins.list[Any] | None:
        cached = state.lists.get(channel)
        if cached is not None and cached[0] == seq:
            return cached[1]
        value = self._value(state, seq, channel)
        if not isinstance(value, list):
            return None
        keep_list(state, channel, seq, value)
        return value

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes for the checkpoint of ``config``. Idempotent per
        ``(task_id, index)``: a regular write stored once stays as it was; a special one
        (error, interrupt, ...) is replaced by the newest."""
        memory_id = memory_of(config, "put_writes")
        cid = get_checkpoint_id(config)
        if cid is None:
            msg = f"put_writes on {memory_id!r}: the config names no checkpoint_id"
            raise ValueError(msg)
        indexed = _indexed(memory_id, writes, task_id, task_path)

        def build(state: Thread) -> Bodies:
            stored = state.writes.get(cid, {})
            fresh = [
                [idx, channel, blob_of(self._dumps(value, f"put_writes: channel {channel!r}"))]
                for idx, channel, value in indexed
                if idx < 0 or (task_id, idx) not in stored
            ]
            if not fresh:
                return []
            return [
                {
                    "op": "writes",
                    "checkpoint": cid,
                    "task": task_id,
                    "path": task_path,
                    "writes": fresh,
                }
            ]

        with self._lock:
            self._append(memory_id, build)

    def delete_thread(self, thread_id: str) -> None:
        """Erase the thread (every namespace): see :meth:`erase_thread`."""
        self.erase_thread(thread_id)

    def erase_thread(
        self, thread_id: str, *, reason: str = "LangGraph delete_thread"
    ) -> builtins.list[ErasureReceipt]:
        """Erase the content of every event of the thread, in every namespace, leaving a
        receipt per memory (:meth:`EventStore.erase_subject`): its checkpoints are gone,
        proofs of everything else still verify, and the thread id can be used again.

        Returns:
            One receipt per namespace that had something to erase.
        """
        thread_id = thread_text(thread_id, "erase_thread")
        with self._lock:
            receipts = self.store.erase_subject((thread_id, TAG), reason=reason)
            for memory_id in self._memories(thread_id):
                self._cache.pop(cache_key(memory_id), None)
            return receipts

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove the checkpoints (and their writes) whose metadata ``run_id`` is one of
        ``run_ids``, in every thread: a ``removed`` event hides them; the history keeps them
        (:meth:`erase_thread` erases content)."""
        given = _many(run_ids, "delete_for_runs", "run_ids")
        try:
            wanted = set(given)
        except TypeError:
            msg = f"delete_for_runs: run ids must be str (or UUID), got {shown(run_ids)}"
            raise TypeError(msg) from None
        if not wanted:
            return
        with self._lock:
            for memory_id in self._memories():

                def build(state: Thread) -> Bodies:
                    doomed = [
                        cid
                        for cid, seq in state.checkpoints.items()
                        if self.serde.loads_typed(bytes_of(state.bodies[seq]["metadata"])).get(
                            "run_id"
                        )
                        in wanted
                    ]
                    return [removed_body(doomed, "delete_for_runs")] if doomed else []

                self._append(memory_id, build)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keep each namespace's newest checkpoint and hide the others (a
        ``removed`` event; the history keeps them). ``delete``: erase the threads
        (:meth:`erase_thread`)."""
        if strategy not in ("keep_latest", "delete"):
            msg = f"prune: unknown strategy {strategy!r}; use 'keep_latest' or 'delete'"
            raise ValueError(msg)
        thread_ids = [thread_text(t, "prune") for t in _many(thread_ids, "prune", "thread_ids")]
        with self._lock:
            for thread_id in thread_ids:
                if strategy == "delete":
                    self.erase_thread(thread_id, reason="LangGraph prune(strategy='delete')")
                    continue
                for memory_id in self._memories(thread_id):

                    def build(state: Thread) -> Bodies:
                        older = state.live()[1:]
                        return [removed_body(older, "prune keep_latest")] if older else []

                    self._append(memory_id, build)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every namespace of a thread to another thread: the target's events start with
        one that names its origin (thread and head seq and hash of the source).

        Each namespace is a memory of its own and the store appends to one memory at a time,
        so a copy of several namespaces cannot be one transaction. It is made as close to
        all-or-none as that allows: everything is read, checked and built before the first
        write - every source namespace through a verified read, every target namespace's key
        and the events it already holds, the events to append - so bad data, a memory id too
        long for the target, a damaged source or target refuse the copy with nothing written.
        Then each namespace is one append (whole or not at all). What can still stop a copy
        part-way is the store failing between two appends (a database error, the store
        closed, the process killed): the namespaces appended before it are copied, the
        others not at all; :meth:`erase_thread` on the target, then ``copy_thread`` again,
        starts it over.

        Raises:
            ValueError: A thread id is None, or a namespace's target memory id is too long for
                the store (nothing written).
            ChainIntegrityError: A source or target namespace does not verify (nothing
                written).
        """
        source = thread_text(source_thread_id, "copy_thread")
        target = thread_text(target_thread_id, "copy_thread")
        with self._lock:
            # Checked and built first: an error here leaves the target as it was.
            planned = []
            for memory_id in self._memories(source):
                origin = self._thread(memory_id)
                kept = sorted(s for s, b in origin.bodies.items() if b["op"] != "copied")
                if not kept:
                    continue
                ns = memory_id[2]
                target_id = thread_memory_id(target, ns)
                problem = key_problem(str(self.store.stream_key(target_id)))
                if problem is not None:
                    msg = (
                        f"copy_thread to thread {shown(target)}: namespace {shown(ns)} would be "
                        f"stored under a memory id that {problem}; nothing was copied"
                    )
                    raise ValueError(msg)
                build = _copy_builder(source, ns, origin, kept)
                build(self._thread(target_id))
                planned.append((target_id, build))
            for target_id, build in planned:
                self._append(target_id, build)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """A version greater than ``current`` whose random tail keeps forks apart."""
        try:
            number = 0 if current is None else int(str(current).split(".")[0])
        except ValueError:
            msg = (
                f"get_next_version: {shown(current)} is not a channel version (an int, or "
                "a str starting with one, as this saver makes)"
            )
            raise ValueError(msg) from None
        return f"{number + 1:032}.{secrets.randbelow(10**16):016}"

    # ------------------------------------------------------------------ async twins

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`get_tuple` without blocking the event loop."""
        return await off_loop(self.store, self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list` without blocking the event loop (each checkpoint read off the loop as
        it is reached)."""
        chosen = await off_loop(
            self.store, self._matches, config, filter=filter, before=before, limit=limit
        )
        shared: Shared = {}
        for found in chosen:
            item = await off_loop(self.store, self._read, found, shared)
            if item is not None:
                yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`put` without blocking the event loop."""
        return await off_loop(self.store, self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`put_writes` without blocking the event loop."""
        await off_loop(self.store, self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread` without blocking the event loop."""
        await off_loop(self.store, self.erase_thread, thread_id)

    async def aerase_thread(
        self, thread_id: str, *, reason: str = "LangGraph delete_thread"
    ) -> builtins.list[ErasureReceipt]:
        """:meth:`erase_thread` without blocking the event loop."""
        return await off_loop(self.store, self.erase_thread, thread_id, reason=reason)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """:meth:`delete_for_runs` without blocking the event loop."""
        await off_loop(self.store, self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`copy_thread` without blocking the event loop."""
        await off_loop(self.store, self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """:meth:`prune` without blocking the event loop."""
        await off_loop(self.store, self.prune, thread_ids, strategy=strategy)


def _copy_builder(
    source: str, ns: str, origin: Thread, kept: builtins.list[int]
) -> Callable[[Thread], Bodies]:
    """What :meth:`LedgerSaver.copy_thread` appends to a target namespace holding ``state``:
    the origin, then the source's events ``kept``, their references moved to the seqs the
    copies take."""

    def build(state: Thread) -> Bodies:
        # Seqs the copies will take: the events refer to each other by seq.
        moved = {seq: state.seq + 2 + i for i, seq in enumerate(kept)}
        first: Body = {
            "op": "copied",
            "from": source,
            "namespace": ns,
            "seq": origin.seq,
            "hash": origin.hash,
        }
        return [first, *(moved_body(origin.bodies[s], moved) for s in kept)]

    return build


def _check_checkpoint(
    memory_id: tuple[str, str, str], checkpoint: Any, metadata: Any, new_versions: Any
) -> None:
    """Refuse, before anything is written, a checkpoint whose id is not a str (ids are
    compared with each other: one int id would make every later read of the thread fail) or
    whose parts are not dicts."""
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("id"), str):
        got = checkpoint.get("id") if isinstance(checkpoint, dict) else checkpoint
        msg = (
            f"put on {memory_id!r}: the checkpoint must be a dict whose id is a str, got "
            f"{shown(got)}"
        )
        raise TypeError(msg)
    for name, part in (
        ("channel_values", checkpoint.get("channel_values")),
        ("channel_versions", checkpoint.get("channel_versions")),
        ("metadata", metadata),
        ("new_versions", new_versions),
    ):
        if not isinstance(part, dict):
            msg = f"put on {memory_id!r}: {name} must be a dict, got {shown(part)}"
            raise TypeError(msg)


def _indexed(
    memory_id: tuple[str, str, str], writes: Any, task_id: Any, task_path: Any
) -> builtins.list[tuple[int, str, Any]]:
    """``(index, channel, value)`` of a task's writes; refused, before anything is written,
    when the task id, path or a channel is not a str: writes are sorted by them, and one of
    another type would make every later read of the checkpoint fail."""
    if not isinstance(task_id, str) or not isinstance(task_path, str):
        msg = (
            f"put_writes on {memory_id!r}: task_id and task_path must be str, got "
            f"{shown(task_id)} and {shown(task_path)}"
        )
        raise TypeError(msg)
    if isinstance(writes, str | bytes) or not isinstance(writes, Sequence):
        msg = f"put_writes on {memory_id!r}: writes must be a sequence of (channel, value) pairs"
        raise TypeError(msg)
    indexed = []
    for i, write in enumerate(writes):
        if not isinstance(write, tuple | list) or len(write) != 2 or not isinstance(write[0], str):
            msg = (
                f"put_writes on {memory_id!r}: write {i} must be a (channel str, value) pair, "
                f"got {shown(write)}"
            )
            raise TypeError(msg)
        indexed.append((WRITES_IDX_MAP.get(write[0], i), write[0], write[1]))
    return indexed


def _many(values: Any, operation: str, name: str) -> builtins.list[Any]:
    """``values`` as a list; refused when it is a str (each of its characters would be taken
    for an id) or not iterable."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        given = shown(values)
        msg = f"{operation}: {name} must be a list of ids, not {given}; pass [{given}]"
        raise TypeError(msg)
    return builtins.list(values)
