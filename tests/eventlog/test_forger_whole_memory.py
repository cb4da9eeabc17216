"""[forger]: every record of a memory deleted by hand, its head seal left in place.

Deleting rows needs no key. ``verify()`` said "its records are gone", but a fresh memory
object served the memory as empty, and its next ``add`` started it over at seq 1 - sealing
the new head over the old seal, after which ``verify()`` passed and the loss left no trace.
"""

from __future__ import annotations

from typing import Any

import pytest

from eventlog import ChainIntegrityError, UserMessage
from eventlog.models import NewRecord
from eventlog.testing.records import user_payload
from projections import MessageWindowChatMemory
from tests.eventlog.test_forger import KEY, Db

pytestmark = pytest.mark.skip_backend("memory")  # the attack edits rows behind the store


@pytest.fixture
def db(backend: Any) -> Db:
    return Db(backend)


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_a_memory_whose_records_were_all_deleted_is_refused_not_started_over(
    backend: Any, db: Db, keyed: bool
) -> None:
    key = KEY if keyed else None
    store = backend.open(chain_key=key)
    memory = MessageWindowChatMemory(id="conv", max_messages=10, store=store)
    memory.add(UserMessage("I do not agree"), UserMessage("to the terms"))
    store.close()
    db.run("DELETE FROM {events} WHERE stream_id = ?", "conv")  # the seal row stays
    fresh = backend.open(chain_key=key)
    gone = r"breaks at seq 2: its records are gone, but its head seal says seq 2"
    with pytest.raises(ChainIntegrityError, match=gone):
        MessageWindowChatMemory(id="conv", max_messages=10, store=fresh).messages()
    with pytest.raises(ChainIntegrityError, match=gone):
        MessageWindowChatMemory(id="conv", max_messages=10, store=fresh).add(UserMessage("hi"))
    with pytest.raises(ChainIntegrityError, match=gone):
        fresh.append("conv", [NewRecord("message_added", user_payload("hi"))], expected_seq=0)
    assert db.rows("conv") == []  # nothing started over
    assert fresh.verify().first_bad_seq("conv") == 2  # the loss is still reported
    # Other memories are untouched, and a new one starts as before.
    MessageWindowChatMemory(id="new", max_messages=10, store=fresh).add(UserMessage("hello"))
    assert [r["seq"] for r in db.rows("new")] == [1]
    fresh.close()
