"""The inspector's web app: Starlette routes over :mod:`projections.inspector.views`.

Read-only by construction: every route is GET (Starlette answers any other method with 405),
and no route calls a store method that writes. Every page is rendered on the server by Jinja2
with autoescaping on, so message text - which an attacker may have written - is always text,
never markup; the Content-Security-Policy forbids inline scripts and every origin but our own,
and the one script and stylesheet ship in the package (no CDN: it works offline).

Local means local: requests for any Host but the bound address, ``localhost`` and the names
allowed are refused (:mod:`projections.inspector.hosts`), and every page is made on a worker
thread of its own (Starlette's thread pool), so a page that takes a second never holds up
another - the store's own worker would run them one after the other.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from eventlog.errors import EventLogError
from eventlog.store import EventStore
from projections.inspector import LOCALHOST, calls_page, langgraph_page, search, views
from projections.inspector.hosts import HostGuard
from projections.inspector.text import visible

__all__ = ["CSP", "create_app"]

_HERE = Path(__file__).parent

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""Only our own script and stylesheet run; images in messages are links, never loaded."""

_WHOLE = re.compile(r"-?[0-9]{1,18}").fullmatch
_MESSAGE_MAX = 1000  # characters of an error message an error page shows

_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


class _SecurityHeaders:
    """Adds the security headers to every response, static files and errors included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app(  # noqa: PLR0915 - one small closure per route, all over the one store
    store: EventStore, *, host: str = LOCALHOST, allowed_hosts: Iterable[str] = ()
) -> ASGIApp:
    """The inspector for ``store``: an ASGI app (serve it with uvicorn).

    Args:
        store: The ledger to inspect (nothing is ever written to it).
        host: The address the server is bound to: requests must name it, or ``localhost``.
        allowed_hosts: Other names requests may use (``--allow-host``).
    """
    env = Environment(
        loader=FileSystemLoader(_HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=visible,  # every {{ }} of every template: bidi controls shown, never obeyed
    )
    # Ids go into URLs quoted whole, so an id's "?", "#" or "/" stays part of the path.
    env.filters["q"] = lambda text: quote(str(text), safe="")
    env.globals.update(SHOWN_MAX=views.SHOWN_MAX, DIFF_PAGE=views.DIFF_PAGE)
    env.globals.update(SCAN_MAX=search.SCAN_MAX, HITS_MAX=search.HITS_MAX)

    def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**context), status_code=status)

    def failed(status: int, error: BaseException) -> HTMLResponse:
        # Messages may repeat what the URL said (an id, a checkpoint): cut, so a page never
        # echoes a megabyte back, whatever the message's own author forgot to cut.
        text = str(error)
        if len(text) > _MESSAGE_MAX:
            text = text[: _MESSAGE_MAX - 3] + "..."
        return page("error.html", status, message=text)

    async def index(request: Request) -> Response:
        needle = request.query_params.get("q", "")
        order = request.query_params.get("sort", "activity")
        try:
            offset = _int(request.query_params.get("offset"), "list offset") or 0
            listing = await run_in_threadpool(views.memory_rows, store, needle, offset, sort=order)
        except (ValueError, EventLogError) as e:
            return failed(400, e)
        return page("index.html", page=listing, q=needle, sort=order)

    async def memory_or_event(request: Request) -> Response:
        key, seq = _memory_path(request)
        if seq is None:
            return await memory(request, key)
        return await event(key, seq)

    async def memory(request: Request, key: str) -> Response:
        thread = langgraph_page.link(key)
        if thread is not None:
            # A LangGraph thread records checkpoints, not windows: its own page shows them.
            return RedirectResponse(thread, status_code=307)
        params = request.query_params
        started = time.perf_counter()
        try:
            view = await run_in_threadpool(
                views.step_view,
                store,
                key,
                _int(params.get("seq"), "seq"),
                policy=params.get("policy", ""),
                diff_from=_int(params.get("from"), "diff from seq"),
                part=_int(params.get("part"), "what-if page") or 0,
            )
            call = await run_in_threadpool(calls_page.call_view, store, key, view.seq)
        except LookupError as e:
            return failed(404, e)
        except (ValueError, EventLogError) as e:
            return failed(400, e)
        elapsed = (time.perf_counter() - started) * 1000
        response = page("memory.html", v=view, call=call, elapsed=elapsed)
        response.headers["server-timing"] = f"step;dur={elapsed:.1f}"
        return response

    async def event(key: str, seq: str) -> Response:
        try:
            detail = await run_in_threadpool(
                views.event_detail, store, key, _int(seq, "event seq") or 0
            )
        except LookupError as e:
            return failed(404, e)
        except (ValueError, EventLogError) as e:
            return failed(400, e)
        return page("event.html", e=detail)

    async def find(request: Request) -> Response:
        params = request.query_params
        key = params.get("m") or None
        try:
            after = _int(params.get("after"), "search start") or 0
            found = await run_in_threadpool(
                search.search, store, params.get("q", ""), key=key, after=after
            )
            label = None if key is None else views.memory_label(key)
        except (ValueError, EventLogError) as e:
            return failed(400, e)
        return page("search.html", s=found, label=label)

    async def jump(request: Request) -> Response:
        key = request.query_params.get("m", "")
        try:
            seq = await run_in_threadpool(
                search.jump_seq, store, key, request.query_params.get("to", "")
            )
        except LookupError as e:
            return failed(404, e)
        except (ValueError, EventLogError) as e:
            return failed(400, e)
        return RedirectResponse(f"/m/{quote(key, safe='')}?seq={seq}", status_code=303)

    async def langgraph(request: Request) -> Response:
        key, params = request.path_params["key"], request.query_params
        try:
            shown = await run_in_threadpool(
                langgraph_page.thread_page,
                store,
                key,
                params.get("checkpoint") or None,
                diff_from=params.get("from") or None,
                before=params.get("before") or None,
            )
        except LookupError as e:
            return failed(404, e)
        except (ValueError, EventLogError, ModuleNotFoundError) as e:
            return failed(400, e)
        return page("langgraph.html", p=shown)

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/search", find),
            Route("/jump", jump),
            Route("/lg/{key:path}", langgraph),
            Route("/m/{key:path}", memory_or_event),
            Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
        ]
    )
    return _SecurityHeaders(HostGuard(app, bound=host, allowed=allowed_hosts))


_EVENT_PATH = re.compile(r"(.*)/e/([0-9]+)", re.DOTALL).fullmatch


def _memory_path(request: Request) -> tuple[str, str | None]:
    """The memory key and event seq (None: the memory's page) of a ``/m/KEY[/e/SEQ]`` path.

    Split on the path as sent, before percent-decoding: the templates quote an id whole, so
    an id's own ``/`` arrives as ``%2F`` and only a real ``/e/`` names an event. The decoded
    path would give a memory planted as ``a/b/e/1`` the page of event 1 of ``a/b``.
    """
    raw = request.scope.get("raw_path")
    sent = raw.decode("latin-1") if isinstance(raw, bytes) else ""
    if not sent.startswith("/m/"):  # no raw path, or "/m/" itself was encoded: as decoded
        sent = "/m/" + quote(request.path_params["key"], safe="/")
    found = _EVENT_PATH(sent, 3)
    if found is None:
        return unquote(sent[3:]), None
    return unquote(found.group(1)), found.group(2)


def _int(text: str | None, what: str) -> int | None:
    if text is None or text == "":
        return None
    # Bounded before int(): its time grows with the square of the digits.
    if not _WHOLE(text):
        msg = f"{what} {text[:40]!r} is not a whole number; use one, like 12"
        raise ValueError(msg)
    return int(text)
