"""What text may do on an inspector page: be read, never steer the page or the reader.

Message text and memory ids come from whoever talked to the model. Autoescaping keeps them
from being markup; two more things a string can do are handled here. Bidirectional control
characters reorder what the reader sees (an id ``admin\u202etxt.exe`` displays as another
one), so they are shown as visible code points, as are the other controls a browser drops or
draws as nothing (NUL, ESC, DEL, C1). And a URL becomes a link only when it is
http(s): ``javascript:`` or ``data:`` in an ``href`` runs or loads something on a click.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlsplit

from projections.display import BIDI_CONTROLS

__all__ = ["BIDI_CONTROLS", "link_target", "visible"]

# Bidi controls, and the controls a browser drops or draws as nothing (NUL vanishes from a
# page's text, so "alice\x00" would read as "alice"): all but tab and line breaks.
_UNSEEN = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{BIDI_CONTROLS}]")
_LINK_SCHEMES = frozenset({"http", "https"})


def _code_point(match: re.Match[str]) -> str:
    return f"<U+{ord(match.group()):04X}>"


def visible(value: Any) -> Any:
    """``value`` with every bidi control shown as ``<U+202E>``, and every other control but tab,
    line feed and carriage return as ``<U+0000>`` (Jinja's ``finalize``: it runs on
    every ``{{ ... }}`` of every template, so no field can be forgotten). Non-text passes."""
    if hasattr(value, "__html__"):
        # Already markup (only Jinja hands us that, so its markupsafe is there; views.py
        # imports this module without the extra): what is inserted must be escaped text.
        from markupsafe import Markup

        escaped = _UNSEEN.sub(lambda m: str(Markup.escape(_code_point(m))), str(value))
        return Markup(escaped)  # noqa: S704 - markup in, escaped text added

    if isinstance(value, str):
        return _UNSEEN.sub(_code_point, value)
    return value


def link_target(url: str) -> str | None:
    """The ``href`` for ``url`` when it is an http(s) URL with a host, else None (shown as
    text). Bidi controls in it are percent-encoded, so the link goes where it says."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if parts.scheme.lower() not in _LINK_SCHEMES or not parts.netloc:
        return None
    return _UNSEEN.sub(lambda m: quote(m.group()), url.strip())
