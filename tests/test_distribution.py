"""The package as published: SPDX license with its file, metadata, extras as tested ranges, and
an sdist that carries what it needs to test itself."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_the_license_is_an_spdx_expression_with_the_full_apache_text():
    assert PROJECT["license"] == "Apache-2.0"
    assert PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    # PEP 639: with an SPDX expression, license classifiers are an error.
    assert not [c for c in PROJECT["classifiers"] if c.startswith("License ::")]


def test_the_metadata_names_authors_classifiers_and_keywords():
    assert PROJECT["authors"] == [{"name": "chatledger developers"}]
    assert "Programming Language :: Python :: 3 :: Only" in PROJECT["classifiers"]
    assert "Typing :: Typed" in PROJECT["classifiers"]
    assert {"event-sourcing", "langchain4j"} <= set(PROJECT["keywords"])


def test_each_distribution_is_listed_once_and_test_takes_the_other_extras_by_name():
    extras = PROJECT["optional-dependencies"]
    names = [
        canonicalize_name(Requirement(r).name)
        for extra in extras.values()
        for r in extra
        if Requirement(r).name != "chatledger"
    ]
    names += [canonicalize_name(Requirement(r).name) for r in PROJECT["dependencies"]]
    assert sorted({n for n in names if names.count(n) > 1}) == []
    (itself,) = [Requirement(r) for r in extras["test"] if Requirement(r).name == "chatledger"]
    assert itself.extras == {"postgres", "inspector", "openai-agents", "langchain", "langgraph"}


def _script(script: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("pin", ROOT / "scripts" / script)
    assert spec is not None
    assert spec.loader is not None
    sys.path.insert(0, str(ROOT / "scripts"))  # the script imports peer_suite beside it
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return module


def _script_constant(script: str, name: str) -> str:
    return str(getattr(_script(script), name))


@pytest.mark.parametrize(
    ("extra", "script"),
    [("openai-agents", "agents_sdk_tests.py"), ("langchain", "langchain_core_tests.py")],
)
def test_framework_extras_are_ranges_whose_ends_are_the_certified_versions(extra, script):
    (requirement,) = [Requirement(r) for r in PROJECT["optional-dependencies"][extra]]
    operators = {s.operator for s in requirement.specifier}
    assert "==" not in operators
    assert operators & {"<", "<="}
    # CI certifies both ends: the oldest is the lower bound itself, the newest lies in the range.
    (lower,) = [s for s in requirement.specifier if s.operator == ">="]
    oldest = _script_constant(script, "OLDEST")
    newest = _script_constant(script, "NEWEST")
    assert Version(oldest) == Version(lower.version), f"{script} OLDEST vs {requirement}"
    assert requirement.specifier.contains(newest), f"{script} NEWEST vs {requirement}"
    assert Version(oldest) < Version(newest)


@pytest.mark.parametrize("script", ["agents_sdk_tests.py", "langchain_core_tests.py"])
def test_a_certification_runs_the_newest_unless_told_another_version(monkeypatch, script):
    module = _script(script)
    peer_suite = sys.modules[module.main.__module__]
    runs = []

    def certify(suite, args):
        runs.append((suite, args))
        return 0

    monkeypatch.setattr(peer_suite, "certify", certify)
    assert module.main(module.suite, module.OLDEST, module.NEWEST, ["-k", "pop"]) == 0
    module.main(module.suite, module.OLDEST, module.NEWEST, ["--oldest", "-x"])
    module.main(module.suite, module.OLDEST, module.NEWEST, ["--version", "9.9.9"])
    module.main(module.suite, module.OLDEST, module.NEWEST, ["--version=1.2.3", "-q"])
    assert [(suite.version, args) for suite, args in runs] == [
        (module.NEWEST, ["-k", "pop"]),
        (module.OLDEST, ["-x"]),
        ("9.9.9", []),
        ("1.2.3", ["-q"]),
    ]
    assert all(suite.files for suite, _ in runs)
    with pytest.raises(SystemExit, match=r"not a plain release such as 1\.8\.3"):
        module.main(module.suite, module.OLDEST, module.NEWEST, ["--version", "1.8.x"])
    with pytest.raises(SystemExit, match="--version needs a value"):
        module.main(module.suite, module.OLDEST, module.NEWEST, ["--version"])


def test_the_agents_certification_takes_only_the_test_files_a_version_ships():
    module = _script("agents_sdk_tests.py")
    wrapper = "tests/memory/test_session_context_wrapper.py"
    assert wrapper not in module.suite("0.19.4").files
    assert wrapper in module.suite("0.20.0").files
    assert module.suite(module.NEWEST).files == list(module.FILES)


def test_a_deselection_applies_where_the_sdist_defines_the_test(tmp_path):
    peer_suite = sys.modules[_script("agents_sdk_tests.py").main.__module__]
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "def test_plain():\n    pass\n\n\nclass TestC:\n    async def test_method_a(self):\n"
    )
    defines = peer_suite._defines
    assert defines(tmp_path, "tests/test_x.py::test_plain")
    assert defines(tmp_path, "tests/test_x.py::test_plain[param]")
    assert defines(tmp_path, "tests/test_x.py::TestC::test_method_a")
    assert defines(tmp_path, "tests/test_x.py::test_method")
    assert not defines(tmp_path, "tests/test_x.py::test_gone")
    assert not defines(tmp_path, "tests/test_missing.py::test_plain")
    assert defines(tmp_path, "tests/test_x.py")
    assert not defines(tmp_path, "tests/test_missing.py")


def test_the_langgraph_extra_holds_the_version_its_own_tests_certify():
    extra = PROJECT["optional-dependencies"]["langgraph"]
    requirements = {Requirement(r).name: Requirement(r) for r in extra}
    assert requirements["langgraph"].specifier.contains(
        _script_constant("langgraph_tests.py", "VERSION")
    )
    assert all({s.operator for s in r.specifier} & {"<", "<="} for r in requirements.values())


def test_the_sdist_builds_with_its_tests_scripts_and_license(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (sdist,) = tmp_path.glob("chatledger-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
        top = archive.getnames()[0].split("/")[0]
        member = archive.extractfile(f"{top}/PKG-INFO")
        assert member is not None
        info = member.read().decode()
    wanted = {
        "LICENSE",
        "README.md",
        "pyproject.toml",
        "MANIFEST.in",
        "tests/conftest.py",
        "tests/cli/test_unix.py",
        "scripts/test",
        "scripts/check",
        "scripts/demo.py",
        ".ci/run",
        "docs/record-format.md",
        "projections/encodings/cl100k_base.tiktoken",
    }
    assert wanted <= names
    assert [n for n in names if "__pycache__" in n or n.endswith(".pyc")] == []
    assert "License-Expression: Apache-2.0" in info
    assert "License-File: LICENSE" in info
