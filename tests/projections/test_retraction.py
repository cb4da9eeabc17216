"""pop(): a message taken back leaves the view with reason "retracted" and stays in history."""

from __future__ import annotations

from eventlog import EventStore, MessageRetracted, UserMessage
from projections import MessageWindowChatMemory, diff, walk


def test_pop_takes_back_the_newest_message_and_history_keeps_it(store: EventStore, reopen) -> None:
    memory = MessageWindowChatMemory("p", max_messages=5, store=store)
    memory.add(UserMessage("a"), UserMessage("b"), UserMessage("c"))
    assert memory.pop() == UserMessage("c")
    assert memory.messages() == [UserMessage("a"), UserMessage("b")]
    events = memory.history()
    assert events[-1].event == MessageRetracted(seq=3, index=0)
    assert events[2].event.message == UserMessage("c")  # the history still has it
    (change,) = diff(store, "p", 3, 4).left
    assert (change.entry.ref, change.reason) == ((3, 0), "retracted")
    steps = list(walk(store, "p"))
    assert all(step.replayed for step in steps)
    assert memory.as_of(seq=3) == [UserMessage("a"), UserMessage("b"), UserMessage("c")]
    assert memory.as_of(seq=4) == [UserMessage("a"), UserMessage("b")]
    cold = MessageWindowChatMemory("p", max_messages=5, store=reopen())
    assert cold.messages() == memory.messages()


def test_pop_of_a_set_item_and_of_an_empty_window(store: EventStore) -> None:
    memory = MessageWindowChatMemory("p", max_messages=5, store=store)
    assert memory.pop() is None
    assert memory.seq == 0  # nothing written
    memory.set([UserMessage("x"), UserMessage("y")])
    assert memory.pop() == UserMessage("y")
    assert memory.history()[-1].event == MessageRetracted(seq=1, index=1)
    assert memory.pop() == UserMessage("x")
    assert memory.messages() == []
    memory.add(UserMessage("z"))
    assert memory.messages() == [UserMessage("z")]
