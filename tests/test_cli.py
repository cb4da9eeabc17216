"""The installed ``chatledger`` command, run as a real process on real databases.

Ledgers are built with the Python API (window memories on a SQLiteEventStore in tmp_path); each
test runs the console script with subprocess and checks its output and exit status against the
same API (``as_of``, ``what_if``, ``verify``). Errors must be one line on stderr, never a
traceback. PostgreSQL round trips run when the test server is reachable (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import pty
import sqlite3
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time

from eventlog import (
    AiMessage,
    CustomMessage,
    ImageContent,
    SQLiteEventStore,
    TextContent,
    ToolExecutionResultMessage,
    UserMessage,
)
from eventlog.lc4j_json import message_to_obj, messages_from_json
from projections import (
    MessageWindowChatMemory,
    MessageWindowPolicy,
    OpenAiTokenCountEstimator,
    TokenWindowPolicy,
    what_if,
)
from projections.replay import replay_views
from tests.conftest import PG_DSN, require_pg
from tests.factories import a_message
from tests.projections.test_audit import story

EXE = Path(sys.executable).with_name("chatledger")
STARTED = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)

pytestmark = pytest.mark.skipif(
    not EXE.exists(), reason=f"{EXE} missing: run `pip install -e . --no-deps` in the venv"
)


def run(*args, cwd=None, stdin=None):
    """Run the installed command; a wide terminal so tables do not wrap or truncate."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [str(EXE), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=env,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        check=False,
    )


def ok(*args, **kwargs):
    result = run(*args, **kwargs)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result


def json_lines(text):
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def ledger(tmp_path):
    """tmp_path/ledger.db with the audit story under "conv", one event a minute from STARTED."""
    path = tmp_path / "ledger.db"
    with (
        freeze_time(STARTED, auto_tick_seconds=60),
        SQLiteEventStore(path) as store,
    ):
        story(store)
    return path


@pytest.fixture
def store(ledger):
    with SQLiteEventStore(ledger) as store:
        yield store


def _memory(store, memory_id="conv"):
    return MessageWindowChatMemory(id=memory_id, max_messages=4, store=store)


# ---------------------------------------------------------------------------- reading


def test_ids_lists_memories_with_counts_and_activity(ledger, store):
    MessageWindowChatMemory(id="second", max_messages=2, store=store).add(a_message("user"))
    table = ok("ids", "--db", ledger).stdout
    assert "conv" in table
    assert "second" in table
    assert "2026-01-01 10:" in table
    rows = json_lines(ok("ids", "--db", ledger, "--json").stdout)
    assert [(r["memory"], r["events"], r["last_seq"]) for r in rows] == [
        ("conv", 11, 11),
        ("second", 1, 1),
    ]
    first, last = (r.recorded_at_text for r in store.read("conv") if r.seq in (1, 11))
    assert (rows[0]["first_recorded_at"], rows[0]["last_recorded_at"]) == (first, last)


def test_history_json_has_one_object_per_event(ledger, store):
    events = json_lines(ok("history", "conv", "--db", ledger, "--json").stdout)
    records = store.read("conv")
    assert [(e["seq"], e["kind"], e["recorded_at"]) for e in events] == [
        (r.seq, r.kind, r.recorded_at_text) for r in records
    ]
    assert events[1]["message"] == json.loads(records[1].payload)
    assert len(events[8]["messages"]) == 6
    assert [e["window_size"] for e in events] == [1, 2, 3, 4, 4, 3, 3, 4, 3, 0, 1]
    table = ok("history", "conv", "--db", ledger, "--from", 9, "--to", 10).stdout
    assert "messages_set" in table
    assert "memory_cleared" in table
    assert "What is 2+2?" not in table


def test_show_as_of_and_at_equal_time_travel(ledger, store):
    memory = _memory(store)
    head = messages_from_json(ok("show", "conv", "--db", ledger, "--json").stdout)
    assert head == memory.messages() == memory.as_of(seq=11)
    six = messages_from_json(ok("show", "conv", "--db", ledger, "--as-of", 6, "--json").stdout)
    assert six == memory.as_of(seq=6)
    # A naive time is UTC: between seq 5 and 6, so the view after seq 5.
    at = store.read("conv")[4].recorded_at + timedelta(seconds=1)
    naive = at.astimezone(UTC).replace(tzinfo=None).isoformat()
    shown = ok("show", "conv", "--db", ledger, "--at", naive, "--json").stdout
    assert messages_from_json(shown) == memory.as_of(at=at) == memory.as_of(seq=5)
    table = ok("show", "conv", "--db", ledger, "--as-of", 6).stdout
    assert "conv after seq 6 of 11" in table
    assert "Be brief." in table


