"""What races an erasure, and what an erasure cut short leaves. The append racing the key's
destruction is in the shipped kit (``EncryptionContract.test_an_append_racing_an_erasure_
stays_readable``); here: a keyring that fails to destroy, a recorder written before
``before_commit``, and a compaction that read the window just before an erasure."""

from __future__ import annotations

from typing import Any

import pytest

from eventlog import AiMessage, UserMessage
from eventlog.keyring import MemoryKeyring, sealed_key_id
from eventlog.serialization import require_opened
from eventlog.store import EventStore
from eventlog.testing.records import batch, texts


def _said(store: EventStore) -> list[str]:
    """The texts of the memory's messages that still have content; one sealed under a
    destroyed key raises KeyUnavailableError ("destroyed by an erasure")."""
    found = [r for r in store.read(VICTIM) if r.kind == "message_added" and not r.erased]
    for record in found:
        require_opened(record)
    return texts(found)


VICTIM = ("user-42", "s1")


def _erase(store: EventStore) -> None:
    store.erase(VICTIM, reason="GDPR")


def _purge(store: EventStore) -> None:
    head = store.head(VICTIM)
    assert head is not None
    store.purge(VICTIM, expected_seq=head.seq, reason="retention")


class _Failing(MemoryKeyring):
    """A keyring whose destruction fails (a KMS that is down, a full disk)."""

    fail = True

    def destroy_memory(self, subject: str, memory: str) -> int:
        if self.fail:
            msg = "the KMS is down"
            raise OSError(msg)
        return super().destroy_memory(subject, memory)


@pytest.mark.parametrize("how", [_erase, _purge], ids=["erase", "purge"])
def test_a_keyring_that_fails_to_destroy_leaves_everything_as_it_was(
    backend: Any, how: Any
) -> None:
    # Before, the rows were blanked and the receipt written, then the destruction failed:
    # an erasure that looked done while the key opening every backup's copy survived.
    ring = _Failing()
    store = backend.open(keyring=ring)
    store.append(VICTIM, batch("before the erasure"))
    before = [(r.seq, r.hash) for r in store.read(VICTIM)]
    with pytest.raises(OSError, match="the KMS is down"):
        how(store)
    # Check nothing changed: the same records, still readable; then a retry goes through.
    assert [(r.seq, r.hash) for r in store.read(VICTIM)] == before
    assert _said(store) == ["before the erasure"]
    assert store.verify().ok
    ring.fail = False
    how(store)
    assert _said(store) == []
    assert store.verify().ok


def test_a_recorder_without_before_commit_still_destroys_the_key(tmp_path: Any) -> None:
    # A third-party recorder written against the earlier _erase(keys, reason, expected_seq)
    # keeps working: its keys go after the commit, as they all did before.
    from eventlog import SQLiteEventStore

    calls: list[int] = []

    class Older(SQLiteEventStore):
        def _erase(self, keys: Any, reason: str, expected_seq: int | None) -> Any:  # type: ignore[override]
            calls.append(len(keys))
            return super()._erase(keys, reason, expected_seq)

    ring = MemoryKeyring()
    with Older(tmp_path / "chat.db", keyring=ring) as store:
        store.append(VICTIM, batch("before the erasure"))
        (record,) = store.read(VICTIM)
        store.erase(VICTIM, reason="GDPR")
        assert calls == [1]
        key_id = sealed_key_id(record.stored_payload)
        assert ring.get(key_id) is None and ring.destroyed(key_id)


@pytest.mark.parametrize("how", [_erase, _purge], ids=["erase", "purge"])
def test_a_snapshot_of_the_window_before_an_erasure_is_refused(backend: Any, how: Any) -> None:
    # What a compaction racing an erasure does: it reads the window, the erasure lands, then
    # it saves what it read. The snapshot would hold the erased messages again, readable (in
    # clear, or under the memory's new key) and in every later backup.
    from projections import MessageWindowChatMemory
    from projections.replay import view_at
    from projections.snapshots import SNAPSHOT_NAME, save_window_snapshot

    store = backend.open(keyring=MemoryKeyring())
    memory = MessageWindowChatMemory(id=VICTIM, max_messages=5, store=store)
    memory.add(UserMessage("the secret"), AiMessage("noted"))
    key = store.stream_key(VICTIM)
    entries = view_at(store, key, 2, identity=None)
    how(store)
    refusal = "erased at seq 3, after it" if how is _erase else r"no such event \(purged\?\)"
    with pytest.raises(ValueError, match=refusal):
        save_window_snapshot(store, key, 2, entries, None)
    assert store.load_snapshot(key, SNAPSHOT_NAME, lte=10) is None
    # Check a snapshot of the head after the erasure is still taken.
    memory = MessageWindowChatMemory(id=VICTIM, max_messages=5, store=store)
    memory.add(UserMessage("after"))
    head = store.head(key)
    assert head is not None
    save_window_snapshot(store, key, head.seq, view_at(store, key, head.seq), None)
    snapshot = store.load_snapshot(key, SNAPSHOT_NAME, lte=head.seq)
    assert snapshot is not None and "the secret" not in snapshot.state


def test_a_compaction_that_an_erasure_overtakes_skips_the_memory(
    backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import timedelta

    from projections import MessageWindowChatMemory, compact
    from projections.replay import view_at
    from projections.snapshots import SNAPSHOT_NAME

    store = backend.open(keyring=MemoryKeyring())
    memory = MessageWindowChatMemory(id=VICTIM, max_messages=5, store=store)
    memory.add(UserMessage("the secret"), AiMessage("noted"))

    def view_then_erase(*args: Any, **kwargs: Any) -> Any:
        entries = view_at(*args, **kwargs)
        store.erase(VICTIM, reason="GDPR")  # lands between the read and the save
        return entries

    monkeypatch.setattr("projections.compaction.view_at", view_then_erase)
    report = compact(store, idle_for=timedelta(0))
    assert report.errors == () and VICTIM in report.skipped
    assert store.load_snapshot(store.stream_key(VICTIM), SNAPSHOT_NAME, lte=10) is None
