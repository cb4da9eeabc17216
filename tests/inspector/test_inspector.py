"""The inspector over HTTP and in a real browser: read-only, escaped, and what it shows at each
step is exactly ``as_of(seq)``."""

from __future__ import annotations

import sqlite3
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from eventlog import SQLiteEventStore, UserMessage
from projections import MessageWindowChatMemory, MessageWindowPolicy, what_if
from projections.inspector.views import show
from projections.inspector.web import CSP
from tests.conftest import require_pg
from tests.inspector.conftest import IMG, SCRIPT, Server, story

SHOTS = Path(__file__).resolve().parents[2] / ".inspector-shots"


def _get(url: str) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(url) as response:  # noqa: S310 - our own local server
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def _send(url: str, method: str) -> int:
    request = urllib.request.Request(url, data=b"x", method=method)  # noqa: S310
    try:
        with urllib.request.urlopen(request) as response:  # noqa: S310
            return int(response.status)
    except urllib.error.HTTPError as e:
        return e.code


# ---------------------------------------------------------------------------- over HTTP


def test_every_response_carries_a_strict_csp_and_nothing_writes(ledger, serve):
    store = SQLiteEventStore(ledger)
    server: Server = serve(store)
    before = ledger.read_bytes()
    for path in ["/", "/m/conv", "/m/conv?seq=3", "/m/conv/e/2", "/static/inspector.css", "/m/x"]:
        _, headers, _ = _get(server.url + path)
        assert headers["content-security-policy"] == CSP
        assert headers["x-content-type-options"] == "nosniff"
    assert "'unsafe-inline'" not in CSP
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for path in ["/", "/m/conv", "/m/conv/e/2"]:
            assert _send(server.url + path, method) == 405, (method, path)
    assert store.head("conv").seq == 8
    assert ledger.read_bytes() == before  # read-only: the file did not change


def test_serving_a_writable_store_writes_nothing_not_even_the_digest_cache(tmp_path, serve):
    # The header's digest used to save the ledger tree's blocks (one per 256 records) into the
    # file of a store opened for writing: serve() promises that nothing is written to it.
    path = tmp_path / "big.db"
    store = SQLiteEventStore(path)
    memory = MessageWindowChatMemory("conv", 10, store)
    memory.add([UserMessage(f"m{i}") for i in range(600)])
    server: Server = serve(store)
    status, _, body = _get(server.url + "/m/conv?seq=300")
    assert status == 200 and "600" in body
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM ledger_blocks").fetchone() == (0,)
    # The app's own digest still saves them (the cache is not lost, only not written by a reader).
    assert store.digest().size == 600
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM ledger_blocks").fetchone() == (2,)


def test_message_text_is_escaped_in_the_html(ledger, serve):
    server = serve(SQLiteEventStore(ledger))
    for path in ["/m/conv?seq=2", "/m/conv?seq=5", "/m/conv/e/2", "/m/conv/e/5"]:
        _, _, body = _get(server.url + path)
        assert SCRIPT not in body
        assert IMG not in body
        assert "&lt;script&gt;" in body or "&lt;img" in body
    _, _, body = _get(server.url + "/m/conv?seq=6")
    # An image in a message is a link, never loaded by the page.
    assert 'href="https://example.org/cat.png"' in body
    assert 'src="https://example.org' not in body


def test_errors_are_pages_not_tracebacks(ledger, serve):
    server = serve(SQLiteEventStore(ledger))
    status, _, body = _get(server.url + "/m/nope")
    assert status == 404
    assert "no memory &#39;nope&#39; in this ledger" in body
    status, _, body = _get(server.url + "/m/conv?seq=99")
    assert status == 400
    assert "seq 99 is outside this memory&#39;s history (1..8)" in body
    status, _, body = _get(server.url + "/m/conv?seq=2&policy=bogus")
    assert status == 400
    assert "is not a policy" in body


def test_a_broken_chain_is_shown_in_red_at_its_seq(ledger, serve):
    with sqlite3.connect(ledger) as conn:
        conn.execute("UPDATE events SET payload = replace(payload, '4', '5') WHERE seq = 4")
    server = serve(SQLiteEventStore(ledger))
    _, _, listing = _get(server.url + "/")
    assert "broken at seq 4" in listing
    status, _, body = _get(server.url + "/m/conv?seq=2")
    assert status == 200
    assert "chain broken at seq 4" in body
    assert 'class=" broken"' in body  # the timeline rows from seq 4 on are red


def test_the_inspector_serves_a_postgres_ledger(serve):
    require_pg()
    from eventlog.postgres import PostgresEventStore
    from tests.conftest import PG_DSN

    # A fresh name per run: pytest's temporary directory names repeat across test runs.
    schema = f"insp_{uuid.uuid4().hex[:12]}"
    store = PostgresEventStore(PG_DSN, schema=schema)
    try:
        memory = story(store)
        server = serve(store)
        _, _, body = _get(server.url + "/m/conv?seq=5")
        assert "chain verified (8 events)" in body
        assert [m.text for m in memory.as_of(seq=5)][-1].startswith("2+2 is 4.")
        assert "2+2 is 4." in body
    finally:
        with store._pool.connection() as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        store.close()


