"""compact() and CompactionScheduler: snapshots that change nothing but cold-open cost, purges
that erase only what stayed idle, a run log, and a real background schedule.

Idleness is driven by freezegun (append on 2026-01-01, compact on 2026-01-03), never by
sleeping. Everything runs on every backend via the `backend`/`store`/`reopen` fixtures; only
the file scan is SQLite-specific. Thin subclasses of the real stores count calls or inject a
real second writer; nothing of chatledger's behaviour is mocked.
"""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from freezegun import freeze_time

from eventlog import InMemoryEventStore, SQLiteEventStore, UserMessage
from eventlog.errors import ConcurrencyError, StoreClosedError
from eventlog.formats.lc4j_json import message_to_json
from eventlog.models import CompactionRun, MemoryErased, MessageAdded, Record, StreamInfo
from eventlog.serialization import encode_event
from eventlog.store import EventStore
from eventlog.testing.records import added
from projections import MessageWindowChatMemory, OpenAiTokenCountEstimator, TokenWindowChatMemory
from projections.compaction import (
    COMPACTION_STREAM,
    CompactionReport,
    CompactionScheduler,
    compact,
    compaction_runs,
)
from projections.provider import ChatMemoryProvider
from projections.snapshots import SNAPSHOT_NAME, load_window_snapshot
from tests.conftest import PG_DSN, Backend
from tests.factories import a_conversation, a_message

DAY = timedelta(days=1)
_WAIT = 10.0  # seconds: bound for waiting on the background scheduler; never hit when it works


def _open_subclass(backend: Backend, mixin: type, **attrs: Any) -> Any:
    """A store of the fixture's backend, built from ``mixin`` + the real store class."""
    base: type[EventStore]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    if backend.name == "memory":
        base = InMemoryEventStore
    elif backend.name == "sqlite":
        base, args = SQLiteEventStore, (backend.path,)
    else:
        from eventlog.postgres import PostgresEventStore

        base, args, kwargs = PostgresEventStore, (PG_DSN,), {"schema": backend.schema}
    store = type(f"{mixin.__name__}{base.__name__}", (mixin, base), dict(attrs))(*args, **kwargs)
    backend.opened.append(store)
    return store


def _memory(store: EventStore, memory_id: Any, kind: str = "messages") -> Any:
    if kind == "tokens":
        return TokenWindowChatMemory(
            id=memory_id,
            max_tokens=80,
            token_count_estimator=OpenAiTokenCountEstimator("gpt-4o-mini"),
            store=store,
        )
    return MessageWindowChatMemory(id=memory_id, max_messages=4, store=store)


def _fill(
    store: EventStore, memory_id: Any, when: str = "2026-01-01", n: int = 6, kind: str = "messages"
) -> Any:
    with freeze_time(when):
        memory = _memory(store, memory_id, kind)
        memory.add(a_conversation(n, system="Be brief."))
    return memory


def _compact_at(when: str, store: EventStore, **kwargs: Any) -> CompactionReport:
    kwargs.setdefault("idle_for", DAY)
    with freeze_time(when):
        return compact(store, **kwargs)


def _runs(store: EventStore) -> list[CompactionRun]:
    """The logged compaction runs' events."""
    runs = [e.event for e in compaction_runs(store)]
    assert all(isinstance(run, CompactionRun) for run in runs)
    return runs  # type: ignore[return-value]


def _stored(store: EventStore, memory_id: Any) -> list[tuple[Any, ...]]:
    """Everything stored for a memory id that history is made of, byte for byte."""
    return [
        (r.seq, r.recorded_at_text, r.kind, r.payload, r.meta, r.prev_hash, r.hash)
        for r in store.read(memory_id)
    ]


# ------------------------------------------------------------------ snapshots


