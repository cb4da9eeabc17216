"""The session commands: `quarantine` acknowledges one damaged record, `sent` shows what a
model call was sent."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from eventlog import SQLiteEventStore
from eventlog.testing.records import user_payload
from projections.adapters.openai_agents import LedgerSession

ITEMS: list[Any] = [{"role": "user", "content": f"item {i}"} for i in range(1, 7)]


def _items(store: Any) -> list[Any]:
    return asyncio.run(LedgerSession("conv", store=store).get_items())


def test_the_command_line_acknowledges_and_verify_still_fails(tmp_path, cli) -> None:
    path = tmp_path / "chat.db"
    with SQLiteEventStore(path) as store:
        asyncio.run(LedgerSession("conv", store=store).add_items(ITEMS))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET payload = ? WHERE seq = 5", (user_payload("damaged"),))
    assert cli("history", "--db", path, "conv").returncode == 1
    refused = cli("quarantine", "--db", path, "conv", "4", "--reason", "hide")
    assert refused.returncode == 1
    assert "nothing to quarantine" in refused.stderr
    done = cli("quarantine", "--db", path, "conv", "5", "--reason", "disk fault", "--json")
    assert done.returncode == 0, done.stderr
    assert '"seq": 5' in done.stdout
    shown = cli("history", "--db", path, "conv")
    assert shown.returncode == 0, shown.stderr
    assert "item 6" in shown.stdout
    assert "item 4" in shown.stdout
    assert cli("verify", "--db", path, "conv").returncode == 1
    with SQLiteEventStore(path) as store:
        assert _items(store) == ITEMS[:4] + ITEMS[5:]
