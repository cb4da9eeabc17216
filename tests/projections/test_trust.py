"""Memories never serve what the log no longer holds: a memory object compares the head's hash,
not only its seq, and reloads (with a warning) when history changed under it."""

from __future__ import annotations

import logging

from eventlog import SQLiteEventStore, UserMessage
from projections import MessageWindowChatMemory
from tests.factories import lose_last_commit


def _lose_last_commit(path, key, seq):
    # What a failover to a replica that missed the last commit, or a restore, looks like.
    lose_last_commit(path, key, seq)


def test_a_lost_commit_replaced_at_the_same_seq_is_not_served(tmp_path, caplog):
    path = tmp_path / "chat.db"
    mine = MessageWindowChatMemory(id="conv", max_messages=5, store=SQLiteEventStore(path))
    mine.add(UserMessage("one"), UserMessage("two"), UserMessage("lost"))
    assert mine.messages()[-1] == UserMessage("lost")
    _lose_last_commit(path, "conv", 3)
    theirs = MessageWindowChatMemory(id="conv", max_messages=5, store=SQLiteEventStore(path))
    theirs.add(UserMessage("replacement"))
    # Check the head has the same seq as before, yet the object notices the other hash.
    assert theirs.seq == mine.store.head("conv").seq == 3
    with caplog.at_level(logging.WARNING, logger="chatledger.memories"):
        assert mine.messages() == [UserMessage(t) for t in ("one", "two", "replacement")]
    assert "history changed under this object" in caplog.text


def test_a_truncated_history_is_reloaded(tmp_path, caplog):
    path = tmp_path / "chat.db"
    mine = MessageWindowChatMemory(id="conv", max_messages=5, store=SQLiteEventStore(path))
    mine.add(UserMessage("one"), UserMessage("two"))
    _lose_last_commit(path, "conv", 2)
    with caplog.at_level(logging.WARNING, logger="chatledger.memories"):
        assert mine.messages() == [UserMessage("one")]
    assert "the head is now seq 1" in caplog.text
    _lose_last_commit(path, "conv", 1)
    with caplog.at_level(logging.WARNING, logger="chatledger.memories"):
        assert mine.messages() == []
    assert "it has no events now" in caplog.text


def test_a_rewritten_tail_is_not_taken_for_a_continuation(tmp_path, caplog):
    path = tmp_path / "chat.db"
    mine = MessageWindowChatMemory(id="conv", max_messages=5, store=SQLiteEventStore(path))
    mine.add(UserMessage("one"), UserMessage("lost"))
    _lose_last_commit(path, "conv", 2)
    theirs = MessageWindowChatMemory(id="conv", max_messages=5, store=SQLiteEventStore(path))
    theirs.add(UserMessage("two"), UserMessage("three"))
    # Check two new events after ours do not chain to the event we hold: a full reload.
    with caplog.at_level(logging.WARNING, logger="chatledger.memories"):
        assert mine.messages() == [UserMessage(t) for t in ("one", "two", "three")]
    assert "not a continuation" in caplog.text


def test_an_add_never_continues_a_head_that_was_replaced(tmp_path, caplog):
    path = tmp_path / "chat.db"
    mine = MessageWindowChatMemory(id="conv", max_messages=5, store=SQLiteEventStore(path))
    mine.add(UserMessage("one"), UserMessage("lost"))
    _lose_last_commit(path, "conv", 2)
    theirs = MessageWindowChatMemory(id="conv", max_messages=5, store=SQLiteEventStore(path))
    theirs.add(UserMessage("two"))
    # Check our add (no read first: the hot path) is refused by the store, the object reloads,
    # and the new message lands after the other writer's, without the lost one.
    with caplog.at_level(logging.WARNING, logger="chatledger.memories"):
        mine.add(UserMessage("three"))
    assert mine.messages() == [UserMessage(t) for t in ("one", "two", "three")]
    assert theirs.messages() == mine.messages()
    assert mine.store.verify().ok
