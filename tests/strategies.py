"""Hypothesis strategies for chat messages (house style rule 25).

``chat_messages()`` draws any of the five message types with realistic variety: prose and
arbitrary Unicode (control characters, emoji, right-to-left text), names, tool calls with JSON
arguments, media contents, ``is_error`` flags and attributes holding nested JSON values.

Every drawn message is valid and survives the LangChain4j JSON round trip unchanged, so tests
can assert ``message_from_json(message_to_json(m)) == m``. That excludes one LangChain4j quirk on
purpose: a ``UserMessage`` named ``""`` loses its name (Jackson's ``NON_EMPTY``), so names are
None or non-empty here; `tests.eventlog.test_lc4j_json` covers that case explicitly.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from eventlog.contents import (
    DETAIL_LEVELS,
    AudioContent,
    Content,
    ImageContent,
    PdfFileContent,
    TextContent,
    VideoContent,
)
from eventlog.messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)

__all__ = [
    "ai_messages",
    "attributes",
    "chat_messages",
    "contents",
    "conversations",
    "custom_messages",
    "json_values",
    "media_contents",
    "messages",
    "system_messages",
    "texts",
    "tool_execution_requests",
    "tool_execution_result_messages",
    "user_messages",
]

_PHRASES = (
    "How much is 2+2?",
    "2 + 2 = 4",
    "Use calculator for math questions",
    "Grüße aus München! Wie wird das Wetter?",
    "東京の天気は？",  # noqa: RUF001 - full-width punctuation on purpose
    "مرحبا بالعالم",
    "Ünïcödé ✓ 😀👍🏽 family: 👨‍👩‍👧",
    'He said "hi" and left \\ back',
    "line one\nline two\r\n\ttabbed",
    "bell\x07 nul\x00 esc\x1b unit\x1f del\x7f",
    "literal \\u001f is not a control character",
    "zero\u200bwidth and\u2028line\u2029separators",
    "",
    " ",
)


def texts(*, min_size: int = 0) -> st.SearchStrategy[str]:
    """Message text: canned realistic phrases, arbitrary Unicode, or a mix of both."""
    arbitrary = st.text(min_size=min_size, max_size=80)
    canned = st.sampled_from([p for p in _PHRASES if len(p) >= min_size])
    mixed = st.tuples(canned, arbitrary).map("".join)
    return st.one_of(canned, arbitrary, mixed)


def _non_blank_texts() -> st.SearchStrategy[str]:
    # Java's trim() treats every char <= U+0020 as blank; add one visible character. Not a
    # lone surrogate (st.text never draws one; st.characters can): such text is not UTF-8,
    # and chatledger refuses it by design (eventlog.validation), so no message holds one.
    visible = st.characters(min_codepoint=0x21, exclude_categories=["Cs"])
    return st.tuples(texts(), visible, texts()).map("".join)


_keys = st.one_of(
    st.sampled_from(["name", "age", "extra", "source", "trace_id", "tags", "score", "k1"]),
    st.text(max_size=12),
)

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False),
    texts(),
)


def json_values(*, max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Any JSON value as Python (dict, list, str, int, float, bool, None), nested a few levels."""
    return st.recursive(
        _scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(_keys, inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )


def attributes() -> st.SearchStrategy[dict[str, Any]]:
    """Message attributes: mostly empty, otherwise a few keys with (nested) JSON values."""
    return st.one_of(
        st.just({}),
        st.dictionaries(_keys, json_values(), min_size=1, max_size=8),
    )


_optional_strings = st.one_of(st.none(), texts())


def tool_execution_requests() -> st.SearchStrategy[ToolExecutionRequest]:
    """Tool calls: realistic ids/names/JSON arguments, or arbitrary (possibly null) strings."""
    arguments = st.one_of(
        st.none(),
        st.just('{ "a": 2, "b": 2 }'),
        st.just('{"city": "Munich"}'),
        st.dictionaries(st.text(max_size=8), _scalars, max_size=3).map(
            lambda args: json.dumps(args, ensure_ascii=False)
        ),
        texts(),
    )
    return st.builds(
        ToolExecutionRequest,
        id=st.one_of(st.none(), st.from_regex(r"call_[A-Za-z0-9]{1,12}", fullmatch=True), texts()),
        name=st.one_of(st.none(), st.sampled_from(["calculator", "weather", "search"]), texts()),
        arguments=arguments,
    )


_urls = st.one_of(
    st.sampled_from(["http://image.url", "https://example.com/a b/ü.png?q=1#f"]),
    st.text(max_size=30),
)
_base64 = st.one_of(st.sampled_from(["aGVsbG8=", "bXAz", "cGRm"]), st.text(max_size=20))
_mime_types = st.one_of(st.none(), st.sampled_from(["image/png", "audio/mp3", "video/mp4"]))


def _with_source(
    cls: type[Any], extra: dict[str, st.SearchStrategy[Any]]
) -> st.SearchStrategy[Any]:
    by_url = st.builds(cls, url=_urls, base64_data=st.none() | _base64, **extra)
    by_data = st.builds(cls, url=st.none(), base64_data=_base64, **extra)
    return st.one_of(by_url, by_data)


def media_contents() -> st.SearchStrategy[Content]:
    """Image, audio, video and PDF contents, each with a URL or data as LangChain4j needs."""
    images = _with_source(
        ImageContent,
        {
            "mime_type": _mime_types,
            "detail_level": st.sampled_from(DETAIL_LEVELS),
            "revised_prompt": _optional_strings,
        },
    )
    audios = st.one_of(
        _with_source(AudioContent, {"mime_type": _mime_types, "binary_data": st.none()}),
        st.builds(AudioContent, binary_data=st.binary(max_size=24), mime_type=_mime_types),
    )
    videos = _with_source(VideoContent, {"mime_type": _mime_types})
    pdfs = _with_source(PdfFileContent, {"mime_type": st.none() | st.just("application/pdf")})
    return st.one_of(images, audios, videos, pdfs)


def contents(*, max_size: int = 4) -> st.SearchStrategy[list[Content]]:
    """A non-empty content list, mostly text."""
    one = st.one_of(st.builds(TextContent, texts()), media_contents())
    return st.lists(one, min_size=1, max_size=max_size)


def system_messages() -> st.SearchStrategy[SystemMessage]:
    """System messages with non-blank text (in Java's sense)."""
    return st.builds(SystemMessage, _non_blank_texts())


def user_messages() -> st.SearchStrategy[UserMessage]:
    """User messages: plain text, with a name, multi-modal contents, with attributes."""
    names = st.one_of(st.none(), st.just("Klaus"), texts(min_size=1))
    by_text = st.builds(UserMessage, texts(), name=names, attributes=attributes())
    by_contents = st.builds(UserMessage, contents=contents(), name=names, attributes=attributes())
    return st.one_of(by_text, by_contents)


def ai_messages() -> st.SearchStrategy[AiMessage]:
    """AI messages: text, tool calls, both, thinking, attributes, or nothing at all."""
    return st.builds(
        AiMessage,
        _optional_strings,
        thinking=_optional_strings,
        tool_execution_requests=st.lists(tool_execution_requests(), max_size=3),
        attributes=attributes(),
    )


def tool_execution_result_messages() -> st.SearchStrategy[ToolExecutionResultMessage]:
    """Tool results by text or contents, with or without id, name and error flag."""
    ids = st.one_of(st.none(), st.just(""), st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True))
    names = st.one_of(st.none(), st.just(""), st.sampled_from(["calculator", "weather"]))
    common = {
        "id": ids,
        "tool_name": names,
        "is_error": st.none() | st.booleans(),
        "attributes": attributes(),
    }
    by_text = st.builds(ToolExecutionResultMessage, text=texts(), **common)
    by_contents = st.builds(ToolExecutionResultMessage, contents=contents(), **common)
    return st.one_of(by_text, by_contents)


def custom_messages() -> st.SearchStrategy[CustomMessage]:
    """Custom messages: attributes only (possibly empty)."""
    return st.builds(CustomMessage, attributes())


def chat_messages() -> st.SearchStrategy[ChatMessage]:
    """Any chat message, every type equally likely."""
    return st.one_of(
        system_messages(),
        user_messages(),
        ai_messages(),
        tool_execution_result_messages(),
        custom_messages(),
    )


messages = chat_messages
"""Alias of `chat_messages`: one message per draw."""


def conversations(*, min_size: int = 0, max_size: int = 8) -> st.SearchStrategy[list[ChatMessage]]:
    """A list of arbitrary chat messages (no conversational order implied)."""
    return st.lists(chat_messages(), min_size=min_size, max_size=max_size)
