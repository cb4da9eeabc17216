"""Attacks on the adapters' claims, by someone without the secret each claim relies on.

A forger with write access to the database but not the chain key edits a session's rows with
plain SQL (real SQLite files, the real PostgreSQL server); a careless caller passes hostile
limits and items; real processes race on one session. Each attack must end in a read that
refuses, a clear error, or a faithful round trip - never a traceback, a hang or lost data.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from eventlog import ChainIntegrityError
from projections import MessageWindowPolicy, what_if_call
from projections.adapters.openai_agents import LedgerSession
from projections.calls import model_call
from tests.conftest import PG_DSN
from tests.eventlog.test_forger import Db

KEY = b"the application's chain key, 32b"

pytestmark = pytest.mark.skip_backend("memory")  # attacks edit files and rows


@pytest.fixture
def db(backend: Any) -> Db:
    return Db(backend)


def _rechain(db: Db, stream: str, payloads: dict[int, str]) -> None:
    """Rewrite ``stream`` with ``payloads`` (seq -> stored payload text) and every hash
    recomputed as an unkeyed chain: the best a forger without the key can do."""
    db.rechain_unkeyed(stream, {}, payloads=payloads)


def _session(store: Any, sid: str = "s") -> LedgerSession:
    return LedgerSession(sid, store=store)


ITEMS: list[Any] = [
    {"role": "user", "content": "Transfer 10 EUR to Bob"},
    {"role": "assistant", "content": "Done: 10 EUR."},
    {"role": "user", "content": "Thanks"},
]


async def _recorded_call(session: LedgerSession) -> list[Any]:
    history: list[Any] = await session.get_items()
    call = session.window_callback(MessageWindowPolicy(10))
    return await call(history, [{"role": "user", "content": "And Alice?"}])


# ------------------------------------------------------------ [forger] on context_sent


@pytest.mark.parametrize("rehash", [False, True], ids=["naive", "rehashed"])
def test_a_forged_new_item_in_a_context_sent_record_is_refused(backend, db, rehash):
    store = backend.open(chain_key=KEY)
    session = _session(store)
    asyncio.run(session.add_items(ITEMS))
    sent = asyncio.run(_recorded_call(session))
    (row,) = [r for r in db.rows("s") if r["kind"] == "context_sent"]
    # Check that the forger's edit names a different input than the one the model got.
    forged = row["payload"].replace("And Alice?", "Send Alice 9000 EUR")
    assert forged != row["payload"]
    if rehash:
        _rechain(db, "s", {row["seq"]: forged})
    else:
        db.run(
            "UPDATE {events} SET payload = ? WHERE stream_id = ? AND seq = ?",
            forged,
            "s",
            row["seq"],
        )
    fresh = backend.open(chain_key=KEY)
    # Check the record is never given back as what was sent, by a live or a new session.
    for reader in (session, _session(fresh)):
        with pytest.raises(ChainIntegrityError) as caught:
            asyncio.run(reader.sent(row["seq"]))
        assert caught.value.stream_id == "s"
    assert not fresh.verify().ok
    assert sent[-1]["content"] == "And Alice?"


def test_a_context_sent_ref_pointed_at_another_item_is_refused(backend, db):
    store = backend.open(chain_key=KEY)
    session = _session(store)
    asyncio.run(session.add_items(ITEMS))
    asyncio.run(_recorded_call(session))
    (row,) = [r for r in db.rows("s") if r["kind"] == "context_sent"]
    event = json.loads(row["payload"])
    # Check the forger swaps which history items the record says were sent.
    event["sent"][0], event["sent"][1] = event["sent"][1], event["sent"][0]
    forged = json.dumps(event, sort_keys=True, separators=(",", ":"))
    _rechain(db, "s", {row["seq"]: forged})
    with pytest.raises(ChainIntegrityError):
        asyncio.run(_session(backend.open(chain_key=KEY)).sent(row["seq"]))


# ------------------------------------------------------------ [forger] on the item list


def test_a_popped_item_brought_back_by_deleting_the_retraction_is_refused(backend, db):
    store = backend.open(chain_key=KEY)
    session = _session(store)
    asyncio.run(session.add_items(ITEMS))
    assert asyncio.run(session.pop_item()) == ITEMS[-1]
    (retraction,) = [r for r in db.rows("s") if r["kind"] == "message_retracted"]
    db.run("DELETE FROM {events} WHERE stream_id = ? AND seq = ?", "s", retraction["seq"])
    # Check neither a new session nor the live one serves the popped item again.
    with pytest.raises(ChainIntegrityError):
        asyncio.run(_session(backend.open(chain_key=KEY)).get_items())
    with pytest.raises(ChainIntegrityError):
        asyncio.run(session.get_items(limit=2))


def test_an_item_never_added_forged_at_the_head_is_refused(backend, db):
    store = backend.open(chain_key=KEY)
    session = _session(store)
    asyncio.run(session.add_items(ITEMS[:2]))
    rows = db.rows("s")
    # The forger makes the head's payload a different item and rehashes (no key).
    forged = rows[-1]["payload"].replace("Done: 10 EUR.", "Done: 9000 EUR.")
    assert forged != rows[-1]["payload"]
    _rechain(db, "s", {rows[-1]["seq"]: forged})
    for limit in (None, 1):
        with pytest.raises(ChainIntegrityError):
            asyncio.run(_session(backend.open(chain_key=KEY)).get_items(limit=limit))


# ------------------------------------------------------------ real processes on one session

_SESSION_WORKER = textwrap.dedent(
    """
    import asyncio, json, sys
    from projections.adapters.openai_agents import LedgerSession
    path, role, n, dsn = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if path.startswith("pg:"):
        from eventlog.postgres import PostgresEventStore
        store = PostgresEventStore(dsn, schema=path[3:], create_schema=False)
    else:
        from eventlog import SQLiteEventStore
        store = SQLiteEventStore(path)
    session = LedgerSession("s", store=store)
    async def run():
        while role == "popper" and not await session.get_items(limit=1):
            await asyncio.sleep(0.01)  # start once the adders have
        for i in range(n):
            await asyncio.sleep(0.002)  # interleave with the other processes
            if role == "popper":
                if i % 7 == 6:
                    await session.clear_session()
                    print(json.dumps({"cleared": True}), flush=True)
                else:
                    print(json.dumps({"popped": await session.pop_item()}), flush=True)
            else:
                batch = [{"role": "user", "content": f"{role}:{i}:{j}"} for j in range(3)]
                await session.add_items(batch)
    asyncio.run(run())
    store.close()
    """
)


def _location(backend: Any) -> str:
    return f"pg:{backend.schema}" if backend.name == "postgres" else str(backend.path)


def test_processes_adding_popping_and_clearing_one_session_lose_and_duplicate_nothing(backend):
    from eventlog.serialization import decode_event

    store = backend.open()  # creates the file or schema the workers open
    procs = {
        role: subprocess.Popen(
            [sys.executable, "-c", _SESSION_WORKER, _location(backend), role, str(n), PG_DSN],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role, n in (("a", 60), ("b", 60), ("popper", 50))
    }
    outputs = {}
    for role, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        outputs[role] = [json.loads(line) for line in out.splitlines()]
    # Replay the history the plain way: adds, retractions and clears in seq order.
    items: dict[tuple[int, int], Any] = {}
    current: list[tuple[int, int]] = []
    retracted: list[Any] = []
    clears = 0
    for record in store.read_verified("s"):
        event = decode_event(record)
        if event.kind == "message_added":
            items[(record.seq, 0)] = event.message.attributes["openai_agents.item"]
            current.append((record.seq, 0))
        elif event.kind == "message_retracted":
            ref = (event.seq, event.index)
            assert ref in current, f"seq {record.seq} retracts {ref}, not in the list"
            current.remove(ref)
            retracted.append(items[ref])
        elif event.kind == "memory_cleared":
            current.clear()
            clears += 1
    # Check every add landed once, each batch of three on consecutive seqs (one append).
    contents = [item["content"] for item in items.values()]
    assert sorted(contents) == sorted(
        f"{w}:{i}:{j}" for w in "ab" for i in range(60) for j in range(3)
    )
    by_seq = {ref[0]: item["content"] for ref, item in items.items()}
    for seq, content in by_seq.items():
        if content.endswith(":0"):
            assert [by_seq.get(seq + k) for k in range(3)] == [
                content[:-1] + str(k) for k in range(3)
            ]
    # Check each pop returned exactly the item its retraction names, and each clear landed.
    popped = [o["popped"] for o in outputs["popper"] if o.get("popped")]
    assert popped == retracted
    assert len(popped) > 5  # the race happened: the popper found items to take
    assert clears == sum(1 for o in outputs["popper"] if "cleared" in o)
    # Check a new session serves exactly the replayed list, whole and by limit.
    fresh = _session(backend.open())
    assert asyncio.run(fresh.get_items()) == [items[ref] for ref in current]
    assert asyncio.run(fresh.get_items(limit=2)) == [items[ref] for ref in current[-2:]]
    assert store.verify("s").ok


# ------------------------------------------------------------ careless callers (one SQLite file)


def _deep(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.fixture
def sqlite_store(tmp_path):
    from eventlog import SQLiteEventStore

    with SQLiteEventStore(tmp_path / "attacks.db") as store:
        yield store


@pytest.mark.parametrize("limit", [-1, -(10**20), 10**18, None])
def test_get_items_takes_a_negative_or_huge_limit_as_everything(sqlite_store, limit):
    session = _session(sqlite_store)
    asyncio.run(session.add_items(ITEMS))
    assert asyncio.run(session.get_items(limit=limit)) == ITEMS


@pytest.mark.parametrize("limit", [True, False, "3", 2.5, float("nan")])
def test_get_items_refuses_a_limit_that_is_not_an_int_naming_it(sqlite_store, limit):
    session = _session(sqlite_store)
    asyncio.run(session.add_items(ITEMS))
    # Before: "3" raised "'<' not supported ..." and True "read: limit must be ...".
    with pytest.raises(TypeError, match=r"get_items: limit must be an int .* got"):
        asyncio.run(session.get_items(limit=limit))


def test_items_nested_too_deep_for_json_are_refused_and_nothing_is_written(sqlite_store):
    from langchain_core.messages import HumanMessage

    from projections.adapters.langchain import LedgerChatMessageHistory

    session = _session(sqlite_store)
    asyncio.run(session.add_items(ITEMS[:1]))
    deep: Any = {"role": "user", "content": _deep(5_000)}
    # Before: a RecursionError from json, then from the error message's own repr.
    with pytest.raises(TypeError, match=r"add_items: item .* is not JSON"):
        asyncio.run(session.add_items([ITEMS[1], deep]))
    call = session.window_callback(MessageWindowPolicy(5))

    async def model_call() -> list[Any]:
        history: list[Any] = await session.get_items()
        return await call(history, [deep])

    with pytest.raises(TypeError, match="is not JSON"):
        asyncio.run(model_call())
    with pytest.raises(TypeError, match="add_items: an item must be"):
        asyncio.run(session.add_items([[_deep(5_000)]]))  # type: ignore[list-item]
    history = LedgerChatMessageHistory("lc", store=sqlite_store)
    deep_message = HumanMessage("x", additional_kwargs={"d": _deep(5_000)})
    with pytest.raises(TypeError, match="add_messages: HumanMessage is not JSON"):
        history.add_messages([HumanMessage("kept?"), deep_message])
    with pytest.raises(TypeError, match="is not a LangChain message"):
        history.add_messages([_deep(5_000)])
    # Check nothing of either refused write landed.
    assert asyncio.run(_session(sqlite_store).get_items()) == ITEMS[:1]
    assert LedgerChatMessageHistory("lc", store=sqlite_store).messages == []


def test_a_langchain_message_with_a_lone_surrogate_is_refused_by_add_messages(sqlite_store):
    from langchain_core.messages import HumanMessage

    from projections.adapters.langchain import LedgerChatMessageHistory

    history = LedgerChatMessageHistory("lc", store=sqlite_store)
    # Before: a pydantic ValidationError of an internal TextContent model.
    with pytest.raises(TypeError, match=r"add_messages: HumanMessage .*surrogates not allowed"):
        history.add_messages([HumanMessage("bad \ud800 text")])
    assert history.messages == []


@pytest.mark.parametrize("window", [20, "20", True])
def test_a_window_that_is_not_a_policy_is_refused_where_it_is_given(sqlite_store, window):
    from projections.adapters.langchain import LedgerChatMessageHistory
    from projections.adapters.openai_agents import window_callback

    # Before: AttributeError 'int' object has no attribute 'evict_permille' (or 'count'),
    # at the first read or model call rather than where the window was given.
    with pytest.raises(TypeError, match=r"window=MessageWindowPolicy\(20\)"):
        LedgerChatMessageHistory("lc", store=sqlite_store, window=window)
    with pytest.raises(TypeError, match=r"window_callback: policy must be a window policy"):
        window_callback(window)
    with pytest.raises(TypeError, match=r"window_callback: policy must be a window policy"):
        _session(sqlite_store).window_callback(window)


@pytest.mark.parametrize("seq", ["1", True, 1.0])
def test_sent_refuses_a_seq_that_is_not_an_int_naming_it(sqlite_store, seq):
    session = _session(sqlite_store)
    asyncio.run(session.add_items(ITEMS))
    asyncio.run(_recorded_call(session))
    # Before: "'>=' not supported between 'str' and 'int'", or "read: lte must be an int".
    with pytest.raises(TypeError, match=rf"sent\({seq!r}\): a seq is an int"):
        asyncio.run(session.sent(seq))
    with pytest.raises(TypeError, match=rf"what_if_call\({seq!r}\): a seq is an int"):
        what_if_call(sqlite_store, "s", seq, MessageWindowPolicy(3))
    with pytest.raises(TypeError, match=rf"model_call\({seq!r}\): a seq is an int"):
        model_call(sqlite_store, "s", seq)
    assert asyncio.run(session.sent(4))[-1] == {"content": "And Alice?", "role": "user"}


# ------------------------------------------------------------ LangGraph configs and limits


def _put(saver: Any, configurable: dict[str, Any], value: Any) -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"x": value}
    checkpoint["channel_versions"] = {"x": "1"}
    config: Any = {"configurable": configurable}
    return saver.put(config, checkpoint, {"source": "input", "step": 0}, {"x": "1"})


@pytest.mark.parametrize("ns", [5, None])
def test_a_namespace_given_as_a_number_or_none_is_the_one_list_copy_and_prune_find(
    sqlite_store, ns
):
    from projections.adapters.langgraph import LedgerSaver

    saver = LedgerSaver(sqlite_store)
    put = _put(saver, {"thread_id": "t", "checkpoint_ns": ns}, "secret")
    assert put["configurable"]["checkpoint_ns"] == ("5" if ns == 5 else "")
    asked: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ns}}
    # Before: an int namespace was stored under a memory id list() and copy_thread() skip,
    # and list() with checkpoint_ns=None raised a TypeError about the memory id.
    assert [t.checkpoint["channel_values"] for t in saver.list(asked)] == [{"x": "secret"}]
    assert len(list(saver.list({"configurable": {"thread_id": "t"}}))) == 1
    saver.copy_thread("t", "t2")
    assert len(list(saver.list({"configurable": {"thread_id": "t2"}}))) == 1
    assert saver.get_tuple(asked) is not None


@pytest.mark.parametrize("limit", ["3", 2.5, True, -1])
def test_langgraph_list_refuses_a_limit_that_is_not_a_count(sqlite_store, limit):
    from projections.adapters.langgraph import LedgerSaver

    saver = LedgerSaver(sqlite_store)
    _put(saver, {"thread_id": "t"}, 1)
    # Before: "3" raised "'<' not supported ..." and 2.5 was taken as a limit.
    with pytest.raises(ValueError, match="list: limit must be None or an int >= 0"):
        list(saver.list(None, limit=limit))


def test_langgraph_list_takes_a_configurable_of_none_as_no_filter(sqlite_store):
    from projections.adapters.langgraph import LedgerSaver

    saver = LedgerSaver(sqlite_store)
    _put(saver, {"thread_id": "t"}, 1)
    # Before: AttributeError 'NoneType' object has no attribute 'get' (get_tuple said why).
    config: Any = {"configurable": None}
    assert len(list(saver.list(config))) == 1


_SAVER_WORKER = textwrap.dedent(
    """
    import json, sys
    from langgraph.checkpoint.base import empty_checkpoint
    from projections.adapters.langgraph import LedgerSaver
    path, name, n, dsn = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if path.startswith("pg:"):
        from eventlog.postgres import PostgresEventStore
        store = PostgresEventStore(dsn, schema=path[3:], create_schema=False)
    else:
        from eventlog import SQLiteEventStore
        store = SQLiteEventStore(path)
    saver = LedgerSaver(store)
    messages, version, parent = [], None, None
    for i in range(n):
        messages = [*messages, f"{name}:{i}"]  # a list that grew by appending
        version = saver.get_next_version(version, None)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": messages, "step": [name, i]}
        checkpoint["channel_versions"] = {"messages": version, "step": version}
        configurable = {"thread_id": "t", "checkpoint_ns": ""}
        if parent is not None:
            configurable["checkpoint_id"] = parent
        new = {"messages": version, "step": version}
        meta = {"source": "loop", "step": i}
        put = saver.put({"configurable": configurable}, checkpoint, meta, new)
        parent = put["configurable"]["checkpoint_id"]
        print(json.dumps({"id": parent, "messages": messages}), flush=True)
    store.close()
    """
)


def test_processes_putting_growing_lists_on_one_thread_each_get_back_their_own(backend):
    from projections.adapters.langgraph import LedgerSaver

    store = backend.open()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SAVER_WORKER, _location(backend), name, "40", PG_DSN],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    wanted: dict[str, list[str]] = {}
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        wanted.update((p["id"], p["messages"]) for p in map(json.loads, out.splitlines()))
    # Check every checkpoint landed, and each gives back exactly the list its writer put,
    # though the two writers' deltas interleave in one memory.
    saver = LedgerSaver(backend.open())
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    got = {t.checkpoint["id"]: t.checkpoint["channel_values"] for t in saver.list(config)}
    assert len(wanted) == 80
    assert {cid: values["messages"] for cid, values in got.items()} == wanted
    assert store.verify().ok


@pytest.mark.parametrize("limit", [None, 2])
def test_an_item_edited_in_place_after_get_items_is_recorded_as_it_was_sent(sqlite_store, limit):
    session = _session(sqlite_store)
    asyncio.run(session.add_items(ITEMS))
    call = session.window_callback(MessageWindowPolicy(10))

    async def model_call() -> list[Any]:
        history: list[Any] = await session.get_items(limit=limit)
        history[-2]["content"] = "Done: 9000 EUR."  # the caller edits a served item in place
        return await call(history, [{"role": "user", "content": "And Alice?"}])

    sent = asyncio.run(model_call())
    assert {"role": "assistant", "content": "Done: 9000 EUR."} in sent
    # Before: the record named the event of the original item, so sent() said the model was
    # sent "Done: 10 EUR." - not what it was sent.
    assert asyncio.run(session.sent(4)) == sent
    # The log keeps the item as it was added.
    assert asyncio.run(_session(sqlite_store).get_items())[1] == ITEMS[1]


def _put_messages(saver: Any, messages: list[Any], step: int, parent: str | None) -> str:
    from langgraph.checkpoint.base import empty_checkpoint

    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": messages}
    checkpoint["channel_versions"] = {"messages": str(step)}
    configurable: Any = {"thread_id": "t", "checkpoint_ns": ""}
    if parent is not None:
        configurable["checkpoint_id"] = parent
    config: Any = {"configurable": configurable}
    meta: Any = {"source": "loop", "step": step}
    put = saver.put(config, checkpoint, meta, {"messages": str(step)})
    return str(put["configurable"]["checkpoint_id"])


@pytest.mark.parametrize("edited_after", ["put", "get_tuple"])
def test_a_message_edited_in_place_between_checkpoints_is_stored_as_edited(
    sqlite_store, edited_after
):
    from langchain_core.messages import AIMessage, HumanMessage

    from projections.adapters.langgraph import LedgerSaver

    saver = LedgerSaver(sqlite_store)
    messages: list[Any] = [HumanMessage("hi", id="h1"), AIMessage("Transfer 10 EUR", id="a1")]
    first = _put_messages(saver, messages, 1, None)
    if edited_after == "get_tuple":  # the graph goes on from the checkpoint it read back
        config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        messages = saver.get_tuple(config).checkpoint["channel_values"]["messages"]
    messages[1].content = "Transfer 9000 EUR"  # a node edits a message in place
    second = _put_messages(saver, [*messages, HumanMessage("next", id="h2")], 2, first)
    # Before: the second checkpoint was stored as "one message appended" to the first, whose
    # stored copy still says 10 EUR: every reader got 10 EUR back for it.
    for reader in (saver, LedgerSaver(sqlite_store)):
        for cid, want in ((first, "Transfer 10 EUR"), (second, "Transfer 9000 EUR")):
            config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": cid}}
            got = reader.get_tuple(config).checkpoint["channel_values"]["messages"]
            assert got[1].content == want


_CALLER = textwrap.dedent(
    """
    import asyncio, json, sys
    from projections import MessageWindowPolicy
    from projections.adapters.openai_agents import LedgerSession
    path, role, n, dsn = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if path.startswith("pg:"):
        from eventlog.postgres import PostgresEventStore
        store = PostgresEventStore(dsn, schema=path[3:], create_schema=False)
    else:
        from eventlog import SQLiteEventStore
        store = SQLiteEventStore(path)
    session = LedgerSession("s", store=store)
    call = session.window_callback(MessageWindowPolicy(3))
    async def run():
        for i in range(n):
            await asyncio.sleep(0.003)
            if role == "adder":
                await session.add_items([{"role": "user", "content": f"added {i}"}])
                continue
            history = await session.get_items(limit=5)
            sent = await call(history, [{"role": "user", "content": f"question {i}"}])
            print(json.dumps(sent), flush=True)
    asyncio.run(run())
    store.close()
    """
)


def test_model_calls_raced_by_a_writer_process_are_each_recorded_as_sent(backend):
    from projections.calls import model_call

    store = backend.open()
    asyncio.run(_session(store).add_items(ITEMS))
    procs = {
        role: subprocess.Popen(
            [sys.executable, "-c", _CALLER, _location(backend), role, str(n), PG_DSN],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role, n in (("caller", 25), ("adder", 60))
    }
    outputs = {}
    for role, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        outputs[role] = [json.loads(line) for line in out.splitlines()]
    calls = [r.seq for r in store.read_verified("s") if r.kind == "context_sent"]
    assert len(calls) == len(outputs["caller"]) == 25
    # Check each call's record gives back what the model was sent, and re-running its policy
    # over the list it records reproduces it, however the adds interleaved.
    session = _session(backend.open())
    for seq, sent in zip(calls, outputs["caller"], strict=True):
        recorded = asyncio.run(session.sent(seq))
        assert [json.dumps(i, sort_keys=True) for i in recorded] == [
            json.dumps(i, sort_keys=True) for i in sent
        ]
        found = model_call(store, "s", seq)
        assert found is not None
        assert found.reproduced is True


def test_a_langchain_message_that_json_would_change_is_refused_by_name(sqlite_store) -> None:
    """A tuple or a non-str key passes json.dumps but would not come back equal: refused with
    the adapter's TypeError (before: a raw pydantic ValidationError about UserMessage.attributes),
    nothing of the batch written."""
    from langchain_core.messages import AIMessage, HumanMessage

    from projections.adapters.langchain import LedgerChatMessageHistory

    history = LedgerChatMessageHistory("lc", store=sqlite_store)
    for bad in (
        HumanMessage("x", additional_kwargs={"t": (1, 2)}),
        HumanMessage("x", additional_kwargs={"d": {1: "a"}}),
        AIMessage("x", response_metadata={"t": ("a",)}),
    ):
        with pytest.raises(TypeError, match=rf"add_messages: {type(bad).__name__} is not JSON"):
            history.add_messages([HumanMessage("kept?"), bad])
    assert LedgerChatMessageHistory("lc", store=sqlite_store).messages == []


def test_an_agents_item_that_json_would_change_is_refused_by_name(sqlite_store) -> None:
    """As for LangChain: a tuple or a non-str key (before: a raw ValidationError), and an int
    too long to print (before: Python's int-to-text ValueError raised while building the
    error message) are refused by `add_items` as not JSON, nothing of the batch written."""
    session = _session(sqlite_store)
    bads: list[Any] = [
        {"role": "user", "content": "x", "t": (1, 2)},
        {"role": "user", "content": "x", "d": {1: "a"}},
        {"role": "user", "content": ("a", "b")},
        {"role": "user", "content": "x", "n": 10**5000},
    ]
    for bad in bads:
        with pytest.raises(TypeError, match=r"add_items: item .* is not JSON"):
            asyncio.run(session.add_items([ITEMS[0], bad]))
    with pytest.raises(TypeError, match="add_items: an item must be a Responses input item"):
        asyncio.run(session.add_items([10**5000]))  # type: ignore[list-item]
    assert asyncio.run(_session(sqlite_store).get_items()) == []


def test_a_saver_whose_thread_is_put_back_from_a_backup_reads_and_writes_what_the_store_holds(
    backend, db, caplog
):
    """One thread's rows and seal put back from a backup (no key needed: every row and the
    seal are genuine) under a live saver. Before: its cache kept serving the lost checkpoint,
    and every put spun for 30 seconds, then raised "another writer appended first", for as
    long as the saver lived. Now it notices, says so, and reads and writes as a new saver."""
    pytest.importorskip("langgraph.checkpoint.base")
    from langgraph.checkpoint.base import empty_checkpoint

    from eventlog.ids import memory_key
    from projections.adapters.langgraph import LedgerSaver

    store = backend.open(chain_key=KEY)
    saver = LedgerSaver(store)
    thread: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    first = saver.put(thread, empty_checkpoint(), {"step": 1}, {})
    key = memory_key(("t", "langgraph", ""))
    backup = db.run("SELECT seq, hash, mac, erased_through FROM {heads} WHERE stream_id = ?", key)
    second = saver.put(first, empty_checkpoint(), {"step": 2}, {})
    assert saver.get_tuple(thread).metadata["step"] == 2
    # The backup put back: the newer rows deleted, the older seal restored.
    db.run("DELETE FROM {events} WHERE stream_id = ? AND seq > 1", key)
    db.run(
        "UPDATE {heads} SET seq = ?, hash = ?, mac = ?, erased_through = ? WHERE stream_id = ?",
        *backup[0],
        key,
    )
    with caplog.at_level("WARNING", logger="chatledger.langgraph"):
        assert saver.get_tuple(thread).metadata["step"] == 1  # as a new saver reads it
    assert "history changed under this saver's cache" in caplog.text
    assert LedgerSaver(store).get_tuple(thread).metadata["step"] == 1
    saver.put(second, empty_checkpoint(), {"step": 3}, {})  # at once, not after 30 s
    assert [t.metadata["step"] for t in LedgerSaver(store).list(thread)] == [3, 1]
    assert store.verify().ok
