"""The id key of erasable ids (eventlog.names) on its own: a pseudonym is the keyed MAC the
module documents, under the key its mode names and no other, it cannot be computed without
that secret, and a ``names`` row names a memory only when it is that memory's own row, stored
as the mode says it must be. Each test tries what someone without the secret would."""

from __future__ import annotations

import hashlib
import hmac
import pathlib

import pytest

from eventlog import ChainKeyError, SQLiteEventStore
from eventlog.ids import PSEUDONYM_PREFIX, StreamKey, memory_key
from eventlog.keyring import MemoryKeyring, is_sealed, subject_of
from eventlog.names import IdKeyring, new_mode
from eventlog.testing.records import batch

CHAIN_KEY = bytes(range(32))
STORED = "ab" * 32
ALICE = memory_key(("alice", "s1"))
BOB = memory_key(("bob", "s1"))


def _mac(key: bytes, clear: str) -> str:
    return PSEUDONYM_PREFIX + hmac.new(key, clear.encode(), hashlib.sha256).hexdigest()[:32]


def _ids(mode: str, **secrets: object) -> IdKeyring:
    args: dict[str, object] = {"stored_key": None, "keyring": None, "chain_key": None}
    args.update(secrets)
    return IdKeyring(mode, where="test", **args)  # type: ignore[arg-type]


def test_new_ledgers_key_their_ids_under_the_strongest_secret_given():
    ring = MemoryKeyring()
    assert new_mode(keyring=ring, chain_key=CHAIN_KEY) == ("keyring", None)
    assert new_mode(keyring=None, chain_key=CHAIN_KEY) == ("chain", None)
    mode, stored = new_mode(keyring=None, chain_key=None)
    assert mode == "stored" and stored is not None and len(bytes.fromhex(stored)) == 32


@pytest.mark.parametrize("bad", [None, "", "zz" * 32, "ab" * 31, "ab" * 33, "ab" * 32 + "a"])
def test_a_stored_id_key_that_is_not_32_bytes_is_refused(bad):
    # A settings table edited by hand must not leave a short (guessable) or empty id key.
    with pytest.raises(ValueError, match="64 hex digits"):
        _ids("stored", stored_key=bad)


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="not one of keyring, chain, stored"):
        _ids("clear", stored_key=STORED)


def test_a_pseudonym_is_the_truncated_mac_of_the_id_under_the_modes_key():
    stored = _ids("stored", stored_key=STORED)
    pseudonym = stored.pseudonym(ALICE, "read")
    assert pseudonym == _mac(bytes.fromhex(STORED), ALICE)
    assert len(pseudonym) == len(PSEUDONYM_PREFIX) + 32
    assert stored.clear_key(pseudonym) == ALICE and stored.clear_key(_mac(b"x", ALICE)) is None
    chained = _ids("chain", chain_key=CHAIN_KEY, keyring=MemoryKeyring())
    derived = hmac.new(CHAIN_KEY, b"chatledger.ids.v1", hashlib.sha256).digest()
    assert chained.pseudonym(ALICE, "read") == _mac(derived, ALICE)


def test_a_keyring_ledgers_pseudonyms_come_from_the_keyring_never_the_chain_key():
    # Both secrets given: the id key is the keyring's, so a chain key alone finds no memory.
    ring = MemoryKeyring()
    ids = _ids("keyring", keyring=ring, chain_key=CHAIN_KEY)
    assert ids.pseudonym(ALICE, "read") == _mac(ring.current("~sys:ids")[1], ALICE)
    derived = hmac.new(CHAIN_KEY, b"chatledger.ids.v1", hashlib.sha256).digest()
    assert ids.pseudonym(BOB, "read") != _mac(derived, BOB)


def test_without_the_secret_no_pseudonym_is_computed():
    with pytest.raises(ChainKeyError, match="keyring"):
        _ids("keyring", chain_key=CHAIN_KEY).pseudonym(ALICE, "read")
    with pytest.raises(ChainKeyError, match="chain key"):
        _ids("chain", keyring=MemoryKeyring()).pseudonym(ALICE, "read")


def test_names_rows_are_sealed_only_in_keyring_mode():
    ring = MemoryKeyring()
    keyed = _ids("keyring", keyring=ring)
    pseudonym = keyed.pseudonym(ALICE, "append")
    row = keyed.stored_name(pseudonym, ALICE)
    assert is_sealed(row) and "alice" not in row
    assert keyed.read_name(pseudonym, row) == ("alice", "s1")
    # Sealed under the memory's own key: shredding that memory's key shreds the id.
    ring.destroy_memory(subject_of(("alice", "s1")), pseudonym)
    assert keyed.read_name(pseudonym, row) is None
    chained = _ids("chain", chain_key=CHAIN_KEY, keyring=ring)
    assert chained.stored_name(chained.pseudonym(ALICE, "append"), ALICE) == ALICE


