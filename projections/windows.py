"""LangChain4j's window rules as pure functions over a list of entries; no I/O.

Each function mirrors one LangChain4j method (``ensureCapacity`` of the message and token
windows, the system-message part of ``add``) step for step - including the quirks the reference
documents (the orphan cascade can over-evict, the token total keeps its +3 reply priming because
it is decremented rather than recomputed, a lone system message over the token limit is kept).
The memories, replay and what-if all call these, so there is one implementation of the rules.
"""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Literal, NamedTuple, TypeAlias

from eventlog.ids import MemoryId
from eventlog.messages import AiMessage, ChatMessage, SystemMessage, ToolExecutionResultMessage
from projections.tokens import TokenCountEstimator

__all__ = [
    "Entry",
    "Limit",
    "MessageWindowPolicy",
    "Reason",
    "Removal",
    "TokenWindowPolicy",
    "WindowPolicy",
    "add_with_system_rules",
]

Limit: TypeAlias = "int | Callable[[MemoryId], int | None]"
"""A window size: a fixed int or LangChain4j's dynamic provider ``memory_id -> int``."""

Reason: TypeAlias = Literal["evicted", "orphan", "system_replaced"]
"""Why a message left the window during an add or set (clear and set have their own)."""


class Entry(NamedTuple):
    """One message in a window, with where it came from in the log.

    Attributes:
        message: The message.
        ref: ``(seq, index)``: the event that brought it (index within a ``set`` list, else 0).
        tokens: Its count under the window's estimator; None when not counted (message window).
    """

    message: ChatMessage
    ref: tuple[int, int]
    tokens: int | None = None


class Removal(NamedTuple):
    """An entry that left the window, and why."""

    entry: Entry
    reason: Reason


_TOKENS = operator.attrgetter("tokens")


def _is_ai_with_requests(message: ChatMessage) -> bool:
    return isinstance(message, AiMessage) and bool(message.tool_execution_requests)


def check_limit(name: str, value: object) -> int:
    """LangChain4j's ``ensureGreaterThanZero`` with Python names: ``max_messages must be ...``."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        msg = f"{name} must be greater than zero, but is: {value}"
        raise ValueError(msg)
    return value


class WindowPolicy(ABC):
    """A window's rule set: its limit (static or dynamic) and how it counts and evicts.

    Args:
        limit: The window size, or a callable ``memory_id -> size`` consulted on every call.
        always_keep_system_message_first: Insert a replacement system message at index 0
            instead of at the end.
    """

    limit_name: str

    def __init__(
        self, limit: Limit | None, *, always_keep_system_message_first: bool = False
    ) -> None:
        if limit is None:
            msg = f"{self.limit_name} must be greater than zero, but is: None"
            raise ValueError(msg)
        if not callable(limit):
            check_limit(self.limit_name, limit)
        self._limit: Limit = limit
        self.always_keep_system_message_first = bool(always_keep_system_message_first)

    def limit_for(self, memory_id: MemoryId) -> int:
        """The current limit for ``memory_id``, validated (> 0) as LangChain4j does on each call.

        Raises:
            ValueError: ``"<name> must be greater than zero, but is: <value>"``.
        """
        value = self._limit(memory_id) if callable(self._limit) else self._limit
        return check_limit(self.limit_name, value)

    @abstractmethod
    def count(self, message: ChatMessage) -> int | None:
        """The message's cost as recorded with it (tokens), or None when not counted."""

    @abstractmethod
    def total(self, entries: Sequence[Entry]) -> int:
        """What the limit is compared with for ``entries`` (message count or token total)."""

    @abstractmethod
    def ensure_capacity(self, entries: list[Entry], limit: int) -> list[Removal]:
        """Evict from the front of ``entries`` (in place) until it fits ``limit``."""

    @property
    @abstractmethod
    def identity(self) -> str:
        """Identifies how costs are counted; recorded counts are reused only on a match."""

    def fits(self, entries: Sequence[Entry], limit: int) -> bool:
        """True when ``ensure_capacity`` would evict nothing (cheap; no copy)."""
        return not entries or self.total(entries) <= limit


class MessageWindowPolicy(WindowPolicy):
    """LangChain4j's ``MessageWindowChatMemory`` rules: at most ``max_messages`` messages."""

    limit_name = "max_messages"

    def __init__(
        self, max_messages: Limit | None, *, always_keep_system_message_first: bool = False
    ) -> None:
        super().__init__(
            max_messages, always_keep_system_message_first=always_keep_system_message_first
        )

    def count(self, message: ChatMessage) -> int | None:
        return None

    def total(self, entries: Sequence[Entry]) -> int:
        return len(entries)

    @property
    def identity(self) -> str:
        return "messages"

    def ensure_capacity(self, entries: list[Entry], limit: int) -> list[Removal]:
        removed: list[Removal] = []
        while len(entries) > limit:
            index = 1 if isinstance(entries[0].message, SystemMessage) else 0
            evicted = entries.pop(index)
            removed.append(Removal(evicted, "evicted"))
            if _is_ai_with_requests(evicted.message):
                # Orphan cascade (LangChain4j #585): a tool result must follow its request.
                while len(entries) > index and isinstance(
                    entries[index].message, ToolExecutionResultMessage
                ):
                    removed.append(Removal(entries.pop(index), "orphan"))
        return removed


