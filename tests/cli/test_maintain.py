"""export, import, fork and compact, in-process; the PostgreSQL round trip when a server answers."""

from __future__ import annotations

import json
import uuid

from freezegun import freeze_time

from eventlog import SQLiteEventStore
from projections import MessageWindowChatMemory
from tests.cli.conftest import json_lines, memory
from tests.conftest import PG_DSN, require_pg
from tests.factories import a_message


def _hashes(store, key="conv"):
    return [(r.seq, r.recorded_at_text, r.hash) for r in store.read(key)]


def test_export_import_round_trip_verifies_and_time_travels(ok, cli, ledger, store, tmp_path):
    dump = tmp_path / "ledger.jsonl"
    assert "exported 11 records to" in ok("export", "-o", dump, "--db", ledger).stderr
    header = json.loads(dump.read_text().splitlines()[0])
    assert (header["format"], header["version"]) == ("chatledger-jsonl", 1)
    copy_db = tmp_path / "copy.db"
    imported = json.loads(ok("import", dump, "--db", copy_db, "--json").stdout)
    assert imported["imported"] == {"conv": [1, 11]}
    assert "OK" in ok("verify", "--db", copy_db).stdout
    with SQLiteEventStore(copy_db) as copy:
        assert _hashes(copy) == _hashes(store)
        original, twin = memory(store), memory(copy)
        for seq in range(12):
            assert twin.as_of(seq=seq) == original.as_of(seq=seq)
    again = cli("import", dump, "--db", copy_db)
    assert again.returncode == 1
    assert "memory 'conv' already has events 1..11" in again.stderr
    assert ok("export", "-o", dump, "--db", ledger, "--force")
    exists = cli("export", "-o", dump, "--db", ledger)
    assert (exists.returncode, "pass --force" in exists.stderr) == (1, True)
    assert json.loads(
        ok("export", "-o", tmp_path / "j.jsonl", "--json", "--db", ledger).stdout
    ) == {
        "records": 11,
        "file": str(tmp_path / "j.jsonl"),
    }


def test_export_to_a_place_it_cannot_write_names_the_file_and_writes_nothing(cli, ledger, tmp_path):
    # The error names -o FILE and the remedy, never the .partial file written beside it.
    missing = tmp_path / "nope" / "out.jsonl"
    refused = cli("export", "-o", missing, "--db", ledger)
    assert refused.returncode == 1
    assert f"-o {missing}: no directory {missing.parent}; create it first" in refused.stderr
    assert ".partial" not in refused.stderr
    directory = tmp_path / "dir"
    directory.mkdir()
    for extra in ((), ("--force",)):
        refused = cli("export", "-o", directory, "--db", ledger, *extra)
        assert refused.returncode == 1
        assert f"-o {directory} is a directory; name a file in it" in refused.stderr
    assert list(directory.iterdir()) == []
    assert not missing.parent.exists()


def test_export_refuses_a_damaged_memory_unless_asked_since_it_would_not_import(
    ok, cli, ledger, tmp_path
):
    # `export` used to write a tampered record and exit 0: a backup that `import` refuses,
    # found out only when it is needed.
    import sqlite3

    with sqlite3.connect(ledger) as conn:
        changed = conn.execute(
            "UPDATE events SET payload = replace(payload, '2+2', '2+3') WHERE seq = 2"
        ).rowcount
    assert changed == 1
    dump = tmp_path / "backup.jsonl"
    refused = cli("export", "-o", dump, "--db", ledger)
    assert refused.returncode == 1
    assert "memory 'conv' at seq 2" in refused.stderr
    assert "pass --allow-damaged" in refused.stderr
    assert not dump.exists() and not list(tmp_path.glob("*.partial"))
    # Forensics: as stored, with a warning that the file will not import.
    written = ok("export", "-o", dump, "--db", ledger, "--allow-damaged")
    assert "warning: exporting damaged records: 'conv' at seq 2" in written.stderr
    assert "will not import" in written.stderr
    assert "breaks at seq 2" in cli("import", dump, "--db", tmp_path / "copy.db").stderr