def test_a_names_row_names_its_memory_only_at_its_own_pseudonym():
    ids = _ids("stored", stored_key=STORED)
    alice, bob = ids.pseudonym(ALICE, "append"), ids.pseudonym(BOB, "append")
    assert ids.read_name(alice, ALICE) == ("alice", "s1")
    # Someone who can write rows (not the id key) points bob's pseudonym at alice's id.
    assert ids.read_name(bob, ALICE) is None
    assert ids.read_name(alice, "not a memory key") is None
    # A sealed row in a ledger without a keyring cannot be read, and is not taken as clear.
    assert ids.read_name(alice, "enc1:k:AAAA") is None


def test_a_keyring_ledger_reads_no_name_in_clear_and_no_name_sealed_for_another_row():
    ring = MemoryKeyring()
    ids = _ids("keyring", keyring=ring)
    alice, bob = ids.pseudonym(ALICE, "append"), ids.pseudonym(BOB, "append")
    # A clear row at the right pseudonym: a keyring ledger never writes one, so someone did.
    assert ids.read_name(alice, ALICE) is None
    # Alice's sealed row copied to bob's: the associated data names the row, so it fails.
    assert ids.read_name(bob, ids.stored_name(alice, ALICE)) is None
    assert ids.read_name(alice, "enc1:nokey:AAAA") is None
    # Opened without the keyring: a sealed row is unreadable, never an error.
    blind = _ids("keyring")
    assert blind.read_name(alice, ids.stored_name(alice, ALICE)) is None


def test_without_the_id_key_a_clear_row_is_all_there_is():
    # A chain-mode ledger opened without its chain key still lists its ids (rows in clear).
    blind = _ids("chain")
    assert blind.read_name("~p:" + "0" * 32, ALICE) == ("alice", "s1")


def test_a_ledger_is_erasable_only_when_created_so_and_stays_so(tmp_path: pathlib.Path):
    plain_path, erasable_path = tmp_path / "plain.db", tmp_path / "erasable.db"
    with SQLiteEventStore(plain_path) as plain:
        assert not plain.erasable_ids
        plain.append(("alice", "s1"), batch("hi"))
        assert [i.stream_id for i in plain.streams()] == [ALICE]
    with SQLiteEventStore(erasable_path, erasable_ids=True) as first:
        first.append(("alice", "s1"), batch("hi"))
    # Check a second open asking for erasable ids again (as an app does on every start) works.
    with SQLiteEventStore(erasable_path, erasable_ids=True) as again:
        assert again.erasable_ids
        (info,) = again.streams()
        assert info.stream_id.startswith(PSEUDONYM_PREFIX) and info.memory_id == ("alice", "s1")
        assert not isinstance(info.memory_id, StreamKey)


def test_the_pseudonym_cache_is_bounded():
    # One who can make memories must not grow it forever: past 100,000 ids it starts over,
    # and a pseudonym computed again is the same.
    ids = _ids("stored", stored_key=STORED)
    ids._pseudonyms = {str(i): "~p:x" for i in range(100_000)}
    ids.pseudonym(ALICE, "append")
    assert len(ids._pseudonyms) == 100_001
    ids.pseudonym(BOB, "append")
    assert ids._pseudonyms == {BOB: _mac(bytes.fromhex(STORED), BOB)}
    assert ids.pseudonym(ALICE, "append") == _mac(bytes.fromhex(STORED), ALICE)


def test_a_first_append_that_fails_leaves_no_names_row_behind(tmp_path: pathlib.Path):
    # The names row and the memory's first record are one transaction: an INSERT refused (a
    # full disk; here a trigger an operator added) must not leave a name for a memory that
    # has no record - "nothing half-written", and an erasure by subject would list it.
    import sqlite3

    path = tmp_path / "erasable.db"
    with SQLiteEventStore(path, erasable_ids=True) as store:
        store.append(("bob", "s1"), batch("hi"))
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON events WHEN NEW.seq = 1 "
            "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )
    with SQLiteEventStore(path, erasable_ids=True) as store:
        with pytest.raises(Exception, match="disk full"):
            store.append(("alice", "s1"), batch("hi"))
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT count(*) FROM names").fetchone() == (1,)  # bob's only