def test_only_idle_memories_are_compacted_and_the_run_is_logged(store):
    _fill(store, "idle")
    _fill(store, "active", when="2026-01-02 23:00")
    report = _compact_at("2026-01-03", store)
    # Check the ids idle for more than a day got a snapshot at their head, the other none.
    assert report.compacted == ("idle",)
    assert (report.purged, report.skipped, report.errors) == ((), (), ())
    assert report.started_at == datetime(2026, 1, 3, tzinfo=UTC)
    head = store.head("idle")
    assert store.load_snapshot("idle", SNAPSHOT_NAME).seq == head.seq
    assert store.load_snapshot("active", SNAPSHOT_NAME) is None
    # Check the run is in the system stream, which streams() keeps out of the memory list.
    (logged,) = compaction_runs(store)
    assert logged.memory_id == COMPACTION_STREAM
    (run,) = _runs(store)
    assert run == CompactionRun(
        started_at=datetime(2026, 1, 3, tzinfo=UTC),
        duration_ms=run.duration_ms,
        idle_for_s=86_400.0,
        compacted=("idle",),
    )
    assert [info.memory_id for info in store.streams()] == ["active", "idle"]


@pytest.mark.parametrize("kind", ["messages", "tokens"])
def test_compaction_changes_no_history_and_a_cold_open_shows_the_same_bytes(reopen, kind):
    store = reopen()
    live = _fill(store, "conv", n=9, kind=kind)
    with freeze_time("2026-01-01 12:00"):
        live.set([a_message("user", "reset"), a_message("ai", "done")])
        live.add(a_message("user", "after the set"))
    head = store.head("conv").seq
    view = [message_to_json(m) for m in live.messages()]
    stored = _stored(store, "conv")
    as_of = {seq: live.as_of(seq=seq) for seq in range(head + 1)}
    verified = store.verify()
    assert verified.ok

    assert _compact_at("2026-01-03", store).compacted == ("conv",)

    # Check history, hashes, time travel and verification are exactly as before.
    other = reopen()
    assert _stored(other, "conv") == stored
    assert {seq: live.as_of(seq=seq) for seq in range(head + 1)} == as_of
    assert other.verify("conv").ok
    assert other.verify("conv").records == verified.records
    # Check a cold open (new store object, new memory) shows the same bytes and history.
    cold = _memory(other, "conv", kind)
    assert [message_to_json(m) for m in cold.messages()] == view
    assert [e.event for e in cold.history()] == [e.event for e in live.history()]
    assert {seq: cold.as_of(seq=seq) for seq in range(head + 1)} == as_of
    # Check it goes on as the same memory.
    cold.add(a_message("user", "later"))
    assert live.messages() == cold.messages()


class _CountingReads:
    """Records which seqs every read() returned."""

    returned: list[list[int]]

    def read(self, memory_id: Any, **kwargs: Any) -> list[Record]:
        records: list[Record] = super().read(memory_id, **kwargs)  # type: ignore[misc]
        self.returned.append([r.seq for r in records])
        return records


def test_a_cold_open_never_serves_a_snapshot_instead_of_the_events(backend):
    writer = _open_subclass(backend, _CountingReads, returned=[])
    _fill(writer, "conv", n=8)
    head = writer.head("conv").seq
    reader = writer if backend.name == "memory" else _open_subclass(backend, _CountingReads)

    def cold_open_reads() -> list[list[int]]:
        reader.returned = []
        assert len(_memory(reader, "conv").messages()) == 4
        returned: list[list[int]] = reader.returned
        return returned

    # Check without a snapshot, a cold open reads the events the window refers to.
    before = {seq for page in cold_open_reads() for seq in page}
    assert before > {1, head}
    assert _compact_at("2026-01-03", writer).compacted == ("conv",)
    # Check a snapshot changes nothing: derived data is not trusted, so the messages still
    # come from the events themselves.
    assert {seq for page in cold_open_reads() for seq in page} == before


def test_the_snapshot_keeps_the_token_counts_under_the_recorded_estimator(store):
    memory = _fill(store, "tok", kind="tokens")
    estimator = memory.token_count_estimator
    _compact_at("2026-01-03", store)
    head = store.head("tok").seq
    entries = load_window_snapshot(store, "tok", head, estimator.identity)
    # Check the counts were kept (so a cold open counts nothing again) and are right.
    assert entries
    for entry in entries.values():
        assert entry.tokens == estimator.estimate_token_count_in_message(entry.message)
    # Check another estimator gets no counts from it.
    assert all(e.tokens is None for e in load_window_snapshot(store, "tok", head, "other").values())


