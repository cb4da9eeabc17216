"""The window: LangChain4j's rules as one pure state machine; no I/O.

A :class:`WindowPolicy` says how a window counts and evicts (``ensureCapacity`` of LangChain4j's
message and token windows, step for step, including the quirks the reference documents: the
orphan cascade can over-evict, the token total keeps its reply priming because it is decremented
rather than recomputed, a lone system message over the token limit is kept). A :class:`Window`
composes those rules into LangChain4j's ``add``, ``set`` and ``clear`` and reports every message
that leaves as a :class:`Departure` with its reason.

Every path folds the same :class:`Window`: the live memories, replay and what-if, and the
audit's "why did it leave" (which replays with the limit each event recorded). A rule written
twice drifts, so there is no other copy.
"""

from __future__ import annotations

import math
import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Literal, NamedTuple, TypeAlias

from eventlog.ids import MemoryId
from eventlog.messages import AiMessage, ChatMessage, SystemMessage, ToolExecutionResultMessage
from eventlog.validation import MAX_SEQ, shown
from projections.tokens import TokenCountEstimator

__all__ = [
    "Departure",
    "Entry",
    "Limit",
    "MessageWindowPolicy",
    "Reason",
    "TokenWindowPolicy",
    "Window",
    "WindowPolicy",
    "set_system_refs",
]

Limit: TypeAlias = "int | Callable[[MemoryId], int | None]"
"""A window size: a fixed int or LangChain4j's dynamic provider ``memory_id -> int``."""

Reason: TypeAlias = Literal["evicted", "orphan", "system_replaced", "set", "cleared", "retracted"]
"""Why a message left the window:

* ``"evicted"``: the window was over its limit (LangChain4j's ``ensureCapacity``);
* ``"orphan"``: a tool result whose AI tool request was evicted just before it;
* ``"system_replaced"``: a different system message replaced it;
* ``"set"``: ``memory.set`` replaced the whole content;
* ``"cleared"``: ``memory.clear``, or a retention purge;
* ``"retracted"``: taken back (an OpenAI Agents session's ``pop_item``).
"""


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


class Departure(NamedTuple):
    """An entry that left the window, and why.

    Attributes:
        entry: The message with the ref of the event that brought it.
        reason: Why it left.
    """

    entry: Entry
    reason: Reason


_TOKENS = operator.attrgetter("tokens")


def _is_ai_with_requests(message: ChatMessage) -> bool:
    return isinstance(message, AiMessage) and bool(message.tool_execution_requests)


def evict_permille(evict_to: object) -> int | None:
    """``evict_to`` (a fraction in (0, 1)) as thousandths, validated.

    Raises:
        ValueError: It is not a number strictly between 0 and 1, or rounds to 0 or 1000.
    """
    if evict_to is None:
        return None
    if (
        isinstance(evict_to, bool)
        or not isinstance(evict_to, int | float)
        # round() of inf is an OverflowError, of nan a ValueError of its own
        or (isinstance(evict_to, float) and not math.isfinite(evict_to))
    ):
        msg = f"evict_to must be a fraction of the limit such as 0.7, but is: {shown(evict_to)}"
        raise ValueError(msg)
    permille = round(evict_to * 1000)
    if not 0 < permille < 1000:
        msg = (
            f"evict_to must be between 0 and 1 (exclusive), e.g. 0.7 to evict down to 70 % of "
            f"the limit, but is: {shown(evict_to)}"
        )
        raise ValueError(msg)
    return permille


