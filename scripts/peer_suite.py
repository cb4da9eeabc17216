"""Run a peer project's own tests (from its source distribution) against our adapter.

Shared by ``agents_sdk_tests.py`` and ``langchain_core_tests.py``: download the peer's sdist
(one version of the range its extra accepts), build a throwaway venv with chatledger (and the
extra that brings the peer) plus the peer's test tools, drop in a pytest plugin that swaps the
peer's storage class for ours before collection, run the chosen test files, and report
passed/failed/deselected (each deselection with why).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class PeerSuite:
    """What to run: ``package==version``'s ``files`` with ``plugin`` loaded first."""

    package: str
    version: str
    extra: str
    files: list[str]
    tools: list[str]
    plugin: str
    deselected: dict[str, str] = field(default_factory=dict)
    ini: list[str] = field(default_factory=list)


def release(version: str) -> tuple[int, ...]:
    """``"0.19.0"`` as ``(0, 19, 0)``, to compare versions without third-party packages."""
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        raise SystemExit(
            f"peer version {version!r} is not a plain release such as 1.8.3: "
            "pass --version with dot-separated numbers"
        ) from None


def main(build: Callable[[str], PeerSuite], oldest: str, newest: str, argv: list[str]) -> int:
    """Certify ``build(version)``: ``newest`` unless argv says ``--version X`` or ``--oldest``.

    ``oldest`` and ``newest`` are the ends of the range the extra accepts (CI runs both); every
    other argument goes to pytest.
    """
    version, rest = newest, []
    args = iter(argv)
    for arg in args:
        if arg == "--oldest":
            version = oldest
        elif arg == "--version":
            version = next(args, "")
        elif arg.startswith("--version="):
            version = arg.partition("=")[2]
        else:
            rest.append(arg)
    if not version:
        raise SystemExit("--version needs a value, such as --version " + oldest)
    release(version)
    return certify(build(version), rest)


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, text=True)


def certify(suite: PeerSuite, pytest_args: list[str]) -> int:
    """Run ``suite``; 0 when every selected test passed."""
    work = Path(tempfile.mkdtemp(prefix=f"chatledger-{suite.package}-"))
    try:
        return _certify(suite, work, pytest_args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _certify(suite: PeerSuite, work: Path, pytest_args: list[str]) -> int:
    pip = [sys.executable, "-m", "pip"]
    _run([*pip, "download", "-q", "--no-deps", "--no-binary", ":all:",
          f"{suite.package}=={suite.version}", "-d", str(work)])  # fmt: skip
    (sdist,) = work.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(work, filter="data")
    (source,) = (p for p in work.iterdir() if p.is_dir())
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", "-e", f"{ROOT}[{suite.extra}]",
          f"{suite.package}=={suite.version}", *suite.tools])  # fmt: skip
    (work / "chatledger_peer_plugin.py").write_text(suite.plugin, encoding="utf-8")
    # A deselection names tests of some versions: those this sdist lacks are not reported.
    deselected = {t: why for t, why in suite.deselected.items() if _defines(source, t)}
    deselect = [arg for test in deselected for arg in ("--deselect", test)]
    ini = [arg for option in suite.ini for arg in ("-o", option)]
    proc = subprocess.run(
        [str(python), "-m", "pytest", "-p", "chatledger_peer_plugin", "-q", "-p",
         "no:cacheprovider", "-o", "addopts=", *ini, *suite.files, *deselect, *pytest_args],
        cwd=source, text=True, capture_output=True, check=False,
        env={"PYTHONPATH": str(work), "PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(work)},
    )  # fmt: skip
    print(proc.stdout[-8000:])
    if proc.returncode not in (0, 1):
        print(proc.stderr[-3000:], file=sys.stderr)
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    counts = {name: int(n) for n, name in re.findall(r"(\d+) (\w+)", last)}
    print(f"{suite.package} {suite.version}, its own tests against chatledger: {counts}")
    for line in proc.stdout.splitlines():
        if line.startswith("chatledger: "):  # what the plugin adds (e.g. how many touched ours)
            print(f"  {line.removeprefix('chatledger: ')}")
    for test, why in deselected.items():
        print(f"  deselected {test}: {why}")
    return 0 if proc.returncode == 0 else 1


def _defines(source: Path, test: str) -> bool:
    """Whether the sdist has ``test`` (``path[::...::name]``, a prefix as ``--deselect`` takes)."""
    path, *names = test.split("::")
    file = source / path
    if not file.is_file() or not names:
        return file.is_file()
    pattern = rf"^\s*(async\s+)?def {re.escape(names[-1].split('[')[0])}"
    return re.search(pattern, file.read_text("utf-8"), re.M) is not None
