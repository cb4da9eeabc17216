"""Only requests addressed to this machine's inspector are answered: the DNS rebinding guard.

A web page on ``evil.example`` can make its name resolve to 127.0.0.1 after the page loaded;
the browser then sends the page's requests to the inspector as same-origin, with
``Host: evil.example``. Answering only Host names the operator meant (the bound address,
``localhost``, and names given with ``--allow-host``) leaves such a page nothing to read. An IP
literal cannot be rebound, so when the inspector listens on every address (0.0.0.0, ::) any
IP literal is accepted too.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HostGuard", "host_name"]

_WILDCARDS = frozenset({"", "0.0.0.0", "::"})  # noqa: S104 - names of the bind, not a bind


def host_name(header: str) -> str:
    """The name in a Host header, without port or IPv6 brackets, lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    name, colon, port = header.rpartition(":")
    return name if colon and ":" not in name and port.isdigit() else header


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostGuard:
    """Answers 421 Misdirected Request to a request whose Host is not allowed.

    Args:
        app: The app to guard.
        bound: The address the server listens on.
        allowed: More names to accept (``--allow-host``), e.g. the machine's name.
    """

    def __init__(self, app: ASGIApp, *, bound: str, allowed: Iterable[str] = ()) -> None:
        self.app = app
        self.bound = host_name(bound)
        self.names = frozenset({self.bound, "localhost", *(host_name(a) for a in allowed)})
        self.any_ip = self.bound in _WILDCARDS

    def allows(self, header: str | None) -> bool:
        """Whether a request with this Host header is answered."""
        if not header:
            return False
        name = host_name(header)
        return name in self.names or (self.any_ip and _is_ip(name))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            header = Headers(scope=scope).get("host")
            if not self.allows(header):
                shown = "none" if header is None else repr(header[:100])
                msg = (
                    f"this inspector does not answer requests for host {shown}: it answers "
                    f"{', '.join(sorted(self.names))} (a page that rebinds its own name to this "
                    "machine is refused here); to reach it under another name, restart it with "
                    "--allow-host NAME\n"
                )
                await PlainTextResponse(msg, status_code=421)(scope, receive, send)
                return
        await self.app(scope, receive, send)
