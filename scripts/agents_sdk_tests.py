"""Certify LedgerSession with the OpenAI Agents SDK's own session tests.

Downloads an ``openai-agents`` source distribution (it ships its ``tests/``), by default the
newest of the range the ``openai-agents`` extra accepts, builds a throwaway venv with chatledger
and the SDK's test tools, and runs the SDK's session test files with ``SQLiteSession`` replaced
everywhere by a ``LedgerSession`` that takes SQLiteSession's constructor (``db_path`` becomes a
chatledger SQLite file; ``":memory:"`` an in-memory store). Tests that inspect SQLite internals
(tables, raw SQL, connections, worker threads, private hooks) cannot apply to another storage
and are deselected, each with its reason below, as are those that run the SDK's own
AsyncSQLiteSession (the plugin leaves it alone, so they say nothing about chatledger). The
failures those tests inject have equivalents on our stores in
``tests/adapters/test_openai_agents_faults.py``. The summary says how many of the passed tests
built a LedgerSession: many run only on the SDK's mocks and in-memory list sessions.

    python scripts/agents_sdk_tests.py            # NEWEST: exit 0 when every selected test passes
    python scripts/agents_sdk_tests.py --oldest   # OLDEST (or --version X for any other)
    python scripts/agents_sdk_tests.py -k pop -x  # extra arguments go to pytest

CI runs it for both ends of the range (``.ci/run``). Needs network access to the package
registry.
"""

from __future__ import annotations

import sys
import textwrap

from peer_suite import PeerSuite, main, release

# The ends of the range the openai-agents extra accepts (tests/test_distribution.py holds them to
# pyproject.toml): OLDEST is its lower bound, NEWEST the newest release below its upper bound.
OLDEST = "0.19.0"
NEWEST = "0.24.0"
# test file -> the first version whose sdist ships it
FILES = {
    "tests/memory/test_session.py": OLDEST,
    "tests/memory/test_session_limit.py": OLDEST,
    "tests/memory/test_session_context_wrapper.py": "0.20.0",
    "tests/extensions/memory/test_encrypt_session.py": OLDEST,
    "tests/memory/test_openai_responses_compaction_session.py": OLDEST,
    "tests/memory/test_compaction_model_visibility.py": "0.23.1",
    "tests/memory/test_compaction_suffix.py": "0.23.1",
}
# aiosqlite: test_compaction_suffix.py skips as a whole without it (its async half is deselected)
TOOLS = [
    "pytest>=8",
    "pytest-asyncio",
    "pytest-mock",
    "inline-snapshot",
    "cryptography",
    "aiosqlite",
]

# test id (prefix) -> why it cannot apply to a session stored in chatledger (or does not run
# one); a version whose sdist lacks the test does not deselect (nor report) it
_THREADS = "checks SQLiteSession's per-thread sqlite3 connections"
_CORRUPT = "writes corrupt JSON rows into SQLite's agent_messages table with raw SQL"
_FAULTS = "injects sqlite3 errors through SQLiteSession's private connection objects"
_PAUSED = "pauses a commit inside a custom sqlite3.Connection put in SQLiteSession's pool"
_TRIGGER = "creates a trigger on SQLite's agent_messages table with raw SQL"
_ASYNC = "runs the SDK's own AsyncSQLiteSession (aiosqlite), which the plugin does not replace"
_SESSION = "tests/memory/test_session.py::test_sqlite_session_"
_ENCRYPT = "tests/extensions/memory/test_encrypt_session.py::test_encrypted_"
_COMPACT = "tests/memory/test_openai_responses_compaction_session.py::"
_SUFFIX = "tests/memory/test_compaction_suffix.py::test_"
# test_compaction_suffix.py runs each test on SQLiteSession ([sqlite...], ours here) and on
# AsyncSQLiteSession ([async-sqlite...]); only the first half says anything about chatledger.
_SUFFIX_TESTS = [
    "expired_prefix_does_not_block_full_live_window",
    "suffix_transaction_rolls_back_failed_insert",
    "new_backend_write_invalidates_snapshot",
    "partial_previous_response_mode_preserves_history",
    "cancelled_suffix_transaction_settles_before_newer_append",
    "failed_encrypted_suffix_transaction_preserves_original_tokens",
    "repeated_ttl_bursts_do_not_accumulate_expired_rows",
    "prefix_cleanup_stops_before_retained_history",
    "partial_compaction_does_not_split_tool_call_and_output",
    "unverifiable_rows_inside_snapshot_are_retained",
    "partial_compaction_preserves_reasoning_and_its_follower",
]
DESELECTED: dict[str, str] = {
    f"{_SESSION}close_closes_worker_thread_connections": _THREADS,
    f"{_SESSION}reaps_connections_from_exited_worker_threads": _THREADS,
    f"{_SESSION}closes_retired_connections_before_the_next_allocation": _THREADS,
    f"{_SESSION}keeps_connections_of_live_worker_threads": _THREADS,
    f"{_SESSION}pop_item_skips_corrupt_most_recent": _CORRUPT,
    f"{_SESSION}pop_item_returns_none_after_dropping_only_corrupt_rows": _CORRUPT,
    f"{_SESSION}get_items_limit_skips_corrupt_newest_rows": _CORRUPT,
    f"{_SESSION}get_items_session_settings_limit_skips_corrupt_rows": _CORRUPT,
    f"{_SESSION}file_lock_is_shared_across_instances":
        "checks SQLiteSession's process-local registry of file locks",
    f"{_SESSION}failed_add_items_releases_write_lock": _FAULTS,
    f"{_SESSION}failed_clear_session_rolls_back": _FAULTS,
    f"{_SESSION}failed_pop_item_releases_write_lock": _FAULTS,
    f"{_SESSION}rollback_failure_evicts_connection": _FAULTS,
    f"{_SESSION}close_retries_quarantined_connection": _FAULTS,
    f"{_SESSION}post_commit_cancellation_propagates_after_known_outcome": _PAUSED,
    f"{_ENCRYPT}compaction_skips_unencrypted_stored_history":
        "relies on SQLiteSession's private compaction snapshot (its row ids)",
    f"{_ENCRYPT}pop_authentication_is_atomic_with_concurrent_mutations":
        "asserts SQLite's own write lock (BEGIN IMMEDIATE fails) and raw agent_messages rows",
    f"{_ENCRYPT}pop_wrong_key_preserves_row_identity":
        "compares raw agent_messages rows (SQLite row ids)",
    f"{_COMPACT}TestOpenAIResponsesCompactionSession::"
    "test_settled_pop_failure_invalidates_response_chain": _PAUSED,
    f"{_COMPACT}TestOpenAIResponsesCompactionSession::"
    "test_settled_clear_failure_invalidates_response_chain": _PAUSED,
    f"{_SUFFIX}suffix_transaction_rolls_back_failed_insert[sqlite": _TRIGGER,
    f"{_SUFFIX}failed_encrypted_suffix_transaction_preserves_original_tokens[sqlite": _TRIGGER,
    f"{_SUFFIX}cancelled_suffix_transaction_settles_before_newer_append[sqlite":
        "gates SQLiteSession's private _insert_items inside its write transaction",
    **{f"{_SUFFIX}{name}[async-sqlite": _ASYNC for name in _SUFFIX_TESTS},
}  # fmt: skip

