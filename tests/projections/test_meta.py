"""The window record's own bounds (``projections.meta``), at their edges."""

from __future__ import annotations

import json

import pytest

from eventlog.hashing import GENESIS
from eventlog.import_checks import Brought
from eventlog.messages import UserMessage
from eventlog.models import Record
from projections.meta import (
    UNBOUNDED_LIMIT,
    ForkOrigin,
    WindowMeta,
    check_window_record,
    decode_refs,
    encode_refs,
)
from projections.window import Entry


def _record(seq: int, meta: dict[str, object]) -> Record:
    return Record(
        seq, "m", seq, "2026-01-01T00:00:00.000000Z", "message_added", 1, "{}",
        json.dumps(meta), GENESIS, "",
    )  # fmt: skip


@pytest.mark.parametrize(("permille", "valid"), [(0, False), (1, True), (999, True), (1000, False)])
def test_the_eviction_low_water_mark_is_strictly_between_0_and_1000(permille, valid):
    text = json.dumps({"w": [], "lim": 10, "ev": permille})
    if valid:
        meta = WindowMeta.decode(text)
        assert meta is not None and meta.evict_permille == permille
    else:
        with pytest.raises(ValueError, match="malformed window record"):
            WindowMeta.decode(text)


@pytest.mark.parametrize("field", ["sum", "sth"])
def test_a_summary_or_its_coverage_may_name_the_event_itself_but_nothing_after(field):
    brought = Brought()
    for seq in range(1, 5):
        brought.append(seq, "message_added", 1)
    check_window_record(_record(4, {"w": [], field: 4}), brought)  # up to itself: fine
    with pytest.raises(ValueError, match=r"seq 5, after the event itself \(4\)"):
        check_window_record(_record(4, {"w": [], field: 5}), brought)


@pytest.mark.parametrize(
    ("refs", "runs"),
    [
        ([], []),
        ([(2, 0), (3, 0), (4, 0)], [[2, 4]]),
        ([(1, 0), (3, 0)], [[1, 1], [3, 3]]),  # a gap between adds ends the run
        ([(1, 0), (2, 1)], [[1, 1], [2, 1, 1]]),  # the next seq, but an item of a set
        ([(1, 0), (5, 1)], [[1, 1], [5, 1, 1]]),  # item 1 of another event than the add's
        ([(4, 0), (4, 1), (4, 2)], [[4, 0, 2]]),  # a set's items, the window's last run
        ([(4, 1), (4, 2), (5, 0)], [[4, 1, 2], [5, 5]]),
        ([(4, 1), (6, 2)], [[4, 1, 1], [6, 2, 2]]),
    ],
)
def test_refs_are_run_length_encoded_and_decoded_back(refs, runs):
    assert encode_refs([Entry(UserMessage("m"), ref) for ref in refs]) == runs
    assert decode_refs(runs) == refs


@pytest.mark.parametrize(
    "meta",
    [
        WindowMeta([[1, 2]], 5, forked_from=ForkOrigin("a", 2, "h")),
        WindowMeta([[1, 2]], 5, 7, "e", ForkOrigin("a", 2, "h")),
        WindowMeta([[1, 2]], 5, [3, 4], "e"),
        WindowMeta([[1, 2]], 5, evict_permille=500),
        WindowMeta([[1, 2]], 5, summary=3),
        WindowMeta([[1, 2]], 5, through=2),
        WindowMeta([[1, 2]], 5, system=[[1, 0]]),
    ],
)
def test_each_optional_field_is_written_canonically_and_read_back(meta):
    # Whichever path encode() takes (the add path is written by hand), the bytes are the
    # canonical JSON of every field.
    canonical = json.dumps(
        meta.to_json(), ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )
    assert meta.encode() == canonical
    assert WindowMeta.decode(canonical) == meta


@pytest.mark.parametrize("system", [[[1]], [[1, 0, 0]], [[1, -1]], [1], [[1, True]]])
def test_system_refs_are_pairs_of_counts(system):
    with pytest.raises(ValueError, match="malformed window record"):
        WindowMeta.decode(json.dumps({"w": [[1, 2]], "sys": system}))


def _brought(*kinds: tuple[str, int]) -> Brought:
    brought = Brought()
    for seq, (kind, count) in enumerate(kinds, start=1):
        brought.append(seq, kind, count)
    return brought


