"""LedgerSaver: a LangGraph checkpointer whose checkpoints are verified ledger events.

LangGraph's own conformance suite runs in scripts/langgraph_conformance.py (all 81 tests);
these tests cover what it does not: whole graphs, time travel, linear storage, erasure with a
receipt, forks that name their origin, other writers, tampering and bad input.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base", reason="the langgraph extra is not installed")

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.types import ERROR
from langgraph.graph import START, MessagesState, StateGraph

from eventlog import ChainIntegrityError, EventStore, InMemoryEventStore, SQLiteEventStore
from eventlog.ids import memory_key
from projections.adapters.langgraph import KEY, LedgerSaver, thread_memory_id


def chat_app(saver: LedgerSaver) -> Any:
    """A one-node chat graph whose fake model answers ``reply <n>`` (offline)."""
    replies = (AIMessage(f"reply {n} " + "y" * 190) for n in itertools.count(1))
    model = GenericFakeChatModel(messages=replies)

    def chat(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("chat", chat)
    graph.add_edge(START, "chat")
    return graph.compile(checkpointer=saver)


def config(thread: str = "t-1") -> Any:
    return {"configurable": {"thread_id": thread}}


def bodies(store: EventStore, thread: str, ns: str = "") -> list[dict[str, Any]]:
    """The LangGraph events of a thread, as stored."""
    out = []
    for record in store.read(thread_memory_id(thread, ns)):
        if record.kind == "message_added" and record.payload:
            out.append(json.loads(record.payload)["attributes"][KEY])
    return out


def test_a_chat_graph_keeps_its_conversation_across_turns(store: EventStore) -> None:
    app = chat_app(LedgerSaver(store))
    for turn in range(1, 5):
        out = app.invoke({"messages": [HumanMessage(f"question {turn}")]}, config())
        # Check the graph saw every earlier turn: its state came back from the ledger.
        assert len(out["messages"]) == 2 * turn
    texts = [m.content for m in app.get_state(config()).values["messages"]]
    assert texts[0::2] == [f"question {n}" for n in range(1, 5)]
    assert [t.split()[1] for t in texts[1::2]] == ["1", "2", "3", "4"]
    # Check a fresh saver (a restarted process) reads the same state, and the ledger verifies.
    again = chat_app(LedgerSaver(store)).get_state(config()).values["messages"]
    assert [m.content for m in again] == texts
    assert store.verify().ok


def test_time_travel_and_resume_from_an_earlier_checkpoint(store: EventStore) -> None:
    app = chat_app(LedgerSaver(store))
    for turn in range(1, 4):
        app.invoke({"messages": [HumanMessage(f"q{turn}")]}, config())
    history = list(app.get_state_history(config()))
    # Check the history is newest first and holds every step of every turn.
    assert [len(s.values.get("messages", [])) for s in history[:3]] == [6, 5, 4]
    after_first = next(s for s in history if len(s.values.get("messages", [])) == 2 and not s.next)
    assert next(m.content for m in after_first.values["messages"]) == "q1"

    # Check resuming from turn 1 forks: the branch sees turn 1 only, the old turns stay.
    out = app.invoke({"messages": [HumanMessage("q2 again")]}, after_first.config)
    assert [m.content for m in out["messages"]][:3] == [
        "q1",
        after_first.values["messages"][1].content,
        "q2 again",
    ]
    assert len(out["messages"]) == 4
    latest = app.get_state(config())
    assert len(latest.values["messages"]) == 4
    assert (
        latest.config["configurable"]["checkpoint_id"]
        > history[0].config["configurable"]["checkpoint_id"]
    )
    old = app.get_state(history[0].config)
    assert [m.content for m in old.values["messages"]][4] == "q3"
    assert store.verify().ok


def test_async_graph_run_matches_the_sync_one(store: EventStore) -> None:
    async def run() -> list[str]:
        app = chat_app(LedgerSaver(store))
        for turn in range(1, 4):
            await app.ainvoke({"messages": [HumanMessage(f"q{turn}")]}, config("async"))
        state = await app.aget_state(config("async"))
        return [m.content for m in state.values["messages"]]

    texts = asyncio.run(run())
    assert texts[0::2] == ["q1", "q2", "q3"]
    sync = chat_app(LedgerSaver(store)).get_state(config("async")).values["messages"]
    assert [m.content for m in sync] == texts


def test_storage_grows_linearly_with_the_conversation() -> None:
    # Payloads are the same bytes on every backend; the benchmark measures files on disk.
    store = InMemoryEventStore()
    app = chat_app(LedgerSaver(store))
    memory = thread_memory_id("t-1")
    sizes = []
    for turn in range(1, 61):
        app.invoke({"messages": [HumanMessage("x" * 200)]}, config())
        if turn in (10, 20, 50, 60):
            records = store.read(memory)
            sizes.append((len(records), sum(len(r.payload) for r in records)))
    early_rows, late_rows = sizes[1][0] - sizes[0][0], sizes[3][0] - sizes[2][0]
    early_bytes, late_bytes = sizes[1][1] - sizes[0][1], sizes[3][1] - sizes[2][1]
    # Check ten turns cost the same late as early: rows exactly, bytes within 5 % (version
    # strings and ids vary a little). Storing the whole list again would make them 5x.
    assert late_rows == early_rows
    assert late_bytes <= early_bytes * 1.05
    # Check a turn stores its two messages about once each in checkpoints, not the history.
    assert late_bytes / 10 < 8_000


def test_a_list_that_is_not_appended_to_is_stored_whole_and_read_back() -> None:
    saver = LedgerSaver(InMemoryEventStore())
    cfg: Any = {"configurable": {"thread_id": "lists", "checkpoint_ns": ""}}
    parent = None
    for value in ([1, 2], [1, 2, 3], [9], [9, 8], []):
        checkpoint = empty_checkpoint()
        version = saver.get_next_version(None, None)
        checkpoint["channel_values"] = {"items": value}
        checkpoint["channel_versions"] = {"items": version}
        put_cfg: Any = (
            cfg
            if parent is None
            else {"configurable": {**cfg["configurable"], "checkpoint_id": parent}}
        )
        stored = saver.put(put_cfg, checkpoint, {"step": 0}, {"items": version})
        parent = stored["configurable"]["checkpoint_id"]
        assert saver.get_tuple(stored).checkpoint["channel_values"]["items"] == value
    kinds = [("base" in b["values"]["items"]) for b in bodies(saver.store, "lists")]
    # Check the two appends were stored as deltas and the replacements whole.
    assert kinds == [False, True, False, True, False]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.one_of(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3), st.just(None)),
        max_size=12,
    )
)
def test_every_checkpoint_reads_back_what_was_put(steps: list[list[int] | None]) -> None:
    # Each step appends items (a list) or replaces the value with a new short list (None).
    saver = LedgerSaver(InMemoryEventStore())
    value: list[int] = []
    stored_cfgs: list[tuple[Any, list[int]]] = []
    parent = None
    for n, step in enumerate(steps):
        value = [*value, *step] if step is not None else [n]
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"items": value, "other": n}
        version = f"{n + 1:032}.0"
        checkpoint["channel_versions"] = {"items": version, "other": version}
        configurable = {
            "thread_id": "p",
            "checkpoint_ns": "",
            **({"checkpoint_id": parent} if parent else {}),
        }
        cfg = saver.put(
            {"configurable": configurable},
            checkpoint,
            {"step": n},
            {"items": version, "other": version},
        )
        parent = cfg["configurable"]["checkpoint_id"]
        stored_cfgs.append((cfg, list(value)))
    # Check with a cold saver too: deltas are resolved from the ledger, not from a cache.
    for reader in (saver, LedgerSaver(saver.store)):
        for n, (cfg, expected) in enumerate(stored_cfgs):
            got = reader.get_tuple(cfg)
            assert got.checkpoint["channel_values"] == {"items": expected, "other": n}
        # Check list (which decodes a grown list once and slices the older ones) agrees.
        listed = [t.checkpoint["channel_values"] for t in reader.list(None)]
        assert listed == [{"items": v, "other": n} for n, (_, v) in enumerate(stored_cfgs)][::-1]


def test_delete_thread_is_an_erasure_with_a_receipt(store: EventStore) -> None:
    saver = LedgerSaver(store)
    app = chat_app(saver)
    for thread in ("gone", "kept"):
        app.invoke({"messages": [HumanMessage(f"secret of {thread}")]}, config(thread))
    app.invoke(
        {"messages": [HumanMessage("x")]},
        {"configurable": {"thread_id": "gone", "checkpoint_ns": ""}},
    )
    receipts = saver.erase_thread("gone", reason="GDPR request 7")
    # Check one receipt for the thread's memory, the content is gone, the log still verifies.
    assert [r.memory_id for r in receipts] == [thread_memory_id("gone")]
    assert receipts[0].event.reason == "GDPR request 7"
    records = store.read(thread_memory_id("gone"))
    assert all(not r.payload for r in records[:-1]) and records[-1].kind == "memory_erased"
    assert not any("secret of gone" in r.payload for r in store.read_all())
    assert saver.get_tuple(config("gone")) is None
    assert list(saver.list(config("gone"))) == []
    assert store.verify().ok
    # Check the other thread is intact and the erased id starts afresh.
    assert app.get_state(config("kept")).values["messages"][0].content == "secret of kept"
    out = app.invoke({"messages": [HumanMessage("new start")]}, config("gone"))
    assert next(m.content for m in out["messages"]) == "new start"
    # Check delete_thread (LangGraph's name) erases the same way; a missing thread is a no-op.
    saver.delete_thread("gone")
    assert saver.get_tuple(config("gone")) is None
    saver.delete_thread("never-existed")
    assert store.verify().ok


def test_copy_thread_is_a_fork_that_names_its_origin(store: EventStore) -> None:
    saver = LedgerSaver(store)
    app = chat_app(saver)
    for turn in range(2):
        app.invoke({"messages": [HumanMessage(f"q{turn}")]}, config("src"))
    source_head = store.head(thread_memory_id("src"))
    saver.copy_thread("src", "fork")
    first = bodies(store, "fork")[0]
    # Check the fork starts with its origin: the source thread and the head it was copied at.
    assert first == {
        "op": "copied",
        "from": "src",
        "namespace": "",
        "seq": source_head.seq,
        "hash": source_head.hash,
    }
    src = [t.checkpoint["channel_values"] for t in saver.list(config("src"))]
    dst = [t.checkpoint["channel_values"] for t in saver.list(config("fork"))]
    assert dst == src
    # Check the fork goes on alone.
    app.invoke({"messages": [HumanMessage("fork only")]}, config("fork"))
    assert len(app.get_state(config("src")).values["messages"]) == 4
    assert len(app.get_state(config("fork")).values["messages"]) == 6


def test_two_savers_on_one_ledger_see_each_other(store: EventStore) -> None:
    first, second = chat_app(LedgerSaver(store)), chat_app(LedgerSaver(store))
    first.invoke({"messages": [HumanMessage("from the first")]}, config())
    # Check the second saver catches up on the first's events, and its turn chains on them.
    out = second.invoke({"messages": [HumanMessage("from the second")]}, config())
    assert [m.content for m in out["messages"]][0::2] == ["from the first", "from the second"]
    assert len(first.get_state(config()).values["messages"]) == 4
    assert store.verify().ok


def test_a_warm_saver_writing_on_a_moved_head_builds_again_on_it(store: EventStore) -> None:
    from langgraph.checkpoint.base.id import uuid6

    warm, other = LedgerSaver(store), LedgerSaver(store)
    chat_app(warm).invoke({"messages": [HumanMessage("hi")]}, config())
    latest = warm.get_tuple(config())
    assert latest is not None
    meta: Any = {"source": "update", "step": 9}
    head = store.read(thread_memory_id("t-1"), desc=True, limit=1)[0].seq
    # The other saver appends a checkpoint the warm one has not read.
    theirs: Any = {**latest.checkpoint, "id": str(uuid6())}
    other.put(latest.config, theirs, meta, {})
    # Check the warm saver's put, built on its cache without a read, is refused by the
    # store's expected head and built again after it: both kept, the chain intact.
    mine: Any = {**latest.checkpoint, "id": str(uuid6())}
    warm.put(latest.config, mine, meta, {})
    seqs = [warm.checkpoint_seq({"configurable": {"thread_id": "t-1", "checkpoint_id": c["id"]}})
            for c in (theirs, mine)]  # fmt: skip
    assert seqs == [head + 1, head + 2]
    listed = [t.checkpoint["id"] for t in other.list(config())]
    assert listed[:2] == [mine["id"], theirs["id"]]
    assert store.verify().ok


def test_put_writes_keeps_regular_writes_once_and_the_newest_special_write(
    store: EventStore,
) -> None:
    saver = LedgerSaver(store)
    cfg = saver.put(
        {"configurable": {"thread_id": "w", "checkpoint_ns": ""}}, empty_checkpoint(), {}, {}
    )
    saver.put_writes(cfg, [("a", 1), ("b", 2)], "task")
    saver.put_writes(cfg, [("a", "changed"), ("b", "changed")], "task")
    saver.put_writes(cfg, [(ERROR, "first error")], "task")
    saver.put_writes(cfg, [(ERROR, "second error")], "task")
    writes = saver.get_tuple(cfg).pending_writes or []
    assert sorted(writes, key=str) == sorted(
        [("task", "a", 1), ("task", "b", 2), ("task", ERROR, "second error")], key=str
    )
    # Check a repeated regular write wrote nothing at all.
    assert [b["op"] for b in bodies(store, "w")] == ["checkpoint", "writes", "writes", "writes"]


def test_a_tampered_checkpoint_is_refused(backend: Any) -> None:
    store = backend.open()
    saver = LedgerSaver(store)
    chat_app(saver).invoke({"messages": [HumanMessage("hello")]}, config())
    key = memory_key(thread_memory_id("t-1"))
    records = store.read(thread_memory_id("t-1"))
    middle, newest = records[len(records) // 2], records[-1]

    def forge(record: Any) -> None:
        body = json.loads(record.payload)
        body["attributes"][KEY]["id"] = "forged"
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        backend.tamper(store, key, record.seq, "payload", text)

    # Check a cold saver (it reads every event) refuses an edit anywhere in the thread.
    forge(middle)
    with pytest.raises(ChainIntegrityError):
        LedgerSaver(store).get_tuple(config())
    # Check a warm saver (it reads what is new, and the chain's ends) refuses an edit of the end.
    forge(newest)
    with pytest.raises(ChainIntegrityError):
        saver.get_tuple(config())
    with pytest.raises(ChainIntegrityError):
        list(saver.list(config()))
    store.close()


def test_bad_input_names_the_operation_and_the_remedy(tmp_path: Any) -> None:
    with pytest.raises(TypeError, match="needs a chatledger EventStore"):
        LedgerSaver("ledger.db")  # type: ignore[arg-type]
    with SQLiteEventStore(tmp_path / "l.db") as store:
        saver = LedgerSaver(store)
        with pytest.raises(
            ValueError, match=r"get_tuple: the config has no configurable.thread_id"
        ):
            saver.get_tuple({"configurable": {}})
        with pytest.raises(ValueError, match="prune: unknown strategy 'newest'"):
            saver.prune(["t"], strategy="newest")
        with pytest.raises(ValueError, match=r"put_writes .* names no checkpoint_id"):
            saver.put_writes({"configurable": {"thread_id": "t"}}, [("a", 1)], "task")
        with pytest.raises(ValueError, match="cache_size must be an int >= 1"):
            LedgerSaver(store, cache_size=0)


def test_the_cli_shows_a_thread_in_langgraph_terms(tmp_path, cli) -> None:
    path = tmp_path / "lg.db"
    with SQLiteEventStore(path) as store:
        saver = LedgerSaver(store)
        app = chat_app(saver)
        for turn in (1, 2):
            app.invoke({"messages": [HumanMessage(f"question {turn}")]}, config("cli"))
        tuples = list(saver.list(config("cli")))
        first_turn = next(t for t in tuples if len(t.checkpoint["channel_values"]["messages"]) == 2)
        app.invoke({"messages": [HumanMessage("to erase")]}, config("gone"))
        saver.erase_thread("gone", reason="request 9")
    # Check the steps: one JSON line per checkpoint, oldest first, with the seq prove takes.
    listed = cli("langgraph", "cli", "--db", path, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [r["checkpoint_id"] for r in rows] == [t.checkpoint["id"] for t in reversed(tuples)]
    assert [r["messages"] for r in rows] == [0, 1, 2, 2, 3, 4]
    assert rows[0]["source"] == "input" and rows[0]["parent_id"] is None
    assert "messages" in rows[2]["changed"] and rows[3]["changed"] == ["__start__"]
    seq = rows[-1]["seq"]
    assert (
        cli(
            "prove", "~t:" + json.dumps(["cli", "langgraph", ""]), seq, "--db", path, "-o", "-"
        ).returncode
        == 0
    )
    table = cli("langgraph", "cli", "--db", path)
    assert table.returncode == 0 and "6 checkpoints" in table.stdout
    # Check a checkpoint's conversation, and what changed between two.
    latest = cli("langgraph", "cli", "--db", path, "--checkpoint", "latest")
    lines = latest.stdout.splitlines()
    assert lines[0] == f"checkpoint {rows[-1]['checkpoint_id']}: 4 messages"
    assert [line.split(":", 1)[0].strip() for line in lines[1:]] == ["human", "ai"] * 2
    assert lines[3] == " human: question 2"
    assert lines[4].startswith("    ai: reply 2 yyy")
    diff = cli(
        "langgraph", "cli", "--db", path, "--json", "--diff", first_turn.checkpoint["id"], "latest"
    )
    changes = json.loads(diff.stdout)
    assert [m["text"][:14] for m in changes["messages_added"]] == ["question 2", "reply 2 yyyyyy"]
    assert changes["messages_dropped"] == [] and "messages" in changes["channels_changed"]
    diff_text = cli(
        "langgraph", "cli", "--db", path, "--diff", first_turn.checkpoint["id"], "latest"
    )
    added = diff_text.stdout.splitlines()[2:]
    assert added[0] == "+  human: question 2" and added[1].startswith("+     ai: reply 2 yyy")
    assert len(added) == 2
    as_json = json.loads(
        cli("langgraph", "cli", "--db", path, "--json", "--checkpoint", "latest").stdout
    )
    assert as_json["checkpoint_id"] == rows[-1]["checkpoint_id"]
    assert [m["role"] for m in as_json["messages"]] == ["human", "ai"] * 2
    # Check the errors: an unknown checkpoint (usage), an erased thread and an unknown one.
    bad = cli("langgraph", "cli", "--db", path, "--checkpoint", "nope")
    assert bad.returncode == 2 and "no checkpoint 'nope'" in bad.stderr
    erased = cli("langgraph", "gone", "--db", path)
    assert erased.returncode == 1 and "was erased" in erased.stderr and "request 9" in erased.stderr
    missing = cli("langgraph", "nobody", "--db", path)
    assert missing.returncode == 1 and "has no checkpoints" in missing.stderr


def test_history_and_show_of_a_thread_read_as_checkpoints(tmp_path, cli) -> None:
    path = tmp_path / "lg.db"
    with SQLiteEventStore(path) as store:
        saver = LedgerSaver(store)
        app = chat_app(saver)
        for turn in (1, 2):
            app.invoke({"messages": [HumanMessage(f"question {turn}")]}, config("h"))
        saver.copy_thread("h", "h2")
        saver.prune(["h"])
        tuples = list(saver.list(config("h2")))
    key = "~t:" + json.dumps(["h", "langgraph", ""])
    # Check history says what each event stores, not its base64.
    table = cli("history", key, "--db", path)
    assert table.returncode == 0, table.stderr
    assert "langgraph checkpoint: __start__ · id" in table.stdout
    assert "langgraph writes: messages" in table.stdout
    assert "messages +1 after seq" in table.stdout
    assert "hid 5 checkpoints (prune keep_latest)" in table.stdout
    assert '"op"' not in table.stdout
    copied = cli("history", "~t:" + json.dumps(["h2", "langgraph", ""]), "--db", path)
    assert "copy of thread 'h' (namespace '') at its seq" in copied.stdout
    # Check show is the conversation of the newest checkpoint at or before the seq asked.
    shown = cli("show", "~t:" + json.dumps(["h2", "langgraph", ""]), "--db", path)
    assert shown.returncode == 0, shown.stderr
    assert "question 2" in shown.stdout and "reply 2 yyy" in shown.stdout
    assert f"checkpoint {tuples[0].checkpoint['id']}" in shown.stdout.replace("\n", "")
    assert "chatledger prove" in shown.stdout
    early = cli("show", "~t:" + json.dumps(["h2", "langgraph", ""]), "--db", path, "--json",
                "--as-of", "5")  # fmt: skip
    at_five = json.loads(early.stdout)
    with SQLiteEventStore(path) as store:
        saver = LedgerSaver(store)
        seqs = {saver.checkpoint_seq(t.config): t for t in tuples}
    # (the newest checkpoint stored at or before seq 5, and its messages)
    expected = seqs[max(seq for seq in seqs if seq is not None and seq <= 5)]
    assert at_five["checkpoint_id"] == expected.checkpoint["id"]
    assert [m["text"] for m in at_five["messages"]] == [
        m.content for m in expected.checkpoint["channel_values"].get("messages", [])
    ]
    nothing = cli("show", "~t:" + json.dumps(["h2", "langgraph", ""]), "--db", path,
                  "--as-of", "1")  # fmt: skip
    assert nothing.returncode == 1 and "no checkpoint at or before seq 1" in nothing.stderr


def test_a_body_not_shaped_as_ours_is_shown_raw() -> None:
    from projections.adapters.langgraph_events import summary

    assert summary(None) is None and summary({"op": "other"}) is None
    assert summary({"op": "checkpoint"}) is None  # missing fields: shown as raw JSON
    assert summary({"op": "removed", "checkpoints": ["a"], "reason": "r"}) == "hid 1 checkpoint (r)"


def test_prune_and_delete_for_runs_hide_checkpoints_and_keep_the_history(store: EventStore) -> None:
    saver = LedgerSaver(store)
    app = chat_app(saver)
    for turn in range(2):
        app.invoke({"messages": [HumanMessage(f"q{turn}")]}, config("p"))
    before = len(store.read(thread_memory_id("p")))
    saver.prune(["p"], strategy="keep_latest")
    # Check LangGraph sees only the newest checkpoint, whole; the ledger gained one event.
    (kept,) = list(saver.list(config("p")))
    assert len(kept.checkpoint["channel_values"]["messages"]) == 4
    assert [b["op"] for b in bodies(store, "p")][before:] == ["removed"]
    assert bodies(store, "p")[-1]["reason"] == "prune keep_latest"
    # Check the thread goes on from the kept checkpoint.
    out = app.invoke({"messages": [HumanMessage("q2")]}, config("p"))
    assert len(out["messages"]) == 6
    run_id = "run-to-drop"
    app.invoke(
        {"messages": [HumanMessage("q3")]},
        {"configurable": {"thread_id": "p"}, "metadata": {"run_id": run_id}},
    )
    ours = [t for t in saver.list(config("p")) if t.metadata.get("run_id") == run_id]
    assert ours
    saver.delete_for_runs([run_id])
    assert not [t for t in saver.list(config("p")) if t.metadata.get("run_id") == run_id]
    assert len(app.get_state(config("p")).values["messages"]) == 6
    assert store.verify().ok


def test_a_saver_with_no_room_to_cache_reads_every_thread_again(store: EventStore) -> None:
    saver = LedgerSaver(store, cache_bytes=0)
    app = chat_app(saver)
    for turn in range(2):
        for thread in ("a", "b"):
            app.invoke({"messages": [HumanMessage(f"{thread}{turn}")]}, config(thread))
    # Check only the thread in use is kept, and nothing is lost by dropping the other.
    assert len(saver._cache) == 1
    for thread in ("a", "b"):
        texts = [m.content for m in app.get_state(config(thread)).values["messages"]][0::2]
        assert texts == [f"{thread}0", f"{thread}1"]
    with pytest.raises(ValueError, match="cache_bytes must be an int >= 0"):
        LedgerSaver(store, cache_bytes=-1)


def test_a_cold_saver_counts_what_it_caches_like_a_warm_one(store: EventStore) -> None:
    warm = LedgerSaver(store)
    chat_app(warm).invoke({"messages": [HumanMessage("hello")]}, config())
    cold = LedgerSaver(store)
    cold.get_tuple(config())
    key = memory_key(thread_memory_id("t-1"))
    # Check the size the byte budget counts is the thread's payloads, however they were folded.
    payloads = sum(len(r.payload) for r in store.read(thread_memory_id("t-1")))
    assert warm._cache[key].size == cold._cache[key].size == payloads


def test_writers_racing_on_one_thread_lose_nothing(backend: Any) -> None:
    # Two savers on two store objects (two connections), writing to one checkpoint at once:
    # each append that finds the head moved catches up and is built again.
    first, second = backend.open(), backend.open()
    saver = LedgerSaver(first)
    cfg = saver.put(
        {"configurable": {"thread_id": "race", "checkpoint_ns": ""}}, empty_checkpoint(), {}, {}
    )

    def write(who: LedgerSaver, name: str) -> None:
        for n in range(15):
            who.put_writes(cfg, [("ch", f"{name}{n}")], f"{name}-task-{n}")

    async def race() -> None:
        await asyncio.gather(
            asyncio.to_thread(write, saver, "a"), asyncio.to_thread(write, LedgerSaver(second), "b")
        )

    asyncio.run(race())
    values = sorted(w[2] for w in LedgerSaver(first).get_tuple(cfg).pending_writes or [])
    assert values == sorted([f"a{n}" for n in range(15)] + [f"b{n}" for n in range(15)])
    assert first.verify().ok
    for store in {id(first): first, id(second): second}.values():
        store.close()


def test_an_erasure_by_another_saver_reaches_a_warm_one(store: EventStore) -> None:
    warm, other = LedgerSaver(store), LedgerSaver(store)
    chat_app(warm).invoke({"messages": [HumanMessage("secret")]}, config("x"))
    assert warm.get_tuple(config("x")) is not None
    other.delete_thread("x")
    # Check the warm saver's catch-up read sees the receipt and drops what it had folded.
    assert warm.get_tuple(config("x")) is None
    assert list(warm.list(config("x"))) == []


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=5)), max_size=40),
        max_size=4,
    )
)
def test_msgpack_arrays_join_without_decoding(parts: list[list[Any]]) -> None:
    import ormsgpack

    from projections.adapters.langgraph_events import array_body, array_head

    # Check the joined items of several packed lists, under a new header, are the packed
    # concatenation: what a grown list is read back from (headers of 1, 3 and 5 bytes).
    bodies = [array_body(ormsgpack.packb(p)) for p in [*parts, list(range(70_000))]]
    assert all(b is not None for b in bodies)
    total = sum(b[0] for b in bodies if b)
    joined = array_head(total) + b"".join(b[1] for b in bodies if b)
    assert joined == ormsgpack.packb([x for p in [*parts, list(range(70_000))] for x in p])
    assert array_body(b"") is None and array_body(ormsgpack.packb({"a": 1})) is None


def test_a_cached_thread_adds_little_to_the_garbage_collector(store: EventStore) -> None:
    saver = LedgerSaver(store)
    app = chat_app(saver)
    for turn in range(3):
        app.invoke({"messages": [HumanMessage(f"q{turn}")]}, config("gc"))
    state = saver._cache[memory_key(thread_memory_id("gc"))]

    def lists_in(value: Any) -> int:
        if isinstance(value, dict):
            return sum(lists_in(v) for v in value.values())
        if isinstance(value, tuple):
            return sum(lists_in(v) for v in value)
        return 1 if isinstance(value, list) else 0

    # Check the folded events hold tuples, never lists (which the collector always tracks):
    # a task's writes and a checkpoint's values are then left alone by full collections.
    assert {body["op"] for body in state.bodies.values()} == {"checkpoint", "writes"}
    assert sum(lists_in(body) for body in state.bodies.values()) == 0
    # Check the last list put stays only with the threads used lately.
    for n in range(9):
        app.invoke({"messages": [HumanMessage("x")]}, config(f"other-{n}"))
    assert not state.lists
    assert saver._cache[memory_key(thread_memory_id("other-8"))].lists
    # Check a thread that lost its list goes on appending deltas (decoding its base once).
    app.invoke({"messages": [HumanMessage("q3")]}, config("gc"))
    # (the newest checkpoint that stored messages: with LangGraph's async durability a task's
    # writes may be saved after the checkpoint that follows them)
    stored = [b for b in bodies(store, "gc") if b["op"] == "checkpoint"]
    newest = [b for b in stored if "messages" in b["values"]][-1]
    assert "base" in newest["values"]["messages"]
    assert len(app.get_state(config("gc")).values["messages"]) == 8