PLUGIN = textwrap.dedent(
    '''
    """Loaded with -p before collection: SQLiteSession is LedgerSession from here on."""
    from pathlib import Path

    import pytest

    import agents
    import agents.memory
    import agents.memory.sqlite_session

    from eventlog import InMemoryEventStore, SQLiteEventStore
    from projections.adapters.openai_agents import LedgerSession


    class LedgerSQLiteSession(LedgerSession):
        """LedgerSession with SQLiteSession's constructor."""

        def __init__(
            self,
            session_id,
            db_path=":memory:",
            sessions_table="agent_sessions",
            messages_table="agent_messages",
            session_settings=None,
        ):
            if str(db_path) == ":memory:":
                store = InMemoryEventStore()
            else:
                store = SQLiteEventStore(Path(db_path))
            super().__init__(session_id, store=store, session_settings=session_settings)
            self.db_path = db_path
            if _running[0] is not None:
                _ran_ledger.add(_running[0])

        def close(self):
            super().close()
            self.store.close()

        async def _pop_item_with_validation(self, validate=None):
            # EncryptedSession authenticates SQLiteSession's tail before removing it; the
            # ledger's pop takes the same check and writes nothing when it raises.
            return await self.pop_item(check=validate)


    # Which passed tests built a LedgerSession: many of the SDK's session tests (the compaction
    # session's above all) run only on mocks or the SDK's own in-memory list sessions.
    _running: list[str | None] = [None]
    _ran_ledger: set[str] = set()
    _passed: set[str] = set()


    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        _running[0] = item.nodeid
        try:
            return (yield)
        finally:
            _running[0] = None


    def pytest_runtest_logreport(report):
        if report.when == "call" and report.passed:
            _passed.add(report.nodeid)


    def pytest_terminal_summary(terminalreporter):
        ran = len(_passed & _ran_ledger)
        terminalreporter.write_line(f"chatledger: {ran} of the passed tests ran a LedgerSession")


    agents.SQLiteSession = LedgerSQLiteSession
    agents.memory.SQLiteSession = LedgerSQLiteSession
    agents.memory.sqlite_session.SQLiteSession = LedgerSQLiteSession
    '''
)


def suite(version: str) -> PeerSuite:
    """The SDK's session tests that ``openai-agents==version`` ships."""
    files = [f for f, since in FILES.items() if release(version) >= release(since)]
    return PeerSuite(
        package="openai-agents",
        version=version,
        extra="openai-agents",
        files=files,
        tools=TOOLS,
        plugin=PLUGIN,
        deselected=DESELECTED,
    )


if __name__ == "__main__":
    sys.exit(main(suite, OLDEST, NEWEST, sys.argv[1:]))
