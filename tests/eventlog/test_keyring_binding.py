"""A ledger with erasable ids keyed under its keyring, opened with another keyring.

Its memory ids map to pseudonyms under an id key held in the keyring. Another ledger's keyring
(or a new, empty one: a mistyped --keyring path) used to answer with an id key of its own, so
every id mapped to another pseudonym: reads came back empty, appends started a second stream
of the same memory, and the right keyring could no longer read those streams' ids, so every
later erase_subject of the ledger was refused.
"""

from __future__ import annotations

import pathlib

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
