"""Every error is one line on stderr with a shell remedy, the right exit status, and no output.

One parametrized case per error, so one failure never hides the others.
"""

from __future__ import annotations

import sqlite3

import pytest

from projections.cli.errors import message
from tests.conftest import PG_DSN, require_pg

# (case id, arguments with {ledger}/{tmp} placeholders, exit status, text in the message)
CASES = [
    (
        "missing-db",
        ("ids", "--db", "{tmp}/missing.db"),
        1,
        "no such file: {tmp}/missing.db; check --db",
    ),
    ("default-db", ("ids",), 1, "no such file: chatledger.db; pass --db PATH"),
    ("empty-db", ("ids", "--db", "{tmp}/zero.db"), 1, "zero.db is empty"),
    ("text-db", ("ids", "--db", "{tmp}/notes.txt"), 1, "is not a chatledger database"),
    ("foreign-db", ("ids", "--db", "{tmp}/foreign.db"), 1, "is not a chatledger database"),
    ("dir-db", ("ids", "--db", "{tmp}"), 1, "is a directory"),
    ("db-and-dsn", ("ids", "--db", "{ledger}", "--dsn", "host=x"), 2, "pass one of them"),
    ("db-before-dsn-after", ("--db", "{ledger}", "ids", "--dsn", "host=x"), 2, "pass one of them"),
    ("schema-on-sqlite", ("ids", "--db", "{ledger}", "--schema", "s"), 2, "needs --dsn URL"),
    ("schema-before", ("--schema", "s", "ids", "--db", "{ledger}"), 2, "SQLite --db file has no"),
    ("diff-past-head", ("diff", "conv", 0, 99), 2, "B 99: the history of 'conv' ends at seq 11"),
    ("after-without-id", ("export", "-o", "{tmp}/x.jsonl", "--after", 3), 2, "--after needs an ID"),
    (
        "purge-shorter",
        ("compact", "--idle-for", "2d", "--purge-idle-for", "1d"),
        2,
        "not be shorter",
    ),
    ("unknown-id", ("show", "nope"), 1, "memory id nope has no events in"),
    (
        "unknown-tuple",
        ("show", "nope/1"),
        1,
        """neither the string id '~s:"nope/1"' nor the tuple id '~t:["nope",1]' has events""",
    ),
    ("as-of-past-head", ("show", "conv", "--as-of", 99), 2, "--as-of 99: the history of 'conv'"),
    ("bad-seq", ("show", "conv", "--as-of", "x"), 2, "'x' is not a seq"),
    ("bad-time", ("show", "conv", "--at", "yesterday"), 2, "not an ISO 8601 time"),
    ("bad-model", ("show", "conv", "--policy", "tokens:9:nomodel"), 2, "unknown to jtokkit"),
    ("bad-policy", ("show", "conv", "--policy", "window"), 2, "write messages:N or tokens:N:MODEL"),
    ("zero-policy", ("show", "conv", "--policy", "messages:0"), 2, "'messages:0' is not a policy"),
    ("bad-key", ("history", "~t:["), 2, "in single quotes for the shell"),
    ("unquoted-tuple", ("history", "~t:[demo,1]"), 2, """(e.g. '~t:["demo",1]')"""),
    ("bad-id-json", ("history", "--id-json", "[demo"), 2, "is not JSON; quote it"),
    ("id-twice", ("history", "conv", "--id-json", '"conv"'), 2, "pass the memory id once"),
    ("no-id", ("history",), 2, "history needs a memory ID (or --id-json JSON)"),
    ("from-zero", ("history", "conv", "--from", 0), 2, "argument --from: must be at least 1"),
    ("a-after-b", ("diff", "conv", 5, 2), 2, "A must not be after B"),
    ("from-after-to", ("replay", "conv", "--from", 5, "--to", 2), 2, "--from 5 is after --to 2"),
    ("explain-clear", ("explain", "conv", 10), 1, "memory_cleared that brought 0"),
    ("bad-duration", ("compact", "--idle-for", "3x"), 2, "'3x' is not a duration"),
    ("fork-onto-used", ("fork", "conv", "--to", "conv"), 1, "already has events"),
    (
        "import-text",
        ("import", "{tmp}/notes.txt", "--db", "{tmp}/new.db"),
        1,
        "not a chatledger export",
    ),
    ("import-missing", ("import", "{tmp}/absent.jsonl"), 1, "no such file: {tmp}/absent.jsonl"),
    ("no-server", ("verify", "--dsn", "host=127.0.0.1 port=1 dbname=x"), 1, "connect failed"),
    ("unknown-command", ("frobnicate",), 2, "invalid choice: 'frobnicate'"),
]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "notes.txt").write_text("not a database\n")
    with sqlite3.connect(tmp_path / "foreign.db") as conn:
        conn.execute("CREATE TABLE t (x)")
    (tmp_path / "zero.db").touch()
    return tmp_path


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_error(cli, files, ledger, monkeypatch, case):
    _, args, status, text = case
    monkeypatch.chdir(files)  # so that a default ./chatledger.db is looked for here
    fill = {"tmp": str(files), "ledger": str(ledger)}
    argv = [str(a).format(**fill) for a in args]
    if "--db" not in argv and "--dsn" not in argv and argv != ["ids"]:
        argv += ["--db", str(ledger)]
    result = cli(*argv)
    assert result.returncode == status, result.stderr
    assert result.stderr.startswith("chatledger: error: ")
    assert result.stderr.count("\n") == 1, result.stderr
    assert text.format(**fill) in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    # No command created a database where none was.
    for name in ("missing.db", "chatledger.db", "new.db"):
        assert not (files / name).exists()