_ADDS = _brought(*[("message_added", 1)] * 6)
_SETS = _brought(("messages_set", 3), ("messages_set", 3), ("message_added", 1))


@pytest.mark.parametrize(
    ("window", "brought", "error"),
    [
        ([[1, 2], [4, 5]], _ADDS, None),
        ([[1, 3], [3, 5]], _ADDS, "refers to event 3 twice"),  # runs that touch at one end
        ([[1, 0, 2], [2, 0, 2]], _SETS, None),  # the same items of two sets
        ([[1, 0, 1], [1, 1, 2]], _SETS, "refers to item 1 of event 1 twice"),
        ([[1, 2], [2, 1, 2]], _SETS, None),  # a run [a, b] names item 0 of each set in it
        ([[1, 3], [2, 0, 1]], _SETS, "refers to item 0 of event 2 twice"),
    ],
)
def test_a_window_names_each_message_once(window, brought, error):
    # A session's list (recorded unbounded): only the structure is checked, since a memory's
    # window holds no gap and nothing from before a set (test_window_sequence.py).
    record = _record(brought.last, {"w": window, "lim": UNBOUNDED_LIMIT})
    if error is None:
        check_window_record(record, brought)
    else:
        with pytest.raises(ValueError, match=error):
            check_window_record(record, brought)


@pytest.mark.parametrize(
    ("window", "error"),
    [
        ([[1, 1], [2, 0, 2]], None),  # the set event's own window names its items
        ([[1, 1], [2, 1, 2]], None),
        ([[1, 1], [2, 0, 3]], "refers to items 0..3 of event 2, which brought 3"),
        ([[1, 0, 0]], "refers to items 0..0 of event 1, which is not an earlier messages_set"),
    ],
)
def test_a_set_run_names_items_the_set_brought(window, error):
    brought = _brought(("message_added", 1), ("messages_set", 3))
    record = _record(2, {"w": window, "lim": UNBOUNDED_LIMIT})  # a session's: structure only
    if error is None:
        check_window_record(record, brought)
    else:
        with pytest.raises(ValueError, match=error):
            check_window_record(record, brought)


@pytest.mark.parametrize(
    ("system", "error"),
    [
        ([[1, 0], [2, 2], [3, 0]], None),
        ([[2, 0]], r"names system message \[2, 0\] outside its window"),  # item 0 left
        ([[3, 1]], "outside its window"),  # an add has no item 1
        ([[4, 0]], "outside its window"),  # after the window's last add
        ([[1, 0], [1, 0]], "out of order"),  # the same message twice
        ([[3, 0], [2, 1]], "out of order"),
    ],
)
def test_system_refs_name_messages_of_the_window_once_each_in_order(system, error):
    brought = _brought(("message_added", 1), ("messages_set", 3), ("message_added", 1))
    # A session's list, which records its system messages (structure only, as above).
    window = {"w": [[1, 1], [2, 1, 2], [3, 3]], "sys": system, "lim": UNBOUNDED_LIMIT}
    record = _record(3, window)
    if error is None:
        check_window_record(record, brought)
    else:
        with pytest.raises(ValueError, match=error):
            check_window_record(record, brought)


def test_a_window_holds_exactly_the_refs_its_runs_name():
    meta = WindowMeta([[1, 3], [5, 1, 3]])
    inside = [[1, 0], [2, 0], [3, 0], [5, 1], [5, 2], [5, 3]]
    outside = [[0, 0], [4, 0], [1, 1], [3, 1], [5, 0], [5, 4], [6, 1]]
    assert [ref for ref in inside + outside if meta.holds(ref)] == inside
    assert meta.refs == [tuple(ref) for ref in inside]
    assert meta.size == len(inside)


@pytest.mark.parametrize(
    "text",
    [
        "{" + "x" * 100,  # not JSON
        "[" + "1," * 50 + "1]",  # not an object
        '{"w": [[2, 1]], "x": "' + "x" * 100 + '"}',  # a malformed window
        '{"w": [], "lim": -1, "x": "' + "x" * 100 + '"}',  # a malformed record
    ],
)
def test_an_error_quotes_the_first_80_characters_of_the_meta(text):
    with pytest.raises(ValueError) as caught:
        WindowMeta.decode(text)
    assert str(caught.value).endswith(f": {text[:80]!r}")
