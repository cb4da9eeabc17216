"""What text can do to a page, checked in a real browser: a URL that is not http(s) is never a
link, and bidi controls in ids and text are shown as code points, never obeyed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eventlog import ImageContent, SQLiteEventStore, TextContent, UserMessage
from projections import MessageWindowChatMemory
from projections.inspector.text import BIDI_CONTROLS, link_target, visible

RLO = "\u202e"
SPOOF_ID = f"invoice{RLO}fdp.exe"  # displays as "invoiceexe.pdf" when obeyed
JS_URL = "javascript:alert(document.domain)"


@pytest.fixture
def hostile(tmp_path: Path) -> SQLiteEventStore:
    store = SQLiteEventStore(tmp_path / "hostile.db")
    memory = MessageWindowChatMemory(SPOOF_ID, max_messages=5, store=store)
    memory.add(
        UserMessage(
            contents=[
                TextContent(f"pay to {RLO}321 tnuocca\u2066 isolated\u2069 \u200fmark"),
                ImageContent(url=JS_URL),
                ImageContent(url="data:text/html,<script>alert(1)</script>"),
                ImageContent(url=f"https://example.org/{RLO}cat.png"),
            ]
        )
    )
    return store


def test_every_bidi_control_is_made_visible_and_markup_stays_escaped():
    from markupsafe import Markup

    for char in BIDI_CONTROLS:
        assert visible(f"a{char}b") == f"a<U+{ord(char):04X}>b"
    assert visible(Markup("<b>\u202e</b>")) == Markup("<b>&lt;U+202E&gt;</b>")
    assert visible(3) == 3
    assert link_target(JS_URL) is None
    assert link_target(" JavaScript:alert(1)") is None
    assert link_target("https:no-host") is None
    assert link_target("http://[bad") is None
    assert link_target("HTTPS://example.org/a") == "HTTPS://example.org/a"
    assert link_target(f"https://example.org/{RLO}") == "https://example.org/%E2%80%AE"


def test_only_http_links_and_no_raw_bidi_reach_the_browser(hostile, serve, browser):
    from urllib.parse import quote

    from selenium.webdriver.common.by import By

    server = serve(hostile)
    driver: Any = browser
    pages = ["/", f"/m/{quote(SPOOF_ID, safe='')}?seq=1", f"/m/{quote(SPOOF_ID, safe='')}/e/1"]
    for path in pages:
        driver.get(server.url + path)
        text = driver.find_element(By.TAG_NAME, "body").text
        title = driver.title
        # Check no bidi control reaches the page raw, in the text or the title...
        assert not any(char in text + title for char in BIDI_CONTROLS), path
        # ...and the id shows with its control as a code point
        assert "invoice<U+202E>fdp.exe" in text, path
    # Check the message text shows each control, and the links are only the https one
    for path in pages[1:]:
        driver.get(server.url + path)
        text = driver.find_element(By.TAG_NAME, "body").text
        assert "pay to <U+202E>321 tnuocca<U+2066> isolated<U+2069> <U+200F>mark" in text
        hrefs = driver.execute_script(
            "return [...document.querySelectorAll('.image a')].map(a => a.getAttribute('href'))"
        )
        assert hrefs, path
        assert set(hrefs) == {"https://example.org/%E2%80%AEcat.png"}, path
        assert (
            driver.execute_script(
                'return document.querySelectorAll(\'a[href^="javascript:" i], a[href^="data:" i]\')'
                ".length"
            )
            == 0
        )
        # The other URLs are shown as text, to be read, not followed
        assert JS_URL in text
        assert "data:text/html,<script>alert(1)</script>" in text
