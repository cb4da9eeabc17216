"""The inspector's web app: Starlette routes over :mod:`projections.inspector.views`.

Read-only by construction: every route is GET (Starlette answers any other method with 405),
and no route calls a store method that writes. Every page is rendered on the server by Jinja2
with autoescaping on, so message text - which an attacker may have written - is always text,
never markup; the Content-Security-Policy forbids inline scripts and every origin but our own,
and the one script and stylesheet ship in the package (no CDN: it works offline).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from eventlog.aio import off_loop
from eventlog.errors import EventLogError
from eventlog.store import EventStore
from projections.inspector import views

__all__ = ["CSP", "create_app"]

_HERE = Path(__file__).parent

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""Only our own script and stylesheet run; images in messages are links, never loaded."""

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


def create_app(store: EventStore) -> ASGIApp:
    """The inspector for ``store``: an ASGI app (serve it with uvicorn)."""
    env = Environment(
        loader=FileSystemLoader(_HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    # Ids go into URLs quoted whole, so an id's "?", "#" or "/" stays part of the path.
    env.filters["q"] = lambda text: quote(str(text), safe="")
    cache = views.VerifyCache(store)

    def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**context), status_code=status)

    async def index(request: Request) -> Response:
        needle = request.query_params.get("q", "")
        rows = await off_loop(store, views.memory_rows, store, cache, needle)
        return page("index.html", rows=rows, q=needle)

    async def memory(request: Request) -> Response:
        key = request.path_params["key"]
        started = time.perf_counter()
        try:
            seq = _int(request.query_params.get("seq"))
            diff_from = _int(request.query_params.get("from"))
            view = await off_loop(
                store,
                views.step_view,
                store,
                cache,
                key,
                seq,
                policy=request.query_params.get("policy", ""),
                diff_from=diff_from,
            )
        except LookupError as e:
            return page("error.html", 404, message=str(e))
        except (ValueError, EventLogError) as e:
            return page("error.html", 400, message=str(e))
        elapsed = (time.perf_counter() - started) * 1000
        response = page("memory.html", v=view, elapsed=elapsed)
        response.headers["server-timing"] = f"step;dur={elapsed:.1f}"
        return response

    async def event(request: Request) -> Response:
        key = request.path_params["key"]
        try:
            detail = await off_loop(
                store, views.event_detail, store, key, int(request.path_params["seq"])
            )
        except LookupError as e:
            return page("error.html", 404, message=str(e))
        except (ValueError, EventLogError) as e:
            return page("error.html", 400, message=str(e))
        return page("event.html", e=detail)

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/m/{key:path}/e/{seq:int}", event),
            Route("/m/{key:path}", memory),
            Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
        ]
    )
    return _SecurityHeaders(app)


def _int(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        msg = f"{text!r} is not a seq; use a whole number"
        raise ValueError(msg) from None
