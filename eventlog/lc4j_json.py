"""LangChain4j JSON interop: byte-identical to ``ChatMessageSerializer`` / ``Deserializer``.

The format is what LangChain4j 1.19's ``JacksonChatMessageJsonCodec`` writes:

* compact JSON; properties in Java field-declaration order, then ``"type"``;
* ``UserMessage`` omits a null or empty ``name`` and empty ``attributes`` (``NON_EMPTY``);
  everything else omits only nulls, so ``AiMessage`` always has ``"toolExecutionRequests"``
  and ``"attributes"``;
* non-ASCII is written raw; control characters use Jackson's escapes (``\\n``, ``\\u001F``);
* floats are written like Java's ``Double.toString`` (``1.0E20``, ``1.0E-5``, ``2.5``);
* ``UserMessage.attributes`` is a ``java.util.HashMap``, so its keys come out in Java hash
  order (see `_java_hashmap_order`); the other messages keep insertion order.

Where Java's output depends on the JVM, this module matches JDK 19 and later (21, 25, ...):
JDK 17 orders a ``HashMap`` copy of 3, 6, 12, ... keys differently; ``Double.toString`` is
emulated in :mod:`eventlog.java`, shared with the token estimator.

Reading accepts everything the serializer writes plus the legacy tool-result form with
``"text"``; anything else raises `ValueError` naming the position (``$[2].contents[0]``),
the problem and the expected form.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, Final, NoReturn

from pydantic import ValidationError

from eventlog.java import TRIM_CHARS, double_to_string
from eventlog.messages import (
    DETAIL_LEVELS,
    MESSAGE_TYPES,
    AiMessage,
    AudioContent,
    ChatMessage,
    Content,
    CustomMessage,
    ImageContent,
    PdfFileContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
)

__all__ = [
    "message_from_json",
    "message_from_obj",
    "message_to_json",
    "message_to_obj",
    "messages_from_json",
    "messages_to_json",
]

# The C string encoder behind json.dumps(ensure_ascii=False): non-ASCII stays raw and control
# characters are escaped as Jackson does, except for the hex case fixed by _finish.
_string: Final = json.encoder.encode_basestring

# Python writes "\u001f", Jackson "\u001F". Only these control characters have hex letters.
# The look-behind plus even run of backslashes skips text that merely contains "\\u001f".
_LOWER_HEX_ESCAPE: Final = re.compile(r"(?<!\\)((?:\\\\)*)\\u00([01][a-f])")


def _upper_hex(match: re.Match[str]) -> str:
    return f"{match.group(1)}\\u00{match.group(2).upper()}"


def _finish(text: str) -> str:
    # The substring test is a fast C scan; the regex runs only for rare control characters.
    if "\\u00" in text:
        return _LOWER_HEX_ESCAPE.sub(_upper_hex, text)
    return text


# --------------------------------------------------------------------------------------------
# Java emulation
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _java_spread_hash(key: str) -> int:
    """``HashMap.hash(key)``: ``String.hashCode`` over UTF-16 code units, spread by ``h >>> 16``."""
    h = 0
    for char in key:
        code = ord(char)
        if code > 0xFFFF:
            # A supplementary character is two UTF-16 code units in Java.
            code -= 0x10000
            h = (31 * h + (0xD800 | (code >> 10))) & 0xFFFFFFFF
            code = 0xDC00 | (code & 0x3FF)
        h = (31 * h + code) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _table_size_for(n: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two >= n (at least 1)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _java_hashmap_capacity(size: int, *, jdk17: bool = False) -> int:
    """Table length of ``new HashMap<>(map)`` for a map of ``size`` entries.

    JDK 19+ (JDK-8281631) sizes the copy with ``ceil(size / 0.75)``; JDK 8-18 used
    ``(int) (size / 0.75f + 1.0f)``, which is one bucket table larger when ``size / 0.75`` is a
    power of two (3, 6, 12, ... entries). Both are kept so the tests can pin each JDK down.
    """
    if jdk17:
        # The float32 arithmetic is exact for any realistic size (< 2**22 entries).
        return _table_size_for(int(size / 0.75 + 1.0))
    return _table_size_for(math.ceil(size / 0.75))


def _java_hashmap_order(keys: list[str], *, jdk17: bool = False) -> list[str]:
    """The iteration order of ``new HashMap<>(linkedHashMapWith(keys))``.

    A copy constructor inserts the keys in order into a pre-sized table; iteration walks the
    buckets (``hash & (length - 1)``) in index order, and each bucket's list in insertion order.
    A bucket that reaches 9 entries while the table is shorter than 64 doubles the table
    (``treeifyBin``); that is emulated. A bucket of 9+ entries in a table of 64+ becomes a
    red-black tree, whose iteration starts at the tree's root; that is *not* emulated (it needs
    nine keys sharing a bucket, i.e. crafted Java hash collisions), and such a bucket keeps
    insertion order here.
    """
    if len(keys) < 2:
        return keys
    hashes = [_java_spread_hash(key) for key in keys]
    length = _java_hashmap_capacity(len(keys), jdk17=jdk17)
    if len(keys) > 8:
        length = _grow_for_crowded_buckets(hashes, length)
    mask = length - 1
    order = sorted(range(len(keys)), key=lambda i: (hashes[i] & mask, i))
    return [keys[i] for i in order]


@lru_cache(maxsize=1024)
def _user_attribute_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    # A conversation's messages tend to share one attribute key set: compute its order once.
    return tuple(_java_hashmap_order(list(keys)))


def _grow_for_crowded_buckets(hashes: list[int], length: int) -> int:
    """Replay the insertions and double ``length`` wherever ``treeifyBin`` would resize."""
    counts: dict[int, int] = {}
    for inserted, spread in enumerate(hashes):
        bucket = spread & (length - 1)
        counts[bucket] = counts.get(bucket, 0) + 1
        if counts[bucket] >= 9 and length < 64:
            length *= 2
            counts = {}
            for earlier in hashes[: inserted + 1]:
                index = earlier & (length - 1)
                counts[index] = counts.get(index, 0) + 1
    return length


def _encode_java(value: Any) -> str:
    """Compact JSON of a JSON value, numbers formatted like Jackson's."""
    # Exact-type checks first: attributes are almost always plain str/int/dict/list.
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is dict:
        return "{" + ",".join([_string(k) + ":" + _encode_java(v) for k, v in value.items()]) + "}"
    if kind is list:
        return "[" + ",".join([_encode_java(item) for item in value]) + "]"
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is float:
        return double_to_string(value)
    return _encode_java_subclass(value)