def check_limit(name: str, value: object) -> int:
    """LangChain4j's ``ensureGreaterThanZero`` with Python names: ``max_messages must be ...``."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        # An int through shown(): one too long to print is named by its size.
        given = shown(value) if isinstance(value, int) else value
        msg = f"{name} must be greater than zero, but is: {given}"
        if value is not None and type(value) is not int:
            # A limit read from a config file arrives as "20": LangChain4j's text alone
            # ("but is: 20") would hide why 20 was refused.
            msg += f" (a {type(value).__name__}, {shown(value)}; pass an int)"
        raise ValueError(msg)
    if value > MAX_SEQ:
        # LangChain4j's limit is a Java int; ours is recorded in every window record, which
        # could not even write an int past 4,300 digits. No ledger holds 2**63 messages.
        msg = f"{name} must be at most {MAX_SEQ}, but is: {shown(value)}"
        raise ValueError(msg)
    return value


def check_policy(operation: str, policy: object) -> None:
    """Refuse, naming ``operation``, anything but a :class:`WindowPolicy` (a string such as
    ``"messages:20"`` is the CLI's spelling, not the API's).

    Raises:
        TypeError: ``policy`` is not a :class:`WindowPolicy`.
    """
    if not isinstance(policy, WindowPolicy):
        msg = (
            f"{operation}: policy must be a WindowPolicy such as MessageWindowPolicy(20) or "
            f"TokenWindowPolicy(2000, estimator), not {type(policy).__name__} {shown(policy)}"
        )
        raise TypeError(msg)


class WindowPolicy(ABC):
    """A window's rule set: its limit (static or dynamic) and how it counts and evicts.

    Args:
        limit: The window size, or a callable ``memory_id -> size`` consulted on every call.
        always_keep_system_message_first: Insert a replacement system message at index 0
            instead of at the end.
        evict_to: Chunked eviction (opt-in): once the window is over its limit, evict down to
            this fraction of the limit (e.g. 0.7) instead of just under it, so the messages
            sent stay a stable prefix for many turns (prompt caches hit). None: LangChain4j's
            rule (evict until it fits).
    """

    limit_name: str

    def __init__(
        self,
        limit: Limit | None,
        *,
        always_keep_system_message_first: bool = False,
        evict_to: float | None = None,
    ) -> None:
        if limit is None:
            msg = f"{self.limit_name} must be greater than zero, but is: None"
            raise ValueError(msg)
        if not callable(limit):
            check_limit(self.limit_name, limit)
        self._limit: Limit = limit
        self.always_keep_system_message_first = bool(always_keep_system_message_first)
        self.evict_permille: int | None = evict_permille(evict_to)
        """The low-water mark in thousandths of the limit (None: LangChain4j's rule). Kept as
        an int because it is recorded in the log, and a float's text is not canonical."""

    @property
    def evict_to(self) -> float | None:
        """The chunked-eviction fraction (None: LangChain4j's rule)."""
        return None if self.evict_permille is None else self.evict_permille / 1000

    def low_water(self, limit: int) -> int:
        """What an over-limit window is trimmed down to: the limit itself under LangChain4j's
        rule, else ``evict_to`` of it (at least 1)."""
        if self.evict_permille is None:
            return limit
        return max(1, limit * self.evict_permille // 1000)

    @property
    def static_limit(self) -> int | None:
        """The limit when it is a fixed int (None: a callable, consulted on every call)."""
        return None if callable(self._limit) else self._limit

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
    def ensure_capacity(self, entries: list[Entry], limit: int) -> list[Departure]:
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
        self,
        max_messages: Limit | None,
        *,
        always_keep_system_message_first: bool = False,
        evict_to: float | None = None,
    ) -> None:
        super().__init__(
            max_messages,
            always_keep_system_message_first=always_keep_system_message_first,
            evict_to=evict_to,
        )

    def count(self, message: ChatMessage) -> int | None:
        return None

    def total(self, entries: Sequence[Entry]) -> int:
        return len(entries)

    @property
    def identity(self) -> str:
        return "messages"

    def ensure_capacity(self, entries: list[Entry], limit: int) -> list[Departure]:
        removed: list[Departure] = []
        if len(entries) <= limit:
            return removed
        target = self.low_water(limit)
        while len(entries) > target:
            index = 1 if isinstance(entries[0].message, SystemMessage) else 0
            evicted = entries.pop(index)
            removed.append(Departure(evicted, "evicted"))
            if _is_ai_with_requests(evicted.message):
                # Orphan cascade (LangChain4j #585): a tool result must follow its request.
                while len(entries) > index and isinstance(
                    entries[index].message, ToolExecutionResultMessage
                ):
                    removed.append(Departure(entries.pop(index), "orphan"))
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
        evict_to: float | None = None,
    ) -> None:
        super().__init__(
            max_tokens,
            always_keep_system_message_first=always_keep_system_message_first,
            evict_to=evict_to,
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
                    f"token_count_estimator {shown(estimator)} has no {method}(); pass an "
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
        return _token_count(
            self.estimator.estimate_token_count_in_message(message), "in_message", message
        )

    @property
    def additive(self) -> bool:
        """Whether a list's count is the estimator's ``messages_overhead`` plus each message's
        count, so a window's total grows and shrinks by its messages' counts alone."""
        return self._overhead is not None

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
        messages = [e.message for e in entries]
        count = self.estimator.estimate_token_count_in_messages(messages)
        return _token_count(count, "in_messages", messages)

    def ensure_capacity(self, entries: list[Entry], limit: int) -> list[Departure]:
        removed: list[Departure] = []
        if not entries:
            return removed  # LangChain4j never calls the estimator with an empty list (#2201)
        # Computed once, then decremented: the reply priming stays in the running total.
        current = self.total(entries)
        if current <= limit:
            return removed
        target = self.low_water(limit)
        while current > target and entries:
            index = 0
            if isinstance(entries[0].message, SystemMessage):
                if len(entries) == 1:
                    return removed  # a lone system message is kept even over the limit
                index = 1
            evicted = entries.pop(index)
            current -= self._tokens(evicted)
            removed.append(Departure(evicted, "evicted"))
            if _is_ai_with_requests(evicted.message):
                while len(entries) > index and isinstance(
                    entries[index].message, ToolExecutionResultMessage
                ):
                    orphan = entries.pop(index)
                    current -= self._tokens(orphan)
                    removed.append(Departure(orphan, "orphan"))
        return removed


def set_system_refs(entries: Sequence[Entry]) -> list[list[int]] | None:
    """The refs of the system messages a ``set`` of ``entries`` leaves in every window: all of
    them when there is at most one (a lone system message is never evicted); None when there
    are more (which ones stay depends on the policy), see :attr:`Window.system_settled`."""
    refs = [list(e.ref) for e in entries if isinstance(e.message, SystemMessage)]
    return refs if len(refs) <= 1 else None


class Window:
    """LangChain4j's window as a pure state machine over :class:`Entry` values.

    ``add``, ``set`` and ``clear`` change :attr:`entries` exactly as LangChain4j's memories
    change their stored list, and return the entries that left with their reasons. The limit is
    passed in, not looked up: the live memory reads its (possibly dynamic) limit, replay passes
    the limit each event recorded, what-if passes another policy's.

    Args:
        policy: How the window counts and evicts.
        entries: The starting content (trusted as given; not trimmed).
        system_settled: See :attr:`system_settled` (True for an empty start).
    """

    __slots__ = ("entries", "limit", "policy", "system_settled")

    def __init__(
        self, policy: WindowPolicy, entries: Sequence[Entry] = (), *, system_settled: bool = True
    ) -> None:
        self.policy = policy
        self.entries: list[Entry] = list(entries)
        self.limit: int | None = None
        """The limit the last operation trimmed to (None: none yet, or an untrimmed set)."""
        self.system_settled = system_settled
        """True when a window under *any* policy, folding the same events, would hold exactly
        the system messages this one holds. That is so unless a ``set`` brought two or more
        since the last clear: an add replaces the first system message, a lone one is never
        evicted (eviction takes index 1 only behind another system message), so until then
        every policy holds the same one or none. What :meth:`system_refs` records, and what
        lets a what-if start from a recent event (:mod:`projections.counterfactual`)."""

    def copy(self) -> Window:
        """An independent copy (operations on it leave this window unchanged)."""
        twin = Window(self.policy, self.entries, system_settled=self.system_settled)
        twin.limit = self.limit
        return twin

    def add(self, entry: Entry, limit: Callable[[], int]) -> list[Departure] | None:
        """LangChain4j's ``add``: trim to the limit, apply the system-message rules, insert,
        trim again.

        Args:
            entry: The new entry.
            limit: Returns the current limit; called where LangChain4j reads it (twice).

        Returns:
            The entries that left, in the order they left; None when nothing changed because
            ``entry`` is the same system message the window already has (LangChain4j then
            writes nothing, and neither does a memory).
        """
        policy = self.policy
        work = self.entries
        first_limit = limit()
        departures: list[Departure] = []
        if not policy.fits(work, first_limit):
            # Step 1 trims a copy: if the add turns out to change nothing, the window must
            # stay as it was (LangChain4j returns before storing the trimmed list).
            work = list(work)
            departures = policy.ensure_capacity(work, first_limit)
        message = entry.message
        if isinstance(message, SystemMessage):
            first = next((e for e in work if isinstance(e.message, SystemMessage)), None)
            if first is not None:
                if first.message == message:
                    return None
                work.remove(first)
                departures.append(Departure(first, "system_replaced"))
            if policy.always_keep_system_message_first:
                work.insert(0, entry)
            else:
                work.append(entry)
        else:
            work.append(entry)
        last_limit = limit()
        departures += policy.ensure_capacity(work, last_limit)
        self.entries = work
        self.limit = last_limit
        return departures

    def add_plain(self, entries: Sequence[Entry], limit: int) -> None:
        """:meth:`add` of each of ``entries`` in turn under the fixed ``limit``, departures not
        reported, for *plain* entries: none a system message, an AI message with tool requests
        or a tool result, so none is kept in front, starts an orphan cascade or is taken in
        one (what-if's stand-ins).

        A message window does them as one. Every add ends within the limit, so only the first
        trims before inserting. Under LangChain4j's rule (no ``evict_to``) an add that evicts
        removes the fewest units from the front (an entry, or an AI request with the tool
        results after it) that bring the window back to the limit; later plain entries at the
        back change neither which units come first nor where a cascade stops, so one trim
        after appending them all removes the same units as a trim after each. And the window
        then ends with at most ``limit`` entries, and a plain entry leaves before every entry
        after it, so entries before the last ``limit`` would be evicted whatever came before:
        they are not looked at, and a caller may leave them out. With ``evict_to`` the trims
        happen one by one, each only when an append goes over the limit. Other policies run
        :meth:`add` per entry.
        """
        policy = self.policy
        if not isinstance(policy, MessageWindowPolicy):
            for entry in entries:
                self.add(entry, lambda: limit)
            return
        if not entries:
            return
        work = self.entries
        if len(work) > limit:
            work = list(work)
            policy.ensure_capacity(work, limit)
        if policy.evict_permille is None:
            work.extend(entries[-limit:])
            policy.ensure_capacity(work, limit)
        else:
            for entry in entries:
                work.append(entry)
                if len(work) > limit:
                    policy.ensure_capacity(work, limit)
        self.entries = work
        self.limit = limit

    def set(self, entries: Sequence[Entry], limit: int | None) -> list[Departure]:
        """LangChain4j's ``set``: the new content replaces the old, trimmed without the
        system-message rules.

        Args:
            entries: The new content.
            limit: The limit to trim to; None keeps every entry (a fork copies a view whole).

        Returns:
            Every old entry (reason ``"set"``), then the new ones the limit did not keep.
        """
        departures = [Departure(e, "set") for e in self.entries]
        work = list(entries)
        self.system_settled = set_system_refs(work) is not None
        if limit is not None:
            departures += self.policy.ensure_capacity(work, limit)
        self.entries = work
        self.limit = limit
        return departures

    def retract(self, ref: tuple[int, int]) -> list[Departure]:
        """Take the entry brought by ``ref`` out of the window (nothing when it already left)."""
        for i, entry in enumerate(self.entries):
            if entry.ref == ref:
                del self.entries[i]
                return [Departure(entry, "retracted")]
        return []

    def clear(self) -> list[Departure]:
        """Empty the window; every entry leaves with reason ``"cleared"``."""
        departures = [Departure(e, "cleared") for e in self.entries]
        self.entries = []
        self.system_settled = True
        return departures

    def system_refs(self) -> list[list[int]] | None:
        """The refs ``[seq, index]`` of the system messages held, for the window record's
        ``sys``; None when they are not :attr:`system_settled` (another policy might hold
        others)."""
        if not self.system_settled:
            return None
        # Settled, the window holds at most one (an add replaces it, a set brought at most
        # one): the scan of every add stops there, usually at the front.
        for e in self.entries:
            if isinstance(e.message, SystemMessage):
                return [list(e.ref)]
        return []

    def view(self, limit: int) -> list[Entry]:
        """What LangChain4j's ``messages()`` shows under ``limit``: the entries, trimmed if the
        limit shrank since the last write. The window itself is not changed."""
        if self.policy.fits(self.entries, limit):
            return list(self.entries)
        work = list(self.entries)
        self.policy.ensure_capacity(work, limit)
        return work


def _token_count(count: object, method: str, of: object) -> int:
    """An estimator's count, which the window record keeps: an int >= 0, never coerced (1.5
    or "3" were truncated, -5 shrank a window's total, None and nan failed inside int())."""
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_SEQ:
        msg = (
            f"token_count_estimator.estimate_token_count_{method} returned "
            f"{type(count).__name__} {shown(count)} for {type(of).__name__}; a token count is "
            f"an int from 0 to {MAX_SEQ}"
        )
        raise ValueError(msg)
    return count
