"""Certify LedgerSaver with LangGraph's checkpointer conformance suite, all of it.

Downloads the pinned ``langgraph-checkpoint-conformance`` from the package registry into a
throwaway venv (with chatledger's ``langgraph`` and ``postgres`` extras), registers
``LedgerSaver`` over a SQLite ledger and over a PostgreSQL ledger (a fresh schema, dropped
afterwards) and runs every capability: the 5 base ones (put, put_writes, get_tuple, list,
delete_thread) and the 3 extended ones (delete_for_runs, copy_thread, prune). Prints the counts
per backend and capability; exits 1 on any failure, and on any test or capability skipped.

    python scripts/langgraph_conformance.py                 # SQLite and PostgreSQL
    python scripts/langgraph_conformance.py --backends sqlite

PostgreSQL is the server at ``CHATLEDGER_TEST_PG_DSN`` (default: the local one). CI runs this
(``.ci/run``). Needs network access to the package registry.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSION = "0.0.2"
EXPECTED = 81  # tests in 0.0.2: 58 base + 23 extended
PG_DSN = os.environ.get("CHATLEDGER_TEST_PG_DSN", "host=127.0.0.1 port=5432 dbname=test")

RUNNER = textwrap.dedent(
    '''
    """Run the conformance suite against LedgerSaver on one backend; print a JSON report."""
    import asyncio
    import json
    import sys
    import tempfile
    import uuid
    from pathlib import Path

    from langgraph.checkpoint.conformance import checkpointer_test, validate

    from eventlog import SQLiteEventStore
    from projections.adapters.langgraph import LedgerSaver

    backend, dsn = sys.argv[1], sys.argv[2]
    work = Path(tempfile.mkdtemp(prefix="chatledger-lg-"))
    schemas = []


    def open_store(n):
        if backend == "sqlite":
            return SQLiteEventStore(work / f"ledger-{n}.db")
        from eventlog.postgres import PostgresEventStore

        schemas.append(f"lg_{uuid.uuid4().hex[:12]}")
        return PostgresEventStore(dsn, schema=schemas[-1])


    counter = iter(range(1_000_000))


    async def lifespan():
        yield
        if schemas:
            import psycopg
            from psycopg import sql

            with psycopg.connect(dsn, autocommit=True) as conn:
                for schema in schemas:
                    conn.execute(
                        sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                    )


    @checkpointer_test(name=f"LedgerSaver[{backend}]", lifespan=lifespan)
    async def ledger_saver():
        store = open_store(next(counter))
        try:
            yield LedgerSaver(store)
        finally:
            # The suite must leave a ledger that still verifies (erasures included).
            report = store.verify()
            assert report.ok, report.failures
            store.close()


    report = asyncio.run(validate(ledger_saver))
    out = {
        cap: {
            "detected": r.detected,
            "passed": r.tests_passed,
            "failed": r.tests_failed,
            "skipped": r.tests_skipped,
            "failures": r.failures,
        }
        for cap, r in report.results.items()
    }
    print("REPORT " + json.dumps(out))
    '''
)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="chatledger-lg-conformance-"))
    try:
        return _certify(work, [b for b in args.backends.split(",") if b])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _certify(work: Path, backends: list[str]) -> int:
    import json

    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-e", f"{ROOT}[langgraph,postgres]",
         f"langgraph-checkpoint-conformance=={VERSION}"],
        check=True,
    )  # fmt: skip
    runner = work / "run_conformance.py"
    runner.write_text(RUNNER, encoding="utf-8")
    ok = True
    for backend in backends:
        proc = subprocess.run(
            [str(python), str(runner), backend, PG_DSN],
            capture_output=True, text=True, check=False, timeout=1800,
        )  # fmt: skip
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT ")]
        if proc.returncode != 0 or not lines:
            print(f"[{backend}] the suite did not run:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
            ok = False
            continue
        report = json.loads(lines[-1].removeprefix("REPORT "))
        passed = sum(r["passed"] for r in report.values())
        failed = sum(r["failed"] for r in report.values())
        skipped = sum(r["skipped"] for r in report.values())
        print(
            f"langgraph-checkpoint-conformance {VERSION}, LedgerSaver on {backend}: "
            f"{passed} passed, {failed} failed, {skipped} skipped "
            f"({len(report)} capabilities)"
        )
        for cap, r in report.items():
            print(
                f"  {cap:16} passed {r['passed']:3}  failed {r['failed']}  skipped {r['skipped']}"
            )
            for failure in r["failures"]:
                print(f"    FAILED {failure}")
        if failed or skipped or passed != EXPECTED or len(report) != 8:
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