def _encode_java_subclass(value: Any) -> str:
    # Subclasses (StrEnum, IntEnum, OrderedDict, ...) write as their base JSON type.
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return double_to_string(value)
    if isinstance(value, dict):
        return _encode_java(dict(value))
    return _encode_java(list(value))


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def _present(fields: Iterable[tuple[str, object]]) -> dict[str, Any]:
    # NON_NULL: a media object lists only the fields that are set.
    return {name: value for name, value in fields if value is not None}


def _text_to_obj(content: TextContent) -> dict[str, Any]:
    return {"text": content.text, "type": "TEXT"}


def _image_to_obj(content: ImageContent) -> dict[str, Any]:
    image = _present(
        (
            ("url", content.url),
            ("base64Data", content.base64_data),
            ("mimeType", content.mime_type),
            ("revisedPrompt", content.revised_prompt),
        )
    )
    return {"image": image, "detailLevel": content.detail_level, "type": "IMAGE"}


def _audio_to_obj(content: AudioContent) -> dict[str, Any]:
    binary = content.binary_data
    audio = _present(
        (
            ("url", content.url),
            # Jackson writes byte[] as standard, padded base64 without line breaks.
            ("binaryData", None if binary is None else base64.b64encode(binary).decode()),
            ("base64Data", content.base64_data),
            ("mimeType", content.mime_type),
        )
    )
    return {"audio": audio, "type": "AUDIO"}


