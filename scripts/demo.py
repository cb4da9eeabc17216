"""chatledger's main job: a scripted conversation that shows memory vs history.

Writes ./chatledger.db (or the path given) and prints, side by side, what the model would be
sent (the window) and everything that was said (the history), then a time-travel view, a
what-if view under another policy, and the hash-chain verification.

Run:  python scripts/demo.py [--db PATH] [--fresh]

It ends with `chatledger` commands to try next, written so they run as printed: the command is
the one installed beside this Python (``.venv/bin/chatledger`` after the README's install line,
which does not put the venv on PATH) and the memory id is quoted for the shell.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shlex
import shutil
import sys

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from eventlog import (
    AiMessage,
    ChatMessage,
    SQLiteEventStore,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from eventlog.ids import memory_key
from projections import MessageWindowChatMemory, MessageWindowPolicy
from projections.audit import diff
from projections.cli.args import shell_id
from projections.readmodel import reason_text


def conversation() -> list[ChatMessage]:
    """A support chat with a system prompt, tool calls and enough turns to evict."""
    weather = ToolExecutionRequest(id="call-1", name="get_weather", arguments='{"city": "Munich"}')
    convert = ToolExecutionRequest(id="call-2", name="convert", arguments='{"c": 21}')
    return [
        SystemMessage("You are a concise travel assistant."),
        UserMessage("Hi! I'm planning a trip to Munich next week.", name="Klaus"),
        AiMessage("Great choice. What would you like to know?"),
        UserMessage("What's the weather like there right now?"),
        AiMessage(tool_execution_requests=[weather]),
        ToolExecutionResultMessage.from_request(weather, "21 °C, sunny"),
        AiMessage("It's 21 °C and sunny in Munich."),
        UserMessage("And in Fahrenheit?"),
        AiMessage(tool_execution_requests=[convert]),
        ToolExecutionResultMessage.from_request(convert, "69.8 °F"),
        AiMessage("That's about 70 °F."),
        SystemMessage("You are a concise travel assistant. Answer in German."),
        UserMessage("Any tip for the evening?"),
        AiMessage("Ein Spaziergang im Englischen Garten bei Sonnenuntergang."),
        UserMessage("Danke!"),
        AiMessage("Gern geschehen. Gute Reise!"),
    ]


def cli_command() -> str:
    """How to run the `chatledger` installed with this Python, as a shell word that works here.

    ``chatledger`` when that is what PATH finds (an activated venv); else the script beside
    ``sys.executable`` (not resolved: a venv's python is a symlink out of the venv), relative
    to the current directory when it lies below it.
    """
    name = "chatledger.exe" if os.name == "nt" else "chatledger"
    beside = pathlib.Path(sys.executable).parent / name
    found = shutil.which("chatledger")
    if not beside.exists() or (found is not None and pathlib.Path(found) == beside):
        return "chatledger"
    try:
        shown = str(beside.relative_to(pathlib.Path.cwd()))
    except ValueError:
        shown = str(beside)
    return shlex.quote(shown)


def next_commands(memory_key_text: str, db: pathlib.Path) -> list[str]:
    """The commands the demo suggests, each runnable as printed."""
    exe = cli_command()
    memory = shell_id(memory_key_text)  # the canonical spelling, as `chatledger ids` prints it
    where = "" if str(db) == "chatledger.db" else f" --db {shlex.quote(str(db))}"
    return [
        f"{exe} ids{where}",
        f"{exe} history {memory}{where}",
        f"{exe} diff {memory} 7 16{where}",
        f"{exe} verify{where}",
        f"{exe} digest{where}",
    ]


def _short(message: ChatMessage, width: int = 58) -> str:
    if isinstance(message, AiMessage) and message.has_tool_execution_requests():
        calls = ", ".join(f"{r.name}({r.arguments})" for r in message.tool_execution_requests)
        text = f"calls {calls}"
    else:
        try:
            text = str(getattr(message, "text", "") or "")
        except ValueError:
            text = "(multi-part)"
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


_STYLE = {"SYSTEM": "magenta", "USER": "cyan", "AI": "green", "TOOL_EXECUTION_RESULT": "yellow"}


def _row(message: ChatMessage) -> tuple[str, str]:
    kind = message.type
    return f"[{_STYLE.get(kind, 'white')}]{kind.replace('_EXECUTION_RESULT', '')}[/]", _short(
        message
    )


def _window_table(title: str, messages: list[ChatMessage]) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False, expand=True)
    table.add_column("#", justify="right", style="dim", width=3)
    table.add_column("role", width=8)
    table.add_column("message")
    for i, message in enumerate(messages, 1):
        table.add_row(str(i), *_row(message))
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--db", default="chatledger.db", help="SQLite file (default ./chatledger.db)"
    )
    parser.add_argument("--fresh", action="store_true", help="delete the file first")
    args = parser.parse_args(argv)
    console = Console()
    path = pathlib.Path(args.db)
    if args.fresh:
        for suffix in ("", "-wal", "-shm"):
            pathlib.Path(f"{path}{suffix}").unlink(missing_ok=True)

    with SQLiteEventStore(path) as store:
        memory_id = ("demo", len(store.streams()) + 1)  # a new conversation on every run
        memory = MessageWindowChatMemory(id=memory_id, max_messages=6, store=store)
        for message in conversation():
            memory.add(message)

        history = memory.history()
        key = memory_key(memory_id)
        shown_id = shell_id(key)
        console.rule(f"[bold]chatledger demo[/] — conversation {shown_id} in {path}")
        console.print(
            f"{len(conversation())} messages said → {len(history)} events in the log; "
            "the memory keeps a window of 6 messages "
            "(LangChain4j's MessageWindowChatMemory rules).\n"
        )

        hist = Table(
            title="History (everything said, kept intact)", title_justify="left", expand=True
        )
        hist.add_column("seq", justify="right", style="dim", width=4)
        hist.add_column("role", width=8)
        hist.add_column("message")
        hist.add_column("in memory now?", no_wrap=True)
        current = memory.messages()
        # Why each message left, in the words `chatledger diff` and the inspector use.
        changes = diff(store, memory_id, 0, memory.seq).changes
        left = {c.entry.ref[0]: c.reason for c in changes if c.reason is not None}
        for event in history:
            if event.message is None:
                continue
            reason = left.get(event.seq)
            hist.add_row(
                str(event.seq),
                *_row(event.message),
                "[green]yes[/]" if reason is None else f"[dim]{reason_text(reason)}[/]",
            )
        console.print(hist)
        console.print(_window_table("Memory (what the model is sent now)", current))
        console.print(
            "[dim]The first system prompt was replaced by the German one (LangChain4j keeps one "
            "system message), and the oldest turns were evicted — the tool result of an evicted "
            "tool call goes with it, so the model never sees an orphan tool result.[/]\n"
        )

        seq = 7
        console.print(
            _window_table(f"Time travel: the memory right after event {seq}", memory.as_of(seq=seq))
        )
        console.print(
            f"[dim]as_of(seq={seq}) reads event {seq} and the events its window refers to — "
            "no replay of the history.[/]\n"
        )
        bigger = memory.what_if(MessageWindowPolicy(12))
        console.print(_window_table("What if the window had been 12 messages?", bigger))
        console.print("[dim]Computed from the same history; nothing was written.[/]\n")

        report = store.verify()
        digest = store.digest()
        status = "[bold green]intact[/]" if report.ok else "[bold red]BROKEN[/]"
        console.print(
            Panel(
                f"Hash chains: {status} — {report.records} records of {len(report.checked)} "
                "conversation(s) re-hashed (SHA-256 over id, seq, kind, time, a salted "
                "commitment to the stored JSON and the meta, chained per id). `verify` below "
                "names the first bad seq after a row is edited with sqlite-utils or sqlite3.\n"
                f"Ledger digest: {digest.size} records, Merkle root {digest.root[:16]}…  Keep "
                "`chatledger digest -o FILE` outside the database: `chatledger verify --digest "
                "FILE` then also catches deleted or re-hashed history.",
                title="verification",
            )
        )
        # Plain lines, never wrapped, so each can be copied and pasted as it is.
        console.print("Next, from the shell (the ids are written as `chatledger ids` takes them):")
        for command in next_commands(key, path):
            console.print(f"  {command}", markup=False, highlight=False, soft_wrap=True)
        return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
