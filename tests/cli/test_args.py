"""The grammar: global options in either place, memory ids as typed into a shell, arg types."""

from __future__ import annotations

import shlex
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventlog import SQLiteEventStore
from eventlog.ids import memory_key
from projections import MessageWindowChatMemory
from projections.cli.args import (
    parse_duration,
    parse_id,
    parse_id_json,
    parse_when,
    shell_id,
    shorthand,
)
from projections.cli.errors import UsageError
from tests.cli.conftest import json_lines
from tests.factories import a_message

# ---------------------------------------------------------------------------- global options


def test_global_options_work_before_or_after_the_command(ok, ledger):
    after = ok("ids", "--db", ledger, "--json").stdout
    assert json_lines(after)[0]["memory"] == "conv"
    assert ok("--db", ledger, "ids", "--json").stdout == after
    assert ok("--db", ledger, "--json", "ids").stdout == after
    assert ok("--json", "ids", "--db", ledger).stdout == after
    assert (
        ok("--db", ledger, "history", "conv", "--to", 2).stdout
        == ok("history", "conv", "--to", 2, "--db", ledger).stdout
    )


def test_an_option_after_the_command_wins_and_an_absent_one_resets_nothing(
    ok, cli, ledger, tmp_path
):
    other = tmp_path / "missing.db"
    assert "conv" in ok("--db", other, "ids", "--db", ledger).stdout
    assert cli("--db", ledger, "ids", "--db", other).returncode == 1


def test_help_shows_the_global_options(ok):
    for args in (["--help"], ["ids", "--help"], ["show", "--help"]):
        out = ok(*args).stdout
        for option in ("--db PATH", "--dsn URL", "--schema S", "--json"):
            assert option in out, (args, option)
    assert "demo/1" in ok("--help").stdout
    assert ok("--version").stdout.startswith("chatledger ")


# ---------------------------------------------------------------------------- memory ids


@pytest.mark.parametrize(
    ("text", "memory_id"),
    [
        ("conv", "conv"),
        ("", ""),
        ("demo/1", ("demo", 1)),
        ("user/7/abc", ("user", 7, "abc")),
        ("a/01", ("a", "01")),
        ("a/-7", ("a", -7)),
        ("a/+7", ("a", "+7")),
        ("a/", ("a", "")),
        ("0/1", (0, 1)),
        ("~i:42", 42),
        ("~~x", "~x"),
        ('~s:"a/b"', "a/b"),
        ('~t:["demo",1]', ("demo", 1)),
        (
            "~u:12345678-1234-5678-1234-567812345678",
            uuid.UUID(int=0x12345678123456781234567812345678),
        ),
    ],
)
def test_id_syntax(text, memory_id):
    assert parse_id(text) == memory_key(memory_id)


@pytest.mark.parametrize(
    ("text", "memory_id"),
    [
        ('"a/b"', "a/b"),
        ("42", 42),
        ('["demo",1]', ("demo", 1)),
        (
            '[["a",{"uuid":"12345678-1234-5678-1234-567812345678"}]]',
            (("a", uuid.UUID(int=0x12345678123456781234567812345678)),),
        ),
    ],
)
def test_id_json_syntax(text, memory_id):
    assert parse_id_json(text) == memory_key(memory_id)


@pytest.mark.parametrize("text", ["~t:[demo,1]", "~x", "~i:4x2"])
def test_an_unparsable_id_says_how_to_quote_it(text):
    with pytest.raises(UsageError) as caught:
        parse_id(text)
    assert """in single quotes for the shell (e.g. '~t:["demo",1]')""" in str(caught.value)
    assert "demo/1" in str(caught.value)


@pytest.mark.parametrize("text", ["[true]", "1.5", '{"uuid": "nope"}', "null", "[demo"])
def test_an_unparsable_id_json_is_a_usage_error(text):
    with pytest.raises(UsageError, match="--id-json"):
        parse_id_json(text)


_parts = st.one_of(
    st.text(max_size=6), st.integers(min_value=-(10**6), max_value=10**6), st.uuids()
)
memory_ids = st.recursive(
    _parts, lambda inner: st.tuples(inner, inner) | st.tuples(inner), max_leaves=4
)


@given(memory_ids)
def test_an_id_as_printed_reads_back_after_the_shell(memory_id):
    key = memory_key(memory_id)
    (word,) = shlex.split(shell_id(key))
    assert parse_id(word) == key
    short = shorthand(key)
    if short is not None:
        (word,) = shlex.split(shlex.quote(short))
        assert parse_id(word) == key


def test_shorthand_only_where_it_reads_back():
    assert shorthand(memory_key(("demo", 1))) == "demo/1"
    assert shorthand(memory_key(("demo", "1"))) is None
    assert shorthand(memory_key(("a/b", 1))) is None
    assert shorthand(memory_key(("solo",))) is None
    assert shorthand("conv") is None
    assert shorthand("~t:[") is None
    # A shorthand starting with "~" reads as a stored key (hypothesis found ("~", "")).
    assert shorthand(memory_key(("~", ""))) is None
    assert shorthand(memory_key(("~t:x", 1))) is None


