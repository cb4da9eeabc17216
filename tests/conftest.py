"""Shared fixtures: the parametrized `store` (memory, sqlite, postgres), reopening and tampering.

PostgreSQL runs when the server at CHATLEDGER_TEST_PG_DSN (default: the local one) answers;
otherwise its tests skip with that reason - except in CI (CI=true), where they must run, so a
missing server fails the build instead of passing silently.
"""

from __future__ import annotations

import os
import pathlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from eventlog import InMemoryEventStore, SQLiteEventStore
from eventlog.store import EventStore

BACKENDS = ("memory", "sqlite", "postgres")
PG_DSN = os.environ.get("CHATLEDGER_TEST_PG_DSN", "host=127.0.0.1 port=5432 dbname=test")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backends",
        default=",".join(BACKENDS),
        help="comma-separated store backends to run the conformance suite on",
    )


def _selected(config: pytest.Config) -> set[str]:
    return {b.strip() for b in str(config.getoption("--backends")).split(",") if b.strip()}


_pg_problem: str | bool | None = False  # False: not checked yet


def pg_unavailable() -> str | None:
    """Why PostgreSQL tests cannot run here, or None when they can."""
    global _pg_problem  # noqa: PLW0603 - one probe per session
    if _pg_problem is False:
        try:
            import psycopg

            with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            import eventlog.postgres  # noqa: F401
        except Exception as e:
            _pg_problem = f"PostgreSQL at {PG_DSN!r} is not usable: {type(e).__name__}: {e}"
        else:
            _pg_problem = None
    return _pg_problem  # type: ignore[return-value]


def require_pg() -> None:
    problem = pg_unavailable()
    if problem is not None:
        if IN_CI:
            pytest.fail(f"CI=true requires PostgreSQL: {problem}")
        pytest.skip(problem)


