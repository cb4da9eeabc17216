"""Import is a gate: a hostile line is refused in one line, and nothing is written.

Every hostile record here is re-hashed (``record_hash`` along the chain), so the hash chain
alone cannot refuse it: what refuses it is the gate (:mod:`eventlog.import_checks`) and the
projections' window check (:func:`projections.meta.check_window_record`).
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from freezegun import freeze_time
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from eventlog import InMemoryEventStore, SystemMessage
from eventlog.formats.jsonl import export_jsonl, import_jsonl
from eventlog.hashing import GENESIS, record_hash
from eventlog.ids import StreamKey, memory_id_from_key
from eventlog.import_checks import Brought, nesting_depth
from eventlog.models import Record
from eventlog.serialization import added_record, decode_meta
from projections import MessageWindowChatMemory, OpenAiTokenCountEstimator, TokenWindowChatMemory
from projections.audit import walk
from projections.meta import check_window_record
from projections.replay import view_at, window_meta, window_refs
from tests.factories import a_cut_export, a_message, a_tool_exchange

NOW = datetime(2026, 1, 2, tzinfo=UTC)


@freeze_time("2026-01-01 10:00:00")
def _conversation_export() -> str:
    """A real conversation's export: adds, sets, clears and tool calls, on two windows."""
    store = InMemoryEventStore()
    chat = MessageWindowChatMemory(id="conv", max_messages=3, store=store)
    chat.add(SystemMessage("Be brief."))
    call, result = a_tool_exchange(call_id="1", result="4")
    chat.add(a_message("user", "What is 2+2?"))
    chat.add(call)
    chat.add(result)
    chat.add(a_message("ai", "4"))
    chat.set(a_message("user", "start over"), a_message("ai", "sure"))
    chat.add(a_message("user", "more"))
    chat.clear()
    chat.add(a_message("user", "after clear"))
    tokens = TokenWindowChatMemory(
        id=("user", 7),
        max_tokens=60,
        token_count_estimator=OpenAiTokenCountEstimator("gpt-4o-mini"),
        store=store,
    )
    tokens.add(a_message("user", "hello there"))
    tokens.set([a_message("user", "a"), a_message("ai", "b"), a_message("user", "c")])
    tokens.add(a_message("ai", "d"))
    MessageWindowChatMemory(id=42, max_messages=2, store=store).add(a_message("user", "x"))
    out = io.StringIO()
    export_jsonl(store, out)
    return out.getvalue()


EXPORT = _conversation_export()
LINES = EXPORT.splitlines()


def _rehash(lines: list[str]) -> list[str]:
    """Recompute every hash and link, stream by stream in file order, where a line is a record
    whose hashed fields have the right types; other lines are kept as they are."""
    prev: dict[str, str] = {}
    out = [lines[0]]
    for line in lines[1:]:
        try:
            obj = json.loads(line)
            record = Record(
                0,
                obj["memory"],
                obj["seq"],
                obj["recorded_at"],
                obj["kind"],
                obj["schema_version"],
                obj["payload"],
                obj["meta"],
                prev.get(obj["memory"], GENESIS),
                "",
            )
            obj["prev_hash"] = record.prev_hash
            obj["hash"] = prev[obj["memory"]] = record_hash(record)
            # Rewritten as format 1 (the payload hashed as is): the forger's easiest path.
            obj.update(format=1, salt="", commitment="")
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            out.append(line)
            continue
        out.append(json.dumps(obj))
    return out


def _with(seq: int, memory: str = "conv", **fields: object) -> list[str]:
    """The export with fields of one record replaced, re-hashed."""
    lines = list(LINES)
    for i, line in enumerate(lines[1:], 1):
        obj = json.loads(line)
        if (obj["memory"], obj["seq"]) == (memory, seq):
            obj.update(fields)
            lines[i] = json.dumps(obj)
    return _rehash(lines)


def _refused(lines: list[str], match: str, **kwargs: Any) -> str:
    target = InMemoryEventStore()
    kwargs.setdefault("now", NOW)
    with pytest.raises(ValueError, match=match) as caught:
        import_jsonl(target, lines, source="x.jsonl", check=check_window_record, **kwargs)
    text = str(caught.value)
    assert text.startswith("import of x.jsonl refused, nothing was written: ")
    assert "\n" not in text
    assert target.streams(include_system=True) == []
    return text


# ---------------------------------------------------------------------------- the gate passes


