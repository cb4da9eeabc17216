"""The conversation the README's `chatledger` transcripts show: memory `conv`, a window of 4.

Run:  python scripts/story.py [--db PATH] [--upto N]

Adds the story's next messages to `conv` in ./chatledger.db (or PATH) until it holds N events
(default: all 8), so a transcript can start from a few records and grow the log by one.
tests/test_readme_transcripts.py runs every transcript from it.
"""

from __future__ import annotations

import argparse
import sys

from eventlog import (
    AiMessage,
    ChatMessage,
    SQLiteEventStore,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from projections import MessageWindowChatMemory

_CALL = ToolExecutionRequest(id="call-1", name="calculator", arguments='{"a":2,"b":2}')
STORY: list[ChatMessage] = [
    SystemMessage("Be brief."),
    UserMessage("What is 2+2?"),
    AiMessage(tool_execution_requests=[_CALL]),
    ToolExecutionResultMessage.from_request(_CALL, "4"),
    AiMessage("2+2 is 4."),
    UserMessage("And 3+3?"),
    SystemMessage("Be verbose."),
    AiMessage("3+3 is 6."),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="chatledger.db", help="SQLite file (default: %(default)s)")
    parser.add_argument("--upto", type=int, default=len(STORY), help="events conv ends with")
    args = parser.parse_args(argv)
    if not 0 <= args.upto <= len(STORY):
        parser.error(f"--upto {args.upto}: the story has {len(STORY)} messages")
    with SQLiteEventStore(args.db) as store:
        memory = MessageWindowChatMemory(id="conv", max_messages=4, store=store)
        for message in STORY[memory.seq : args.upto]:
            memory.add(message)
    return 0


if __name__ == "__main__":
    sys.exit(main())
