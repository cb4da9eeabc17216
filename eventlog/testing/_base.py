"""What every conformance class shares: the hooks a backend supplies and the fixtures the
contract's tests use (``store``, ``reopen``, ``backend``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import pytest

if TYPE_CHECKING:
    from eventlog.store import EventStore

__all__ = ["Conformance", "Handle", "reopens"]

_F = TypeVar("_F", bound=Callable[..., Any])


def reopens(test: _F) -> _F:
    """Mark a test that opens a second store object on the same database (or tampers with
    its rows behind the store's back): skipped for a backend whose ``reopenable`` is False."""
    test.__dict__["_conformance_reopens"] = True
    return test


class Conformance:
    """Base of :class:`~eventlog.testing.RecorderConformance` and
    :class:`~eventlog.testing.LedgerConformance`: subclass one (or both) in a ``Test*`` class
    and define :meth:`make_recorder`; pytest collects every contract test for your backend.

    ``make_recorder(**options)`` may be called several times in one test: each call returns a
    new store object on *the test's own* database, fresh (empty) for every test - set the
    database up in an autouse fixture (a ``tmp_path`` file, a new schema). The tests that
    tamper with stored rows behind the store's back, as an attacker would, need the hooks
    below; a backend that does not define them has those tests skipped, saying why.

    Attributes:
        reopenable: False for a backend whose data dies with its store object (an in-memory
            store: ``make_recorder`` then returns the same object every time), which skips
            the tests that need a second object on the same database.
    """

    reopenable: ClassVar[bool] = True

    # ------------------------------------------------------------------ hooks

    def make_recorder(self, **options: Any) -> EventStore:
        """A store object on this test's database, opened with ``options`` as the backend's
        constructor takes them. The kit passes exactly ``chain_key=`` (bytes), ``keyring=`` and
        ``adopt_key=``; a backend written when the chain key's argument was ``key=`` renames it
        or accepts both (:func:`eventlog.keycheck.chain_key_argument` warns on the old name)."""
        raise NotImplementedError(
            f"{type(self).__name__}: define make_recorder(self, **options) returning a store "
            "on the test's own database"
        )

    def tamper(self, store: EventStore, stream_id: str, seq: int, column: str, value: Any) -> None:
        """Overwrite one stored column of record ``seq`` of ``stream_id`` behind the store's
        back (``payload``, ``hash``, ``recorded_at``, ``stream_id``, ...)."""
        pytest.skip(f"{type(self).__name__} defines no tamper() hook")

    def delete_record(self, store: EventStore, stream_id: str, seq: int) -> None:
        """Delete one stored record behind the store's back."""
        pytest.skip(f"{type(self).__name__} defines no delete_record() hook")

    def reseal(self, store: EventStore, stream_id: str) -> None:
        """Recompute an unkeyed memory's head seal from its stored rows behind the store's
        back (``eventlog.hashing.head_mac(None, ...)``): what a forger without a key can do."""
        pytest.skip(f"{type(self).__name__} defines no reseal() hook")

    def set_setting(self, name: str, value: str | None) -> None:
        """Overwrite (``None``: delete) one stored setting behind the store's back."""
        pytest.skip(f"{type(self).__name__} defines no set_setting() hook")

    def get_setting(self, name: str) -> str | None:
        """One stored setting, read behind the store's back."""
        pytest.skip(f"{type(self).__name__} defines no get_setting() hook")

    def rename_stream(self, store: EventStore, old: str, new: str) -> None:
        """Move every record of stream ``old`` to stored key ``new`` behind the store's back.
        The default tampers each record's ``stream_id``."""
        for record in store.read(_stream(old)):
            self.tamper(store, old, record.seq, "stream_id", new)

    # ------------------------------------------------------------------ fixtures

    @pytest.fixture
    def backend(self, request: pytest.FixtureRequest) -> Iterator[Handle]:
        """The test's handle on the backend: opens stores, tampers behind their back."""
        if getattr(request.function, "_conformance_reopens", False) and not self.reopenable:
            pytest.skip(f"{type(self).__name__}: needs a second store object on one database")
        handle = Handle(self)
        try:
            yield handle
        finally:
            handle.close()

    @pytest.fixture
    def store(self, backend: Handle) -> EventStore:
        """A fresh, empty store of the backend."""
        return backend.open()

    @pytest.fixture
    def reopen(self, backend: Handle) -> Callable[..., EventStore]:
        """Opens another store object on the same database."""
        return backend.open


def _stream(key: str) -> Any:
    from eventlog.ids import StreamKey

    return StreamKey(key)


class Handle:
    """The contract tests' view of the backend under test (the ``backend`` fixture)."""

    def __init__(self, kit: Conformance) -> None:
        self._kit = kit
        self.opened: list[EventStore] = []
        self.reopenable = kit.reopenable

    def open(self, **options: Any) -> EventStore:
        store = self._kit.make_recorder(**options)
        self.opened.append(store)
        return store

    def tamper(self, store: EventStore, stream_id: str, seq: int, column: str, value: Any) -> None:
        self._kit.tamper(store, stream_id, seq, column, value)

    def delete_record(self, store: EventStore, stream_id: str, seq: int) -> None:
        self._kit.delete_record(store, stream_id, seq)

    def reseal(self, store: EventStore, stream_id: str) -> None:
        self._kit.reseal(store, stream_id)

    def set_setting(self, name: str, value: str | None) -> None:
        self._kit.set_setting(name, value)

    def get_setting(self, name: str) -> str | None:
        return self._kit.get_setting(name)

    def rename_stream(self, store: EventStore, old: str, new: str) -> None:
        self._kit.rename_stream(store, old, new)

    def close(self) -> None:
        for store in self.opened:
            store.close()