def test_export_without_system_streams_is_not_refused_for_their_damage(ok, cli, tmp_path):
    # A damaged ~sys:compaction run refused every export of the ledger, though without
    # --include-system the file holds none of it and imports (before the fix: refused).
    import sqlite3

    path = tmp_path / "sys.db"
    with SQLiteEventStore(path) as store:
        MessageWindowChatMemory("m", 5, store).add(a_message("user"))
    ok("compact", "--db", path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("UPDATE events SET meta = '{}' WHERE stream_id LIKE '~sys:%'").rowcount
    dump = tmp_path / "memories.jsonl"
    assert "exported 1 record" in ok("export", "-o", dump, "--db", path).stderr
    assert ok("import", dump, "--db", tmp_path / "copy.db")
    refused = cli("export", "-o", tmp_path / "all.jsonl", "--db", path, "--include-system")
    assert refused.returncode == 1 and "memory '~sys:compaction' at seq 1" in refused.stderr
    refused = cli("export", "~sys:compaction", "-o", tmp_path / "sys.jsonl", "--db", path)
    assert refused.returncode == 1 and "memory '~sys:compaction' at seq 1" in refused.stderr


def test_export_of_a_keyed_ledger_without_its_key_is_not_called_damaged(ok, tmp_path):
    # Without the chain key nothing can be checked: exported, with a note, never refused.
    path, key_file = tmp_path / "keyed.db", tmp_path / "chain.key"
    key_file.write_bytes(b"k" * 32)
    with SQLiteEventStore(path, chain_key=b"k" * 32) as keyed:
        MessageWindowChatMemory("m", 5, keyed).add(a_message("user"))
    dump = tmp_path / "keyed.jsonl"
    plain_run = ok("export", "-o", dump, "--db", path)
    assert "note: a keyed ledger without --key-file" in plain_run.stderr
    keyed_run = ok("export", "-o", dump, "--db", path, "--key-file", key_file, "--force")
    assert "note:" not in keyed_run.stderr and "exported 1 record" in keyed_run.stderr


def test_import_refuses_a_tampered_file_and_creates_nothing(ok, cli, ledger, tmp_path):
    dump = tmp_path / "ledger.jsonl"
    ok("export", "conv", "-o", dump, "--db", ledger)
    lines = dump.read_text().splitlines()
    record = json.loads(lines[3])
    record["payload"] = record["payload"].replace("calculator", "rm -rf")
    lines[3] = json.dumps(record)
    dump.write_text("\n".join(lines) + "\n")
    target = tmp_path / "new.db"
    refused = cli("import", dump, "--db", target)
    assert refused.returncode == 1
    assert refused.stderr.startswith("chatledger: error: import of ")
    assert (
        "refused, nothing was written: the hash chain of 'conv' breaks at seq 3" in refused.stderr
    )
    assert not target.exists()


def test_import_from_stdin_and_export_to_stdout(ok, ledger, tmp_path):
    dump = ok("export", "conv", "-o", "-", "--db", ledger).stdout
    target = tmp_path / "piped.db"
    table = ok("import", "-", "--db", target, stdin=dump).stdout
    assert f"imported 11 records into {target}" in table
    assert "conv" in ok("ids", "--db", target).stdout
    tail = ok("export", "conv", "--after", 9, "-o", "-", "--db", ledger).stdout
    assert [r.get("seq") for r in json_lines(tail)[1:]] == [10, 11]


def test_sqlite_to_postgres_and_back(ok, ledger, store, tmp_path):
    require_pg()
    import psycopg
    from psycopg import sql

    from eventlog.postgres import PostgresEventStore

    schema = f"t_{uuid.uuid4().hex[:12]}"
    dump, back = tmp_path / "out.jsonl", tmp_path / "back.jsonl"
    try:
        ok("export", "-o", dump, "--db", ledger)
        # Global options before the command work for PostgreSQL too.
        ok("--dsn", PG_DSN, "--schema", schema, "import", dump)
        assert "OK" in ok("verify", "--dsn", PG_DSN, "--schema", schema).stdout
        with PostgresEventStore(PG_DSN, schema=schema) as pg:
            assert _hashes(pg) == _hashes(store)
            original, twin = memory(store), memory(pg)
            for seq in range(12):
                assert twin.as_of(seq=seq) == original.as_of(seq=seq)
        ok("export", "-o", back, "--dsn", PG_DSN, "--schema", schema)
        ok("import", back, "--db", tmp_path / "back.db")
        with SQLiteEventStore(tmp_path / "back.db") as again:
            assert _hashes(again) == _hashes(store)
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_fork_then_continue_with_a_memory(ok, cli, ledger, store):
    out = ok("fork", "conv", "--at", 6, "--to", "conv-b", "--db", ledger, "--json").stdout
    forked = json.loads(out)
    source = store.read("conv")[5]
    assert forked["forked_from"] == {"memory": "conv", "seq": 6, "hash": source.hash}
    (event,) = json_lines(ok("history", "conv-b", "--db", ledger, "--json").stdout)
    assert (event["kind"], event["forked_from"]) == ("messages_set", forked["forked_from"])
    branch = memory(store, "conv-b")
    assert branch.messages() == memory(store).as_of(seq=6)
    branch.add(a_message("user", "on the branch"))
    assert branch.messages()[-1].text == "on the branch"
    assert store.head("conv").seq == 11
    again = cli("fork", "conv", "--to", "conv-b", "--db", ledger)
    assert again.returncode == 1
    assert "already has events" in again.stderr
    # A new id with "/" could be a string or a tuple, and no store can tell: it is refused.
    ambiguous = cli("fork", "conv", "--to", "fork/1", "--db", ledger)
    assert ambiguous.returncode == 2
    assert """the tuple '~t:["fork",1]'; write the one you mean""" in ambiguous.stderr
    text = ok("fork", "conv", "--to", '~t:["fork",1]', "--db", ledger).stdout
    assert "at seq 11 " in text
    assert """to '~t:["fork",1]': 1 message""" in text
    assert store.head(("fork", 1)).seq == 1


def test_compact_snapshots_then_purges_idle_memories(ok, tmp_path):
    path = tmp_path / "idle.db"
    with SQLiteEventStore(path) as store:
        with freeze_time("2020-01-01"):
            MessageWindowChatMemory(id="old", max_messages=3, store=store).add(a_message("user"))
        MessageWindowChatMemory(id="new", max_messages=3, store=store).add(a_message("user"))
    report = json.loads(ok("compact", "--idle-for", "1d", "--db", path, "--json").stdout)
    assert report == {"compacted": ["old"], "purged": [], "skipped": [], "errors": []}
    out = ok("compact", "--idle-for", "1d", "--purge-idle-for", "90d", "--db", path).stdout
    assert "purged: 1  old" in out
    assert "errors: 0  -" in out
    events = json_lines(ok("history", "old", "--db", path, "--json").stdout)
    # Check retention erased the content and kept the record and a receipt.
    assert [e["kind"] for e in events] == ["message_added", "memory_erased"]
    assert events[0]["erased"] is True
    assert "erased the content of 1 event: idle for more than 90 days" in (
        ok("history", "old", "--db", path).stdout
    )
    runs = ok("history", "~sys:compaction", "--db", path).stdout
    assert "compacted 1, purged 0" in runs
    assert "compacted 0, purged 1" in runs
    # Check an erased memory exports and imports with its proofs intact, still erased.
    dump = tmp_path / "idle.jsonl"
    assert json.loads(ok("export", "-o", dump, "--db", path, "--json").stdout)["records"] == 3
    ok("import", dump, "--db", tmp_path / "copy.db")
    with SQLiteEventStore(tmp_path / "copy.db") as copy:
        assert [r.erased for r in copy.read("old")] == [True, False]
        assert copy.verify().ok
