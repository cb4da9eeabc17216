"""Run langchain-core's own chat-history tests against LedgerChatMessageHistory.

langchain-tests has no chat-history suite, so this takes langchain-core's: its source
distribution (pinned) ships ``tests/unit_tests/chat_history/test_chat_history.py`` and
``tests/unit_tests/runnables/test_history.py`` (``RunnableWithMessageHistory``), whose history
factories build ``InMemoryChatMessageHistory``. A plugin loaded before collection makes that
name a ``LedgerChatMessageHistory`` on its own in-memory ledger (same constructor: optional
``messages``), so every history those tests create, fill and read is stored as chatledger
events. langchain-core's test conftest also runs blockbuster, which fails a test when anything
blocks the event loop: the async paths are checked for that too.

    python scripts/langchain_core_tests.py        # exit 0 when every selected test passes

CI runs it (``.ci/run``). Needs network access to the package registry.
"""

from __future__ import annotations

import sys
import textwrap

from peer_suite import PeerSuite, certify

VERSION = "1.8.3"  # 1.8.4 needs langchain-protocol>=0.0.22, which the registry lacks
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

SUITE = PeerSuite(
    package="langchain-core",
    version=VERSION,
    extra="langchain",
    files=FILES,
    tools=TOOLS,
    plugin=PLUGIN,
    deselected=DESELECTED,
    ini=["asyncio_mode=auto"],
)


if __name__ == "__main__":
    sys.exit(certify(SUITE, sys.argv[1:]))