def test_show_policy_equals_what_if(ledger, store):
    shown = ok("show", "conv", "--db", ledger, "--as-of", 8, "--policy", "messages:2", "--json")
    assert messages_from_json(shown.stdout) == what_if(store, "conv", MessageWindowPolicy(2), seq=8)
    estimator = OpenAiTokenCountEstimator("gpt-4o-mini")
    shown = ok("show", "conv", "--db", ledger, "--policy", "tokens:40:gpt-4o-mini", "--json")
    expected = what_if(store, "conv", TokenWindowPolicy(40, estimator), seq=None)
    assert messages_from_json(shown.stdout) == expected


def test_diff_reports_every_reason(ledger):
    result = json.loads(ok("diff", "conv", 0, 11, "--db", ledger, "--json").stdout)
    reasons = {
        tuple(c["ref"]): (c["entered_at"], c["left_at"], c["reason"]) for c in result["changes"]
    }
    assert reasons[(1, 0)] == (1, 7, "system_replaced")
    assert reasons[(2, 0)] == (2, 5, "evicted")
    assert reasons[(4, 0)] == (4, 6, "orphan")
    assert reasons[(5, 0)] == (5, 9, "set")
    assert reasons[(9, 2)] == (9, 9, "orphan")
    assert reasons[(9, 5)] == (9, 10, "clear")
    assert reasons[(11, 0)] == (11, None, None)
    table = ok("diff", "conv", 4, 9, "--db", ledger).stdout
    assert "conv: seq 4 → 9: 3 entered, 4 left, 7 came and went" in table
    assert "orphan (its tool call left)" in table
    assert "system message replaced" in table
    assert "set (content replaced)" in table


def test_explain_and_other_small_outputs(ledger, store, tmp_path):
    empty = tmp_path / "empty.db"
    SQLiteEventStore(empty).close()
    kinds = tmp_path / "kinds.db"
    with SQLiteEventStore(kinds) as other:
        MessageWindowChatMemory(id="kinds", max_messages=9, store=other).add(
            UserMessage(
                name="ann", contents=[TextContent("look"), ImageContent(url="http://x/y.png")]
            ),
            AiMessage("thinking done", thinking="hmm"),
            ToolExecutionResultMessage(id="7", tool_name=None, text="bare result"),
            CustomMessage({"role": "critic", "score": 3}),
        )
    db = ("--db", ledger)
    commands = [
        ("explain", "conv", 4, *db),
        ("explain", "conv", 9, "--index", 2, *db),
        ("explain", "conv", 11, *db),
        ("explain", "conv", 2, "--json", *db),
        ("ids", "--db", empty),
        ("replay", "conv", "--policy", "messages:2", "--json", *db),
        ("show", "kinds", "--db", kinds),
        ("history", "conv", "--db", ledger),
    ]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda args: run(*args), commands))
    for args, result in zip(commands, results, strict=True):
        assert result.returncode == 0, f"{args}: {result.stderr}"
    out = [r.stdout for r in results]
    assert "entered the view at seq 4; left it at seq 6: orphan" in out[0]
    assert "brought by seq 9 but not kept: orphan" in out[1]
    assert "entered the view at seq 11; still in it at seq 11 (head)" in out[2]
    explained = json.loads(out[3])
    assert (explained["ref"], explained["left_at"], explained["reason"]) == ([2, 0], 5, "evicted")
    assert out[4].strip() == f"no memories in {empty}"
    replayed = json_lines(out[5])
    expected = replay_views(store, "conv", MessageWindowPolicy(2))
    assert [s["view"] for s in replayed] == [[message_to_obj(m) for m in v] for _, v in expected]
    for text in ("ann: look [image]", "thinking done", "bare result", '"role": "critic"'):
        assert text in out[6]
    assert "6 message(s): start over" in out[7]
    assert "(window emptied)" in out[7]