def _video_to_obj(content: VideoContent) -> dict[str, Any]:
    video = _present(
        (("url", content.url), ("base64Data", content.base64_data), ("mimeType", content.mime_type))
    )
    return {"video": video, "type": "VIDEO"}


def _pdf_to_obj(content: PdfFileContent) -> dict[str, Any]:
    pdf = _present(
        (("url", content.url), ("base64Data", content.base64_data), ("mimeType", content.mime_type))
    )
    return {"pdfFile": pdf, "type": "PDF"}


_CONTENT_ENCODERS: Final[Mapping[type, Callable[[Any], dict[str, Any]]]] = {
    TextContent: _text_to_obj,
    ImageContent: _image_to_obj,
    AudioContent: _audio_to_obj,
    VideoContent: _video_to_obj,
    PdfFileContent: _pdf_to_obj,
}


def _content_to_obj(content: Content) -> dict[str, Any]:
    return _CONTENT_ENCODERS[type(content)](content)


def _request_to_obj(request: ToolExecutionRequest) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    if request.id is not None:
        obj["id"] = request.id
    if request.name is not None:
        obj["name"] = request.name
    if request.arguments is not None:
        obj["arguments"] = request.arguments
    return obj


def _system_to_obj(message: SystemMessage) -> dict[str, Any]:
    return {"text": message.text, "type": "SYSTEM"}


def _user_to_obj(message: UserMessage) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    if message.name:  # NON_EMPTY: "" is omitted like null
        obj["name"] = message.name
    obj["contents"] = [_content_to_obj(c) for c in message.contents]
    attributes = message.attributes
    if attributes:
        order = _user_attribute_order(tuple(attributes))
        obj["attributes"] = {key: attributes[key] for key in order}
    obj["type"] = "USER"
    return obj


def _ai_to_obj(message: AiMessage) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    if message.text is not None:
        obj["text"] = message.text
    if message.thinking is not None:
        obj["thinking"] = message.thinking
    obj["toolExecutionRequests"] = [_request_to_obj(r) for r in message.tool_execution_requests]
    obj["attributes"] = dict(message.attributes)
    obj["type"] = "AI"
    return obj


def _tool_result_to_obj(message: ToolExecutionResultMessage) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    if message.id is not None:
        obj["id"] = message.id
    if message.tool_name is not None:
        obj["toolName"] = message.tool_name
    obj["contents"] = [_content_to_obj(c) for c in message.contents]
    if message.is_error is not None:
        obj["isError"] = message.is_error
    obj["attributes"] = dict(message.attributes)
    obj["type"] = "TOOL_EXECUTION_RESULT"
    return obj


def _custom_to_obj(message: CustomMessage) -> dict[str, Any]:
    return {"attributes": dict(message.attributes), "type": "CUSTOM"}


_ENCODERS: Final[Mapping[type, Callable[[Any], dict[str, Any]]]] = {
    SystemMessage: _system_to_obj,
    UserMessage: _user_to_obj,
    AiMessage: _ai_to_obj,
    ToolExecutionResultMessage: _tool_result_to_obj,
    CustomMessage: _custom_to_obj,
}


# message_to_json builds the text directly: one C call per string instead of building dicts
# and running json.dumps over them, which costs ~2 us more per message. message_to_obj is the
# reference; tests check that both agree.


def _content_json(content: Content) -> str:
    if type(content) is TextContent:
        return '{"text":' + _string(content.text) + ',"type":"TEXT"}'
    return _encode_java(_content_to_obj(content))


def _request_json(request: ToolExecutionRequest) -> str:
    fields = []
    if request.id is not None:
        fields.append('"id":' + _string(request.id))
    if request.name is not None:
        fields.append('"name":' + _string(request.name))
    if request.arguments is not None:
        fields.append('"arguments":' + _string(request.arguments))
    return "{" + ",".join(fields) + "}"