class Backend:
    """Opens store objects on one backing database, so tests can reopen and tamper."""

    def __init__(self, name: str, tmp_path: pathlib.Path) -> None:
        self.name = name
        self.path = tmp_path / "events.db"
        self.schema = f"t_{uuid.uuid4().hex[:12]}"
        self.opened: list[EventStore] = []
        self._memory: InMemoryEventStore | None = None

    def open(self, **kwargs: Any) -> EventStore:
        store: EventStore
        if self.name == "memory":
            # One object per database: a memory store cannot be reopened, so the first open's
            # arguments (chain_key=) are the store's for the whole test.
            if self._memory is None:
                self._memory = InMemoryEventStore(**kwargs)
            store = self._memory
        elif self.name == "sqlite":
            store = SQLiteEventStore(self.path, **kwargs)
        else:
            from eventlog.postgres import PostgresEventStore

            store = PostgresEventStore(PG_DSN, schema=self.schema, **kwargs)
        self.opened.append(store)
        return store

    def tamper(self, store: EventStore, stream_id: str, seq: int, column: str, value: Any) -> None:
        """Overwrite one stored column behind the store's back (what an attacker would do)."""
        if self.name == "memory":
            assert isinstance(store, InMemoryEventStore)
            stream = store._streams[stream_id]
            i = next(i for i, r in enumerate(stream) if r.seq == seq)
            field = "recorded_at_text" if column == "recorded_at" else column
            new = stream[i]._replace(**{field: value})
            stream[i] = new
            store._all = [new if r.position == new.position else r for r in store._all]
        elif self.name == "sqlite":
            import sqlite3

            with sqlite3.connect(self.path) as conn:
                conn.execute(
                    f"UPDATE events SET {column} = ? WHERE stream_id = ? AND seq = ?",
                    (value, stream_id, seq),
                )
        else:
            import psycopg
            from psycopg import sql

            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(
                    sql.SQL(
                        "UPDATE {}.events SET {} = %s WHERE stream_id = %s AND seq = %s"
                    ).format(sql.Identifier(self.schema), sql.Identifier(column)),
                    (value, stream_id, seq),
                )

    def reseal(self, store: EventStore, stream_id: str) -> None:
        """Recompute a memory's unkeyed head seal from its stored rows behind the store's back:
        what a forger of an unkeyed ledger can do (a plain SHA-256), after rewriting records."""
        from eventlog.hashing import head_mac
        from eventlog.ids import StreamKey

        (last,) = store.read(StreamKey(stream_id), desc=True, limit=1)
        if self.name == "memory":
            assert isinstance(store, InMemoryEventStore)
            old = store._seals[stream_id]
            mac = head_mac(None, stream_id, last.seq, last.hash, old.erased_through)
            store._seals[stream_id] = old._replace(seq=last.seq, hash=last.hash, mac=mac)
            return
        if self.name == "sqlite":
            import sqlite3

            with sqlite3.connect(self.path) as conn:
                (erased,) = conn.execute(
                    "SELECT erased_through FROM heads WHERE stream_id = ?", (stream_id,)
                ).fetchone()
                mac = head_mac(None, stream_id, last.seq, last.hash, erased)
                conn.execute(
                    "UPDATE heads SET seq = ?, hash = ?, mac = ? WHERE stream_id = ?",
                    (last.seq, last.hash, mac, stream_id),
                )
            return
        import psycopg
        from psycopg import sql

        table = sql.Identifier(self.schema, "heads")
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            row = conn.execute(
                sql.SQL("SELECT erased_through FROM {} WHERE stream_id = %s").format(table),
                (stream_id,),
            ).fetchone()
            assert row is not None
            mac = head_mac(None, stream_id, last.seq, last.hash, int(row[0]))
            conn.execute(
                sql.SQL("UPDATE {} SET seq = %s, hash = %s, mac = %s WHERE stream_id = %s").format(
                    table
                ),
                (last.seq, last.hash, mac, stream_id),
            )

    def delete_record(self, store: EventStore, stream_id: str, seq: int) -> None:
        """Delete one stored record behind the store's back."""
        if self.name == "memory":
            assert isinstance(store, InMemoryEventStore)
            stream = store._streams[stream_id]
            victim = next(r for r in stream if r.seq == seq)
            stream.remove(victim)
            store._all.remove(victim)
            return
        self._sql("DELETE FROM {events} WHERE stream_id = ? AND seq = ?", (stream_id, seq))

    def set_setting(self, name: str, value: str | None) -> None:
        """Overwrite (None: delete) one stored setting behind the store's back."""
        if value is None:
            self._sql("DELETE FROM {settings} WHERE name = ?", (name,))
        else:
            self._sql("UPDATE {settings} SET value = ? WHERE name = ?", (value, name))

    def get_setting(self, name: str) -> str | None:
        """One stored setting, read behind the store's back."""
        rows = self._sql("SELECT value FROM {settings} WHERE name = ?", (name,))
        return None if not rows else str(rows[0][0])

    def rename_stream(self, store: EventStore, old: str, new: str) -> None:
        """Move a stream's rows to another stored key behind the store's back."""
        if self.name == "memory":
            assert isinstance(store, InMemoryEventStore)
            rows = [r._replace(stream_id=new) for r in store._streams.pop(old)]
            store._streams[new] = rows
            moved = {r.position: r for r in rows}
            store._all = [moved.get(r.position, r) for r in store._all]
            return
        self._sql("UPDATE {events} SET stream_id = ? WHERE stream_id = ?", (new, old))

    def _sql(self, template: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Run one statement on the SQL backend's database, outside any store."""
        if self.name == "sqlite":
            import sqlite3

            query = template.format(events="events", settings="settings")
            with sqlite3.connect(self.path) as conn:
                rows = conn.execute(query, params).fetchall()
            conn.close()
            return rows
        import psycopg

        query = template.replace("?", "%s").format(
            events=f'"{self.schema}".events', settings=f'"{self.schema}".settings'
        )
        with psycopg.connect(PG_DSN, autocommit=True) as pg:
            cursor = pg.execute(query.encode(), params)
            return cursor.fetchall() if cursor.description else []

    def cleanup(self) -> None:
        for store in self.opened:
            store.close()
        if self.name == "postgres":
            import psycopg
            from psycopg import sql

            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
                )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--backends=sqlite deselects the other backends' test ids instead of skipping them."""
    chosen = _selected(config)
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("backend") if callspec is not None else None
        # The conformance kit's classes name their backend (tests/eventlog/test_conformance.py).
        name = getattr(getattr(item, "cls", None), "backend_name", name)
        (drop if name is not None and name not in chosen else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _backend_params() -> list[Any]:
    return [pytest.param(name, id=name) for name in BACKENDS]


@pytest.fixture(params=_backend_params())
def backend(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[Backend]:
    name: str = request.param
    marker = request.node.get_closest_marker("skip_backend")
    if marker is not None and name in marker.args:
        pytest.skip(f"not applicable to the {name} backend")
    if name == "postgres":
        require_pg()
    b = Backend(name, tmp_path)
    try:
        yield b
    finally:
        b.cleanup()


@pytest.fixture
def store(backend: Backend) -> EventStore:
    """A fresh, empty store of each backend: test ids read test_x[memory], test_x[sqlite], ..."""
    return backend.open()


@pytest.fixture
def reopen(backend: Backend) -> Callable[..., EventStore]:
    """Open another store object on the same database (the same object for `memory`)."""
    return backend.open
