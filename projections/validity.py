"""Provider-valid views: the window as a provider's chat API accepts it, derived without writing.

A LangChain4j window can be rejected with a 400 by the model provider: a tool result whose
call was trimmed, a call whose result never came (an interrupted run, a crash between the two
writes), a conversation that opens with a role the provider refuses. :func:`valid_view` derives
from any window a view that keeps every rule of the provider's profile; the log is untouched
(an interrupted tail is repaired by *appending* with ``memory.repair()``).

The rules, from each provider's documentation and the 400 errors it returns (the issue threads
quoted show the exact text, from real trimmed windows):

* OpenAI Chat Completions - each tool message answers a call of the assistant message right
  before its run of tool messages, and every call is answered there
  (https://platform.openai.com/docs/guides/function-calling). Errors: "An assistant message
  with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The
  following tool_call_ids did not have response messages: ..." (BerriAI/litellm#10083,
  agno-agi/agno#3105) and "messages with role 'tool' must be a response to a preceeding message
  with 'tool_calls'". Any role may come first; system (developer) messages may stand anywhere;
  consecutive messages of one role are accepted.
* Anthropic Messages - system text is the top-level ``system`` parameter, not a message, so
  LangChain4j's Anthropic model lifts every system message out of the list; each ``tool_use``
  must be answered by a ``tool_result`` in the next message
  (https://docs.anthropic.com/en/docs/build-with-claude/tool-use/implement-tool-use). Error:
  "messages.22: `tool_use` ids were found without `tool_result` blocks immediately after: ...
  Each `tool_use` block must have a corresponding `tool_result` block in the next message"
  (anthropics/claude-code#5989). The conversation starts with a user turn
  (https://docs.anthropic.com/en/api/messages; livekit/agents#669 "Anthropic requires the first
  message to be a non empty 'user' role"); consecutive turns of one role are combined by the API.
* Gemini ``generateContent`` - system text goes to ``systemInstruction``; a function call turn
  must come right after a user turn or a function response turn, and its responses must match
  its calls (https://ai.google.dev/gemini-api/docs/function-calling). Error: "Please ensure that
  function call turn comes immediately after a user turn or after a function response turn",
  e.g. "when the sent conversation history starts with a function call"
  (google-gemini/gemini-cli#11814; langchain-ai/langchain#27799 for the response side). The
  contents start with a user turn.

Every profile allows one unanswered call: a tool call at the very end, with whatever results
have arrived so far (a run in progress: the app is about to send the results).

How a view is derived (each step only drops messages or tool requests, never reorders except
lifting system messages where the profile says the API takes them apart):

1. a tool result not in the run right after a call with its id is dropped (an orphan);
2. a call not answered by the results right after it (and not at the very end) loses its
   tool requests - its text stays, an AI message with nothing left is dropped - and its
   partial results go with it;
3. for Anthropic and Gemini, system messages move first and anything before the first user
   message is dropped; for Gemini a call that does not follow a user turn or a function
   response turn is treated as unanswered (step 2).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias, TypeVar

from eventlog.messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from eventlog.validation import shown

__all__ = [
    "INTERRUPTED",
    "PROVIDERS",
    "Profile",
    "Provider",
    "answers",
    "check_valid",
    "profile_of",
    "unanswered_results",
    "valid_items",
    "valid_view",
]

T = TypeVar("T")

Provider: TypeAlias = Literal["openai", "anthropic", "gemini"]
"""A provider profile name for ``messages(valid_for=...)``."""


@dataclass(frozen=True, slots=True)
class Profile:
    """What a provider's chat API requires of a message list.

    Attributes:
        name: The profile name (``valid_for=`` value).
        system_first: System messages are sent apart from the conversation (Anthropic's
            ``system``, Gemini's ``systemInstruction``): the view lists them first.
        user_first: The first non-system message must be a user message.
        call_after_user_or_result: A message with tool calls must follow a user message or a
            tool result (Gemini's function call turn rule).
    """

    name: str
    system_first: bool
    user_first: bool
    call_after_user_or_result: bool


PROVIDERS: dict[str, Profile] = {
    "openai": Profile(
        "openai", system_first=False, user_first=False, call_after_user_or_result=False
    ),
    "anthropic": Profile(
        "anthropic", system_first=True, user_first=True, call_after_user_or_result=False
    ),
    "gemini": Profile("gemini", system_first=True, user_first=True, call_after_user_or_result=True),
}
"""The profiles by name."""


def profile_of(valid_for: object) -> Profile:
    """The profile named ``valid_for``.

    Raises:
        ValueError: Not a known provider name.
    """
    profile = PROVIDERS.get(valid_for) if isinstance(valid_for, str) else None
    if profile is None:
        msg = (
            f"valid_for={shown(valid_for)} is not a provider profile; use one of "
            f"{sorted(PROVIDERS)}"
        )
        raise ValueError(msg)
    return profile


def _calls(message: ChatMessage) -> bool:
    return isinstance(message, AiMessage) and bool(message.tool_execution_requests)


def answers(
    call: AiMessage, results: Iterable[tuple[T, ChatMessage]]
) -> tuple[list[tuple[T, ChatMessage]], list[ToolExecutionRequest]]:
    """Which of ``results`` answer ``call``, and which of its requests nothing answers.

    The one pairing rule of every view and window (valid views, an interrupted tail, a
    summary's batches): each tool result answers the first still-open request with its id,
    so a request is answered once, by the first result for it, and a result answers at most
    one request. Anything else in ``results`` is passed over.

    Args:
        call: The AI message with the tool requests.
        results: ``(tag, message)`` pairs in conversation order; tags travel untouched.

    Returns:
        ``(answering pairs in their order, unanswered requests in request order)``.
    """
    open_requests = list(call.tool_execution_requests)
    answering: list[tuple[T, ChatMessage]] = []
    for item in results:
        result = item[1]
        if not isinstance(result, ToolExecutionResultMessage):
            continue
        for k, request in enumerate(open_requests):
            if request.id == result.id:
                del open_requests[k]
                answering.append(item)
                break
    return answering, open_requests


def _without_calls(call: AiMessage) -> AiMessage | None:
    """The AI message without its tool requests, or None when nothing would be left."""
    if not call.text and not call.thinking:
        return None
    return AiMessage(call.text, thinking=call.thinking, attributes=call.attributes)


def valid_view(messages: Sequence[ChatMessage], valid_for: str) -> list[ChatMessage]:
    """A view of ``messages`` that the provider's chat API accepts (see the module doc).

    Args:
        messages: A window, e.g. ``memory.messages()``.
        valid_for: ``"openai"``, ``"anthropic"`` or ``"gemini"``.

    Raises:
        ValueError: ``valid_for`` is not a known profile.
    """
    return [m for _, m in valid_items(list(enumerate(messages)), valid_for)]


def valid_items(
    items: Sequence[tuple[T, ChatMessage]], valid_for: str
) -> list[tuple[T, ChatMessage]]:
    """:func:`valid_view` over messages that carry a tag (e.g. the ref of the event that
    brought each one); an AI message stripped of its calls keeps its tag."""
    profile = profile_of(valid_for)
    if profile.system_first:
        systems = [t for t in items if isinstance(t[1], SystemMessage)]
        rest = [t for t in items if not isinstance(t[1], SystemMessage)]
    else:
        systems, rest = [], list(items)
    if profile.user_first:
        # Before the first user message there is nothing the API accepts (an assistant turn,
        # or a call whose results would be answered before any user spoke).
        start = next((i for i, t in enumerate(rest) if isinstance(t[1], UserMessage)), len(rest))
        rest = rest[start:]
    out: list[tuple[T, ChatMessage]] = []
    i, n = 0, len(rest)
    while i < n:
        tag, message = rest[i]
        if isinstance(message, ToolExecutionResultMessage):
            i += 1  # not in the run right after its call: an orphan
            continue
        if not isinstance(message, AiMessage) or not message.tool_execution_requests:
            out.append(rest[i])
            i += 1
            continue
        j = i + 1
        while j < n and isinstance(rest[j][1], ToolExecutionResultMessage):
            j += 1
        results = rest[i + 1 : j]
        kept, unanswered = answers(message, results)
        complete = not unanswered
        placed = not profile.call_after_user_or_result or (
            bool(out) and isinstance(out[-1][1], UserMessage | ToolExecutionResultMessage)
        )
        if placed and (complete or j == n):
            out.append(rest[i])
            out.extend(kept)
        else:
            stripped = _without_calls(message)
            if stripped is not None:
                out.append((tag, stripped))
        i = j
    return systems + out


def check_valid(messages: Sequence[ChatMessage], valid_for: str) -> list[str]:
    """The profile's rules that ``messages`` breaks, one line each (``[]``: accepted).

    An independent statement of the rules :func:`valid_view` enforces: tests check every
    view against it, and an app can check a list it built itself before sending it.

    Raises:
        ValueError: ``valid_for`` is not a known profile.
    """
    profile = profile_of(valid_for)
    problems: list[str] = []
    seen_other = False
    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            if profile.system_first and seen_other:
                problems.append(f"{index}: system message after the conversation started")
            continue
        if profile.user_first and not seen_other and not isinstance(message, UserMessage):
            problems.append(f"{index}: the conversation starts with {message.type}, not USER")
        seen_other = True
        if isinstance(message, ToolExecutionResultMessage):
            k = index - 1
            while k >= 0 and isinstance(messages[k], ToolExecutionResultMessage):
                k -= 1
            call = messages[k] if k >= 0 else None
            ids = (
                [r.id for r in call.tool_execution_requests] if isinstance(call, AiMessage) else []
            )
            earlier = [
                m.id for m in messages[k + 1 : index] if isinstance(m, ToolExecutionResultMessage)
            ]
            if message.id not in ids or earlier.count(message.id) >= ids.count(message.id):
                problems.append(
                    f"{index}: tool result {message.id!r} answers no call right before it"
                )
        elif _calls(message):
            assert isinstance(message, AiMessage)  # noqa: S101 - _calls checked the type
            j = index + 1
            while j < len(messages) and isinstance(messages[j], ToolExecutionResultMessage):
                j += 1
            answers = [
                m.id for m in messages[index + 1 : j] if isinstance(m, ToolExecutionResultMessage)
            ]
            missing = [r.id for r in message.tool_execution_requests if r.id not in answers]
            if missing and j < len(messages):
                problems.append(f"{index}: tool calls {missing!r} have no results right after them")
            if profile.call_after_user_or_result:
                before = messages[index - 1] if index else None
                if not isinstance(before, UserMessage | ToolExecutionResultMessage):
                    problems.append(f"{index}: tool call does not follow a user turn or a result")
    return problems


INTERRUPTED = "The tool call was interrupted before it returned a result; it may not have run."
"""The result text :meth:`memory.repair() <projections.MessageWindowChatMemory.repair>` writes."""


def unanswered_results(
    conversation: Sequence[ChatMessage], text: str = INTERRUPTED
) -> list[ToolExecutionResultMessage]:
    """Tool results answering the calls of the last AI message that are still open - when only
    tool results follow that message (an interrupted tail); ``[]`` otherwise.

    Args:
        conversation: The window without its system messages.
        text: The text of each result.
    """
    j = len(conversation)
    while j > 0 and isinstance(conversation[j - 1], ToolExecutionResultMessage):
        j -= 1
    call = conversation[j - 1] if j > 0 else None
    if not isinstance(call, AiMessage) or not call.tool_execution_requests:
        return []
    _, unanswered = answers(call, [(None, m) for m in conversation[j:]])
    return [
        ToolExecutionResultMessage(request.id, request.name, text, is_error=True)
        for request in unanswered
    ]