def _system_json(message: SystemMessage) -> str:
    return '{"text":' + _string(message.text) + ',"type":"SYSTEM"}'


def _user_json(message: UserMessage) -> str:
    head = '{"name":' + _string(message.name) + "," if message.name else "{"
    body = '"contents":[' + ",".join(map(_content_json, message.contents)) + "]"
    attributes = message.attributes
    if attributes:
        ordered = {key: attributes[key] for key in _user_attribute_order(tuple(attributes))}
        body += ',"attributes":' + _encode_java(ordered)
    return head + body + ',"type":"USER"}'


def _ai_json(message: AiMessage) -> str:
    fields = []
    if message.text is not None:
        fields.append('"text":' + _string(message.text))
    if message.thinking is not None:
        fields.append('"thinking":' + _string(message.thinking))
    requests = ",".join(map(_request_json, message.tool_execution_requests))
    fields.append('"toolExecutionRequests":[' + requests + "]")
    fields.append('"attributes":' + _attributes_json(message.attributes))
    fields.append('"type":"AI"')
    return "{" + ",".join(fields) + "}"


def _tool_result_json(message: ToolExecutionResultMessage) -> str:
    fields = []
    if message.id is not None:
        fields.append('"id":' + _string(message.id))
    if message.tool_name is not None:
        fields.append('"toolName":' + _string(message.tool_name))
    fields.append('"contents":[' + ",".join(map(_content_json, message.contents)) + "]")
    if message.is_error is not None:
        fields.append('"isError":' + ("true" if message.is_error else "false"))
    fields.append('"attributes":' + _attributes_json(message.attributes))
    fields.append('"type":"TOOL_EXECUTION_RESULT"')
    return "{" + ",".join(fields) + "}"


def _attributes_json(attributes: dict[str, Any]) -> str:
    return _encode_java(attributes) if attributes else "{}"


def _custom_json(message: CustomMessage) -> str:
    return '{"attributes":' + _attributes_json(message.attributes) + ',"type":"CUSTOM"}'


_JSON_WRITERS: Final[Mapping[type, Callable[[Any], str]]] = {
    SystemMessage: _system_json,
    UserMessage: _user_json,
    AiMessage: _ai_json,
    ToolExecutionResultMessage: _tool_result_json,
    CustomMessage: _custom_json,
}


def _not_a_message(operation: str, value: object) -> str:
    return (
        f"{operation}: expected a chat message ({', '.join(MESSAGE_TYPES)}), "
        f"got {type(value).__name__}"
    )


def message_to_obj(message: ChatMessage) -> dict[str, Any]:
    """The LangChain4j JSON object of ``message``, as plain dicts and lists, keys in order.

    ``json.dumps`` of it is valid LangChain4j JSON, but only `message_to_json` also formats
    floats and escapes control characters exactly like Jackson. Nested attribute values are
    shared with the message: do not mutate them.

    Raises:
        TypeError: If ``message`` is not a chat message.
    """
    encoder = _ENCODERS.get(type(message))
    if encoder is None:
        msg = _not_a_message("message_to_obj", message)
        raise TypeError(msg)
    return encoder(message)


def message_to_json(message: ChatMessage) -> str:
    """Serialize ``message`` exactly as LangChain4j's ``ChatMessageSerializer.messageToJson``.

    Raises:
        TypeError: If ``message`` is not a chat message.
    """
    writer = _JSON_WRITERS.get(type(message))
    if writer is None:
        msg = _not_a_message("message_to_json", message)
        raise TypeError(msg)
    return _finish(writer(message))


def messages_to_json(messages: Iterable[ChatMessage]) -> str:
    """Serialize a list exactly as LangChain4j's ``ChatMessageSerializer.messagesToJson``.

    Raises:
        TypeError: If an element is not a chat message.
    """
    return "[" + ",".join(map(message_to_json, messages)) + "]"


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


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
