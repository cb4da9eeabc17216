"""The ``chatledger`` command: inspect, audit, copy and maintain a ledger from the shell.

Every command is a thin layer over :mod:`projections.audit`, :mod:`projections.replay`,
:mod:`eventlog.formats.jsonl` and the store API. Run ``chatledger --help`` or
``chatledger COMMAND --help`` for the options; ``--db``, ``--dsn``, ``--schema`` and ``--json``
go before or after the command. How memory ids are written: :mod:`projections.cli.args`.

Exit status: 0 on success, 1 on a failure (missing database, unknown id, broken chain, refused
import), 2 on a usage error. Errors are one line on stderr: ``chatledger: error: ...``.

Modules: ``args`` (the parser, ids), ``subcommands`` (each command's options), ``store``
(opening the store), ``render`` (output), ``inspect``, ``maintain``, ``ledger``, ``receipts``,
``sessions``, ``langgraph_view`` (the commands), ``errors``, ``app`` (the entry point). What is
shown and what users type are shared with the inspector: :mod:`projections.readmodel` and
:mod:`projections.grammar`.
"""

from __future__ import annotations

from projections.cli.app import main

__all__ = ["main"]
