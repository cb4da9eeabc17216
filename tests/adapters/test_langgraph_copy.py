"""LedgerSaver.copy_thread of a thread with several namespaces: checked whole before the first
write, so a copy that is refused leaves no half-copied thread. Real SQLite files, tampered with
sqlite3 directly; no part of chatledger is mocked."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base", reason="the langgraph extra is not installed")

from langgraph.checkpoint.base import empty_checkpoint

from eventlog import ChainIntegrityError, SQLiteEventStore
from eventlog.ids import memory_key
from projections.adapters.langgraph import LedgerSaver, thread_memory_id
from projections.adapters.langgraph_events import is_thread_memory


def _put(saver: LedgerSaver, thread: str, ns: str, value: Any) -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"x": value}
    checkpoint["channel_versions"] = {"x": "1"}
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    saver.put(config, checkpoint, {"source": "input", "step": 0}, {"x": "1"})


def _ids(store: SQLiteEventStore) -> list[tuple[str, str, str]]:
    """The thread memories' ids, in the store's order (the one copy_thread takes)."""
    return [info.memory_id for info in store.streams() if is_thread_memory(info.memory_id)]


def _threads(store: SQLiteEventStore) -> set[str]:
    return {thread for thread, _, _ in _ids(store)}


def _namespaces(store: SQLiteEventStore, thread: str) -> list[str]:
    return [ns for t, _, ns in _ids(store) if t == thread]


def test_a_damaged_namespace_refuses_the_copy_before_any_namespace_is_written(tmp_path: Path):
    # Before: the namespaces before the damaged one were copied, then the verified read of
    # the damaged one raised, leaving the target thread half-copied.
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path) as store:
        saver = LedgerSaver(store)
        for ns in ("", "child:1", "child:2"):
            _put(saver, "src", ns, f"value in {ns or 'root'}")
        last = _namespaces(store, "src")[-1]
    with sqlite3.connect(path) as conn:
        changed = conn.execute(
            "UPDATE events SET payload = replace(payload, 'checkpoint', 'checkpoinX') "
            "WHERE stream_id = ? AND seq = 1",
            (memory_key(thread_memory_id("src", last)),),
        ).rowcount
    conn.close()
    assert changed == 1
    with SQLiteEventStore(path) as store:
        saver = LedgerSaver(store)
        with pytest.raises(ChainIntegrityError):
            saver.copy_thread("src", "dst")
        # Check nothing of the target thread was written.
        assert _threads(store) == {"src"}
        assert list(saver.list({"configurable": {"thread_id": "dst"}})) == []


def test_a_damaged_namespace_of_the_target_refuses_the_copy_before_any_write(tmp_path: Path):
    # The target already holds the last namespace, damaged: its verified read is part of the
    # check, so the namespaces before it are not copied either (before: they were).
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path) as store:
        saver = LedgerSaver(store)
        for ns in ("", "child:1", "child:2"):
            _put(saver, "src", ns, f"value in {ns or 'root'}")
        last = _namespaces(store, "src")[-1]
        _put(saver, "dst", last, "the target's own")
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE events SET payload = replace(payload, 'checkpoint', 'checkpoinX') "
            "WHERE stream_id = ?",
            (memory_key(thread_memory_id("dst", last)),),
        )
    conn.close()
    with SQLiteEventStore(path) as store:
        with pytest.raises(ChainIntegrityError):
            LedgerSaver(store).copy_thread("src", "dst")
        assert _namespaces(store, "dst") == [last]
        assert [r.seq for r in store.read(thread_memory_id("dst", last))] == [1]


def test_a_namespace_whose_target_id_is_too_long_refuses_the_copy_whole(tmp_path: Path):
    # The target thread id is longer than the source's: the root namespace fits the store's
    # key limit under the target, the long namespace does not. Before: the root namespace was
    # copied, then the append of the long one was refused.
    long_ns = "n" * 1_500
    target = "t" * 600
    with SQLiteEventStore(tmp_path / "ledger.db") as store:
        saver = LedgerSaver(store)
        _put(saver, "src", "", "root")
        _put(saver, "src", long_ns, "deep")
        assert _namespaces(store, "src") == ["", long_ns]  # the long one comes second
        with pytest.raises(ValueError) as caught:
            saver.copy_thread("src", target)
        assert _threads(store) == {"src"}
        assert str(caught.value).startswith("copy_thread to thread 'tttt")
        assert str(caught.value).endswith("use a shorter memory id; nothing was copied")
        # Check a target id that fits copies both.
        saver.copy_thread("src", "dst")
        copied = saver.list({"configurable": {"thread_id": "dst"}})
        assert {t.config["configurable"]["checkpoint_ns"] for t in copied} == {"", long_ns}
        assert _threads(store) == {"src", "dst"}
        assert store.verify().ok
