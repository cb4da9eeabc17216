"""Erased memories through export and import: an erasure's emptied records import and verify,
while an emptied record an erasure could not have left (after content) is refused at the gate,
whole file, nothing written. Real SQLite files."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eventlog import (
    AiMessage,
    InMemoryEventStore,
    SQLiteEventStore,
    SystemMessage,
    UserMessage,
)
from eventlog.formats.jsonl import export_jsonl, import_jsonl
from eventlog.store import EventStore
from projections import (
    MessageWindowChatMemory,
    OpenAiTokenCountEstimator,
    SummarizingChatMemory,
    TokenWindowChatMemory,
)
from projections.audit import fork
from projections.meta import check_window_record
from tests.factories import a_cut_export


def _export(store: EventStore, **options: object) -> list[str]:
    out = io.StringIO()
    export_jsonl(store, out, **options)  # type: ignore[arg-type]
    return out.getvalue().splitlines(keepends=True)


def _sans_position(line: str) -> dict[str, Any]:
    row: dict[str, Any] = json.loads(line)
    row.pop("position", None)
    return row


def _emptied(lines: list[str], pick: Callable[[dict[str, Any]], bool]) -> list[str]:
    """``lines`` with the records ``pick`` chooses emptied as erase() empties them (payload and
    salt gone; commitment and hash kept, so the hash chain cannot tell)."""
    edited = []
    for line in lines:
        row = json.loads(line)
        if pick(row):
            row["payload"], row["salt"] = "", ""
        edited.append(json.dumps(row) + "\n")
    return edited


def _say(store: SQLiteEventStore, memory: str, *texts: str) -> None:
    chat = MessageWindowChatMemory(id=memory, max_messages=10, store=store)
    for text in texts:
        chat.add(UserMessage(text))


def test_an_erased_memory_exports_imports_and_verifies_as_erased(tmp_path: Path) -> None:
    source = SQLiteEventStore(tmp_path / "a.db")
    _say(source, "conv", "secret 1", "secret 2")
    source.erase("conv", reason="the user asked")
    _say(source, "conv", "after")
    lines = _export(source)
    target = SQLiteEventStore(tmp_path / "b.db")
    report = import_jsonl(target, lines)
    # Check every record came over, the emptied ones still emptied, and the target verifies
    # and serves them on the read path, as the source does.
    assert report.records == 4
    assert target.verify().ok
    got = [(r.seq, r.kind, r.erased) for r in target.read_verified("conv")]
    assert got == [(r.seq, r.kind, r.erased) for r in source.read("conv")]
    assert [r.erased for r in target.read("conv")] == [True, True, False, False]
    assert "secret" not in "".join(lines)


def test_an_emptied_record_after_content_is_refused_whole_file(tmp_path: Path) -> None:
    source = SQLiteEventStore(tmp_path / "a.db")
    _say(source, "conv", "m1", "m2", "m3")
    _say(source, "other", "o1")
    lines = _export(source)
    # Empty seq 2 the way erase() would (payload and salt gone, commitment and hash kept: the
    # hash chain cannot tell), with seq 1 keeping its content: no erasure leaves that.
    edited = _emptied(lines, lambda row: row.get("memory") == "conv" and row.get("seq") == 2)
    assert edited != lines
    target_path = tmp_path / "b.db"
    target = SQLiteEventStore(target_path)
    with pytest.raises(ValueError, match=r"'conv'#2 \(line \d+\) is emptied") as caught:
        import_jsonl(target, edited)
    assert "nothing was written" in str(caught.value)
    assert target.streams() == []


def test_a_continuation_of_an_erased_memory_imports(tmp_path: Path) -> None:
    source = SQLiteEventStore(tmp_path / "a.db")
    _say(source, "conv", "s1", "s2")
    source.erase("conv", reason="r")
    _say(source, "conv", "later")
    lines = _export(source)
    target = SQLiteEventStore(tmp_path / "b.db")
    import_jsonl(target, a_cut_export(lines[:4]))  # the header, seqs 1-2 (emptied), the receipt
    assert [r.seq for r in target.read("conv")] == [1, 2, 3]
    # Check a file that continues from the target's head (export after=3) imports onto the
    # erased prefix the target's seal holds; the result verifies and reads as the source does.
    import_jsonl(target, _export(source, memory_id="conv", after=3))
    assert target.verify().ok
    assert [r.erased for r in target.read_verified("conv")] == [True, True, False, False]


@pytest.mark.parametrize("then", ["content", "nothing"])
def test_emptied_records_without_their_receipt_are_refused_whole_file(tmp_path, then) -> None:
    key = b"the application's chain key, 32b"
    source = SQLiteEventStore(tmp_path / "a.db", chain_key=key)
    _say(source, "conv", "m1", "m2", *(["m3"] if then == "content" else []))
    _say(source, "other", "o1")
    lines = _export(source)
    # Empty seqs 1-2 the way erase() would, without its receipt (a forger without the key can;
    # the source ledger refuses them): importing must not turn them into a sealed erasure, with
    # or without content after them.
    edited = _emptied(lines, lambda row: row.get("memory") == "conv" and row.get("seq") in (1, 2))
    target = SQLiteEventStore(tmp_path / "b.db", chain_key=key)
    with pytest.raises(ValueError, match=r"'conv'#2 \(before line \d+\) is emptied") as caught:
        import_jsonl(target, edited)
    assert "no erasure's receipt follows it" in str(caught.value)
    # Check the line named is where the receipt should have been: the next record's, or the
    # end of the file.
    rows = [json.loads(line) for line in lines]
    after = [i + 1 for i, r in enumerate(rows) if (r.get("memory"), r.get("seq")) == ("conv", 3)]
    assert f"(before line {(after or [len(lines) + 1])[0]})" in str(caught.value)
    assert target.streams() == []


def test_an_emptied_receipt_is_refused(tmp_path: Path) -> None:
    source = SQLiteEventStore(tmp_path / "a.db")
    _say(source, "conv", "m1")
    source.erase("conv", reason="r")
    edited = _emptied(_export(source), lambda row: row.get("kind") == "memory_erased")
    target = SQLiteEventStore(tmp_path / "b.db")
    with pytest.raises(ValueError, match="or is a receipt"):
        import_jsonl(target, edited)
    assert target.streams() == []


def test_an_incremental_file_claiming_an_erasure_after_content_in_the_target_is_refused(
    tmp_path: Path,
) -> None:
    # Found by the mutation run. The target holds seq 1 with its content; a file continuing
    # from it empties seq 2 and brings an erasure's receipt: no erase() leaves that (it
    # empties from seq 1 on), so it is refused, nothing written.
    source = SQLiteEventStore(tmp_path / "a.db")
    _say(source, "conv", "kept", "hidden")
    target = SQLiteEventStore(tmp_path / "b.db")
    import_jsonl(target, a_cut_export(_export(source, memory_id="conv")[:2]))  # seq 1
    source.erase("conv", reason="the user asked")
    lines = _export(source, memory_id="conv", after=1)
    assert [(json.loads(x)["seq"], json.loads(x)["payload"]) for x in lines[1:2]] == [(2, "")]
    with pytest.raises(ValueError, match="is emptied"):
        import_jsonl(target, lines)
    assert [r.seq for r in target.read("conv")] == [1]


def test_an_incremental_file_with_a_second_erasure_continues_the_target_erased_prefix(
    tmp_path: Path,
) -> None:
    # Found by the mutation run: the target's erased prefix (from its head seal) is where the
    # file's emptied records must continue from - not from seq 1.
    source = SQLiteEventStore(tmp_path / "a.db")
    _say(source, "conv", "secret 1")
    source.erase("conv", reason="the user asked")
    target = SQLiteEventStore(tmp_path / "b.db")
    import_jsonl(target, _export(source))  # its newest record: the erasure's receipt
    head = len(source.read("conv"))
    _say(source, "conv", "secret 2")
    source.erase("conv", reason="again")  # empties what came after the first receipt
    report = import_jsonl(target, _export(source, memory_id="conv", after=head))
    assert report.records == len(source.read("conv")) - head
    assert target.verify().ok
    # (Import never overwrites: what the second erasure emptied at or before ``head`` is the
    # target's to erase itself.)
    assert [r[1:] for r in target.read("conv", gt=head)] == [
        r[1:] for r in source.read("conv", gt=head)
    ]


def _window_memories(store: EventStore) -> None:
    """One memory of each kind whose history holds ``messages_set`` events, then erased: a
    set led by a system message, a set of one item, a token window (whose sets record a
    token count per item), a summarizing memory and a fork (an untrimmed copy)."""
    items = [SystemMessage("sys"), *(UserMessage(f"set {i}") for i in range(5))]
    chat = MessageWindowChatMemory(id="sets", max_messages=3, store=store)
    chat.set(items)
    chat.add(UserMessage("after"))
    chat.set([UserMessage("x"), AiMessage("y")])
    single = MessageWindowChatMemory(id="single", max_messages=3, store=store)
    single.set([UserMessage("only")])
    single.add(UserMessage("more"))
    tokens = TokenWindowChatMemory(
        id="tokens",
        max_tokens=30,
        token_count_estimator=OpenAiTokenCountEstimator("gpt-4o-mini"),
        store=store,
    )
    tokens.set([UserMessage(f"a longer message number {i}") for i in range(6)])
    tokens.add(UserMessage("after"))
    summary = SummarizingChatMemory(
        "summary", max_messages=2, summarizer=lambda evicted, prev: "s", store=store
    )
    summary.set([UserMessage(f"s{i}") for i in range(4)])
    summary.add(UserMessage("t"))
    fork(store, "sets", "forked", seq=1)
    for memory in ("sets", "single", "tokens", "summary", "forked"):
        store.erase(memory, reason="the user asked")


def test_erased_sets_of_every_memory_kind_import_through_the_window_check(
    store: EventStore,
) -> None:
    # The import gate counted an erased messages_set as bringing no messages, so the set's
    # own window, naming its items, was refused: no erased memory with a set could be
    # imported with the window check (what the command line runs). Now the count an erased
    # set brought is taken from its own window record; every later reference is bounded by it.
    source = InMemoryEventStore()
    _window_memories(source)
    lines = _export(source)
    report = import_jsonl(store, lines, check=check_window_record)
    assert report.records == len(lines) - 1
    assert store.verify().ok
    for info in source.streams():
        key = info.stream_id
        got = [(r.seq, r.kind, r.meta, r.hash, r.erased) for r in store.read_verified(key)]
        want = [(r.seq, r.kind, r.meta, r.hash, r.erased) for r in source.read(key)]
        assert got == want
    # Re-exported from the target, the file is the same byte for byte (but the header's time
    # and the positions the target assigned).
    again = _export(store)
    assert [_sans_position(x) for x in again[1:]] == [_sans_position(x) for x in lines[1:]]


@pytest.mark.parametrize("index", [(1 << 63) - 1, 1 << 63, 10**23])
def test_an_erased_set_whose_window_names_an_item_past_any_count_is_refused_by_name(
    tmp_path: Path, index: int
) -> None:
    # An erased messages_set is sized from its own window record: one naming item 2**63-1 (or
    # past it) sized the set beyond what the gate's counts hold, and the import failed with a
    # bare OverflowError ('int too big to convert'), naming neither the line nor the file.
    from eventlog.hashing import chain_hash_v2

    source = InMemoryEventStore()
    chat = MessageWindowChatMemory(id="sets", max_messages=3, store=source)
    chat.set([SystemMessage("sys"), *(UserMessage(f"set {i}") for i in range(5))])
    chat.add(UserMessage("after"))
    source.erase("sets", reason="the user asked")
    rows = [json.loads(line) for line in _export(source)]
    assert rows[1]["meta"].endswith("[1,4,5]]}") and "[1,5,5]" in rows[2]["meta"]
    # The set's window names two items ending at `index`, the next window the last of them,
    # re-hashed as a hand-crafted unkeyed file would be.
    rows[1]["meta"] = rows[1]["meta"].replace("[1,4,5]", f"[1,{index - 1},{index}]")
    rows[2]["meta"] = rows[2]["meta"].replace("[1,5,5]", f"[1,{index},{index}]")
    prev = rows[1]["prev_hash"]
    for row in rows[1:]:
        row["prev_hash"] = prev
        row["hash"] = prev = chain_hash_v2(
            prev,
            row["memory"],
            row["seq"],
            row["kind"],
            row["schema_version"],
            row["recorded_at"],
            row["commitment"],
            row["meta"],
            None,
        )
    target = SQLiteEventStore(tmp_path / "t.db")
    lines = [json.dumps(row) + "\n" for row in rows]
    with pytest.raises(ValueError, match=r"line 2: .*'sets'#1 .*item") as refused:
        import_jsonl(target, lines, check=check_window_record)
    assert "nothing was written" in str(refused.value)
    assert target.read_all() == []
    target.close()
