"""Without an optional extra, what needs it names the extra and the command that installs it.

chatledger is installed from a clone (it is on no package registry), so the command is
``pip install -e '.[EXTRA]'``, never ``pip install 'chatledger[EXTRA]'``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from eventlog import InMemoryEventStore

CASES = [
    ("projections.adapters.langchain", "langchain_core", "langchain"),
    ("projections.adapters.openai_agents", "agents", "openai-agents"),
    ("projections.adapters.langgraph", "langgraph", "langgraph"),
]


@pytest.mark.parametrize(("module", "framework", "extra"), CASES)
def test_an_adapter_without_its_framework_names_the_extra(monkeypatch, module, framework, extra):
    monkeypatch.delitem(sys.modules, module, raising=False)
    for name in [m for m in sys.modules if m == framework or m.startswith(framework + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, framework, None)
    with pytest.raises(ModuleNotFoundError) as raised:
        importlib.import_module(module)
    assert raised.value.name.split(".")[0] == framework
    assert f"needs the [{extra}] extra" in str(raised.value)
    assert str(raised.value).endswith(f"from your chatledger clone: pip install -e '.[{extra}]'")


def test_the_inspector_without_its_web_stack_names_the_extra(monkeypatch):
    from projections.inspector import serve

    monkeypatch.setitem(sys.modules, "uvicorn", None)
    with pytest.raises(ModuleNotFoundError) as raised:
        serve(InMemoryEventStore())
    assert raised.value.name == "uvicorn"
    assert str(raised.value).endswith("from your chatledger clone: pip install -e '.[inspector]'")


def test_no_message_sends_users_to_a_registry_that_lacks_chatledger():
    root = Path(__file__).resolve().parents[1]
    sources = root.glob("projections/**/*.py")
    offenders = [
        str(path.relative_to(root))
        for path in sources
        if "pip install 'chatledger[" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []
