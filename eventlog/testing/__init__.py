"""Conformance kits for chatledger backends: the store contract as pytest base classes.

A backend (ours, or a third party's) is conformant when it passes both::

    import pytest
    from eventlog import SQLiteEventStore
    from eventlog.testing import LedgerConformance, RecorderConformance


    class SQLiteKit:
        @pytest.fixture(autouse=True)
        def _database(self, tmp_path):
            self.path = tmp_path / "ledger.db"  # a fresh database for every test

        def make_recorder(self, **options):
            return SQLiteEventStore(self.path, **options)


    class TestSQLiteRecorder(SQLiteKit, RecorderConformance): ...


    class TestSQLiteLedger(SQLiteKit, LedgerConformance): ...

:class:`RecorderConformance` holds what a backend itself must get right: atomic appends with
expected positions, gapless seqs, ranges, bounds and limits, ids, concurrent writers, and
input validation - identical errors on every backend, because the kit says so.
:class:`LedgerConformance` holds what the ledger built on it must keep: hash chains and tamper
detection, verification reports, erasure and its receipts, keyed chains, encryption at rest and
the record format. The tests that attack stored rows behind the store's back need the hooks of
:class:`Conformance` (``tamper``, ``delete_record``, ``reseal``, ``set_setting``,
``get_setting``); a backend without them has those tests skipped, each saying why.

``make_recorder(**options)`` gets exactly ``chain_key=``, ``keyring=`` and ``adopt_key=`` from
the kit. The chain key's argument was ``key=`` before chatledger named its three keys: a
backend written then renames it, or accepts both with
:func:`eventlog.keycheck.chain_key_argument` (which warns on the old name).

Tests that assert on the global order (``read_all``, digests, proofs) right after writing
first call :func:`eventlog.testing.records.settled`, which waits until ``read_all`` shows every
committed record: PostgreSQL's holds records back while an older transaction runs anywhere on
the server, and a backend of yours may trail its commits too.

Needs pytest and freezegun (``pip install 'chatledger[test]'``).
"""

from __future__ import annotations

from eventlog.testing._base import Conformance, Handle, reopens
from eventlog.testing.append import AppendContract
from eventlog.testing.chain import ChainContract
from eventlog.testing.concurrency import ConcurrencyContract
from eventlog.testing.encryption import EncryptionContract
from eventlog.testing.erase import EraseContract
from eventlog.testing.format import FormatContract
from eventlog.testing.keyed import KeyedContract
from eventlog.testing.read import ReadContract
from eventlog.testing.rebuild import RebuildContract
from eventlog.testing.receipts import ReceiptsContract
from eventlog.testing.validation import ValidationContract
from eventlog.testing.verify_report import VerifyReportContract

__all__ = ["Conformance", "Handle", "LedgerConformance", "RecorderConformance", "reopens"]


class RecorderConformance(
    Conformance, AppendContract, ReadContract, ConcurrencyContract, ValidationContract
):
    """The backend's own contract: appends, reads, ids, bounds, concurrency, validation."""


class LedgerConformance(
    Conformance,
    ChainContract,
    VerifyReportContract,
    EraseContract,
    ReceiptsContract,
    KeyedContract,
    EncryptionContract,
    FormatContract,
    RebuildContract,
):
    """The ledger's contract on the backend: chains, verification, erasure, receipts, keys,
    encryption at rest, the record format and lost races settled in the append."""
