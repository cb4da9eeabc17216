"""Finding things in the inspector: message text search within a memory and across memories
(bounded, read-only, escaped, only verified text), a jump to a seq or a time, a sortable and
paged memory list, and what-if views that mark what differs - over HTTP and in Chromium."""

from __future__ import annotations

import contextlib
import sqlite3
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from eventlog import SQLiteEventStore, UserMessage
from projections import MessageWindowChatMemory, MessageWindowPolicy, what_if
from projections.inspector import search, views
from tests.inspector.conftest import SCRIPT, Server

SHOTS = Path(__file__).resolve().parents[2] / ".inspector-shots"


def _get(url: str) -> tuple[int, str, str]:
    """Status, final URL (after redirects) and body."""
    try:
        with urllib.request.urlopen(url) as response:  # noqa: S310 - our own local server
            return response.status, response.url, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, url, e.read().decode()


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


# ---------------------------------------------------------------------------- search


def test_search_across_memories_finds_message_text_case_insensitively(ledger, serve):
    server: Server = serve(SQLiteEventStore(ledger))
    before = ledger.read_bytes()
    status, _, body = _get(server.url + "/search?q=HELLO")
    assert status == 200
    assert f'href="/m/{_q("other/chat")}?seq=1"' in body
    assert "<mark>hello</mark>" in body
    assert "1 hit in 9 events read" in body
    status, _, body = _get(server.url + "/search?q=" + _q("2+2"))
    assert [seq for seq in (2, 5) if f'href="/m/conv?seq={seq}"' in body] == [2, 5]
    # The hit's text is escaped like every message text.
    assert SCRIPT not in body
    assert "&lt;script&gt;" in body
    assert ledger.read_bytes() == before  # read-only


def test_search_within_one_memory(ledger, serve):
    store = SQLiteEventStore(ledger)
    MessageWindowChatMemory("third", max_messages=2, store=store).add(
        UserMessage("Be brief, please.")
    )
    server = serve(store)
    _, _, everywhere = _get(server.url + "/search?q=be+brief")
    assert "/m/third?seq=1" in everywhere
    assert "/m/conv?seq=1" in everywhere
    _, _, within = _get(server.url + "/search?m=conv&q=be+brief")
    assert "/m/conv?seq=1" in within
    assert "/m/third" not in within
    assert "of conv" in within


def test_a_search_reads_a_bounded_stretch_and_links_to_the_next(ledger, serve, monkeypatch):
    monkeypatch.setattr(search, "SCAN_MAX", 3)
    server = serve(SQLiteEventStore(ledger))
    _, _, first = _get(server.url + "/search?m=conv&q=be+")
    assert "/m/conv?seq=1" in first  # "Be brief." at seq 1
    assert "/m/conv?seq=7" not in first
    assert 'href="/search?q=be%20&amp;m=conv&amp;after=3"' in first
    _, _, on = _get(server.url + "/search?q=be%20&m=conv&after=6")
    assert "/m/conv?seq=7" in on  # "Be verbose."
    monkeypatch.setattr(search, "HITS_MAX", 1)
    _, _, capped = _get(server.url + "/search?q=" + _q("2+2") + "&m=conv")
    assert "/m/conv?seq=2" in capped
    assert "/m/conv?seq=5" not in capped
    assert "after=2" in capped


def test_a_hit_in_a_record_that_does_not_verify_shows_no_text(ledger, serve):
    with contextlib.closing(sqlite3.connect(ledger, isolation_level=None)) as conn:
        conn.execute("UPDATE events SET payload = replace(payload, '2+2 is 4', '2+2 is 5')")
    server = serve(SQLiteEventStore(ledger))
    _, _, body = _get(server.url + "/search?q=" + _q("2+2 is"))
    assert "/m/conv?seq=5" in body
    assert "(not shown: the record does not verify)" in body
    assert "2+2 is 5" not in body


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("q=", "search for what?"),
        ("q=" + "x" * 201, "use at most 200"),
        ("q=a&after=-1", "search after -1: use 0 or more"),
    ],
)
def test_bad_searches_are_error_pages(ledger, serve, query, message):
    server = serve(SQLiteEventStore(ledger))
    status, _, body = _get(server.url + "/search?" + query)
    assert status == 400
    assert message in body


# ---------------------------------------------------------------------------- jump


