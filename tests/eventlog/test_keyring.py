"""Sealing with per-subject keys, and crypto-shredding by destroying them."""

from __future__ import annotations

import base64
import contextlib
import json
import multiprocessing
import os
import stat
import threading
import uuid
from typing import Any

import pytest

from eventlog.errors import EventLogError, SchemaVersionError
from eventlog.keyring import (
    Keyring,
    KeyringError,
    KeyUnavailableError,
    MemoryKeyring,
    SealBrokenError,
    is_sealed,
    open_sealed,
    seal,
    sealed_key_id,
    subject_of,
)
from eventlog.keyring_file import FileKeyring
from eventlog.sqlite import SQLiteEventStore
from eventlog.testing.records import batch, texts

AAD = b"user-42\x00seq=3\x00message_added"
WHERE = "read of ('user-42','s1') seq 3"
TEXT = "my card is 4111 1111 1111 1111, é ✓"


MASTER = bytes(range(32))  # a master key, kept apart from the keyring file


@pytest.fixture(params=["memory", "file", "wrapped"])
def keyring(request, tmp_path) -> Keyring:
    if request.param == "memory":
        return MemoryKeyring()
    if request.param == "wrapped":
        return FileKeyring(tmp_path / "keys.json", master_key=MASTER)
    return FileKeyring(tmp_path / "keys.json")


def stored(path) -> dict[str, dict[str, str]]:
    keys: dict[str, dict[str, str]] = json.loads(path.read_text())["keys"]
    return keys


# -- sealing ------------------------------------------------------------------------------


def test_round_trip(keyring):
    payload = seal(keyring, "user-42", AAD, TEXT)
    key_id, _ = keyring.current("user-42")
    # Check the stored form is the documented one and hides the text.
    assert payload.startswith(f"enc1:{key_id}:")
    assert "4111" not in payload
    assert open_sealed(keyring, AAD, payload, where=WHERE) == TEXT
    # Check each seal uses a fresh nonce: equal texts do not give equal payloads.
    assert seal(keyring, "user-42", AAD, TEXT) != payload


def test_key_id_is_random_not_derived_from_the_subject(keyring):
    key_id, key = keyring.current("user-42")
    assert len(key) == 32
    assert len(key_id) == 16
    assert "user" not in key_id
    assert keyring.current("user-42") == (key_id, key)
    assert keyring.current("user-43")[0] != key_id


def test_wrong_aad_fails(keyring):
    payload = seal(keyring, "user-42", AAD, TEXT)
    # Check a row copied to another seq does not open there.
    with pytest.raises(SealBrokenError, match="authentication failed") as info:
        open_sealed(keyring, b"user-42\x00seq=4\x00message_added", payload, where=WHERE)
    assert info.value.where == WHERE
    assert WHERE in str(info.value)


@pytest.mark.parametrize("position", [0, 12, -1])  # in the nonce, the ciphertext, the tag
def test_tampered_ciphertext_fails(keyring, position):
    payload = seal(keyring, "user-42", AAD, TEXT)
    head, data = payload.rsplit(":", 1)
    blob = bytearray(base64.urlsafe_b64decode(data))
    blob[position] ^= 0x01
    tampered = f"{head}:{base64.urlsafe_b64encode(bytes(blob)).decode()}"
    with pytest.raises(SealBrokenError, match=r"read of .* seq 3 failed"):
        open_sealed(keyring, AAD, tampered, where=WHERE)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("enc1:", "does not look like"),
        ("enc1:nokeyid", "does not look like"),
        ("enc1::AAAA", "does not look like"),
        ("plain text", "does not look like"),
        ("enc1:{kid}:not base64!", "not base64"),
        ("enc1:{kid}:AAAA", "too short"),
    ],
)
def test_malformed_payload_is_a_clear_error(keyring, payload, reason):
    key_id, _ = keyring.current("user-42")
    with pytest.raises(SealBrokenError, match=reason):
        open_sealed(keyring, AAD, payload.format(kid=key_id), where=WHERE)


def test_is_sealed():
    keyring = MemoryKeyring()
    assert is_sealed(seal(keyring, "s", b"", "hi"))
    assert not is_sealed('{"text":"hi"}')
    assert not is_sealed("enc2:x:y")
    assert not is_sealed("")


def test_seal_refuses_a_keyring_with_a_short_key():
    class Weak(MemoryKeyring):
        def current(self, subject):
            return "k", b"0" * 16

    with pytest.raises(KeyringError, match="16 bytes"):
        seal(Weak(), "user-42", AAD, TEXT)


# -- destroy (crypto-shredding) -----------------------------------------------------------


