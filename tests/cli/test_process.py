"""The installed ``chatledger`` command as a real process: help, a round trip, exit statuses,
the pager on a terminal, and ids pasted into a real shell as ``ids`` prints them."""

from __future__ import annotations

import os
import pty
import sqlite3
import subprocess

import pytest

from eventlog import SQLiteEventStore
from eventlog.ids import MemoryId
from projections import MessageWindowChatMemory
from tests.cli.conftest import EXE, run
from tests.factories import a_message

pytestmark = pytest.mark.skipif(
    not EXE.exists(), reason=f"{EXE} missing: run `pip install -e . --no-deps` in the venv"
)


def test_help_exits_zero_and_lists_the_global_options():
    result = run("--help")
    assert result.returncode == 0
    for option in ("--db PATH", "--dsn URL", "--schema S", "--json", "verify"):
        assert option in result.stdout


def test_sqlite_round_trip_and_exit_statuses(ledger, tmp_path):
    dump, copy = tmp_path / "dump.jsonl", tmp_path / "copy.db"
    assert run("--db", ledger, "export", "-o", dump).returncode == 0
    assert run("--db", copy, "import", dump).returncode == 0
    verified = run("verify", "--db", copy)
    assert (verified.returncode, verified.stdout) == (
        0,
        "OK 1 hash chain intact, 11 records checked\n",
    )
    with sqlite3.connect(copy) as conn:
        conn.execute("UPDATE events SET payload = replace(payload, '4.', '5.') WHERE seq = 5")
    broken = run("verify", "--db", copy)
    assert broken.returncode == 1
    assert broken.stdout.splitlines()[0].startswith("BROKEN memory 'conv': first bad seq 5: ")
    usage = run("show", "conv", "--db", copy, "--schema", "s")
    assert usage.returncode == 2
    assert usage.stderr.startswith("chatledger: error: --schema s names a PostgreSQL schema")
    assert "Traceback" not in usage.stderr + broken.stderr


def _on_a_terminal(*args: object, **env: str) -> str:
    """What the command prints on a terminal (a pty) with these environment variables set;
    it must exit 0."""
    main, child = pty.openpty()
    process = subprocess.Popen(
        [str(EXE), *map(str, args)],
        stdin=child,
        stdout=child,
        stderr=child,
        env={**os.environ, **env},
    )
    os.close(child)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the pty is closed once the process exits
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert process.wait(timeout=60) == 0
    os.close(main)
    out = b"".join(chunks).decode()
    return out


def test_replay_on_a_terminal_goes_through_the_pager(ledger):
    out = _on_a_terminal("replay", "conv", "--db", ledger, "--to", "3", PAGER="cat", COLUMNS="200")
    assert "seq 3 " in out
    assert "seq 4 " not in out


def test_ids_as_printed_can_be_pasted_into_a_shell(tmp_path):
    path = tmp_path / "ids.db"
    ids: list[MemoryId] = [("demo", 1), 42, "a/b", "~tilde", "it's [here]", ("x", "y z")]
    with SQLiteEventStore(path) as store:
        for memory_id in ids:
            MessageWindowChatMemory(id=memory_id, max_messages=3, store=store).add(
                a_message("user", f"marker {len(str(memory_id))}")
            )
    listed = run("ids", "--db", path).stdout
    # Piped, the table is plain columns: an id is what precedes the "events" column.
    header, *rows = listed.splitlines()
    words = [row[: header.index("events")].rstrip() for row in rows]
    assert len(words) == len(ids)
    script = "\n".join(f'"$CLI" show {word} --db "$DB" --json || exit 1' for word in words)
    shell = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "CLI": str(EXE), "DB": str(path)},
        timeout=120,
        check=False,
    )
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout.count("marker") == len(ids)


def test_ids_on_a_narrow_terminal_are_folded_whole_never_cut(tmp_path):
    # Cut with an ellipsis, an id names no memory; folded over lines, it is all there.
    path = tmp_path / "ids.db"
    long_id = ("customer-support-session", "a-rather-long-session-identifier-0123456789")
    with SQLiteEventStore(path) as store:
        MessageWindowChatMemory(id=long_id, max_messages=3, store=store).add(
            a_message("user", "hi")
        )
    out = _on_a_terminal("ids", "--db", path, COLUMNS="60", NO_COLOR="1")
    assert "…" not in out
    cells = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]
    assert len(cells) > 1  # folded
    assert (
        "".join(cells)
        == """'~t:["customer-support-session","a-rather-long-session-identifier-0123456789"]'"""
    )
