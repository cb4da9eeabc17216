"""An inspector card names the tool of an output that does not carry the name (the Agents SDK's
function_call_output): from the call on the page, else from the events just before."""

from __future__ import annotations

import asyncio
from typing import Any

from eventlog import InMemoryEventStore, SQLiteEventStore
from eventlog.ids import StreamKey, memory_key
from projections.adapters.openai_agents import LedgerSession
from projections.audit import walk
from projections.inspector import views


def _session(store, items: list[Any]) -> str:
    asyncio.run(LedgerSession("agents", store=store).add_items(items))
    return memory_key("agents")


def test_a_tool_output_card_names_its_tool_from_an_earlier_event(tmp_path):
    with SQLiteEventStore(tmp_path / "s.db") as store:
        key = _session(
            store,
            [{"role": "user", "content": "Weather in Paris?"}],
        )
        _session(
            store,
            [{"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"}],
        )
        _session(store, [{"type": "function_call_output", "call_id": "c1", "output": "21 C"}])
        head = store.head(key)
        assert head is not None
        page = views.step_view(store, key, head.seq)
        texts = [m.text for m in page.entered.items]
        assert texts == ["weather (call c1): 21 C"]


def test_a_call_beyond_the_lookback_is_not_searched_for(monkeypatch):
    store = InMemoryEventStore()
    call = {"type": "function_call", "call_id": "c9", "name": "far", "arguments": "{}"}
    key = _session(store, [call])
    for i in range(3):
        _session(store, [{"role": "user", "content": f"filler {i}"}])
    _session(store, [{"type": "function_call_output", "call_id": "c9", "output": "x"}])
    head = store.head(key)
    assert head is not None
    stream = StreamKey(key)
    (step,) = walk(store, stream, after=head.seq - 1, upto=head.seq)
    (output,) = [e.message for e in step.entered]
    monkeypatch.setattr(views, "CALL_LOOKBACK", 2)  # the call is 4 events back
    assert views.tool_names(store, stream, head.seq, [output]) == {}
    monkeypatch.setattr(views, "CALL_LOOKBACK", 5)
    assert views.tool_names(store, stream, head.seq, [output]) == {"c9": "far"}
