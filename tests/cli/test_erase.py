"""chatledger erase, in-process: confirmation, ID and --subject, receipts."""

from __future__ import annotations

import json

from eventlog import SQLiteEventStore
from tests.cli.conftest import memory
from tests.factories import a_message


def test_erase_refuses_without_yes_when_stdin_is_not_a_terminal(cli, ledger):
    result = cli("erase", "conv", "--reason", "r", "--db", ledger, stdin="y\n")
    assert result.returncode == 2
    assert "stdin is not a terminal; pass --yes" in result.stderr
    with SQLiteEventStore(ledger) as store:
        assert not any(r.erased for r in store.read("conv"))


def test_erase_one_memory_keeps_the_ledger_verifying(ok, ledger):
    out = json.loads(
        ok("erase", "conv", "--reason", "GDPR", "--yes", "--json", "--db", ledger).stdout
    )
    (erased,) = out["erased"]
    assert (erased["memory"], erased["first_seq"], erased["records"]) == ("conv", 1, 11)
    assert "OK" in ok("verify", "--db", ledger).stdout
    with SQLiteEventStore(ledger) as store:
        assert memory(store).messages() == []


def test_erase_subject_and_usage_errors(ok, cli, ledger):
    with SQLiteEventStore(ledger) as store:
        memory(store, ("alice", "s1")).add(a_message("user", "hi"))
        memory(store, ("bob", "s1")).add(a_message("user", "yo"))
    text = ok("erase", "--subject", '["alice"]', "--reason", "r", "--yes", "--db", ledger).stdout
    assert "erased" in text
    assert (
        "nothing to erase"
        in ok("erase", "--subject", '["alice"]', "--reason", "r", "--yes", "--db", ledger).stdout
    )
    both = cli("erase", "conv", "--subject", '["a"]', "--reason", "r", "--yes", "--db", ledger)
    assert both.returncode == 2
    assert "exactly one of ID" in both.stderr
    bad = cli("erase", "--subject", "{}", "--reason", "r", "--yes", "--db", ledger)
    assert bad.returncode == 2
    with SQLiteEventStore(ledger) as store:
        assert not store.read(("bob", "s1"))[0].erased


def test_erase_asks_on_a_terminal(cli, ledger, monkeypatch):
    monkeypatch.setattr("sys.stdin.isatty", lambda: True, raising=False)
    monkeypatch.setattr("builtins.input", lambda _prompt: "n")
    result = cli("erase", "conv", "--reason", "r", "--db", ledger)
    assert result.returncode == 1
    assert "nothing erased" in result.stderr
    monkeypatch.setattr("builtins.input", lambda _prompt: "yes")
    assert cli("erase", "conv", "--reason", "r", "--db", ledger).returncode == 0


def test_history_shows_erased_events_and_the_receipt(ok, ledger):
    ok("erase", "conv", "--reason", "GDPR", "--yes", "--db", ledger)
    text = ok("history", "conv", "--db", ledger).stdout
    assert "content erased" in text
    assert "GDPR" in text
    rows = [
        json.loads(line)
        for line in ok("history", "conv", "--json", "--db", ledger).stdout.splitlines()
    ]
    assert rows[0]["erased"] is True
    assert rows[-1]["kind"] == "memory_erased"
    assert rows[-1]["event"]["reason"] == "GDPR"


def test_an_encrypted_ledger_reads_with_its_keyring_and_erase_destroys_the_key(ok, cli, tmp_path):
    from eventlog.keyring_file import FileKeyring

    path, keys = tmp_path / "sealed.db", tmp_path / "keys.json"
    with SQLiteEventStore(path, keyring=FileKeyring(keys)) as store:
        memory(store, ("alice", "s1")).add(a_message("user", "alice's secret"))
        memory(store, ("bob", "s1")).add(a_message("user", "bob's note"))
    sealed = '["alice","s1"]'
    # Check the keyring opens the content, and without it the error names the remedy.
    shown = ok("history", "--id-json", sealed, "--db", path, "--keyring", keys).stdout
    assert "alice's secret" in shown
    blind = cli("history", "--id-json", sealed, "--db", path)
    assert blind.returncode != 0
    assert "encrypted" in blind.stderr
    assert "keyring=" in blind.stderr
    assert "Traceback" not in blind.stderr
    missing = cli("history", "--id-json", sealed, "--db", path, "--keyring", tmp_path / "nope")
    assert missing.returncode == 2
    assert "--keyring" in missing.stderr
    assert "no such file" in missing.stderr
    # Check erase --subject destroys alice's key and leaves bob's.
    ok("erase", "--subject", '["alice"]', "--reason", "r", "--yes", "--db", path, "--keyring", keys)
    data = json.loads(keys.read_text())
    assert [entry["subject"] for entry in data["keys"].values()] == ['~t:["bob"]']
    shown = ok("history", "--id-json", '["bob","s1"]', "--db", path, "--keyring", keys).stdout
    assert "bob's note" in shown


def test_a_keyring_wrapped_under_a_master_key_opens_only_with_it(ok, cli, tmp_path):
    from eventlog.keyring_file import FileKeyring

    path, keys, master = tmp_path / "sealed.db", tmp_path / "keys.json", tmp_path / "master.key"
    master.write_bytes(bytes(range(32)))
    with SQLiteEventStore(path, keyring=FileKeyring(keys, master_key=master.read_bytes())) as st:
        memory(st, ("alice", "s1")).add(a_message("user", "alice's secret"))
        memory(st, ("bob", "s1")).add(a_message("user", "bob's note"))
    sealed = ("history", "--id-json", '["alice","s1"]', "--db", path, "--keyring", keys)
    assert "alice's secret" in ok(*sealed, "--keyring-master-key", master).stdout
    unwrapped = cli(*sealed)
    assert unwrapped.returncode == 1 and "--keyring-master-key FILE" in unwrapped.stderr
    short = tmp_path / "short.key"
    short.write_bytes(b"0123")
    bad = cli(*sealed, "--keyring-master-key", short)
    assert bad.returncode == 2 and "must be 32 bytes, not 4" in bad.stderr
    alone = cli(
        "history", "--id-json", '["bob","s1"]', "--db", path, "--keyring-master-key", master
    )
    assert alone.returncode == 2 and "goes with --keyring FILE" in alone.stderr
    gone = cli(*sealed, "--keyring-master-key", tmp_path / "none.key")
    assert gone.returncode == 2 and "no such file" in gone.stderr
    # Erasing a subject destroys its key in the wrapped file, which stays wrapped.
    ok("erase", "--subject", '["alice"]', "--reason", "r", "--yes", "--db", path, "--keyring",
       keys, "--keyring-master-key", master)  # fmt: skip
    doc = json.loads(keys.read_text())
    assert doc["format"] == 2 and len(doc["destroyed"]) == 1
    assert all("key" not in entry for entry in doc["keys"].values())
    erased = ok(*sealed, "--keyring-master-key", master).stdout
    assert "alice's secret" not in erased
