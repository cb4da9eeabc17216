"""The window record's own bounds (``projections.meta``), at their edges."""

from __future__ import annotations

import json

import pytest

from eventlog.hashing import GENESIS
from eventlog.import_checks import Brought
from eventlog.models import Record
from projections.meta import WindowMeta, check_window_record


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