class TokenWindowPolicy(WindowPolicy):
    """LangChain4j's ``TokenWindowChatMemory`` rules: at most ``max_tokens`` tokens.

    Each message is counted once, when it enters the log, and the count is recorded with it.
    With an estimator that declares ``messages_overhead`` (the OpenAI one does), the window
    total is that overhead plus the recorded counts - exactly the estimator's list count
    without re-tokenizing the window. Any other estimator gets its list count called, as
    LangChain4j does.
    """

    limit_name = "max_tokens"

    def __init__(
        self,
        max_tokens: Limit | None,
        estimator: TokenCountEstimator | None,
        *,
        always_keep_system_message_first: bool = False,
    ) -> None:
        super().__init__(
            max_tokens, always_keep_system_message_first=always_keep_system_message_first
        )
        if estimator is None:
            msg = "token_count_estimator cannot be None"
            raise ValueError(msg)
        for method in (
            "estimate_token_count_in_text",
            "estimate_token_count_in_message",
            "estimate_token_count_in_messages",
        ):
            if not callable(getattr(estimator, method, None)):
                msg = (
                    f"token_count_estimator {estimator!r} has no {method}(); pass an "
                    "OpenAiTokenCountEstimator or any object with the three estimate methods"
                )
                raise TypeError(msg)
        self.estimator = estimator
        overhead = getattr(estimator, "messages_overhead", None)
        self._overhead: int | None = overhead if isinstance(overhead, int) else None
        identity = getattr(estimator, "identity", None)
        self._identity = (
            identity
            if isinstance(identity, str)
            else f"{type(estimator).__qualname__}@{id(estimator)}"
        )

    def count(self, message: ChatMessage) -> int:
        return int(self.estimator.estimate_token_count_in_message(message))

    def _tokens(self, entry: Entry) -> int:
        return entry.tokens if entry.tokens is not None else self.count(entry.message)

    @property
    def identity(self) -> str:
        return self._identity

    def total(self, entries: Sequence[Entry]) -> int:
        if self._overhead is not None:
            try:
                # Every entry of a live token window carries its count: a C-level sum.
                return self._overhead + int(sum(map(_TOKENS, entries)))
            except TypeError:  # some entry was never counted (None)
                return self._overhead + sum(self._tokens(e) for e in entries)
        return int(self.estimator.estimate_token_count_in_messages([e.message for e in entries]))

    def ensure_capacity(self, entries: list[Entry], limit: int) -> list[Removal]:
        removed: list[Removal] = []
        if not entries:
            return removed  # LangChain4j never calls the estimator with an empty list (#2201)
        # Computed once, then decremented: the reply priming stays in the running total.
        current = self.total(entries)
        while current > limit and entries:
            index = 0
            if isinstance(entries[0].message, SystemMessage):
                if len(entries) == 1:
                    return removed  # a lone system message is kept even over the limit
                index = 1
            evicted = entries.pop(index)
            current -= self._tokens(evicted)
            removed.append(Removal(evicted, "evicted"))
            if _is_ai_with_requests(evicted.message):
                while len(entries) > index and isinstance(
                    entries[index].message, ToolExecutionResultMessage
                ):
                    orphan = entries.pop(index)
                    current -= self._tokens(orphan)
                    removed.append(Removal(orphan, "orphan"))
        return removed


def add_with_system_rules(
    entries: list[Entry], entry: Entry, *, keep_system_first: bool
) -> tuple[bool, list[Removal]]:
    """Steps 2-3 of LangChain4j's ``add``: system-message dedup/replacement, then insertion.

    Args:
        entries: The window (already trimmed by step 1); changed in place.
        entry: The new entry.
        keep_system_first: Insert a system message at index 0 instead of at the end.

    Returns:
        ``(changed, removals)``; ``changed`` is False when the same system message is already
        the first system message - LangChain4j then returns without writing anything.
    """
    removals: list[Removal] = []
    message = entry.message
    if isinstance(message, SystemMessage):
        first = next((e for e in entries if isinstance(e.message, SystemMessage)), None)
        if first is not None:
            if first.message == message:
                return False, removals
            entries.remove(first)
            removals.append(Removal(first, "system_replaced"))
        if keep_system_first:
            entries.insert(0, entry)
            return True, removals
    entries.append(entry)
    return True, removals
