"""The message models: construction, LangChain4j validation rules, equality and immutability."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from hypothesis import given
from pydantic import ValidationError

from eventlog.attributes import MAX_ATTRIBUTE_DEPTH
from eventlog.contents import (
    CONTENT_TYPES,
    DETAIL_LEVELS,
    AudioContent,
    Content,
    ImageContent,
    PdfFileContent,
    TextContent,
    VideoContent,
)
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
from tests.strategies import chat_messages


def call(factory: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``factory`` with arguments its signature forbids (what these tests are about)."""
    return factory(*args, **kwargs)


# --------------------------------------------------------------------------------------------
# Construction
# --------------------------------------------------------------------------------------------


def test_user_message_from_text_is_one_text_content():
    message = UserMessage("hi")

    assert message.contents == (TextContent("hi"),)
    assert message.name is None
    assert message.attributes == {}
    assert message.text == "hi"
    assert message.has_single_text()
    assert message.type == "USER"


def test_user_message_with_name_and_contents():
    image = ImageContent("https://example.com/cat.png")
    message = UserMessage(name="Klaus", contents=[TextContent("look"), image])

    assert message.name == "Klaus"
    assert message.contents == (TextContent("look"), image)
    assert isinstance(message.contents, tuple)
    assert UserMessage("hi", name="Klaus").name == "Klaus"


def test_ai_message_forms():
    request = ToolExecutionRequest(id="1", name="calculator", arguments='{"a": 2}')

    assert AiMessage("t").text == "t"
    assert AiMessage("").text == ""
    assert AiMessage(tool_execution_requests=[request]).tool_execution_requests == (request,)
    empty = AiMessage()
    # Like LangChain4j's builder and {"type":"AI"}: everything may be absent.
    assert (empty.text, empty.thinking, empty.tool_execution_requests, empty.attributes) == (
        None,
        None,
        (),
        {},
    )
    assert AiMessage(tool_execution_requests=None).tool_execution_requests == ()


def test_has_tool_execution_requests_ignores_text():
    request = ToolExecutionRequest(name="weather")

    assert AiMessage("x", tool_execution_requests=[request]).has_tool_execution_requests()
    assert not AiMessage("x").has_tool_execution_requests()
    assert not AiMessage().has_tool_execution_requests()


def test_tool_result_from_text_and_from_request():
    request = ToolExecutionRequest(id="12345", name="weather", arguments="{}")

    by_args = ToolExecutionResultMessage("12345", "weather", "sunny")
    by_request = ToolExecutionResultMessage.from_request(request, "sunny")

    assert by_args == by_request
    assert by_args.contents == (TextContent("sunny"),)
    assert by_args.text == "sunny"
    assert by_args.is_error is None
    assert by_args.type == "TOOL_EXECUTION_RESULT"
    assert ToolExecutionResultMessage(text="x").id is None


def test_tool_result_with_contents_and_error_flag():
    image = ImageContent(base64_data="aGVsbG8=", mime_type="image/png")
    message = ToolExecutionResultMessage("1", "chart", contents=[image], is_error=False)

    assert message.contents == (image,)
    assert message.is_error is False
    assert not message.has_single_text()


def test_custom_and_system_messages():
    assert CustomMessage({"k1": "v1"}).attributes == {"k1": "v1"}
    assert CustomMessage().attributes == {}
    assert CustomMessage(None).type == "CUSTOM"
    assert SystemMessage("Be brief").text == "Be brief"
    assert SystemMessage(text="Be brief").type == "SYSTEM"


def test_type_tags_and_registries():
    assert {tag: cls.__name__ for tag, cls in MESSAGE_TYPES.items()} == {
        "SYSTEM": "SystemMessage",
        "USER": "UserMessage",
        "AI": "AiMessage",
        "TOOL_EXECUTION_RESULT": "ToolExecutionResultMessage",
        "CUSTOM": "CustomMessage",
    }
    assert {tag: cls.__name__ for tag, cls in CONTENT_TYPES.items()} == {
        "TEXT": "TextContent",
        "IMAGE": "ImageContent",
        "AUDIO": "AudioContent",
        "VIDEO": "VideoContent",
        "PDF": "PdfFileContent",
    }


