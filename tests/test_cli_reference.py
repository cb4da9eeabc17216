"""The README's command reference is generated from the parser (scripts/cli_reference.py), and
CI fails when the two differ: a new command or option cannot ship undocumented."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "cli_reference.py"


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("cli_reference", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_reference_is_what_the_parser_generates(generator):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme == generator.readme_with_reference(readme), (
        "README.md's command reference is stale: run `python scripts/cli_reference.py --write`"
    )


def test_every_command_and_option_of_the_parser_is_in_the_reference(generator):
    from projections.cli.args import build_parser

    text = generator.reference()
    (commands,) = [a for a in build_parser()._actions if a.dest == "command"]
    for name, parser in commands.choices.items():
        assert f"#### `chatledger {name}" in text
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help", "--id-json"):
                    assert f"`{option}" in text or f", {option}" in text, (name, option)


def test_a_new_option_changes_the_reference(generator, monkeypatch):
    from projections.cli import args

    before = generator.reference()
    build = args.build_parser

    def with_extra():
        parser = build()
        parser.add_argument("--frobnicate", action="store_true", help="a new option")
        return parser

    monkeypatch.setattr(generator, "build_parser", with_extra)
    assert generator.reference() != before
    assert "- `--frobnicate`: a new option" in generator.reference()


def test_the_script_prints_the_section_and_refuses_unknown_arguments():
    shown = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, check=True, timeout=60
    )
    assert shown.stdout.startswith("<!-- cli-reference:")
    assert "#### `chatledger history ID`" in shown.stdout
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), "--frob"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2
