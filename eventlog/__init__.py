"""chatledger's event log: messages, LangChain4j JSON, events and hash-chained stores.

The PostgreSQL store lives in :mod:`eventlog.postgres` (``pip install 'chatledger[postgres]'``)
and is imported from there, so this package never needs psycopg.
"""

from __future__ import annotations

from eventlog.errors import (
    ChainIntegrityError,
    ConcurrencyError,
    EventLogError,
    PersistenceError,
    SchemaVersionError,
    StoreClosedError,
)
from eventlog.ids import MemoryId
from eventlog.lc4j_json import (
    message_from_json,
    message_to_json,
    messages_from_json,
    messages_to_json,
)
from eventlog.memory import InMemoryEventStore
from eventlog.messages import (
    AiMessage,
    AudioContent,
    ChatMessage,
    Content,
    CustomMessage,
    ImageContent,
    PdfFileContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
)
from eventlog.models import (
    LoggedEvent,
    MemoryCleared,
    MemoryPurged,
    MessageAdded,
    MessagesSet,
    Record,
    StreamInfo,
    VerifyReport,
)
from eventlog.sqlite import SQLiteEventStore
from eventlog.store import EventStore

__all__ = [
    "AiMessage",
    "AudioContent",
    "ChainIntegrityError",
    "ChatMessage",
    "ConcurrencyError",
    "Content",
    "CustomMessage",
    "EventLogError",
    "EventStore",
    "ImageContent",
    "InMemoryEventStore",
    "LoggedEvent",
    "MemoryCleared",
    "MemoryId",
    "MemoryPurged",
    "MessageAdded",
    "MessagesSet",
    "PdfFileContent",
    "PersistenceError",
    "Record",
    "SQLiteEventStore",
    "SchemaVersionError",
    "StoreClosedError",
    "StreamInfo",
    "SystemMessage",
    "TextContent",
    "ToolExecutionRequest",
    "ToolExecutionResultMessage",
    "UserMessage",
    "VerifyReport",
    "VideoContent",
    "message_from_json",
    "message_to_json",
    "messages_from_json",
    "messages_to_json",
]