def test_a_missing_postgres_schema_names_cli_remedies(cli):
    require_pg()
    result = cli("ids", "--dsn", PG_DSN, "--schema", "no_such_schema_here")
    assert result.returncode == 1
    assert "holds no chatledger ledger" in result.stderr
    assert "`chatledger import FILE --dsn URL --schema no_such_schema_here`" in result.stderr
    assert "setup()" not in result.stderr


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (
            ValueError("the window refers to event 3 (purged or altered); run verify()"),
            "run `chatledger verify`",
        ),
        (
            ValueError(
                "schema 's' lacks eventlog migrations [0]; call store.setup() once (or open "
                "with create_schema=True), or apply eventlog.postgres.MIGRATIONS with your "
                "migration tool"
            ),
            "create one with `chatledger import FILE --dsn URL --schema S`",
        ),
        (FileNotFoundError(2, "No such file or directory", "x.jsonl"), "no such file: x.jsonl"),
        (IsADirectoryError(21, "Is a directory", "d"), "d is a directory; pass a file"),
        (PermissionError(13, "Permission denied", "p"), "permission denied: p"),
        (ValueError("two\n  lines"), "two lines"),
        (
            ValueError("keyed chain: open the store with chain_key= to verify"),
            "keyed chain: pass --key-file FILE (the chain key) to verify",
        ),
        (
            ValueError(
                "x is a keyed store and this store was opened without its key; open it "
                "with chain_key= to write"
            ),
            "opened without its key; pass --key-file FILE (the chain key) to write",
        ),
        (
            ValueError(
                "append failed: another connection held the write lock of x.db for more "
                "than busy_timeout=30.0 s; raise busy_timeout or find the long transaction"
            ),
            "for more than busy_timeout=30.0 s; find the process holding it (an application "
            "writing, a long transaction) and run the command again",
        ),
        (ValueError(), "ValueError"),
    ],
)
def test_library_messages_get_cli_remedies(error, text):
    assert message(error).endswith(text)


READ_COMMANDS = [
    ("ids",),
    ("verify",),
    ("history", "x"),
    ("show", "x"),
    ("diff", "x", "1", "2"),
    ("explain", "x", "1"),
    ("replay", "x"),
    ("digest",),
    ("prove", "x", "1", "-o", "-"),
    ("export", "-o", "-"),
    ("serve", "--port", "8799"),
    ("sent", "x", "1"),
    ("langgraph", "x"),
]


@pytest.mark.parametrize("journal", ["delete", "wal"])
@pytest.mark.parametrize("tables", ["orders", "events"], ids=["orders", "a table named events"])
@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
def test_read_commands_on_another_apps_database_change_nothing(
    cli, tmp_path, command, tables, journal
):
    path = tmp_path / "other_app.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.execute(f"CREATE TABLE {tables} (id INTEGER PRIMARY KEY, item TEXT)")
    conn.execute(f"INSERT INTO {tables} (item) VALUES ('tea')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    listing = sorted(p.name for p in tmp_path.iterdir())

    result = cli(*command, "--db", path)

    # Check the refusal, and that the file is byte for byte what it was, its journal mode as
    # it was, and nothing new beside it (no -wal or -shm).
    assert result.returncode == 1
    assert "is not a chatledger database" in result.stderr
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == journal


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
def test_read_commands_on_a_scrambled_file_create_nothing_beside_it(cli, tmp_path, command):
    path = tmp_path / "scrambled.db"
    # A SQLite header, then noise: SQLite would open it (and make -wal/-shm for a WAL header).
    header = bytearray(b"SQLite format 3\x00" + bytes(84))
    header[18:20] = b"\x02\x02"  # WAL read and write versions
    path.write_bytes(bytes(header) + bytes(range(256)) * 64)
    before = path.read_bytes()

    result = cli(*command, "--db", path)

    assert result.returncode == 1
    assert "is not a chatledger database" in result.stderr
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scrambled.db"]
