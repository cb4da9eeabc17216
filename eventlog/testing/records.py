"""Small record builders for the store contract (payloads are real LangChain4j JSON)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from eventlog.ids import StreamKey
from eventlog.models import NewRecord

if TYPE_CHECKING:
    from eventlog.store import EventStore

SETTLE_TIMEOUT = 120.0
"""Seconds :func:`settled` waits at most: far beyond any transaction a test run holds."""


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


def settled(store: EventStore, timeout: float = SETTLE_TIMEOUT) -> EventStore:
    """Wait until the global order shows every record committed so far, then return ``store``.

    ``read_all`` - and ``digest()``, ``prove()`` and exports, which read through it - may hold
    committed records back: PostgreSQL's stops below the oldest transaction still running
    anywhere on the server, another session's included (the tailing guarantee, by design;
    the store itself waits only 2 s for its own appends). A contract test that asserts on the
    global order right after writing calls this first, so a transaction some other workload
    holds open on the same server delays the test instead of failing it. Nothing to wait for
    on a backend whose global order shows every commit at once.
    """
    newest = 0
    for key, *_ in store._stream_rows():
        last = store.read(StreamKey(key), desc=True, limit=1)
        newest = max(newest, last[0].position if last else 0)
    deadline = time.monotonic() + timeout
    while newest:
        page = store.read_all(gt=newest - 1, limit=1)
        if page and page[0].position >= newest:
            break
        if time.monotonic() > deadline:
            msg = (
                f"read_all still holds back position {newest} after {timeout} s: a transaction "
                "left open on the server (see pg_stat_activity) keeps it below the watermark"
            )
            raise AssertionError(msg)
        time.sleep(0.05)
    return store
