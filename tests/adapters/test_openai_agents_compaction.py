"""The Agents SDK's OpenAIResponsesCompactionSession over LedgerSession: a compaction is events.

The Responses API is faked as the SDK's own tests fake it (``responses.compact`` returns a fixed
output); everything else is real: the SDK's compaction session and Runner, our session, and
every store.
"""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from agents import Agent, RunConfig, Runner
from agents.memory import OpenAIResponsesCompactionSession
from agents.testing import ScriptedModel, assistant_message

from eventlog import EventStore, MessageRetracted
from projections import MessageWindowPolicy
from projections.adapters.openai_agents import LedgerSession, item_of, message_of
from tests.adapters.test_item_list import CountingStore

SUMMARY: Any = {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque-summary"}
ORIGINAL: list[Any] = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "type": "function_call",
        "call_id": "c1",
        "name": "weather",
        "arguments": '{"city": "Paris"}',
    },
    {"type": "function_call_output", "call_id": "c1", "output": "21 C"},
    {"role": "assistant", "content": "21 degrees."},
]


class FakeResponses:
    """``client.responses`` with only ``compact``: records what it was sent, returns ``output``
    (after ``meanwhile``, an await standing for what happens during the API call)."""

    def __init__(self, output: list[Any], meanwhile: Any = None) -> None:
        self.output = output
        self.meanwhile = meanwhile
        self.calls: list[dict[str, Any]] = []

    async def compact(self, **kwargs: Any) -> SimpleNamespace:
        self.calls.append(kwargs)
        if self.meanwhile is not None:
            await self.meanwhile()
        return SimpleNamespace(output=list(self.output), usage=None)


def _run(awaitable: Any) -> Any:
    async def wait() -> Any:
        return await awaitable

    return asyncio.run(wait())


def compacting(
    session: LedgerSession, responses: FakeResponses, **kwargs: Any
) -> OpenAIResponsesCompactionSession:
    client: Any = SimpleNamespace(responses=responses)
    return OpenAIResponsesCompactionSession(
        session.session_id, session, client=client, compaction_mode="input", **kwargs
    )


def added_items(session: LedgerSession) -> list[Any]:
    """Every item the memory's history ever added, in order (the store's read of it)."""
    return [
        item_of(e.event.message)
        for e in session.memory.history()
        if e.event.kind == "message_added"
    ]


def kinds(session: LedgerSession) -> list[str]:
    return [e.event.kind for e in session.memory.history()]


def test_a_manual_compaction_leaves_the_output_and_the_history_keeps_every_item(
    store: EventStore,
) -> None:
    session = LedgerSession("manual", store=store)
    _run(session.add_items(ORIGINAL))
    responses = FakeResponses([SUMMARY])
    _run(compacting(session, responses).run_compaction({"force": True}))

    assert [item.get("content") for item in responses.calls[0]["input"][::3]] == [
        "Weather in Paris?",
        "21 degrees.",
    ]
    assert _run(session.get_items()) == [SUMMARY]
    assert _run(LedgerSession("manual", store=store).get_items()) == [SUMMARY]
    # One clear and the output's add (one append: _atomic_replace_items); nothing is lost.
    assert kinds(session) == [*["message_added"] * 4, "memory_cleared", "message_added"]
    assert added_items(session) == [*ORIGINAL, SUMMARY]
    assert [item_of(m) for m in session.memory.as_of(seq=4)] == ORIGINAL
    assert store.verify("manual").ok


def test_an_automatic_compaction_replaces_the_suffix_the_model_saw_and_keeps_it_in_history(
    store: EventStore,
) -> None:
    session = LedgerSession("auto", store=store)
    older: list[Any] = [{"role": "user", "content": str(i)} for i in range(4)]
    _run(session.add_items(older))
    responses = FakeResponses([SUMMARY])
    wrapped = compacting(session, responses, should_trigger_compaction=lambda _: True)
    agent = Agent(name="worker", model=ScriptedModel(steps=[[assistant_message("done")]]))
    # The model sees the newest stored item only: the compaction replaces that suffix (from
    # its user message on) and keeps the items before it.
    _run(
        Runner.run(
            agent,
            "go on",
            session=wrapped,
            run_config=RunConfig(session_settings={"limit": 1}, tracing_disabled=True),
        )
    )

    assert len(responses.calls) == 1
    assert [i.get("content") for i in responses.calls[0]["input"][:2]] == ["3", "go on"]
    assert _run(session.get_items()) == [*older[:3], SUMMARY]
    history = session.memory.history()
    retracted = [e.event for e in history if isinstance(e.event, MessageRetracted)]
    assert [r.seq for r in retracted] == [4, 5, 6]  # "3", "go on" and the reply
    assert kinds(session)[-4:] == [*["message_retracted"] * 3, "message_added"]
    added = added_items(session)
    assert added[:5] == [*older, {"role": "user", "content": "go on"}]
    assert added[-1] == SUMMARY
    assert len(added) == 7  # the four, the input, the reply, the summary: every item kept
    assert store.verify("auto").ok


