"""The key check value and what an open settles (:mod:`eventlog.keycheck`), tried the way a
forger without the chain key would: each guarantee of the stored check and the head seals is
attacked with plain SQL on a real SQLite file and a real PostgreSQL schema, then the ledger is
opened as an application would. Also: the argument checks, and that an open with nothing to
settle takes no write lock."""

from __future__ import annotations

import contextlib
import inspect
import sqlite3
import warnings
from typing import Any

import pytest

from eventlog import ChainIntegrityError, ChainKeyError, SQLiteEventStore
from eventlog.hashing import KEYED_CHAIN
from eventlog.keycheck import (
    HEADS_SEALED,
    KEY_CHECK,
    chain_key_argument,
    parse,
    v1_value,
    valid_key,
)
from tests.eventlog.test_forger import KEY, Db, _say, _served

pytestmark = pytest.mark.skip_backend("memory")  # attacks edit files and rows


def _seal(db: Db, stream: str) -> str:
    ((mac,),) = db.run("SELECT mac FROM {heads} WHERE stream_id = ?", stream)
    return str(mac)


def _as_keyed_by_version_1(db: Db, *, heads_sealed: bool) -> None:
    """What an earlier chatledger left: a version 1 key check for a ledger keyed from the
    start, and (unless ``heads_sealed``) heads a migration added without a seal."""
    db.run("UPDATE {settings} SET value = ? WHERE name = ?", v1_value(KEY, 0), KEY_CHECK)
    if not heads_sealed:
        db.run("DELETE FROM {settings} WHERE name = ?", HEADS_SEALED)
        db.run("UPDATE {heads} SET mac = ''")


def test_deleting_the_heads_setting_does_not_make_seals_optional(backend: Any) -> None:
    store = backend.open(chain_key=KEY)
    _say(store, "conv", "a", "b")
    store.close()
    db = Db(backend)
    # The forger blanks the seal (as if a migration had left the head unsealed) and deletes
    # the setting that says every head was sealed once; the version 2 check still says so.
    db.run("DELETE FROM {settings} WHERE name = ?", HEADS_SEALED)
    db.run("UPDATE {heads} SET mac = ''")
    db.run("DELETE FROM {events} WHERE stream_id = ? AND seq = 2", "conv")
    fresh = backend.open(chain_key=KEY)
    report = fresh.verify()
    assert not report.ok
    assert "seal" in report.failures["conv"][1]
    with pytest.raises(ChainIntegrityError):
        _served(fresh, "conv")


def test_a_read_only_open_of_a_version_1_ledger_writes_nothing(backend: Any) -> None:
    store = backend.open(chain_key=KEY)
    _say(store, "conv", "a")
    store.close()
    db = Db(backend)
    _as_keyed_by_version_1(db, heads_sealed=False)
    before = db.run("SELECT name, value FROM {settings} ORDER BY name")
    reader = backend.open(chain_key=KEY, read_only=True)
    # Its heads were never sealed: nothing to check them against yet, so no failure.
    assert _served(reader, "conv") == ["a"]
    assert reader.verify().ok
    assert db.run("SELECT name, value FROM {settings} ORDER BY name") == before
    # The next writable open upgrades it to version 2, sealing the (empty) unkeyed prefix.
    backend.open(chain_key=KEY)
    ((value,),) = db.run("SELECT value FROM {settings} WHERE name = ?", KEY_CHECK)
    check = parse(str(value))
    assert check is not None
    assert (check.version, check.keyed_since, check.legacy_count) == (2, 0, 0)
    assert check.matches(KEY)


def test_upgrading_a_version_1_ledger_seals_the_heads_it_left_blank(backend: Any) -> None:
    store = backend.open(chain_key=KEY)
    _say(store, "conv", "a", "b")
    _say(store, "other", "c")
    store.close()
    db = Db(backend)
    _as_keyed_by_version_1(db, heads_sealed=False)
    upgrader = backend.open(chain_key=KEY)
    # Sealed under the key and marked, so a later blank seal is an edit.
    assert _seal(db, "conv") and _seal(db, "other")
    assert db.run("SELECT value FROM {settings} WHERE name = ?", HEADS_SEALED) == [("sealed",)]
    assert backend.open(chain_key=KEY).verify().ok
    # A forger truncates a memory and blanks its seal: refused by a fresh open and by the
    # store object that did the upgrade (it had read the version 1 check).
    db.run("DELETE FROM {events} WHERE stream_id = ? AND seq = 2", "conv")
    db.run("UPDATE {heads} SET mac = '' WHERE stream_id = ?", "conv")
    for store in (backend.open(chain_key=KEY), upgrader):
        assert "seal" in store.verify().failures["conv"][1]
        with pytest.raises(ChainIntegrityError):
            _served(store, "conv")


def test_a_key_of_exactly_the_minimum_length_is_accepted() -> None:
    assert valid_key(b"k" * 16) == b"k" * 16
    with pytest.raises(ValueError, match="shorter than 16"):
        valid_key(b"k" * 15)


def _old_style_call(key: bytes) -> bytes | None:
    """A function with the deprecated ``key=``, as the stores and check_receipt have."""
    return chain_key_argument("f", None, key)