def test_a_second_run_does_nothing_until_the_memory_is_written_again(store):
    _fill(store, "conv")
    first = _compact_at("2026-01-03", store)
    assert first.compacted == ("conv",)
    snapshot = store.load_snapshot("conv", SNAPSHOT_NAME)
    second = _compact_at("2026-01-04", store)
    # Check the second run found the snapshot at the head and wrote nothing.
    assert (second.compacted, second.skipped, second.errors) == ((), (), ())
    assert store.load_snapshot("conv", SNAPSHOT_NAME) == snapshot
    # Check a new write and a new idle day make a snapshot at the new head.
    with freeze_time("2026-01-05"):
        _memory(store, "conv").add(a_message("user", "back again"))
    assert _compact_at("2026-01-05 12:00", store).compacted == ()
    assert _compact_at("2026-01-07", store).compacted == ("conv",)
    assert store.load_snapshot("conv", SNAPSHOT_NAME).seq == store.head("conv").seq
    assert len(compaction_runs(store)) == 4


class _WriterArrivesAfterListing:
    """A real second writer appends right after compact() listed the streams."""

    other: EventStore | None

    def streams(self, **kwargs: Any) -> list[StreamInfo]:
        infos: list[StreamInfo] = super().streams(**kwargs)  # type: ignore[misc]
        other: Any = self.other or self
        MessageWindowChatMemory(id="conv", max_messages=4, store=other).add(UserMessage("hi"))
        return infos


def test_a_memory_written_after_the_listing_is_skipped(backend):
    store = _open_subclass(backend, _WriterArrivesAfterListing, other=None)
    if backend.name != "memory":
        store.other = backend.open()
    _fill(store, "conv")
    report = _compact_at("2026-01-03", store)
    # Check the listing said idle, but the head read just before compacting did not.
    assert report.skipped == ("conv",)
    assert report.compacted == ()
    assert store.load_snapshot("conv", SNAPSHOT_NAME) is None


def test_compacted_ids_are_dropped_from_attached_providers(store):
    provider = ChatMemoryProvider(lambda memory_id: _memory(store, memory_id))
    other = ChatMemoryProvider(lambda memory_id: _memory(store, memory_id))
    with freeze_time("2026-01-01"):
        provider.get("idle").add(a_message())
        other.get("idle")
    with freeze_time("2026-01-02 23:00"):
        provider.get("active").add(a_message())
    _compact_at("2026-01-03", store, providers=[provider, other])
    assert provider.ids() == ["active"]
    assert other.ids() == []


def test_ids_that_cannot_be_compacted_are_skipped_not_errors(store):
    _fill(store, "fine")
    with freeze_time("2026-01-01"):
        # Appended by hand: a message event that records no window.
        store.append("foreign", [encode_event(MessageAdded(message=UserMessage("raw")))])
        _fill(store, "gone", when="2026-01-01")
        store.purge("gone", expected_seq=store.head("gone").seq, reason="user asked")
    report = _compact_at("2026-01-03", store)
    assert report.compacted == ("fine",)
    assert report.skipped == ("foreign", "gone")
    assert report.errors == ()
    assert _runs(store)[-1].skipped == ("foreign", "gone")


def test_a_corrupt_memory_is_reported_and_the_run_goes_on(backend, store):
    _fill(store, "a-broken")
    _fill(store, "b-fine")
    # The event before the head is in the head's window, so compacting must read it.
    backend.tamper(store, "a-broken", store.head("a-broken").seq - 1, "payload", "{not json")
    report = _compact_at("2026-01-03", store)
    # Check the broken id is an error line naming it, and the next id was still compacted.
    assert report.compacted == ("b-fine",)
    (error,) = report.errors
    assert error.startswith("a-broken: ")
    assert _runs(store)[-1].errors == (error,)
    assert store.load_snapshot("a-broken", SNAPSHOT_NAME) is None


