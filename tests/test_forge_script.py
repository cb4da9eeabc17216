"""scripts/forge.py, used by the README's audit walk-through, forges what it says it forges."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from eventlog import SQLiteEventStore, UserMessage
from projections import MessageWindowChatMemory

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "forge.py"


def test_forge_rehashes_so_only_the_digest_tells(tmp_path):
    path = tmp_path / "chatledger.db"
    with SQLiteEventStore(path) as store:
        memory = MessageWindowChatMemory(id="conv", max_messages=4, store=store)
        memory.add(UserMessage("one"), UserMessage("two"), UserMessage("three"))
        digest = store.digest()
    subprocess.run(
        [sys.executable, str(SCRIPT), str(path), "conv", "2", "forged"], check=True, timeout=60
    )
    with SQLiteEventStore(path) as store:
        assert store.verify().ok
        assert not store.verify(digest=digest).ok
        shown = MessageWindowChatMemory(id="conv", max_messages=4, store=store).messages()
    assert UserMessage("forged") in shown
