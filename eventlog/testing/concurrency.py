"""Store contract: concurrent writers and a tailing reader (threads, every backend)."""

from __future__ import annotations

import threading
import time
from typing import Any

from eventlog import ConcurrencyError
from eventlog.testing.records import added


class ConcurrencyContract:
    """The concurrency part of the store contract."""

    def test_concurrent_writers_lose_nothing_and_positions_do_not_interleave(self, reopen):
        writers, per_writer = 4, 40
        stores = [reopen() for _ in range(writers)]  # separate store objects (connections)
        tail_store = reopen()
        seen: list[Any] = []
        done = threading.Event()
        errors: list[BaseException] = []

        def write(w: int) -> None:
            try:
                for i in range(per_writer):
                    # Half to a shared conversation, half to the writer's own.
                    memory_id = "shared" if i % 2 else f"own-{w}"
                    stores[w].append(memory_id, [added(f"{w}:{i}")])
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        def tail() -> None:
            last = 0
            # On PostgreSQL a record shows once every transaction older than it has ended, anywhere
            # on the server (an autoanalyze writing statistics too): after the writers finish, the
            # tail keeps reading until it has every record, within a generous bound.
            deadline = None
            while True:
                finished = done.is_set()
                page = tail_store.read_all(gt=last)
                if page:
                    seen.extend(page)
                    last = page[-1].position
                elif finished:
                    deadline = deadline or time.monotonic() + 30
                    if len(seen) >= writers * per_writer or time.monotonic() > deadline:
                        return
                    time.sleep(0.01)

        reader = threading.Thread(target=tail)
        reader.start()
        threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done.set()
        reader.join()
        assert errors == []
        # Check nothing was lost and the tailing reader saw every record exactly once, in order.
        everything = tail_store.read_all()
        assert len(everything) == writers * per_writer
        assert [r.position for r in seen] == [r.position for r in everything]
        # Check per-stream seqs are gapless and per-writer order is kept.
        shared = tail_store.read("shared")
        assert [r.seq for r in shared] == list(range(1, len(shared) + 1))
        for w in range(writers):
            mine = [r.payload for r in shared if f'"{w}:' in r.payload]
            assert mine == [
                r.payload for r in sorted(shared, key=lambda r: r.position) if f'"{w}:' in r.payload
            ]
            assert len(tail_store.read(f"own-{w}")) == per_writer // 2
        assert tail_store.verify().ok

    def test_racing_expected_seq_lets_exactly_one_win(self, reopen):
        a, b = reopen(), reopen()
        a.append("u1", [added("base")])
        barrier = threading.Barrier(2)
        results: list[str] = []

        def attempt(store, text):
            barrier.wait()
            try:
                store.append("u1", [added(text)], expected_seq=1)
                results.append("won")
            except ConcurrencyError:
                results.append("lost")

        threads = [threading.Thread(target=attempt, args=(s, t)) for s, t in ((a, "a"), (b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == ["lost", "won"]
        assert len(a.read("u1")) == 2
