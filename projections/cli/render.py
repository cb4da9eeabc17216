"""How the CLI prints: rich consoles, one-line message previews, JSON lines and counts.

rich is imported inside the functions that draw: ``chatledger --help`` never needs it and it
costs tens of milliseconds to import.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from eventlog.formats.lc4j_json import message_to_obj
from eventlog.messages import (
    ChatMessage,
)
from eventlog.models import (
    Record,
)
from eventlog.serialization import require_opened
from projections.display import BIDI_CONTROLS
from projections.readmodel import (
    Ref,
    call_names,
    describe,
    event_line,
    forked_from,
    plural,
    short,
    window_size,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress
    from rich.text import Text

__all__ = [
    "call_names",
    "console",
    "describe",
    "emit",
    "json_text",
    "message_obj",
    "plain",
    "plural",
    "preview",
    "progress",
    "record_json",
    "record_summary",
    "ref_text",
    "role",
    "short",
    "title",
    "when",
]

_ROLE_STYLES = {
    "system": "magenta",
    "user": "cyan",
    "ai": "green",
    "tool": "yellow",
    "custom": "blue",
    "langgraph": "blue",
}


def console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr): styled on a terminal; piped, plain lines never padded
    or wrapped (:mod:`projections.cli.consoles`)."""
    from projections.cli.consoles import PipedConsole, TerminalConsole

    # markup=False: message texts and memory ids may contain [brackets]; styles go via Text.
    out = TerminalConsole(stderr=stderr, highlight=False, markup=False)
    if not out.is_terminal:
        return PipedConsole(stderr=stderr, highlight=False, markup=False)
    return out


# JSON escapes C0 controls but writes DEL, the C1 controls (CSI, OSC: terminal commands, in a
# UTF-8 terminal too) and the bidi controls (which reorder what the reader sees) as they are;
# in a string they may be written \u escaped instead (see projections.display).
_C1_ESCAPES = {
    code: f"\\u{code:04x}" for code in [*range(0x7F, 0xA0), *(ord(char) for char in BIDI_CONTROLS)]
}


def json_text(obj: object) -> str:
    """``obj`` as JSON, non-ASCII text kept readable and every control character escaped."""
    return json.dumps(obj, ensure_ascii=False).translate(_C1_ESCAPES)


def emit(obj: object) -> None:
    """Write one JSON line to stdout."""
    sys.stdout.write(json_text(obj) + "\n")


def when(moment: datetime) -> str:
    """A time for tables: UTC, to the second."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def ref_text(ref: Ref) -> str:
    """``5`` for the message of event 5, ``9.2`` for item 2 of the set at event 9."""
    return str(ref[0]) if ref[1] == 0 else f"{ref[0]}.{ref[1]}"


def plain(text: str) -> Text:
    """Text shown as is (no markup, no highlighting)."""
    from rich.text import Text

    return Text(text)


def title(text: str) -> Text:
    """A table title: left-aligned and never wrapped to the table's width (rich's default)."""
    from rich.text import Text

    return Text(text, style="bold", justify="left", no_wrap=True, overflow="ignore")


def role(name: str) -> Text:
    """A role name in its colour."""
    from rich.text import Text

    return Text(name, style=_ROLE_STYLES.get(name, ""))


def preview(
    message: ChatMessage, width: int = 70, tool_names: dict[str, str] | None = None
) -> Text:
    """``role text`` on one line (``tool_names`` as for :func:`describe`)."""
    from rich.text import Text

    name, text = describe(message, tool_names)
    return Text.assemble((name, _ROLE_STYLES.get(name, "")), " ", short(text, width))


def message_obj(message: ChatMessage) -> Any:
    """A message as its LangChain4j JSON object."""
    return message_to_obj(message)


def record_summary(
    record: Record, tool_names: dict[str, str] | None = None
) -> tuple[Text, int | None]:
    """A preview of an event (:func:`~projections.readmodel.event_line`, in colour) and the
    size of the window after it (None: no window)."""
    from rich.text import Text

    line = event_line(record, tool_names)
    if line.role is not None:
        return Text.assemble(
            (line.role, _ROLE_STYLES.get(line.role, "")), " ", line.text
        ), line.size
    return Text(line.text, style=line.style), line.size


def record_json(record: Record) -> dict[str, Any]:
    """One event of ``history --json``."""
    obj: dict[str, Any] = {
        "seq": record.seq,
        "kind": record.kind,
        "recorded_at": record.recorded_at_text,
        "hash": record.hash,
        "window_size": window_size(record),
    }
    if record.erased:
        obj["erased"] = True
        return obj
    require_opened(record)
    payload = json.loads(record.payload)
    if record.kind == "message_added":
        obj["message"] = payload
    elif record.kind == "messages_set":
        obj["messages"] = payload
    elif record.kind in (
        "memory_purged",
        "memory_erased",
        "compaction_run",
        "summary_recorded",
        "message_retracted",
        "record_quarantined",
        "context_sent",
    ):
        obj["event"] = payload
    origin = forked_from(record)
    if origin is not None:
        obj["forked_from"] = origin
    return obj


def progress(total: int, label: str) -> Progress:
    """A transient progress bar on stderr, shown only when stderr is a terminal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    err = console(stderr=True)
    bar = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    bar.add_task(label, total=total or None)
    return bar
