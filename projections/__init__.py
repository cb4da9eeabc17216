"""chatledger's projections: LangChain4j window memories over the event log, time travel,
what-if views (of a memory, or of a recorded model call), provider-valid views, summarizing
memory, the memory provider and compaction."""

from __future__ import annotations

import typing

from eventlog._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
    from projections.audit import ViewDiff, diff, explain, fork, walk
    from projections.base import ChatMemory, Clock
    from projections.calls import what_if_call
    from projections.compaction import (
        CompactionReport,
        CompactionScheduler,
        compact,
        compaction_runs,
    )
    from projections.counterfactual import what_if
    from projections.memories import MessageWindowChatMemory, TokenWindowChatMemory
    from projections.provider import ChatMemoryProvider, ProviderStats
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
    "what_if_call",
]

# Each exported name -> the module that defines it. Names load on first access (PEP 562), so
# `import projections` costs milliseconds and each part pays its imports (pydantic, sqlite-utils,
# cryptography, tiktoken ...) only when used; the value is then stored in this module, and
# later lookups are plain attributes. tests/test_public_api.py holds this map to __all__.
_WHERE: dict[str, str] = {
    "ChatMemory": "projections.base",
    "ChatMemoryProvider": "projections.provider",
    "Clock": "projections.base",
    "CompactionReport": "projections.compaction",
    "CompactionScheduler": "projections.compaction",
    "MessageWindowChatMemory": "projections.memories",
    "MessageWindowPolicy": "projections.window",
    "OpenAiTokenCountEstimator": "projections.tokens",
    "ProviderStats": "projections.provider",
    "SummarizingChatMemory": "projections.summarizing",
    "TokenCountEstimator": "projections.tokens",
    "TokenWindowChatMemory": "projections.memories",
    "TokenWindowPolicy": "projections.window",
    "ViewDiff": "projections.audit",
    "WindowPolicy": "projections.window",
    "check_valid": "projections.validity",
    "compact": "projections.compaction",
    "compaction_runs": "projections.compaction",
    "diff": "projections.audit",
    "explain": "projections.audit",
    "fork": "projections.audit",
    "valid_view": "projections.validity",
    "walk": "projections.audit",
    "what_if": "projections.counterfactual",
    "what_if_call": "projections.calls",
}


__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, globals())
