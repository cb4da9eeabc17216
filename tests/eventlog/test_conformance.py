"""Our three backends under the conformance kit we ship (:mod:`eventlog.testing`): the same
classes a third-party backend subclasses, with the hooks that tamper with stored rows.
``pytest --backends=sqlite`` keeps one backend's classes (see tests/conftest.py)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from eventlog.store import EventStore
from eventlog.testing import LedgerConformance, RecorderConformance
from tests.conftest import Backend, require_pg


class _Ours:
    """The kit's hooks for one of our backends, through the suite's :class:`Backend`."""

    backend_name: ClassVar[str]
    reopenable: ClassVar[bool] = True

    @pytest.fixture(autouse=True)
    def _database(self, tmp_path: pathlib.Path) -> Iterator[None]:
        if self.backend_name == "postgres":
            require_pg()
        self._db = Backend(self.backend_name, tmp_path)
        try:
            yield
        finally:
            self._db.cleanup()

    def make_recorder(self, **options: Any) -> EventStore:
        return self._db.open(**options)

    def tamper(self, store: EventStore, stream_id: str, seq: int, column: str, value: Any) -> None:
        self._db.tamper(store, stream_id, seq, column, value)

    def delete_record(self, store: EventStore, stream_id: str, seq: int) -> None:
        self._db.delete_record(store, stream_id, seq)

    def reseal(self, store: EventStore, stream_id: str) -> None:
        self._db.reseal(store, stream_id)

    def set_setting(self, name: str, value: str | None) -> None:
        self._db.set_setting(name, value)

    def get_setting(self, name: str) -> str | None:
        return self._db.get_setting(name)

    def rename_stream(self, store: EventStore, old: str, new: str) -> None:
        self._db.rename_stream(store, old, new)


class _Memory(_Ours):
    backend_name = "memory"
    reopenable = False  # its data lives in the one store object


class _SQLite(_Ours):
    backend_name = "sqlite"


class _Postgres(_Ours):
    backend_name = "postgres"


class TestMemoryRecorder(_Memory, RecorderConformance):
    pass


class TestMemoryLedger(_Memory, LedgerConformance):
    pass


class TestSQLiteRecorder(_SQLite, RecorderConformance):
    pass


class TestSQLiteLedger(_SQLite, LedgerConformance):
    pass


class TestPostgresRecorder(_Postgres, RecorderConformance):
    pass


class TestPostgresLedger(_Postgres, LedgerConformance):
    pass