def test_chat_message_union_works_with_isinstance():
    assert isinstance(AiMessage(), ChatMessage)
    assert isinstance(TextContent("x"), Content)
    assert not isinstance(TextContent("x"), ChatMessage)


# --------------------------------------------------------------------------------------------
# Contents
# --------------------------------------------------------------------------------------------


def test_text_content_may_be_empty_but_not_none():
    assert TextContent("").text == ""
    with pytest.raises(ValidationError, match="text"):
        TextContent(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("level", DETAIL_LEVELS)
def test_image_detail_levels(level):
    assert ImageContent("u", detail_level=level).detail_level == level


def test_image_defaults_to_low_detail_and_rejects_unknown_levels():
    assert ImageContent("u").detail_level == "LOW"
    with pytest.raises(ValidationError, match="detail_level"):
        ImageContent("u", detail_level="SUPER")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cls", "fields"),
    [
        (ImageContent, "url or base64_data"),
        (AudioContent, "url or base64_data or binary_data"),
        (VideoContent, "url or base64_data"),
        (PdfFileContent, "url or base64_data"),
    ],
)
def test_media_needs_a_source(cls, fields):
    with pytest.raises(ValueError, match=f"{cls.__name__} needs {fields}"):
        cls(mime_type="x/y")


def test_media_sources():
    assert AudioContent(binary_data=b"\x00\xff").binary_data == b"\x00\xff"
    assert VideoContent(base64_data="bXA0", mime_type="video/mp4").mime_type == "video/mp4"
    # LangChain4j's PdfFile builder defaults the MIME type.
    assert PdfFileContent("https://x/doc.pdf").mime_type == "application/pdf"
    assert PdfFileContent(base64_data="cGRm", mime_type="x/pdf").mime_type == "x/pdf"


def test_media_positional_arguments_stop_after_url():
    # LangChain4j's from(base64, mimeType) order would silently land in (url, base64_data).
    with pytest.raises(TypeError):
        ImageContent("aGVsbG8=", "image/png")  # type: ignore[call-arg]


# --------------------------------------------------------------------------------------------
# Validation: LangChain4j's rules and wrong types
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", " ", "\t\n\r ", "\x00", "\x1f\x20\x01"])
def test_system_message_rejects_blank_text(text):
    with pytest.raises(ValueError, match=r"SystemMessage\.text cannot be null or blank"):
        SystemMessage(text)


@pytest.mark.parametrize("text", ["\u00a0", "\u2003", "\u3000", " x "])
def test_system_message_blank_means_java_trim(text):
    # Java's String.trim() strips only chars <= U+0020, so these are not blank there either.
    assert SystemMessage(text).text == text


def test_system_message_rejects_none():
    with pytest.raises(ValidationError, match="text"):
        SystemMessage(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: call(SystemMessage, 3), ValidationError, "text"),
        (lambda: call(UserMessage, 3), TypeError, "UserMessage: text must be a str"),
        (lambda: call(UserMessage, contents=["x"]), ValidationError, "contents.0"),
        (lambda: call(UserMessage, contents=[{"text": "x"}]), ValidationError, "contents.0"),
        (lambda: call(UserMessage, contents="hi"), ValidationError, "contents"),
        (lambda: call(UserMessage, "hi", name=3), ValidationError, "name"),
        (lambda: call(UserMessage, "hi", attributes=[1]), ValidationError, "attributes"),
        (
            lambda: call(AiMessage, tool_execution_requests=[{"id": "1"}]),
            ValidationError,
            "tool_execution_requests.0",
        ),
        (lambda: call(AiMessage, 5), ValidationError, "text"),
        (lambda: call(AiMessage, thinking=b"x"), ValidationError, "thinking"),
        (lambda: call(ToolExecutionRequest, id=1), ValidationError, "id"),
        (lambda: call(ToolExecutionResultMessage, text=1), TypeError, "text must be a str"),
        (
            lambda: call(ToolExecutionResultMessage, text="x", is_error="yes"),
            ValidationError,
            "is_error",
        ),
        (
            lambda: call(ToolExecutionResultMessage, text="x", is_error=1),
            ValidationError,
            "is_error",
        ),
        (lambda: call(ImageContent, url=5), ValidationError, "url"),
        (lambda: call(AudioContent, binary_data="not bytes"), ValidationError, "binary_data"),
        (lambda: call(CustomMessage, attributes={"k": {1, 2}}), ValidationError, "set"),
    ],
)
def test_wrong_types_name_the_field(build, error, match):
    with pytest.raises(error, match=match):
        build()


