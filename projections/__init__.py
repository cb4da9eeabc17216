"""chatledger's projections: LangChain4j window memories over the event log, time travel,
what-if views, the memory provider and compaction."""

from __future__ import annotations

from projections.audit import ViewDiff, diff, explain, fork, walk
from projections.base import ChatMemory, Clock
from projections.compaction import (
    CompactionReport,
    CompactionScheduler,
    compact,
    compaction_runs,
)
from projections.memories import MessageWindowChatMemory, TokenWindowChatMemory
from projections.provider import ChatMemoryProvider, ProviderStats
from projections.replay import what_if
from projections.tokens import OpenAiTokenCountEstimator, TokenCountEstimator
from projections.window import MessageWindowPolicy, TokenWindowPolicy, WindowPolicy

__all__ = [
    "ChatMemory",
    "ChatMemoryProvider",
    "Clock",
    "CompactionReport",
    "CompactionScheduler",
    "MessageWindowChatMemory",
    "MessageWindowPolicy",
    "OpenAiTokenCountEstimator",
    "ProviderStats",
    "TokenCountEstimator",
    "TokenWindowChatMemory",
    "TokenWindowPolicy",
    "ViewDiff",
    "WindowPolicy",
    "compact",
    "compaction_runs",
    "diff",
    "explain",
    "fork",
    "walk",
    "what_if",
]
