"""Compaction: window snapshots for idle memories, an opt-in purge, and a thin scheduler.

:func:`compact` is a plain function over any :class:`EventStore`. For every memory idle longer
than ``idle_for`` it saves the window at the head as a snapshot: derived data beside the log,
which no read serves (a snapshot row is not under the chain, so anyone with write access to
the database could change it; a cold open reads the events the window refers to). It never
changes history: records, hashes,
``as_of`` answers and ``verify()`` are the same afterwards. Only when ``purge_idle_for`` is
given does it erase memories idle longer than that with ``EventStore.erase``: their content
goes, each record's skeleton (seq, time, commitment, hashes) and a ``memory_erased`` receipt stay,
so retention never breaks a digest or proof taken earlier. (A memory holding legacy format 1
records cannot be erased that way; it is purged, leaving a ``memory_purged`` tombstone.) Each
run is logged in the store's ``~sys:compaction`` stream.

:class:`CompactionScheduler` runs :func:`compact` at an interval on apscheduler 3.x's
``BackgroundScheduler``; this is the only module of chatledger that uses apscheduler.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import threading
import time
import typing
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Literal, Self

from eventlog.errors import ChainIntegrityError, ConcurrencyError, StoreClosedError
from eventlog.ids import MemoryId, StreamKey
from eventlog.models import CompactionRun, LoggedEvent, StreamInfo
from eventlog.serialization import encode_event, logged_event
from eventlog.store import RECEIPT_KINDS, EventStore
from projections.checked import read_checked, records
from projections.meta import EMPTYING_KINDS, WindowMeta
from projections.provider import ChatMemoryProvider
from projections.replay import view_at
from projections.snapshots import SNAPSHOT_NAME, save_window_snapshot

__all__ = [
    "COMPACTION_STREAM",
    "CompactionReport",
    "CompactionScheduler",
    "compact",
    "compaction_runs",
]

COMPACTION_STREAM = StreamKey("~sys:compaction")
"""The system stream where every :func:`compact` run leaves a ``compaction_run`` event."""

logger = logging.getLogger("chatledger.compaction")

_JOB_ID = "chatledger-compaction"

Outcome = Literal["compacted", "purged", "skipped", "unchanged"]


@dataclasses.dataclass(frozen=True, slots=True)
class CompactionReport:
    """What one :func:`compact` run did.

    Attributes:
        compacted: Memory ids that got a window snapshot at their head.
        purged: Memory ids whose content was erased for being idle past ``purge_idle_for``
            (each got a ``memory_erased`` receipt; a legacy format 1 memory a tombstone).
        skipped: Memory ids left alone: already erased or purged, not written by a chatledger memory
            (no window in the head's meta), or written to while the run looked at them.
        errors: One line per memory id that failed (``"<stream key>: <error>"``); the run
            went on with the others.
        started_at: When the run started (UTC).
        duration: How long it took.
        cleanup_pending: An erasure's file cleanup is still to do after the run (a SQLite
            reader held an old snapshot throughout; the next run tries again), see
            ``EventStore.cleanup_pending``.
    """

    compacted: tuple[MemoryId, ...]
    purged: tuple[MemoryId, ...]
    skipped: tuple[MemoryId, ...]
    errors: tuple[str, ...]
    started_at: datetime
    duration: timedelta
    cleanup_pending: bool = False


def _check_thresholds(idle_for: timedelta, purge_idle_for: timedelta | None) -> None:
    if not isinstance(idle_for, timedelta):
        msg = f"compact: idle_for must be a datetime.timedelta, not {type(idle_for).__name__}"
        raise TypeError(msg)
    if idle_for < timedelta(0):
        msg = f"compact: idle_for must not be negative, but is {idle_for}"
        raise ValueError(msg)
    if purge_idle_for is None:
        return
    if not isinstance(purge_idle_for, timedelta):
        msg = (
            "compact: purge_idle_for must be a datetime.timedelta or None, not "
            f"{type(purge_idle_for).__name__}"
        )
        raise TypeError(msg)
    if purge_idle_for < idle_for:
        msg = (
            f"compact: purge_idle_for ({purge_idle_for}) is shorter than idle_for ({idle_for}); "
            "a memory is only erased after it has been idle long enough to be compacted, so "
            "pass purge_idle_for >= idle_for (or None to keep history forever)"
        )
        raise ValueError(msg)


def _check_parts(
    operation: str, store: object, providers: Iterable[object]
) -> tuple[ChatMemoryProvider[Any], ...]:
    """Refuse, before any work, a store or providers passed wrongly (a path, one provider):
    a scheduler would otherwise fail at every run, an interval later."""
    if not isinstance(store, EventStore):
        msg = (
            f"{operation}: store must be an EventStore, not {type(store).__name__} "
            f"{store!r:.80}; open it first, e.g. SQLiteEventStore(path)"
        )
        raise TypeError(msg)
    if isinstance(providers, ChatMemoryProvider):
        msg = (
            f"{operation}: providers must be a list of ChatMemoryProvider, not one; pass "
            "providers=[provider]"
        )
        raise TypeError(msg)
    try:
        found = tuple(providers)
    except TypeError:
        msg = (
            f"{operation}: providers must be a list of ChatMemoryProvider, not "
            f"{type(providers).__name__}"
        )
        raise TypeError(msg) from None
    for i, provider in enumerate(found):
        if not isinstance(provider, ChatMemoryProvider):
            msg = (
                f"{operation}: providers[{i}] is {type(provider).__name__}, not a "
                "ChatMemoryProvider"
            )
            raise TypeError(msg)
    return typing.cast("tuple[ChatMemoryProvider[Any], ...]", found)


def compact(
    store: EventStore,
    *,
    idle_for: timedelta,
    purge_idle_for: timedelta | None = None,
    providers: Iterable[ChatMemoryProvider[Any]] = (),
    now: datetime | None = None,
) -> CompactionReport:
    """Snapshot the windows of idle memories and, if asked, erase the long-idle ones.

    For each memory id of ``store`` whose last event is older than ``idle_for``:

    * if ``purge_idle_for`` is set and the memory has been idle longer than that, it is
      erased with ``store.purge(id, expected_seq=<head seq seen>)``; a writer that appended
      in the meantime makes the purge fail atomically, and the id is listed as skipped;
    * otherwise the exact window after its head event is saved as a snapshot (ids that
      already have one at the head are left as they are, so a second run does nothing);
    * a compacted or purged id is dropped from every provider in ``providers``.

    Ids whose head is a purge tombstone, or whose head event records no window (not written
    by a chatledger memory), are skipped. An id is judged by its records as its memory reads
    them (vouched for by the chain), and erased only once its whole history reads: one that
    does not (edited by hand; a forger without the chain key) is listed in ``errors`` and
    kept, damage and all, for an operator to restore or quarantine. So is one with a time
    after ``now`` that does not read (moved there by hand, it would keep the memory out of
    every run; a genuine one, a clock ahead, is left alone). One id failing does not
    stop the run; it is listed in ``errors``. The run is then appended to the
    ``~sys:compaction`` stream (see :func:`compaction_runs`).

    Args:
        store: The store to compact.
        idle_for: Compact memories whose last event is older than this.
        purge_idle_for: Erase memories whose last event is older than this; None (default)
            keeps history forever.
        providers: Providers caching memories of ``store``; compacted and purged ids are
            evicted from them.
        now: The time idleness is measured against (aware); default: the current time.

    Returns:
        What was done, by memory id.

    Raises:
        TypeError: A threshold is not a timedelta, ``store`` is not an EventStore, or
            ``providers`` is not an iterable of ChatMemoryProvider.
        ValueError: ``idle_for`` is negative, ``purge_idle_for`` < ``idle_for``, or ``now``
            is naive.
        EventLogError: Listing the streams or logging the run failed (the store is
            unusable); failures of single ids are reported, not raised.
    """
    _check_thresholds(idle_for, purge_idle_for)
    found = _check_parts("compact", store, providers)
    started_at = datetime.now(UTC)
    timer = time.perf_counter()
    if now is None:
        now = started_at
    elif not isinstance(now, datetime):
        msg = f"compact: now must be an aware datetime (UTC) or None, not {type(now).__name__}"
        raise TypeError(msg)
    elif now.tzinfo is None or now.utcoffset() is None:
        msg = f"compact: now={now.isoformat()} has no timezone; pass an aware datetime (UTC)"
        raise ValueError(msg)
    done: dict[Outcome, list[StreamInfo]] = {
        "compacted": [],
        "purged": [],
        "skipped": [],
        "unchanged": [],
    }
    errors: list[str] = []

    def damaged(e: ChainIntegrityError) -> None:
        # A row of one memory edited by hand must not stop the run for all the others (nor
        # get that memory listed with a made-up time: it is reported and left alone).
        errors.append(f"{e.stream_id}: {type(e).__name__}: {e}")

    for info in store.streams(on_damage=damaged):
        if info.last_recorded_at > now:
            # A time to come keeps a memory out of every run: a clock ahead of this one, or a
            # time edited by hand so that retention never erases it. Only the chain tells.
            try:
                collections.deque(records(store, StreamKey(info.stream_id)), maxlen=0)
            except Exception as e:  # reported, as any memory that fails
                errors.append(f"{info.stream_id}: {type(e).__name__}: {e}")
            continue
        if now - info.last_recorded_at <= idle_for:
            continue
        try:
            outcome = _compact_one(store, info, now, idle_for, purge_idle_for)
        except Exception as e:  # one bad stream must not stop the run for all others
            errors.append(f"{info.stream_id}: {type(e).__name__}: {e}")
            continue
        done[outcome].append(info)
        if outcome in ("compacted", "purged"):
            for provider in found:
                provider.evict(info.memory_id)
    duration = timedelta(seconds=time.perf_counter() - timer)
    run = CompactionRun(
        started_at=started_at,
        duration_ms=duration / timedelta(milliseconds=1),
        idle_for_s=idle_for.total_seconds(),
        purge_idle_for_s=None if purge_idle_for is None else purge_idle_for.total_seconds(),
        compacted=tuple(info.stream_id for info in done["compacted"]),
        purged=tuple(info.stream_id for info in done["purged"]),
        skipped=tuple(info.stream_id for info in done["skipped"]),
        errors=tuple(errors),
    )
    store.append(COMPACTION_STREAM, [encode_event(run)])
    # An erasure whose WAL checkpoint readers blocked (this run's or an earlier one's): one
    # more try, without waiting; every scheduled run retries until it succeeds.
    pending = store.cleanup_pending and not store.finish_cleanup()
    return CompactionReport(
        compacted=tuple(info.memory_id for info in done["compacted"]),
        purged=tuple(info.memory_id for info in done["purged"]),
        skipped=tuple(info.memory_id for info in done["skipped"]),
        errors=tuple(errors),
        started_at=started_at,
        duration=duration,
        cleanup_pending=pending,
    )


def _compact_one(
    store: EventStore,
    info: StreamInfo,
    now: datetime,
    idle_for: timedelta,
    purge_idle_for: timedelta | None,
) -> Outcome:
    # The raw key, never the decoded id re-encoded: one less way to address the wrong stream.
    key = StreamKey(info.stream_id)
    # Re-read the head: streams() is a listing, and a writer may have appended since. Read as
    # the memory reads it (vouched for by the chain): its time decides an irreversible erasure,
    # and a raw read would take a time edited by hand for the truth.
    stored = store.read(key, desc=True, limit=1)  # raw: the seq a writer appends after
    newest = read_checked(store, key, desc=True, limit=1)
    if not stored or not newest:
        return "skipped"
    head = newest[0]
    idle = now - head.recorded_at
    if idle <= idle_for:
        return "skipped"
    if head.kind in RECEIPT_KINDS:
        return "skipped"  # erased or purged, and nothing written since
    if purge_idle_for is not None and idle > purge_idle_for:
        reason = f"idle for more than {purge_idle_for}"
        # The whole history first, as the memory would serve it: an erasure blanks a record
        # whose content was edited by hand, which then verifies again - the evidence of the
        # damage would go with the content. A memory that does not read is reported, kept.
        # Up to the stored head: a newest record acknowledged as damaged (quarantine) is left
        # out of the checked read, and an erasure expecting the seq before it never matched.
        last = stored[0].seq
        collections.deque(records(store, key, lte=last), maxlen=0)
        try:
            _erase_idle(store, key, last, reason)
        except ConcurrencyError:
            return "skipped"  # a writer came back: it is not idle, and nothing was erased
        return "purged"
    # (An erasure receipt or purge tombstone at the head was skipped above.)
    meta = WindowMeta([]) if head.kind in EMPTYING_KINDS else WindowMeta.decode(head.meta)
    if meta is None:
        return "skipped"
    existing = store.load_snapshot(key, SNAPSHOT_NAME, lte=head.seq)
    if existing is not None and existing.seq == head.seq:
        return "unchanged"
    # The head's estimator identity lets the snapshot keep the token counts recorded under
    # it, so a cold open with the same estimator counts nothing again.
    identity = meta.estimator
    entries = view_at(store, key, head.seq, identity=identity)
    try:
        save_window_snapshot(store, key, head.seq, entries, identity)
    except ValueError:
        # An erasure or purge landed since the head was read, and the store refused a snapshot
        # that would bring its content back: the memory moved on, nothing to do this run.
        newest = store.read(key, desc=True, limit=1)
        if newest and newest[0].seq != head.seq:
            return "skipped"
        raise
    return "compacted"


def _erase_idle(store: EventStore, key: StreamKey, seq: int, reason: str) -> None:
    """Erase an idle memory whose head is ``seq``; purge it if legacy records forbid erasing.

    Raises:
        ConcurrencyError: A writer appended after ``seq``; nothing was erased.
    """
    try:
        store.erase(key, reason=reason, expected_seq=seq)
    except ValueError:
        # Format 1 records hash their payload itself: blanking it would break the chain, so
        # the only way to drop their content is a purge (records deleted, a tombstone kept).
        if not any(record.format == 1 for record in store.read(key)):
            raise
        store.purge(key, expected_seq=seq, reason=reason)


def compaction_runs(store: EventStore) -> list[LoggedEvent]:
    """Every compaction run logged in ``store``, oldest first.

    Returns:
        Events whose ``.event`` is a :class:`~eventlog.models.CompactionRun`.
    """
    return [logged_event(record) for record in store.read(COMPACTION_STREAM)]


_MAX_EVERY = timedelta(days=365 * 1000)  # a run per millennium is "never"


class CompactionScheduler:
    """Runs :func:`compact` every ``every`` in a background thread (apscheduler 3.x).

    One interval job, with ``max_instances=1`` (a slow run is never overlapped by the next)
    and ``coalesce=True`` (runs missed while the process was busy or asleep become one). A
    failed run is logged on the ``chatledger.compaction`` logger with its traceback, and the
    next one still happens - except when the store was closed: a closed store never opens
    again, so the schedule stops itself after one error line (no traceback every interval).
    The first run is one interval after :meth:`start`; :meth:`run_now` runs one immediately,
    in the calling thread, through the same code.

    Example::

        with CompactionScheduler(store, every=timedelta(hours=1), idle_for=timedelta(days=1),
                                 providers=[provider]):
            serve()

    Args:
        store: The store to compact.
        every: Time between runs.
        idle_for: Passed to :func:`compact`.
        purge_idle_for: Passed to :func:`compact` (None: never erase).
        providers: Passed to :func:`compact`.
        on_report: Called with the report after every successful run.
        on_error: Called with the exception after every failed run (after it is logged).

    Raises:
        TypeError: ``every`` or a threshold is not a timedelta, or ``store`` or
            ``providers`` is not what :func:`compact` takes.
        ValueError: ``every`` is not positive, or the thresholds are invalid for
            :func:`compact`.
    """

    def __init__(
        self,
        store: EventStore,
        *,
        every: timedelta,
        idle_for: timedelta,
        purge_idle_for: timedelta | None = None,
        providers: Sequence[ChatMemoryProvider[Any]] = (),
        on_report: Callable[[CompactionReport], object] | None = None,
        on_error: Callable[[Exception], object] | None = None,
    ) -> None:
        if not isinstance(every, timedelta):
            msg = f"CompactionScheduler: every must be a datetime.timedelta, not {type(every)}"
            raise TypeError(msg)
        if not timedelta(0) < every <= _MAX_EVERY:
            # The first run is scheduled at now + every: past the year 9999 that is an
            # OverflowError at start(), not here.
            msg = (
                f"CompactionScheduler: every must be positive and at most {_MAX_EVERY.days} "
                f"days, but is {every}"
            )
            raise ValueError(msg)
        _check_thresholds(idle_for, purge_idle_for)  # fail now, not an interval later
        self._providers = _check_parts("CompactionScheduler", store, providers)
        self._store = store
        self._every = every
        self._idle_for = idle_for
        self._purge_idle_for = purge_idle_for
        self._on_report = on_report
        self._on_error = on_error
        # Serializes runs: apscheduler's max_instances does not cover run_now().
        self._run_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._scheduler: Any = None
        self._last_report: CompactionReport | None = None
        self._last_error: Exception | None = None
        self._job_threads: set[int] = set()  # threads running a scheduled run now

    @property
    def last_report(self) -> CompactionReport | None:
        """The report of the last successful run (None before the first one)."""
        return self._last_report

    @property
    def last_error(self) -> Exception | None:
        """The exception of the last run if it failed; None after a successful run."""
        return self._last_error

    @property
    def running(self) -> bool:
        """Whether the background schedule is on (between :meth:`start` and :meth:`shutdown`)."""
        return self._scheduler is not None

    @property
    def next_run_time(self) -> datetime | None:
        """When the next scheduled run is due (aware, UTC), or None when not started."""
        with self._state_lock:
            if self._scheduler is None:
                return None
            job = self._scheduler.get_job(_JOB_ID)
            return None if job is None else job.next_run_time

    def start(self) -> None:
        """Start the background schedule.

        Raises:
            RuntimeError: Already started.
        """
        # Imported here so that importing chatledger does not load apscheduler and tzlocal
        # for applications that never schedule compaction.
        from apscheduler.schedulers.background import BackgroundScheduler
        from apscheduler.triggers.interval import IntervalTrigger

        with self._state_lock:
            if self._scheduler is not None:
                msg = "CompactionScheduler.start: already started; call shutdown() first"
                raise RuntimeError(msg)
            scheduler = BackgroundScheduler(timezone=UTC)
            scheduler.add_job(
                self._scheduled_run,
                trigger=IntervalTrigger(seconds=self._every.total_seconds(), timezone=UTC),
                id=_JOB_ID,
                name="chatledger compaction",
                max_instances=1,
                coalesce=True,
                # None: a run that is late (busy process, suspended laptop) still happens,
                # instead of apscheduler's default of dropping runs more than 1 s late.
                misfire_grace_time=None,
            )
            scheduler.start()
            self._scheduler = scheduler

    def shutdown(self, wait: bool = True) -> None:
        """Stop the background schedule; idempotent.

        Args:
            wait: Wait for a run in progress to finish (not when called from that run, e.g.
                by ``on_error``: it would wait for itself).
        """
        with self._state_lock:
            scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            scheduler.shutdown(wait=wait and threading.get_ident() not in self._job_threads)

    def run_now(self) -> CompactionReport:
        """Run :func:`compact` once in the calling thread (after a run in progress ends).

        Returns:
            The run's report (also kept as :attr:`last_report`).

        Raises:
            Exception: Whatever :func:`compact` raised (also logged and kept as
                :attr:`last_error`).
        """
        with self._run_lock:
            try:
                report = compact(
                    self._store,
                    idle_for=self._idle_for,
                    purge_idle_for=self._purge_idle_for,
                    providers=self._providers,
                )
            except StoreClosedError as e:
                self._last_error = e
                # Expected once an app closes its store before the scheduler: one line, and
                # the remedy; no traceback (the cause is not in compaction's code).
                logger.error(
                    "compaction stopped: %s; shut the CompactionScheduler down before closing "
                    "its store (e.g. leave its with-block first)",
                    e,
                )
                self._notify(self._on_error, e)
                raise
            except Exception as e:
                self._last_error = e
                logger.exception(
                    "compaction run failed (idle_for=%s, purge_idle_for=%s); "
                    "the next scheduled run will try again",
                    self._idle_for,
                    self._purge_idle_for,
                )
                self._notify(self._on_error, e)
                raise
            self._last_report, self._last_error = report, None
            if report.errors:
                logger.warning(
                    "compaction run finished with %d failed memory id(s): %s",
                    len(report.errors),
                    "; ".join(report.errors),
                )
            self._notify(self._on_report, report)
            return report

    def _scheduled_run(self) -> None:
        # Already logged by run_now; suppressed so apscheduler does not log it a second time.
        me = threading.get_ident()
        self._job_threads.add(me)
        try:
            with contextlib.suppress(Exception):
                self.run_now()
            if isinstance(self._last_error, StoreClosedError):
                # Nothing to retry: stop instead of logging the same failure every interval.
                self.shutdown(wait=False)
        finally:
            self._job_threads.discard(me)

    @staticmethod
    def _notify(callback: Callable[[Any], object] | None, value: object) -> None:
        if callback is None:
            return
        try:
            callback(value)
        except Exception:
            logger.exception("compaction callback %r failed", callback)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown(wait=True)

    def __repr__(self) -> str:
        return (
            f"CompactionScheduler(every={self._every}, idle_for={self._idle_for}, "
            f"purge_idle_for={self._purge_idle_for}, running={self.running})"
        )
