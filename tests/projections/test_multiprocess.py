"""Real processes on one SQLite file or PostgreSQL schema: memories lose nothing and see each
other's writes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid

import pytest

from eventlog import SQLiteEventStore, UserMessage
from projections import MessageWindowChatMemory
from tests.conftest import PG_DSN, require_pg

_ADDER = textwrap.dedent(
    """
    import sys
    from eventlog import SQLiteEventStore, UserMessage
    from projections import MessageWindowChatMemory, TokenWindowChatMemory
    from projections import OpenAiTokenCountEstimator
    path, name, n, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if path.startswith("pg:"):
        from eventlog.postgres import PostgresEventStore
        dsn, schema = sys.argv[5], path[3:]
        store = PostgresEventStore(dsn, schema=schema, create_schema=False)
    else:
        store = SQLiteEventStore(path)
    if kind == "tokens":
        estimator = OpenAiTokenCountEstimator("gpt-4o-mini")
        memory = TokenWindowChatMemory(id="shared", max_tokens=200,
                                       token_count_estimator=estimator, store=store)
    else:
        memory = MessageWindowChatMemory(id="shared", max_messages=5, store=store)
    for i in range(n):
        memory.add(UserMessage(f"{name}:{i}"))
    store.close()
    """
)


def _run_adders(path, kind, n=150):
    if not str(path).startswith("pg:"):
        SQLiteEventStore(path).close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _ADDER, str(path), name, str(n), kind, PG_DSN],
            stderr=subprocess.PIPE,
        )
        for name in ("a", "b")
    ]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err.decode()


def _check_merged(store, n):
    """Every add landed once in each process's order, and each recorded window is right."""
    memory = MessageWindowChatMemory(id="shared", max_messages=5, store=store)
    added = [e.message.text for e in memory.history()]
    # Check every add landed once, each process's order kept, and the chain verifies.
    assert len(added) == 2 * n
    for name in ("a", "b"):
        assert [t for t in added if t.startswith(name)] == [f"{name}:{i}" for i in range(n)]
    # Check the window is the last 5 adds of the merged history (each add saw the other's).
    assert [m.text for m in memory.messages()] == added[-5:]
    for seq in range(1, 2 * n + 1):
        assert [m.text for m in memory.as_of(seq=seq)] == added[max(0, seq - 5) : seq]
    assert store.verify().ok


def test_two_processes_adding_to_one_memory_lose_nothing(tmp_path):
    path = tmp_path / "chat.db"
    n = 150
    _run_adders(path, "messages", n)
    with SQLiteEventStore(path) as store:
        _check_merged(store, n)


def _check_token_windows(store, n):
    """Every add landed once, and each recorded window is the longest run of the newest
    messages that fits the budget (LangChain4j's eviction, oldest first)."""
    from projections import OpenAiTokenCountEstimator, TokenWindowChatMemory

    estimator = OpenAiTokenCountEstimator("gpt-4o-mini")
    memory = TokenWindowChatMemory(
        id="shared", max_tokens=200, token_count_estimator=estimator, store=store
    )
    added = [e.message for e in memory.history() if isinstance(e.message, UserMessage)]
    assert len(added) == 2 * n
    assert sorted(m.text for m in added) == sorted(f"{w}:{i}" for w in "ab" for i in range(n))
    for seq in range(1, 2 * n + 1):
        prefix = added[:seq]
        fits = max(
            k
            for k in range(seq + 1)
            if estimator.estimate_token_count_in_messages(prefix[seq - k :]) <= 200
        )
        assert memory.as_of(seq=seq) == prefix[seq - fits :]
    assert store.verify().ok


@pytest.mark.parametrize("kind", ["messages", "tokens"])
def test_two_processes_adding_to_one_postgres_memory_lose_nothing(kind):
    # On PostgreSQL a contended add settles a lost race inside the append
    # (append_or_rebuild): each writer folds the other's record into its window there.
    require_pg()
    from eventlog.postgres import PostgresEventStore

    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        with PostgresEventStore(PG_DSN, schema=schema) as store:
            if kind == "messages":
                _run_adders(f"pg:{schema}", kind, 300)
                _check_merged(store, 300)
            else:
                _run_adders(f"pg:{schema}", kind, 80)
                _check_token_windows(store, 80)
    finally:
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_two_processes_token_window(tmp_path):
    path = tmp_path / "chat.db"
    _run_adders(path, "tokens", 60)
    with SQLiteEventStore(path) as store:
        from projections import OpenAiTokenCountEstimator, TokenWindowChatMemory

        memory = TokenWindowChatMemory(
            id="shared",
            max_tokens=200,
            token_count_estimator=OpenAiTokenCountEstimator("gpt-4o-mini"),
            store=store,
        )
        assert len(memory.history()) == 120
        view = memory.messages()
        assert view == [e.message for e in memory.history()][-len(view) :]
        assert memory.token_count_estimator.estimate_token_count_in_messages(view) <= 200


def test_another_process_sees_my_adds_at_its_next_call(tmp_path):
    path = tmp_path / "chat.db"
    mine = MessageWindowChatMemory(id="shared", max_messages=5, store=SQLiteEventStore(path))
    assert mine.messages() == []
    _run_adders(path, "messages", 3)
    # Check the object created before the other processes wrote sees their adds now.
    assert len(mine.messages()) == 5
    mine.add(UserMessage("mine"))
    assert mine.messages()[-1] == UserMessage("mine")
    assert len(mine.history()) == 7
