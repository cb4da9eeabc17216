"""Chat messages, modelled on LangChain4j's message classes (their contents are in
:mod:`eventlog.contents`, the attribute rule in :mod:`eventlog.attributes`).

Every class is a frozen pydantic model that compares by value, like LangChain4j's ``equals``.
Sequences are stored as tuples. Each class has a read-only ``type`` giving LangChain4j's type
tag (``"USER"``, ``"AI"``, ...), which is what `eventlog.formats.lc4j_json` writes and reads.

Construction is on the hot path (every chat turn builds messages), so validation is limited
to what pydantic-core does natively plus a few cheap checks: non-blank system text, "text or
contents", "url or data" for media (:mod:`eventlog.contents`), and a walk over ``attributes``
that keeps them plain JSON (:mod:`eventlog.attributes`).

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

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, ClassVar, Final, Literal, TypeAlias

from pydantic import (
    BaseModel,
    Field,
    GetPydanticSchema,
    StrictBool,
    StrictStr,
    field_validator,
)
from pydantic_core import core_schema

from eventlog.attributes import MAX_ATTRIBUTE_DEPTH, check_attributes
from eventlog.contents import (
    CONTENT_TYPES,
    DETAIL_LEVELS,
    MODEL_CONFIG,
    AudioContent,
    Content,
    ContentItem,
    ContentType,
    DetailLevel,
    ImageContent,
    PdfFileContent,
    TextContent,
    VideoContent,
)
from eventlog.java import is_blank

# The content names and MAX_ATTRIBUTE_DEPTH are re-exported: this module was their home
# before eventlog.contents and eventlog.attributes, and code outside imports them from here.
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

    model_config = MODEL_CONFIG

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

    model_config = MODEL_CONFIG

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

    model_config = MODEL_CONFIG

    type: ClassVar[Literal["USER"]] = "USER"

    name: StrictStr | None = None
    contents: tuple[ContentItem, ...] = Field(min_length=1)
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
        check_attributes("UserMessage", attributes)
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

    model_config = MODEL_CONFIG

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
        check_attributes("AiMessage", attributes)
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

    model_config = MODEL_CONFIG

    type: ClassVar[Literal["TOOL_EXECUTION_RESULT"]] = "TOOL_EXECUTION_RESULT"

    id: StrictStr | None = None
    tool_name: StrictStr | None = None
    contents: tuple[ContentItem, ...] = Field(min_length=1)
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
        check_attributes("ToolExecutionResultMessage", attributes)
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

    model_config = MODEL_CONFIG

    type: ClassVar[Literal["CUSTOM"]] = "CUSTOM"

    attributes: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, attributes: Mapping[str, Any] | None = None) -> None:
        super().__init__(attributes={} if attributes is None else attributes)

    @field_validator("attributes")
    @classmethod
    def _json_attributes(cls, attributes: dict[str, Any]) -> dict[str, Any]:
        check_attributes("CustomMessage", attributes)
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