@pytest.mark.slow
def test_stepping_a_100k_event_memory_stays_under_100_ms(tmp_path, serve):
    store = SQLiteEventStore(tmp_path / "big.db")
    memory = MessageWindowChatMemory("big", max_messages=20, store=store)
    for start in range(0, 100_000, 5_000):
        memory.add([UserMessage(f"message {i}") for i in range(start, start + 5_000)])
    server = serve(store)
    _get(server.url + "/m/big?seq=50000")  # the first visit verifies the memory once
    timings = []
    for seq in (1, 2, 49_999, 50_000, 50_001, 99_999, 100_000):
        status, headers, body = _get(f"{server.url}/m/big?seq={seq}")
        assert status == 200
        assert f"seq {seq} of 100000" in body
        timings.append(float(headers["server-timing"].split("dur=")[1]))
    assert max(timings) <= 100, timings


# ---------------------------------------------------------------------------- in a browser


def _window_texts(driver: Any, list_id: str = "window") -> list[str]:
    from selenium.webdriver.common.by import By

    items = driver.find_elements(By.CSS_SELECTOR, f"#{list_id} > li.msg")
    return [item.find_element(By.CSS_SELECTOR, ".msg-head .role").text.lower() for item in items]


def _expected_roles(messages: list[Any]) -> list[str]:
    return [show(m).role for m in messages]


def _shoot(driver: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    driver.save_screenshot(str(path))
    SHOTS.mkdir(exist_ok=True)  # a copy outside tmp, to look at (ignored by git)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))
    return path


def test_a_user_steps_through_a_conversation_in_a_browser(ledger, serve, browser, tmp_path):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    store = SQLiteEventStore(ledger)
    memory = MessageWindowChatMemory("conv", max_messages=4, store=store)
    server = serve(store)
    driver: Any = browser
    driver.get(server.url + "/")
    rows = driver.find_elements(By.CSS_SELECTOR, "#memories tbody tr")
    assert [r.find_element(By.CSS_SELECTOR, "a").text for r in rows] == ["other/chat", "conv"]
    assert "verified" in rows[1].text
    assert _shoot(driver, tmp_path, "1-memories").stat().st_size > 10_000
    driver.find_element(By.LINK_TEXT, "conv").click()
    assert driver.find_element(By.ID, "at").text == "seq 8 of 8"

    def check(seq: int) -> None:
        assert driver.find_element(By.ID, "at").text == f"seq {seq} of 8"
        expected = memory.as_of(seq=seq)
        assert _window_texts(driver) == _expected_roles(expected)
        shown = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#window > li.msg .text")]
        wanted = [show(m).text for m in expected if show(m).text]
        assert shown == wanted

    check(8)
    # The arrow keys step back; each step shows exactly as_of(seq).
    for seq in (7, 6, 5):
        driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_LEFT)
        check(seq)
    left = driver.find_element(By.ID, "left").text
    assert "evicted (window full)" in left  # seq 5 evicted the first question
    _shoot(driver, tmp_path, "2-step-5")
    driver.find_element(By.ID, "next").click()
    check(6)
    # The scrubber jumps when it is released.
    driver.execute_script(
        "const r = document.getElementById('seq'); r.value = 3;"
        "r.dispatchEvent(new Event('change'));"
    )
    check(3)
    # The XSS texts are shown as text, and no script ran.
    driver.get(server.url + "/m/conv?seq=5")
    window = driver.find_element(By.ID, "window").text
    assert "<img src=x onerror" in window
    assert "2+2 is 4." in window
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018 - raises when no alert is open
    assert driver.execute_script("return document.querySelectorAll('#window img').length") == 0
    driver.get(server.url + "/m/conv?seq=2")
    assert SCRIPT in driver.find_element(By.ID, "window").text
    # Diff between two steps, and what-if side by side.
    driver.get(server.url + "/m/conv?seq=8&from=4")
    diff_text = driver.find_element(By.ID, "diff").text
    assert "system message replaced" in diff_text
    assert "orphan (its tool call left)" in diff_text
    driver.get(server.url + "/m/conv?seq=8&policy=messages:2")
    wanted = what_if(store, "conv", MessageWindowPolicy(2), seq=8)
    assert _window_texts(driver, "what-if") == _expected_roles(wanted)
    _shoot(driver, tmp_path, "3-what-if")
    driver.get(server.url + "/m/conv/e/3")
    assert "calculator" in driver.find_element(By.ID, "messages").text
    assert '"a": 2' in driver.find_element(By.ID, "messages").text
    _shoot(driver, tmp_path, "4-event")
