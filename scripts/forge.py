"""Forge a ledger the way an attacker with write access to the SQLite file would.

Rewrites one message of a memory with plain SQL and recomputes its payload commitment, every
later hash of that memory and its head seal with chatledger's public hash functions, so every
hash chain of an unkeyed ledger verifies again. Only a digest kept outside the database
(``chatledger verify --digest``), or a keyed chain (the forger lacks the key, so the records and
the seal it writes do not verify), tells. For the README's audit walk-through and for trying it.

    python scripts/forge.py chatledger.db conv 8 "I never said that."
"""

from __future__ import annotations

import argparse
import json
import sqlite3

from eventlog import SQLiteEventStore, UserMessage, message_to_json
from eventlog.hashing import commit, head_mac, record_hash
from eventlog.ids import memory_key


def forge(path: str, memory_id: str, seq: int, text: str) -> None:
    """Replace event ``seq`` of ``memory_id`` by a user message saying ``text``, re-hashed."""
    key = memory_key(memory_id)
    with SQLiteEventStore(path) as store:
        records = store.read(memory_id, gt=seq - 1)
    if not records or records[0].seq != seq:
        msg = f"forge: {memory_id!r} has no event {seq}"
        raise SystemExit(msg)
    prev = None
    with sqlite3.connect(path) as conn:
        for record in records:
            forged = record
            if record.seq == seq:
                forged = record._replace(payload=message_to_json(UserMessage(text)))
                if forged.salt:  # the salt is stored beside the payload: recommit
                    salt = bytes.fromhex(forged.salt)
                    forged = forged._replace(commitment=commit(salt, forged.payload))
            if prev is not None:
                forged = forged._replace(prev_hash=prev)
            forged = forged._replace(hash=record_hash(forged))
            conn.execute(
                "UPDATE events SET payload = ?, commitment = ?, prev_hash = ?, hash = ? "
                "WHERE stream_id = ? AND seq = ?",
                (forged.payload, forged.commitment, forged.prev_hash, forged.hash, key, forged.seq),
            )
            prev = forged.hash
        # The head seal of an unkeyed ledger is a plain SHA-256 too.
        (erased,) = conn.execute(
            "SELECT erased_through FROM heads WHERE stream_id = ?", (key,)
        ).fetchone()
        conn.execute(
            "UPDATE heads SET hash = ?, mac = ? WHERE stream_id = ?",
            (prev, head_mac(None, key, records[-1].seq, str(prev), erased), key),
        )
    print(json.dumps({"forged": key, "seq": seq, "rehashed": len(records)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("memory_id")
    parser.add_argument("seq", type=int)
    parser.add_argument("text")
    args = parser.parse_args()
    forge(args.db, args.memory_id, args.seq, args.text)


if __name__ == "__main__":
    main()