def test_replace_suffix_after_another_writer_changed_the_list_returns_false_and_writes_nothing(
    store: EventStore,
) -> None:
    session = LedgerSession("race", store=store)
    other = LedgerSession("race", store=store)  # another writer: another object, or process
    _run(session.add_items(ORIGINAL))
    newer: Any = {"role": "user", "content": "newer"}

    snapshot = _run(session._get_compaction_snapshot(3))
    assert snapshot is not None
    assert (snapshot.items, snapshot.complete) == (ORIGINAL[1:], False)

    async def add() -> None:
        await other.add_items([newer])

    async def pop() -> None:
        await other.pop_item()

    for change in (add, pop, other.clear_session):
        snapshot = _run(session._get_compaction_snapshot(10))
        assert snapshot is not None
        _run(change())
        before = (_run(session.get_items()), kinds(session))
        assert _run(snapshot.replace_suffix(0, [SUMMARY])) is False
        assert (_run(session.get_items()), kinds(session)) == before

    # A write that leaves the list as it was (a recorded model call) does not stop it.
    _run(session.add_items(ORIGINAL))
    snapshot = _run(session._get_compaction_snapshot(10))
    assert snapshot is not None and snapshot.complete
    record = other.window_callback(MessageWindowPolicy(10))
    _run(record(_run(other.get_items()), []))
    assert _run(snapshot.replace_suffix(2, [SUMMARY])) is True
    assert _run(session.get_items()) == [*ORIGINAL[:2], SUMMARY]
    assert store.verify("race").ok


def test_a_writer_landing_between_the_check_and_the_append_makes_replace_suffix_false(
    store: EventStore,
) -> None:
    # prune_prefix is called inside the write, after the suffix was checked and before the
    # append: another writer appending there is the tightest race there is.
    session = LedgerSession("tight", store=store)
    other = LedgerSession("tight", store=store)
    _run(session.add_items(ORIGINAL))
    newer: Any = {"role": "user", "content": "newer"}
    landed: list[bool] = []

    def prune(item: Any) -> bool:
        if not landed:
            landed.append(True)
            other.items.add([other_message])
        return False

    other_message = message_of(newer)
    snapshot = _run(session._get_compaction_snapshot(2, prune_prefix=prune))
    assert snapshot is not None
    assert _run(snapshot.replace_suffix(0, [SUMMARY])) is False
    assert landed == [True]
    assert _run(session.get_items()) == [*ORIGINAL, newer]
    assert kinds(session) == ["message_added"] * 5


def test_each_replacement_is_one_append(tmp_path: Any) -> None:
    store = CountingStore(tmp_path / "one.db")
    session = LedgerSession("one", store=store)
    _run(session.add_items(ORIGINAL))
    snapshot = _run(session._get_compaction_snapshot(3))
    before = store.appends
    assert _run(snapshot.replace_suffix(0, [SUMMARY, ORIGINAL[-1]])) is True
    assert store.appends == before + 1  # three retractions and two adds
    assert kinds(session)[-5:] == [*["message_retracted"] * 3, *["message_added"] * 2]
    before = store.appends
    assert _run(session._atomic_replace_items([SUMMARY])) is True
    assert store.appends == before + 1  # the clear and the add
    assert _run(session.get_items()) == [SUMMARY]
    store.close()


def test_expired_older_items_are_retracted_in_the_same_append(store: EventStore) -> None:
    session = LedgerSession("prune", store=store)
    expired: list[Any] = [{"role": "user", "content": f"expired {i}"} for i in range(3)]
    kept: Any = {"role": "user", "content": "kept"}
    _run(session.add_items([*expired, kept, *ORIGINAL]))
    snapshot = _run(
        session._get_compaction_snapshot(
            4, prune_prefix=lambda item: str(item.get("content")).startswith("expired")
        )
    )
    assert snapshot is not None
    assert _run(snapshot.replace_suffix(0, [SUMMARY])) is True
    assert _run(session.get_items()) == [kept, SUMMARY]
    retracted = [e.event for e in session.memory.history() if isinstance(e.event, MessageRetracted)]
    assert [r.seq for r in retracted] == [1, 2, 3, 5, 6, 7, 8]  # the expired, then the suffix
    assert added_items(session) == [*expired, kept, *ORIGINAL, SUMMARY]


def test_a_cancelled_replacement_settles_before_the_cancellation_and_a_newer_add() -> None:
    # The equivalent of the SDK's test_cancelled_suffix_transaction_settles_before_newer_append
    # (deselected: it gates SQLiteSession's private _insert_items): the write is held inside
    # its transaction through prune_prefix, the caller is cancelled twice meanwhile.
    from eventlog import InMemoryEventStore

    session = LedgerSession("cancel", store=InMemoryEventStore())
    _run(session.add_items(ORIGINAL))
    inside, release = threading.Event(), threading.Event()

    def gate(item: Any) -> bool:
        inside.set()
        assert release.wait(10)
        return False

    async def scenario() -> None:
        snapshot = await session._get_compaction_snapshot(2, prune_prefix=gate)
        assert snapshot is not None
        work = asyncio.ensure_future(snapshot.replace_suffix(0, [SUMMARY]))
        while not inside.is_set():
            await asyncio.sleep(0.001)
        work.cancel()
        await asyncio.sleep(0)
        work.cancel()
        await asyncio.sleep(0)
        assert not work.done()  # the write's outcome is not known yet: still waited for
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await work
        newer: Any = {"role": "user", "content": "newer"}
        await session.add_items([newer])

    _run(scenario())
    assert _run(session.get_items()) == [
        *ORIGINAL[:2],
        SUMMARY,
        {"role": "user", "content": "newer"},
    ]


def test_a_subclass_that_changes_items_gets_no_compaction_hooks(store: EventStore) -> None:
    class Shouting(LedgerSession):
        async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
            loud: list[Any] = [{**i, "content": str(i["content"]).upper()} for i in items]
            await super().add_items(loud)

    session = Shouting("sub", store=store)
    hi: Any = {"role": "user", "content": "hi"}
    _run(session.add_items([hi]))
    assert _run(session._get_compaction_snapshot(5)) is None
    assert _run(session._atomic_replace_items([SUMMARY])) is False
    assert _run(session.get_items()) == [{"role": "user", "content": "HI"}]
