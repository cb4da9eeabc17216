"""``chain_key=`` names the chain's HMAC key; ``key=``, its old name, still works with a
DeprecationWarning that points at the caller's line, and giving both is refused before
anything is opened."""

from __future__ import annotations

import inspect
import sys

import pytest

from eventlog import InMemoryEventStore, SQLiteEventStore, check_receipt, verify_inclusion
from eventlog.ledger import digest, prove
from eventlog.testing.records import batch
from tests.conftest import PG_DSN

KEY = b"k" * 32
OTHER = b"o" * 32


def _open_old_way(name, tmp_path, schema, **options):
    """Open a store of backend ``name`` the way code written before ``chain_key=`` does."""
    if name == "memory":
        return InMemoryEventStore(**options)
    if name == "sqlite":
        return SQLiteEventStore(tmp_path / "events.db", **options)
    from eventlog.postgres import PostgresEventStore

    return PostgresEventStore(PG_DSN, schema=schema, **options)


def test_key_is_the_deprecated_name_of_chain_key(backend, tmp_path):
    deprecated = r"\(key=\.\.\.\) is deprecated: pass chain_key="
    with pytest.warns(DeprecationWarning, match=deprecated) as w:
        store = _open_old_way(backend.name, tmp_path, backend.schema, key=KEY)
    backend.opened.append(store)
    # Check the warning names the caller's line (the constructor call in _open_old_way), not
    # the store's own code nor the line that called _open_old_way.
    lines, first = inspect.getsourcelines(_open_old_way)
    calls = {first + i for i, line in enumerate(lines) if "EventStore(" in line}
    assert (w[0].filename, w[0].lineno in calls) == (__file__, True)
    # Check the old name still keys the ledger: format 3 records, read back under chain_key=.
    written = store.append("u1", batch("a", "b"))
    assert [r.format for r in written] == [3, 3]
    if backend.name != "memory":
        store.close()
        again = backend.open(chain_key=KEY)
        assert [r.hash for r in again.read("u1")] == [r.hash for r in written]
        assert again.verify().ok


def test_both_names_at_once_are_refused_before_anything_is_opened(backend, tmp_path):
    with pytest.raises(TypeError, match="got both chain_key= and key="):
        _open_old_way(backend.name, tmp_path, backend.schema, chain_key=KEY, key=KEY)
    if backend.name == "sqlite":
        assert not (tmp_path / "events.db").exists()
    if backend.name == "postgres":
        import psycopg

        with psycopg.connect(PG_DSN) as conn:
            found = conn.execute(
                "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s",
                (backend.schema,),
            ).fetchall()
        assert found == []


def test_a_wrong_chain_key_is_named_as_such():
    with pytest.raises(TypeError, match="chain_key must be bytes, not str"):
        InMemoryEventStore(chain_key="k" * 32)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chain_key is 8 bytes, shorter than 16"):
        InMemoryEventStore(chain_key=b"k" * 8)


def test_the_offline_checks_take_the_old_name_too():
    store = InMemoryEventStore(chain_key=KEY)
    store.append("u1", batch("a", "b"))
    d = digest(store)
    proof = prove(store, "u1", 2, digest=d)
    assert verify_inclusion(proof, d, chain_key=KEY)
    line = sys._getframe().f_lineno + 2
    with pytest.warns(DeprecationWarning, match=r"verify_inclusion\(key=\.\.\.\)") as w:
        assert verify_inclusion(proof, d, key=KEY)
    assert (w[0].filename, w[0].lineno) == (__file__, line)
    with pytest.warns(DeprecationWarning):
        assert not verify_inclusion(proof, d, key=OTHER)
    with pytest.raises(TypeError, match="verify_inclusion: got both"):
        verify_inclusion(proof, d, chain_key=KEY, key=KEY)


def test_check_receipt_takes_the_old_name_too():
    from eventlog import receipt_bundle

    store = InMemoryEventStore(chain_key=KEY)
    store.append("u1", batch("a", "b"))
    receipt = store.erase("u1", reason="asked")
    trusted = digest(store)
    text = receipt_bundle(store, receipt, digest=trusted)
    assert check_receipt(text, trusted, chain_key=KEY).ok
    line = sys._getframe().f_lineno + 2
    with pytest.warns(DeprecationWarning, match=r"check_receipt\(key=\.\.\.\)") as w:
        assert check_receipt(text, trusted, key=KEY).ok
    assert (w[0].filename, w[0].lineno) == (__file__, line)
    with pytest.raises(TypeError, match="check_receipt: got both"):
        check_receipt(text, trusted, chain_key=KEY, key=KEY)
