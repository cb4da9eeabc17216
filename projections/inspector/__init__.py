"""A read-only, local web inspector: step through a memory and see what the model saw, and why.

Optional: ``pip install 'chatledger[inspector]'`` (Starlette, Jinja2, uvicorn). Run it with
``chatledger serve --db chat.db``; :func:`serve` is what the command calls.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from eventlog.store import EventStore

__all__ = ["LOCALHOST", "serve"]

LOCALHOST = "127.0.0.1"
_log = logging.getLogger("chatledger.inspector")


def serve(
    store: EventStore,
    *,
    host: str = LOCALHOST,
    port: int = 8765,
    allowed_hosts: Iterable[str] = (),
) -> None:
    """Serve the inspector for ``store`` until interrupted.

    Args:
        store: The ledger to inspect (nothing is ever written to it).
        host: The address to bind; anything but 127.0.0.1 lets other machines read every
            conversation, so the command asks for it explicitly and warns.
        port: The TCP port.
        allowed_hosts: Host names requests may use besides ``host`` and ``localhost`` (the
            command's ``--allow-host``); any other Host is refused, so a page that rebinds
            its own name to this machine reads nothing.
    """
    import uvicorn

    from projections.inspector.web import create_app

    app = create_app(store, host=host, allowed_hosts=allowed_hosts)
    uvicorn.run(app, host=host, port=port, log_level="warning")