def test_destroy_makes_content_unreadable(keyring):
    payload = seal(keyring, "user-42", AAD, TEXT)
    other = seal(keyring, "user-43", AAD, "someone else")
    key_id, _ = keyring.current("user-42")
    assert keyring.destroy("user-42") == 1
    assert keyring.get(key_id) is None
    with pytest.raises(KeyUnavailableError) as info:
        open_sealed(keyring, AAD, payload, where=WHERE)
    message = str(info.value)
    # Check the message names the read, says why, and gives the remedy.
    assert WHERE in message
    assert "encrypted" in message
    assert "keyring records as destroyed by an erasure" in message
    assert "gone for good" in message
    assert info.value.key_id == key_id
    assert info.value.destroyed and keyring.destroyed(key_id)
    assert isinstance(info.value, EventLogError)
    # Check another subject is untouched.
    assert open_sealed(keyring, AAD, other, where=WHERE) == "someone else"


def test_destroy_is_idempotent_and_current_then_makes_a_new_key(keyring):
    old_id, old_key = keyring.current("user-42")
    assert keyring.destroy("user-42") == 1
    assert keyring.destroy("user-42") == 0
    assert keyring.destroy("never-seen") == 0
    new_id, new_key = keyring.current("user-42")
    assert new_id != old_id
    assert new_key != old_key
    assert keyring.get(new_id) == new_key
    assert keyring.get(old_id) is None


def test_open_without_a_keyring_says_so():
    payload = seal(MemoryKeyring(), "user-42", AAD, TEXT)
    with pytest.raises(KeyUnavailableError, match="no keyring was given") as info:
        open_sealed(None, AAD, payload, where=WHERE)
    assert WHERE in str(info.value)
    assert "pass keyring=" in str(info.value)


def test_get_of_an_unknown_id_is_none(keyring):
    assert keyring.get("0123456789abcdef") is None


def test_a_copy_of_the_database_taken_before_erasure_stays_unreadable(tmp_path):
    # The point of crypto-shredding: the backup holds ciphertext only, the key is gone.
    keyring = FileKeyring(tmp_path / "keys.json")
    backup = [seal(keyring, "user-42", AAD, f"msg {i}") for i in range(3)]
    keyring.destroy("user-42")
    fresh = FileKeyring(tmp_path / "keys.json")  # a later process, nothing cached
    for payload in backup:
        with pytest.raises(KeyUnavailableError):
            open_sealed(fresh, AAD, payload, where=WHERE)
    assert "user-42" not in (tmp_path / "keys.json").read_text()


# -- subjects -----------------------------------------------------------------------------


def test_subject_of_tuple_ids_is_the_first_element():
    assert subject_of(("user-42", "s1")) == subject_of(("user-42", "s2"))
    assert subject_of(("user-42", "s1")) == subject_of(("user-42",)) == '~t:["user-42"]'
    assert subject_of(("user-42", "s1")) != subject_of(("user-43", "s1"))
    u = uuid.UUID(int=7)
    assert subject_of((u, 1)) == subject_of((u,)) != subject_of((1, u))


def test_subject_of_other_ids_is_the_id_itself():
    assert subject_of("user-42") == "user-42"
    assert subject_of("user-42") != subject_of(("user-42", "s1"))
    assert subject_of(7) == "~i:7"
    assert subject_of(()) == "~t:[]"
    with pytest.raises(TypeError):
        subject_of(1.5)  # type: ignore[arg-type]


# -- FileKeyring: the file, across objects, threads and processes -------------------------


def test_file_is_created_on_first_key_with_mode_0600(tmp_path):
    path = tmp_path / "keys.json"
    keyring = FileKeyring(path)
    assert not path.exists()
    key_id, key = keyring.current("user-42")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "keys.json.lock").stat().st_mode) == 0o600
    # Check the documented JSON layout, and that no temp file is left behind.
    doc = json.loads(path.read_text())
    assert doc["format"] == 1
    assert doc["keys"][key_id]["subject"] == "user-42"
    assert base64.b64decode(doc["keys"][key_id]["key"]) == key
    assert doc["keys"][key_id]["created_at"].endswith("+00:00")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys.json", "keys.json.lock"]
    keyring.destroy("user-42")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_keys_survive_reopening(tmp_path):
    first = FileKeyring(tmp_path / "keys.json")
    payload = seal(first, "user-42", AAD, TEXT)
    again = FileKeyring(tmp_path / "keys.json")
    assert open_sealed(again, AAD, payload, where=WHERE) == TEXT
    assert again.current("user-42") == first.current("user-42")


