"""The inspector's page for a LangGraph thread (LedgerSaver): checkpoints as steps, the
``messages`` channel as the conversation, what changed between two checkpoints - over HTTP and
in a real browser, read-only and escaped like every other page."""

from __future__ import annotations

import itertools
import sqlite3
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.graph", reason="the langgraph extra is not installed")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from eventlog import SQLiteEventStore
from projections.adapters.langgraph import LedgerSaver
from projections.inspector import langgraph_page
from projections.inspector.web import CSP
from tests.inspector.conftest import SCRIPT, Server

KEY = '~t:["alice","langgraph",""]'
PAGE = "/lg/" + urllib.parse.quote(KEY, safe="")


def _get(url: str) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(url) as response:  # noqa: S310 - our own local server
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def _thread(path: Path, turns: int = 3) -> list[Any]:
    """A chat graph's thread ``alice``; its checkpoint tuples, newest first."""
    with SQLiteEventStore(path) as store:
        saver = LedgerSaver(store)
        model = GenericFakeChatModel(
            messages=(AIMessage(f"Answer {n}.") for n in itertools.count(1))
        )

        def chat(state: MessagesState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        graph = StateGraph(MessagesState)
        graph.add_node("chat", chat)
        graph.add_edge(START, "chat")
        app = graph.compile(checkpointer=saver)
        alice: Any = {"configurable": {"thread_id": "alice"}}
        for turn in range(1, turns + 1):
            question = f"Question {turn} {SCRIPT}" if turn == 2 else f"Question {turn}"
            app.invoke({"messages": [HumanMessage(question)]}, alice)
        return list(saver.list(alice))


@pytest.fixture
def lg_ledger(tmp_path: Path) -> tuple[Path, list[Any]]:
    path = tmp_path / "lg.db"
    return path, _thread(path)


def test_the_thread_page_shows_steps_conversation_and_diff(lg_ledger, serve):
    path, tuples = lg_ledger
    server: Server = serve(SQLiteEventStore(path))
    before = path.read_bytes()
    status, headers, body = _get(server.url + PAGE)
    assert status == 200 and headers["content-security-policy"] == CSP
    # Check every checkpoint is a step, newest first, the newest one selected.
    for t in tuples:
        assert f"checkpoint={t.checkpoint['id']}" in body
    newest = tuples[0].checkpoint["id"]
    assert f'<code id="selected">{newest}</code>' in body
    # Check the conversation is the messages channel, escaped.
    assert "Question 3" in body and "Answer 3." in body
    assert SCRIPT not in body and "&lt;script&gt;" in body
    # Check a step names the seq of its event, which `chatledger prove` takes.
    with SQLiteEventStore(path) as store:
        seq = LedgerSaver(store).checkpoint_seq(tuples[0].config)
    assert f"chatledger prove {KEY.replace(chr(34), '&#34;')} {seq}" in body
    # Check what changed from the end of turn one to the newest: the four later messages.
    first_turn = next(
        t for t in tuples if len(t.checkpoint["channel_values"]["messages"]) == 2
    ).checkpoint["id"]
    status, _, body = _get(server.url + PAGE + f"?checkpoint={newest}&from={first_turn}")
    assert status == 200
    added = body[body.index('id="diff-added"') : body.index('id="diff-dropped"')]
    assert [q in added for q in ("Question 1", "Question 2", "Question 3", "Answer 3.")] == [
        False,
        True,
        True,
        True,
    ]
    assert "messages" in body[body.index('id="diff-channels"') :][:200]
    assert path.read_bytes() == before  # read-only


def test_the_memory_page_of_a_thread_leads_to_the_thread_page(lg_ledger, serve):
    path, _ = lg_ledger
    server: Server = serve(SQLiteEventStore(path))
    # urllib follows the redirect: the memory's page is the thread's.
    status, _, body = _get(server.url + "/m/" + urllib.parse.quote(KEY, safe=""))
    assert status == 200 and 'id="conversation"' in body
    assert langgraph_page.link("conv") is None
    assert langgraph_page.link("~t:[") is None  # not a key: no link, no error


def test_thread_page_errors_are_pages(lg_ledger, serve, tmp_path):
    path, _ = lg_ledger
    server: Server = serve(SQLiteEventStore(path))
    status, _, body = _get(server.url + PAGE + "?checkpoint=nope")
    assert status == 404 and "has no checkpoint &#39;nope&#39;" in body
    status, _, body = _get(server.url + "/lg/conv")
    assert status == 404 and "is not a LangGraph thread" in body
    with SQLiteEventStore(path) as store:
        LedgerSaver(store).delete_thread("alice")
    status, _, body = _get(server.url + PAGE)
    assert status == 404 and "has no checkpoints: it was erased" in body


def test_error_pages_do_not_echo_a_huge_query_back(lg_ledger, serve):
    # The checkpoint id comes from the URL: its error page used to repeat all of it.
    path, _ = lg_ledger
    server: Server = serve(SQLiteEventStore(path))
    huge = "c" * 20_000
    status, _, body = _get(server.url + PAGE + "?checkpoint=" + huge)
    assert status == 404 and "has no checkpoint &#39;ccc" in body
    assert "c" * 200 not in body
    status, _, body = _get(server.url + PAGE + "?checkpoint=nope&from=" + huge)
    assert status == 404 and "c" * 200 not in body


def test_a_tampered_checkpoint_is_refused_on_the_page(lg_ledger, serve):
    path, _ = lg_ledger
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET payload = replace(payload, 'checkpoint', 'checkpoinT')")
    server: Server = serve(SQLiteEventStore(path))
    status, _, body = _get(server.url + PAGE)
    # Check nothing the chain does not vouch for is shown.
    assert status == 400 and "Question" not in body


def test_a_long_thread_pages_its_steps(tmp_path, serve, monkeypatch):
    path = tmp_path / "long.db"
    tuples = _thread(path, turns=4)  # 12 checkpoints
    monkeypatch.setattr(langgraph_page, "STEPS_PAGE", 5)
    with SQLiteEventStore(path) as store:
        first = langgraph_page.thread_page(store, KEY)
        assert [s.checkpoint_id for s in first.steps] == [t.checkpoint["id"] for t in tuples[:5]]
        assert first.older == tuples[4].checkpoint["id"]
        second = langgraph_page.thread_page(store, KEY, before=first.older)
        assert [s.checkpoint_id for s in second.steps] == [t.checkpoint["id"] for t in tuples[5:10]]
        # Check the newest step of an older page still tells what it changed (its parent is
        # on the next page).
        assert second.steps[-1].changed
        last = langgraph_page.thread_page(store, KEY, before=tuples[9].checkpoint["id"])
        assert len(last.steps) == 2 and last.older is None
        # The selected checkpoint stays the newest while paging.
        assert last.selected.checkpoint_id == tuples[0].checkpoint["id"]


def test_a_user_reads_a_langgraph_thread_in_a_browser(lg_ledger, serve, browser):
    from selenium.webdriver.common.by import By

    path, tuples = lg_ledger
    server: Server = serve(SQLiteEventStore(path))
    driver: Any = browser
    driver.get(server.url + "/")
    driver.find_element(By.PARTIAL_LINK_TEXT, "alice").click()
    assert driver.find_element(By.ID, "thread").text == "LangGraph thread alice"
    said = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#conversation li.msg .text")]
    assert said[-2:] == ["Question 3", "Answer 3."] and len(said) == 6
    assert SCRIPT in said[2]  # shown as text, never run
    # The user opens the end of turn one, then asks what changed from it to the newest.
    first_turn = next(
        t for t in tuples if len(t.checkpoint["channel_values"]["messages"]) == 2
    ).checkpoint["id"]
    driver.find_element(By.LINK_TEXT, first_turn).click()
    said = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#conversation li.msg .text")]
    assert said == ["Question 1", "Answer 1."]
    newest = tuples[0].checkpoint["id"]
    driver.get(server.url + PAGE + f"?checkpoint={newest}")
    row = next(
        r for r in driver.find_elements(By.CSS_SELECTOR, "#steps tbody tr") if first_turn in r.text
    )
    row.find_element(By.CLASS_NAME, "diff-link").click()
    added = driver.find_element(By.ID, "diff-added").text
    assert "Question 2" in added and "Answer 3." in added and "Question 1" not in added
    assert driver.find_element(By.ID, "diff-dropped").text == "none"
