"""Run langchain-core's own chat-history tests against LedgerChatMessageHistory.

langchain-tests has no chat-history suite, so this takes langchain-core's: its source
distribution (by default the newest of the range the ``langchain`` extra accepts) ships
``tests/unit_tests/chat_history/test_chat_history.py`` and
``tests/unit_tests/runnables/test_history.py`` (``RunnableWithMessageHistory``), whose history
factories build ``InMemoryChatMessageHistory``. A plugin loaded before collection makes that
name a ``LedgerChatMessageHistory`` on its own in-memory ledger (same constructor: optional
``messages``), so every history those tests create, fill and read is stored as chatledger
events. langchain-core's test conftest also runs blockbuster, which fails a test when anything
blocks the event loop: the async paths are checked for that too.

    python scripts/langchain_core_tests.py           # NEWEST: exit 0 when all selected pass
    python scripts/langchain_core_tests.py --oldest  # OLDEST (or --version X for any other)

CI runs it for both ends of the range (``.ci/run``). Needs network access to the package
registry.
"""

from __future__ import annotations

import sys
import textwrap

from peer_suite import PeerSuite, main

# The ends of the range the langchain extra accepts (tests/test_distribution.py holds them to
# pyproject.toml): OLDEST is its lower bound, NEWEST its upper bound.
OLDEST = "1.4.0"
NEWEST = "1.8.3"  # 1.8.4 needs langchain-protocol>=0.0.22, which the registry lacks
FILES = [
    "tests/unit_tests/chat_history/test_chat_history.py",
    "tests/unit_tests/runnables/test_history.py",
]
TOOLS = [
    "pytest>=8", "pytest-asyncio>=1.3", "pytest-mock", "syrupy", "freezegun",
    "blockbuster>=1.5.18,<1.6", "pytest-socket", "responses", "grandalf",
]  # fmt: skip

DESELECTED: dict[str, str] = {}

PLUGIN = textwrap.dedent(
    '''
    """Loaded with -p before collection: InMemoryChatMessageHistory is the ledger's."""
    import itertools

    import langchain_core.chat_history

    from eventlog import InMemoryEventStore
    from projections.adapters.langchain import LedgerChatMessageHistory

    _ids = itertools.count(1)


    class LedgerInMemoryChatMessageHistory(LedgerChatMessageHistory):
        """InMemoryChatMessageHistory's constructor over a fresh in-memory ledger."""

        __doc__ = langchain_core.chat_history.InMemoryChatMessageHistory.__doc__

        def __init__(self, messages=None, **kwargs):
            super().__init__(f"history-{next(_ids)}", store=InMemoryEventStore())
            if messages:
                self.add_messages(list(messages))

        def __eq__(self, other):
            # InMemoryChatMessageHistory is a pydantic model: equal when its messages are.
            if not isinstance(other, LedgerInMemoryChatMessageHistory):
                return NotImplemented
            return self.messages == other.messages

        __hash__ = None


    langchain_core.chat_history.InMemoryChatMessageHistory = LedgerInMemoryChatMessageHistory
    '''
)


def suite(version: str) -> PeerSuite:
    """langchain-core's chat-history tests as ``langchain-core==version`` ships them."""
    return PeerSuite(
        package="langchain-core",
        version=version,
        extra="langchain",
        files=FILES,
        tools=TOOLS,
        plugin=PLUGIN,
        deselected=DESELECTED,
        ini=["asyncio_mode=auto"],
    )


if __name__ == "__main__":
    sys.exit(main(suite, OLDEST, NEWEST, sys.argv[1:]))