def test_two_objects_on_one_path_share_one_key_per_subject(tmp_path):
    a, b = FileKeyring(tmp_path / "keys.json"), FileKeyring(tmp_path / "keys.json")
    b.current("other")  # b has loaded the file before a creates user-42's key
    key_id, key = a.current("user-42")
    assert b.current("user-42") == (key_id, key)
    assert len(stored(tmp_path / "keys.json")) == 2


def test_destroy_in_one_object_is_seen_by_another_without_restart(tmp_path):
    a, b = FileKeyring(tmp_path / "keys.json"), FileKeyring(tmp_path / "keys.json")
    key_id, key = a.current("user-42")
    assert b.get(key_id) == key  # b caches it now
    assert b.destroy("user-42") == 1
    assert a.get(key_id) is None
    new_id, _ = a.current("user-42")
    assert new_id != key_id
    assert b.current("user-42")[0] == new_id
    assert len(stored(tmp_path / "keys.json")) == 1


def test_current_is_served_from_the_cache_while_the_file_is_unchanged(tmp_path, monkeypatch):
    keyring = FileKeyring(tmp_path / "keys.json")
    expected = keyring.current("user-42")

    def no_reading(*args, **kwargs):
        raise AssertionError("the file was re-read")

    monkeypatch.setattr(FileKeyring, "_parse", no_reading)
    assert keyring.current("user-42") == expected
    assert keyring.get(expected[0]) == expected[1]


def test_get_rereads_once_when_the_stat_check_is_fooled(tmp_path, monkeypatch):
    a, b = FileKeyring(tmp_path / "keys.json"), FileKeyring(tmp_path / "keys.json")
    a.current("warm-up")
    key_id, key = a.current("user-42")
    real = FileKeyring._refresh

    def stat_sees_no_change(self, *, force=False):
        # As if the file changed within one mtime tick, to the same size, on a reused inode.
        if force:
            real(self, force=True)

    monkeypatch.setattr(FileKeyring, "_refresh", stat_sees_no_change)
    b._keys, b._current = {}, {}  # b's cache predates user-42's key
    assert b.get(key_id) == key
    assert b.get("0123456789abcdef") is None


def test_threads_on_two_objects_create_one_key(tmp_path):
    objects = [FileKeyring(tmp_path / "keys.json") for _ in range(2)]
    barrier = threading.Barrier(8)
    got: list[str] = []

    def worker(i: int) -> None:
        barrier.wait()
        for n in range(10):
            got.append(objects[i % 2].current(f"user-{n}")[0])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    keys = stored(tmp_path / "keys.json")
    assert len(keys) == 10
    assert sorted(e["subject"] for e in keys.values()) == sorted(f"user-{n}" for n in range(10))
    assert set(got) == set(keys)


SUBJECTS = [f"user-{n}" for n in range(25)]


def _race(args: tuple[str, Any]) -> dict[str, str]:
    path, barrier = args
    keyring = FileKeyring(path)
    barrier.wait()
    return {s: keyring.current(s)[0] for s in SUBJECTS}


def test_four_processes_racing_current_create_one_key_per_subject(tmp_path):
    path = str(tmp_path / "keys.json")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(4)
        with ctx.Pool(4) as pool:
            results = pool.map(_race, [(path, barrier)] * 4)
    # Check every process got the same key id for every subject, and the file holds exactly
    # those keys: no subject ever had a second current key.
    assert all(r == results[0] for r in results)
    keys = stored(tmp_path / "keys.json")
    assert len(keys) == len(SUBJECTS)
    assert {keys[k]["subject"]: k for k in keys} == results[0]


# -- FileKeyring: bad files ---------------------------------------------------------------


GOOD_KEY = base64.b64encode(b"k" * 32).decode()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "not JSON"),
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[]", 'no "format"'),
        (b'{"format": 1}', '"keys" is not an object'),
        (b'{"format": 0, "keys": {}}', "format 0 is unknown"),
        (b'{"format": 1, "keys": {"a": []}}', "malformed"),
        (b'{"format": 1, "keys": {"a": {"subject": "s", "created_at": "t"}}}', "malformed"),
        (
            b'{"format": 1, "keys": {"a": {"subject": "s", "created_at": "t", "key": "@@"}}}',
            "malformed",
        ),
        (
            b'{"format": 1, "keys": {"a": {"subject": "s", "created_at": "t", "key": "AAAA"}}}',
            "3 bytes, not 32",
        ),
        (
            f'{{"format": 1, "keys": {{"a": {{"subject": 5, "created_at": "t", "key": '
            f'"{GOOD_KEY}"}}}}}}'.encode(),
            "non-text subject",
        ),
        (b'{"format": 1, "keys": {}, "destroyed": []}', '"destroyed" is not an object'),
        (b'{"format": 1, "keys": {}, "destroyed": {"a": 5}}', '"destroyed" is not an object'),
    ],
)
def test_corrupt_file_is_a_clear_error_never_an_empty_keyring(tmp_path, content, reason):
    path = tmp_path / "keys.json"
    path.write_bytes(content)
    with pytest.raises(KeyringError, match=reason) as info:
        FileKeyring(path)
    assert str(path) in str(info.value)
    assert "restore it from its own backup" in str(info.value)
    assert info.value.path == str(path)
    assert path.read_bytes() == content


