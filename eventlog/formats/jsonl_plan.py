"""The checking pass of an import, per memory: where the file's records of a memory start
against the target (new, continued, or - resuming - partly there already), how each links to the
one before it, and the erasure rules a hash cannot vouch for. Used by
:func:`eventlog.formats.jsonl.import_jsonl`."""

from __future__ import annotations

import dataclasses

from eventlog.erasure import erasure_step
from eventlog.hashing import CONTENT_MISMATCH, GENESIS, RECEIPT_KINDS
from eventlog.ids import StreamKey
from eventlog.models import Record
from eventlog.store import EventStore
from eventlog.vouch import erased_bound

__all__ = [
    "Plan",
    "check_ahead",
    "check_emptied",
    "check_hash",
    "check_link",
    "check_overlap",
    "check_receipt_start",
    "erased_state",
    "refuse",
    "start_plan",
    "unreceipted",
]

_AFTER_EVERYTHING = 1 << 62


def refuse(source: str, detail: str) -> ValueError:
    return ValueError(f"import of {source} refused, nothing was written: {detail}")


@dataclasses.dataclass(slots=True)
class Plan:
    """What the checking pass learned about one memory: where the target's head is (None:
    left out) and the last record seen, to link the next one to."""

    head: int | None
    last: Record
    records: int = 0
    erased: int = 0  # the seq the memory is erased through after ``last`` (erasure_step)
    open_run: bool = False  # ``last`` is emptied and no receipt has followed it yet
    # Resuming: the file's records up to ``overlap`` are the target's own (its head there has
    # hash ``overlap_hash``), so they are checked as part of the file's chain, never written.
    overlap: int = 0
    overlap_hash: str = ""
    begun: bool = False  # the window and erasure checks of its records to write have started


def start_plan(
    store: EventStore,
    key: str,
    first: Record,
    source: str,
    *,
    skip_purged: bool,
    resume: bool,
) -> Plan:
    """The plan of a memory whose first record in the file is ``first``: the target's head
    seq (0: none; None: the memory is left out, a tombstone with ``skip_purged``), and with
    ``resume`` how much of the file the target already holds."""
    if first.seq == 1 and first.prev_hash != GENESIS:
        raise refuse(source, f"the hash chain of {key!r} breaks at seq 1: prev_hash is not genesis")
    if first.kind == "memory_purged" and first.seq > 1:
        if skip_purged:
            return Plan(None, first)
        raise refuse(
            source,
            f"the history of {key!r} starts with a memory_purged tombstone at seq "
            f"{first.seq}, which EventStore.append cannot recreate (streams start at seq 1); "
            "import with skip_purged (--skip-purged) to leave such memories out",
        )
    head = store.head(StreamKey(key))
    if head is None and first.seq != 1:
        raise refuse(
            source,
            f"the records of {key!r} start at seq {first.seq}, but the target has none of "
            "its earlier events; import the full export first",
        )
    if head is not None and resume and first.seq <= head.seq:
        # An interrupted import of this file (or of an export that continues it): the target
        # holds its records up to the head. The file's record at the head's seq must have the
        # head's hash - the chain then makes every record before it the same, too.
        return Plan(head.seq, first, overlap=head.seq, overlap_hash=head.hash)
    if head is not None and first.seq > head.seq + 1:
        # A gap: neither overwriting nor resuming is the issue, so neither is the remedy.
        raise refuse(
            source,
            f"memory {key!r} already has events 1..{head.seq} in the target, and the file's "
            f"records of it start at seq {first.seq}: seqs {head.seq + 1}..{first.seq - 1} "
            "would be missing (resume cannot fill them either); export it again with "
            f"`chatledger export --after {head.seq}` (export_jsonl(after={head.seq})), or "
            "import the earlier export that holds those seqs first",
        )
    if head is not None and (
        first.seq != head.seq + 1
        or first.prev_hash != head.hash
        or first.recorded_at_text < head.recorded_at_text
    ):
        # Resume helps only a file that starts at or before the head (with resume=True such
        # a file never gets here): one starting right after it is another history.
        again = (
            "; or, to finish an interrupted import of this same file, import it again with "
            "resume (--resume)"
            if first.seq <= head.seq
            else ""
        )
        raise refuse(
            source,
            f"memory {key!r} already has events 1..{head.seq} in the target, and import "
            f"never overwrites: import into a new database or schema (or a file that "
            f"continues exactly from seq {head.seq}, see `chatledger export --after`{again})",
        )
    return Plan(0 if head is None else head.seq, first)


def check_overlap(plan: Plan, key: str, record: Record, source: str) -> bool:
    """With ``plan`` resuming: whether ``record`` is one the target already holds (checked
    against the target's head at the overlap's end); False for a record to write."""
    if record.seq > plan.overlap:
        return False
    if record.seq == plan.overlap and record.hash != plan.overlap_hash:
        raise refuse(
            source,
            f"memory {key!r} in the target is not this file's history: its seq {record.seq} "
            f"has hash {plan.overlap_hash}, the file's {record.hash}; resume only finishes an "
            "import of the same export (import into a new database or schema instead)",
        )
    return True


