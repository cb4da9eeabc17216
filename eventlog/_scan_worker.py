"""``python -m eventlog._scan_worker``: the worker process of :mod:`eventlog.ledger_scan`.

Its own module, imported by nothing, so running it as ``__main__`` does not import the module
it runs twice; the result it pickles names ``eventlog.ledger_scan._Part``, which the caller
can load.
"""

from __future__ import annotations

from eventlog.ledger_scan import worker_main

if __name__ == "__main__":
    worker_main()
