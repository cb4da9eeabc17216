"""chatledger's event log: messages, LangChain4j JSON, events and hash-chained stores.

Every exported name is imported on first access, so ``import eventlog`` loads pydantic,
sqlite-utils or cryptography only when a part that needs them is used. The PostgreSQL store
lives in :mod:`eventlog.postgres` (``pip install 'chatledger[postgres]'``) and is imported
from there, so this package never needs psycopg.
"""

from __future__ import annotations

import typing

from eventlog._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
    from eventlog.consistency import ConsistencyProof, verify_consistency
    from eventlog.contents import (
        AudioContent,
        Content,
        ImageContent,
        PdfFileContent,
        TextContent,
        VideoContent,
    )
    from eventlog.errors import (
        ChainIntegrityError,
        ChainKeyError,
        ConcurrencyError,
        ContentErasedError,
        DamagedExportError,
        EncodingUnavailableError,
        EventLogError,
        OutcomeUnknownError,
        PersistenceError,
        ReadOnlyError,
        RollbackError,
        SchemaVersionError,
        StoreClosedError,
    )
    from eventlog.formats.jsonl import ImportReport, export_jsonl, import_jsonl
    from eventlog.formats.lc4j_json import (
        message_from_json,
        message_to_json,
        messages_from_json,
        messages_to_json,
    )
    from eventlog.ids import MemoryId
    from eventlog.keyring import (
        Keyring,
        KeyringError,
        KeyUnavailableError,
        MemoryKeyring,
        SealBrokenError,
    )
    from eventlog.keyring_file import FileKeyring
    from eventlog.ledger import verify_inclusion
    from eventlog.ledger_models import DigestReport, InclusionProof, LedgerDigest
    from eventlog.messages import (
        AiMessage,
        ChatMessage,
        CustomMessage,
        SystemMessage,
        ToolExecutionRequest,
        ToolExecutionResultMessage,
        UserMessage,
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
    from eventlog.note import NoteError
    from eventlog.receipts import ReceiptCheck, check_receipt, find_receipt, receipt_bundle
    from eventlog.recorders.memory import InMemoryEventStore
    from eventlog.recorders.sqlite import SQLiteEventStore
    from eventlog.store import EventStore

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
    "DamagedExportError",
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
    "NoteError",
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

# Each exported name -> the module that defines it. Names load on first access (PEP 562), so
# `import eventlog` costs milliseconds and each part pays its imports (pydantic, sqlite-utils,
# cryptography, tiktoken ...) only when used; the value is then stored in this module, and
# later lookups are plain attributes. tests/test_public_api.py holds this map to __all__.
_WHERE: dict[str, str] = {
    "AiMessage": "eventlog.messages",
    "AudioContent": "eventlog.contents",
    "ChainIntegrityError": "eventlog.errors",
    "ChainKeyError": "eventlog.errors",
    "ChatMessage": "eventlog.messages",
    "ConcurrencyError": "eventlog.errors",
    "ConsistencyProof": "eventlog.consistency",
    "Content": "eventlog.contents",
    "ContentErased": "eventlog.models",
    "ContentErasedError": "eventlog.errors",
    "CustomMessage": "eventlog.messages",
    "DamagedExportError": "eventlog.errors",
    "DigestReport": "eventlog.ledger_models",
    "EncodingUnavailableError": "eventlog.errors",
    "ErasureReceipt": "eventlog.models",
    "EventLogError": "eventlog.errors",
    "EventStore": "eventlog.store",
    "FileKeyring": "eventlog.keyring_file",
    "ImageContent": "eventlog.contents",
    "ImportReport": "eventlog.formats.jsonl",
    "InMemoryEventStore": "eventlog.recorders.memory",
    "InclusionProof": "eventlog.ledger_models",
    "KeyUnavailableError": "eventlog.keyring",
    "Keyring": "eventlog.keyring",
    "KeyringError": "eventlog.keyring",
    "NoteError": "eventlog.note",
    "LedgerDigest": "eventlog.ledger_models",
    "LoggedEvent": "eventlog.models",
    "MemoryCleared": "eventlog.models",
    "MemoryErased": "eventlog.models",
    "MemoryId": "eventlog.ids",
    "MemoryKeyring": "eventlog.keyring",
    "MemoryPurged": "eventlog.models",
    "MessageAdded": "eventlog.models",
    "MessageRetracted": "eventlog.models",
    "MessagesSet": "eventlog.models",
    "OutcomeUnknownError": "eventlog.errors",
    "PdfFileContent": "eventlog.contents",
    "PersistenceError": "eventlog.errors",
    "ReadOnlyError": "eventlog.errors",
    "ReceiptCheck": "eventlog.receipts",
    "Record": "eventlog.models",
    "RollbackError": "eventlog.errors",
    "SQLiteEventStore": "eventlog.recorders.sqlite",
    "SchemaVersionError": "eventlog.errors",
    "SealBrokenError": "eventlog.keyring",
    "StoreClosedError": "eventlog.errors",
    "StreamInfo": "eventlog.models",
    "SummaryRecorded": "eventlog.models",
    "SystemMessage": "eventlog.messages",
    "TextContent": "eventlog.contents",
    "ToolExecutionRequest": "eventlog.messages",
    "ToolExecutionResultMessage": "eventlog.messages",
    "UserMessage": "eventlog.messages",
    "VerifyReport": "eventlog.models",
    "VideoContent": "eventlog.contents",
    "check_receipt": "eventlog.receipts",
    "export_jsonl": "eventlog.formats.jsonl",
    "find_receipt": "eventlog.receipts",
    "import_jsonl": "eventlog.formats.jsonl",
    "message_from_json": "eventlog.formats.lc4j_json",
    "message_to_json": "eventlog.formats.lc4j_json",
    "messages_from_json": "eventlog.formats.lc4j_json",
    "messages_to_json": "eventlog.formats.lc4j_json",
    "receipt_bundle": "eventlog.receipts",
    "verify_consistency": "eventlog.consistency",
    "verify_inclusion": "eventlog.ledger",
}


__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, globals())