def test_corruption_after_opening_is_noticed_and_nothing_is_overwritten(tmp_path):
    path = tmp_path / "keys.json"
    keyring = FileKeyring(path)
    key_id, _ = keyring.current("user-42")
    path.write_bytes(b"garbage!")
    for call in (lambda: keyring.current("user-42"), lambda: keyring.get(key_id)):
        with pytest.raises(KeyringError, match="not a valid keyring"):
            call()
    with pytest.raises(KeyringError):
        keyring.current("new-subject")
    assert path.read_bytes() == b"garbage!"


def test_file_from_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text('{"format": 3, "keys": {}}')
    with pytest.raises(SchemaVersionError, match="upgrade chatledger"):
        FileKeyring(path)


def test_vanished_file_is_an_error_not_a_fresh_keyring(tmp_path):
    path = tmp_path / "keys.json"
    keyring = FileKeyring(path)
    keyring.current("user-42")
    path.unlink()
    with pytest.raises(KeyringError, match="vanished"):
        keyring.current("user-42")
    assert not path.exists()


def test_missing_directory_is_a_clear_error(tmp_path):
    keyring = FileKeyring(tmp_path / "nowhere" / "keys.json")
    with pytest.raises(KeyringError, match="create a key") as info:
        keyring.current("user-42")
    assert "nowhere" in str(info.value)


def test_several_keys_for_one_subject_pick_the_newest(tmp_path):
    # Files this module writes never have two, but a merged or future file may: every
    # process must agree on the same current key.
    path = tmp_path / "keys.json"
    doc = {
        "format": 1,
        "keys": {
            "old": {"subject": "s", "key": GOOD_KEY, "created_at": "2024-01-01T00:00:00+00:00"},
            "new": {"subject": "s", "key": GOOD_KEY, "created_at": "2025-01-01T00:00:00+00:00"},
        },
    }
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    keyring = FileKeyring(path)
    assert keyring.current("s")[0] == "new"
    assert keyring.destroy("s") == 2
    assert stored(path) == {}


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o602])
def test_a_keyring_others_can_read_or_write_is_refused_with_the_remedy(tmp_path, mode):
    path = tmp_path / "keys.json"
    key_id, key = FileKeyring(path).current("user-42")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # what chatledger writes
    path.chmod(mode)
    with pytest.raises(KeyringError, match=r"group or others have access.*chmod 600") as info:
        FileKeyring(path)
    assert str(path) in str(info.value)
    # Explicitly allowed, it opens; tightened, it opens without asking.
    assert FileKeyring(path, allow_insecure_permissions=True).get(key_id) == key
    path.chmod(0o600)
    assert FileKeyring(path).get(key_id) == key


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
def test_a_keyring_loosened_while_open_is_refused_at_its_next_reload(tmp_path):
    path = tmp_path / "keys.json"
    keyring = FileKeyring(path)
    keyring.current("user-42")
    other = FileKeyring(path)
    other.current("user-7")  # the file changed: the first object reloads on its next call
    path.chmod(0o644)
    with pytest.raises(KeyringError, match="group or others have access"):
        keyring.current("user-1")


def test_a_key_merely_missing_is_never_called_destroyed(keyring, tmp_path):
    # Another keyring (or an older copy of this one) never destroyed the key: say so.
    payload = seal(keyring, "user-42", AAD, TEXT)
    (key_id, _) = keyring.current("user-42")
    stranger = FileKeyring(tmp_path / "other.json")
    with pytest.raises(KeyUnavailableError) as info:
        open_sealed(stranger, AAD, payload, where=WHERE)
    assert not info.value.destroyed and not stranger.destroyed(key_id)
    assert "records no erasure of it" in str(info.value)
    assert "destroyed" not in str(info.value).replace("records no erasure", "")
    assert "pass keyring=" in str(info.value)


def test_a_destroyed_key_is_known_as_such_to_every_process_opening_the_file(tmp_path):
    path = tmp_path / "keys.json"
    key_id, _ = FileKeyring(path).current("user-42")
    assert FileKeyring(path).destroy("user-42") == 1
    again = FileKeyring(path)
    assert again.destroyed(key_id) and again.get(key_id) is None
    assert set(json.loads(path.read_text())["destroyed"]) == {key_id}
    assert "user-42" not in path.read_text()  # the record of an erasure names no subject


