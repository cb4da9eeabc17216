"""A forger without the chain key moves a genuine erasure receipt's row to another place in
the global order. The receipt id names its position (its proof's leaf), so the lookup by id
misses; it must say the ledger was changed, not "no such receipt" - an audit reading the
latter would conclude the erasure was never done (or never issued)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventlog import SQLiteEventStore, find_receipt
from eventlog.errors import ChainIntegrityError
from eventlog.testing.records import batch
from projections.cli import main
from tests.conftest import PG_DSN, require_pg

KEY = b"k" * 32


def _erased(store: SQLiteEventStore) -> tuple[str, int]:
    store.append("alice", batch("hello", "secret"))
    receipt = store.erase("alice", reason="GDPR request")
    store.append("bob", batch("later"))
    return receipt.id, receipt.record.position


def test_a_moved_receipt_is_named_as_moved_on_sqlite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path, chain_key=KEY) as store:
        receipt_id, position = _erased(store)
    with sqlite3.connect(path) as conn:  # the forger: no key needed to renumber a row
        conn.execute("UPDATE events SET position = 1000 WHERE position = ?", (position,))
    with (
        SQLiteEventStore(path, chain_key=KEY) as store,
        pytest.raises(ChainIntegrityError, match=f"at position 1000, not {position}"),
    ):
        find_receipt(store, receipt_id)
    (tmp_path / "chain.key").write_bytes(KEY)
    key_file = str(tmp_path / "chain.key")
    status = main(["--db", str(path), "--key-file", key_file, "erasure-receipt", receipt_id])
    err = capsys.readouterr().err
    assert status != 0
    assert "global order was changed" in " ".join(err.split())


def test_a_receipt_edited_in_place_is_not_called_missing_only(tmp_path: Path) -> None:
    # An unkeyed ledger's forger can re-hash the receipt after editing it: the id then names
    # a receipt record of another hash. Still refused, and said to be another receipt.
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path) as store:
        receipt_id, position = _erased(store)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET hash = ? WHERE position = ?", ("e" * 64, position))
    with (
        SQLiteEventStore(path) as store,
        pytest.raises(LookupError, match=f"no such receipt.*record {position} is another receipt"),
    ):
        find_receipt(store, receipt_id)


@pytest.fixture
def schema() -> Iterator[str]:
    require_pg()
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'.encode())


def test_a_moved_receipt_is_named_as_moved_on_postgres(schema: str) -> None:
    import psycopg

    from eventlog.postgres import PostgresEventStore

    with PostgresEventStore(PG_DSN, schema=schema, chain_key=KEY) as store:
        store.append("alice", batch("hello", "secret"))
        receipt = store.erase("alice", reason="GDPR request")
        position = receipt.record.position
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            move = f'UPDATE "{schema}".events SET position = position + 1 WHERE position = %s'
            conn.execute(move.encode(), (position,))
        with pytest.raises(
            ChainIntegrityError, match=f"at position {position + 1}, not {position}"
        ):
            find_receipt(store, receipt.id)
