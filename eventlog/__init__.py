"""chatledger's event log: messages, LangChain4j JSON, events and hash-chained stores.

:class:`SQLiteEventStore` is imported on first access, so ``import eventlog`` loads
sqlite-utils only when it is used. The PostgreSQL store lives in :mod:`eventlog.postgres`
(``pip install 'chatledger[postgres]'``) and is imported from there, so this package never
needs psycopg.
"""

from __future__ import annotations

import typing

from eventlog.consistency import ConsistencyProof, verify_consistency
from eventlog.errors import (
    ChainIntegrityError,
    ChainKeyError,
    ConcurrencyError,
    ContentErasedError,
    EncodingUnavailableError,
    EventLogError,
    OutcomeUnknownError,
    PersistenceError,
    ReadOnlyError,
    RollbackError,
    SchemaVersionError,
    StoreClosedError,
)
from eventlog.ids import MemoryId
from eventlog.jsonl import ImportReport, export_jsonl, import_jsonl
from eventlog.keyring import (
    FileKeyring,
    Keyring,
    KeyringError,
    KeyUnavailableError,
    MemoryKeyring,
    SealBrokenError,
)
from eventlog.lc4j_json import (
    message_from_json,
    message_to_json,
    messages_from_json,
    messages_to_json,
)
from eventlog.ledger import DigestReport, InclusionProof, LedgerDigest, verify_inclusion
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
    ContentErased,
    ErasureReceipt,
    LoggedEvent,
    MemoryCleared,
    MemoryErased,
    MemoryPurged,
    MessageAdded,
    MessageRetracted,
    MessagesSet,
    Record,
    StreamInfo,
    SummaryRecorded,
    VerifyReport,
)
from eventlog.receipts import ReceiptCheck, check_receipt, find_receipt, receipt_bundle
from eventlog.store import EventStore

if typing.TYPE_CHECKING:
    from eventlog.sqlite import SQLiteEventStore

__all__ = [
    "AiMessage",
    "AudioContent",
    "ChainIntegrityError",
    "ChainKeyError",
    "ChatMessage",
    "ConcurrencyError",
    "ConsistencyProof",
    "Content",
    "ContentErased",
    "ContentErasedError",
    "CustomMessage",
    "DigestReport",
    "EncodingUnavailableError",
    "ErasureReceipt",
    "EventLogError",
    "EventStore",
    "FileKeyring",
    "ImageContent",
    "ImportReport",
    "InMemoryEventStore",
    "InclusionProof",
    "KeyUnavailableError",
    "Keyring",
    "KeyringError",
    "LedgerDigest",
    "LoggedEvent",
    "MemoryCleared",
    "MemoryErased",
    "MemoryId",
    "MemoryKeyring",
    "MemoryPurged",
    "MessageAdded",
    "MessageRetracted",
    "MessagesSet",
    "OutcomeUnknownError",
    "PdfFileContent",
    "PersistenceError",
    "ReadOnlyError",
    "ReceiptCheck",
    "Record",
    "RollbackError",
    "SQLiteEventStore",
    "SchemaVersionError",
    "SealBrokenError",
    "StoreClosedError",
    "StreamInfo",
    "SummaryRecorded",
    "SystemMessage",
    "TextContent",
    "ToolExecutionRequest",
    "ToolExecutionResultMessage",
    "UserMessage",
    "VerifyReport",
    "VideoContent",
    "check_receipt",
    "export_jsonl",
    "find_receipt",
    "import_jsonl",
    "message_from_json",
    "message_to_json",
    "messages_from_json",
    "messages_to_json",
    "receipt_bundle",
    "verify_consistency",
    "verify_inclusion",
]


def __getattr__(name: str) -> object:
    # SQLiteEventStore is imported on first access: sqlite-utils (with click, dateutil and
    # pluggy behind it) costs ~25 ms, which `import eventlog` should not pay when no SQLite
    # store is used. Stored in the module afterwards, so later lookups are plain attributes.
    if name == "SQLiteEventStore":
        from eventlog.sqlite import SQLiteEventStore

        globals()[name] = SQLiteEventStore
        return SQLiteEventStore
    msg = f"module 'eventlog' has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    return sorted({*globals(), "SQLiteEventStore"})
