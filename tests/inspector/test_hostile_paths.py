"""Memory ids and URLs an attacker chose, over HTTP: the page a link names is the memory it
names, and a path the inspector cannot use is a 4xx page, never a 500 and a traceback."""

from __future__ import annotations

import html
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from eventlog import SQLiteEventStore, UserMessage
from projections import MessageWindowChatMemory


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url) as response:  # noqa: S310 - our own local server
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture
def lookalikes(tmp_path: Path) -> Path:
    """Memory ``a/b`` and, planted beside it, a memory whose id spells a path to its event."""
    path = tmp_path / "lookalikes.db"
    with SQLiteEventStore(path) as store:
        MessageWindowChatMemory("a/b", max_messages=3, store=store).add(UserMessage("of a/b"))
        planted = MessageWindowChatMemory("a/b/e/1", max_messages=3, store=store)
        planted.add(UserMessage("of the planted memory"))
    return path


def test_an_id_that_spells_an_event_path_opens_its_own_memory(lookalikes, serve):
    server = serve(SQLiteEventStore(lookalikes))
    _, index = _get(server.url + "/")
    links = {
        html.unescape(text): html.unescape(href)
        for href, text in re.findall(r'class="memory-link" href="([^"]+)">([^<]+)<', index)
    }
    status, page = _get(server.url + links["a/b/e/1"])
    assert status == 200
    assert "of the planted memory" in page and "of a/b" not in page
    # Its events, and the other memory's event 1 by the path the template writes.
    status, page = _get(f"{server.url}{links['a/b/e/1']}/e/1")
    assert status == 200 and "of the planted memory" in page
    status, page = _get(f"{server.url}{links['a/b']}/e/1")
    assert status == 200 and "of a/b" in page and "planted" not in page


@pytest.mark.parametrize(
    "path",
    [
        "/m/a%2Fb/e/" + "9" * 5000,
        "/m/~t:" + "[" * 3000,
        "/m/~t:" + "[" * 3000 + "/e/1",
        "/lg/~t:" + "[" * 3000,
        "/search?q=x&m=~t:" + "[" * 3000,
    ],
    ids=["huge-event-seq", "deep-tuple-key", "deep-tuple-key-event", "deep-langgraph", "deep-m"],
)
def test_paths_it_cannot_use_are_4xx_pages(lookalikes, serve, path):
    server = serve(SQLiteEventStore(lookalikes))
    status, page = _get(server.url + path)
    assert 400 <= status < 500, (status, page[:300])
    assert 'id="error"' in page


def test_control_characters_in_ids_and_text_are_shown_not_dropped(tmp_path, serve):
    # A browser drops NUL from a page's text: "alice\x00" would read as "alice", another
    # memory. Like bidi controls, every control but tab and line breaks shows as a code point.
    path = tmp_path / "controls.db"
    with SQLiteEventStore(path) as store:
        MessageWindowChatMemory("alice", max_messages=3, store=store).add(UserMessage("real"))
        twin = MessageWindowChatMemory("alice\x00", max_messages=3, store=store)
        twin.add(UserMessage("pay \x00to\x1b[8m hidden\x7f\x85 now\tand\r\nthen"))
    server = serve(SQLiteEventStore(path))
    _, index = _get(server.url + "/")
    assert ">alice<U+0000></a>" in html.unescape(index)
    _, page = _get(server.url + "/m/" + urllib.parse.quote('~s:"alice\\u0000"', safe=""))
    text = html.unescape(page)
    assert "pay <U+0000>to<U+001B>[8m hidden<U+007F><U+0085> now\tand\r\nthen" in text
    for char in "\x00\x1b\x7f\x85":
        assert char not in page
