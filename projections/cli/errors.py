"""The CLI's two failure kinds and the translation of library messages into shell terms.

The library's messages name Python remedies ("call store.setup()"); a shell user needs the
command or option that fixes it, so every message reaching stderr passes through
:func:`message`.
"""

from __future__ import annotations

from projections.display import inert

__all__ = ["Failure", "UsageError", "message", "one_line"]


class UsageError(Exception):
    """A well-formed command line whose values do not fit the data (exit status 2)."""


class Failure(Exception):
    """The command could not do its job (exit status 1)."""


# Library remedy -> CLI remedy. Matched as substrings, so a reworded library message simply
# passes through unchanged; tests/cli/test_errors.py pins the ones the CLI can reach.
_REMEDIES = (
    (
        "call store.setup() once (or open with create_schema=True), or apply "
        "eventlog.postgres.MIGRATIONS with your migration tool",
        "pass the --schema that holds the ledger, or create one with "
        "`chatledger import FILE --dsn URL --schema S`",
    ),
    ("run verify()", "run `chatledger verify`"),
    # The chain key's Python argument; on the command line it is a file.
    ("open it with chain_key= to write", "pass --key-file FILE (the chain key) to write"),
    ("open the store with chain_key= to verify", "pass --key-file FILE (the chain key) to verify"),
    # busy_timeout is the store's Python argument; a command has no option for it.
    (
        "raise busy_timeout or find the long transaction",
        "find the process holding it (an application writing, a long transaction) and run "
        "the command again",
    ),
)


def one_line(error: BaseException) -> str:
    """The error's text on one line (driver messages may span several)."""
    return " ".join(str(error).split()) or type(error).__name__


def message(error: BaseException) -> str:
    """The one-line text shown for ``error``, with Python remedies replaced by CLI ones and
    control characters made :func:`inert`."""
    return inert(_message(error))


def _message(error: BaseException) -> str:
    if isinstance(error, FileNotFoundError) and error.filename is not None:
        return f"no such file: {error.filename}"
    if isinstance(error, IsADirectoryError) and error.filename is not None:
        return f"{error.filename} is a directory; pass a file"
    if isinstance(error, PermissionError) and error.filename is not None:
        return f"permission denied: {error.filename}"
    text = one_line(error)
    for library, cli in _REMEDIES:
        text = text.replace(library, cli)
    return text
