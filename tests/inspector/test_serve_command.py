"""`chatledger serve` as a user runs it: a real process, 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.cli.conftest import EXE


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serve(ledger: Path, *extra: str) -> tuple[int, str, int]:
    """Start the command, fetch / once it answers, stop it: (status, stderr, port)."""
    port = _free_port()
    proc = subprocess.Popen(
        [str(EXE), "serve", "--db", str(ledger), "--port", str(port), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        status = 0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not status:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/") as response:
                    status = response.status
            except OSError:
                time.sleep(0.1)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    return status, err, port


def test_serve_binds_localhost_and_says_where(ledger):
    status, err, port = _serve(ledger)
    assert status == 200
    assert f"inspector on http://127.0.0.1:{port}/ (read-only)" in err
    assert "warning" not in err


def test_another_host_is_explicit_and_warned_about(ledger):
    status, err, _ = _serve(ledger, "--host", "0.0.0.0")  # noqa: S104 - the case under test
    assert status == 200
    assert "warning: binding 0.0.0.0: anyone who can reach it reads every conversation" in err


def test_without_the_extra_serve_says_how_to_install_it(ledger):
    code = (
        "import sys; sys.modules['uvicorn'] = None; sys.modules['starlette'] = None\n"
        "from projections.cli import main\n"
        f"sys.exit(main(['serve', '--db', {str(ledger)!r}]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, env=os.environ
    )
    assert result.returncode == 1
    assert "from your chatledger clone: pip install -e '.[inspector]'" in result.stderr
    assert "Traceback" not in result.stderr


def _status_for_host(port: int, host: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", "/", skip_host=True)
        conn.putheader("Host", host)
        conn.endheaders()
        return conn.getresponse().status
    finally:
        conn.close()


def test_serve_answers_only_its_own_and_the_allowed_host_names(ledger):
    port = _free_port()
    args = ["serve", "--db", str(ledger), "--port", str(port)]
    proc = subprocess.Popen(
        [str(EXE), *args, "--allow-host", "inspector.lan", "--allow-host", "box"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                status = _status_for_host(port, f"127.0.0.1:{port}")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert status == 200
        assert _status_for_host(port, f"localhost:{port}") == 200
        assert _status_for_host(port, f"inspector.lan:{port}") == 200
        assert _status_for_host(port, "box") == 200
        # A page that rebinds its own name to 127.0.0.1 gets nothing
        assert _status_for_host(port, f"evil.example:{port}") == 421
    finally:
        proc.terminate()
        proc.wait(timeout=20)
