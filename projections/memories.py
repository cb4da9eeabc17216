"""MessageWindowChatMemory and TokenWindowChatMemory: LangChain4j's memories over the log.

This module owns the two public memories: their constructors, parameters and factories. What
they share is built below them: the ChatMemory methods in :mod:`projections.window_memory`, the
cached window kept in step with the log in :mod:`projections.logged_window`.
"""

from __future__ import annotations

from typing import Self

from eventlog.ids import MemoryId
from eventlog.store import EventStore
from projections.tokens import TokenCountEstimator
from projections.window import Limit, MessageWindowPolicy, TokenWindowPolicy

# DEFAULT (``messages(valid_for=DEFAULT)``) was defined here before the split: still importable.
from projections.window_memory import DEFAULT, _WindowChatMemory

__all__ = ["DEFAULT", "MessageWindowChatMemory", "TokenWindowChatMemory"]


class MessageWindowChatMemory(_WindowChatMemory):
    """LangChain4j's ``MessageWindowChatMemory``, with every change kept in the event log.

    Args:
        id: The memory id (str, int, UUID or a tuple of those). Default ``"default"``.
        max_messages: Window size, or a callable ``memory_id -> size`` consulted on every call.
        store: Where the log lives; default: a new :class:`InMemoryEventStore`.
        always_keep_system_message_first: Insert a replacement system message first.
        evict_to: Opt-in chunked eviction: when over the limit, evict down to this fraction
            of it (e.g. 0.7), so the sent prefix stays stable for many turns.
        valid_for: ``"openai"``, ``"anthropic"`` or ``"gemini"``: ``messages()`` returns a
            view that provider accepts (see :mod:`projections.validity`).

    Raises:
        ValueError: ``max_messages`` is None or <= 0
            (``"max_messages must be greater than zero, but is: 0"``).
        TypeError: ``id`` has an unsupported type.
    """

    def __init__(
        self,
        id: MemoryId = "default",
        max_messages: Limit | None = None,
        store: EventStore | None = None,
        always_keep_system_message_first: bool = False,
        *,
        evict_to: float | None = None,
        valid_for: str | None = None,
    ) -> None:
        policy = MessageWindowPolicy(
            max_messages,
            always_keep_system_message_first=always_keep_system_message_first,
            evict_to=evict_to,
        )
        super().__init__(id, policy, store, valid_for)

    @classmethod
    def with_max_messages(cls, max_messages: Limit) -> Self:
        """A memory with id ``"default"`` on its own in-memory store."""
        return cls(max_messages=max_messages)


class TokenWindowChatMemory(_WindowChatMemory):
    """LangChain4j's ``TokenWindowChatMemory``, with every change kept in the event log.

    Args:
        id: The memory id. Default ``"default"``.
        max_tokens: Token budget, or a callable ``memory_id -> budget``.
        token_count_estimator: E.g. ``OpenAiTokenCountEstimator("gpt-4o-mini")``.
        store: Where the log lives; default: a new :class:`InMemoryEventStore`.
        always_keep_system_message_first: Insert a replacement system message first.
        evict_to: Opt-in chunked eviction (see :class:`MessageWindowChatMemory`).
        valid_for: A provider profile for ``messages()`` (see :class:`MessageWindowChatMemory`).

    Raises:
        ValueError: ``max_tokens`` is None or <= 0, or the estimator is None.
    """

    def __init__(
        self,
        id: MemoryId = "default",
        max_tokens: Limit | None = None,
        token_count_estimator: TokenCountEstimator | None = None,
        store: EventStore | None = None,
        always_keep_system_message_first: bool = False,
        *,
        evict_to: float | None = None,
        valid_for: str | None = None,
    ) -> None:
        policy = TokenWindowPolicy(
            max_tokens,
            token_count_estimator,
            always_keep_system_message_first=always_keep_system_message_first,
            evict_to=evict_to,
        )
        super().__init__(id, policy, store, valid_for)

    @property
    def token_count_estimator(self) -> TokenCountEstimator:
        """The estimator counting this window's tokens."""
        assert isinstance(self._policy, TokenWindowPolicy)  # noqa: S101 - set in __init__
        return self._policy.estimator

    @classmethod
    def with_max_tokens(cls, max_tokens: Limit, token_count_estimator: TokenCountEstimator) -> Self:
        """A memory with id ``"default"`` on its own in-memory store."""
        return cls(max_tokens=max_tokens, token_count_estimator=token_count_estimator)
