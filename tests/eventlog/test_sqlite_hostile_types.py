"""[forger]: values of another type written by hand into a SQLite ledger, which keeps them
(type affinity: a BLOB in a TEXT column, text in an INTEGER one). ``verify()`` never raises
for bad data, and a read refuses with ChainIntegrityError, never a TypeError or ValueError."""

from __future__ import annotations

import pathlib
import sqlite3

import pytest

from eventlog import ChainIntegrityError, SQLiteEventStore, UserMessage
from projections import MessageWindowChatMemory

KEY = b"the application's chain key, 32b"


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE events SET stream_id = x'ff' WHERE stream_id = 'a'",
        "UPDATE heads SET stream_id = x'ff' WHERE stream_id = 'a'",
        "UPDATE heads SET erased_through = 'x' WHERE stream_id = 'a'",
    ],
    ids=["blob-key", "blob-seal-key", "text-erased-through"],
)
@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_a_value_of_another_type_is_reported_never_raised(
    tmp_path: pathlib.Path, edit: str, keyed: bool
) -> None:
    path = tmp_path / "ledger.db"
    key = KEY if keyed else None
    with SQLiteEventStore(path, chain_key=key) as store:
        for memory_id in ("a", "b"):
            memory = MessageWindowChatMemory(id=memory_id, max_messages=3, store=store)
            memory.add(UserMessage(f"{memory_id}1"), UserMessage(f"{memory_id}2"))
    with sqlite3.connect(path) as conn:
        conn.execute(edit)
    conn.close()
    with SQLiteEventStore(path, chain_key=key, read_only=True) as store:
        report = store.verify()  # raised TypeError ('<' between bytes and str; int and str)
        assert not report.ok
        with pytest.raises(ChainIntegrityError, match="not served"):
            MessageWindowChatMemory(id="a", max_messages=3, store=store).messages()
        memory = MessageWindowChatMemory(id="b", max_messages=3, store=store)
        assert [m.text for m in memory.messages()] == ["b1", "b2"]


@pytest.mark.parametrize("stored", ["'zz'", "x'00'"], ids=["not-hex", "blob"])
def test_a_malformed_hash_is_named_by_digest_and_reported_by_verify_digest(
    tmp_path: pathlib.Path, stored: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # digest() raised fromhex()'s ValueError (no memory, no remedy) or TypeError (a
    # traceback from `chatledger digest`), and verify(digest=) raised the same.
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path) as store:
        memory = MessageWindowChatMemory(id="a", max_messages=3, store=store)
        memory.add(UserMessage("a1"), UserMessage("a2"))
        before = store.digest()
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE events SET hash = {stored} WHERE seq = 2")
    conn.close()
    with SQLiteEventStore(path, read_only=True) as store:
        report = store.verify(digest=before)
        assert not report.ok
        assert "breaks at seq 2: malformed hash" in report.message
        with pytest.raises(ChainIntegrityError, match="seq 2: malformed hash") as caught:
            store.digest()
        assert caught.value.stream_id == "a"
    from projections.cli import main

    assert main(["digest", "--db", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("chatledger: error: hash chain of a breaks at seq 2: malformed hash")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        ("UPDATE events SET recorded_at = 'yesterday' WHERE seq = 2", "'yesterday'"),
        ("UPDATE events SET stream_id = '~x:bad'", "'~x:bad'"),
        ("UPDATE events SET stream_id = x'ff'", "b'\\xff'"),
    ],
    ids=["time", "key", "blob-key"],
)
def test_a_row_no_store_writes_is_named_by_streams_with_the_remedy(
    tmp_path: pathlib.Path, edit: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # streams() (`chatledger ids`, the inspector, retention) raised fromisoformat()'s or the
    # key parser's ValueError, or a TypeError sorting bytes with str, naming no remedy.
    path = tmp_path / "ledger.db"
    with SQLiteEventStore(path) as store:
        memory = MessageWindowChatMemory(id="a", max_messages=3, store=store)
        memory.add(UserMessage("a1"), UserMessage("a2"))
    with sqlite3.connect(path) as conn:
        conn.execute(edit)
    conn.close()
    with (
        SQLiteEventStore(path, read_only=True) as store,
        pytest.raises(ChainIntegrityError, match=r"streams: .*run `chatledger verify`"),
    ):
        store.streams()
    from projections.cli import main

    assert main(["ids", "--db", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("chatledger: error: ")
    assert named in err
    assert err.count("\n") == 1
