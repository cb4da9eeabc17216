"""The public API is small and pinned: each package's __all__ is sorted and complete."""

from __future__ import annotations

import argparse
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
        for name in dir(module)  # names load on first access: dir() lists them all
        if not name.startswith("_")
        and not isinstance(getattr(module, name), type(sys))  # submodules: reachable only
        and name != "annotations"
    }
    assert public == set(module.__all__)


@pytest.mark.parametrize("package", ["eventlog", "projections"])
def test_every_name_loads_on_first_access_from_the_module_that_defines_it(package):
    module = importlib.import_module(package)
    assert set(module._WHERE) == set(module.__all__)
    for name, where in module._WHERE.items():
        assert getattr(module, name) is getattr(importlib.import_module(where), name)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nope'"):
        _ = module.nope


_HEAVY = "('pydantic', 'sqlite_utils', 'cryptography', 'tiktoken', 'rich', 'apscheduler')"


def test_importing_the_packages_loads_none_of_the_heavy_dependencies():
    # `import eventlog, projections` took 250-300 ms when every name was imported eagerly.
    code = (
        "import sys\nimport eventlog, projections\n"
        f"heavy = [m for m in {_HEAVY} if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "eventlog.InMemoryEventStore\n"  # and a name, once used, brings what it needs
        "assert 'pydantic' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_chatledger_help_loads_none_of_the_heavy_dependencies():
    # 270 ms when every command's module was imported to build the parser; 60 ms now.
    code = (
        "import contextlib, io, sys\nfrom projections.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    assert main(['--help']) == 0\n"
        "assert 'erasure-receipt' in out.getvalue()\n"
        f"heavy = [m for m in {_HEAVY} if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_command_of_the_parser_runs_a_function():
    from projections.cli import app
    from projections.cli.args import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) == set(app.COMMANDS) | set(app.STORELESS)
    assert not set(app.COMMANDS) & set(app.STORELESS)
    for name in sub.choices:
        assert callable(app.command(name)), name


def test_eventlog_imports_without_psycopg():
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "import eventlog, projections\n"
        "assert 'eventlog.postgres' not in sys.modules\n"
        "assert 'eventlog.recorders.postgres' not in sys.modules\n"
        "store = eventlog.SQLiteEventStore(':memory:')\n"
        "assert not [m for m in sys.modules if m.startswith('eventlog') and 'postgres' in m]\n"
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


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("eventlog.lc4j_json", "eventlog.formats.lc4j_json"),
        ("eventlog.jsonl", "eventlog.formats.jsonl"),
        ("eventlog.messages", "eventlog.contents"),
        ("eventlog.ledger", "eventlog.ledger_models"),
    ],
)
def test_modules_split_or_moved_keep_their_old_import_paths(old, new):
    # Check code written against the old module path gets the very same objects: all of a
    # moved module's names, and the models and contents a split module still exports.
    before, after = importlib.import_module(old), importlib.import_module(new)
    moved = [name for name in after.__all__ if name in before.__all__]
    if old in ("eventlog.lc4j_json", "eventlog.jsonl"):
        assert moved == after.__all__
    assert len(moved) >= 4
    for name in moved:
        assert getattr(before, name) is getattr(after, name), name


@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        ("eventlog.memory", "eventlog.recorders.memory", ["InMemoryEventStore"]),
        (
            "eventlog.sqlite",
            "eventlog.recorders.sqlite",
            ["MIGRATIONS", "SQLiteEventStore", "is_ledger_file", "APPLICATION_ID"],
        ),
        ("eventlog.postgres", "eventlog.recorders.postgres", ["MIGRATIONS", "PostgresEventStore"]),
    ],
)
def test_the_backends_old_module_paths_give_the_same_objects(old, new, names):
    # The backends moved into eventlog.recorders; code importing from the old paths (and
    # the README's `from eventlog.postgres import PostgresEventStore`) gets the very classes.
    if "postgres" in old:
        pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")
    before, after = importlib.import_module(old), importlib.import_module(new)
    assert set(names) <= set(before.__all__)
    for name in names:
        assert getattr(before, name) is getattr(after, name), name
    import eventlog

    for name in ("InMemoryEventStore", "SQLiteEventStore"):
        if name in names:
            assert getattr(eventlog, name) is getattr(after, name)


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        ("projections.memories", "projections.window_memory", "DEFAULT"),
        ("projections.inspector.views", "projections.inspector.step_panels", "TIMELINE_PAGE"),
        ("projections.inspector.views", "projections.inspector.step_panels", "ONLY_WHAT_IF"),
    ],
)
def test_names_of_split_modules_import_from_where_they_were(old, new, name):
    if "inspector" in old:
        pytest.importorskip("starlette", reason="the [inspector] extra is not installed")
    before, after = importlib.import_module(old), importlib.import_module(new)
    assert getattr(before, name) is getattr(after, name)
