"""Memories over an erased history: clear errors for the past, a working memory for new messages."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from eventlog import SQLiteEventStore, UserMessage
from projections import MessageWindowChatMemory, SummarizingChatMemory, compact
from projections.counterfactual import what_if
from projections.replay import ContentErasedError
from projections.window import MessageWindowPolicy


def _texts(messages):
    return [m.text for m in messages]


def test_erased_memory_shows_erased_history_and_refuses_the_past(store):
    memory = MessageWindowChatMemory(id=("alice", "s1"), max_messages=5, store=store)
    memory.add(UserMessage("my secret"))
    memory.add(UserMessage("another"))
    store.erase(("alice", "s1"), reason="GDPR request 9")

    # Check history() marks erased events and keeps the receipt readable.
    history = memory.history()
    assert [e.erased for e in history] == [True, True, False]
    assert history[-1].kind == "memory_erased"
    # Check the live object and a fresh one both see the empty window after the receipt.
    assert memory.messages() == []
    fresh = MessageWindowChatMemory(id=("alice", "s1"), max_messages=5, store=store)
    assert fresh.messages() == []
    # Check the past cannot be shown, with a message naming the reason.
    with pytest.raises(ContentErasedError, match=r"was erased on .*GDPR request 9.*cannot be"):
        fresh.as_of(seq=2)
    with pytest.raises(ValueError, match="GDPR request 9"):
        fresh.what_if(MessageWindowPolicy(3), seq=1)
    with pytest.raises(ValueError, match="GDPR request 9"):
        what_if(store, ("alice", "s1"), MessageWindowPolicy(3))
    # Check the id keeps working for new messages.
    fresh.add(UserMessage("new start"))
    assert _texts(fresh.messages()) == ["new start"]
    assert _texts(memory.messages()) == ["new start"]
    assert store.verify().ok


def test_live_memory_catches_up_across_an_erasure(store):
    memory = MessageWindowChatMemory(id="u", max_messages=5, store=store)
    memory.add(UserMessage("a"))
    assert _texts(memory.messages()) == ["a"]
    other = MessageWindowChatMemory(id="u", max_messages=5, store=store)
    other.add(UserMessage("b"))
    store.erase("u", reason="r")
    # Check the tail (an erased add, then the receipt) applies without reading erased text.
    assert memory.messages() == []


@pytest.mark.parametrize("how", ["erase", "retention"])
def test_a_memory_held_across_an_erasure_shows_no_erased_past(store, how):
    # An object held by a caller (or a provider the retention run was not told about) when
    # the memory is erased elsewhere: its time travel to the event it had last seen used to
    # answer from the window it cached, the erased text itself.
    memory = SummarizingChatMemory(
        "u", max_messages=2, summarizer=lambda evicted, previous: "card and one", store=store
    )
    memory.add(UserMessage("card 4111 1111 1111 1111"), UserMessage("one"), UserMessage("two"))
    held = memory.seq
    plain = MessageWindowChatMemory("u", max_messages=2, store=store)
    assert plain.seq == held
    if how == "erase":
        store.erase("u", reason="GDPR request 12")
    else:
        later = datetime.now(UTC) + timedelta(days=400)
        report = compact(
            store, idle_for=timedelta(days=1), purge_idle_for=timedelta(days=90), now=later
        )
        assert report.purged == ("u",)
    # Check both objects refuse the erased past as a fresh object does, sync and async.
    for obj in (memory, plain):
        with pytest.raises(ContentErasedError, match="was erased on"):
            obj.as_of(seq=held)
        with pytest.raises(ContentErasedError, match="was erased on"):
            asyncio.run(obj.aas_of(seq=held))
        assert obj.messages() == []


def test_sqlite_erase_leaves_no_byte_of_the_text_on_disk(tmp_path):
    path = tmp_path / "erase.db"
    marker = "ZQX-erase-marker-7c1d"
    with SQLiteEventStore(path) as store:
        for i in range(300):
            memory = MessageWindowChatMemory(
                id=(f"user{i % 30}", f"s{i}"), max_messages=3, store=store
            )
            text = f"{marker} {i}" if i % 30 == 7 else f"ordinary text {i}"
            memory.add(UserMessage(text), UserMessage(text + " again"))
        receipts = store.erase_subject(("user7",), reason="subject request")
        assert len(receipts) == 10
        assert store.verify().ok
        # Check nothing of the marker survives in the database, its WAL or its shm file.
        for name in ("erase.db", "erase.db-wal", "erase.db-shm"):
            file = tmp_path / name
            if file.exists():
                assert marker.encode() not in file.read_bytes(), name
        # Check other memories are untouched.
        kept = MessageWindowChatMemory(id=("user8", "s8"), max_messages=3, store=store)
        assert _texts(kept.messages()) == ["ordinary text 8", "ordinary text 8 again"]
