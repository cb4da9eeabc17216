"""Token counting for the token window: LangChain4j's ``OpenAiTokenCountEstimator``, offline.

:class:`TokenCountEstimator` is the protocol the token window accepts; any object with its
three methods plugs in. :class:`OpenAiTokenCountEstimator` reproduces LangChain4j 1.19.0's
estimator (jtokkit 1.1.0) on top of tiktoken, so a window trims at exactly the message where
LangChain4j's ``TokenWindowChatMemory`` would.

Encodings come from :mod:`projections.tokenizer_files`, which never downloads: ``cl100k_base``
and ``o200k_base`` ship inside the package; older ones are read from ``TIKTOKEN_CACHE_DIR``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from eventlog.contents import TextContent
from eventlog.java import double_to_string, is_blank
from eventlog.messages import (
    AiMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from projections.tokenizer_files import EncodingUnavailableError, get_encoding

if TYPE_CHECKING:
    from eventlog.messages import ChatMessage

__all__ = [
    "LANGCHAIN4J_VERSION",
    "EncodingUnavailableError",
    "OpenAiTokenCountEstimator",
    "TokenCountEstimator",
    "encoding_name_for_model",
]

LANGCHAIN4J_VERSION = "1.19.0"
"""The LangChain4j release whose counting rules :class:`OpenAiTokenCountEstimator` matches."""


@runtime_checkable
class TokenCountEstimator(Protocol):
    """Estimates how many tokens text and chat messages cost (LangChain4j's interface).

    The token window calls ``estimate_token_count_in_messages`` once per trim and
    ``estimate_token_count_in_message`` once per evicted message, exactly as LangChain4j does.
    """

    def estimate_token_count_in_text(self, text: str) -> int:
        """Return the number of tokens in ``text``."""
        ...

    def estimate_token_count_in_message(self, message: ChatMessage) -> int:
        """Return the number of tokens ``message`` costs in a request, overhead included."""
        ...

    def estimate_token_count_in_messages(self, messages: Iterable[ChatMessage]) -> int:
        """Return the number of tokens a request made of ``messages`` costs."""
        ...


# --------------------------------------------------------------------------------------------
# Encoding selection: LangChain4j's constructor, then jtokkit 1.1.0's model table.
# --------------------------------------------------------------------------------------------

_R50K = "r50k_base"
_P50K = "p50k_base"
_P50K_EDIT = "p50k_edit"
_CL100K = "cl100k_base"
_O200K = "o200k_base"

# jtokkit's exact-name table (ModelType), consulted before its prefix rules.
_MODEL_TO_ENCODING: dict[str, str] = {
    "gpt-4o": _O200K,
    "gpt-4o-mini": _O200K,
    "gpt-4": _CL100K,
    "gpt-4-32k": _CL100K,
    "gpt-4-turbo": _CL100K,
    "gpt-3.5-turbo": _CL100K,
    "gpt-3.5-turbo-16k": _CL100K,
    "text-embedding-ada-002": _CL100K,
    "text-embedding-3-small": _CL100K,
    "text-embedding-3-large": _CL100K,
    "text-davinci-003": _P50K,
    "text-davinci-002": _P50K,
    "code-davinci-002": _P50K,
    "code-davinci-001": _P50K,
    "code-cushman-002": _P50K,
    "code-cushman-001": _P50K,
    "davinci-codex": _P50K,
    "cushman-codex": _P50K,
    "text-davinci-edit-001": _P50K_EDIT,
    "code-davinci-edit-001": _P50K_EDIT,
    "text-davinci-001": _R50K,
    "text-curie-001": _R50K,
    "text-babbage-001": _R50K,
    "text-ada-001": _R50K,
    "davinci": _R50K,
    "curie": _R50K,
    "babbage": _R50K,
    "ada": _R50K,
    "text-similarity-davinci-001": _R50K,
    "text-similarity-curie-001": _R50K,
    "text-similarity-babbage-001": _R50K,
    "text-similarity-ada-001": _R50K,
    "text-search-davinci-doc-001": _R50K,
    "text-search-curie-doc-001": _R50K,
    "text-search-babbage-doc-001": _R50K,
    "text-search-ada-doc-001": _R50K,
    "code-search-babbage-code-001": _R50K,
    "code-search-ada-code-001": _R50K,
}

# jtokkit's prefix rules; order matters ("gpt-4-32k" before "gpt-4", "-16k" before the base).
_PREFIX_TO_ENCODING: tuple[tuple[str, str], ...] = (
    ("gpt-4o", _O200K),
    ("gpt-4-32k", _CL100K),
    ("gpt-4", _CL100K),
    ("gpt-3.5-turbo-16k", _CL100K),
    ("gpt-3.5-turbo", _CL100K),
)

# LangChain4j checks these before asking jtokkit, which does not know the newer models yet.
_O200K_PREFIXES = ("o", "gpt-4.", "gpt-5")


def encoding_name_for_model(model_name: str) -> str:
    """Return the encoding LangChain4j's ``OpenAiTokenCountEstimator`` uses for a model.

    Names starting with ``"o"``, ``"gpt-4."`` or ``"gpt-5"`` get ``o200k_base``; any other name
    is looked up in jtokkit 1.1.0's exact-name table, then by its prefix rules in order
    (``gpt-4o``, ``gpt-4-32k``, ``gpt-4``, ``gpt-3.5-turbo-16k``, ``gpt-3.5-turbo``).

    Args:
        model_name: An OpenAI model name such as ``"gpt-4o-mini"``.

    Returns:
        The tiktoken encoding name, e.g. ``"o200k_base"``.

    Raises:
        ValueError: If ``model_name`` is blank, or unknown to jtokkit.
    """
    if not isinstance(model_name, str) or is_blank(model_name):
        msg = f"model_name cannot be null or blank (got {model_name!r}); pass e.g. 'gpt-4o-mini'"
        raise ValueError(msg)
    if model_name.startswith(_O200K_PREFIXES):
        return _O200K
    exact = _MODEL_TO_ENCODING.get(model_name)
    if exact is not None:
        return exact
    for prefix, encoding_name in _PREFIX_TO_ENCODING:
        if model_name.startswith(prefix):
            return encoding_name
    msg = (
        f"Model '{model_name}' is unknown to jtokkit; pass a known OpenAI model name such as "
        "'gpt-4o-mini' or 'gpt-3.5-turbo', or plug in your own TokenCountEstimator"
    )
    raise ValueError(msg)


# --------------------------------------------------------------------------------------------
# Java rendering of parsed tool arguments (Jackson Map values through String.valueOf).
# --------------------------------------------------------------------------------------------


def _reject_non_numeric(constant: str) -> object:
    # Jackson rejects NaN/Infinity literals by default; Python's json would accept them.
    msg = f"non-standard JSON number {constant!r}"
    raise ValueError(msg)


_JSON_DECODER = json.JSONDecoder(parse_constant=_reject_non_numeric)
_JSON_WHITESPACE = " \t\n\r"


def _java_string_value_of(value: object) -> str:
    """Render a parsed JSON value like Java's ``String.valueOf`` on Jackson's result."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return double_to_string(value)
    if isinstance(value, dict):
        entries = ", ".join(
            f"{_java_string_value_of(key)}={_java_string_value_of(item)}"
            for key, item in value.items()
        )
        return "{" + entries + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_java_string_value_of(item) for item in value) + "]"
    msg = f"render {value!r} like Java failed: {type(value).__name__} is not a JSON value type"
    raise TypeError(msg)


