"""A LedgerSession write that fails for a real reason changes nothing and leaves all usable.

The equivalents, on our stores, of the Agents SDK tests the certification deselects because
they inject sqlite3 errors through SQLiteSession's private connections (failed add_items
releases the write lock, failed clear rolls back, failed pop releases the lock) and of its
compaction tests that make an insert fail with a trigger on its own table. Here the database
itself refuses: a trigger on the ledger's ``events`` table (SQLite, PostgreSQL), the write lock
held by another real connection, a closed store. Each failed write must leave the items and
the history as they were, hold no lock (another store object writes at once), and leave the
session usable.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from agents import Agent, RunConfig, Runner
from agents.memory import OpenAIResponsesCompactionSession
from agents.testing import ScriptedModel, assistant_message

from eventlog import EventStore, PersistenceError, StoreClosedError
from projections import MessageWindowPolicy
from projections.adapters.openai_agents import LedgerSession
from tests.conftest import PG_DSN, Backend

pytestmark = pytest.mark.skip_backend("memory")  # nothing real can make it fail

ITEMS: list[Any] = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "21 degrees."},
]
SUMMARY: Any = {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque-summary"}
REFUSED = "refused by the test"


def _run(awaitable: Any) -> Any:
    async def wait() -> Any:
        return await awaitable

    return asyncio.run(wait())


@contextmanager
def refusing(backend: Backend, when: str) -> Iterator[None]:
    """While inside, the database refuses every new ``events`` row matching ``when`` (SQL over
    ``NEW``): a trigger aborting the statement, as a failed disk or constraint would."""
    if backend.name == "sqlite":
        with sqlite3.connect(backend.path) as conn:
            conn.execute(
                f"CREATE TRIGGER refuse BEFORE INSERT ON events WHEN {when} "
                f"BEGIN SELECT RAISE(ABORT, '{REFUSED}'); END"
            )
        try:
            yield
        finally:
            with sqlite3.connect(backend.path) as conn:
                conn.execute("DROP TRIGGER refuse")
        return
    import psycopg

    schema = backend.schema
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(
            f"CREATE FUNCTION {schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN RAISE EXCEPTION '{REFUSED}'; END $$"
        )
        conn.execute(
            f"CREATE TRIGGER refuse BEFORE INSERT ON {schema}.events FOR EACH ROW "
            f"WHEN ({when}) EXECUTE FUNCTION {schema}.refuse()"
        )
    try:
        yield
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f"DROP FUNCTION {schema}.refuse() CASCADE")


def other_store(backend: Backend) -> EventStore:
    """Another store object on the same database that gives up within seconds when a lock is
    held, so a lock a failed write kept fails the test instead of hanging it."""
    if backend.name == "sqlite":
        return backend.open(busy_timeout=2.0)
    return backend.open(statement_timeout=5.0)


def state(session: LedgerSession) -> tuple[Any, ...]:
    """What a failed write must not change: the items, the history, the head."""
    history = session.memory.history()
    return (_run(session.get_items()), [e.event for e in history], history[-1].seq)


def no_lock_left(backend: Backend, memory_id: str) -> None:
    """Another store object appends to the memory at once: it records a model call (a
    ``context_sent`` event), which leaves the items as they are."""
    other = LedgerSession(memory_id, store=other_store(backend))
    record = other.window_callback(MessageWindowPolicy(10))
    items = _run(other.get_items())
    assert _run(record(items, [])) == items


def test_a_refused_add_items_writes_nothing_and_frees_the_store(
    backend: Backend, store: EventStore
) -> None:
    session = LedgerSession("add", store=store)
    _run(session.add_items(ITEMS))
    before = state(session)
    fine: Any = {"role": "user", "content": "fine"}
    poison: Any = {"role": "user", "content": "poison"}
    with refusing(backend, "NEW.payload LIKE '%poison%'"):
        # The second event of the append is refused: the first is rolled back with it.
        with pytest.raises(PersistenceError, match=REFUSED):
            _run(session.add_items([fine, poison]))
        assert state(session) == before
        no_lock_left(backend, "add")
        _run(session.add_items([fine]))  # the same object goes on
    assert _run(session.get_items()) == [*ITEMS, fine]
    assert store.verify("add").ok


def test_a_refused_clear_changes_nothing_and_frees_the_store(
    backend: Backend, store: EventStore
) -> None:
    session = LedgerSession("clear", store=store)
    _run(session.add_items(ITEMS))
    before = state(session)
    with refusing(backend, "NEW.kind = 'memory_cleared'"):
        with pytest.raises(PersistenceError, match=REFUSED):
            _run(session.clear_session())
        assert state(session) == before
        no_lock_left(backend, "clear")
    _run(session.clear_session())
    assert _run(session.get_items()) == []
    assert store.verify("clear").ok


def test_a_refused_pop_changes_nothing_and_frees_the_store(
    backend: Backend, store: EventStore
) -> None:
    session = LedgerSession("pop", store=store)
    _run(session.add_items(ITEMS))
    before = state(session)
    with refusing(backend, "NEW.kind = 'message_retracted'"):
        with pytest.raises(PersistenceError, match=REFUSED):
            _run(session.pop_item())
        assert state(session) == before
        no_lock_left(backend, "pop")
    assert _run(session.pop_item()) == ITEMS[-1]
    assert _run(session.get_items()) == ITEMS[:1]
    assert store.verify("pop").ok


def _compacting(session: LedgerSession, **kwargs: Any) -> OpenAIResponsesCompactionSession:
    async def compact(**_: Any) -> SimpleNamespace:
        return SimpleNamespace(output=[SUMMARY], usage=None)

    client: Any = SimpleNamespace(responses=SimpleNamespace(compact=compact))
    return OpenAIResponsesCompactionSession(
        session.session_id, session, client=client, compaction_mode="input", **kwargs
    )


def test_a_refused_compaction_changes_nothing(backend: Backend, store: EventStore) -> None:
    # The SDK's test_suffix_transaction_rolls_back_failed_insert and
    # test_failed_encrypted_suffix_transaction_preserves_original_tokens, on our stores: the
    # output's add is refused after the clear (manual) or the retractions (automatic, with
    # expired items pruned) went in, in the same append.
    session = LedgerSession("compact", store=store)
    expired: Any = {"role": "user", "content": "expired"}
    _run(session.add_items([expired, *ITEMS]))
    before = state(session)
    with refusing(backend, "NEW.payload LIKE '%opaque-summary%'"):
        with pytest.raises(PersistenceError, match=REFUSED):
            _run(_compacting(session).run_compaction({"force": True}))
        assert state(session) == before
        no_lock_left(backend, "compact")
        before = state(session)  # with the probe's event

        snapshot = _run(
            session._get_compaction_snapshot(2, prune_prefix=lambda item: item == expired)
        )
        with pytest.raises(PersistenceError, match=REFUSED):
            _run(snapshot.replace_suffix(0, [SUMMARY]))
        assert state(session) == before
        no_lock_left(backend, "compact")

        agent = Agent(name="worker", model=ScriptedModel(steps=[[assistant_message("done")]]))
        wrapped = _compacting(session, should_trigger_compaction=lambda _: True)
        config = RunConfig(session_settings={"limit": 1}, tracing_disabled=True)
        with pytest.raises(PersistenceError, match=REFUSED):
            _run(Runner.run(agent, "go on", session=wrapped, run_config=config))
        items = _run(session.get_items())
        assert items[:-2] == [expired, *ITEMS]  # the run's input and reply were added
        assert items[-2] == {"role": "user", "content": "go on"}
    _run(_compacting(session).run_compaction({"force": True}))
    assert _run(session.get_items()) == [SUMMARY]
    assert store.verify("compact").ok


@contextmanager
def write_lock_held(backend: Backend) -> Iterator[None]:
    """Another real connection holds what an append needs: SQLite's write lock, or an
    exclusive lock on PostgreSQL's ``events`` table (reads still go through)."""
    if backend.name == "sqlite":
        blocker = sqlite3.connect(backend.path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        return
    import psycopg

    with psycopg.connect(PG_DSN) as conn:
        conn.execute(f"LOCK TABLE {backend.schema}.events IN EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()


def test_writes_behind_another_connections_lock_fail_cleanly_and_change_nothing(
    backend: Backend,
) -> None:
    store = (
        backend.open(busy_timeout=0.2)
        if backend.name == "sqlite"
        else backend.open(statement_timeout=0.5)
    )
    session = LedgerSession("locked", store=store)
    _run(session.add_items(ITEMS))
    snapshot = _run(session._get_compaction_snapshot(5))
    before = state(session)
    more: Any = {"role": "user", "content": "more"}
    with write_lock_held(backend):
        for write in (
            lambda: session.add_items([more]),
            session.pop_item,
            session.clear_session,
            lambda: snapshot.replace_suffix(0, [SUMMARY]),
            lambda: session._atomic_replace_items([SUMMARY]),
        ):
            with pytest.raises(PersistenceError):
                _run(write())
            assert state(session) == before  # reads go through meanwhile
    assert _run(snapshot.replace_suffix(1, [SUMMARY])) is True
    _run(session.add_items([more]))
    assert _run(session.get_items()) == [ITEMS[0], SUMMARY, more]
    assert store.verify("locked").ok


def test_a_closed_store_refuses_every_write_and_the_ledger_is_unchanged(
    backend: Backend, store: EventStore
) -> None:
    session = LedgerSession("closed", store=store)
    _run(session.add_items(ITEMS))
    snapshot = _run(session._get_compaction_snapshot(5))
    before = state(session)
    store.close()
    for write in (
        lambda: session.add_items([SUMMARY]),
        session.pop_item,
        session.clear_session,
        lambda: snapshot.replace_suffix(0, [SUMMARY]),
        lambda: session._atomic_replace_items([SUMMARY]),
    ):
        with pytest.raises(StoreClosedError):
            _run(write())
    reopened = LedgerSession("closed", store=backend.open())
    assert state(reopened) == before
