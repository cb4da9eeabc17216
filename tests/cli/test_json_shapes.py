"""`--json` has the two shapes the README documents: JSON Lines for the commands that list, one
object on one line (a report) for every other command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"

# The listing commands the README names; every other command is a report.
STREAMS = {
    "ids": ["ids"],
    "history": ["history", "conv"],
    "replay": ["replay", "conv"],
    "export -o -": ["export", "-o", "-"],
}
REPORTS = {
    "show": ["show", "conv"],
    "show --policy": ["show", "conv", "--as-of", "8", "--policy", "messages:2"],
    "diff": ["diff", "conv", "1", "11"],
    "explain": ["explain", "conv", "2"],
    "verify": ["verify"],
    "verify ID": ["verify", "conv"],
    "digest": ["digest"],
    "digest -o": ["digest", "-o", "{tmp}/d.json"],
    "prove": ["prove", "conv", "3"],
    "prove -o": ["prove", "conv", "3", "-o", "{tmp}/p.json"],
    "export -o FILE": ["export", "-o", "{tmp}/all.jsonl"],
    "fork": ["fork", "conv", "--at", "4", "--to", "conv-copy"],
}


def _run(ok, ledger, tmp_path, words):
    return ok(*[w.format(tmp=tmp_path) for w in words], "--db", ledger, "--json").stdout


@pytest.mark.parametrize("words", STREAMS.values(), ids=STREAMS.keys())
def test_listing_commands_print_json_lines(ok, ledger, tmp_path, words):
    lines = _run(ok, ledger, tmp_path, words).splitlines()
    assert lines
    assert all(isinstance(json.loads(line), dict) for line in lines)


@pytest.mark.parametrize("words", REPORTS.values(), ids=REPORTS.keys())
def test_every_other_command_prints_one_object_on_one_line(ok, ledger, tmp_path, words):
    out = _run(ok, ledger, tmp_path, words)
    assert out.endswith("\n")
    assert out.count("\n") == 1, out[:300]
    assert isinstance(json.loads(out), dict)


def test_show_reports_its_view_with_the_messages(ok, ledger):
    report = json.loads(ok("show", "conv", "--as-of", 6, "--db", ledger, "--json").stdout)
    assert {k: report[k] for k in ("memory", "seq", "head", "view")} == {
        "memory": "conv",
        "seq": 6,
        "head": 11,
        "view": "recorded view",
    }
    assert [m["type"] for m in report["messages"]] == ["SYSTEM", "AI", "USER"]


def test_files_and_signed_notes_are_reported_as_objects(ok, ledger, tmp_path):
    written = json.loads(ok("digest", "-o", tmp_path / "d.json", "--db", ledger, "--json").stdout)
    assert written["file"] == str(tmp_path / "d.json")
    assert written["size"] == 11
    ok("keygen", "example.com/t", "--out", tmp_path)
    key = tmp_path / "example.com_t.key"
    note = ok(
        "checkpoint", "--origin", "example.com/t", "--signing-key", key, "--db", ledger, "--json"
    ).stdout
    assert json.loads(note)["checkpoint"].startswith("example.com/t\n11\n")


def test_the_readme_names_the_listing_commands_the_tests_check():
    text = README.read_text(encoding="utf-8")
    paragraph = text[text.index("`--json` has two shapes") :].split("\n\n")[0]
    named = re.findall(r"`([a-z][^`]*)`", paragraph.split("print JSON Lines")[0])
    assert set(named) - {"--json"} == {*STREAMS, "langgraph THREAD"}
