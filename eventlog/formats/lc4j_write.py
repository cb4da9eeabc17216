"""LangChain4j JSON, writing: messages as ``JacksonChatMessageJsonCodec`` writes them, byte
for byte (the rules are in :mod:`eventlog.formats.lc4j_json`)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, Final

from eventlog.contents import (
    AudioContent,
    Content,
    ImageContent,
    PdfFileContent,
    TextContent,
    VideoContent,
)
from eventlog.java import double_to_string, java_hashmap_order
from eventlog.messages import (
    MESSAGE_TYPES,
    AiMessage,
    ChatMessage,
    CustomMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)

__all__ = ["message_to_json", "message_to_obj", "messages_to_json"]


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


@lru_cache(maxsize=1024)
def _user_attribute_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    # A conversation's messages tend to share one attribute key set: compute its order once.
    return tuple(java_hashmap_order(list(keys)))


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
