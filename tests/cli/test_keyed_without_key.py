"""A keyed ledger read without --key-file: the command says the key is missing, in one line on
stderr, and never that a chain is broken or that the database should be restored from a backup
(the records are fine; only the key can vouch for them)."""

from __future__ import annotations

import pytest

from eventlog import SQLiteEventStore, UserMessage
from tests.cli.conftest import memory

COMMANDS = [
    ["verify"],
    ["verify", "conv"],
    ["history", "conv"],
    ["show", "conv"],
    ["diff", "conv", "1", "2"],
    ["explain", "conv", "1"],
    ["replay", "conv", "--no-pager"],
    ["prove", "conv", "1", "-o", "-"],
    ["sent", "conv", "2"],
    ["fork", "conv", "--to", "copy"],
]


@pytest.fixture
def keyed(tmp_path):
    key = tmp_path / "chain.key"
    key.write_bytes(b"0123456789abcdef-chain-key")
    path = tmp_path / "keyed.db"
    with SQLiteEventStore(path, chain_key=key.read_bytes()) as store:
        conv = memory(store)
        conv.add(UserMessage("hi"))
        conv.add(UserMessage("there"))
    return path, key


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a[:2]) for a in COMMANDS])
def test_a_keyed_ledger_without_its_key_is_not_called_broken(cli, keyed, args):
    path, _ = keyed
    before = path.read_bytes()
    result = cli("--db", path, *args)
    assert result.returncode == 1
    assert "--key-file" in result.stderr and "keyed ledger" in result.stderr
    assert result.stderr.count("\n") == 1
    said = (result.stdout + result.stderr).lower()
    for wrong in ("broken", "backup", "chain_key=", "breaks at"):
        assert wrong not in said, said
    assert path.read_bytes() == before


def test_with_its_key_every_command_reads_it(ok, keyed):
    path, key = keyed
    for args in COMMANDS[:7]:
        ok("--db", path, "--key-file", key, *args)
