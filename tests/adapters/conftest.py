"""The CLI fixtures, to check that `chatledger` reads what the adapters write."""

from tests.cli.conftest import cli, ok

__all__ = ["cli", "ok"]
