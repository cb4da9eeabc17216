"""LedgerSaver refuses input of the wrong shape before it writes anything.

A careless caller's value must be a clear error naming the operation, never a raw
AttributeError, and never a stored event that makes every later read of the thread fail.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base", reason="the langgraph extra is not installed")

from langgraph.checkpoint.base import empty_checkpoint

from eventlog import SQLiteEventStore
from projections.adapters.langgraph import LedgerSaver


def checkpoint(**changes: Any) -> Any:
    made = empty_checkpoint()
    made["channel_values"] = {"a": 1}
    made["channel_versions"] = {"a": "1"}
    return {**made, **changes}


def events(store: SQLiteEventStore) -> int:
    return sum(info.last_seq for info in store.streams())


def test_writes_whose_task_or_channel_is_not_text_are_refused_before_they_poison_reads(
    tmp_path: Any,
) -> None:
    # Before: put_writes stored task 5 next to task "a"; every later get_tuple of the
    # checkpoint then failed with "'<' not supported between instances of 'int' and 'str'".
    with SQLiteEventStore(tmp_path / "l.db") as store:
        saver = LedgerSaver(store)
        config = saver.put({"configurable": {"thread_id": "t"}}, checkpoint(), {}, {"a": "1"})
        saver.put_writes(config, [("a", 1)], "a")
        stored = events(store)
        for writes, task, path in (
            ([("a", 2)], 5, ""),
            ([("a", 2)], None, ""),
            ([("a", 2)], "b", 5),
            ([(5, 2)], "b", ""),
            ([("a", 2, 3)], "b", ""),
            ("ab", "b", ""),
        ):
            with pytest.raises(TypeError, match=r"put_writes on \('t', 'langgraph', ''\)"):
                saver.put_writes(config, writes, task, path)  # type: ignore[arg-type]
        assert events(store) == stored
        found = LedgerSaver(store).get_tuple(config)
        assert found is not None and found.pending_writes == [("a", "a", 1)]
        assert store.verify().ok


def test_a_checkpoint_whose_id_is_not_text_is_refused_before_it_poisons_reads(
    tmp_path: Any,
) -> None:
    # Before: a checkpoint with id 7 was stored; the thread's newest checkpoint could then
    # not be found: "'<' not supported between instances of 'int' and 'str'".
    with SQLiteEventStore(tmp_path / "l.db") as store:
        saver = LedgerSaver(store)
        thread: Any = {"configurable": {"thread_id": "t"}}
        saver.put(thread, checkpoint(), {}, {"a": "1"})
        stored = events(store)
        with pytest.raises(TypeError, match=r"put on .*the checkpoint must be a dict whose id"):
            saver.put(thread, checkpoint(id=7), {}, {"a": "1"})
        with pytest.raises(TypeError, match=r"put on .*: metadata must be a dict, got None"):
            saver.put(thread, checkpoint(), None, {"a": "1"})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"put on .*: channel_versions must be a dict"):
            saver.put(thread, checkpoint(channel_versions=None), {}, {"a": "1"})
        assert events(store) == stored
        assert LedgerSaver(store).get_tuple(thread) is not None


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda s: s.get_tuple(None), TypeError, r"get_tuple: the config must be a dict"),
        (lambda s: s.put([], checkpoint(), {}, {}), TypeError, r"put: the config must be a dict"),
        (
            lambda s: list(s.list({"configurable": [1]})),
            TypeError,
            r"list: the config must be a dict",
        ),
        (lambda s: list(s.list(None, filter="abc")), TypeError, r"list: filter must be None"),
        (lambda s: list(s.list(None, before="x")), TypeError, r"list's before: the config"),
        (
            lambda s: s.get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": 5}}),
            TypeError,
            r"get_tuple: configurable.checkpoint_id must be a str",
        ),
        (lambda s: s.checkpoint_seq(None), TypeError, r"checkpoint_seq: the config must be"),
        (lambda s: s.delete_thread(None), ValueError, r"erase_thread: a thread id must not be"),
        (lambda s: s.copy_thread("t", None), ValueError, r"copy_thread: a thread id must not"),
        (lambda s: s.delete_thread(int("9" * 4000) ** 2), ValueError, r"erase_thread: a thread"),
    ],
)
def test_a_value_of_the_wrong_shape_is_a_clear_error(
    tmp_path: Any, call: Any, error: type[Exception], message: str
) -> None:
    # Before: AttributeError ("'NoneType' object has no attribute 'get'"), or for None a
    # thread named "None" erased, or Python's own int conversion error naming no operation.
    with SQLiteEventStore(tmp_path / "l.db") as store:
        saver = LedgerSaver(store)
        saver.put({"configurable": {"thread_id": "None"}}, checkpoint(), {}, {"a": "1"})
        stored = events(store)
        with pytest.raises(error, match=message):
            call(saver)
        assert events(store) == stored
        assert saver.get_tuple({"configurable": {"thread_id": "None"}}) is not None


def test_prune_and_delete_for_runs_refuse_a_single_str_for_their_list(tmp_path: Any) -> None:
    # Before: prune("ab") pruned threads "a" and "b" (the string's characters) and left the
    # thread "ab" as it was; delete_for_runs("ab") hid the runs "a" and "b".
    with SQLiteEventStore(tmp_path / "l.db") as store:
        saver = LedgerSaver(store)
        for thread in ("a", "b", "ab"):
            for _ in range(2):
                saver.put({"configurable": {"thread_id": thread}}, checkpoint(), {}, {"a": "1"})
        stored = events(store)
        with pytest.raises(TypeError, match=r"prune: thread_ids must be a list of ids, not 'ab'"):
            saver.prune("ab")
        with pytest.raises(TypeError, match=r"delete_for_runs: run_ids must be a list of ids"):
            saver.delete_for_runs("ab")
        assert events(store) == stored
        assert all(
            len(list(saver.list({"configurable": {"thread_id": t}}))) == 2 for t in ("a", "b")
        )


def test_a_value_the_serde_refuses_is_an_error_naming_the_operation_and_channel(
    tmp_path: Any,
) -> None:
    # Before: the serde's own "Integer exceeds 64-bit range" / "Type is not msgpack
    # serializable: object", naming neither the operation nor the channel.
    with SQLiteEventStore(tmp_path / "l.db") as store:
        saver = LedgerSaver(store)
        thread: Any = {"configurable": {"thread_id": "t"}}
        config = saver.put(thread, checkpoint(), {}, {"a": "1"})
        stored = events(store)
        with pytest.raises(TypeError, match=r"put: channel 'a': JsonPlusSerializer cannot"):
            saver.put(thread, checkpoint(channel_values={"a": 2**64}), {}, {"a": "1"})
        with pytest.raises(TypeError, match=r"put on .*: the metadata: JsonPlusSerializer"):
            saver.put(thread, checkpoint(), {"x": object()}, {"a": "1"})  # type: ignore[typeddict-unknown-key]
        with pytest.raises(TypeError, match=r"put_writes: channel 'b': JsonPlusSerializer"):
            saver.put_writes(config, [("b", object())], "task")
        assert events(store) == stored


def test_a_bad_version_or_run_id_names_the_operation(tmp_path: Any) -> None:
    # Before: "invalid literal for int() with base 10: 'abc'" and "unhashable type: 'list'".
    with SQLiteEventStore(tmp_path / "l.db") as store:
        saver = LedgerSaver(store)
        with pytest.raises(ValueError, match=r"get_next_version: 'abc' is not a channel version"):
            saver.get_next_version("abc", None)
        with pytest.raises(TypeError, match=r"delete_for_runs: run ids must be str"):
            saver.delete_for_runs([["run"]])  # type: ignore[list-item]
        assert saver.get_next_version("7.123", None).startswith("0" * 31 + "8.")


def test_a_value_too_long_to_print_is_named_not_a_conversion_error():
    # repr() of an int of more than 4,300 digits raises: these messages used to fail on the
    # very value they name (and get_tuple's TypeError came out as a ValueError).
    from eventlog import InMemoryEventStore

    huge = 10**5000
    with pytest.raises(ValueError, match="cache_size must be an int >= 1, got an int of"):
        LedgerSaver(InMemoryEventStore(), cache_size=-huge)
    with pytest.raises(ValueError, match="cache_bytes must be an int >= 0, got an int of"):
        LedgerSaver(InMemoryEventStore(), cache_bytes=-huge)
    saver = LedgerSaver(InMemoryEventStore())
    with pytest.raises(TypeError, match=r"checkpoint_id must be a str .* got an int of"):
        saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": huge}})
    with pytest.raises(TypeError, match="configurable dict, got "):
        saver.get_tuple({"configurable": [huge]})  # type: ignore[typeddict-item]
    with pytest.raises(ValueError, match="limit must be None or an int >= 0, got an int of"):
        list(saver.list(None, limit=-huge))


# Bodies another writer could append to a thread's memory through the store's own API (the
# saver never writes them): each broke every later read with a KeyError or TypeError naming
# nothing, in every saver, `list(None)` over all threads included.
FOREIGN = {
    "checkpoint without an id": {"op": "checkpoint"},
    "checkpoint id not text": {
        "op": "checkpoint",
        "id": 7,
        "parent": None,
        "checkpoint": ["msgpack", "gA=="],
        "metadata": ["msgpack", "gA=="],
        "values": {},
        "refs": {},
    },
    "delta onto an event that is not there": {
        "op": "checkpoint",
        "id": "z",
        "parent": None,
        "checkpoint": ["msgpack", "gA=="],
        "metadata": ["msgpack", "gA=="],
        "values": {"a": {"version": "2", "base": 99, "append": ["msgpack", "kA=="]}},
        "refs": {},
    },
    "writes not triples": {
        "op": "writes",
        "checkpoint": "c",
        "task": "t",
        "path": "",
        "writes": [1],
    },
    "removed ids not a list": {"op": "removed", "checkpoints": 5},
}


@pytest.mark.parametrize("body", list(FOREIGN))
def test_a_thread_event_no_saver_writes_is_refused_by_name_not_a_keyerror(
    tmp_path: Any, body: str
) -> None:
    from eventlog.messages import CustomMessage
    from eventlog.serialization import added_record

    thread: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    with SQLiteEventStore(tmp_path / "l.db") as store:
        saver = LedgerSaver(store)
        config = saver.put(thread, checkpoint(), {}, {"a": "1"})
        foreign = CustomMessage({"langgraph": FOREIGN[body]})
        store.append(("t", "langgraph", ""), [added_record(foreign, "")])
        for reader in (saver, LedgerSaver(store)):  # a cached thread and a cold one
            for read in (
                lambda r=reader: r.get_tuple(thread),
                lambda r=reader: r.get_tuple(config),
                lambda r=reader: list(r.list(None)),
            ):
                with pytest.raises(ValueError, match="event 2 holds a body no LedgerSaver writes"):
                    read()
        # The way out it names: the thread erased, it reads as empty again.
        saver.delete_thread("t")
        assert LedgerSaver(store).get_tuple(thread) is None
