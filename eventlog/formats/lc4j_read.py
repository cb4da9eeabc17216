"""LangChain4j JSON, reading: everything ``JacksonChatMessageJsonCodec`` writes, plus the
legacy tool-result form with ``"text"``; anything else raises `ValueError` naming the position
(``$[2].contents[0]``), the problem and the expected form (see
:mod:`eventlog.formats.lc4j_json`)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn

from pydantic import ValidationError

from eventlog.contents import (
    DETAIL_LEVELS,
    AudioContent,
    Content,
    ImageContent,
    PdfFileContent,
    TextContent,
    VideoContent,
)
from eventlog.java import TRIM_CHARS
from eventlog.messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)

__all__ = ["message_from_json", "message_from_obj", "messages_from_json"]


class _Invalid(ValueError):
    """A decoding problem; ``path`` is filled in while the error travels up."""

    def __init__(self, problem: str, path: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.path = path


def _prefixed(error: _Invalid, segment: str) -> _Invalid:
    error.path = segment + error.path
    return error


def _kind(value: object) -> str:
    """How JSON would call ``value``'s type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {json.dumps(value)}"
    if isinstance(value, int | float):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {value[:40]!r}"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _reject_constant(name: str) -> NoReturn:
    msg = f"{name} is not valid JSON (Jackson refuses it too)"
    raise ValueError(msg)


_decode_json: Final = json.JSONDecoder(parse_constant=_reject_constant).decode

_WHITESPACE_AND_CONTROLS: Final = str.maketrans("", "", TRIM_CHARS)


def _parse(operation: str, text: str | bytes | bytearray) -> Any:
    if isinstance(text, bytes | bytearray):
        try:
            # As json.loads does: detect UTF-8/16/32 from the first bytes.
            text = bytes(text).decode(json.detect_encoding(text), "surrogatepass")
        except UnicodeDecodeError as e:
            msg = f"{operation}: input is not valid UTF-8/16/32 text: {e}; pass UTF-8 JSON"
            raise ValueError(msg) from e
    elif not isinstance(text, str):
        msg = f"{operation}: expected JSON text as str or bytes, got {type(text).__name__}"
        raise TypeError(msg)
    try:
        return _decode_json(text)
    except RecursionError:
        msg = f"{operation}: JSON is nested too deeply to parse"
        raise ValueError(msg) from None
    except ValueError as e:
        msg = f"{operation}: invalid JSON: {e}"
        raise ValueError(msg) from e


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        msg = f"{what} must be a JSON object, got {_kind(value)}"
        raise _Invalid(msg)
    return value