def test_non_string_ids_are_compacted_and_evicted_under_their_own_key(store):
    provider = ChatMemoryProvider(lambda memory_id: _memory(store, memory_id))
    ids = (42, ("tenant", 7), uuid.UUID(int=5), "~tilde")
    with freeze_time("2026-01-01"):
        for memory_id in ids:
            provider.get(memory_id).add(a_conversation(3))
    report = _compact_at("2026-01-03", store, providers=[provider])
    # Check the report names the ids as the application wrote them, and the providers
    # (keyed by those ids) dropped them.
    assert set(report.compacted) == set(ids)
    assert len(provider) == 0
    for memory_id in ids:
        assert store.load_snapshot(memory_id, SNAPSHOT_NAME).seq == store.head(memory_id).seq
    assert set(_runs(store)[-1].compacted) == {
        "~i:42",
        '~t:["tenant",7]',
        "~u:00000000-0000-0000-0000-000000000005",
        "~~tilde",
    }


def test_a_store_or_provider_passed_wrongly_is_refused_at_once(tmp_path):
    # A path instead of a store, or one provider instead of a list of them: the scheduler
    # used to accept both and fail every run an interval later ("'str' object has no
    # attribute 'streams'"), and compact() said only "object is not iterable".
    store = SQLiteEventStore(tmp_path / "c.db")
    provider = ChatMemoryProvider(
        lambda memory_id: MessageWindowChatMemory(id=memory_id, max_messages=3, store=store)
    )
    path = str(tmp_path / "c.db")
    every = timedelta(hours=1)
    bad_store = "store must be an EventStore, not str '.*c.db'.*SQLiteEventStore"
    with pytest.raises(TypeError, match=f"compact: {bad_store}"):
        compact(path, idle_for=DAY)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=f"CompactionScheduler: {bad_store}"):
        CompactionScheduler(path, every=every, idle_for=DAY)  # type: ignore[arg-type]
    one = r"providers must be a list of ChatMemoryProvider, not one; pass providers=\[provider\]"
    with pytest.raises(TypeError, match=f"compact: {one}"):
        compact(store, idle_for=DAY, providers=provider)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=f"CompactionScheduler: {one}"):
        CompactionScheduler(store, every=every, idle_for=DAY, providers=provider)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"compact: providers\[1\] is str, not a ChatMemoryProvider"
    ):
        compact(store, idle_for=DAY, providers=[provider, "p2"])  # type: ignore[list-item]
    # Check nothing ran, not even a logged run.
    assert compaction_runs(store) == []


def test_now_measures_idleness_without_freezing_time(store):
    _fill(store, "conv")
    assert compact(store, idle_for=DAY, now=datetime(2026, 1, 1, 12, tzinfo=UTC)).compacted == ()
    assert compact(store, idle_for=DAY, now=datetime(2026, 1, 3, tzinfo=UTC)).compacted == ("conv",)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"idle_for": -DAY}, ValueError, "idle_for must not be negative"),
        ({"idle_for": 3600}, TypeError, "idle_for must be a datetime.timedelta"),
        (
            {"idle_for": 2 * DAY, "purge_idle_for": DAY},
            ValueError,
            r"purge_idle_for \(1 day, 0:00:00\) is shorter than idle_for \(2 days, 0:00:00\)",
        ),
        ({"idle_for": DAY, "purge_idle_for": 90}, TypeError, "purge_idle_for must be"),
        ({"idle_for": DAY, "now": datetime(2026, 1, 3)}, ValueError, "has no timezone"),
    ],
)
def test_invalid_arguments_are_refused(store, kwargs, error, match):
    _fill(store, "conv")
    with pytest.raises(error, match=match):
        compact(store, **kwargs)
    # Check nothing happened, not even a logged run.
    assert compaction_runs(store) == []
    assert store.load_snapshot("conv", SNAPSHOT_NAME) is None


# ------------------------------------------------------------------ purging


