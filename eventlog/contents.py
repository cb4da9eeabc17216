"""The contents of chat messages (text, image, audio, video, PDF), modelled on LangChain4j's
content classes: frozen pydantic models that compare by value, each with a read-only ``type``
giving LangChain4j's type tag (``"TEXT"``, ``"IMAGE"``, ...). Media need a ``url`` or data.
The messages that carry them are in :mod:`eventlog.messages`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Final, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    GetPydanticSchema,
    StrictBytes,
    StrictStr,
    model_validator,
)
from pydantic_core import core_schema

__all__ = [
    "CONTENT_TYPES",
    "DETAIL_LEVELS",
    "AudioContent",
    "Content",
    "ContentItem",
    "ContentType",
    "DetailLevel",
    "ImageContent",
    "PdfFileContent",
    "TextContent",
    "VideoContent",
]

ContentType: TypeAlias = Literal["TEXT", "IMAGE", "AUDIO", "VIDEO", "PDF"]
DetailLevel: TypeAlias = Literal["LOW", "MEDIUM", "HIGH", "ULTRA_HIGH", "AUTO"]

DETAIL_LEVELS: Final[tuple[DetailLevel, ...]] = ("LOW", "MEDIUM", "HIGH", "ULTRA_HIGH", "AUTO")
"""`ImageContent.detail_level` values, in LangChain4j's enum order."""

# The config of every message and content model. defer_build: each class builds its
# validator on first use, not at import. Validation is unchanged; `import eventlog` only stops
# paying for classes a program never instantiates.
MODEL_CONFIG: Final = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class TextContent(BaseModel):
    """A piece of text in a user message or tool result (LangChain4j ``TextContent``).

    Args:
        text: The text; may be empty but not None.
    """

    model_config = MODEL_CONFIG

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

    model_config = MODEL_CONFIG

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

    model_config = MODEL_CONFIG

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

    model_config = MODEL_CONFIG

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

    model_config = MODEL_CONFIG

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
ContentItem = Annotated[
    Content,
    GetPydanticSchema(lambda _tp, _handler: core_schema.is_instance_schema(_CONTENT_CLASSES)),
]
