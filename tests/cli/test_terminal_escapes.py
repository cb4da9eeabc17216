"""Text from a chat reaches the reader's terminal as text: an escape sequence in a message or
a memory id is shown, never obeyed (it could clear the screen, set the title, or hide the rest
of a line from whoever audits the history)."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from eventlog import AiMessage, SQLiteEventStore, UserMessage
from projections import MessageWindowChatMemory

ESC, CSI, RLO = "\x1b", "\x9b", "\u202e"  # RLO: shows "admin<RLO>txt.exe" as "adminexe.txt"
EVIL = (
    f"hi {ESC}[2J{ESC}]0;owned{ESC}\\ {ESC}[8mhidden{ESC}[0m {CSI}31m \x00 \x7f "
    f"admin{RLO}txt.exe end"
)


@pytest.fixture
def evil(tmp_path):
    path = tmp_path / "evil.db"
    with SQLiteEventStore(path) as store:
        for memory_id in ("conv", f"id{ESC}[31m"):
            memory = MessageWindowChatMemory(id=memory_id, max_messages=4, store=store)
            memory.add(UserMessage(EVIL), AiMessage(f"ok {ESC}[1A"))
    return path


@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
@pytest.mark.parametrize(
    "command",
    [
        ["ids"],
        ["history", "conv"],
        ["show", "conv"],
        ["explain", "conv", "1"],
        ["diff", "conv", "0", "2"],
        ["replay", "conv", "--no-pager"],
    ],
    ids=" ".join,
)
def test_control_characters_in_messages_and_ids_are_shown_not_sent(
    ok, evil, monkeypatch, command, terminal
):
    if terminal:
        monkeypatch.setenv("FORCE_COLOR", "1")  # rich treats the capture as a terminal
    out = ok(*command, "--db", evil).stdout
    # Check rich's own colours are the only escape sequences left: the message's are visible.
    assert "\x1b" not in re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert ("\x1b[" in out) is terminal  # on a terminal the console did draw in colour
    for control in ("\x00", "\x7f", CSI, RLO):
        assert control not in out
    # `ids` lists an id holding a control as a word that names it again (tests/cli/test_args.py)
    # (cut to the column's width on an 80-column terminal)
    assert ("\u241b[2J" if command != ["ids"] else """~s:"id\\u001b[3""") in out
    if command != ["ids"]:
        assert "admin\ufffdtxt.exe" in out


def test_an_error_naming_a_memory_shows_its_id_not_its_escape_sequences(cli, evil):
    # Check a broken chain's message (which names the stored id) reaches stderr inert.
    connection = sqlite3.connect(evil)
    with connection:
        connection.execute("UPDATE events SET payload = replace(payload, 'hi', 'HI')")
    connection.close()
    result = cli("history", "--id-json", '"id\\u001b[31m"', "--db", evil)
    assert result.returncode == 1
    assert "hash chain of id\u241b[31m breaks at seq 1" in result.stderr
    assert "\x1b" not in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["history", "conv", "--json"],
        ["show", "conv", "--json"],
        ["explain", "conv", "1", "--json"],
        ["diff", "conv", "0", "2", "--json"],
        ["replay", "conv", "--json"],
    ],
    ids=" ".join,
)
def test_json_output_escapes_every_control_character_and_keeps_the_text(ok, evil, command):
    out = ok(*command, "--db", evil).stdout
    # Check JSON's own escapes cover C0; DEL and C1 (CSI) are escaped too, and parse back.
    for control in ("\x1b", "\x00", "\x7f", CSI, RLO):
        assert control not in out
    assert "\\u009b31m" in out and "admin\\u202etxt.exe" in out
    assert EVIL in _strings([json.loads(line) for line in out.splitlines()])


def _strings(value):
    """Every string in a parsed JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
