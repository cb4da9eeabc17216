"""Fixtures for the inspector: a ledger with a story, a live server, a headless Chromium."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eventlog import (
    AiMessage,
    EventStore,
    ImageContent,
    SQLiteEventStore,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from projections import MessageWindowChatMemory
from tests.conftest import IN_CI

pytest.importorskip("starlette", reason="the inspector extra is not installed")
uvicorn = pytest.importorskip("uvicorn", reason="the inspector extra is not installed")

from projections.inspector.web import create_app  # noqa: E402

SCRIPT = "<script>alert('xss')</script>"
IMG = '<img src=x onerror="alert(1)">'
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def story(store: EventStore) -> MessageWindowChatMemory:
    """A conversation with every reason to leave a window, tool calls, an image, and text
    that would run as script if it were not escaped."""
    memory = MessageWindowChatMemory("conv", max_messages=4, store=store)
    memory.add(SystemMessage("Be brief."))
    memory.add(UserMessage(f"What is 2+2? {SCRIPT}"))
    call = ToolExecutionRequest(id="call-1", name="calculator", arguments='{"a": 2, "b": 2}')
    memory.add(AiMessage(tool_execution_requests=[call]))
    memory.add(ToolExecutionResultMessage("call-1", "calculator", "4"))
    memory.add(AiMessage(f"2+2 is 4. {IMG}"))
    memory.add(
        UserMessage(
            contents=[
                TextContent("And this picture?"),
                ImageContent(url="https://example.org/cat.png"),
            ]
        )
    )
    memory.add(SystemMessage("Be verbose."))
    memory.add(AiMessage("A cat."))
    other = MessageWindowChatMemory("other/chat", max_messages=2, store=store)
    other.add(UserMessage("hello"))
    return memory


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path) as store:
        story(store)
    return path


class Server:
    """The inspector on a free port, in a thread of this process."""

    def __init__(self, store: EventStore, **options: Any) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        config = uvicorn.Config(
            create_app(store, **options), host="127.0.0.1", port=self.port, log_level="warning"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                msg = "the inspector did not start within 10 s"
                raise RuntimeError(msg)
            time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(store: EventStore, **options: Any) -> Server:
        servers.append(Server(store, **options))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def browser() -> Iterator[object]:
    """Headless Debian Chromium through chromedriver (never downloads a browser)."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        reason = (
            "Chromium and chromedriver are not installed (apt-get install chromium chromium-driver)"
        )
        if IN_CI:
            pytest.fail(f"{reason}; CI must run the browser tests")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    if os.geteuid() == 0:
        options.add_argument("--disable-dev-shm-usage")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
