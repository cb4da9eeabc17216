"""The CLI's rich consoles: styled on a terminal, plain lines when piped, quiet on a closed pipe.

Piped output is read by ``grep``, ``cut`` and ``diff``: a table drawn for a terminal has a box
and pads every line to the width of its widest cell, so one long message would make every line
hundreds of characters of spaces and box edges. Piped, a table is printed as aligned columns
without a box and no line ends in spaces; nothing is wrapped.

Imported only by :func:`projections.cli.render.console`: rich costs tens of milliseconds to
import and ``chatledger --help`` never needs it.
"""

from __future__ import annotations

import copy
import errno
import os
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from projections.display import CONTROLS, inert

if TYPE_CHECKING:
    from collections.abc import Iterable

    from rich.console import ConsoleOptions, RenderableType
    from rich.segment import Segment

__all__ = ["PipedConsole", "TerminalConsole"]

# Width for output that is not a terminal: rich would wrap at 80 columns (or $COLUMNS), which
# splits lines that scripts grep. Tables only take the width their cells need.
_PIPE_WIDTH = 100_000


class TerminalConsole(Console):
    """A console whose closed pipe raises :class:`BrokenPipeError` for the entry point.

    rich's own handler raises ``SystemExit(1)``; a reader that stops early (``| head``) is not
    a failure, so the entry point decides the status (0) in one place. Every text it renders,
    however it got into a table or a line, goes through :func:`inert` first.
    """

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        """Like :meth:`rich.console.Console.render`, with control characters made inert."""
        if isinstance(renderable, Text) and CONTROLS.search(renderable.plain):
            renderable = renderable.copy()
            renderable.plain = inert(renderable.plain)  # one character each: spans still fit
        return super().render(renderable, options)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """Like :meth:`rich.console.Console.render_str`, of the text made inert."""
        return super().render_str(inert(text), **kwargs)

    def on_broken_pipe(self) -> None:
        """Stop writing and let :func:`projections.cli.app.main` end the command quietly."""
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


class PipedConsole(TerminalConsole):
    """A console for a pipe or a file: no wrapping, tables without box, no trailing spaces."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(soft_wrap=True, width=_PIPE_WIDTH, **kwargs)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """Like :meth:`rich.console.Console.print`, with plain tables and no trailing spaces."""
        with self.capture() as captured:
            super().print(*(_unboxed(o) for o in objects), **kwargs)
        text = "\n".join(line.rstrip(" ") for line in captured.get().split("\n"))
        if text and not self.quiet:
            self.file.write(text)
            self.file.flush()


def _unboxed(renderable: Any) -> Any:
    """A table as columns two spaces apart, starting at column 0; anything else as is."""
    if not isinstance(renderable, Table):
        return renderable
    table = copy.copy(renderable)
    table.box = None
    table.pad_edge = False
    return table