def test_the_intact_export_imports_and_every_memory_shows():
    target = InMemoryEventStore()
    report = import_jsonl(target, LINES, check=check_window_record, now=NOW)
    assert report.records == len(LINES) - 1
    _assert_usable(target)


def test_a_file_object_is_read_line_by_line():
    target = InMemoryEventStore()
    report = import_jsonl(target, io.StringIO(EXPORT), check=check_window_record, now=NOW)
    assert report.records == len(LINES) - 1


# ---------------------------------------------------------------------------- regressions


@pytest.mark.parametrize(
    ("seq", "fields", "match"),
    [
        (
            5,
            {"meta": '{"lim":3,"w":[[1,999999999]]}'},
            r"line 6: the window record .*1\.\.999999999",
        ),
        (5, {"meta": '{"lim":3,"w":5}'}, r"malformed window"),
        (5, {"meta": '{"lim":3,"w":[[1,5],[3,4]]}'}, r"refers to event 3 twice"),
        (6, {"meta": '{"lim":3,"w":[[6,0,99]]}'}, r"items 0\.\.99 of event 6, which brought 2"),
        (6, {"meta": '{"lim":3,"w":[[6,0,1],[6,1,1]]}'}, r"item 1 of event 6 twice"),
        (7, {"meta": '{"lim":3,"w":[[5,0,0]]}'}, r"not an earlier messages_set"),
        # Event 6 is a set: a run [1, 7] names its item 0 (as encode_refs writes it), so
        # this window is refused for its size; a clear in a run brought nothing.
        (7, {"meta": '{"lim":3,"w":[[1,7]]}'}, r"holds 7 messages, more than its own limit 3"),
        (9, {"meta": '{"lim":3,"w":[[8,9]]}'}, r"not all are message_added"),
        (5, {"meta": "[1]"}, r"meta of 'conv'#5 is not a JSON object"),
        (5, {"kind": "message_deleted"}, r"kind 'message_deleted' is unknown"),
        (5, {"schema_version": 9}, r"schema_version 9 is newer"),
        (5, {"recorded_at": "9999-01-01T00:00:00.000000Z"}, r"later than this import's clock"),
        (5, {"payload": '{"type":"USER"}'}, r"payload of 'conv'#5 \(message_added\) does not"),
        (5, {"payload": "[1]"}, r"payload of 'conv'#5 .* does not decode"),
        (8, {"payload": "[]"}, r"payload of 'conv'#8 .* not a JSON object"),
        (5, {"payload": "{}\x00"}, r"NUL character"),
        (5, {"payload": "\ud800"}, r"lone surrogate"),
        (5, {"payload": "[" * 100_000 + "]" * 100_000}, r"line 6: payload nests JSON more"),
    ],
)
def test_hostile_fields_are_refused(seq, fields, match):
    _refused(_with(seq, **fields), match)


def test_a_non_canonical_key_is_refused_not_aliased():
    lines = [LINES[0], *(line.replace('"~i:42"', '"~i:007"') for line in LINES[1:])]
    _refused(_rehash(lines), r"memory key '~i:007' is not canonical .*'~i:7'")


def test_a_deeply_nested_line_or_key_is_refused_not_a_recursion_error():
    deep = "[" * 50_000 + "]" * 50_000
    _refused([LINES[0], deep], r"line 2 nests JSON more than")
    _refused([deep], r"line 1 nests JSON more than")
    key = "~t:" + "[" * 1_000 + "1" + "]" * 1_000  # 2004 bytes: short enough
    _refused(
        _rehash([LINES[0], *(line.replace('"~i:42"', json.dumps(key)) for line in LINES[1:])]),
        "memory nests JSON",
    )


def test_a_long_line_is_refused_before_it_is_read_whole():
    _refused([LINES[0], "x" * 2_000], r"line 2 is longer than 1000 characters", max_line=1_000)
    stream = io.StringIO(LINES[0] + "\n" + "y" * 5_000 + "\n")
    _refused(stream, r"line 2 is longer than 1000", max_line=1_000)  # type: ignore[arg-type]
    long_key = "k" * 3_000
    lines = [LINES[0], *(line.replace('"~i:42"', json.dumps(long_key)) for line in LINES[1:])]
    _refused(_rehash(lines), r"key of 3000 bytes")


