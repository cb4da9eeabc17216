"""chatledger's projections: LangChain4j window memories over the event log, time travel,
what-if views, provider-valid views, summarizing memory, the memory provider and compaction."""

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
from projections.summarizing import SummarizingChatMemory
from projections.tokens import OpenAiTokenCountEstimator, TokenCountEstimator
from projections.validity import check_valid, valid_view
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
    "SummarizingChatMemory",
    "TokenCountEstimator",
    "TokenWindowChatMemory",
    "TokenWindowPolicy",
    "ViewDiff",
    "WindowPolicy",
    "check_valid",
    "compact",
    "compaction_runs",
    "diff",
    "explain",
    "fork",
    "valid_view",
    "walk",
    "what_if",
]
