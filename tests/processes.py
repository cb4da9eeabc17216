"""Child processes that a test kills.

``scripts/test`` measures every Python subprocess (``COVERAGE_PROCESS_START``): each one writes
its own coverage data file, a SQLite database, when it exits. A child killed with SIGKILL while
it exits leaves that database half written, which ``coverage combine`` reports as "database
disk image is malformed" and cannot remove. A child the test kills measures nothing useful, so it
runs unmeasured.
"""

from __future__ import annotations

import os

__all__ = ["unmeasured_env"]


def unmeasured_env() -> dict[str, str]:
    """This process's environment without coverage's subprocess hook, for a child to be killed."""
    return {k: v for k, v in os.environ.items() if k != "COVERAGE_PROCESS_START"}
