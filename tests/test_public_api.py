"""The public API is small and pinned: each package's __all__ is sorted and complete."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


@pytest.mark.parametrize("package", ["eventlog", "projections"])
def test_all_is_sorted_and_importable(package):
    module = importlib.import_module(package)
    names = module.__all__
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    for name in names:
        assert hasattr(module, name), name


@pytest.mark.parametrize("package", ["eventlog", "projections"])
def test_all_lists_every_public_name(package):
    module = importlib.import_module(package)
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, type(sys))  # submodules are reachable, not re-exported
        and name != "annotations"
    }
    assert public == set(module.__all__)


def test_eventlog_imports_without_psycopg():
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "import eventlog, projections\n"
        "assert 'eventlog.postgres' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_projections_imports_without_the_optional_extras():
    code = (
        "import sys\n"
        "for name in ('starlette', 'jinja2', 'uvicorn', 'agents', 'langchain_core', 'langgraph'):\n"
        "    sys.modules[name] = None\n"
        "import eventlog, projections, projections.cli\n"
        "assert 'projections.inspector.web' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_one_error_tree_every_public_error_is_an_eventlog_error():
    import eventlog

    errors = []
    for package in ("eventlog", "projections", "projections.replay", "projections.tokens"):
        module = importlib.import_module(package)
        values = [getattr(module, name) for name in module.__all__]
        errors += [v for v in values if isinstance(v, type) and issubclass(v, BaseException)]
    assert len(errors) >= 15
    for error in errors:
        assert issubclass(error, eventlog.EventLogError), error
        assert getattr(eventlog, error.__name__) is error, f"{error.__name__} not in eventlog"


def test_errors_raised_by_projections_keep_their_older_bases():
    # Code written before the one tree catches them as it did.
    from eventlog import ContentErasedError, EncodingUnavailableError

    assert issubclass(ContentErasedError, ValueError)
    assert issubclass(EncodingUnavailableError, RuntimeError)