def _check_fields(obj: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    if not obj.keys() <= allowed:
        unknown = ", ".join(sorted(repr(key) for key in obj.keys() - allowed))
        expected = ", ".join(f for f in _FIELD_ORDER if f in allowed)
        msg = f"unknown field {unknown} in {what}; LangChain4j's {what} has only {expected}"
        raise _Invalid(msg)


def _optional_str(obj: dict[str, Any], field: str) -> str | None:
    value = obj.get(field)
    if value is None or type(value) is str:
        return value
    msg = f"must be a string or null, got {_kind(value)}"
    raise _Invalid(msg, f".{field}")


def _required_str(obj: dict[str, Any], field: str, what: str) -> str:
    value = obj.get(field)
    if type(value) is str:
        return value
    if value is None:
        msg = f"{what}.{field} cannot be null; expected a string"
        raise _Invalid(msg, f".{field}")
    msg = f"must be a string, got {_kind(value)}"
    raise _Invalid(msg, f".{field}")


def _optional_list(obj: dict[str, Any], field: str) -> list[Any] | None:
    value = obj.get(field)
    if value is None or isinstance(value, list):
        return value
    msg = f"must be an array or null, got {_kind(value)}"
    raise _Invalid(msg, f".{field}")


def _attributes(obj: dict[str, Any]) -> dict[str, Any] | None:
    value = obj.get("attributes")
    if value is None or isinstance(value, dict):
        return value
    msg = f"must be an object or null, got {_kind(value)}"
    raise _Invalid(msg, ".attributes")


# Every field name the codec knows, in the order errors list them.
_FIELD_ORDER: Final = (
    "id",
    "name",
    "toolName",
    "text",
    "thinking",
    "contents",
    "toolExecutionRequests",
    "isError",
    "attributes",
    "image",
    "audio",
    "video",
    "pdfFile",
    "url",
    "binaryData",
    "base64Data",
    "mimeType",
    "revisedPrompt",
    "detailLevel",
    "arguments",
    "type",
)
_SYSTEM_FIELDS: Final = frozenset({"text", "type"})
_USER_FIELDS: Final = frozenset({"name", "contents", "attributes", "type"})
_AI_FIELDS: Final = frozenset({"text", "thinking", "toolExecutionRequests", "attributes", "type"})
_TOOL_RESULT_FIELDS: Final = frozenset(
    {"id", "toolName", "text", "contents", "isError", "attributes", "type"}
)
_CUSTOM_FIELDS: Final = frozenset({"attributes", "type"})
_REQUEST_FIELDS: Final = frozenset({"id", "name", "arguments"})
_TEXT_FIELDS: Final = frozenset({"text", "type"})
_IMAGE_FIELDS: Final = frozenset({"image", "detailLevel", "type"})
_IMAGE_SOURCE_FIELDS: Final = frozenset({"url", "base64Data", "mimeType", "revisedPrompt"})
_AUDIO_SOURCE_FIELDS: Final = frozenset({"url", "binaryData", "base64Data", "mimeType"})
_MEDIA_SOURCE_FIELDS: Final = frozenset({"url", "base64Data", "mimeType"})
_AUDIO_FIELDS: Final = frozenset({"audio", "type"})
_VIDEO_FIELDS: Final = frozenset({"video", "type"})
_PDF_FIELDS: Final = frozenset({"pdfFile", "type"})


def _contents(obj: dict[str, Any]) -> list[Content] | None:
    items = _optional_list(obj, "contents")
    if items is None:
        return None
    contents: list[Content] = []
    for index, item in enumerate(items):
        try:
            contents.append(_decode_content(item))
        except _Invalid as e:
            raise _prefixed(e, f".contents[{index}]") from None
    return contents


def _decode_content(value: Any) -> Content:
    obj = _object(value, "a content")
    tag = obj.get("type")
    if tag == "TEXT":
        _check_fields(obj, _TEXT_FIELDS, "TextContent")
        return TextContent(_required_str(obj, "text", "TextContent"))
    if tag == "IMAGE":
        _check_fields(obj, _IMAGE_FIELDS, "ImageContent")
        level = obj.get("detailLevel")
        if level is None:
            # Java's constructor would refuse a missing level; LOW is its default everywhere.
            level = "LOW"
        elif level not in DETAIL_LEVELS:
            msg = f"unknown detail level {_kind(level)}; expected one of {', '.join(DETAIL_LEVELS)}"
            raise _Invalid(
                msg,
                ".detailLevel",
            )
        fields = _source(obj, "image", _IMAGE_SOURCE_FIELDS, "Image")
        return _build(ImageContent, ".image", detail_level=level, **fields)  # type: ignore[no-any-return]
    if tag == "AUDIO":
        _check_fields(obj, _AUDIO_FIELDS, "AudioContent")
        fields = _source(obj, "audio", _AUDIO_SOURCE_FIELDS, "Audio")
        return _build(AudioContent, ".audio", **fields)  # type: ignore[no-any-return]
    if tag == "VIDEO":
        _check_fields(obj, _VIDEO_FIELDS, "VideoContent")
        fields = _source(obj, "video", _MEDIA_SOURCE_FIELDS, "Video")
        return _build(VideoContent, ".video", **fields)  # type: ignore[no-any-return]
    if tag == "PDF":
        _check_fields(obj, _PDF_FIELDS, "PdfFileContent")
        fields = _source(obj, "pdfFile", _MEDIA_SOURCE_FIELDS, "PdfFile")
        return _build(PdfFileContent, ".pdfFile", **fields)  # type: ignore[no-any-return]
    expected = "TEXT, IMAGE, AUDIO, VIDEO, PDF"
    if tag is None:
        msg = f'content has no "type"; expected one of {expected}'
        raise _Invalid(msg)
    msg = f"unknown content type {_kind(tag)}; expected one of {expected}"
    raise _Invalid(msg, ".type")


def _source(obj: dict[str, Any], field: str, allowed: frozenset[str], what: str) -> dict[str, Any]:
    """The nested media object's fields as constructor keyword arguments."""
    try:
        source = _object(obj.get(field), f"{what} ({field!r})")
        _check_fields(source, allowed, what)
        fields: dict[str, Any] = {}
        for name in source:
            if name == "binaryData":
                fields["binary_data"] = _base64_bytes(source)
            else:
                fields[_PYTHON_NAMES[name]] = _optional_str(source, name)
    except _Invalid as e:
        raise _prefixed(e, f".{field}") from None
    return fields


def _base64_bytes(audio: dict[str, Any]) -> bytes | None:
    encoded = _optional_str(audio, "binaryData")
    if encoded is None:
        return None
    try:
        # Jackson skips whitespace and control characters inside base64 but wants padding.
        return base64.b64decode(encoded.translate(_WHITESPACE_AND_CONTROLS), validate=True)
    except (binascii.Error, ValueError) as e:
        msg = f"is not valid base64 ({e})"
        raise _Invalid(msg, ".binaryData") from None


_PYTHON_NAMES: Final = {
    "url": "url",
    "base64Data": "base64_data",
    "mimeType": "mime_type",
    "revisedPrompt": "revised_prompt",
}
_JSON_NAMES: Final = {
    "tool_name": "toolName",
    "is_error": "isError",
    "tool_execution_requests": "toolExecutionRequests",
    "base64_data": "base64Data",
    "binary_data": "binaryData",
    "mime_type": "mimeType",
    "revised_prompt": "revisedPrompt",
    "detail_level": "detailLevel",
}


def _build(cls: Callable[..., Any], segment: str, **fields: Any) -> Any:
    """Call a model constructor, turning its complaints into a positioned `_Invalid`."""
    try:
        return cls(**fields)
    except ValidationError as e:
        details = e.errors(include_url=False, include_input=False)
        location = details[0]["loc"] if details else ()
        path = segment + "".join(
            f".{_JSON_NAMES.get(part, part)}" if isinstance(part, str) else f"[{part}]"
            for part in location
        )
        problem = "; ".join(d["msg"].removeprefix("Value error, ") for d in details)
        raise _Invalid(problem, path) from None
    except (ValueError, TypeError) as e:
        raise _Invalid(str(e), segment) from None


def _decode_system(obj: dict[str, Any]) -> ChatMessage:
    _check_fields(obj, _SYSTEM_FIELDS, "SystemMessage")
    text = obj.get("text")
    if text is not None and type(text) is not str:
        msg = f"must be a string, got {_kind(text)}"
        raise _Invalid(msg, ".text")
    if text is None:
        msg = "SystemMessage.text cannot be null or blank; expected a string"
        raise _Invalid(msg, ".text")
    return _build(SystemMessage, "", text=text)  # type: ignore[no-any-return]


def _decode_user(obj: dict[str, Any]) -> ChatMessage:
    _check_fields(obj, _USER_FIELDS, "UserMessage")
    name = _optional_str(obj, "name")
    contents = _contents(obj)
    if not contents:
        msg = "UserMessage.contents cannot be null or empty; expected an array of contents"
        raise _Invalid(
            msg,
            ".contents",
        )
    return _build(  # type: ignore[no-any-return]
        UserMessage, "", name=name, contents=contents, attributes=_attributes(obj)
    )


def _decode_ai(obj: dict[str, Any]) -> ChatMessage:
    _check_fields(obj, _AI_FIELDS, "AiMessage")
    raw_requests = _optional_list(obj, "toolExecutionRequests")
    requests: list[ToolExecutionRequest] = []
    for index, item in enumerate(raw_requests or ()):
        try:
            request = _object(item, "a tool execution request")
            _check_fields(request, _REQUEST_FIELDS, "ToolExecutionRequest")
            requests.append(
                ToolExecutionRequest(
                    _optional_str(request, "id"),
                    _optional_str(request, "name"),
                    _optional_str(request, "arguments"),
                )
            )
        except _Invalid as e:
            raise _prefixed(e, f".toolExecutionRequests[{index}]") from None
    return _build(  # type: ignore[no-any-return]
        AiMessage,
        "",
        text=_optional_str(obj, "text"),
        thinking=_optional_str(obj, "thinking"),
        tool_execution_requests=requests,
        attributes=_attributes(obj),
    )


def _decode_tool_result(obj: dict[str, Any]) -> ChatMessage:
    _check_fields(obj, _TOOL_RESULT_FIELDS, "ToolExecutionResultMessage")
    is_error = obj.get("isError")
    if is_error is not None and type(is_error) is not bool:
        msg = f"must be true, false or null, got {_kind(is_error)}"
        raise _Invalid(msg, ".isError")
    # The legacy form (before LangChain4j PR #4851) has "text" instead of "contents".
    text = _optional_str(obj, "text")
    contents = _contents(obj)
    if text is not None and contents:
        msg = (
            'ToolExecutionResultMessage has both "text" and "contents"; '
            "LangChain4j accepts exactly one of them"
        )
        raise _Invalid(msg)
    if text is None and not contents:
        msg = (
            'ToolExecutionResultMessage needs "contents" (a non-empty array) or the legacy '
            '"text"; it has neither'
        )
        raise _Invalid(msg)
    return _build(  # type: ignore[no-any-return]
        ToolExecutionResultMessage,
        "",
        id=_optional_str(obj, "id"),
        tool_name=_optional_str(obj, "toolName"),
        text=text,
        contents=None if text is not None else contents,
        is_error=is_error,
        attributes=_attributes(obj),
    )


def _decode_custom(obj: dict[str, Any]) -> ChatMessage:
    _check_fields(obj, _CUSTOM_FIELDS, "CustomMessage")
    return _build(CustomMessage, "", attributes=_attributes(obj))  # type: ignore[no-any-return]


_DECODERS: Final[Mapping[str, Callable[[dict[str, Any]], ChatMessage]]] = {
    "SYSTEM": _decode_system,
    "USER": _decode_user,
    "AI": _decode_ai,
    "TOOL_EXECUTION_RESULT": _decode_tool_result,
    "CUSTOM": _decode_custom,
}


def _decode_message(value: Any) -> ChatMessage:
    obj = _object(value, "a chat message")
    tag = obj.get("type")
    decoder = _DECODERS.get(tag) if type(tag) is str else None
    if decoder is None:
        expected = ", ".join(_DECODERS)
        if tag is None:
            msg = f'chat message has no "type"; expected one of {expected}'
            raise _Invalid(msg)
        msg = f"unknown message type {_kind(tag)}; expected one of {expected}"
        raise _Invalid(msg, ".type")
    return decoder(obj)


def _fail(operation: str, error: _Invalid, root: str) -> NoReturn:
    msg = f"{operation}: {root}{error.path}: {error.problem}"
    raise ValueError(msg) from None


def message_from_obj(obj: Any) -> ChatMessage:
    """Build a message from an already-parsed LangChain4j JSON object.

    Args:
        obj: What ``json.loads`` returned for one message. It is not modified.

    Raises:
        ValueError: If ``obj`` is not a valid LangChain4j chat message; the message gives the
            position, the problem and what was expected.
    """
    try:
        return _decode_message(obj)
    except _Invalid as e:
        _fail("message_from_obj", e, "$")


def message_from_json(text: str | bytes) -> ChatMessage:
    """Parse one message written by LangChain4j's ``ChatMessageSerializer`` (or by this module).

    Also accepts the legacy tool-result form ``{"id":..,"toolName":..,"text":..}``.

    Raises:
        ValueError: If ``text`` is not JSON or not a valid LangChain4j chat message.
        TypeError: If ``text`` is neither str nor bytes.
    """
    obj = _parse("message_from_json", text)
    try:
        return _decode_message(obj)
    except _Invalid as e:
        _fail("message_from_json", e, "$")


def messages_from_json(text: str | bytes | None) -> list[ChatMessage]:
    """Parse a JSON array of messages, like LangChain4j's ``messagesFromJson``.

    ``None`` and the JSON literal ``null`` give an empty list.

    Raises:
        ValueError: If ``text`` is not JSON, not an array, or holds an invalid message.
        TypeError: If ``text`` is neither str, bytes nor None.
    """
    if text is None:
        return []
    items = _parse("messages_from_json", text)
    if items is None:
        return []
    if type(items) is not list:
        msg = f"messages_from_json: $: expected a JSON array of messages, got {_kind(items)}"
        raise ValueError(msg)
    messages: list[ChatMessage] = []
    for index, item in enumerate(items):
        try:
            messages.append(_decode_message(item))
        except _Invalid as e:
            _fail("messages_from_json", e, f"$[{index}]")
    return messages