def _swap(path, a, b, field):
    doc = json.loads(path.read_text())
    keys = doc["keys"]
    keys[a][field], keys[b][field] = keys[b][field], keys[a][field]
    path.write_text(json.dumps(doc))
    path.chmod(0o600)


@pytest.mark.parametrize("field", ["subject", "key", "created_at"])
def test_swapped_labels_or_key_bytes_are_refused_and_erase_the_wrong_subject_never(tmp_path, field):
    path = tmp_path / "keys.json"
    keyring = FileKeyring(path)
    alice, _ = keyring.current("alice")
    bob, bob_key = keyring.current("bob")
    before = FileKeyring(path)  # sees the keys as written
    _swap(path, alice, bob, field)
    with pytest.raises(KeyringError, match=r"does not match its MAC.*swapped") as info:
        FileKeyring(path)
    assert repr(alice) in str(info.value) or repr(bob) in str(info.value)
    # An object that loaded the honest file refuses too (it reloads), and destroys nothing.
    with pytest.raises(KeyringError, match="does not match its MAC"):
        before.destroy("alice")
    keys = json.loads(path.read_text())["keys"]
    assert {alice, bob} <= keys.keys()
    assert base64.b64decode(keys[alice if field == "key" else bob]["key"]) == bob_key


def test_a_file_written_before_entry_macs_opens_and_gets_them_on_the_next_write(tmp_path):
    path = tmp_path / "keys.json"
    doc = {"format": 1, "keys": {"k1": {"subject": "s", "key": GOOD_KEY, "created_at": "t"}}}
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    keyring = FileKeyring(path)
    assert keyring.get("k1") == base64.b64decode(GOOD_KEY)
    keyring.current("another")
    assert all("mac" in entry for entry in json.loads(path.read_text())["keys"].values())
    assert FileKeyring(path).get("k1") == base64.b64decode(GOOD_KEY)


def test_a_key_listed_as_live_and_destroyed_is_a_corrupt_file(tmp_path):
    path = tmp_path / "keys.json"
    doc = {
        "format": 1,
        "keys": {"k1": {"subject": "s", "key": GOOD_KEY, "created_at": "t"}},
        "destroyed": {"k1": "2026-01-01T00:00:00+00:00"},
    }
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    with pytest.raises(KeyringError, match="both as a key and as destroyed"):
        FileKeyring(path)


def test_each_memory_has_its_own_key_and_destroying_one_keeps_the_others(keyring):
    subject_id, subject_key = keyring.current("dave")
    one, one_key = keyring.memory_key("dave", "m1")
    two, _ = keyring.memory_key("dave", "m2")
    assert len({subject_id, one, two}) == 3
    assert keyring.memory_key("dave", "m1") == (one, one_key)  # stable
    assert keyring.destroy_memory("dave", "m1") == 1
    assert keyring.get(one) is None and keyring.destroyed(one)
    assert keyring.get(two) is not None and keyring.get(subject_id) == subject_key
    assert keyring.memory_key("dave", "m1")[0] != one  # a new key after the erasure
    assert keyring.destroy("dave") == 3  # the subject's key and both memories' keys
    assert keyring.get(two) is None


def test_destroy_memories_destroys_exactly_those_memories_keys(keyring):
    subject_id, _ = keyring.current("dave")
    ids = {m: keyring.memory_key("dave", m)[0] for m in ("m1", "m2", "m3")}
    other, _ = keyring.memory_key("erin", "m1")  # same memory name, another subject
    assert keyring.destroy_memories("dave", ["m1", "m3", "m1"]) == 2
    assert keyring.destroyed(ids["m1"]) and keyring.destroyed(ids["m3"])
    # Check nothing else went: the other memory, the subject's own key, another subject's.
    assert all(keyring.get(k) is not None for k in (ids["m2"], subject_id, other))
    assert keyring.destroy_memories("dave", ["m1", "m3"]) == 0  # idempotent
    assert keyring.destroy_memories("dave", []) == 0


def test_the_default_destroy_memories_calls_destroy_memory_per_memory():
    class Counting(_OneKeyPerSubject):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[tuple[str, str]] = []

        def destroy_memory(self, subject: str, memory: str) -> int:
            self.calls.append((subject, memory))
            return 1

    ring = Counting()
    assert ring.destroy_memories("dave", ["m1", "m2"]) == 2
    assert ring.calls == [("dave", "m1"), ("dave", "m2")]


