"""Chat messages and their contents, modelled on LangChain4j's message classes.

Every class is a frozen pydantic model that compares by value, like LangChain4j's ``equals``.
Sequences are stored as tuples. Each class has a read-only ``type`` giving LangChain4j's type
tag (``"USER"``, ``"TEXT"``, ...), which is what `eventlog.formats.lc4j_json` writes and reads.

Construction is on the hot path (every chat turn builds messages), so validation is limited
to what pydantic-core does natively plus a few cheap checks: non-blank system text, "text or
contents", "url or data" for media, and a walk over ``attributes`` that keeps them plain JSON.

``model_dump()`` / ``model_validate()`` are not a wire format: nested contents and requests
must be instances (dicts are refused), and dumps carry no type tags. Use
`eventlog.formats.lc4j_json` to serialize.

Deliberate differences from LangChain4j 1.19.0:

* ``attributes`` must hold JSON values (``dict`` with ``str`` keys, ``list``, ``str``, ``int``,
  finite ``float``, ``bool``, ``None``), nested at most `MAX_ATTRIBUTE_DEPTH` deep. Java accepts
  any object; these are the values that survive a JSON round trip.
* The ``attributes`` dict is copied (shallowly) at construction but is still a ``dict``; treat
  it as read-only. Nested values are shared with the caller and are not copied.
* ``hash()`` ignores ``attributes`` (dicts are unhashable); equality still compares them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, ClassVar, Final, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetPydanticSchema,
    StrictBool,
    StrictBytes,
    StrictStr,
    field_validator,
    model_validator,
)
from pydantic_core import core_schema

from eventlog.java import is_blank

__all__ = [
    "CONTENT_TYPES",
    "DETAIL_LEVELS",
    "MAX_ATTRIBUTE_DEPTH",
    "MESSAGE_TYPES",
    "AiMessage",
    "AudioContent",
    "ChatMessage",
    "Content",
    "ContentType",
    "CustomMessage",
    "DetailLevel",
    "ImageContent",
    "MessageType",
    "PdfFileContent",
    "SystemMessage",
    "TextContent",
    "ToolExecutionRequest",
    "ToolExecutionResultMessage",
    "UserMessage",
    "VideoContent",
]

MessageType: TypeAlias = Literal["SYSTEM", "USER", "AI", "TOOL_EXECUTION_RESULT", "CUSTOM"]
ContentType: TypeAlias = Literal["TEXT", "IMAGE", "AUDIO", "VIDEO", "PDF"]
DetailLevel: TypeAlias = Literal["LOW", "MEDIUM", "HIGH", "ULTRA_HIGH", "AUTO"]

DETAIL_LEVELS: Final[tuple[DetailLevel, ...]] = ("LOW", "MEDIUM", "HIGH", "ULTRA_HIGH", "AUTO")
"""`ImageContent.detail_level` values, in LangChain4j's enum order."""

MAX_ATTRIBUTE_DEPTH: Final = 256
"""Deepest nesting of lists/dicts allowed in ``attributes``.

Python's JSON codec recurses once per level and shares the interpreter's recursion limit
(1000 frames) with its caller; Jackson 2.15+ refuses documents nested deeper than 1000.
256 is far beyond any real attribute and leaves room for the caller's stack.
"""

# Jackson 2.15+ refuses to read numbers longer than 1000 digits; 10**1000 < 2**3322.
_MAX_INT_BITS: Final = 3321

# defer_build: each class builds its validator on first use, not at import. Validation is
# unchanged; `import eventlog` only stops paying for classes a program never instantiates.
_CONFIG: Final = ConfigDict(frozen=True, extra="forbid", defer_build=True)

# A node of the attribute walk: (container, depth, parent node, key in parent). Paths for error
# messages are rebuilt from the parent chain only when something is wrong.
_Node: TypeAlias = tuple["dict[str, Any] | list[Any]", int, "_Node | None", object]


