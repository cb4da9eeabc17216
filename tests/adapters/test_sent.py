"""What the model was sent is recorded: a `context_sent` event per model call, replayed byte for
byte by `sent(seq)` and `chatledger sent`."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("langchain_core", reason="the langchain extra is not installed")

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from eventlog import ContentErasedError, SQLiteEventStore
from eventlog.formats.jsonl import export_jsonl, import_jsonl
from eventlog.models import ContextSent
from eventlog.serialization import decode_event
from projections import MessageWindowPolicy, TokenWindowPolicy
from projections.adapters.langchain import LedgerChatMessageHistory
from projections.adapters.openai_agents import LedgerSession
from projections.calls import model_call, what_if_call
from projections.meta import check_window_record
from projections.tokens import OpenAiTokenCountEstimator
from tests.adapters.test_item_list import CountingStore

HISTORY: list[Any] = [
    {"role": "user", "content": "Weather in Paris?"},
    {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city": "P"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "21 C"},
    {"role": "assistant", "content": "21 degrees."},
    {"role": "user", "content": "Thanks."},
]
NEW: list[Any] = [{"role": "user", "content": "And Rome?"}]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _call(session: LedgerSession, policy: Any, new: list[Any], **kwargs: Any) -> list[Any]:
    """One model call as the SDK makes it: get_items(), then the session_input_callback."""
    callback = session.window_callback(policy, **kwargs)

    async def run() -> list[Any]:
        history: list[Any] = list(await session.get_items())
        return await callback(history, new)

    return asyncio.run(run())


def test_a_recorded_call_is_reproduced_byte_for_byte(tmp_path) -> None:
    store = CountingStore(tmp_path / "s.db")
    session = LedgerSession("conv", store=store)
    asyncio.run(session.add_items(HISTORY))
    store.appends = store.rows_read = 0
    chosen = _call(session, MessageWindowPolicy(3), NEW)
    # Check one append per call, and the window is LangChain4j's (a call with its output).
    assert store.appends == 1
    assert chosen == [HISTORY[3], HISTORY[4], NEW[0]]
    (event_record,) = store.read("conv", gt=5)
    event = decode_event(event_record)
    assert isinstance(event, ContextSent)
    # Check history items are named by their events' seqs, the new input is kept as sent.
    assert event.sent == ({"ref": [4, 0]}, {"ref": [5, 0]}, {"new": NEW[0]})
    assert (event.policy, event.profile, event.tokens) == ("messages:3", "openai", None)
    # Check a new object replays it exactly, and the session's list is unchanged by it.
    fresh = LedgerSession("conv", store=store)
    assert _canonical(asyncio.run(fresh.sent(6))) == _canonical(chosen)
    assert asyncio.run(fresh.get_items()) == HISTORY


def test_an_item_the_framework_changed_is_kept_as_it_was_sent(tmp_path) -> None:
    store = SQLiteEventStore(tmp_path / "s.db")
    session = LedgerSession("conv", store=store)
    asyncio.run(session.add_items(HISTORY))
    callback = session.window_callback(MessageWindowPolicy(10), valid_for=None)

    async def run() -> list[Any]:
        history: list[Any] = list(await session.get_items())
        history[0] = {**history[0], "content": "Weather in Paris? (edited by a hook)"}
        return await callback(history, [])

    chosen = asyncio.run(run())
    record = store.read("conv")[-1]
    event = decode_event(record)
    assert isinstance(event, ContextSent)
    assert event.sent[0] == {"new": chosen[0]}  # not the stored item: what was really sent
    assert all("ref" in entry for entry in event.sent[1:])
    assert _canonical(asyncio.run(session.sent(record.seq))) == _canonical(chosen)


def test_a_token_policy_records_its_count_and_no_window_is_never_a_sentinel(tmp_path) -> None:
    store = SQLiteEventStore(tmp_path / "s.db")
    session = LedgerSession("conv", store=store)
    asyncio.run(session.add_items(HISTORY))
    estimator = OpenAiTokenCountEstimator("gpt-4o")
    chosen = _call(session, TokenWindowPolicy(60, estimator), NEW)
    event = decode_event(store.read("conv")[-1])
    assert isinstance(event, ContextSent)
    assert event.tokens is not None
    assert 0 < event.tokens <= 60 + 10  # the budget, plus the reply priming
    assert event.policy.startswith("tokens:60:")
    assert chosen[-1] == NEW[0]
    with pytest.raises(ValueError, match="no window recorded at seq 2") as caught:
        asyncio.run(session.sent(2))
    assert "2147483647" not in str(caught.value)


def test_a_langchain_window_read_records_what_it_returned(tmp_path) -> None:
    store = SQLiteEventStore(tmp_path / "h.db")
    LedgerChatMessageHistory("h", store=store).add_messages(
        [SystemMessage("be terse"), HumanMessage("hi"), AIMessage("hello"), HumanMessage("bye")]
    )
    history = LedgerChatMessageHistory("h", store=store, window=MessageWindowPolicy(2))
    shown = history.messages
    assert [m.content for m in shown] == ["be terse", "bye"]
    head = store.read("h")[-1]
    assert head.kind == "context_sent"
    event = decode_event(head)
    assert isinstance(event, ContextSent)
    assert event.sent == ({"ref": [1, 0]}, {"ref": [4, 0]})
    assert (event.policy, event.adapter) == ("messages:2", "langchain")
    assert LedgerChatMessageHistory("h", store=store).sent(head.seq) == shown
    assert asyncio.run(history.asent(head.seq)) == shown
    # Check the full history (no window) records nothing and still reads the whole list.
    full = LedgerChatMessageHistory("h", store=store)
    assert len(full.messages) == 4
    assert store.read("h")[-1].seq == head.seq
    quiet = LedgerChatMessageHistory("h", store=store, window=MessageWindowPolicy(2), record=False)
    assert quiet.messages == shown
    assert store.read("h")[-1].seq == head.seq


def test_the_command_line_prints_what_was_sent(tmp_path, cli) -> None:
    path = tmp_path / "s.db"
    with SQLiteEventStore(path) as store:
        session = LedgerSession("conv", store=store)
        asyncio.run(session.add_items(HISTORY))
        chosen = _call(session, MessageWindowPolicy(3), NEW)
    shown = cli("sent", "--db", path, "conv", "6")
    assert shown.returncode == 0, shown.stderr
    printed = json.loads(shown.stdout)
    assert _canonical(printed["sent"]) == _canonical(chosen)
    assert (printed["policy"], printed["profile"], printed["adapter"]) == (
        "messages:3",
        "openai",
        "openai_agents",
    )
    none = cli("sent", "--db", path, "conv", "3")
    assert none.returncode == 1
    assert "no window recorded at seq 3" in none.stderr
    shown_view = cli("show", "--db", path, "conv", "--as-of", "6")
    assert shown_view.returncode == 0, shown_view.stderr
    assert "model call at seq 6 (messages:3, valid for openai): sent 2 history items and 1 new" in (
        shown_view.stdout
    )
    # Check what was left out is named with the reason the recorded policy gives.
    assert "left out events 1-2 (2): outside the last 3 items" in shown_view.stdout
    assert "left out event 3: tool result whose call left the window" in shown_view.stdout
    assert "model call" not in cli("show", "--db", path, "conv", "--as-of", "5").stdout
    history = cli("history", "--db", path, "conv")
    assert "sent 3 items to a model (messages:3)" in history.stdout
    assert "2147483647" not in history.stdout + shown.stdout + none.stderr + shown_view.stdout


def test_a_recorded_call_survives_export_and_import(tmp_path) -> None:
    store = SQLiteEventStore(tmp_path / "a.db")
    session = LedgerSession("conv", store=store)
    asyncio.run(session.add_items(HISTORY))
    chosen = _call(session, MessageWindowPolicy(3), NEW)
    out = io.StringIO()
    export_jsonl(store, out)
    copy = SQLiteEventStore(tmp_path / "b.db")
    import_jsonl(copy, out.getvalue().splitlines(), check=check_window_record)
    assert _canonical(asyncio.run(LedgerSession("conv", store=copy).sent(6))) == _canonical(chosen)


def test_a_call_whose_content_was_erased_says_so_not_that_no_window_was_recorded(
    tmp_path, cli
) -> None:
    path = tmp_path / "s.db"
    with SQLiteEventStore(path) as store:
        session = LedgerSession("conv", store=store)
        asyncio.run(session.add_items(HISTORY))
        _call(session, MessageWindowPolicy(3), NEW)
        history = LedgerChatMessageHistory("lc", store=store, window=MessageWindowPolicy(2))
        history.add_messages([HumanMessage("My card is 4111")])
        assert [m.content for m in history.messages] == ["My card is 4111"]  # event 2 records it
        store.erase("conv", reason="GDPR request 17")
        store.erase("lc", reason="GDPR request 18")
        # Check event 6 is still a model call, whose content is gone: the error names the
        # erasure (a ContentErasedError, as as_of gives), not "no window recorded".
        with pytest.raises(ContentErasedError, match=r"erased on .*reason 'GDPR request 17'"):
            asyncio.run(LedgerSession("conv", store=store).sent(6))
        with pytest.raises(ContentErasedError, match="reason 'GDPR request 18'"):
            LedgerChatMessageHistory("lc", store=store).sent(2)
        # Check an event that never recorded a window still says that.
        with pytest.raises(ValueError, match="no window recorded at seq 1"):
            asyncio.run(LedgerSession("conv", store=store).sent(1))
    shown = cli("sent", "--db", path, "conv", "6")
    assert shown.returncode == 1
    assert "was erased on" in shown.stderr
    assert "GDPR request 17" in shown.stderr
    assert "no window recorded" not in shown.stderr


@pytest.mark.parametrize("limited", [False, True])
def test_a_call_raced_by_another_writer_records_the_list_it_chose_from(
    tmp_path, limited: bool
) -> None:
    store = SQLiteEventStore(tmp_path / "s.db")
    session = LedgerSession("conv", store=store)
    asyncio.run(session.add_items(HISTORY))
    other = LedgerSession("conv", store=SQLiteEventStore(tmp_path / "s.db"))  # another writer
    callback = session.window_callback(MessageWindowPolicy(3), valid_for=None)
    meanwhile: list[Any] = [{"role": "user", "content": "Added by another process."}]

    async def run() -> list[Any]:
        history: list[Any] = list(await session.get_items(4 if limited else None))
        # Between the SDK's get_items() and its input callback, another writer adds an item.
        await other.add_items(meanwhile)
        return await callback(history, NEW)

    chosen = asyncio.run(run())
    (record,) = [r for r in store.read("conv") if r.kind == "context_sent"]
    # Check the call was chosen again from the list as it is now, and that its record holds
    # that list: re-running the recorded policy sends what was sent (before, "not reproduced").
    assert chosen == [HISTORY[4], meanwhile[0], NEW[0]]
    assert model_call(store, "conv", record.seq).reproduced is True
    assert what_if_call(store, "conv", record.seq, MessageWindowPolicy(3)).same
    assert _canonical(asyncio.run(session.sent(record.seq))) == _canonical(chosen)


def test_a_call_over_a_limited_history_under_a_wider_policy_is_reproduced(tmp_path) -> None:
    """The SDK's `get_items(limit=2)` gives the callback only the newest two items; a
    MessageWindowPolicy(10) over them sends those two. The audit re-runs the policy over the
    history the call had, not the whole list (which would choose all five: "does NOT reproduce",
    before the record kept the limit)."""
    store = SQLiteEventStore(tmp_path / "s.db")
    session = LedgerSession("conv", store=store)
    asyncio.run(session.add_items(HISTORY))
    callback = session.window_callback(MessageWindowPolicy(10), valid_for=None)

    async def run() -> list[Any]:
        history: list[Any] = list(await session.get_items(2))
        return await callback(history, NEW)

    chosen = asyncio.run(run())
    assert chosen == [HISTORY[3], HISTORY[4], NEW[0]]
    (record,) = [r for r in store.read("conv") if r.kind == "context_sent"]
    call = model_call(store, "conv", record.seq)
    assert call.reproduced is True
    event = decode_event(record)
    assert isinstance(event, ContextSent)
    assert event.history_limit == 2
    # Check the items outside the history are named, with the reason.
    assert [tuple(run) for run in call.left] == [
        ((1, 0), (3, 0), 3, "not in the history read (get_items(limit=2))")
    ]
    # Check what-if runs over the same history: two messages keep the newest item and the
    # new input.
    assert what_if_call(store, "conv", record.seq, MessageWindowPolicy(10)).same
    narrower = what_if_call(store, "conv", record.seq, MessageWindowPolicy(2))
    assert [e for e in narrower.sent if "ref" in e] == [{"ref": [5, 0]}]
    # Check a call over the whole list (no limit) records no limit: its payload is as before.
    whole = session.window_callback(MessageWindowPolicy(10), valid_for=None)

    async def run_whole() -> list[Any]:
        history: list[Any] = list(await session.get_items())
        return await whole(history, NEW)

    asyncio.run(run_whole())
    last = store.read("conv")[-1]
    assert "history_limit" not in last.payload
    assert model_call(store, "conv", last.seq).reproduced is True


@pytest.mark.parametrize("other_limit", [1, 600])  # the short read and the one in steps
def test_two_runs_sharing_a_session_object_each_record_their_own_read(
    tmp_path, other_limit: int
) -> None:
    """Two requests of one conversation run at once on one LedgerSession (a server keeping
    an object per conversation). Run A reads the whole list; before its model call, run B
    reads `get_items(limit=1)`. A's call must be recorded over A's read: before, it took B's
    (limit 1, one ref), so A's history items were kept as new input and the audit said events
    1-4 were "not in the history read (get_items(limit=1))" and the call did NOT reproduce,
    though it sent exactly what its policy chooses."""
    store = SQLiteEventStore(tmp_path / "s.db")
    session = LedgerSession("conv", store=store)
    asyncio.run(session.add_items(HISTORY))
    callback = session.window_callback(MessageWindowPolicy(10), valid_for=None)

    async def both() -> list[Any]:
        a_read, b_read = asyncio.Event(), asyncio.Event()

        async def run_a() -> list[Any]:
            history: list[Any] = list(await session.get_items())
            a_read.set()
            await b_read.wait()  # run B reads in between
            return await callback(history, NEW)

        async def run_b() -> None:
            await a_read.wait()
            await session.get_items(other_limit)
            b_read.set()

        chosen: list[Any] = (await asyncio.gather(run_a(), run_b()))[0]
        return chosen

    assert asyncio.run(both()) == [*HISTORY, *NEW]
    (record,) = [r for r in store.read("conv") if r.kind == "context_sent"]
    event = decode_event(record)
    assert isinstance(event, ContextSent)
    assert event.history_limit is None
    assert [e.get("ref") for e in event.sent] == [[1, 0], [2, 0], [3, 0], [4, 0], [5, 0], None]
    call = model_call(store, "conv", record.seq)
    assert call.reproduced is True
    assert call.left == []
    assert what_if_call(store, "conv", record.seq, MessageWindowPolicy(10)).same


def test_a_history_limit_is_checked_and_optional_in_the_format() -> None:
    # Check an event without the field (as written before it) decodes, and bad limits are
    # refused.
    from pydantic import ValidationError

    assert ContextSent(sent=(), policy="messages:3", adapter="x").history_limit is None
    for bad in (-1, True, 2.0, "3"):
        with pytest.raises(ValidationError):
            ContextSent(sent=(), policy="messages:3", adapter="x", history_limit=bad)


@pytest.mark.parametrize(
    ("call", "old", "new"),
    [
        (0, ',"history_limit":2', ""),  # the limit removed: the audit would rerun the whole list
        (0, '"history_limit":2', '"history_limit":3'),  # changed
        (1, '"adapter":"openai_agents"', '"adapter":"openai_agents","history_limit":2'),  # added
    ],
)
def test_a_history_limit_edited_without_the_key_is_refused_by_the_audit_and_verify(
    tmp_path, call: int, old: str, new: str
) -> None:
    """A forger without the chain key cannot make the audit of a keyed ledger say something
    false about a call by adding, changing or removing its history limit: the limit is in the
    hashed payload, so verify() and model_call/what_if_call refuse the record."""
    import sqlite3

    from eventlog import ChainIntegrityError

    key = b"k" * 32
    path = tmp_path / "s.db"
    store = SQLiteEventStore(path, chain_key=key)
    session = LedgerSession("conv", store=store)
    asyncio.run(session.add_items(HISTORY))
    callback = session.window_callback(MessageWindowPolicy(10), valid_for=None)

    async def run(limit: int | None) -> None:
        history: list[Any] = list(await session.get_items(limit))
        await callback(history, NEW)

    asyncio.run(run(2))
    asyncio.run(run(None))
    store.close()
    calls = [
        r for r in SQLiteEventStore(path, chain_key=key).read("conv") if r.kind == "context_sent"
    ]
    target = calls[call]
    assert old in target.payload
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE events SET payload = replace(payload, ?, ?) WHERE position = ?",
            (old, new, target.position),
        )
    audited = SQLiteEventStore(path, chain_key=key, read_only=True)
    assert not audited.verify().ok
    for seq in (r.seq for r in calls):
        with pytest.raises(ChainIntegrityError, match=f"breaks at seq {target.seq}"):
            model_call(audited, "conv", seq)
        with pytest.raises(ChainIntegrityError, match=f"breaks at seq {target.seq}"):
            what_if_call(audited, "conv", seq, MessageWindowPolicy(10))
    audited.close()


def test_a_task_that_read_a_turn_ago_records_this_turns_read_made_in_a_task_it_started(
    tmp_path,
) -> None:
    """The per-task read must not shadow a newer one: turn one reads in this task; turn two
    reads in a task this one starts and calls the callback here. Turn two is recorded over
    its own read: the stale one's list is refused by the append (the list changed since),
    and the callback reads again, here."""
    store = SQLiteEventStore(tmp_path / "s.db")
    session = LedgerSession("conv", store=store)
    asyncio.run(session.add_items(HISTORY[:2]))
    callback = session.window_callback(MessageWindowPolicy(10), valid_for=None)

    async def turns() -> list[Any]:
        first: list[Any] = list(await session.get_items())
        await callback(first, NEW)
        await session.add_items(HISTORY[2:])
        history: list[Any] = list(await asyncio.create_task(session.get_items()))
        return await callback(history, NEW)

    assert asyncio.run(turns()) == [*HISTORY, *NEW]
    last = store.read("conv")[-1]
    event = decode_event(last)
    assert isinstance(event, ContextSent)
    assert [e.get("ref") for e in event.sent][:5] == [[1, 0], [2, 0], [4, 0], [5, 0], [6, 0]]
    assert model_call(store, "conv", last.seq).reproduced is True


def test_a_stale_per_task_read_of_the_same_list_does_not_shadow_a_limited_one(tmp_path) -> None:
    """As above, with nothing added between the turns: the stale read's list is still the
    list, so no append refuses it. Turn two read `get_items(2)` in a task it started; it
    must be recorded with that limit, not as turn one's read of everything (which the audit
    re-runs over all five items: "does NOT reproduce")."""
    store = SQLiteEventStore(tmp_path / "s.db")
    session = LedgerSession("conv", store=store)
    asyncio.run(session.add_items(HISTORY))
    peek = session.window_callback(MessageWindowPolicy(10), valid_for=None)
    callback = session.window_callback(MessageWindowPolicy(10), valid_for=None)

    async def turns() -> list[Any]:
        first: list[Any] = list(await session.get_items())
        await peek(first, NEW)
        history: list[Any] = list(await asyncio.create_task(session.get_items(2)))
        return await callback(history, NEW)

    assert asyncio.run(turns()) == [*HISTORY[3:], *NEW]
    last = store.read("conv")[-1]
    event = decode_event(last)
    assert isinstance(event, ContextSent)
    assert event.history_limit == 2
    assert model_call(store, "conv", last.seq).reproduced is True


def test_a_long_lived_task_serving_many_sessions_keeps_no_read_of_a_dropped_one(tmp_path) -> None:
    """A worker task serving conversation after conversation, each on a LedgerSession of its
    own: the per-task record of the last read must go with the object. With a context
    variable per object, the worker's context kept one entry - that read's items - for every
    object it ever used."""
    import contextvars
    import gc

    from projections.adapters.openai_agents import _SERVED_HERE

    store = SQLiteEventStore(tmp_path / "s.db")

    async def worker() -> tuple[int, int]:
        sizes = []
        for n in range(30):
            session = LedgerSession(f"conv-{n}", store=store)
            await session.add_items(HISTORY)
            assert len(await session.get_items()) == len(HISTORY)
            del session
            gc.collect()
            sizes.append(len(contextvars.copy_context()))
            assert not _SERVED_HERE.get()  # and the object's read went with it
        return sizes[0], sizes[-1]

    first, last = asyncio.run(worker())
    assert last == first  # not one entry more per session served