def test_a_future_time_within_the_skew_is_accepted():
    written = datetime(2026, 1, 1, 10, tzinfo=UTC)  # the export's (frozen) time
    _refused(LINES, r"later than this import's clock", now=written - timedelta(minutes=6))
    target = InMemoryEventStore()
    import_jsonl(target, LINES, check=check_window_record, now=written - timedelta(minutes=4))
    assert target.verify().ok


def test_without_check_window_records_pass_but_the_rest_is_gated():
    target = InMemoryEventStore()
    import_jsonl(target, _with(5, meta='{"lim":3,"w":[[1,999]]}'), now=NOW)
    with pytest.raises(ValueError, match=r"outside 1\.\.5"):
        MessageWindowChatMemory(id="conv", max_messages=5, store=target).as_of(seq=5)


def test_a_continued_import_checks_windows_against_the_target():
    target = InMemoryEventStore()
    conv = [line for line in LINES[1:] if json.loads(line)["memory"] == "conv"]
    import_jsonl(target, a_cut_export([LINES[0], *conv[:6]]), check=check_window_record, now=NOW)
    tail = a_cut_export([LINES[0], *conv[6:]])
    report = import_jsonl(target, tail, check=check_window_record, now=NOW)
    assert report.imported == {"conv": (7, 9)}
    _assert_usable(target)


def test_brought_answers_runs_in_constant_time():
    brought = Brought(3)
    for seq, kind, count in [
        (3, "message_added", 1),
        (4, "messages_set", 2),
        (5, "message_added", 1),
    ]:
        brought.append(seq, kind, count)
    assert (brought.first, brought.last, len(brought), list(brought)) == (3, 5, 3, [3, 4, 5])
    assert brought[4] == 2 and brought.set_size(4) == 2 and brought.set_size(3) is None
    assert (brought.added(1, 3), brought.added(3, 5), brought.added(5, 10**9)) == (1, 2, 1)
    with pytest.raises(KeyError):
        brought[6]
    with pytest.raises(ValueError, match="next seq is 6"):
        brought.append(8, "message_added", 1)


def test_nesting_depth_ignores_brackets_in_strings():
    assert nesting_depth('{"a":"[[[[[[","b":[1]}', 2) == 2
    assert nesting_depth('{"a":"[[[[[[","b":[[[1]]]}', 2) == 4


# ---------------------------------------------------------------------------- readers


def _record(seq: int, meta: str, kind: str = "message_added") -> Record:
    return Record(seq, "conv", seq, "2026-01-01T00:00:00.000000Z", kind, 1, "{}", meta, "", "")


def test_window_meta_refuses_a_run_past_its_own_event():
    with pytest.raises(ValueError, match=r"refers to events 1\.\.999999999, outside 1\.\.3"):
        window_meta(_record(3, '{"w":[[1,999999999]]}'))
    with pytest.raises(ValueError, match=r"items 0\.\.1 of 4, outside 1\.\.3"):
        window_meta(_record(3, '{"w":[[4,0,1]]}'))


def test_materialize_never_expands_a_set_run_beyond_its_items():
    store = InMemoryEventStore()
    chat = MessageWindowChatMemory(id="conv", max_messages=5, store=store)
    chat.set(a_message("user", "a"), a_message("ai", "b"))
    # Written by other means: a window claiming a billion items of the two-item set.
    store.append(
        "conv", [added_record(a_message("user", "c"), '{"lim":5,"w":[[1,0,999999999],[2,2]]}')]
    )
    refs = window_refs(store.read("conv")[-1])
    assert len(refs) == 10**9 + 1  # arithmetic only
    with pytest.raises(ValueError, match=r"items 0\.\.999999999 of 1, but event 1 brought fewer"):
        view_at(store, "conv", 2)
    with pytest.raises(ValueError, match="brought fewer"):
        MessageWindowChatMemory(id="conv", max_messages=5, store=store).messages()


def test_window_refs_behave_as_the_expanded_list():
    refs = window_refs(_record(5, '{"w":[[5,0,1],[2,3]]}', kind="messages_set"))
    expanded = [(5, 0), (5, 1), (2, 0), (3, 0)]
    assert refs == expanded and list(refs) == expanded and refs != [(5, 0)]
    assert [refs[i] for i in range(-4, 4)] == expanded * 2 and refs[1:3] == expanded[1:3]
    assert refs.runs == [[5, 0, 1], [2, 3]] and "WindowRefs" in repr(refs)
    assert refs.__eq__(3) is NotImplemented
    with pytest.raises(IndexError):
        refs[4]


# ---------------------------------------------------------------------------- fuzz