def test_chain_key_argument_takes_either_name_once() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name warns about nothing
        assert chain_key_argument("f", KEY, None) == KEY
        assert chain_key_argument("f", None, None) is None
    here = inspect.currentframe()
    assert here is not None
    with pytest.warns(DeprecationWarning, match=r"f\(key=\.\.\.\) is deprecated") as caught:
        line, given = here.f_lineno, _old_style_call(KEY)
    assert given == KEY
    # The warning names the line that called the function taking key=, not that function.
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)
    with pytest.raises(TypeError, match="both chain_key= and key="):
        chain_key_argument("f", KEY, KEY)


def test_an_unkeyed_ledger_whose_heads_were_sealed_once_never_seals_a_blank_one_again(
    backend: Any,
) -> None:
    store = backend.open()
    _say(store, "conv", "a", "b")
    store.close()
    db = Db(backend)
    # What a migration to head seals leaves: heads without a seal, nothing marked.
    db.run("DELETE FROM {settings} WHERE name = ?", HEADS_SEALED)
    db.run("UPDATE {heads} SET mac = ''")
    sealer = backend.open()
    assert _seal(db, "conv")
    assert db.run("SELECT value FROM {settings} WHERE name = ?", HEADS_SEALED) == [("sealed",)]
    # Truncated and its seal blanked: an edit, not a head to seal afresh at the next open,
    # nor one the store object that sealed it takes for a ledger from before seals.
    db.run("DELETE FROM {events} WHERE stream_id = ? AND seq = 2", "conv")
    db.run("UPDATE {heads} SET mac = '' WHERE stream_id = ?", "conv")
    for store in (backend.open(), sealer):
        assert "seal" in store.verify().failures["conv"][1]
    assert not _seal(db, "conv")


def test_the_open_that_keys_a_ledger_reports_and_enforces_it_at_once(backend: Any) -> None:
    plain = backend.open()
    _say(plain, "conv", "before the key")
    db = Db(backend)
    ((last,),) = db.run("SELECT MAX(position) FROM {events}")
    keyed = backend.open(chain_key=KEY, adopt_key=True)
    report = keyed.verify()
    assert report.ok
    assert (report.keyed_since, report.legacy_records) == (last, 1)
    # A forger truncates the memory and blanks its seal while the keyed store is open.
    _say(keyed, "conv", "after", "the key")
    db.run("DELETE FROM {events} WHERE stream_id = ? AND seq = 3", "conv")
    db.run("UPDATE {heads} SET mac = '' WHERE stream_id = ?", "conv")
    assert "seal" in keyed.verify().failures["conv"][1]
    with pytest.raises(ChainIntegrityError):
        _served(keyed, "conv")


@pytest.mark.parametrize("value", ["", "garbage", "v3:0:0:" + "0" * 64 + ":" + "0" * 64])
def test_a_key_check_that_is_no_key_check_refuses_the_key(backend: Any, value: str) -> None:
    store = backend.open(chain_key=KEY)
    _say(store, "conv", "a")
    store.close()
    Db(backend).run("UPDATE {settings} SET value = ? WHERE name = ?", value, KEY_CHECK)
    with pytest.raises(ChainKeyError, match="does not match the key check"):
        backend.open(chain_key=KEY)
    # Without the key the ledger still opens for reading: keyed, its records not checkable.
    reader = backend.open(read_only=True)
    assert reader.verify().failures["conv"][1] == KEYED_CHAIN


@pytest.mark.parametrize(
    ("keyed", "chain_key"),
    [(False, None), (True, None), (True, KEY)],
    ids=["unkeyed", "keyed-without-key", "keyed-with-key"],
)
def test_an_open_with_nothing_to_settle_takes_no_write_lock(
    tmp_path: Any, keyed: bool, chain_key: Any
) -> None:
    path = tmp_path / "events.db"
    with SQLiteEventStore(path, chain_key=KEY if keyed else None) as store:
        _say(store, "conv", "a")
    # Another process holds the write lock (a long import, say): opening to read must not wait.
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")
        with SQLiteEventStore(path, chain_key=chain_key, busy_timeout=0.05) as reader:
            assert [r.seq for r in reader.read("conv")] == [1]
        other.execute("ROLLBACK")


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed-version-1"])
def test_sealing_the_blank_heads_keeps_the_seals_there_are(backend: Any, keyed: bool) -> None:
    chain_key = KEY if keyed else None
    store = backend.open(chain_key=chain_key)
    _say(store, "conv", "a", "b")
    _say(store, "other", "c")
    store.close()
    db = Db(backend)
    if keyed:
        _as_keyed_by_version_1(db, heads_sealed=False)
    else:
        db.run("DELETE FROM {settings} WHERE name = ?", HEADS_SEALED)
        db.run("UPDATE {heads} SET mac = ''")
    # One memory was sealed after all, and a forger truncated it, moving its head back with a
    # seal that does not match. The open that seals the blank heads seals only those, so it
    # must not put a fresh seal over his edit.
    ((first,),) = db.run("SELECT hash FROM {events} WHERE stream_id = ? AND seq = 1", "conv")
    db.run("DELETE FROM {events} WHERE stream_id = ? AND seq = 2", "conv")
    db.run(
        "UPDATE {heads} SET seq = 1, hash = ?, mac = ? WHERE stream_id = ?",
        first,
        "0" * 64,
        "conv",
    )
    sealer = backend.open(chain_key=chain_key)
    assert set(sealer.verify().failures) == {"conv"}
    assert _seal(db, "other")