def test_long_idle_memories_are_purged_only_when_asked(store):
    _fill(store, "ancient", when="2025-09-01")
    _fill(store, "recent", when="2026-01-01")
    provider = ChatMemoryProvider(lambda memory_id: _memory(store, memory_id))
    cached = provider.get("ancient")
    kept = _stored(store, "ancient")
    # Check the default keeps history forever.
    assert _compact_at("2026-01-03", store).purged == ()
    assert _stored(store, "ancient") == kept
    digest = store.digest()
    report = _compact_at(
        "2026-01-03", store, purge_idle_for=timedelta(days=90), providers=[provider]
    )
    # Check the long-idle id was erased (skeleton and a receipt stay), the other only compacted.
    assert report.purged == ("ancient",)
    assert report.compacted == ()  # "recent" already has its snapshot from the first run
    *erased, receipt = _memory(store, "ancient").history()
    assert [e.seq for e in erased] == [r[0] for r in kept]
    assert all(e.erased for e in erased)
    assert receipt.kind == "memory_erased"
    assert isinstance(receipt.event, MemoryErased)
    assert receipt.event.reason == "idle for more than 90 days, 0:00:00"
    assert receipt.event.record_count == len(kept)
    assert store.load_snapshot("ancient", SNAPSHOT_NAME) is None
    assert store.verify().ok
    # Check retention did not break the digest taken before it.
    assert store.verify(digest=digest).ok
    assert "ancient" not in provider
    # Check an object still held shows the empty memory, and the receipt is skipped later.
    assert cached.messages() == []
    assert len(_stored(store, "recent")) == 7
    later = _compact_at("2026-06-01", store, purge_idle_for=timedelta(days=90))
    assert later.purged == ("recent",)
    assert later.skipped == ("ancient",)
    assert _runs(store)[1].purged == ("ancient",)
    assert _runs(store)[1].purge_idle_for_s == 90 * 86_400.0


class _WriterArrivesBeforePurge:
    """A real second writer appends between compact()'s idleness check and its erasure."""

    other: EventStore | None

    def erase(self, memory_id: Any, *, reason: str, expected_seq: int | None = None) -> Any:
        other: Any = self.other or self
        MessageWindowChatMemory(id=memory_id, max_messages=4, store=other).add(
            UserMessage("I am back")
        )
        return super().erase(  # type: ignore[misc]
            memory_id, expected_seq=expected_seq, reason=reason
        )


def test_a_memory_written_during_the_run_is_not_purged(backend):
    store = _open_subclass(backend, _WriterArrivesBeforePurge, other=None)
    if backend.name != "memory":
        store.other = backend.open()  # another connection (pool) on the same database
    _fill(store, "ancient", when="2025-09-01")
    before = _stored(store, "ancient")
    report = _compact_at("2026-01-03", store, purge_idle_for=timedelta(days=90))
    # Check the purge lost the race atomically: skipped, and every event is still there.
    assert report.purged == ()
    assert report.skipped == ("ancient",)
    after = _stored(store, "ancient")
    assert after[: len(before)] == before
    assert len(after) == len(before) + 1
    assert _memory(store, "ancient").messages()[-1] == UserMessage("I am back")
    assert store.verify().ok


def test_the_purge_is_atomic_against_the_head_the_caller_saw(store):
    # The guarantee compact() relies on, checked directly on the store.
    _fill(store, "conv")
    seen = store.head("conv").seq
    _memory(store, "conv").add(a_message())
    with pytest.raises(ConcurrencyError):
        store.purge("conv", expected_seq=seen, reason="idle")
    with pytest.raises(ConcurrencyError):
        store.erase("conv", expected_seq=seen, reason="idle")
    assert len(store.read("conv")) == seen + 1
    assert not any(r.erased for r in store.read("conv"))


def test_a_legacy_format_1_memory_is_purged_with_a_tombstone(store):
    # Format 1 records hash their payload: erasing would break the chain, so retention purges.
    with freeze_time("2025-09-01"):
        store.append("legacy", [added("old")._replace(format=1)])
        _fill(store, "legacy2", when="2025-09-01")
        store.append("legacy2", [added("old")._replace(format=1)])
    report = _compact_at("2026-01-03", store, purge_idle_for=timedelta(days=90))
    assert (set(report.purged), report.errors) == ({"legacy", "legacy2"}, ())
    for key in ("legacy", "legacy2"):
        (tombstone,) = store.read(key)
        assert tombstone.kind == "memory_purged"
    assert store.verify().ok