def test_jump_to_a_seq_or_a_time(ledger, serve):
    store = SQLiteEventStore(ledger)
    server = serve(store)
    status, url, body = _get(server.url + "/jump?m=conv&to=3")
    assert (status, url) == (200, server.url + "/m/conv?seq=3")
    assert 'id="at">seq 3 of 8' in body
    fourth = store.read("conv")[3].recorded_at
    _, url, _ = _get(server.url + "/jump?m=conv&to=" + _q(fourth.isoformat()))
    at = store.seq_at("conv", fourth)
    assert at is not None
    assert at >= 4
    assert url == server.url + f"/m/conv?seq={at}"
    _, url, _ = _get(server.url + f"/jump?m={_q('other/chat')}&to=1")
    assert url == server.url + f"/m/{_q('other/chat')}?seq=1"


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [
        ("m=conv&to=99", 400, "seq 99 is outside this memory"),
        ("m=conv&to=yesterday", 400, "write a seq (like 12) or an ISO 8601 time"),
        ("m=conv&to=2000-01-01", 400, "no event of this memory was recorded at or before"),
        ("m=nope&to=1", 404, "no such memory"),
    ],
)
def test_bad_jumps_are_error_pages(ledger, serve, query, status, message):
    server = serve(SQLiteEventStore(ledger))
    got, _, body = _get(server.url + "/jump?" + query)
    assert got == status
    assert message in body


# ---------------------------------------------------------------------------- the memory list


def _listed(body: str) -> list[str]:
    return [
        urllib.parse.unquote(part.split('"')[0])
        for part in body.split('class="memory-link" href="/m/')[1:]
    ]


def test_the_memory_list_sorts_by_activity_size_and_id(ledger, serve):
    store = SQLiteEventStore(ledger)
    memory = MessageWindowChatMemory("a-first-by-id", max_messages=2, store=store)
    memory.add(UserMessage("x"))
    memory.add(UserMessage("y"))
    server = serve(store)
    assert _listed(_get(server.url + "/")[2]) == ["a-first-by-id", "other/chat", "conv"]
    assert _listed(_get(server.url + "/?sort=activity")[2]) == [
        "a-first-by-id",
        "other/chat",
        "conv",
    ]
    assert _listed(_get(server.url + "/?sort=size")[2]) == ["conv", "a-first-by-id", "other/chat"]
    assert _listed(_get(server.url + "/?sort=id")[2]) == ["a-first-by-id", "conv", "other/chat"]
    status, _, body = _get(server.url + "/?sort=colour")
    assert status == 400
    assert "use one of activity, size, id" in body


def test_the_sorted_list_pages_keep_their_order(ledger, serve, monkeypatch):
    monkeypatch.setattr(views, "INDEX_PAGE", 1)
    server = serve(SQLiteEventStore(ledger))
    _, _, first = _get(server.url + "/?sort=id")
    assert _listed(first) == ["conv"]
    assert 'href="/?q=&amp;sort=id&amp;offset=1"' in first
    assert _listed(_get(server.url + "/?q=&sort=id&offset=1")[2]) == ["other/chat"]


# ---------------------------------------------------------------------------- what-if


def test_a_what_if_marks_what_only_it_keeps_and_what_it_drops(ledger, serve):
    store = SQLiteEventStore(ledger)
    server = serve(store)
    _, _, body = _get(server.url + "/m/conv?seq=8&policy=messages:2")
    recorded = MessageWindowChatMemory("conv", max_messages=4, store=store).as_of(seq=8)
    other = what_if(store, "conv", MessageWindowPolicy(2), seq=8)
    dropped = [m for m in recorded if m not in other]
    only = [m for m in other if m not in recorded]
    assert dropped  # a window of 2 drops some of the recorded 4
    assert (
        f"{len(only)} kept only under this policy (solid outline) · "
        f"{len(dropped)} of the recorded dropped by it" in body
    )
    recorded_part = body.split('id="recorded"')[1].split("</ol>")[0]
    assert recorded_part.count("dropped-whatif") == len(dropped)
    # A larger window keeps what the recorded one dropped.
    _, _, bigger = _get(server.url + "/m/conv?seq=8&policy=messages:20")
    what_if_part = bigger.split('id="what-if"')[1].split("</ol>")[0]
    larger = what_if(store, "conv", MessageWindowPolicy(20), seq=8)
    assert what_if_part.count("only-whatif") == len([m for m in larger if m not in recorded]) > 0
    assert "kept only under this policy" in what_if_part