def check_ahead(store: EventStore, plan: Plan, key: str, source: str) -> None:
    """With ``plan`` resuming a memory the file ends before the target's head: the target must
    hold the file's last record (then all of them), or have purged the memory right after it
    (its tombstone chains to that record's hash); nothing of it is written."""
    last = plan.last
    if last.seq >= plan.overlap:
        return
    stored = store.read(StreamKey(key), gt=last.seq - 1, lte=last.seq + 1)
    if stored and stored[0].seq == last.seq + 1 and stored[0].kind == "memory_purged":
        stored = [] if stored[0].prev_hash != last.hash else [last]
    if not stored or stored[0].hash != last.hash:
        raise refuse(
            source,
            f"memory {key!r} in the target is not this file's history: its seq {last.seq} "
            "differs from the file's; import into a new database or schema instead",
        )


def check_link(key: str, previous: Record, record: Record, number: int, source: str) -> None:
    """A record against the one before it in the file (file order must be seq order)."""
    if record.seq != previous.seq + 1:
        raise refuse(
            source,
            f"records of {key!r} jump from seq {previous.seq} to {record.seq} (line {number}); "
            "the export is incomplete or out of order (an export lists each memory's records "
            "in seq order: export it again)",
        )
    if record.prev_hash != previous.hash:
        raise refuse(
            source,
            f"the hash chain of {key!r} breaks at seq {record.seq}: prev_hash does "
            "not match the previous record's hash",
        )
    if record.recorded_at_text < previous.recorded_at_text:
        raise refuse(source, f"record {key!r}#{record.seq} is earlier than the one before it")


def check_hash(store: EventStore, key: str, record: Record, source: str) -> None:
    """Recompute a record's hash and commitment, format 3 ones with the target's key."""
    # Checked as if at the end of the target, where it will be written: a keyed target
    # then refuses unkeyed formats here, before anything is written.
    problem = store.check(record._replace(position=_AFTER_EVERYTHING))
    if problem is not None:
        detail = "the " + problem if problem == CONTENT_MISMATCH else problem
        raise refuse(source, f"the hash chain of {key!r} breaks at seq {record.seq}: {detail}")


def erased_state(store: EventStore, key: str) -> tuple[int, bool]:
    """The seq the target's memory is erased through, as its head seal says (0: none), and
    whether its newest record is emptied with no receipt after it yet (a run still open)."""
    newest = store.read(StreamKey(key), desc=True, limit=1)
    open_run = bool(newest) and newest[0].erased and newest[0].kind not in RECEIPT_KINDS
    return erased_bound(store._head_seal(key)) or 0, open_run


def check_emptied(plan: Plan, key: str, record: Record, number: int, source: str) -> None:
    """Move ``plan``'s erased prefix past ``record``, refusing what no erasure leaves: an
    emptied record that does not follow the erased prefix, an emptied receipt, or content
    right after emptied records (an erasure appends its receipt after what it emptied, in the
    same transaction, so a run of emptied records without one was emptied by hand - and
    importing it would seal it as an erasure)."""
    content = not record.erased
    step = erasure_step(plan.erased, record.seq, record.kind, content=content)
    if step is None:
        raise refuse(
            source,
            f"{key!r}#{record.seq} (line {number}) is emptied (no salt, no payload) but follows "
            "records that hold content, or is a receipt: an erasure empties a memory from its "
            "first record on and never its receipts, so this is not what erase() leaves; "
            "export the memory again from its ledger",
        )
    if content and plan.open_run and record.kind not in RECEIPT_KINDS:
        raise refuse(source, unreceipted(key, record.seq - 1, number))
    plan.open_run = not content  # content (a receipt, or refused above) closes a run
    plan.erased = step


def check_receipt_start(
    store: EventStore, plan: Plan, key: str, record: Record, source: str
) -> None:
    """Refuse a file whose first record to write is an erasure's receipt while the target's
    head holds content: the receipt says the records before it were erased, and the target's
    copies of them would keep their content under it (import never overwrites; a later export
    of an erased memory continues only a target that erased them too)."""
    if record.kind != "memory_erased" or not plan.head or plan.erased >= plan.head:
        return
    head = store.read(StreamKey(key), gt=plan.head - 1, lte=plan.head)
    if head and not head[0].erased and head[0].format != 1:  # format 1 cannot be emptied
        raise refuse(
            source,
            f"{key!r}#{record.seq} is an erasure's receipt, but the target holds the records "
            f"before it with their content (seq {head[0].seq}): the erasure happened after "
            "the target's copy was made, and importing its receipt would claim content "
            "erased that the target keeps; import into a new database or schema instead",
        )


def unreceipted(key: str, seq: int, number: int) -> str:
    return (
        f"{key!r}#{seq} (before line {number}) is emptied (no salt, no payload), but no "
        "erasure's receipt follows it: erase() appends one after what it empties, so these "
        "records were emptied by hand; export the memory again from its ledger"
    )