def test_purged_text_is_physically_gone_from_every_sqlite_file(tmp_path):
    path = tmp_path / "events.db"
    secret = "my passport number is X1234567"  # noqa: S105 - a message text, not a password
    kept = "the weather is fine today"
    with SQLiteEventStore(path) as store:
        with freeze_time("2025-09-01"):
            _memory(store, "leaving").add(a_message("user", secret), a_message("ai", "noted"))
        with freeze_time("2026-01-01"):
            _memory(store, "staying").add(a_message("user", kept))
        # First a plain compaction, so the secret is also in a snapshot row.
        assert "leaving" in _compact_at("2025-09-05", store).compacted

        def files_containing(text: str) -> list[str]:
            needle = text.encode()
            return sorted(p.name for p in tmp_path.iterdir() if needle in p.read_bytes())

        assert files_containing(secret)  # the scan finds what is there
        report = _compact_at("2026-01-03", store, purge_idle_for=timedelta(days=90))
        assert report.purged == ("leaving",)
        # Check no file in the directory (db, -wal, -shm) holds the purged text any more.
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "events.db",
            "events.db-shm",
            "events.db-wal",
        ]
        assert files_containing(secret) == []
        assert files_containing(kept) != []


# ------------------------------------------------------------------ the scheduler


class _FirstListingFails:
    """streams() raises once, like a database that is briefly unreachable."""

    failed: bool

    def streams(self, **kwargs: Any) -> list[StreamInfo]:
        if not self.failed:
            self.failed = True
            msg = "database briefly unreachable"
            raise OSError(msg)
        infos: list[StreamInfo] = super().streams(**kwargs)  # type: ignore[misc]
        return infos


def test_the_scheduler_runs_in_the_background_and_survives_a_failed_run(backend, caplog):
    store = _open_subclass(backend, _FirstListingFails, failed=False)
    MessageWindowChatMemory(id="conv", max_messages=4, store=store).add(a_conversation(3))
    failed, succeeded = threading.Event(), threading.Event()
    reports: list[CompactionReport] = []

    def on_report(report: CompactionReport) -> None:
        reports.append(report)
        succeeded.set()

    scheduler = CompactionScheduler(
        store,
        every=timedelta(milliseconds=200),
        idle_for=timedelta(0),
        on_error=lambda e: failed.set(),
        on_report=on_report,
    )
    assert scheduler.next_run_time is None
    started = datetime.now(UTC)
    with scheduler:
        # Check the next run is scheduled at most one interval ahead, in UTC.
        due = scheduler.next_run_time
        assert due is not None
        assert due.utcoffset() == timedelta(0)
        assert started < due <= datetime.now(UTC) + timedelta(milliseconds=200)
        assert failed.wait(_WAIT)
        assert succeeded.wait(_WAIT)
    assert not scheduler.running
    assert scheduler.next_run_time is None
    # Check the failure was logged with its traceback on chatledger's logger ...
    (logged,) = [r for r in caplog.records if r.name == "chatledger.compaction"]
    assert logged.levelno == logging.ERROR
    assert logged.exc_info is not None
    assert str(logged.exc_info[1]) == "database briefly unreachable"
    # ... and the next run compacted the memory, with the result kept and logged in the store.
    assert reports[0].compacted == ("conv",)
    assert scheduler.last_report is reports[-1]
    assert scheduler.last_error is None
    assert _runs(store)[0].compacted == ("conv",)


class _SlowListing:
    """streams() blocks until released, and counts how many calls run at once."""

    lock: threading.Lock
    entered: threading.Event
    release: threading.Event
    active: int
    most: int

    def streams(self, **kwargs: Any) -> list[StreamInfo]:
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
        self.entered.set()
        try:
            assert self.release.wait(_WAIT)
            infos: list[StreamInfo] = super().streams(**kwargs)  # type: ignore[misc]
            return infos
        finally:
            with self.lock:
                self.active -= 1