@pytest.mark.parametrize(
    "build",
    [
        lambda: call(UserMessage, "hi", "Klaus"),
        lambda: call(AiMessage, "t", "thinking"),
        lambda: call(SystemMessage, "a", "b"),
        lambda: call(TextContent, "a", "b"),
        lambda: call(CustomMessage, {}, {}),
        lambda: call(ToolExecutionResultMessage, "1", "t", "x", [TextContent("y")]),
        lambda: call(ToolExecutionRequest, "1", "n", "{}", "extra"),
    ],
)
def test_extra_positional_arguments_are_type_errors(build):
    with pytest.raises(TypeError):
        build()


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (
            lambda: call(
                UserMessage,
            ),
            "contents cannot be null or empty",
        ),
        (lambda: call(UserMessage, contents=[]), "contents cannot be null or empty"),
        (lambda: call(UserMessage, "a", contents=[TextContent("b")]), "either text or contents"),
        (lambda: call(ToolExecutionResultMessage, "1", "t"), "contents cannot be null or empty"),
        (
            lambda: call(ToolExecutionResultMessage, "1", "t", "x", contents=[TextContent("y")]),
            "either text or contents",
        ),
    ],
)
def test_exactly_one_of_text_and_contents(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_text_with_empty_contents_uses_the_text():
    # LangChain4j's builder treats an empty contents list as absent.
    assert ToolExecutionResultMessage(text="x", contents=[]).text == "x"


@pytest.mark.parametrize(
    "contents",
    [
        [TextContent("a"), TextContent("b")],
        [ImageContent("https://x/y.png")],
    ],
)
def test_text_property_needs_exactly_one_text_content(contents):
    user = UserMessage(contents=contents)
    result = ToolExecutionResultMessage("1", "t", contents=contents)

    with pytest.raises(ValueError, match=r"UserMessage.text needs exactly one TextContent"):
        _ = user.text
    with pytest.raises(ValueError, match=r"ToolExecutionResultMessage.text needs exactly one"):
        _ = result.text


def test_from_request_checks_its_arguments():
    with pytest.raises(TypeError, match="request must be a ToolExecutionRequest"):
        ToolExecutionResultMessage.from_request({"id": "1"}, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="text must be a str"):
        ToolExecutionResultMessage.from_request(ToolExecutionRequest(), None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Attributes
# --------------------------------------------------------------------------------------------


def test_attributes_accept_nested_json():
    value = {"a": [1, 2.5, None, True, {"b": "ü"}], "": {}, "big": 10**40, "neg": -0.0}

    assert UserMessage("x", attributes=value).attributes == value
    assert AiMessage(attributes=value).attributes == value


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"t": (1, 2)}, r"attributes\['t'\] is a tuple .* use a list"),
        ({"s": {1}}, r"attributes\['s'\] is a set"),
        ({"n": math.nan}, r"attributes\['n'\] is nan; JSON has no NaN"),
        ({"i": [math.inf]}, r"attributes\['i'\]\[0\] is inf"),
        ({"o": object()}, "attributes values must|attribute values must"),
        ({"d": {1: "x"}}, r"attributes\['d'\] has key 1 of type int"),
        ({"b": b"x"}, r"is a bytes"),
        ({"huge": 10**1001}, "more than 1000 digits"),
    ],
)
def test_attributes_reject_non_json_values(value, match):
    for build in (
        lambda: UserMessage("x", attributes=value),
        lambda: AiMessage(attributes=value),
        lambda: ToolExecutionResultMessage(text="x", attributes=value),
        lambda: CustomMessage(value),
    ):
        with pytest.raises(ValueError, match=match):
            build()


