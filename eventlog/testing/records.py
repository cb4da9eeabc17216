"""Small record builders for the store contract (payloads are real LangChain4j JSON)."""

from __future__ import annotations

import json
from typing import Any

from eventlog.models import NewRecord


def user_payload(text: str) -> str:
    return json.dumps(
        {"contents": [{"text": text, "type": "TEXT"}], "type": "USER"},
        separators=(",", ":"),
        ensure_ascii=False,
    )


def added(text: str, meta: str = "") -> NewRecord:
    return NewRecord(kind="message_added", payload=user_payload(text), meta=meta)


def batch(*texts: str) -> list[NewRecord]:
    return [added(t) for t in texts]


def texts(records: list[Any]) -> list[str]:
    return [json.loads(r.payload)["contents"][0]["text"] for r in records]