def test_replay_json_gives_the_view_after_every_event(ledger, store):
    memory = _memory(store)
    steps = json_lines(ok("replay", "conv", "--db", ledger, "--json").stdout)
    assert [s["seq"] for s in steps] == list(range(1, 12))
    for step in steps:
        assert step["view"] == [message_to_obj(m) for m in memory.as_of(seq=step["seq"])]
    assert steps[5]["left"][1]["reason"] == "orphan"


def test_replay_pages_without_blocking_when_not_a_terminal(ledger):
    out = ok("replay", "conv", "--db", ledger, "--from", 5, "--page-size", 2).stdout
    assert "seq 5 " in out
    assert "seq 6 " in out
    assert "seq 7 " not in out
    assert "5 more event(s): chatledger replay conv --from 7" in out


def test_replay_on_a_terminal_goes_through_the_pager(ledger):
    main, child = pty.openpty()
    env = {**os.environ, "PAGER": "cat", "COLUMNS": "200"}
    process = subprocess.Popen(
        [str(EXE), "replay", "conv", "--db", str(ledger), "--to", "3"],
        stdin=child,
        stdout=child,
        stderr=child,
        env=env,
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
    assert "seq 3 " in out
    assert "seq 4 " not in out


# ---------------------------------------------------------------------------- verify


def test_verify_passes_then_names_a_tampered_row(ledger):
    assert "1 hash chain(s) intact, 11 records checked" in ok("verify", "--db", ledger).stdout
    with sqlite3.connect(ledger) as conn:
        conn.execute(
            "UPDATE events SET payload = ? WHERE stream_id = 'conv' AND seq = 5",
            ('{"text":"2+2 is 5.","type":"AI"}',),
        )
    broken = run("verify", "--db", ledger)
    assert broken.returncode == 1
    assert "memory 'conv': first bad seq 5: stored hash does not match" in broken.stdout
    report = json.loads(run("verify", "conv", "--db", ledger, "--json").stdout)
    assert report["ok"] is False
    assert report["failures"] == [
        {"memory": "conv", "seq": 5, "reason": "stored hash does not match the record's content"}
    ]


# ---------------------------------------------------------------------------- export / import


def _hashes(store, key="conv"):
    return [(r.seq, r.recorded_at_text, r.hash) for r in store.read(key)]


def test_export_import_round_trip_verifies_and_time_travels(ledger, store, tmp_path):
    dump = tmp_path / "ledger.jsonl"
    ok("export", "-o", dump, "--db", ledger)
    header = json.loads(dump.read_text().splitlines()[0])
    assert (header["format"], header["version"]) == ("chatledger-jsonl", 1)
    copy_db = tmp_path / "copy.db"
    imported = json.loads(ok("import", dump, "--db", copy_db, "--json").stdout)
    assert imported["imported"] == {"conv": [1, 11]}
    assert "OK" in ok("verify", "--db", copy_db).stdout
    with SQLiteEventStore(copy_db) as copy:
        assert _hashes(copy) == _hashes(store)
        original, twin = _memory(store), _memory(copy)
        for seq in range(12):
            assert twin.as_of(seq=seq) == original.as_of(seq=seq)
    again = run("import", dump, "--db", copy_db)
    assert again.returncode == 1
    assert "memory 'conv' already has events 1..11" in again.stderr
    assert ok("export", "-o", dump, "--db", ledger, "--force")
    exists = run("export", "-o", dump, "--db", ledger)
    assert (exists.returncode, "pass --force" in exists.stderr) == (1, True)


def test_import_refuses_a_tampered_file_and_creates_nothing(ledger, tmp_path):
    dump = tmp_path / "ledger.jsonl"
    ok("export", "conv", "-o", dump, "--db", ledger)
    lines = dump.read_text().splitlines()
    record = json.loads(lines[3])
    record["payload"] = record["payload"].replace("calculator", "rm -rf")
    lines[3] = json.dumps(record)
    dump.write_text("\n".join(lines) + "\n")
    target = tmp_path / "new.db"
    refused = run("import", dump, "--db", target)
    assert refused.returncode == 1
    assert refused.stderr.startswith("chatledger: error: import of ")
    assert (
        "refused, nothing was written: the hash chain of 'conv' breaks at seq 3" in refused.stderr
    )
    assert not target.exists()


def test_import_from_stdin_and_export_to_stdout(ledger, tmp_path):
    dump = ok("export", "conv", "-o", "-", "--db", ledger).stdout
    target = tmp_path / "piped.db"
    ok("import", "-", "--db", target, stdin=dump)
    assert "conv" in ok("ids", "--db", target).stdout


def _drop_schema(schema):
    import psycopg
    from psycopg import sql

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_sqlite_to_postgres_and_back(ledger, store, tmp_path):
    require_pg()
    from eventlog.postgres import PostgresEventStore

    schema = f"t_{uuid.uuid4().hex[:12]}"
    dump, back = tmp_path / "out.jsonl", tmp_path / "back.jsonl"
    try:
        ok("export", "-o", dump, "--db", ledger)
        ok("import", dump, "--dsn", PG_DSN, "--schema", schema)
        assert "OK" in ok("verify", "--dsn", PG_DSN, "--schema", schema).stdout
        with PostgresEventStore(PG_DSN, schema=schema) as pg:
            assert _hashes(pg) == _hashes(store)
            original, twin = _memory(store), _memory(pg)
            for seq in range(12):
                assert twin.as_of(seq=seq) == original.as_of(seq=seq)
            for record in store.read("conv"):
                assert twin.as_of(at=record.recorded_at) == original.as_of(at=record.recorded_at)
        ok("export", "-o", back, "--dsn", PG_DSN, "--schema", schema)
        ok("import", back, "--db", tmp_path / "back.db")
        with SQLiteEventStore(tmp_path / "back.db") as again:
            assert _hashes(again) == _hashes(store)
    finally:
        _drop_schema(schema)


# ---------------------------------------------------------------------------- fork / compact


def test_fork_then_continue_with_a_memory(ledger, store):
    out = ok("fork", "conv", "--at", 6, "--to", "conv-b", "--db", ledger, "--json").stdout
    forked = json.loads(out)
    source = store.read("conv")[5]
    assert forked["forked_from"] == {"memory": "conv", "seq": 6, "hash": source.hash}
    (event,) = json_lines(ok("history", "conv-b", "--db", ledger, "--json").stdout)
    assert (event["kind"], event["forked_from"]) == ("messages_set", forked["forked_from"])
    branch = _memory(store, "conv-b")
    assert branch.messages() == _memory(store).as_of(seq=6)
    branch.add(a_message("user", "on the branch"))
    assert branch.messages()[-1].text == "on the branch"
    assert store.head("conv").seq == 11
    again = run("fork", "conv", "--to", "conv-b", "--db", ledger)
    assert again.returncode == 1
    assert "already has events" in again.stderr


def test_compact_snapshots_then_purges_idle_memories(tmp_path):
    path = tmp_path / "idle.db"
    with SQLiteEventStore(path) as store:
        with freeze_time("2020-01-01"):
            MessageWindowChatMemory(id="old", max_messages=3, store=store).add(a_message("user"))
        MessageWindowChatMemory(id="new", max_messages=3, store=store).add(a_message("user"))
    report = json.loads(ok("compact", "--idle-for", "1d", "--db", path, "--json").stdout)
    assert report == {"compacted": ["old"], "purged": [], "skipped": [], "errors": []}
    out = ok("compact", "--idle-for", "1d", "--purge-idle-for", "90d", "--db", path).stdout
    assert "purged: 1  old" in out
    events = json_lines(ok("history", "old", "--db", path, "--json").stdout)
    assert [e["kind"] for e in events] == ["memory_purged"]
    assert "erased 1 event(s)" in ok("history", "old", "--db", path).stdout
    runs = ok("history", "~sys:compaction", "--db", path).stdout
    assert "compacted 1, purged 0" in runs
    assert "compacted 0, purged 1" in runs
    # A purged memory cannot be re-created by import (streams start at seq 1): skipped.
    dump = tmp_path / "idle.jsonl"
    assert json.loads(ok("export", "-o", dump, "--db", path, "--json").stdout)["records"] == 2
    imported = ok("import", dump, "--db", tmp_path / "copy.db", "--skip-purged").stdout
    assert "skipped 'old': its history starts with a purge tombstone" in imported
    assert "new" in ok("ids", "--db", tmp_path / "copy.db").stdout


# ---------------------------------------------------------------------------- ids and errors


def test_int_ids_are_written_as_their_key(tmp_path):
    path = tmp_path / "int.db"
    with SQLiteEventStore(path) as store:
        memory = MessageWindowChatMemory(id=42, max_messages=3, store=store)
        memory.add(a_message("user", "int id"))
    assert [r["memory"] for r in json_lines(ok("ids", "--db", path, "--json").stdout)] == ["~i:42"]
    shown = ok("show", "~i:42", "--db", path, "--json").stdout
    assert [m.text for m in messages_from_json(shown)] == ["int id"]


def _error_cases(tmp_path, ledger):
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a database\n")
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    empty_file = tmp_path / "zero.db"
    empty_file.touch()
    db = ("--db", ledger)
    return [
        (("ids", "--db", tmp_path / "missing.db"), 1, "missing.db does not exist"),
        (("ids",), 1, "chatledger.db does not exist"),
        (("ids", "--db", empty_file), 1, "zero.db is empty"),
        (("diff", "conv", 0, 99, *db), 2, "B 99: the history of 'conv' ends at seq 11"),
        (("export", "-o", tmp_path / "x.jsonl", "--after", 3, *db), 2, "--after needs an ID"),
        (("compact", "--idle-for", "2d", "--purge-idle-for", "1d", *db), 2, "must not be shorter"),
        (("ids", "--db", text_file), 1, "cannot open"),
        (("ids", "--db", foreign), 1, "is not a chatledger database"),
        (("ids", "--db", tmp_path), 1, "is not a file"),
        (("show", "nope", *db), 1, "memory id 'nope' has no events"),
        (
            ("show", "conv", "--as-of", 99, *db),
            2,
            "--as-of 99: the history of 'conv' ends at seq 11",
        ),
        (("show", "conv", "--as-of", "x", *db), 2, "'x' is not a seq"),
        (("show", "conv", "--at", "yesterday", *db), 2, "not an ISO 8601 time"),
        (("show", "conv", "--policy", "tokens:9:nomodel", *db), 2, "unknown to jtokkit"),
        (("show", "conv", "--policy", "window", *db), 2, "write messages:N or tokens:N:MODEL"),
        (("history", "~t:[", *db), 2, "is not a memory id"),
        (("history", "conv", "--from", 0, *db), 2, "argument --from: must be at least 1"),
        (("show", "conv", "--policy", "messages:0", *db), 2, "'messages:0' is not a policy"),
        (("diff", "conv", 5, 2, *db), 2, "A must not be after B"),
        (("replay", "conv", "--from", 5, "--to", 2, *db), 2, "--from 5 is after --to 2"),
        (("explain", "conv", 10, *db), 1, "memory_cleared that brought 0 message(s)"),
        (("compact", "--idle-for", "3x", *db), 2, "'3x' is not a duration"),
        (("fork", "conv", "--to", "conv", *db), 1, "already has events"),
        (("import", text_file, "--db", tmp_path / "new.db"), 1, "not a chatledger export"),
        (("import", tmp_path / "absent.jsonl", *db), 1, "No such file"),
        (("verify", "--dsn", "host=127.0.0.1 port=1 dbname=x"), 1, "connect failed"),
        (("frobnicate",), 2, "invalid choice: 'frobnicate'"),
    ]


def test_errors_are_one_line_without_traceback(tmp_path, ledger):
    cases = _error_cases(tmp_path, ledger)
    # In parallel: each is an independent process that writes nothing.
    with ThreadPoolExecutor(max_workers=8) as pool:
        # Only `ids` without --db runs in tmp_path: coverage data of a subprocess lands in its cwd.
        results = list(
            pool.map(
                lambda case: run(*case[0], cwd=tmp_path if case[0] == ("ids",) else None), cases
            )
        )
    for (args, status, message), result in zip(cases, results, strict=True):
        where = f"chatledger {' '.join(map(str, args))}"
        assert result.returncode == status, f"{where}: {result.returncode} {result.stderr}"
        assert result.stderr.startswith("chatledger: error: "), where
        assert result.stderr.count("\n") == 1, f"{where}: {result.stderr}"
        assert message in result.stderr, f"{where}: {result.stderr}"
        assert "Traceback" not in result.stderr
        assert result.stdout == "", where
    # Check no command created a database where none was.
    assert not (tmp_path / "missing.db").exists()
    assert not (tmp_path / "chatledger.db").exists()
    assert not (tmp_path / "new.db").exists()
