"""Run LangGraph's own graph tests with LedgerSaver as their SQLite checkpointers.

langgraph's source distribution (pinned) ships its tests; their ``sync_checkpointer`` and
``async_checkpointer`` fixtures build savers through ``tests/conftest_checkpointer.py``. A
plugin loaded before collection makes the ``sqlite``, ``sqlite_aes`` (an AES-encrypting serde:
values LedgerSaver cannot read as msgpack lists) and ``sqlite_aio`` ones a ``LedgerSaver`` on a
fresh chatledger SQLite file, whose chain must still verify when the test ends; ``-k sqlite``
selects the tests those savers run (with ``NO_DOCKER``: no Redis or PostgreSQL containers).
The plugin counts the tests that ran on a LedgerSaver.

    python scripts/langgraph_tests.py             # exit 0 when every selected test passes
    python scripts/langgraph_tests.py -x          # extra arguments go to pytest

CI runs it (``.ci/run``). Needs network access to the package registry.
"""

from __future__ import annotations

import sys
import textwrap

from peer_suite import PeerSuite, certify

VERSION = "1.2.24"
FILES = [
    f"tests/{name}.py"
    for name in (
        "test_pregel", "test_pregel_async", "test_time_travel", "test_time_travel_async",
        "test_interruption", "test_interrupt_state", "test_strict_resume",
        "test_subgraph_persistence", "test_subgraph_persistence_async",
        "test_large_cases", "test_large_cases_async", "test_checkpoint_migration",
        "test_pydantic", "test_delta_channel_exit_mode", "test_delta_channel_fork",
        "test_delta_channel_parallel_order", "test_delta_channel_subgraph",
        "test_delta_channel_to_plain", "test_delta_channel_update_state",
    )
]  # fmt: skip
TOOLS = [
    "pytest>=8", "pytest-asyncio", "anyio", "pytest-mock", "syrupy", "httpx", "pytest-repeat",
    "langgraph-prebuilt", "langgraph-sdk", "pycryptodome", "redis",
    "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres", "psycopg[binary]",
]  # fmt: skip

PLUGIN = textwrap.dedent(
    '''
    """Loaded with -p before collection: LangGraph's "sqlite" checkpointers are LedgerSaver."""
    import os
    import sys
    import tempfile
    from contextlib import asynccontextmanager, contextmanager
    from pathlib import Path

    import pytest

    os.environ["NO_DOCKER"] = "true"  # read by the tests' conftest: no containers
    sys.path.insert(0, os.getcwd())  # the sdist's root: `tests` is a package there

    import tests.conftest_checkpointer as peer
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    from eventlog import SQLiteEventStore
    from projections.adapters.langgraph import LedgerSaver

    _made = [0]
    _on_ledger = []


    @contextmanager
    def _ledger(serde=None):
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLiteEventStore(Path(tmp) / "ledger.db")
            try:
                saver = LedgerSaver(store, serde=serde)
                peer._apply_strict_msgpack(saver)
                _made[0] += 1
                yield saver
                report = store.verify()
                assert report.ok, report.failures
            finally:
                store.close()


    @contextmanager
    def _checkpointer_sqlite():
        with _ledger() as saver:
            yield saver


    @contextmanager
    def _checkpointer_sqlite_aes():
        serde = EncryptedSerializer.from_pycryptodome_aes(key=b"1234567890123456")
        with _ledger(serde) as saver:
            yield saver


    @asynccontextmanager
    async def _checkpointer_sqlite_aio():
        with _ledger() as saver:
            yield saver


    peer._checkpointer_sqlite = _checkpointer_sqlite
    peer._checkpointer_sqlite_aes = _checkpointer_sqlite_aes
    peer._checkpointer_sqlite_aio = _checkpointer_sqlite_aio


    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        before = _made[0]
        yield
        if _made[0] > before:
            _on_ledger.append(item.nodeid)


    def pytest_terminal_summary(terminalreporter):
        terminalreporter.write_line(f"tests that ran on a LedgerSaver: {len(_on_ledger)}")
    '''
)

SUITE = PeerSuite(
    package="langgraph",
    version=VERSION,
    extra="langgraph",
    files=FILES,
    tools=TOOLS,
    plugin=PLUGIN,
    ini=["filterwarnings=ignore::DeprecationWarning"],
)


if __name__ == "__main__":
    sys.exit(certify(SUITE, ["-k", "sqlite", *sys.argv[1:]]))
