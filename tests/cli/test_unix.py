"""The command as a Unix tool: quiet on a closed pipe, plain lines when piped, a busy port named
before any URL, and the exit statuses the README documents."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sqlite3
import subprocess
from pathlib import Path

import pytest

from eventlog import SQLiteEventStore
from projections import MessageWindowChatMemory
from tests.cli.conftest import EXE, run
from tests.factories import a_message

pytestmark = pytest.mark.skipif(
    not EXE.exists(), reason=f"{EXE} missing: run `pip install -e . --no-deps` in the venv"
)

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.parametrize(
    "command",
    [
        ["history", "conv", "--json"],
        ["history", "conv"],
        ["replay", "conv"],
        ["replay", "conv", "--json"],
        ["diff", "conv", "1", "11"],
        ["show", "conv"],
        ["ids"],
        ["--version"],
    ],
    ids=" ".join,
)
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly_with_status_0(ledger, command):
    process = subprocess.Popen(
        [str(EXE), *command, "--db", str(ledger)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    # Check the reader is gone before the command writes its first byte (as `| head -0`).
    assert process.stdout is not None
    process.stdout.close()
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err.decode()) == (0, "")


def test_check_proof_to_a_closed_pipe_is_quiet_too(ok, ledger, tmp_path):
    digest, proof = tmp_path / "d.json", tmp_path / "p.json"
    ok("--db", ledger, "digest", "-o", digest)
    ok("--db", ledger, "prove", "conv", "5", "-o", proof, "--digest", digest)
    for output in ([], ["--json"]):
        process = subprocess.Popen(
            [str(EXE), "check-proof", str(proof), "--digest", str(digest), *output],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdout is not None
        process.stdout.close()
        _, err = process.communicate(timeout=60)
        assert (process.returncode, err.decode()) == (0, "")


def test_a_closed_pipe_is_quiet_when_styles_are_forced_too(ledger):
    # FORCE_COLOR makes rich treat the pipe as a terminal: its own handler would exit 1.
    process = subprocess.Popen(
        [str(EXE), "history", "conv", "--db", str(ledger)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "FORCE_COLOR": "1"},
    )
    assert process.stdout is not None
    process.stdout.close()
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err.decode()) == (0, "")


def test_head_in_a_pipefail_shell_sees_the_first_lines_and_status_0(tmp_path):
    path = tmp_path / "long.db"
    with SQLiteEventStore(path) as store:
        memory = MessageWindowChatMemory(id="conv", max_messages=4, store=store)
        for i in range(400):
            memory.add(a_message("user", f"message {i} " + "word " * 60))
    # Check the history (200 kB) outlasts the pipe's buffer: head exits while it is written.
    shell = subprocess.run(
        ["bash", "-c", 'set -o pipefail; "$CLI" history conv --json --db "$DB" | head -n 1'],
        capture_output=True,
        text=True,
        env={"CLI": str(EXE), "DB": str(path), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert (shell.returncode, shell.stderr) == (0, "")
    assert shell.stdout.startswith('{"seq": 1, ')


@pytest.fixture
def long_message_ledger(tmp_path):
    path = tmp_path / "long.db"
    with SQLiteEventStore(path) as store:
        memory = MessageWindowChatMemory(id="conv", max_messages=4, store=store)
        memory.add(a_message("system", "Be brief."))
        memory.add(a_message("user", "word " * 60 + "end"))
        memory.add(a_message("ai", "ok"))
    return path


@pytest.mark.parametrize("command", [["show", "conv"], ["history", "conv"], ["ids"]], ids=" ".join)
def test_piped_tables_are_plain_lines_neither_padded_nor_wrapped(long_message_ledger, command):
    result = run(*command, "--db", long_message_ledger)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # Check no line ends in spaces and no box is drawn around the cells.
    assert [line for line in lines if line != line.rstrip()] == []
    assert not re.search("[│┃━─┏┗┡└]", result.stdout)
    # Check the long message stays on one line, and only its own line is long.
    if command[0] == "show":
        assert [len(line) > 150 for line in lines].count(True) == 1
        assert any(line.endswith("word end") for line in lines)


def test_show_piped_is_aligned_columns_under_a_header(long_message_ledger):
    out = run("show", "conv", "--db", long_message_ledger).stdout.splitlines()
    assert out[:3] == [
        "conv after seq 3 of 3 (recorded view, 3 messages)",
        "#  event  role    text",
        "1  1      system  Be brief.",
    ]
    assert out[4] == "3  3      ai      ok"


def test_serve_on_a_busy_port_names_it_and_the_remedy_before_any_url(ledger):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run("serve", "--db", ledger, "--port", port)
    assert result.returncode == 1
    assert result.stderr == (
        f"chatledger: error: serve cannot listen on 127.0.0.1:{port} (Address already in use); "
        f"pick a free port with --port N, or stop what holds port {port}\n"
    )


def test_serve_refuses_a_port_beyond_65535_as_a_usage_error(cli, ledger):
    result = cli("serve", "--db", ledger, "--port", "70000")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "chatledger: error: --port 70000: a TCP port is at most 65535\n"


def test_serve_on_a_host_that_does_not_resolve_says_so(cli, ledger, monkeypatch):
    def unknown(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    result = cli("serve", "--db", ledger, "--host", "nowhere.invalid")
    assert result.returncode == 1
    assert result.stderr == (
        "chatledger: error: serve cannot resolve --host nowhere.invalid "
        "(Name or service not known); pass an address\n"
    )


def _cli_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## The `chatledger` command")
    return text[start : text.index("\n## ", start + 1)]


def test_the_exit_statuses_the_readme_documents_are_the_ones_the_command_returns(ledger, tmp_path):
    section = _cli_section()
    for documented in ("`0` success", "`1` a check failed", "`2` a usage error"):
        assert documented in section
    assert run("verify", "--db", ledger).returncode == 0
    assert run("show", "nobody", "--db", ledger).returncode == 1
    assert run("show", "conv", "--as-of", "x", "--db", ledger).returncode == 2
    assert run("frobnicate").returncode == 2
    with contextlib.closing(sqlite3.connect(ledger, isolation_level=None)) as conn:
        conn.execute("UPDATE events SET payload = replace(payload, '4.', '5.') WHERE seq = 5")
    assert run("verify", "--db", ledger).returncode == 1