def _parse_arguments(request: ToolExecutionRequest, arguments: str) -> dict[str, object]:
    """Parse tool arguments as Jackson's ``readValue(arguments, Map.class)`` does.

    Jackson skips leading whitespace and, by default, ignores anything after the first value.
    """
    start = len(arguments) - len(arguments.lstrip(_JSON_WHITESPACE))
    try:
        value, _end = _JSON_DECODER.raw_decode(arguments, start)
    except ValueError as error:
        problem = f"not valid JSON ({error})"
    else:
        if isinstance(value, dict):
            return value
        problem = f"a JSON {type(value).__name__}, not an object"
    msg = (
        f"estimate tokens of {request!r} failed: its arguments are {problem}. An AiMessage "
        "with several tool requests has each request's arguments parsed as a JSON object "
        "(LangChain4j rule); store arguments as a JSON object string such as '{\"x\": 1}'"
    )
    raise ValueError(msg)


# --------------------------------------------------------------------------------------------
# The estimator.
# --------------------------------------------------------------------------------------------


class OpenAiTokenCountEstimator:
    """LangChain4j's ``OpenAiTokenCountEstimator``: OpenAI chat token counts, rule for rule.

    Per message: 4 (role + per-message overhead) plus the text tokens; a user's ``name`` adds
    1 plus its tokens; an AI message's tool requests add LangChain4j's empirical constants; a
    list adds 3 for reply priming, minus 1 for models whose name starts with ``"o"``.

    Example:
        >>> estimator = OpenAiTokenCountEstimator("gpt-4o-mini")
        >>> estimator.estimate_token_count_in_message(UserMessage("How much is 2+2?"))
        12

    Args:
        model_name: An OpenAI model name; selects the encoding via
            :func:`encoding_name_for_model`.

    Raises:
        ValueError: If ``model_name`` is blank or unknown to jtokkit.
        EncodingUnavailableError: If the encoding's data file is not available locally.
    """

    __slots__ = (
        "_ai_extra",
        "_encode_ordinary",
        "_encoding",
        "_encoding_name",
        "_identity",
        "_messages_overhead",
        "_model_name",
    )

    def __init__(self, model_name: str) -> None:
        encoding_name = encoding_name_for_model(model_name)
        self._model_name = model_name
        self._encoding_name = encoding_name
        self._encoding = get_encoding(encoding_name)
        self._encode_ordinary = self._encoding.encode_ordinary
        # 3 priming tokens per request; "o" models are primed with one fewer.
        self._messages_overhead = 2 if model_name.startswith("o") else 3
        self._ai_extra = 2 if model_name.startswith("o4") else 0
        import tiktoken  # already loaded by get_encoding; not imported with this module

        self._identity = (
            f"openai:{model_name}:{encoding_name}:tiktoken-{tiktoken.__version__}"
            f":langchain4j-{LANGCHAIN4J_VERSION}"
        )

    def __repr__(self) -> str:
        return f"OpenAiTokenCountEstimator({self._model_name!r})"

    @property
    def model_name(self) -> str:
        """The model name this estimator was built for."""
        return self._model_name

    @property
    def encoding_name(self) -> str:
        """The tiktoken encoding in use, e.g. ``"o200k_base"``."""
        return self._encoding_name

    @property
    def messages_overhead(self) -> int:
        """Tokens a list adds beyond its messages: 3, or 2 for models starting with ``"o"``.

        For every list ``ms``, ``estimate_token_count_in_messages(ms) == messages_overhead +
        sum(estimate_token_count_in_message(m) for m in ms)``, so a memory can count each
        message once and keep a running total.
        """
        return self._messages_overhead

    @property
    def identity(self) -> str:
        """A string that changes whenever this estimator's counts could change.

        It names the model, the encoding, the tiktoken version and the LangChain4j rules, e.g.
        ``"openai:gpt-4o-mini:o200k_base:tiktoken-0.14.0:langchain4j-1.19.0"``. Recorded
        counts may be reused only under an equal identity.
        """
        return self._identity

    def _tokens(self, text: str | None) -> int:
        # jtokkit counts null as no tokens; skipping "" avoids a call into tiktoken.
        return len(self._encode_ordinary(text)) if text else 0

    def estimate_token_count_in_text(self, text: str | None) -> int:
        """Return the number of tokens in ``text``, special-token strings counted as text.

        Args:
            text: Any text; ``None`` counts as 0 tokens, as in jtokkit.

        Returns:
            ``len(encoding.encode_ordinary(text))``.
        """
        return self._tokens(text)

    def estimate_token_count_in_message(self, message: ChatMessage) -> int:
        """Return the tokens ``message`` costs inside a request (LangChain4j's rules).

        Args:
            message: A system, user, AI or tool-execution-result message.

        Returns:
            4 plus the message's content tokens (see the class docstring).

        Raises:
            ValueError: If the message is of another type (e.g. ``CustomMessage``), a user
                message holds non-text content, a tool result is not exactly one text, or
                tool arguments of a multi-request AI message are not a JSON object.
        """
        if isinstance(message, SystemMessage):
            return 4 + self._tokens(message.text)
        if isinstance(message, UserMessage):
            return 4 + self._user_tokens(message)
        if isinstance(message, AiMessage):
            return 4 + self._ai_tokens(message)
        if isinstance(message, ToolExecutionResultMessage):
            return 4 + self._tool_result_tokens(message)
        msg = (
            f"Unknown message type: {message!r}; estimate_token_count_in_message counts only "
            "System, User, Ai and ToolExecutionResult messages, so keep other messages out "
            "of a token window or plug in an estimator that prices them"
        )
        raise ValueError(msg)

    def estimate_token_count_in_messages(self, messages: Iterable[ChatMessage]) -> int:
        """Return the tokens a request made of ``messages`` costs.

        Args:
            messages: The messages, in order; may be empty.

        Returns:
            :attr:`messages_overhead` plus each message's count.

        Raises:
            ValueError: As :meth:`estimate_token_count_in_message`.
        """
        count = self._messages_overhead
        for message in messages:
            count += self.estimate_token_count_in_message(message)
        return count

    def _user_tokens(self, message: UserMessage) -> int:
        count = 0
        for content in message.contents:
            if not isinstance(content, TextContent):
                msg = (
                    f"Unknown content type: {content!r}; estimate tokens of a UserMessage "
                    "counts only TextContent (LangChain4j rule), so send non-text content "
                    "through a memory with an estimator that prices it"
                )
                raise ValueError(msg)
            count += self._tokens(content.text)
        if message.name is not None:
            count += 1 + self._tokens(message.name)
        return count

    def _ai_tokens(self, message: AiMessage) -> int:
        count = self._tokens(message.text)  # thinking and attributes are not counted
        requests = message.tool_execution_requests
        if requests:
            count += 6
            if len(requests) == 1:
                request = requests[0]
                count += -1 + 2 * self._tokens(request.name) + self._tokens(request.arguments)
            else:
                count += 15
                for request in requests:
                    count += 7 + self._tokens(request.name)
                    arguments = request.arguments
                    if arguments is None or is_blank(arguments):
                        continue
                    for key, value in _parse_arguments(request, arguments).items():
                        count += 2 + self._tokens(key)
                        count += self._tokens(_java_string_value_of(value))
        return count + self._ai_extra

    def _tool_result_tokens(self, message: ToolExecutionResultMessage) -> int:
        try:
            text = message.text
        except ValueError as error:
            msg = (
                f"estimate tokens of {message!r} failed: only a tool result made of exactly "
                f"one TextContent can be counted (LangChain4j rule) ({error})"
            )
            raise ValueError(msg) from error
        return self._tokens(text)

    def encode(self, text: str, max_tokens: int | None = None) -> list[int]:
        """Return the token ids of ``text`` (special-token strings encoded as ordinary text).

        Args:
            text: The text to encode.
            max_tokens: If given, keep at most this many leading tokens, then drop trailing
                tokens until the decoded ids are a prefix of ``text`` (jtokkit never splits
                a multi-byte character).

        Returns:
            The token ids.

        Raises:
            ValueError: If ``max_tokens`` is negative.
        """
        if max_tokens is not None and max_tokens < 0:
            msg = f"encode with max_tokens={max_tokens} is invalid; pass 0 or more, or None"
            raise ValueError(msg)
        ids = self._encode_ordinary(text)
        if max_tokens is None or len(ids) <= max_tokens:
            return ids
        ids = ids[:max_tokens]
        while ids and not text.startswith(self._encoding.decode(ids)):
            ids.pop()
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """Return the text of token ``ids`` (invalid UTF-8 becomes U+FFFD, as in Java).

        Raises:
            ValueError: If an id is not in the encoding.
        """
        tokens = list(ids)
        try:
            return self._encoding.decode(tokens)
        except KeyError as error:
            msg = (
                f"decode with {self._encoding_name} failed: {error.args[0]}; pass ids produced "
                f"by encode() of an estimator using {self._encoding_name}"
            )
            raise ValueError(msg) from error