def _windowless(record: Record) -> bool:
    if record.kind in ("memory_cleared", "memory_purged"):
        return False
    return "w" not in decode_meta(record)


def _assert_usable(target: InMemoryEventStore) -> None:
    """Every imported memory opens, shows at every seq and walks; the copy verifies. An
    event without a window record (a foreign writer's, legitimate) cannot be shown, and the
    readers say so in one line."""
    assert target.verify().ok
    for info in target.streams(include_system=True):
        key = StreamKey(info.stream_id)
        history = target.read(key)
        foreign = {r.seq for r in history if _windowless(r)}
        memory = MessageWindowChatMemory(id=memory_id_from_key(key), max_messages=5, store=target)
        _shows(memory.messages, history[-1].seq in foreign)
        for record in history:
            _shows(lambda k=key, s=record.seq: view_at(target, k, s), record.seq in foreign)
        _shows(lambda k=key: list(walk(target, k)), bool(foreign))


def _shows(read, foreign: bool) -> None:
    if not foreign:
        read()
        return
    with pytest.raises(ValueError, match="records no window"):
        read()


_HOSTILE = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from(
        ["", "{}", "[]", "null", "9999-12-31T23:59:59.999999Z", "~i:007", "~x", "\x00"]
    ),
    st.text(max_size=20),
    st.just("[" * 3_000 + "]" * 3_000),
    st.builds(
        lambda runs: json.dumps({"lim": 5, "w": runs}),
        st.lists(
            st.lists(st.integers(min_value=-2, max_value=10**9), min_size=1, max_size=4), max_size=3
        ),
    ),
    st.builds(
        lambda a, b: json.dumps({"lim": 5, "w": [[a, b]]}),
        st.integers(min_value=0, max_value=30),
        st.integers(min_value=0, max_value=30),
    ),
    st.builds(
        lambda s, i, j: json.dumps({"lim": 5, "w": [[s, i, j]]}),
        st.integers(min_value=0, max_value=30),
        st.integers(min_value=0, max_value=4),
        st.integers(min_value=0, max_value=10),
    ),
    st.sampled_from(["message_deleted", "memory_purged", "compaction_run", "messages_set"]),
    st.builds(
        json.dumps,
        st.recursive(
            st.none() | st.integers() | st.text(max_size=5),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
            max_leaves=8,
        ),
    ),
)
_FIELDS = ["memory", "seq", "recorded_at", "kind", "schema_version", "payload", "meta"]


@st.composite
def _hostile_files(draw):
    if draw(st.integers(0, 9)) == 0:  # garbage: random lines after a real header
        garbage = st.one_of(st.text(max_size=40), st.builds(json.dumps, _HOSTILE))
        return [LINES[0], *draw(st.lists(garbage, max_size=4))]
    lines = list(LINES)
    for _ in range(draw(st.integers(0, 3))):
        index = draw(st.integers(1, len(lines) - 1))
        obj = json.loads(lines[index])
        seq = obj["seq"]
        if type(seq) is int and 1 <= seq <= 50 and draw(st.booleans()):
            obj["meta"] = draw(_plausible_windows(seq))
        else:
            obj[draw(st.sampled_from(_FIELDS))] = draw(_HOSTILE)
        lines[index] = json.dumps(obj)
    return _rehash(lines)


def _plausible_windows(seq: int) -> st.SearchStrategy[str]:
    """Windows near the rules' edges: runs within 1..seq that may name sets, repeats, gaps."""
    add = st.integers(1, seq).flatmap(lambda b: st.tuples(st.integers(1, b), st.just(b)))
    items = st.tuples(st.integers(1, seq), st.integers(0, 3), st.integers(0, 3))
    runs = st.lists(st.one_of(add.map(list), items.map(list)), max_size=3)
    return st.builds(
        lambda lim, w: json.dumps({"lim": lim, "w": w}, separators=(",", ":"), sort_keys=True),
        st.integers(1, 6),
        runs,
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_hostile_files())
def test_an_import_is_refused_cleanly_or_every_memory_shows(lines):
    target = InMemoryEventStore()
    try:
        import_jsonl(target, lines, source="f", check=check_window_record, now=NOW)
    except ValueError as e:
        assert str(e).startswith("import of f refused, nothing was written: ")
        assert "\n" not in str(e)
        assert target.streams(include_system=True) == []
        event("refused")
        return
    event("accepted")
    _assert_usable(target)