class _SeeMessage(logging.Handler):
    """Sets ``seen`` when a log message containing ``text`` is emitted (from any thread)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()


def test_a_slow_run_is_never_overlapped_by_the_next(backend):
    store = _open_subclass(
        backend,
        _SlowListing,
        lock=threading.Lock(),
        active=0,
        most=0,
        entered=threading.Event(),
        release=threading.Event(),
    )
    done = threading.Event()
    # apscheduler names the limit it applied: max_instances=1.
    refused = _SeeMessage("maximum number of running instances reached (1)")
    apscheduler_logger = logging.getLogger("apscheduler")
    apscheduler_logger.addHandler(refused)
    try:
        with CompactionScheduler(
            store, every=timedelta(milliseconds=50), idle_for=DAY, on_report=lambda r: done.set()
        ):
            assert store.entered.wait(_WAIT)
            # Check apscheduler refused a second instance while the first run was stuck.
            assert refused.seen.wait(_WAIT)
            store.release.set()
            assert done.wait(_WAIT)
    finally:
        apscheduler_logger.removeHandler(refused)
    # Check no two runs ever listed the streams at the same time.
    assert store.most == 1


def test_run_now_is_synchronous_and_uses_the_same_path(backend, caplog):
    store = _open_subclass(backend, _FirstListingFails, failed=False)
    _fill(store, "conv")
    seen: list[object] = []
    scheduler = CompactionScheduler(
        store,
        every=timedelta(hours=1),
        idle_for=timedelta(0),
        on_report=seen.append,
        on_error=seen.append,
    )
    # Check a failure is raised to the caller, logged, and kept.
    with pytest.raises(OSError, match="briefly unreachable"):
        scheduler.run_now()
    assert isinstance(scheduler.last_error, OSError)
    assert [r.name for r in caplog.records] == ["chatledger.compaction"]
    # Check a success returns the report, keeps it and reports it.
    report = scheduler.run_now()
    assert report.compacted == ("conv",)
    assert scheduler.last_report is report
    assert scheduler.last_error is None
    assert seen == [seen[0], report]
    assert isinstance(seen[0], OSError)
    assert not scheduler.running


def test_run_now_logs_failed_ids_as_a_warning(backend, store, caplog):
    _fill(store, "broken")
    backend.tamper(store, "broken", store.head("broken").seq, "meta", "[1, 2]")
    scheduler = CompactionScheduler(store, every=timedelta(hours=1), idle_for=timedelta(0))
    report = scheduler.run_now()
    assert len(report.errors) == 1
    (logged,) = caplog.records
    assert (logged.name, logged.levelno) == ("chatledger.compaction", logging.WARNING)
    # The head's meta edited by hand: refused by the chain before its window is decoded.
    assert "1 failed memory id(s): broken: ChainIntegrityError" in logged.getMessage()


def test_scheduler_lifecycle_and_validation():
    store = InMemoryEventStore()
    scheduler = CompactionScheduler(store, every=timedelta(hours=1), idle_for=DAY)
    scheduler.start()
    try:
        with pytest.raises(RuntimeError, match="already started"):
            scheduler.start()
        assert scheduler.running
    finally:
        scheduler.shutdown(wait=True)
    scheduler.shutdown()  # idempotent
    assert not scheduler.running
    assert repr(scheduler) == (
        "CompactionScheduler(every=1:00:00, idle_for=1 day, 0:00:00, purge_idle_for=None, "
        "running=False)"
    )
    with pytest.raises(ValueError, match="every must be positive"):
        CompactionScheduler(store, every=timedelta(0), idle_for=DAY)
    # Before: accepted, then an OverflowError from the trigger at start().
    with pytest.raises(ValueError, match="every must be positive and at most 365000 days"):
        CompactionScheduler(store, every=timedelta(days=3_650_000), idle_for=DAY)
    with pytest.raises(TypeError, match=r"every must be a datetime\.timedelta"):
        CompactionScheduler(store, every=3600, idle_for=DAY)
    with pytest.raises(ValueError, match="purge_idle_for"):
        CompactionScheduler(store, every=timedelta(hours=1), idle_for=DAY, purge_idle_for=DAY / 2)


@pytest.mark.parametrize("hook", ["on_error", "on_report"])
def test_a_callback_may_shut_the_scheduler_down(tmp_path, caplog, hook):
    # An operator's reaction to "the store is closed" (or to a report) is to stop compacting
    # from the callback. It runs on the scheduler's own job thread, and shutdown(wait=True)
    # used to fail there with a bare "RuntimeError: cannot join current thread" (logged as a
    # failed callback), waiting for the very run that called it.
    store = SQLiteEventStore(tmp_path / "closed.db")
    if hook == "on_error":
        store.close()  # every run fails: StoreClosedError
    stopped = threading.Event()
    outcome: list[object] = []

    def stop(_: object) -> None:
        try:
            scheduler.shutdown()
            outcome.append("stopped")
        except BaseException as e:
            outcome.append(e)
        stopped.set()

    callbacks: dict[str, Any] = {hook: stop}
    scheduler = CompactionScheduler(
        store, every=timedelta(milliseconds=100), idle_for=timedelta(0), **callbacks
    )
    scheduler.start()
    try:
        assert stopped.wait(_WAIT)
    finally:
        scheduler.shutdown()
    # Check shutdown returned in the callback, the schedule is off, nothing but the run's own
    # failure (on_error) was logged, and no scheduler thread is left.
    assert outcome == ["stopped"]
    assert not scheduler.running
    logged = [r.getMessage() for r in caplog.records if r.name == "chatledger.compaction"]
    assert not [m for m in logged if "compaction callback" in m]
    assert len(logged) == (1 if hook == "on_error" else 0)
    deadline = datetime.now(UTC) + timedelta(seconds=_WAIT)
    while any(t.name.startswith("APScheduler") for t in threading.enumerate()):
        assert datetime.now(UTC) < deadline
        threading.Event().wait(0.01)


def test_a_closed_store_stops_the_schedule_after_one_line(tmp_path, caplog):
    # A closed store never opens again: the schedule used to log the same full traceback
    # every interval for as long as the process ran. Now one error line with the remedy,
    # on_error once, and the schedule is off.
    store = SQLiteEventStore(tmp_path / "closed.db")
    store.close()
    errors: list[Exception] = []
    called = threading.Event()

    def on_error(e: Exception) -> None:
        errors.append(e)
        called.set()

    scheduler = CompactionScheduler(
        store, every=timedelta(milliseconds=50), idle_for=timedelta(0), on_error=on_error
    )
    scheduler.start()
    try:
        assert called.wait(_WAIT)
        deadline = datetime.now(UTC) + timedelta(seconds=_WAIT)
        while scheduler.running:
            assert datetime.now(UTC) < deadline
            threading.Event().wait(0.01)
        threading.Event().wait(0.3)  # six more intervals: no run may follow
    finally:
        scheduler.shutdown()
    assert [type(e) for e in errors] == [StoreClosedError]
    (logged,) = [r for r in caplog.records if r.name == "chatledger.compaction"]
    assert logged.levelno == logging.ERROR
    assert logged.exc_info is None
    assert logged.getMessage().startswith("compaction stopped: ")
    assert "shut the CompactionScheduler down before closing its store" in logged.getMessage()
    assert isinstance(scheduler.last_error, StoreClosedError)
    # run_now still raises it to a caller who asks.
    with pytest.raises(StoreClosedError):
        scheduler.run_now()


def test_a_failing_callback_is_logged_and_does_not_fail_the_run(caplog):
    store = InMemoryEventStore()

    def broken(report):
        raise RuntimeError("metrics backend down")

    scheduler = CompactionScheduler(store, every=timedelta(hours=1), idle_for=DAY, on_report=broken)
    report = scheduler.run_now()
    assert scheduler.last_report is report
    (logged,) = caplog.records
    assert logged.name == "chatledger.compaction"
    assert "callback" in logged.getMessage()
