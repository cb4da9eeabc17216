"""Ctrl-C, sent to the real process: exit status 130 and one line, never a traceback, and a
new database an interrupted import was filling is removed."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from eventlog import SQLiteEventStore, UserMessage
from projections import MessageWindowChatMemory
from tests.cli.conftest import EXE


def _interrupt_while_open(args: list[str], watched: Path) -> subprocess.CompletedProcess[str]:
    """Run the command, send SIGINT once it has ``watched`` open (or after 10 s), and wait."""
    process = subprocess.Popen(
        [str(EXE), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    fds = Path(f"/proc/{process.pid}/fd")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if any(os.path.realpath(fd) == str(watched) for fd in fds.iterdir()):
                break
        except OSError:  # an fd closed while we looked
            pass
        time.sleep(0.001)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_a_check_without_a_database_interrupted_exits_130_in_one_line(tmp_path):
    proof = tmp_path / "proof.json"
    proof.write_text('{"x": "' + "a" * 200_000_000 + '"}', encoding="utf-8")
    result = _interrupt_while_open(["check-proof", str(proof), "--digest", str(proof)], proof)
    assert result.returncode == 130, result.stderr[-500:]
    assert result.stderr == "chatledger: interrupted\n"


def test_an_interrupted_import_into_a_new_file_leaves_no_file(tmp_path):
    dump = tmp_path / "dump.jsonl"
    with SQLiteEventStore(tmp_path / "source.db") as store:
        for n in range(100):
            conv = MessageWindowChatMemory(("user", n), max_messages=20, store=store)
            for i in range(100):
                conv.add(UserMessage(f"message {i} " + "x" * 200))
    subprocess.run(
        [str(EXE), "--db", str(tmp_path / "source.db"), "export", "-o", str(dump)],
        check=True,
        capture_output=True,
    )
    target = tmp_path / "new.db"
    result = _interrupt_while_open(["--db", str(target), "import", str(dump)], dump)
    assert result.returncode in (0, 130), result.stderr[-500:]
    assert "Traceback" not in result.stderr
    if result.returncode == 130:
        assert result.stderr == "chatledger: interrupted\n"
        assert not list(tmp_path.glob("new.db*"))


def test_an_import_interrupted_while_writing_is_finished_by_import_resume(tmp_path):
    import sqlite3

    dump, source = tmp_path / "dump.jsonl", tmp_path / "source.db"
    with SQLiteEventStore(source) as store:
        for n in range(60):
            conv = MessageWindowChatMemory(("user", n), max_messages=20, store=store)
            conv.add([UserMessage(f"message {i} " + "x" * 200) for i in range(100)])
        want = sorted((r.stream_id, r.seq, r.hash) for r in store.read_all())
    subprocess.run(
        [str(EXE), "--db", str(source), "export", "-o", str(dump)], check=True, capture_output=True
    )
    target = tmp_path / "target.db"
    with SQLiteEventStore(target) as store:  # an existing ledger: what was written stays
        MessageWindowChatMemory("other", 5, store).add(UserMessage("already here"))
    process = subprocess.Popen(
        [str(EXE), "--db", str(target), "import", str(dump)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    with sqlite3.connect(target) as watch:
        # Interrupted once some memories are written, while the rest are not.
        while time.monotonic() < deadline and process.poll() is None:
            if watch.execute("SELECT count(*) FROM events").fetchone()[0] > 1:
                break
            time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode in (0, 130), err[-500:]
    again = subprocess.run(
        [str(EXE), "--db", str(target), "import", str(dump), "--resume", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 0, again.stderr[-500:]
    with SQLiteEventStore(target) as store:
        got = sorted((r.stream_id, r.seq, r.hash) for r in store.read_all())
        assert [row for row in got if "other" not in row[0]] == want
        assert store.verify().ok
