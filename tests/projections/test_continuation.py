""" "History changed under this object" means history went backwards, nothing else.

A memory or session object far behind the head (other writers, other processes) has seen a
continuation: it reloads silently. Only the event it last saw being gone or replaced (a restore,
a failover that lost commits, a rewrite) is a change worth a warning.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from eventlog import SQLiteEventStore, UserMessage
from projections import MessageWindowChatMemory
from tests.factories import lose_last_commit

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from projections.adapters.openai_agents import LedgerSession

WARNING = "history changed under this object"
LOGGERS = ("chatledger.memories", "chatledger.sessions")

# Each writer logs warnings to its stderr, which the test reads.
_WRITER = textwrap.dedent(
    """
    import asyncio, logging, sys
    from eventlog import SQLiteEventStore, UserMessage
    from projections import MessageWindowChatMemory
    from projections.adapters.openai_agents import LedgerSession
    logging.basicConfig(level=logging.WARNING)
    path, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SQLiteEventStore(path)
    if kind == "memory":
        memory = MessageWindowChatMemory(id="conv", max_messages=10, store=store)
        for i in range(n):
            memory.add(UserMessage(f"m{i}"))
    else:
        session = LedgerSession("conv", store=store)
        async def run():
            for i in range(n):
                await session.add_items([{"role": "user", "content": f"s{i}"}])
        asyncio.run(run())
    store.close()
    """
)


@pytest.mark.slow
def test_two_writer_processes_and_10000_interleaved_appends_log_no_change(tmp_path, caplog):
    path = tmp_path / "chat.db"
    store = SQLiteEventStore(path)
    per_writer = 5_000
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), kind, str(per_writer)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for kind in ("memory", "session")
    ]
    # Check readers in this process, falling behind by hundreds of events between looks,
    # see continuations only.
    watcher = MessageWindowChatMemory(id="conv", max_messages=10, store=store)
    session = LedgerSession("conv", store=store)
    looks = 0
    with caplog.at_level(logging.WARNING):
        while any(w.poll() is None for w in writers):
            watcher.messages()
            asyncio.run(session.get_items(limit=5))
            looks += 1
            time.sleep(0.05)
        watcher.messages()
        asyncio.run(session.get_items(limit=5))
    errors = [w.communicate(timeout=600)[1] for w in writers]
    for writer, err in zip(writers, errors, strict=True):
        assert writer.returncode == 0, err
        assert WARNING not in err
    assert WARNING not in caplog.text
    assert looks > 1
    head = store.head("conv")
    assert head is not None
    assert head.seq == 2 * per_writer
    assert store.verify("conv").ok


def test_an_object_far_behind_the_head_reloads_silently(tmp_path, caplog):
    store = SQLiteEventStore(tmp_path / "chat.db")
    mine = MessageWindowChatMemory(id="conv", max_messages=3, store=store)
    session = LedgerSession("conv", store=store)
    mine.add(UserMessage("first"))
    asyncio.run(session.get_items())
    other = MessageWindowChatMemory(id="conv", max_messages=3, store=store)
    for i in range(500):  # far more than one catch-up read
        other.add(UserMessage(f"m{i}"))
    with caplog.at_level(logging.WARNING):
        assert mine.messages() == [UserMessage(f"m{i}") for i in (497, 498, 499)]
        assert len(asyncio.run(session.get_items())) == 3
        mine.add(UserMessage("after"))  # a lost race, then a catch-up 500 events long
    assert WARNING not in caplog.text


@pytest.mark.parametrize("behind", [1, 200])
def test_a_rewrite_followed_by_any_number_of_appends_still_warns(tmp_path, caplog, behind):
    path = tmp_path / "chat.db"
    mine = MessageWindowChatMemory(id="conv", max_messages=5, store=SQLiteEventStore(path))
    session = LedgerSession("conv", store=SQLiteEventStore(path))
    mine.add(UserMessage("one"), UserMessage("lost"))
    asyncio.run(session.get_items())
    lose_last_commit(path, "conv", 2)
    theirs = MessageWindowChatMemory(id="conv", max_messages=5, store=SQLiteEventStore(path))
    for i in range(behind):
        theirs.add(UserMessage(f"new{i}"))
    with caplog.at_level(logging.WARNING):
        assert mine.messages()[-1] == UserMessage(f"new{behind - 1}")
        newest: Any = asyncio.run(session.get_items(limit=1))[0]
        assert newest["content"] == f"new{behind - 1}"
    warned = [r for r in caplog.records if WARNING in r.getMessage()]
    # Check both objects noticed: the event each last saw (seq 2) is another record now.
    assert sorted(r.name for r in warned) == sorted(LOGGERS)
