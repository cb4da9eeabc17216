"""The memory page at a recorded model call shows what was sent and what was left out, and
why - the same words as `chatledger replay` - and says "no window recorded" elsewhere."""

from __future__ import annotations

import html
import re

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("langchain_core", reason="the langchain extra is not installed")
pytest.importorskip("starlette", reason="the inspector extra is not installed")

from starlette.testclient import TestClient

from eventlog import SQLiteEventStore
from projections.inspector.web import create_app
from tests.calls_scenario import TOKEN_BUDGET, record_history, record_session


@pytest.fixture
def client(tmp_path):
    path = tmp_path / "calls.db"
    record_session(path)
    record_history(path)
    with SQLiteEventStore(path) as store:
        yield TestClient(create_app(store), base_url="http://localhost")


def _section(page: str, ident: str) -> str:
    found = re.search(rf'id="{ident}">(.*?)</(?:ol|ul|p)>', page, re.S)
    assert found is not None, ident
    return html.unescape(re.sub(r"<[^>]+>", " ", found.group(1)))


def _left(page: str) -> list[str]:
    runs = re.findall(r'<li class="left-run">(.*?)</li>', page, re.S)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", "", run)).split()) for run in runs]


def test_a_call_page_shows_what_was_sent_and_why_the_rest_was_not(client) -> None:
    page = client.get("/m/conv?seq=10")
    assert page.status_code == 200
    text = page.text
    heading = _section(text, "call-heading")
    assert "model call at seq 10 (messages:5, valid for openai)" in heading
    assert "re-running the policy reproduces it" in heading
    sent = _section(text, "call-sent")
    # Check the sent messages in order: two of the history, then the new input.
    assert re.findall(r"event (\d+)", sent) == ["4", "6"]
    assert sent.index("q2") < sent.index("checking") < sent.index("q3")
    assert "new input, kept in the event" in sent
    assert _left(text) == [
        "events 1-2 (2): outside the last 5 items",
        "event 5: tool call without its result dropped for validity for openai",
        "event 7: tool result without its call dropped for validity for openai",
        "event 8: retracted at seq 9",
    ]


def test_a_token_call_and_a_langchain_call(client) -> None:
    page = client.get("/m/conv?seq=14").text
    assert _left(page) == [
        "events 1-7 (6): before the last clear (seq 11)",
        f"event 12: over the {TOKEN_BUDGET}-token budget",
    ]
    assert "15 tokens" in _section(page, "call-heading")
    history = client.get("/m/lc?seq=8").text
    assert _left(history) == [
        "event 1: system message replaced by a newer one",
        "events 2-3 (2): outside the last 3 items",
    ]


def test_no_call_section_where_no_window_was_recorded(client) -> None:
    page = client.get("/m/conv?seq=9").text
    assert 'id="model-call"' not in page
    assert "no window recorded" in page
    assert "2147483647" not in page


def test_a_call_over_a_list_past_the_budget_says_which_command_works_it_out(
    client, monkeypatch
) -> None:
    from projections.inspector import calls_page

    monkeypatch.setattr(calls_page, "CALL_LIST_MAX", 5)  # the call at seq 10 ran over 6 items
    page = client.get("/m/conv?seq=10").text
    refused = _section(page, "call-refused")
    assert "a list of 6 messages, more than 5" in refused
    assert "chatledger sent conv 10" in refused
    assert _left(page) == []
    assert "re-run" not in _section(page, "call-heading")  # not checked, so not claimed
    assert re.findall(r"event (\d+)", _section(page, "call-sent")) == ["4", "6"]
    # Check a call within the budget is still worked out.
    assert _left(client.get("/m/conv?seq=3").text) == []
    assert "reproduces it" in _section(client.get("/m/conv?seq=3").text, "call-heading")
