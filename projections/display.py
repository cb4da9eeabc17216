"""What text from a chat may do when it is shown: be read, never steer the display.

Message texts and memory ids come from whoever talked to the model, and both front ends show
them: the CLI on a terminal (stdout, and stderr when an error names a memory), the inspector
in a browser. Two kinds of characters act instead of being read. Terminal controls: rich
drops only BEL, BS, VT, FF and CR, so an ESC or a C1 control (CSI, OSC) would clear the
screen, set the title or hide the rest of a line from whoever audits the history.
Bidirectional controls: they reorder what the reader sees (an id ``admin\u202etxt.exe``
displays as another one), on a terminal and on a page. Light on purpose (``re`` only): the
CLI's error path imports it.
"""

from __future__ import annotations

import re

__all__ = ["BIDI_CONTROLS", "CONTROLS", "inert"]

BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""Characters that change the display order of the text around them (Unicode's explicit
directional formatting characters, plus the implicit marks ALM, LRM and RLM)."""

CONTROLS = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}]")
"""Every character :func:`inert` replaces: C0 controls but newline and tab, DEL, the C1
controls and the bidi controls."""


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    return chr(0x2400 + code) if code < 0x20 else "\u2421" if code == 0x7F else "\ufffd"


def inert(text: str) -> str:
    """``text`` with every character of :data:`CONTROLS` shown instead of obeyed: a C0 control
    as its control picture (``\u241b`` for ESC), DEL as ``\u2421``, a C1 or bidi control as
    U+FFFD. One character for one, so spans and column widths computed on ``text`` still fit
    (the inspector, which has no such constraint, names bidi controls: ``<U+202E>``)."""
    return CONTROLS.sub(_picture, text)