def _path(node: _Node | None, key: object = None, *, limit: int = 8) -> str:
    keys = [] if key is None else [key]
    while node is not None and node[2] is not None:
        keys.append(node[3])
        node = node[2]
    keys.reverse()
    shown = keys if len(keys) <= limit else [*keys[: limit // 2], ..., *keys[-limit // 2 :]]
    return "attributes" + "".join("[...]" if k is ... else f"[{k!r:.40}]" for k in shown)


def _check_attributes(owner: str, attributes: dict[str, Any]) -> None:
    """Raise ValueError unless ``attributes`` holds only JSON values (see module docstring).

    Iterative, so that a hostile nesting depth produces a ValueError, not a RecursionError.
    """
    if not attributes:
        return
    stack: list[_Node] = [(attributes, 1, None, None)]
    while stack:
        node = stack.pop()
        container, depth = node[0], node[1]
        if depth > MAX_ATTRIBUTE_DEPTH:
            msg = (
                f"{owner}.{_path(node)} is nested more than {MAX_ATTRIBUTE_DEPTH} levels deep; "
                "flatten the attribute value"
            )
            raise ValueError(msg)
        is_dict = isinstance(container, dict)
        items: Iterable[tuple[object, Any]] = (
            container.items() if isinstance(container, dict) else enumerate(container)
        )
        for key, item in items:
            if isinstance(item, dict | list):
                stack.append((item, depth + 1, node, key))
            elif not (item is None or isinstance(item, str | bool)):
                _check_json_scalar(owner, node, key, item)
            if is_dict and not isinstance(key, str):
                msg = (
                    f"{owner}.{_path(node)} has key {key!r:.60} of type {type(key).__name__}; "
                    "JSON object keys must be str"
                )
                raise ValueError(msg)


def _check_json_scalar(owner: str, node: _Node, key: object, value: object) -> None:
    if isinstance(value, int):
        if value.bit_length() > _MAX_INT_BITS:
            msg = (
                f"{owner}.{_path(node, key)} is an int with more than 1000 digits, which "
                "LangChain4j (Jackson) refuses to read; store it as a string"
            )
            raise ValueError(msg)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            msg = (
                f"{owner}.{_path(node, key)} is {value!r}; JSON has no NaN or infinity, "
                "store a string"
            )
            raise ValueError(msg)
        return
    remedy = "use a list" if isinstance(value, tuple) else "convert it to a JSON value"
    msg = (
        f"{owner}.{_path(node, key)} is a {type(value).__name__} ({value!r:.60}); attribute "
        f"values must be dict, list, str, int, float, bool or None; {remedy}"
    )
    raise ValueError(msg)


# --------------------------------------------------------------------------------------------
# Contents
# --------------------------------------------------------------------------------------------


class TextContent(BaseModel):
    """A piece of text in a user message or tool result (LangChain4j ``TextContent``).

    Args:
        text: The text; may be empty but not None.
    """

    model_config = _CONFIG

    type: ClassVar[Literal["TEXT"]] = "TEXT"

    text: StrictStr

    def __init__(self, text: str) -> None:
        super().__init__(text=text)


def _require_source(content: BaseModel, fields: tuple[str, ...]) -> None:
    if all(getattr(content, name) is None for name in fields):
        names = " or ".join(fields)
        msg = f"{type(content).__name__} needs {names}, but all are None; pass one of them"
        raise ValueError(msg)


class ImageContent(BaseModel):
    """An image, given by URL or by base64 data (LangChain4j ``ImageContent`` + ``Image``).

    LangChain4j nests the source fields in an ``Image``; here they are flat, and the JSON
    codec nests them under ``"image"``.

    Args:
        url: Where the image is.
        base64_data: The image bytes, base64-encoded.
        mime_type: E.g. ``"image/png"``.
        detail_level: One of `DETAIL_LEVELS`; LangChain4j's default is ``"LOW"``.
        revised_prompt: The prompt an image model actually used, if it rewrote it.

    Raises:
        ValueError: If neither ``url`` nor ``base64_data`` is given, or a field has the wrong type.
    """

    model_config = _CONFIG

    type: ClassVar[Literal["IMAGE"]] = "IMAGE"

    url: StrictStr | None = None
    base64_data: StrictStr | None = None
    mime_type: StrictStr | None = None
    detail_level: DetailLevel = "LOW"
    revised_prompt: StrictStr | None = None

    def __init__(
        self,
        url: str | None = None,
        *,
        base64_data: str | None = None,
        mime_type: str | None = None,
        detail_level: DetailLevel = "LOW",
        revised_prompt: str | None = None,
    ) -> None:
        super().__init__(
            url=url,
            base64_data=base64_data,
            mime_type=mime_type,
            detail_level=detail_level,
            revised_prompt=revised_prompt,
        )

    @model_validator(mode="after")
    def _has_source(self) -> ImageContent:
        _require_source(self, ("url", "base64_data"))
        return self


class AudioContent(BaseModel):
    """Audio, given by URL, base64 data or raw bytes (LangChain4j ``AudioContent`` + ``Audio``).

    Args:
        url: Where the audio is.
        base64_data: The audio bytes, base64-encoded.
        mime_type: E.g. ``"audio/mp3"``.
        binary_data: The raw audio bytes (JSON carries them base64-encoded as ``binaryData``).

    Raises:
        ValueError: If none of ``url``, ``base64_data``, ``binary_data`` is given.
    """

    model_config = _CONFIG

    type: ClassVar[Literal["AUDIO"]] = "AUDIO"

    url: StrictStr | None = None
    binary_data: StrictBytes | None = None
    base64_data: StrictStr | None = None
    mime_type: StrictStr | None = None

    def __init__(
        self,
        url: str | None = None,
        *,
        base64_data: str | None = None,
        mime_type: str | None = None,
        binary_data: bytes | None = None,
    ) -> None:
        super().__init__(
            url=url, binary_data=binary_data, base64_data=base64_data, mime_type=mime_type
        )

    @model_validator(mode="after")
    def _has_source(self) -> AudioContent:
        _require_source(self, ("url", "base64_data", "binary_data"))
        return self


class VideoContent(BaseModel):
    """A video, given by URL or base64 data (LangChain4j ``VideoContent`` + ``Video``).

    Args:
        url: Where the video is.
        base64_data: The video bytes, base64-encoded.
        mime_type: E.g. ``"video/mp4"``.

    Raises:
        ValueError: If neither ``url`` nor ``base64_data`` is given.
    """

    model_config = _CONFIG

    type: ClassVar[Literal["VIDEO"]] = "VIDEO"

    url: StrictStr | None = None
    base64_data: StrictStr | None = None
    mime_type: StrictStr | None = None

    def __init__(
        self,
        url: str | None = None,
        *,
        base64_data: str | None = None,
        mime_type: str | None = None,
    ) -> None:
        super().__init__(url=url, base64_data=base64_data, mime_type=mime_type)

    @model_validator(mode="after")
    def _has_source(self) -> VideoContent:
        _require_source(self, ("url", "base64_data"))
        return self


class PdfFileContent(BaseModel):
    """A PDF document, given by URL or base64 data (LangChain4j ``PdfFileContent`` + ``PdfFile``).

    Args:
        url: Where the PDF is.
        base64_data: The PDF bytes, base64-encoded.
        mime_type: Defaults to ``"application/pdf"`` when None, as LangChain4j's ``PdfFile``
            builder does; so ``PdfFileContent(url=u).mime_type == "application/pdf"``.

    Raises:
        ValueError: If neither ``url`` nor ``base64_data`` is given.
    """

    model_config = _CONFIG

    type: ClassVar[Literal["PDF"]] = "PDF"

    url: StrictStr | None = None
    base64_data: StrictStr | None = None
    mime_type: StrictStr = "application/pdf"

    def __init__(
        self,
        url: str | None = None,
        *,
        base64_data: str | None = None,
        mime_type: str | None = None,
    ) -> None:
        super().__init__(
            url=url,
            base64_data=base64_data,
            mime_type="application/pdf" if mime_type is None else mime_type,
        )

    @model_validator(mode="after")
    def _has_source(self) -> PdfFileContent:
        _require_source(self, ("url", "base64_data"))
        return self


Content: TypeAlias = TextContent | ImageContent | AudioContent | VideoContent | PdfFileContent
"""Any content of a `UserMessage` or `ToolExecutionResultMessage`."""

CONTENT_TYPES: Final[Mapping[str, type[Content]]] = {
    cls.type: cls for cls in (TextContent, ImageContent, AudioContent, VideoContent, PdfFileContent)
}
"""LangChain4j content type tag -> class."""

_CONTENT_CLASSES: Final = tuple(CONTENT_TYPES.values())

# An isinstance check done by pydantic-core: fast, and refuses dicts and strings that a plain
# union would try to coerce (a dict would silently become *some* content class).
_ContentItem = Annotated[
    Content,
    GetPydanticSchema(lambda _tp, _handler: core_schema.is_instance_schema(_CONTENT_CLASSES)),
]


# --------------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------------


class ToolExecutionRequest(BaseModel):
    """A tool call requested by the model (LangChain4j ``ToolExecutionRequest``).

    Args:
        id: The provider's id for this call; results refer back to it.
        name: The tool's name.
        arguments: The arguments as the model produced them, normally a JSON object as text.
    """

    model_config = _CONFIG

    id: StrictStr | None = None
    name: StrictStr | None = None
    arguments: StrictStr | None = None

    def __init__(
        self, id: str | None = None, name: str | None = None, arguments: str | None = None
    ) -> None:
        super().__init__(id=id, name=name, arguments=arguments)


_RequestItem = Annotated[
    ToolExecutionRequest,
    GetPydanticSchema(lambda _tp, _handler: core_schema.is_instance_schema(ToolExecutionRequest)),
]


def _single_text(owner: str, contents: tuple[Content, ...]) -> str:
    if len(contents) == 1 and type(contents[0]) is TextContent:
        return contents[0].text
    kinds = ", ".join(c.type for c in contents)
    msg = (
        f"{owner}.text needs exactly one TextContent, but contents are [{kinds}]; "
        "read .contents instead"
    )
    raise ValueError(msg)


def _text_or_contents(
    owner: str, text: object, contents: Iterable[Content] | None
) -> Iterable[Content]:
    """Resolve LangChain4j's "exactly one of text / non-empty contents" rule."""
    if text is not None:
        if not isinstance(text, str):
            msg = f"{owner}: text must be a str, got {type(text).__name__} {text!r:.60}"
            raise TypeError(msg)
        if contents:
            msg = f"{owner}: pass either text or contents, not both (text={text!r:.60})"
            raise ValueError(msg)
        return (TextContent(text),)
    if not contents:
        msg = f"{owner}: contents cannot be null or empty; pass text=... or contents=[...]"
        raise ValueError(msg)
    return contents


class SystemMessage(BaseModel):
    """Instructions from the developer (LangChain4j ``SystemMessage``).

    Args:
        text: The instructions. Must not be blank in Java's sense: at least one character
            above U+0020.

    Raises:
        ValueError: If ``text`` is blank or not a str.
    """

    model_config = _CONFIG

    type: ClassVar[Literal["SYSTEM"]] = "SYSTEM"

    text: StrictStr

    def __init__(self, text: str) -> None:
        super().__init__(text=text)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if is_blank(text):
            msg = (
                f"SystemMessage.text cannot be null or blank, got {text!r:.60}; "
                "pass the instructions"
            )
            raise ValueError(msg)
        return text


class UserMessage(BaseModel):
    """A message from the user (LangChain4j ``UserMessage``).

    ``UserMessage("hi")``, ``UserMessage("hi", name="Klaus")`` and
    ``UserMessage(contents=[TextContent("look"), ImageContent("https://...")])``.

    Args:
        text: Shorthand for ``contents=[TextContent(text)]``.
        name: The user's name, if the model should see one.
        contents: The message's contents; exactly one of ``text`` and non-empty ``contents``.
        attributes: JSON data stored with the message but never sent to the model.

    Raises:
        ValueError: If both or neither of ``text`` and ``contents`` are given, or an attribute is
            not a JSON value.
        TypeError: If ``text`` is not a str.
    """

    model_config = _CONFIG

    type: ClassVar[Literal["USER"]] = "USER"

    name: StrictStr | None = None
    contents: tuple[_ContentItem, ...] = Field(min_length=1)
    attributes: dict[str, Any] = Field(default_factory=dict)

    def __init__(
        self,
        text: str | None = None,
        *,
        name: str | None = None,
        contents: Iterable[Content] | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            name=name,
            contents=_text_or_contents("UserMessage", text, contents),
            attributes={} if attributes is None else attributes,
        )

    @field_validator("attributes")
    @classmethod
    def _json_attributes(cls, attributes: dict[str, Any]) -> dict[str, Any]:
        _check_attributes("UserMessage", attributes)
        return attributes

    @property
    def text(self) -> str:
        """The text, when ``contents`` is exactly one `TextContent`.

        Raises:
            ValueError: If there are several contents or the only one is not text.
        """
        return _single_text("UserMessage", self.contents)

    def has_single_text(self) -> bool:
        """Whether ``contents`` is exactly one `TextContent` (so `text` will not raise)."""
        return len(self.contents) == 1 and type(self.contents[0]) is TextContent

    def __hash__(self) -> int:
        # Leaving the (unhashable) attributes out keeps hash consistent with ==.
        return hash((self.type, self.name, self.contents))


class AiMessage(BaseModel):
    """A message from the model (LangChain4j ``AiMessage``).

    ``AiMessage("text")``, ``AiMessage(tool_execution_requests=[request])``; ``AiMessage()`` with
    everything empty is allowed, like LangChain4j's builder and ``{"type":"AI"}``.

    Args:
        text: The answer text, if any (may be empty).
        thinking: The model's reasoning text, if the provider returns it.
        tool_execution_requests: Tool calls the model asks for.
        attributes: JSON data stored with the message, typically provider-specific.

    Raises:
        ValueError: If a request is not a `ToolExecutionRequest` or an attribute is not JSON.
    """

    model_config = _CONFIG

    type: ClassVar[Literal["AI"]] = "AI"

    text: StrictStr | None = None
    thinking: StrictStr | None = None
    tool_execution_requests: tuple[_RequestItem, ...] = ()
    attributes: dict[str, Any] = Field(default_factory=dict)

    def __init__(
        self,
        text: str | None = None,
        *,
        thinking: str | None = None,
        tool_execution_requests: Iterable[ToolExecutionRequest] | None = (),
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            text=text,
            thinking=thinking,
            tool_execution_requests=()
            if tool_execution_requests is None
            else tool_execution_requests,
            attributes={} if attributes is None else attributes,
        )

    @field_validator("attributes")
    @classmethod
    def _json_attributes(cls, attributes: dict[str, Any]) -> dict[str, Any]:
        _check_attributes("AiMessage", attributes)
        return attributes

    def has_tool_execution_requests(self) -> bool:
        """Whether the model asked for at least one tool call (text may be present too)."""
        return bool(self.tool_execution_requests)

    def __hash__(self) -> int:
        return hash((self.type, self.text, self.thinking, self.tool_execution_requests))


class ToolExecutionResultMessage(BaseModel):
    """The result of one tool call (LangChain4j ``ToolExecutionResultMessage``).

    ``ToolExecutionResultMessage("call-1", "weather", "sunny")``, or with
    ``contents=[...]`` for non-text results.

    Args:
        id: The id of the `ToolExecutionRequest` this answers.
        tool_name: The tool's name.
        text: Shorthand for ``contents=[TextContent(text)]``.
        contents: The result; exactly one of ``text`` and non-empty ``contents``.
        is_error: Whether the tool failed; None when unknown.
        attributes: JSON data stored with the message but never sent to the model.

    Raises:
        ValueError: If both or neither of ``text`` and ``contents`` are given, or an attribute is
            not a JSON value.
        TypeError: If ``text`` is not a str.
    """

    model_config = _CONFIG

    type: ClassVar[Literal["TOOL_EXECUTION_RESULT"]] = "TOOL_EXECUTION_RESULT"

    id: StrictStr | None = None
    tool_name: StrictStr | None = None
    contents: tuple[_ContentItem, ...] = Field(min_length=1)
    is_error: StrictBool | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)

    def __init__(
        self,
        id: str | None = None,
        tool_name: str | None = None,
        text: str | None = None,
        *,
        contents: Iterable[Content] | None = None,
        is_error: bool | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            id=id,
            tool_name=tool_name,
            contents=_text_or_contents("ToolExecutionResultMessage", text, contents),
            is_error=is_error,
            attributes={} if attributes is None else attributes,
        )

    @classmethod
    def from_request(cls, request: ToolExecutionRequest, text: str) -> ToolExecutionResultMessage:
        """Answer ``request`` with ``text``, copying its id and name.

        Raises:
            TypeError: If ``request`` is not a `ToolExecutionRequest` or ``text`` is not a str.
        """
        if not isinstance(request, ToolExecutionRequest):
            msg = (
                "ToolExecutionResultMessage.from_request: request must be a "
                f"ToolExecutionRequest, got {type(request).__name__}"
            )
            raise TypeError(msg)
        if not isinstance(text, str):
            msg = (
                "ToolExecutionResultMessage.from_request: text must be a str, "
                f"got {type(text).__name__}; pass contents=[...] to the constructor instead"
            )
            raise TypeError(msg)
        return cls(request.id, request.name, text)

    @field_validator("attributes")
    @classmethod
    def _json_attributes(cls, attributes: dict[str, Any]) -> dict[str, Any]:
        _check_attributes("ToolExecutionResultMessage", attributes)
        return attributes

    @property
    def text(self) -> str:
        """The result text, when ``contents`` is exactly one `TextContent`.

        Raises:
            ValueError: If there are several contents or the only one is not text.
        """
        return _single_text("ToolExecutionResultMessage", self.contents)

    def has_single_text(self) -> bool:
        """Whether ``contents`` is exactly one `TextContent` (so `text` will not raise)."""
        return len(self.contents) == 1 and type(self.contents[0]) is TextContent

    def __hash__(self) -> int:
        return hash((self.type, self.id, self.tool_name, self.contents, self.is_error))


class CustomMessage(BaseModel):
    """A message made only of attributes, for providers with custom roles (LangChain4j
    ``CustomMessage``).

    Args:
        attributes: The message's JSON data; None means empty.

    Raises:
        ValueError: If an attribute is not a JSON value.
    """

    model_config = _CONFIG

    type: ClassVar[Literal["CUSTOM"]] = "CUSTOM"

    attributes: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, attributes: Mapping[str, Any] | None = None) -> None:
        super().__init__(attributes={} if attributes is None else attributes)

    @field_validator("attributes")
    @classmethod
    def _json_attributes(cls, attributes: dict[str, Any]) -> dict[str, Any]:
        _check_attributes("CustomMessage", attributes)
        return attributes

    def __hash__(self) -> int:
        return hash((self.type, len(self.attributes)))


ChatMessage: TypeAlias = (
    SystemMessage | UserMessage | AiMessage | ToolExecutionResultMessage | CustomMessage
)
"""Any chat message; usable with ``isinstance``."""

MESSAGE_TYPES: Final[Mapping[str, type[ChatMessage]]] = {
    cls.type: cls
    for cls in (SystemMessage, UserMessage, AiMessage, ToolExecutionResultMessage, CustomMessage)
}
"""LangChain4j message type tag -> class, in LangChain4j's ``ChatMessageType`` order."""
