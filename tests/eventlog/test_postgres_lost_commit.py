"""An erase or purge whose COMMIT reached the server, but whose reply never reached the client.

A real TCP proxy between the store and PostgreSQL drops the connection at the one moment the
client cannot see through: the server has committed and its ``COMMIT`` reply is on the wire. The
store must ask the server (as it does for a lost append) and return what landed, instead of
leaving the caller an unknown outcome or, worse, an error for work that was done.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from collections.abc import Iterator

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from eventlog.testing.records import batch
from tests.conftest import PG_DSN, require_pg


class _CommitReplyDropper:
    """Forwards connections to PostgreSQL; once a client has sent ``trigger``, the first server
    reply holding a ``COMMIT`` command tag is dropped with both sockets (once per proxy)."""

    def __init__(self, trigger: bytes) -> None:
        params = conninfo_to_dict(PG_DSN)
        self.target = (str(params.get("host", "127.0.0.1")), int(str(params.get("port", 5432))))
        self.trigger = trigger
        self.armed = threading.Event()
        self.fired = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        try:
            while data := src.recv(65536):
                if from_client and self.trigger in data:
                    self.armed.set()
                if (
                    not from_client
                    and self.armed.is_set()
                    and not self.fired.is_set()
                    and b"COMMIT\x00" in data
                ):
                    self.fired.set()  # the server committed; the client never hears of it
                    break
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def schema() -> Iterator[str]:
    require_pg()
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'.encode())


@pytest.mark.parametrize("operation", ["erase", "purge"])
def test_a_lost_commit_reply_is_resolved_to_what_landed(schema, operation):
    from eventlog.postgres import PostgresEventStore

    if str(conninfo_to_dict(PG_DSN).get("host", "127.0.0.1")).startswith("/"):
        pytest.skip("the proxy needs PostgreSQL over TCP; CHATLEDGER_TEST_PG_DSN names a socket")
    with PostgresEventStore(PG_DSN, schema=schema) as direct:
        direct.append("m", batch("secret", "more"))
    proxy = _CommitReplyDropper(b"memory_erased" if operation == "erase" else b"memory_purged")
    # sslmode=disable: the proxy reads the protocol's command tags.
    dsn = make_conninfo(PG_DSN, host="127.0.0.1", port=proxy.port, sslmode="disable")
    try:
        with PostgresEventStore(dsn, schema=schema) as store:
            if operation == "erase":
                record = store.erase("m", reason="GDPR request").record
            else:
                record = store.purge("m", expected_seq=2, reason="retention")
            # Check the reply really was lost after the commit, and the call still returned
            # the record that landed - once: the store did not run it a second time.
            assert proxy.fired.is_set()
            assert record.seq == 3
            assert record.kind == ("memory_erased" if operation == "erase" else "memory_purged")
            stored = store.read("m")
            assert stored[-1] == record
            assert store.head("m").seq == 3
            assert store.verify().ok
            if operation == "erase":
                assert [r.erased for r in stored] == [True, True, False]
            else:
                assert [r.seq for r in stored] == [3]
    finally:
        proxy.close()
