"""A ledger with erasable ids keyed under its keyring, opened with another keyring.

Its memory ids map to pseudonyms under an id key held in the keyring. Another ledger's keyring
(or a new, empty one: a mistyped --keyring path) used to answer with an id key of its own, so
every id mapped to another pseudonym: reads came back empty, appends started a second stream
of the same memory, and the right keyring could no longer read those streams' ids, so every
later erase_subject of the ledger was refused. Also: a names row checked against the keyring
just before another process's erasure (SQLite).
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from eventlog import FileKeyring, KeyringError
from eventlog.testing.records import batch, texts
from tests.conftest import Backend

pytestmark = pytest.mark.skip_backend("memory")  # one object, one keyring: nothing to swap

MEMORY = ("user-42", "s1")


def _ledger(backend: Backend, ring: FileKeyring) -> None:
    store = backend.open(erasable_ids=True, keyring=ring)
    store.append(MEMORY, batch("my passport number is X1234567"))
    store.close()


@pytest.mark.parametrize("which", ["another ledger's", "a new"])
def test_another_keyring_is_refused_and_changes_nothing(backend, tmp_path: pathlib.Path, which):
    _ledger(backend, FileKeyring(tmp_path / "right.json"))
    wrong_path = tmp_path / "wrong.json"
    if which == "another ledger's":
        other = FileKeyring(wrong_path)
        other.current("zed")  # a keyring in use elsewhere
    before = wrong_path.read_bytes() if wrong_path.exists() else None
    store = backend.open(keyring=FileKeyring(wrong_path))
    streams = len(store.streams())
    with pytest.raises(KeyringError, match="keyring this ledger was created with"):
        store.read(MEMORY)
    with pytest.raises(KeyringError, match="does not hold"):
        store.append(MEMORY, batch("second"))
    assert len(store.streams()) == streams  # no second stream of the memory
    # Check the wrong keyring was not given an id key of this ledger either.
    assert (wrong_path.read_bytes() if wrong_path.exists() else None) == before
    store.close()
    right = backend.open(keyring=FileKeyring(tmp_path / "right.json"))
    assert texts(right.read(MEMORY)) == ["my passport number is X1234567"]
    assert len(right.erase_subject(("user-42",), reason="GDPR art. 17")) == 1


class _ErasedMeanwhile(FileKeyring):
    """The appending process's keyring; once armed, another process erases the subject just
    after this one found its cached names row's key alive (before its write transaction)."""

    erase: Any = None

    def get(self, key_id: str) -> bytes | None:
        key = super().get(key_id)
        if self.erase is not None:
            erase, self.erase = self.erase, None
            erase()
        return key


@pytest.mark.skip_backend("memory")
def test_a_names_row_checked_just_before_an_erasure_is_sealed_under_a_live_key(
    backend, tmp_path: pathlib.Path
):
    keys = tmp_path / "keys.json"
    _ledger(backend, FileKeyring(keys))
    eraser = backend.open(keyring=FileKeyring(keys))
    ring = _ErasedMeanwhile(keys)
    writer = backend.open(keyring=ring)
    writer.append(MEMORY, batch("before"))  # its names row is now cached
    ring.erase = lambda: eraser.erase_subject(("user-42",), reason="GDPR art. 17")
    writer.append(MEMORY, batch("after the erasure"))
    fresh = backend.open(keyring=FileKeyring(keys))
    assert [i.memory_id for i in fresh.streams()] == [MEMORY]  # its names row opens
    # Check an erasure of another subject leaves the new message alone.
    fresh.append(("bob", "s1"), batch("bob's"))
    fresh.erase_subject(("bob",), reason="GDPR art. 17")
    kept = [r for r in fresh.read(MEMORY) if r.kind == "message_added" and not r.erased]
    assert texts(kept) == ["after the erasure"]
