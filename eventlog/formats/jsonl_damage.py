"""Whether an export would import: the chains of the memories it would hold, checked first.

:func:`~eventlog.formats.jsonl.import_jsonl` recomputes every hash and refuses a file holding
one record that does not verify, so an export of a damaged memory is a backup that cannot be
restored - found out only when it is needed. :func:`export_jsonl` refuses it unless asked;
the command line's ``export`` calls :func:`export_damage` itself (the chains are read once)
to print its own note and warning.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from eventlog.errors import DamagedExportError
from eventlog.hashing import KEYED_CHAIN
from eventlog.ids import SYSTEM_PREFIX
from eventlog.validation import shown

if TYPE_CHECKING:
    from eventlog.ids import MemoryId
    from eventlog.store import EventStore

__all__ = ["Damage", "export_damage"]


@dataclasses.dataclass(frozen=True, slots=True)
class Damage:
    """What :func:`export_damage` found in the memories an export would hold.

    Attributes:
        damaged: ``(stream key, first bad seq, reason)`` of every memory whose chain does not
            verify, in key order: the export would not import.
        unchecked: Stream keys of keyed chains (format 3) that could not be checked, the store
            being open without its chain key: not damage, and not known to be intact either.
    """

    damaged: tuple[tuple[str, int, str], ...]
    unchecked: tuple[str, ...]

    def error(self) -> DamagedExportError:
        """The refusal of an export holding :attr:`damaged` (not empty)."""
        key, seq, why = self.damaged[0]
        more = (
            f"; {len(self.damaged) - 1} more memories do not verify either"
            if len(self.damaged) > 1
            else ""
        )
        msg = (
            f"export of memory {shown(key)} refused, nothing was written: its record at seq "
            f"{seq} does not verify ({why}){more}, so import_jsonl would refuse the file; "
            "store.verify() shows the damage; pass allow_damaged=True to export the records "
            "as they are stored (for forensics: the file will not import)"
        )
        return DamagedExportError(msg, self.damaged)


def export_damage(
    store: EventStore, memory_id: MemoryId | None = None, *, include_system: bool = False
) -> Damage:
    """Verify the memories an export with these arguments would hold (every record is read).

    ``~sys:`` streams are left out unless ``include_system`` (or named as ``memory_id``), as
    the export leaves them out. In a keyed ledger opened without its chain key, a keyed chain
    cannot be checked at all: it is listed in :attr:`Damage.unchecked`, not as damage - the
    records are exported as stored, and an import into a store given the key checks them.
    Problems of the ledger as a whole (``VerifyReport.ledger_problems``) are not about any
    one chain, and do not stop an import: they are left to :meth:`EventStore.verify`.

    Args:
        store: The store to check.
        memory_id: The memory the export would hold (None: every memory).
        include_system: Whether the export would hold chatledger's own ``~sys:`` streams.

    Returns:
        The damaged and the unchecked memories (both empty when the export would import).
    """
    report = store.verify(memory_id)
    failures = report.failures.items()
    if memory_id is None and not include_system:  # ~sys: streams stay out of the file
        failures = {k: v for k, v in failures if not k.startswith(SYSTEM_PREFIX)}.items()
    # KEYED_CHAIN only in a keyed ledger: in an unkeyed one a record claiming format 3 is damage.
    keyed = report.keyed_since is not None
    unchecked = tuple(sorted(k for k, (_, why) in failures if keyed and why == KEYED_CHAIN))
    damaged = tuple(
        (key, seq, why)
        for key, (seq, why) in sorted(failures)
        if not (keyed and why == KEYED_CHAIN)
    )
    return Damage(damaged=damaged, unchecked=unchecked)
