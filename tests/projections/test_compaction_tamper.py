"""[forger] against retention: rows edited behind the store's back must never make compact()
erase a memory. An erasure cannot be undone, and it blanks the content that shows an edit, so
a retention run decides only on records the chain vouches for, and keeps (and reports) a
memory whose history does not read. Real SQLite files and PostgreSQL schemas, edited with
plain SQL as an attacker without the chain key would.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from freezegun import freeze_time

from eventlog import AiMessage, ChainIntegrityError, UserMessage
from eventlog.store import EventStore
from projections import ChatMemoryProvider, MessageWindowChatMemory, compact
from projections.compaction import CompactionReport
from projections.snapshots import SNAPSHOT_NAME
from tests.conftest import Backend

KEY = b"the application's chain key, 32b"
DAY = timedelta(days=1)

pytestmark = pytest.mark.skip_backend("memory")  # attacks edit files and rows


def _say(store: EventStore, memory_id: str, when: str, *texts: str) -> None:
    with freeze_time(when):
        memory = MessageWindowChatMemory(id=memory_id, max_messages=4, store=store)
        for i, text in enumerate(texts):
            memory.add(UserMessage(text) if i % 2 == 0 else AiMessage(text))


def _retention_at(when: str, store: EventStore) -> CompactionReport:
    with freeze_time(when):
        return compact(store, idle_for=DAY, purge_idle_for=timedelta(days=30))


def _erased(store: EventStore, memory_id: str) -> bool:
    return any(r.kind == "memory_erased" or r.erased for r in store.read(memory_id))


def _open(backend: Backend, keyed: bool) -> EventStore:
    return backend.open(chain_key=KEY) if keyed else backend.open()


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed-by-hand"])
def test_a_live_memory_whose_newest_time_was_moved_back_is_not_erased(backend, keyed):
    store = _open(backend, keyed)
    _say(store, "idle", "2026-01-01", "old question", "old answer")
    _say(store, "live", "2026-01-01", "hello", "hi")
    _say(store, "live", "2026-03-31", "still here")  # yesterday, seen from the run
    # The attacker dates the live memory's newest record back to January, so it looks idle.
    head = store.head("live").seq
    backend.tamper(store, "live", head, "recorded_at", "2026-01-01T00:00:00.000000Z")
    report = _retention_at("2026-04-01", store)
    # Check only the really idle memory went; the live one is an error line naming it, and
    # keeps every record's content.
    assert report.purged == ("idle",)
    (error,) = report.errors
    assert error.startswith("live: ChainIntegrityError")
    assert not _erased(store, "live")
    assert [r.payload != "" for r in store.read("live")] == [True] * head
    # Check the edit is still there for verify() to report (nothing laundered it).
    assert not store.verify().ok


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed-by-hand"])
def test_an_idle_memory_with_a_record_edited_is_kept_for_the_operator(backend, keyed):
    store = _open(backend, keyed)
    _say(store, "a-edited", "2026-01-01", "transfer 10 EUR", "done", "thanks")
    _say(store, "b-fine", "2026-01-01", "question", "answer")
    # An edit outside the head, which the purge path never needed to read to decide.
    backend.tamper(
        store,
        "a-edited",
        1,
        "payload",
        store.read("a-edited", lte=1)[0].payload.replace("10 EUR", "10000 EUR"),
    )
    assert not store.verify().ok
    report = _retention_at("2026-04-01", store)
    # Check the edited memory is reported and not erased (an erasure would blank the edited
    # content, and verify() would pass again: the evidence gone with it); the run went on.
    assert report.purged == ("b-fine",)
    (error,) = report.errors
    assert error.startswith("a-edited: ChainIntegrityError")
    assert "seq 1" in error
    assert not _erased(store, "a-edited")
    assert _erased(store, "b-fine")
    assert not store.verify().ok
    # Check a second run decides the same way (the memory stays for an operator).
    again = _retention_at("2026-04-02", store)
    assert again.purged == ()
    assert [e.split(":")[0] for e in again.errors] == ["a-edited"]


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed-by-hand"])
def test_a_time_no_store_writes_in_one_memory_does_not_stop_the_run_for_the_others(backend, keyed):
    store = _open(backend, keyed)
    _say(store, "a-odd", "2026-01-01", "hello", "hi")
    _say(store, "b-idle", "2026-01-01", "question", "answer")
    _say(store, "c-idle", "2026-01-01", "question", "answer")
    backend.tamper(store, "a-odd", 1, "recorded_at", "yesterday")
    seen: list[ChainIntegrityError] = []
    listed = store.streams(on_damage=seen.append)
    assert [info.memory_id for info in listed] == ["b-idle", "c-idle"]
    assert [e.stream_id for e in seen] == ["a-odd"]
    report = _retention_at("2026-04-01", store)
    # Check the others were erased as usual, and the odd one is one error line naming it and
    # the remedy, kept (streams() alone refuses the whole listing for it).
    assert report.purged == ("b-idle", "c-idle")
    (error,) = report.errors
    assert error.startswith("a-odd: ChainIntegrityError")
    assert "restore the database from a backup" in error
    assert not _erased(store, "a-odd")
    with freeze_time("2026-04-01"):
        # Check snapshots alone (no purge) go on too.
        again = compact(store, idle_for=DAY)
    assert [e.split(":")[0] for e in again.errors] == ["a-odd"]


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed-by-hand"])
def test_a_forged_snapshot_changes_no_window_and_no_later_compaction(backend, keyed):
    store = _open(backend, keyed)
    _say(store, "conv", "2026-01-01", "what is the fee?", "1 EUR")
    with freeze_time("2026-01-03"):
        assert compact(store, idle_for=DAY).compacted == ("conv",)
    schema = "" if backend.name == "sqlite" else f'"{backend.schema}".'
    backend._sql(f"UPDATE {schema}snapshots SET state = replace(state, '1 EUR', '900 EUR')", ())
    snapshot = store.load_snapshot("conv", SNAPSHOT_NAME)
    assert snapshot is not None
    assert "900 EUR" in snapshot.state
    # Check a cold open, a provider's reload and a replay show the log, never the snapshot: a
    # snapshot is derived data beside the log and no read serves it.
    cold = MessageWindowChatMemory(id="conv", max_messages=4, store=store)
    assert [m.text for m in cold.messages()] == ["what is the fee?", "1 EUR"]
    assert [m.text for m in cold.as_of(seq=2)] == ["what is the fee?", "1 EUR"]
    assert store.verify().ok


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed-by-hand"])
def test_a_memory_reloaded_after_compaction_evicted_it_refuses_rows_edited_meanwhile(
    backend, keyed
):
    store = _open(backend, keyed)
    provider = ChatMemoryProvider(
        lambda memory_id: MessageWindowChatMemory(id=memory_id, max_messages=4, store=store)
    )
    with freeze_time("2026-01-01"):
        provider.get("conv").add([UserMessage("what is the fee?"), AiMessage("1 EUR")])
    with freeze_time("2026-01-03"):
        assert compact(store, idle_for=DAY, providers=[provider]).compacted == ("conv",)
    assert len(provider) == 0  # evicted: the next get() opens it from the store
    backend.tamper(
        store, "conv", 2, "payload", store.read("conv", lte=2)[1].payload.replace("1 ", "900 ")
    )
    # Check the reloaded memory refuses, as a fresh open does, naming the record.
    with pytest.raises(ChainIntegrityError, match="conv breaks at seq 2"):
        provider.get("conv").messages()


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed-by-hand"])
def test_a_memory_whose_torn_newest_record_was_acknowledged_is_still_erased(backend, keyed):
    store = _open(backend, keyed)
    _say(store, "conv", "2026-01-01", "one", "two")
    backend.tamper(store, "conv", 2, "payload", "torn")
    with freeze_time("2026-01-02"):
        store.quarantine("conv", 2, reason="torn last write")
    report = _retention_at("2026-04-01", store)
    # Check the acknowledged damage does not keep the memory forever: reads leave that record
    # out, and the erasure still names the stored head (seq 2), not the one before it.
    assert (report.purged, report.skipped, report.errors) == (("conv",), (), ())
    assert _erased(store, "conv")


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed-by-hand"])
def test_a_time_moved_into_the_future_to_escape_retention_is_reported(backend, keyed):
    store = _open(backend, keyed)
    _say(store, "a-kept", "2026-01-01", "hello", "hi", "bye")
    _say(store, "b-idle", "2026-01-01", "question", "answer")
    # Not the head: a record the run never needed to read, dated so the memory looks active.
    backend.tamper(store, "a-kept", 1, "recorded_at", "2099-01-01T00:00:00.000000Z")
    report = _retention_at("2026-04-01", store)
    # Check the memory is not silently kept past retention: it is an error line naming it
    # (and, its history not reading, not erased either).
    assert report.purged == ("b-idle",)
    (error,) = report.errors
    assert error.startswith("a-kept: ChainIntegrityError")
    assert not _erased(store, "a-kept")