def test_attribute_keys_must_be_strings():
    with pytest.raises(ValidationError, match="attributes"):
        CustomMessage({1: "x"})  # type: ignore[dict-item]


def test_attribute_nesting_is_limited():
    ok: Any = "leaf"
    for _ in range(MAX_ATTRIBUTE_DEPTH - 1):
        ok = [ok]
    assert CustomMessage({"deep": ok}).attributes["deep"] == ok

    too_deep: Any = "leaf"
    for _ in range(5000):  # deeper than Python's recursion limit: still a clean ValueError
        too_deep = {"x": too_deep}
    with pytest.raises(ValueError, match=f"nested more than {MAX_ATTRIBUTE_DEPTH} levels"):
        CustomMessage({"deep": too_deep})


def test_attributes_are_copied_at_construction():
    source = {"k": "v"}
    message = UserMessage("x", attributes=source)
    source["k"] = "changed"

    assert message.attributes == {"k": "v"}


# --------------------------------------------------------------------------------------------
# Equality, hashing, immutability
# --------------------------------------------------------------------------------------------


def test_equality_is_by_value():
    request = ToolExecutionRequest(id="1", name="n", arguments="{}")

    assert UserMessage("hi") == UserMessage(contents=[TextContent("hi")])
    assert UserMessage("hi") != UserMessage("hi", name="Klaus")
    assert UserMessage("hi", attributes={"a": 1}) != UserMessage("hi")
    assert AiMessage(tool_execution_requests=[request]) == AiMessage(
        tool_execution_requests=(ToolExecutionRequest("1", "n", "{}"),)
    )
    assert call(SystemMessage, "x") != UserMessage("x")
    assert AiMessage("x") != AiMessage("x", thinking="t")
    assert ToolExecutionResultMessage("1", "t", "x") != ToolExecutionResultMessage(
        "1", "t", "x", is_error=False
    )
    assert CustomMessage({"a": [1]}) == CustomMessage({"a": [1]})


def test_messages_are_frozen():
    message = UserMessage("hi")

    with pytest.raises(ValidationError, match="frozen"):
        message.name = "x"
    with pytest.raises(ValidationError, match="frozen"):
        TextContent("x").text = "y"
    with pytest.raises(AttributeError):
        message.contents.append(TextContent("y"))  # type: ignore[attr-defined]


def test_model_validate_goes_through_the_constructor():
    # pydantic routes model_validate through a custom __init__, so the same rules apply.
    data = {"name": None, "contents": [TextContent("x")], "attributes": {"a": 1}}
    assert UserMessage.model_validate(data) == UserMessage("x", attributes={"a": 1})
    with pytest.raises(TypeError, match="role"):
        UserMessage.model_validate({"contents": [TextContent("x")], "role": "user"})
    with pytest.raises(ValueError, match="contents"):
        UserMessage.model_validate({"contents": []})


@given(chat_messages())
def test_equal_messages_hash_equally(message):
    twin = copy.deepcopy(message)

    assert twin == message
    assert hash(twin) == hash(message)
    assert len({message, twin}) == 1


@given(chat_messages())
def test_type_matches_the_registry(message):
    assert MESSAGE_TYPES[message.type] is type(message)


def test_single_text_means_exactly_one_text_content():
    image = ImageContent(base64_data="aGVsbG8=", mime_type="image/png")
    one, two = [TextContent("a")], [TextContent("a"), TextContent("b")]
    assert UserMessage(contents=one).has_single_text()
    assert not UserMessage(contents=two).has_single_text()
    assert not UserMessage(contents=[image]).has_single_text()
    assert not UserMessage(contents=[TextContent("a"), image]).has_single_text()
    assert ToolExecutionResultMessage("1", "t", contents=one).has_single_text()
    assert not ToolExecutionResultMessage("1", "t", contents=two).has_single_text()
    assert not ToolExecutionResultMessage("1", "t", contents=[image]).has_single_text()
