"""The conformance kit as a third party uses it: a pytest file of its own, outside this suite
(no conftest of ours), subclassing the kit with nothing but ``make_recorder``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import eventlog.testing

_BACKENDS = '''
import pytest

from eventlog import InMemoryEventStore, SQLiteEventStore
from eventlog.testing import LedgerConformance, RecorderConformance


class SQLiteKit:
    @pytest.fixture(autouse=True)
    def _database(self, tmp_path):
        self.path = tmp_path / "ledger.db"

    def make_recorder(self, **options):
        return SQLiteEventStore(self.path, **options)


class TestSQLiteRecorder(SQLiteKit, RecorderConformance): ...


class TestSQLiteLedger(SQLiteKit, LedgerConformance): ...


class Forgetful(InMemoryEventStore):
    """A backend with one bug: a read ignores its limit."""

    def read(self, memory_id, *, gt=None, lte=None, limit=None, desc=False):
        return super().read(memory_id, gt=gt, lte=lte, limit=None, desc=desc)


class TestForgetfulRecorder(RecorderConformance):
    reopenable = False

    @pytest.fixture(autouse=True)
    def _database(self):
        self.store = Forgetful()

    def make_recorder(self, **options):
        return self.store
'''


def _run(tmp_path: Path, *selection: str) -> str:
    (tmp_path / "test_backend.py").write_text(textwrap.dedent(_BACKENDS), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COVERAGE", "PYTEST"))}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rsf", *selection],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return result.stdout + result.stderr


def _count(output: str, word: str) -> int:
    found = re.search(rf"(\d+) {word}", output)
    return int(found.group(1)) if found else 0


def test_a_backend_with_only_make_recorder_passes_and_skips_what_needs_hooks(tmp_path):
    out = _run(tmp_path, "-k", "SQLite")
    # Check every contract test ran on the third party's SQLite: none failed, and the ones
    # that tamper with rows behind the store's back were skipped, saying which hook is missing.
    assert _count(out, "failed") == 0, out
    assert _count(out, "passed") > 100, out
    assert _count(out, "skipped") > 10, out
    assert "defines no tamper() hook" in out


def test_the_kit_catches_a_backend_that_breaks_the_contract(tmp_path):
    out = _run(tmp_path, "-k", "Forgetful")
    # Check the one bug (limit ignored) fails the recorder contract, naming the tests.
    assert _count(out, "failed") >= 1, out
    assert "FAILED test_backend.py::TestForgetfulRecorder::test_limit_and_desc" in out


def test_the_kit_exports_its_two_classes_and_documents_them():
    assert set(eventlog.testing.__all__) >= {"RecorderConformance", "LedgerConformance"}
    assert "make_recorder" in (eventlog.testing.__doc__ or "")