def test_ids_given_every_way_reach_the_same_memory(ok, tmp_path):
    path = tmp_path / "ids.db"
    with SQLiteEventStore(path) as store:
        for memory_id in (("demo", 1), 42, "a/b", "~tilde", "with space"):
            MessageWindowChatMemory(id=memory_id, max_messages=3, store=store).add(
                a_message("user", f"in {memory_id!r}")
            )
    listed = ok("ids", "--db", path).stdout
    for word in ("""'~t:["demo",1]'""", "'~i:42'", """'~s:"a/b"'""", "'~~tilde'", "'with space'"):
        assert word in listed
    for args in (["demo/1"], ['~t:["demo",1]'], ["--id-json", '["demo",1]']):
        assert "in ('demo', 1)" in ok("show", *args, "--db", path).stdout
    assert "in 'a/b'" in ok("show", '~s:"a/b"', "--db", path).stdout
    assert "in 'a/b'" in ok("show", "--id-json", '"a/b"', "--db", path).stdout
    assert "in 42" in ok("show", "--id-json", "42", "--db", path).stdout
    assert "in '~tilde'" in ok("show", "~~tilde", "--db", path).stdout


# ---------------------------------------------------------------------------- argument types


def test_durations_and_times():
    assert parse_duration("1d12h") == timedelta(days=1, hours=12)
    assert parse_duration("90 d") == timedelta(days=90)
    # A time to the second names the whole second (tests/cli/test_time_and_ranges.py).
    assert parse_when("2025-06-01T12:00:00") == datetime(2025, 6, 1, 12, 0, 0, 999_999, tzinfo=UTC)
    assert parse_when("2025-06-01T12:00:00.0") == datetime(2025, 6, 1, 12, tzinfo=UTC)
    assert parse_when("2025-06-01T12:00:00+02:00").utcoffset() == timedelta(hours=2)


@pytest.fixture
def slash_db(tmp_path):
    path = tmp_path / "slash.db"
    with SQLiteEventStore(path) as store:
        for memory_id in (("demo", 1), "both/2", ("both", 2)):
            MessageWindowChatMemory(id=memory_id, max_messages=3, store=store).add(
                a_message("user", f"in {memory_id!r}")
            )
    return path


def test_a_slash_is_never_reinterpreted_silently(cli, slash_db):
    # Only the tuple exists: it is read, and stderr says how to write it.
    tuple_only = cli("show", "demo/1", "--db", slash_db)
    assert (tuple_only.returncode, "in ('demo', 1)" in tuple_only.stdout) == (0, True)
    assert tuple_only.stderr == (
        """chatledger: note: read demo/1 as the tuple id '~t:["demo",1]' (no memory is named """
        """'~s:"demo/1"'); write '~t:["demo",1]' or --tuple-id demo/1\n"""
    )
    # Both exist: the string is what was typed; the note names the tuple's spellings.
    both = cli("show", "both/2", "--db", slash_db)
    assert "in 'both/2'" in both.stdout
    assert """for the tuple write '~t:["both",2]' or --tuple-id both/2""" in both.stderr
    # The canonical spelling, --tuple-id and --id-json are read as written, without a note.
    for args in (['~t:["both",2]'], ["--tuple-id", "both/2"], ["--id-json", '["both",2]']):
        exact = cli("show", *args, "--db", slash_db)
        assert ("in ('both', 2)" in exact.stdout, exact.stderr) == (True, "")
    assert cli("show", "demo/1", "--tuple-id", "demo/1", "--db", slash_db).returncode == 2


def test_headers_print_the_canonical_spelling(ok, slash_db):
    out = ok("history", "--tuple-id", "demo/1", "--db", slash_db).stdout
    assert out.startswith("""history of '~t:["demo",1]' (1 event)""")
    out = ok("show", "--tuple-id", "demo/1", "--db", slash_db).stdout
    assert out.startswith("""'~t:["demo",1]' after seq 1 of 1""")


def test_an_id_with_controls_or_a_leading_dash_is_listed_as_a_word_that_reads_back(ok, tmp_path):
    # `ids` showed a tab as spaces, a newline raw (one id on two lines of a listing read with
    # grep and cut) and a bidi control as U+FFFD, and a leading "-" bare (argparse's option):
    # each listed spelling named no memory when given back.
    path = tmp_path / "odd.db"
    odd = ["tab\there", "new\nline", "\u202eevil", "c1\x9bx", "del\x7f", "-x", "--db"]
    with SQLiteEventStore(path) as store:
        for memory_id in odd:
            MessageWindowChatMemory(id=memory_id, max_messages=3, store=store).add(
                a_message("user", f"in {memory_id!r}")
            )
    lines = ok("ids", "--db", path).stdout.splitlines()[1:]
    assert len(lines) == len(odd)  # one line per memory
    for line in lines:
        (word,) = shlex.split(line.split("  ")[0])
        assert word.isprintable() and not word.startswith("-")
        shown = ok("history", word, "--db", path).stdout
        assert f"history of {line.split('  ')[0]} (1 event)" in shown
    assert (
        '"memory": "\\u202eevil"' in ok("show", '~s:"\\u202eevil"', "--json", "--db", path).stdout
    )