# ---------------------------------------------------------------------------- in a browser


def _shoot(driver: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    driver.save_screenshot(str(path))
    SHOTS.mkdir(exist_ok=True)  # a copy outside tmp, to look at (ignored by git)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))
    return path


def _arrive(driver: Any, url_part: str) -> None:
    """Wait until the page whose address holds ``url_part`` is loaded: submit() and click()
    return before the next page is there."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30).until(
        lambda d: (
            url_part in d.current_url
            and d.execute_script("return document.readyState") == "complete"
        )
    )


def test_a_user_finds_a_message_jumps_and_sorts_in_a_browser(ledger, serve, browser, tmp_path):
    from selenium.webdriver.common.by import By

    server = serve(SQLiteEventStore(ledger))
    driver: Any = browser
    driver.get(server.url + "/")
    # Search every memory from the list page, then follow the hit to its moment.
    box = driver.find_element(By.CSS_SELECTOR, "#search-all input[name=q]")
    box.send_keys("verbose")
    box.submit()
    _arrive(driver, "/search?q=verbose")
    hits = driver.find_elements(By.CSS_SELECTOR, "#hits tbody tr.hit")
    assert len(hits) == 1
    assert hits[0].find_element(By.TAG_NAME, "mark").text == "verbose"
    assert _shoot(driver, tmp_path, "5-search").stat().st_size > 10_000
    hits[0].find_element(By.CSS_SELECTOR, "a.hit-link").click()
    _arrive(driver, "/m/conv?seq=7")
    assert driver.find_element(By.ID, "at").text == "seq 7 of 8"
    # Jump to a seq from the memory page.
    jump = driver.find_element(By.CSS_SELECTOR, "#jump input[name=to]")
    jump.send_keys("3")
    jump.submit()
    _arrive(driver, "/m/conv?seq=3")
    assert driver.find_element(By.ID, "at").text == "seq 3 of 8"
    # Find within this memory.
    find = driver.find_element(By.CSS_SELECTOR, "#find input[name=q]")
    find.send_keys("cat")
    find.submit()
    _arrive(driver, "/search?m=conv")
    assert "of conv" in driver.find_element(By.ID, "search-scope").text
    assert [h.text for h in driver.find_elements(By.CSS_SELECTOR, "#hits a.hit-link")] == ["8"]
    # Sort the list by id, then by size.
    driver.get(server.url + "/")
    driver.find_element(By.ID, "sort-id").click()
    _arrive(driver, "sort=id")
    links = [a.text for a in driver.find_elements(By.CSS_SELECTOR, "#memories a.memory-link")]
    assert links == ["conv", "other/chat"]
    assert driver.find_element(By.ID, "sorted-by").text.startswith("memory")
    driver.find_element(By.ID, "sort-size").click()
    _arrive(driver, "sort=size")
    assert driver.find_element(By.ID, "sorted-by").text.startswith("events")
    # A what-if marks what differs.
    driver.get(server.url + "/m/conv?seq=8&policy=messages:2")
    dropped = driver.find_elements(By.CSS_SELECTOR, "#recorded > li.dropped-whatif")
    assert dropped
    style = driver.execute_script("return getComputedStyle(arguments[0]).outlineStyle", dropped[0])
    assert style == "dashed"
    _shoot(driver, tmp_path, "6-what-if-marked")


def test_search_and_jump_on_postgresql(serve):
    from tests.conftest import require_pg

    require_pg()
    from eventlog.postgres import PostgresEventStore
    from tests.conftest import PG_DSN
    from tests.inspector.conftest import story

    # A fresh name per run: pytest's temporary directory names repeat across test runs.
    schema = f"find_{uuid.uuid4().hex[:12]}"
    store = PostgresEventStore(PG_DSN, schema=schema)
    try:
        story(store)
        server = serve(store)
        _, _, body = _get(server.url + "/search?q=VERBOSE")
        assert "/m/conv?seq=7" in body
        assert "<mark>verbose</mark>" in body
        _, _, within = _get(server.url + f"/search?m={_q('other/chat')}&q=hello")
        assert f"/m/{_q('other/chat')}?seq=1" in within
        _, url, _ = _get(server.url + "/jump?m=conv&to=6")
        assert url == server.url + "/m/conv?seq=6"
        assert _listed(_get(server.url + "/?sort=size")[2]) == ["conv", "other/chat"]
    finally:
        with store._pool.connection() as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        store.close()
