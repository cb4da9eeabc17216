"""Framework sessions read by index: each call costs what it returns, and is still verified."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("langchain_core", reason="the langchain extra is not installed")

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from eventlog import ChainIntegrityError, EventStore, SQLiteEventStore
from eventlog.ids import StreamKey
from eventlog.serialization import added_record
from projections import MessageWindowPolicy
from projections.adapters.item_list import CHUNK, ItemList, loads, tail
from projections.adapters.item_list_runs import oldest, remove
from projections.adapters.langchain import (
    LedgerChatMessageHistory,
    from_langchain,
)
from projections.adapters.openai_agents import LedgerSession
from projections.meta import WindowMeta
from tests.eventlog.test_forger import EDITS, KEY, Db
from tests.eventlog.test_import_gate import _rehash


class CountingStore(SQLiteEventStore):
    """A real SQLite store that counts the rows its reads return and its append calls."""

    rows_read = 0
    appends = 0

    def read(self, memory_id: Any, **bounds: Any) -> list[Any]:
        found = super().read(memory_id, **bounds)
        self.rows_read += len(found)
        return found

    def _range_rows(self, key: str, gt: int, lte: int | None) -> list[Any]:
        found = super()._range_rows(key, gt, lte)  # read_verified_rows' rows
        self.rows_read += len(found)
        return found

    def append(self, memory_id: Any, items: Any, **kwargs: Any) -> list[Any]:
        self.appends += 1
        return super().append(memory_id, items, **kwargs)


def _item(i: int) -> Any:
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"item {i}"}


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _filled(store: EventStore, count: int, memory_id: str = "s") -> None:
    session = LedgerSession(memory_id, store=store)
    for start in range(0, count, 500):
        _run(session.add_items([_item(i) for i in range(start, min(count, start + 500))]))


@pytest.mark.parametrize("history", [300, 3_000])
def test_each_call_reads_what_it_returns_whatever_the_history(tmp_path, history) -> None:
    store = CountingStore(tmp_path / "s.db")
    _filled(store, history)

    # Check a new object's get_items(limit=10) reads the ten newest rows and nothing else.
    store.rows_read = 0
    assert _run(LedgerSession("s", store=store).get_items(limit=10)) == [
        _item(i) for i in range(history - 10, history)
    ]
    assert store.rows_read == 10

    # Check add_items(100) on a new object: one row read (the newest), one append of 100.
    store.rows_read = store.appends = 0
    session = LedgerSession("s", store=store)
    _run(session.add_items([_item(i) for i in range(100)]))
    assert (store.rows_read, store.appends) == (1, 1)
    assert store.head("s").seq == history + 100

    # Check the same object adds again without reading (its seq and hash are current).
    store.rows_read = 0
    _run(session.add_items([_item(1)]))
    assert (store.rows_read, store.appends) == (0, 2)

    # Check everything after a clear reads only what follows the clear.
    _run(session.clear_session())
    _run(session.add_items([_item(i) for i in range(5)]))
    store.rows_read = 0
    assert _run(LedgerSession("s", store=store).get_items()) == [_item(i) for i in range(5)]
    assert store.rows_read == 5  # the newest event is the fifth item: read once


def test_retractions_are_skipped_by_index_not_by_scanning(tmp_path) -> None:
    store = CountingStore(tmp_path / "s.db")
    _filled(store, 1_000)
    session = LedgerSession("s", store=store)
    for _ in range(3):
        _run(session.pop_item())
    _run(session.add_items([{"role": "user", "content": "after"}]))
    store.rows_read = 0
    got = _run(LedgerSession("s", store=store).get_items(limit=4))
    assert got == [_item(994), _item(995), _item(996), {"role": "user", "content": "after"}]
    # Check the newest four events (the add and three retractions), then one read of the
    # three items before them: seven rows, not the history.
    assert store.rows_read == 4 + 3


def test_tail_takes_the_newest_refs_across_runs() -> None:
    runs = [(1, 3), (7, 0, 2), (9, 9)]
    assert tail(runs, None) == [(1, 0), (2, 0), (3, 0), (7, 0), (7, 1), (7, 2), (9, 0)]
    assert tail(runs, 3) == [(7, 1), (7, 2), (9, 0)]
    assert tail(runs, 0) == []
    assert tail(runs, 99) == tail(runs, None)
    # Check the lazy oldest-first refs skip to the same newest ones, run by run.
    for skip in range(9):
        assert list(oldest(runs, skip)) == tail(runs, None)[skip:]


def test_any_ref_leaves_either_kind_of_run_and_the_rest_stays_in_order() -> None:
    runs = [(1, 3), (7, 0, 2), (9, 9)]
    refs = tail(runs, None)
    assert list(oldest(runs)) == refs
    for ref in refs:
        left: list[Any] = list(runs)
        remove(left, ref)
        assert list(oldest(left)) == [r for r in refs if r != ref]
        assert all(run[-2] <= run[-1] for run in left)  # no empty run left behind
    left = list(runs)
    remove(left, (2, 0))
    remove(left, (7, 1))
    assert left == [(1, 1), (3, 3), (7, 0, 0), (7, 2, 2), (9, 9)]
    with pytest.raises(ValueError, match=r"ref \(5, 0\) is not in the list"):
        remove(left, (5, 0))


def test_a_session_written_before_item_lists_reads_and_learns_its_system_messages(
    store: EventStore,
) -> None:
    history = LedgerChatMessageHistory("legacy", store=store)
    stored = [from_langchain(m) for m in [SystemMessage("be terse"), HumanMessage("hi")]]
    # Events without "sys" in their meta, as memories wrote them before item lists.
    store.append(
        "legacy",
        [
            added_record(message, WindowMeta([[1, seq]], 2**31 - 1).encode())
            for seq, message in enumerate(stored, start=1)
        ],
    )
    assert WindowMeta.decode(store.read("legacy")[-1].meta).system is None
    assert [m.content for m in history.messages] == ["be terse", "hi"]
    history.add_messages([AIMessage("hello")])
    meta = WindowMeta.decode(store.read("legacy")[-1].meta)
    assert meta is not None
    assert meta.system == [[1, 0]]
    windowed = LedgerChatMessageHistory("legacy", store=store, window=MessageWindowPolicy(2))
    assert [m.content for m in windowed.messages] == ["be terse", "hello"]


def test_a_langchain_window_reads_o_window_rows(tmp_path) -> None:
    store = CountingStore(tmp_path / "w.db")
    history = LedgerChatMessageHistory("w", store=store)
    history.add_messages([SystemMessage("be terse")])
    for start in range(0, 3_000, 500):
        history.add_messages([HumanMessage(f"h{i}") for i in range(start, start + 500)])
    store.rows_read = 0
    windowed = LedgerChatMessageHistory("w", store=store, window=MessageWindowPolicy(20))
    got = windowed.messages
    assert [m.content for m in got] == ["be terse"] + [f"h{i}" for i in range(2_981, 3_000)]
    # Check the newest event, the last 2 x (20 + 8) items and the system message: O(window).
    assert store.rows_read <= 1 + 2 * 28 + 1


# ---------------------------------------------------------------- [forger]


def _session_reads(store: EventStore) -> dict[str, Any]:
    return {
        "get_items(limit=2)": lambda: _run(LedgerSession("conv", store=store).get_items(limit=2)),
        "get_items()": lambda: _run(LedgerSession("conv", store=store).get_items()),
        "history window": lambda: (
            LedgerChatMessageHistory("conv", store=store, window=MessageWindowPolicy(2)).messages
        ),
        "history messages": lambda: LedgerChatMessageHistory("conv", store=store).messages,
        "history aget_messages()": lambda: _run(
            LedgerChatMessageHistory("conv", store=store).aget_messages()
        ),
    }


@pytest.mark.skip_backend("memory")
@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_a_tampered_row_in_the_range_a_session_reads_is_refused(backend, edit, keyed) -> None:
    store = backend.open(chain_key=KEY if keyed else None)
    _run(LedgerSession("conv", store=store).add_items([_item(i) for i in range(6)]))
    _run(LedgerSession("other", store=store).add_items([_item(i) for i in range(3)]))
    db = Db(backend)
    db.keyed = keyed
    if edit == "erased content restored":
        db.backup = {r["seq"]: (r["payload"], r["salt"]) for r in db.rows("conv")}
        store.erase("conv", reason="the user asked")
    store.close()
    change, _ = EDITS[edit]
    change(db, rehash=keyed)  # keyed: the forger rehashes what it can without the key
    fresh = backend.open(chain_key=KEY if keyed else None)
    for name, read in _session_reads(fresh).items():
        if edit == "erased content restored":
            # The list after an erasure is empty: nothing restored is shown (a read whose
            # range holds a restored record is refused outright).
            try:
                assert read() == [], name
            except ChainIntegrityError as e:
                assert "content is back" in str(e), name
            continue
        with pytest.raises(ChainIntegrityError) as caught:
            read()
        assert caught.value.stream_id == "conv", name
        assert "not served" in str(caught.value), name


@pytest.mark.skip_backend("memory")
def test_a_whole_history_read_refuses_an_edited_row_in_a_later_chunk_on_every_read(
    backend,
) -> None:
    store = backend.open()
    count = 2 * CHUNK + 100  # three chunks
    items = [_item(i) for i in range(count)]
    messages = [
        HumanMessage(f"item {i}") if i % 2 else AIMessage(f"item {i}") for i in range(count)
    ]
    session = LedgerSession("agents", store=store)
    _run(session.add_items(items))
    history = LedgerChatMessageHistory("lc", store=store)
    history.add_messages(messages)

    # Check the reads are whole and exact before the edit (and leave the objects holding
    # the head they saw).
    assert _run(session.get_items()) == items
    assert _run(session.get_items(limit=CHUNK + 7)) == items[-(CHUNK + 7) :]
    assert history.messages == messages
    assert _run(history.aget_messages()) == messages

    # Check an edit of the database between two reads is found by the next read of the same
    # objects and of new ones: nothing verified earlier is trusted.
    at = CHUNK + 60  # in the second chunk
    db = Db(backend)
    for stream in ("agents", "lc"):
        edited = db.run(
            "UPDATE {events} SET payload = replace(payload, ?, ?) WHERE stream_id = ? AND seq = ?",
            f"item {at - 1}",
            "item 99999",
            stream,
            at,
        )
        assert edited == []
    assert [r["payload"] for r in db.rows("agents") if "item 99999" in r["payload"]]
    reads = {
        "get_items() again": lambda: _run(session.get_items()),
        "new get_items()": lambda: _run(LedgerSession("agents", store=store).get_items()),
        "messages again": lambda: history.messages,
        "aget_messages() again": lambda: _run(history.aget_messages()),
        "new messages": lambda: LedgerChatMessageHistory("lc", store=store).messages,
    }
    for name, read in reads.items():
        with pytest.raises(ChainIntegrityError) as caught:
            read()
        assert caught.value.seq == at, name
        assert "not served" in str(caught.value), name


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats()
    | st.text(st.characters(exclude_categories=()))  # lone surrogates too
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


def _decoded_or_refused(decode: Any, text: str) -> tuple[str, str]:
    try:
        return "value", repr(decode(text))  # repr: NaN, -0.0, 1 vs 1.0 and key order count
    except ValueError:
        return "refused", ""


@settings(max_examples=300, deadline=None)
@given(json_values, st.booleans(), st.data())
def test_loads_decodes_exactly_what_json_loads_does(value, ascii_only, data) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    # Check a stored text decodes to the same value, and so does a mangled one (or both
    # refuse it): one character inserted, dropped or replaced.
    assert _decoded_or_refused(loads, text) == _decoded_or_refused(json.loads, text)
    at = data.draw(st.integers(0, len(text)))
    char = data.draw(
        st.sampled_from([",", "]", "}", '"', "\\", "\x01", "1", ".", "e", "-", " ", "N"])
    )
    mode = data.draw(st.sampled_from(["insert", "drop", "replace"]))
    mangled = {
        "insert": text[:at] + char + text[at:],
        "drop": text[:at] + text[at + 1 :],
        "replace": text[:at] + char + text[at + 1 :],
    }[mode]
    assert _decoded_or_refused(loads, mangled) == _decoded_or_refused(json.loads, mangled)


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud800"',  # a lone surrogate escape: pydantic-core refuses it, json decodes it
        "[" * 400 + "]" * 400,  # deeper than pydantic-core's limit
        "123456789012345678901234567890",
        "[NaN, Infinity, -Infinity, -0.0, 1e400, 5e-324]",
        '{"a": 1, "a": 2}',
    ],
    ids=["lone surrogate", "deep nesting", "big integer", "special floats", "duplicate keys"],
)
def test_loads_decodes_what_its_fast_parser_refuses_or_might_round(text) -> None:
    assert repr(loads(text)) == repr(json.loads(text))


def test_replacing_items_keeps_the_system_refs_of_the_list(tmp_path) -> None:
    store = SQLiteEventStore(tmp_path / "r.db")
    items = ItemList(store, "r")
    history = LedgerChatMessageHistory("r", store=store)
    history.add_messages([HumanMessage("a"), SystemMessage("s"), HumanMessage("b")])
    assert items.replace_newest([], [from_langchain(HumanMessage("x"))]) is False
    new = [from_langchain(SystemMessage("t")), from_langchain(HumanMessage("c"))]
    assert items.replace_newest([(2, 0), (3, 0)], new) is True
    # Two retractions (4, 5), then the adds (6, 7): the retracted system message leaves "sys".
    assert items.snapshot() == ([(1, 1), (6, 7)], [(6, 0)])
    assert [m.content for m in history.messages] == ["a", "t", "c"]
    items.replace_all([from_langchain(SystemMessage("u"))])
    assert items.snapshot() == ([(9, 9)], [(9, 0)])  # 8 is the clear
    store.close()


def test_the_stored_list_names_items_by_seq(tmp_path) -> None:
    store = SQLiteEventStore(tmp_path / "m.db")
    items = ItemList(store, "m")
    history = LedgerChatMessageHistory("m", store=store)
    history.add_messages([SystemMessage("s"), HumanMessage("a"), HumanMessage("b")])
    history.add_messages([HumanMessage("c")])
    assert items.snapshot() == ([(1, 4)], [(1, 0)])
    assert json.loads(store.read(StreamKey(items.key))[-1].meta) == {
        "lim": 2**31 - 1,
        "sys": [[1, 0]],
        "w": [[1, 4]],
    }


def test_the_system_refs_of_a_list_round_trip_and_must_name_its_own_messages() -> None:
    meta = WindowMeta([[1, 4], [6, 0, 2]], 2**31 - 1, system=[[2, 0], [6, 1]])
    text = meta.encode()
    # Check the fast path writes the canonical JSON a generic encoder would.
    assert text == json.dumps(meta.to_json(), sort_keys=True, separators=(",", ":"))
    assert WindowMeta.decode(text) == meta
    assert meta.holds([6, 2]) and not meta.holds([5, 0]) and not meta.holds([6, 3])
    with pytest.raises(ValueError, match="malformed window record"):
        WindowMeta.decode('{"sys":[[1]],"w":[[1,2]]}')


def test_the_import_gate_refuses_a_list_naming_a_system_message_outside_it(tmp_path) -> None:
    import io

    from eventlog.formats.jsonl import export_jsonl, import_jsonl
    from projections.meta import check_window_record

    source = SQLiteEventStore(tmp_path / "a.db")
    LedgerChatMessageHistory("g", store=source).add_messages(
        [SystemMessage("s"), HumanMessage("h")]
    )
    out = io.StringIO()
    export_jsonl(source, out)
    lines = out.getvalue().splitlines()
    ok = import_jsonl(SQLiteEventStore(tmp_path / "ok.db"), lines, check=check_window_record)
    assert ok.records == 2
    forged = _rehash([line.replace('\\"sys\\":[[1,0]]', '\\"sys\\":[[2,1]]') for line in lines])
    assert forged != lines
    with pytest.raises(ValueError, match="outside its window"):
        import_jsonl(SQLiteEventStore(tmp_path / "bad.db"), forged, check=check_window_record)
