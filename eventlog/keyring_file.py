"""The keyring file: :class:`FileKeyring`, keys in a JSON file, wrapped under a master key or not.

Sealing, the :class:`~eventlog.keyring.Keyring` interface and the in-memory keyring are in
:mod:`eventlog.keyring`; this module owns the file: its format, its locking and atomic
rewrites, the entries' MACs and the master key's wrapping.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import json
import os
import re
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, NoReturn, TypeAlias

from eventlog.errors import SchemaVersionError
from eventlog.keyring import (
    KEY_BYTES,
    NONCE_BYTES,
    Keyring,
    KeyringError,
    cipher,
    invalid_tag,
    new_key,
    new_key_id,
)

__all__ = ["FileKeyring"]

_FILE_FORMAT: Final = 1  # keys in the file as they are (base64)
_WRAPPED_FORMAT: Final = 2  # keys wrapped under a master key held elsewhere


@dataclass(frozen=True, slots=True)
class _Entry:
    subject: str
    key: bytes
    created_at: str
    memory: str = ""  # the memory whose content key this is ("" for the subject's own)


_Stamp: TypeAlias = tuple[int, int, int]  # st_mtime_ns, st_size, st_ino


class FileKeyring(Keyring):
    """Keys in a JSON file (mode 0600), shared safely by threads and processes on one host.

    The file is ``{"format": 1, "keys": {key_id: {"subject", "key" (base64), "created_at",
    "mac"}}, "destroyed": {key_id: time}}`` and is created with the first key. With a master
    key (``master_key=``, kept elsewhere) it is format 2: each key ``"wrapped"`` under it, the
    file's ``"master_check"`` and the ``"destroyed_mac"`` of the list of destroyed keys.
    Every change takes an exclusive ``flock`` on ``<path>.lock``, re-reads the file under it
    and replaces the file atomically (temporary file, fsync, rename, fsync of the directory),
    so a crash leaves the old or the new file, never a torn one. Use a local filesystem:
    ``flock`` across NFS hosts is not reliable.

    Keys are cached; each call stats the file and reloads it when it changed, so a
    :meth:`destroy` by another process is seen on the next call. A call already past that
    check may still seal one message with the key being destroyed: stop writes to a subject
    while erasing it.

    Destroying a key removes it from the current file only. Copies of the file made earlier
    (its backups, freed filesystem blocks, snapshots) still hold it: keep the keyring off the
    database's backup path. Python cannot wipe the key bytes from this process's memory either.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        master_key: bytes | None = None,
        allow_insecure_permissions: bool = False,
    ) -> None:
        """Open the keyring at ``path``; a missing file is an empty keyring.

        Args:
            path: The keyring file (created 0600 with the first key).
            master_key: 32 secret bytes kept apart from the file (a KMS, a secret manager, a
                file on another volume). With it, every key is stored wrapped under it
                (AES-GCM, the entry's id, subject, memory and date as associated data) and
                the list of destroyed keys carries its MAC: the file alone (a backup, a
                copy) yields no key, and no entry, label or "destroyed" record can be
                changed, swapped or forged without it. Such a file opens only with it; an
                unwrapped file is wrapped once with :meth:`wrap`.
            allow_insecure_permissions: Use a file that group or others may read or write
                (refused by default, as ssh refuses such a private key): only when something
                else protects it, e.g. a directory no one else can enter.

        Raises:
            KeyringError: If the file exists but cannot be read, is not a keyring, or group
                or others have any permission on it; if it is wrapped and no (or another)
                master key is given, or unwrapped and one is; if an entry or the list of
                destroyed keys does not verify.
            SchemaVersionError: If the file was written by a newer chatledger.
            ValueError: If ``master_key`` is not 32 bytes.
        """
        self._path = Path(path)
        self._wrapping = None if master_key is None else _Wrapping(master_key)
        self._allow_insecure = allow_insecure_permissions
        self._lock_path = Path(f"{self._path}.lock")
        self._lock = threading.Lock()
        self._keys: dict[str, _Entry] = {}
        self._destroyed: dict[str, str] = {}  # key id -> when an erasure destroyed it
        self._current: dict[tuple[str, str], str] = {}  # (subject, memory) -> key id
        self._stamp: _Stamp | None = None
        # Ids looked up in vain since the last load: repeated reads of erased rows must not
        # re-read the file once per row.
        self._missing: set[str] = set()
        with self._lock:
            self._refresh(force=True)

    def __repr__(self) -> str:
        return f"FileKeyring({str(self._path)!r})"

    @classmethod
    def wrap(
        cls,
        path: str | os.PathLike[str],
        master_key: bytes,
        *,
        allow_insecure_permissions: bool = False,
    ) -> FileKeyring:
        """Wrap the keys of an unwrapped keyring file under ``master_key``, in place (under
        the file's lock, replaced atomically), and return the keyring opened with it.

        Copies of the file made before (backups, freed filesystem blocks) still hold the keys
        unwrapped: this protects what is written from now on.

        Raises:
            KeyringError: The file does not exist, is already wrapped, or does not verify.
            ValueError: ``master_key`` is not 32 bytes.
        """
        wrapping = _Wrapping(master_key)  # checked before anything is read or written
        plain = cls(path, allow_insecure_permissions=allow_insecure_permissions)
        with plain._lock, plain._flocked("wrap"):
            plain._refresh(force=True)
            if plain._stamp is None:
                plain._fail(
                    "wrap",
                    "no such file; a new keyring is created wrapped by "
                    "FileKeyring(path, master_key=...) with its first key",
                )
            plain._wrapping = wrapping
            plain._write("wrap", plain._keys, plain._destroyed)
        return cls(
            path, master_key=master_key, allow_insecure_permissions=allow_insecure_permissions
        )

    def current(self, subject: str) -> tuple[str, bytes]:
        return self._scoped(subject, "")

    def memory_key(self, subject: str, memory: str) -> tuple[str, bytes]:
        return self._scoped(subject, memory)

    def _scoped(self, subject: str, memory: str) -> tuple[str, bytes]:
        with self._lock:
            self._refresh()
            key_id = self._current.get((subject, memory))
            if key_id is None:
                with self._flocked("create a key"):
                    # Another process may have created this key since our last load; only a
                    # read under the lock can tell, and two current keys for one subject (or
                    # memory) would split its content between them.
                    self._refresh(force=True)
                    key_id = self._current.get((subject, memory))
                    if key_id is None:
                        key_id = new_key_id(self._keys)
                        created_at = datetime.now(UTC).isoformat()
                        entry = _Entry(subject, new_key(), created_at, memory)
                        keys = {**self._keys, key_id: entry}
                        self._write("create a key", keys, self._destroyed)
            return key_id, self._keys[key_id].key

    def get(self, key_id: str) -> bytes | None:
        with self._lock:
            self._refresh()
            entry = self._keys.get(key_id)
            if entry is None and key_id not in self._missing:
                # The stat check can miss a change (same size, same mtime tick, reused inode);
                # one real read before answering "destroyed" rules that out.
                self._refresh(force=True)
                entry = self._keys.get(key_id)
                if entry is None:
                    self._missing.add(key_id)
            return None if entry is None else entry.key

    def destroy(self, subject: str) -> int:
        return self._destroy(lambda e: e.subject == subject)

    def destroy_memory(self, subject: str, memory: str) -> int:
        return self._destroy(lambda e: (e.subject, e.memory) == (subject, memory))

    def destroy_memories(self, subject: str, memories: Sequence[str]) -> int:
        # One locked rewrite for all of them: once per memory rewrote a file of N keys N times.
        wanted = set(memories)
        return self._destroy(lambda e: e.subject == subject and e.memory in wanted)

    def _destroy(self, doomed: Callable[[_Entry], bool]) -> int:
        with self._lock, self._flocked("destroy keys"):
            self._refresh(force=True)
            kept = {k: e for k, e in self._keys.items() if not doomed(e)}
            now = datetime.now(UTC).isoformat()
            # Each destroyed id is remembered (ids are random: they say nothing about whose
            # key it was), so a read of its content can say "destroyed by an erasure" and
            # mean it, and a key merely missing (another keyring, an older copy) is not
            # mistaken for one.
            gone = {k: now for k in self._keys.keys() - kept.keys()}
            if gone:
                self._write("destroy keys", kept, {**self._destroyed, **gone})
            return len(gone)

    def destroyed(self, key_id: str) -> bool:
        with self._lock:
            self._refresh()
            return key_id in self._destroyed

    # -- file handling; callers hold self._lock ---------------------------------------------

    def _refresh(self, *, force: bool = False) -> None:
        if not force:
            try:
                st = os.stat(self._path)
            except FileNotFoundError:
                stamp = None
            except OSError as e:
                self._fail_from("load", f"cannot stat the file ({e})", e)
            else:
                stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
            if stamp == self._stamp:
                return
        try:
            # Non-blocking: a FIFO put at the path must not hang the open (it is refused
            # below); reads of a regular file are unaffected.
            fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            if self._stamp is not None:
                # Starting over empty would seal new content with keys nobody else knows (and
                # that a restored file would drop); the caller must decide, not us.
                self._fail(
                    "load",
                    "the file was there and has vanished; restore it from its backup, or "
                    "open a new FileKeyring to start an empty keyring deliberately",
                )
            self._install({}, {}, None)
            return
        except OSError as e:
            self._fail_from("load", f"cannot open the file ({e})", e)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            # A FIFO would hang the read, a device (a link to /dev/zero) never end it, and a
            # directory (a path of "" or ".") fails open() with a bare IsADirectoryError.
            os.close(fd)
            self._fail(
                "load",
                f"it is not a regular file ({stat.filemode(st.st_mode)}); pass the path of the "
                "keyring file, or restore it from its own backup",
            )
        with open(fd, "rb") as f:
            raw = f.read()
        keys, destroyed = self._parse(raw)
        if st.st_mode & 0o077 and not self._allow_insecure and os.name != "nt":
            # Everyone who can read the file can read every sealed message, and whoever can
            # write it can swap keys: a copy made with a loose umask must not pass silently.
            self._fail(
                "load",
                f"group or others have access to it (mode {stat.filemode(st.st_mode)}): run "
                f"`chmod 600 {self._path}`, or pass allow_insecure_permissions=True if "
                "something else keeps others out",
            )
        self._install(keys, destroyed, (st.st_mtime_ns, st.st_size, st.st_ino))

    def _install(
        self, keys: dict[str, _Entry], destroyed: dict[str, str], stamp: _Stamp | None
    ) -> None:
        current: dict[tuple[str, str], str] = {}
        for key_id, entry in keys.items():
            # Files this module writes have one key per subject (and memory); should one hold
            # several (a merged file, a future rotation), every process picks the newest.
            best = current.get(scope := (entry.subject, entry.memory))
            if best is None or (keys[best].created_at, best) < (entry.created_at, key_id):
                current[scope] = key_id
        self._keys, self._current, self._stamp = keys, current, stamp
        self._destroyed = destroyed
        self._missing = set()

    def _parse(self, raw: bytes) -> tuple[dict[str, _Entry], dict[str, str]]:
        # Never fall back to an empty keyring here: new keys would be made and the old
        # content would stay sealed under keys this object pretends do not exist.
        try:
            doc = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            self._corrupt(f"it is not JSON ({e})")
        if not isinstance(doc, dict) or not isinstance(doc.get("format"), int):
            self._corrupt('it has no "format" number')
        if doc["format"] > _WRAPPED_FORMAT:
            what = f"keyring {str(self._path)!r}"
            raise SchemaVersionError(what, doc["format"], _WRAPPED_FORMAT)
        keys = doc.get("keys")
        if doc["format"] not in (_FILE_FORMAT, _WRAPPED_FORMAT) or not isinstance(keys, dict):
            self._corrupt(f'format {doc["format"]} is unknown or "keys" is not an object')
        wrapping = self._wrapping_of(doc)
        entries: dict[str, _Entry] = {}
        for key_id, item in keys.items():
            entries[key_id] = self._entry(key_id, item, wrapping)
        if wrapping is None:
            # Every write gives every entry its MAC; only a file from before MACs has none.
            # One without it beside entries that have one was edited (its MAC deleted to get
            # an edited subject past the check).
            bare = [k for k, item in keys.items() if item.get("mac") is None]
            if bare and len(bare) < len(keys):
                self._corrupt(
                    f"key {bare[0]!r} has no MAC while other entries have one: its MAC was "
                    "deleted, and its subject, id, date or key bytes may have been changed"
                )
        destroyed = doc.get("destroyed", {})
        if not isinstance(destroyed, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in destroyed.items()
        ):
            self._corrupt('"destroyed" is not an object of key ids and times')
        if wrapping is not None and not hmac.compare_digest(
            str(doc.get("destroyed_mac")), wrapping.destroyed_mac(destroyed)
        ):
            # Without this, anyone who can write the file could make a read say "destroyed
            # by an erasure" of content that was never erased (or hide an erasure).
            self._corrupt(
                "the list of destroyed keys does not match its MAC: a key was added to it or "
                "removed from it since the keyring wrote it"
            )
        if both := sorted(entries.keys() & destroyed.keys()):
            self._corrupt(f"key {both[0]!r} is listed both as a key and as destroyed")
        return entries, destroyed

    def _wrapping_of(self, doc: dict[str, Any]) -> _Wrapping | None:
        """The master key that opens this file (None for an unwrapped one), checked."""
        wrapped = doc["format"] == _WRAPPED_FORMAT
        if wrapped and self._wrapping is None:
            self._fail(
                "load",
                "its keys are wrapped under a master key: pass master_key= (the CLI: "
                "--keyring-master-key FILE), the 32 bytes the keyring was wrapped with",
            )
        if not wrapped and self._wrapping is not None:
            # Refused, not converted: a wrapped file swapped for an unwrapped forgery must
            # not be adopted on the next write.
            self._fail(
                "load",
                "its keys are not wrapped, but a master key was given: wrap the file once "
                "with FileKeyring.wrap(path, master_key) (or open it without master_key)",
            )
        if self._wrapping is not None and not hmac.compare_digest(
            str(doc.get("master_check")), self._wrapping.check
        ):
            self._fail(
                "load",
                "the master key given is not the one this keyring was wrapped with (or the "
                "file was replaced by another keyring): pass the right master key",
            )
        return self._wrapping

    def _entry(self, key_id: str, item: Any, wrapping: _Wrapping | None) -> _Entry:
        """One entry of the file, its key unwrapped or its MAC checked."""
        try:
            subject, created_at = item["subject"], item["created_at"]
            memory = item.get("memory", "")
            if wrapping is None:
                key = base64.b64decode(item["key"], validate=True)
            else:
                if "key" in item:
                    self._corrupt(f"key {key_id!r} is stored unwrapped in a wrapped keyring")
                sealed = base64.b64decode(item["wrapped"], validate=True)
        except (TypeError, KeyError, AttributeError, ValueError) as e:  # binascii.Error too
            self._corrupt(f"key {key_id!r} is malformed ({type(e).__name__}: {e})")
        if not (key_id and isinstance(subject, str) and isinstance(created_at, str)):
            self._corrupt(f"key {key_id!r} has an empty id or a non-text subject or date")
        if not isinstance(memory, str):
            self._corrupt(f"key {key_id!r} has a non-text memory")
        try:
            _entry_text(key_id, subject, created_at, memory)
        except UnicodeEncodeError:  # what binds the entry (its MAC or wrapping) is UTF-8
            self._corrupt(f"key {key_id!r} holds a lone surrogate, which is not UTF-8 text")
        if wrapping is not None:
            unwrapped = wrapping.unwrap(sealed, _entry_text(key_id, subject, created_at, memory))
            if unwrapped is None:
                self._corrupt(
                    f"key {key_id!r} does not open under the master key: its subject, "
                    "memory, id, date or key bytes were changed since it was written "
                    "(swapped between entries, or forged), so erasing by subject could "
                    "destroy another subject's key"
                )
            key = unwrapped
        if len(key) != KEY_BYTES:
            self._corrupt(f"key {key_id!r} has {len(key)} bytes, not {KEY_BYTES}")
        entry = _Entry(subject, key, created_at, memory)
        # Files written before entries carried a MAC have none; every write adds them.
        mac = item.get("mac") if wrapping is None else None
        if mac is not None and not hmac.compare_digest(str(mac), _entry_mac(key_id, entry)):
            self._corrupt(
                f"key {key_id!r} does not match its MAC: its subject, id, date or key bytes "
                "were changed since it was written (swapped between entries?), so erasing "
                "by subject could destroy another subject's key"
            )
        return entry

    def _write(self, operation: str, keys: dict[str, _Entry], destroyed: dict[str, str]) -> None:
        data = _document(keys, destroyed, self._wrapping)
        directory = self._path.parent
        try:
            self._remove_stray_copies(directory)
            # mkstemp creates the file 0600 whatever the umask; the temp file sits in the
            # same directory so os.replace is an atomic rename, not a copy.
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{self._path.name}.", suffix=".tmp")
            try:
                with open(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self._path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            # The rename is durable only once the directory entry is on disk.
            dir_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
            st = os.stat(self._path)
        except OSError as e:
            self._fail_from(operation, f"cannot write the file ({e}); check the directory", e)
        # No other writer can have replaced the file since: we hold the flock.
        self._install(dict(keys), dict(destroyed), (st.st_mtime_ns, st.st_size, st.st_ino))

    def _remove_stray_copies(self, directory: Path) -> None:
        """Delete temporary files a writer killed before its rename left (they hold every key
        of their time, and a key destroyed later would live on in them). Callers hold the
        flock, so no live writer of this keyring has one; the name is mkstemp's exactly, so
        another keyring's in the same directory never matches."""
        stray = re.compile(rf"\.{re.escape(self._path.name)}\.[a-z0-9_]{{8}}\.tmp")
        for name in os.listdir(directory):
            if stray.fullmatch(name):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(directory / name)

    @contextlib.contextmanager
    def _flocked(self, operation: str) -> Iterator[None]:
        # Imported here so the rest of the module (MemoryKeyring, seal) works where fcntl
        # does not exist (Windows).
        import fcntl

        try:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as e:
            self._fail_from(operation, f"cannot open the lock file {str(self._lock_path)!r}", e)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as e:
                self._fail_from(operation, f"cannot lock {str(self._lock_path)!r} ({e})", e)
            yield
        finally:
            os.close(fd)  # releases the flock; the lock file stays, deleting it would race

    def _corrupt(self, detail: str) -> NoReturn:
        self._fail(
            "load",
            f"the file is not a valid keyring: {detail}; restore it from its own backup (do "
            "not delete it: a new keyring cannot open content sealed with the old keys)",
        )

    def _fail(self, operation: str, detail: str) -> NoReturn:
        raise KeyringError(operation, detail, path=str(self._path))

    def _fail_from(self, operation: str, detail: str, cause: Exception) -> NoReturn:
        raise KeyringError(operation, detail, path=str(self._path)) from cause


def _entry_text(key_id: str, subject: str, created_at: str, memory: str) -> bytes:
    """What binds a key to its entry: its id, subject, date and memory, length-prefixed."""
    text = (
        f"chatledger.keyring.entry.v1\x1f{len(key_id)}:{key_id}"
        f"\x1f{len(subject)}:{subject}\x1f{len(created_at)}:{created_at}"
    )
    if memory:  # a memory's own key (absent from subject keys, whose MACs predate it)
        text += f"\x1f{len(memory)}:{memory}"
    return text.encode()


def _entry_mac(key_id: str, entry: _Entry) -> str:
    """An unwrapped keyring entry's MAC, under its own key: binds id, subject, date and key
    bytes, so a label or key swapped between entries, or an edited entry, no longer verifies.
    Whoever holds the file holds the keys and could recompute it: it stops mistakes and naive
    edits, not a forger who reads the file (a master key does: see :class:`_Wrapping`)."""
    text = _entry_text(key_id, entry.subject, entry.created_at, entry.memory)
    return hmac.new(entry.key, text, "sha256").hexdigest()


class _Wrapping:
    """A keyring's master key at work: keys wrapped (AES-GCM, the entry as associated data)
    and the list of destroyed keys MACed, under two keys derived from it (one per use)."""

    def __init__(self, master_key: bytes) -> None:
        if not isinstance(master_key, bytes) or len(master_key) != KEY_BYTES:
            size = len(master_key) if isinstance(master_key, bytes) else type(master_key).__name__
            msg = (
                f"FileKeyring: master_key must be {KEY_BYTES} bytes, not {size}; make one with "
                "os.urandom(32) (or `head -c 32 /dev/urandom`) and keep it apart from the file"
            )
            raise ValueError(msg)
        self._wrap_key = hmac.digest(master_key, b"chatledger.keyring.wrap.v1", "sha256")
        self._mac_key = hmac.digest(master_key, b"chatledger.keyring.mac.v1", "sha256")
        self.check = hmac.new(self._mac_key, b"chatledger.keyring.check.v1", "sha256").hexdigest()

    def wrap(self, key: bytes, entry_text: bytes) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = cipher(self._wrap_key).encrypt(nonce, key, entry_text)
        return base64.b64encode(nonce + sealed).decode("ascii")

    def unwrap(self, sealed: bytes, entry_text: bytes) -> bytes | None:
        """The key, or None when it does not open with this entry under this master key."""
        try:
            return cipher(self._wrap_key).decrypt(
                sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], entry_text
            )
        except invalid_tag():
            return None

    def destroyed_mac(self, destroyed: dict[str, str]) -> str:
        text = json.dumps(sorted(destroyed.items()), separators=(",", ":")).encode()
        return hmac.new(
            self._mac_key, b"chatledger.keyring.destroyed.v1\x1f" + text, "sha256"
        ).hexdigest()


def _document(
    keys: dict[str, _Entry], destroyed: dict[str, str], wrapping: _Wrapping | None
) -> bytes:
    """The keyring file's bytes: keys as they are (with their MACs) or wrapped."""
    entries: dict[str, dict[str, str]] = {}
    for k, e in keys.items():
        entry = {"subject": e.subject, "created_at": e.created_at}
        if e.memory:
            entry["memory"] = e.memory
        if wrapping is None:
            entry["key"] = base64.b64encode(e.key).decode("ascii")
            entry["mac"] = _entry_mac(k, e)
        else:
            entry["wrapped"] = wrapping.wrap(
                e.key, _entry_text(k, e.subject, e.created_at, e.memory)
            )
        entries[k] = entry
    doc: dict[str, Any] = {"keys": entries, "destroyed": destroyed}
    if wrapping is None:
        doc["format"] = _FILE_FORMAT
    else:
        doc |= {
            "format": _WRAPPED_FORMAT,
            "master_check": wrapping.check,
            "destroyed_mac": wrapping.destroyed_mac(destroyed),
        }
    return json.dumps(doc, indent=2, sort_keys=True).encode("utf-8")
