"""What `chatledger import` says when there is nothing it can or need write: a file that starts
past the target's head (a gap), and a --resume whose records the target all holds already."""

from __future__ import annotations

import json

import pytest

from tests.factories import a_cut_export


@pytest.fixture
def held_to_5(ok, ledger, tmp_path):
    """A copy of the story's ledger holding "conv" up to seq 5 (of 11)."""
    full = ok("export", "conv", "-o", "-", "--db", ledger).stdout.splitlines(keepends=True)
    first = tmp_path / "first.jsonl"
    first.write_text("".join(a_cut_export(full[:6])))
    target = tmp_path / "copy.db"
    ok("import", first, "--db", target)
    return target


@pytest.mark.parametrize("resume", [(), ("--resume",)], ids=["plain", "resume"])
def test_a_file_starting_past_the_targets_head_names_what_would_fill_the_gap(
    ok, cli, ledger, held_to_5, resume
):
    # Before, the refusal told the user to import it again with --resume, which refuses it
    # the same way: resume finishes a file the target holds part of, never a gap.
    tail = held_to_5.with_name("tail.jsonl")
    ok("export", "conv", "--after", 8, "-o", tail, "--db", ledger)
    refused = cli("import", tail, "--db", held_to_5, *resume)
    assert refused.returncode == 1
    message = " ".join(refused.stderr.split())  # rich wraps long lines
    assert "memory 'conv' already has events 1..5 in the target" in message
    assert "start at seq 9: seqs 6..8 would be missing" in message
    assert "chatledger export --after 5" in message
    assert "import the earlier export that holds those seqs first" in message
    assert "import it again with resume" not in message
    # Check the remedy it names works.
    rest = held_to_5.with_name("rest.jsonl")
    ok("export", "conv", "--after", 5, "-o", rest, "--db", ledger)
    assert "imported 6 records" in " ".join(ok("import", rest, "--db", held_to_5).stdout.split())


def test_a_file_continuing_the_seqs_of_another_history_does_not_suggest_resume(
    ok, cli, held_to_5, tmp_path
):
    # seq 6 follows the head's seq but not its hash: another history, which resume refuses too.
    from eventlog import SQLiteEventStore, UserMessage
    from projections import MessageWindowChatMemory

    other = tmp_path / "other.db"
    with SQLiteEventStore(other) as store:
        MessageWindowChatMemory("conv", 4, store).add([UserMessage(f"m{i}") for i in range(7)])
    tail = tmp_path / "tail.jsonl"
    ok("export", "conv", "--after", 5, "-o", tail, "--db", other)
    refused = cli("import", tail, "--db", held_to_5)
    message = " ".join(refused.stderr.split())
    assert refused.returncode == 1 and "never overwrites" in message
    assert "import it again with resume" not in message


def test_a_resume_with_every_record_held_says_so_instead_of_an_empty_table(ok, ledger, tmp_path):
    dump = tmp_path / "ledger.jsonl"
    ok("export", "-o", dump, "--db", ledger)
    target = tmp_path / "copy.db"
    ok("import", dump, "--db", target)
    again = ok("import", dump, "--db", target, "--resume")
    # Before: an empty table titled "imported 0 records".
    assert again.stdout.strip() == "nothing to import: all 11 records already held"
    # Check --json keeps its shape.
    shaped = json.loads(ok("import", dump, "--db", target, "--resume", "--json").stdout)
    assert shaped == {"records": 0, "imported": {}, "skipped": [], "already": {"conv": 11}}


def test_a_resume_that_writes_some_records_still_lists_them(ok, ledger, held_to_5, tmp_path):
    dump = tmp_path / "ledger.jsonl"
    ok("export", "conv", "-o", dump, "--db", ledger)
    text = " ".join(ok("import", dump, "--db", held_to_5, "--resume").stdout.split())
    assert "imported 6 records" in text and "6..11" in text
    assert "resumed: 1 memory already held the file's first records (0 of them all)" in text
    assert "nothing to import" not in text