def test_erase_subject_under_a_longer_prefix_rewrites_the_key_file_once(tmp_path):
    # Once per memory, erasing 1,000 sessions under ("user-42", "tenant-a") took 35 s (each
    # rewrite of a file of N keys); it is one rewrite per subject (0.5 s).
    writes: list[str] = []

    class Counted(FileKeyring):
        def _write(self, operation, keys, destroyed):
            writes.append(operation)
            super()._write(operation, keys, destroyed)

    ring = Counted(tmp_path / "keys.json")
    with SQLiteEventStore(tmp_path / "chat.db", keyring=ring) as store:
        for i in range(5):
            store.append(("user-42", "tenant-a", i), batch(f"secret {i}"))
        store.append(("user-42", "tenant-b", 0), batch("kept"))
        writes.clear()
        receipts = store.erase_subject(("user-42", "tenant-a"), reason="GDPR")
        assert len(receipts) == 5
        assert writes == ["destroy keys"]
        assert texts(store.read(("user-42", "tenant-b", 0))) == ["kept"]
    assert len(ring._destroyed) == 5


# -- a master key: the file alone yields nothing and cannot be edited ------------------------


def _edit(path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    path.chmod(0o600)


def _wrapped_pair(tmp_path):
    path = tmp_path / "keys.json"
    keyring = FileKeyring(path, master_key=MASTER)
    alice, alice_key = keyring.current("alice")
    bob, bob_key = keyring.current("bob")
    return path, keyring, (alice, alice_key), (bob, bob_key)


def test_a_wrapped_keyring_file_holds_no_key_and_opens_only_with_its_master_key(tmp_path):
    path, keyring, (alice, alice_key), (bob, bob_key) = _wrapped_pair(tmp_path)
    memory_id, memory_key = keyring.memory_key("alice", "s1")
    raw = path.read_bytes()
    for key in (alice_key, bob_key, memory_key):
        for form in (key, key.hex().encode(), base64.b64encode(key)):
            assert form not in raw
    again = FileKeyring(path, master_key=MASTER)
    assert (again.get(alice), again.get(bob), again.get(memory_id)) == (
        alice_key,
        bob_key,
        memory_key,
    )
    with pytest.raises(KeyringError, match="wrapped under a master key: pass master_key="):
        FileKeyring(path)
    with pytest.raises(KeyringError, match="not the one this keyring was wrapped with"):
        FileKeyring(path, master_key=bytes(32))
    with pytest.raises(ValueError, match="master_key must be 32 bytes, not 5"):
        FileKeyring(path, master_key=b"short")


@pytest.mark.parametrize("field", ["subject", "wrapped", "created_at"])
def test_without_the_master_key_no_label_or_key_can_be_swapped(tmp_path, field):
    path, keyring, (alice, _), (bob, _) = _wrapped_pair(tmp_path)
    _swap(path, alice, bob, field)
    with pytest.raises(KeyringError, match="does not open under the master key") as info:
        FileKeyring(path, master_key=MASTER)
    assert repr(alice) in str(info.value) or repr(bob) in str(info.value)
    with pytest.raises(KeyringError, match="does not open under the master key"):
        keyring.destroy("alice")  # the object that loaded the honest file reloads, refuses
    assert {alice, bob} <= json.loads(path.read_text())["keys"].keys()


def test_without_the_master_key_no_entry_can_be_forged_or_downgraded(tmp_path):
    path, _, (alice, _), _ = _wrapped_pair(tmp_path)
    other = FileKeyring(tmp_path / "other.json", master_key=bytes(32))  # the forger's own
    forged_id, _ = other.current("alice")
    forged = json.loads((tmp_path / "other.json").read_text())["keys"][forged_id]

    def plant(doc: dict[str, Any]) -> None:
        doc["keys"][alice] = {**forged, "created_at": doc["keys"][alice]["created_at"]}

    _edit(path, plant)
    with pytest.raises(KeyringError, match=f"{alice!r} does not open under the master key"):
        FileKeyring(path, master_key=MASTER)
    path.unlink()
    path, _, (alice, alice_key), _ = _wrapped_pair(tmp_path)

    def downgrade(doc: dict[str, Any]) -> None:
        entry = doc["keys"][alice]
        entry["key"] = base64.b64encode(alice_key).decode()
        del entry["wrapped"]

    _edit(path, downgrade)
    with pytest.raises(KeyringError, match="stored unwrapped in a wrapped keyring"):
        FileKeyring(path, master_key=MASTER)


def test_without_the_master_key_no_erasure_can_be_forged_or_hidden(tmp_path):
    path, keyring, (alice, _), _ = _wrapped_pair(tmp_path)

    def fake_erasure(doc: dict[str, Any]) -> None:  # alice's key "destroyed by an erasure"
        del doc["keys"][alice]
        doc["destroyed"][alice] = "2026-11-26T00:00:00+00:00"

    _edit(path, fake_erasure)
    with pytest.raises(KeyringError, match="destroyed keys does not match its MAC"):
        FileKeyring(path, master_key=MASTER)
    path.unlink()
    path, keyring, (alice, _), _ = _wrapped_pair(tmp_path)
    assert keyring.destroy("alice") == 1
    assert FileKeyring(path, master_key=MASTER).destroyed(alice)
    _edit(path, lambda doc: doc["destroyed"].clear())  # hide the erasure
    with pytest.raises(KeyringError, match="destroyed keys does not match its MAC"):
        FileKeyring(path, master_key=MASTER)


def test_an_unwrapped_keyring_is_wrapped_once_and_never_adopted_silently(tmp_path):
    path = tmp_path / "keys.json"
    plain = FileKeyring(path)
    key_id, key = plain.current("alice")
    payload = seal(plain, "alice", AAD, TEXT)
    with pytest.raises(KeyringError, match=r"not wrapped.*FileKeyring.wrap\(path, master_key\)"):
        FileKeyring(path, master_key=MASTER)
    assert "wrapped" not in path.read_text()  # refused, not converted
    wrapped = FileKeyring.wrap(path, MASTER)
    assert wrapped.get(key_id) == key
    assert open_sealed(FileKeyring(path, master_key=MASTER), AAD, payload, where=WHERE) == TEXT
    assert base64.b64encode(key) not in path.read_bytes()
    with pytest.raises(KeyringError, match="wrapped under a master key"):
        FileKeyring.wrap(path, MASTER)  # once
    with pytest.raises(KeyringError, match="no such file"):
        FileKeyring.wrap(tmp_path / "none.json", MASTER)
    assert not (tmp_path / "none.json").exists()


# -- the edges an attacker or a third-party keyring reaches ------------------------------------


class _OneKeyPerSubject(Keyring):
    """A minimal third-party keyring (a KMS): only the abstract methods, the defaults kept."""

    def __init__(self) -> None:
        self.keys: dict[str, tuple[str, bytes]] = {}

    def current(self, subject: str) -> tuple[str, bytes]:
        return self.keys.setdefault(subject, (f"kms:{len(self.keys)}", os.urandom(32)))

    def get(self, key_id: str) -> bytes | None:
        return next((key for kid, key in self.keys.values() if kid == key_id), None)

    def destroy(self, subject: str) -> int:
        return int(self.keys.pop(subject, None) is not None)


def test_a_keyring_that_records_no_erasures_never_calls_a_key_destroyed():
    ring = _OneKeyPerSubject()
    payload = seal(ring, "user-42", AAD, TEXT, memory="m1")
    # Check per-memory sealing falls back to the subject's key, and erasing one memory of
    # such a keyring shreds nothing (it says so: 0 keys destroyed).
    assert payload.startswith(f"enc1:{ring.current('user-42')[0]}:")
    assert ring.destroy_memory("user-42", "m1") == 0
    # A key id with a colon (a KMS's) still parses: the last colon ends it.
    assert open_sealed(ring, AAD, payload, where=WHERE) == TEXT
    # Destroyed, its key is merely missing to a keyring that keeps no record of erasures.
    key_id = ring.current("user-42")[0]
    ring.destroy("user-42")
    with pytest.raises(KeyUnavailableError, match="does not hold that key") as info:
        open_sealed(ring, AAD, payload, where=WHERE)
    assert info.value.key_id == key_id and not info.value.destroyed
    assert not ring.destroyed(key_id)


def test_a_record_left_sealed_says_it_is_still_sealed():
    error = KeyUnavailableError(WHERE, "0123", keyring_given=None)
    assert "still sealed" in str(error) and not error.destroyed


def test_seal_refuses_a_keyring_that_returns_no_key_id():
    class Nameless(MemoryKeyring):
        def current(self, subject):
            return "", b"0" * 32

    with pytest.raises(KeyringError, match="non-empty id"):
        seal(Nameless(), "user-42", AAD, TEXT)


def test_an_empty_text_seals_and_opens():
    # Its sealed form is exactly a nonce and a tag: the shortest valid payload.
    keyring = MemoryKeyring()
    payload = seal(keyring, "user-42", AAD, "")
    assert len(base64.urlsafe_b64decode(payload.rsplit(":", 1)[1])) == 12 + 16
    assert open_sealed(keyring, AAD, payload, where=WHERE) == ""


def test_a_payload_with_characters_outside_base64_is_refused_not_cleaned():
    # A row edited to carry extra bytes must not open as if it were untouched.
    keyring = MemoryKeyring()
    payload = seal(keyring, "user-42", AAD, TEXT)
    head, data = payload.rsplit(":", 1)
    with pytest.raises(SealBrokenError, match="not base64"):
        open_sealed(keyring, AAD, f"{head}:{data[:8]}!{data[8:]}", where=WHERE)


def test_only_text_starting_with_the_prefix_is_sealed():
    # A BLOB put in the payload column by hand is not sealed content (and no TypeError).
    assert not is_sealed(b"enc1:k:AAAA")  # type: ignore[arg-type]
    assert sealed_key_id("enc1:kms:key:1:AAAA") == "kms:key:1"


# -- attacks found by the mutation run ------------------------------------------------------


def _stat_sees_no_change(monkeypatch):
    """As if every change to the file came within one mtime tick, to the same size, on a
    reused inode: only a forced read sees it."""
    real = FileKeyring._refresh

    def refresh(self, *, force=False):
        if force:
            real(self, force=True)

    monkeypatch.setattr(FileKeyring, "_refresh", refresh)


def test_a_destroy_rereads_under_the_lock_and_never_drops_another_process_key(
    tmp_path, monkeypatch
):
    path = tmp_path / "keys.json"
    a, b = FileKeyring(path), FileKeyring(path)
    alice, _ = a.current("alice")
    _stat_sees_no_change(monkeypatch)
    bob, bob_key = b.current("bob")  # written after a's last read
    assert a.destroy("alice") == 1
    monkeypatch.undo()
    fresh = FileKeyring(path)
    assert fresh.get(bob) == bob_key
    assert fresh.destroyed(alice) and fresh.get(alice) is None


def test_wrap_rereads_under_the_lock_and_never_drops_a_key_made_meanwhile(tmp_path, monkeypatch):
    path = tmp_path / "keys.json"
    other = FileKeyring(path)
    other.current("alice")
    _stat_sees_no_change(monkeypatch)
    real = FileKeyring._flocked
    made: dict[str, tuple[str, bytes]] = {}

    @contextlib.contextmanager
    def flocked(self, operation):
        if operation == "wrap" and not made:  # another process's write, just before ours
            made["bob"] = other.current("bob")
        with real(self, operation):
            yield

    monkeypatch.setattr(FileKeyring, "_flocked", flocked)
    wrapped = FileKeyring.wrap(path, MASTER)
    bob, bob_key = made["bob"]
    assert wrapped.get(bob) == bob_key


def test_a_missing_key_id_costs_one_read_of_the_file_not_one_per_lookup(tmp_path, monkeypatch):
    keyring = FileKeyring(tmp_path / "keys.json")
    keyring.current("user-42")
    assert keyring.get("0123456789abcdef") is None  # the one real read

    def no_reading(*args, **kwargs):
        raise AssertionError("the file was re-read")

    monkeypatch.setattr(FileKeyring, "_parse", no_reading)
    for _ in range(3):
        assert keyring.get("0123456789abcdef") is None


def test_a_wrapped_key_with_characters_outside_base64_is_refused_not_cleaned(tmp_path):
    path, _, (alice, _), _ = _wrapped_pair(tmp_path)

    def garble(doc):
        wrapped = doc["keys"][alice]["wrapped"]
        doc["keys"][alice]["wrapped"] = wrapped[:8] + "*" + wrapped[8:]

    _edit(path, garble)
    with pytest.raises(KeyringError, match=f"key '{alice}' is malformed") as info:
        FileKeyring(path, master_key=MASTER)
    assert info.value.path == str(path)
    assert "restore it from its own backup" in str(info.value)


@pytest.mark.parametrize("crash", ["fsync", "replace"])
def test_a_write_that_fails_midway_leaves_the_old_file_whole_and_says_so(
    tmp_path, monkeypatch, crash
):
    path = tmp_path / "keys.json"
    keyring = FileKeyring(path)
    alice, alice_key = keyring.current("alice")
    before = path.read_bytes()

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, crash, fail)
    with pytest.raises(KeyringError, match="No space left on device") as info:
        keyring.current("bob")
    monkeypatch.undo()
    e = info.value
    assert (e.operation, e.path) == ("create a key", str(path))
    assert "check the directory" in str(e)
    # Check nothing half-written is left: the old file as it was, no temporary file beside it.
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys.json", "keys.json.lock"]
    # ... and no key was handed out that the file does not hold.
    bob, bob_key = keyring.current("bob")
    fresh = FileKeyring(path)
    assert (fresh.get(alice), fresh.get(bob)) == (alice_key, bob_key)
