"""LangChain4j JSON interop: byte-identical output, tolerant-but-strict input.

Expected strings come from LangChain4j's ``ChatMessageSerializerTest`` (reference §3.1/§3.2).
The Java-emulation tables (``HashMap`` order, ``Double.toString``) were produced by running
OpenJDK 17 and Temurin 25 with Jackson 2.14 on the same inputs.
"""

from __future__ import annotations

import enum
import json
import struct
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog.contents import AudioContent, ImageContent, PdfFileContent, TextContent, VideoContent
from eventlog.formats.lc4j_json import (
    message_from_json,
    message_from_obj,
    message_to_json,
    message_to_obj,
    messages_from_json,
    messages_to_json,
)
from eventlog.java import double_to_string, java_hashmap_order
from eventlog.messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from tests.strategies import chat_messages, conversations, json_values

_WEATHER = ToolExecutionRequest(name="weather", arguments='{"city": "Munich"}')
_KLAUS = {"name": "Klaus", "age": 42, "extra": ["one", "two"]}

# Reference §3.1: every row of ChatMessageSerializerTest, plus §3.2's list case.
SERIALIZER_CASES: list[tuple[str, ChatMessage, str]] = [
    ("system", SystemMessage("hello"), '{"text":"hello","type":"SYSTEM"}'),
    (
        "user",
        UserMessage("hello"),
        '{"contents":[{"text":"hello","type":"TEXT"}],"type":"USER"}',
    ),
    (
        "user-named",
        UserMessage("hello", name="Klaus"),
        '{"name":"Klaus","contents":[{"text":"hello","type":"TEXT"}],"type":"USER"}',
    ),
    (
        "user-image-url",
        UserMessage(contents=[ImageContent("http://image.url")]),
        '{"contents":[{"image":{"url":"http://image.url"},"detailLevel":"LOW","type":"IMAGE"}],'
        '"type":"USER"}',
    ),
    (
        "user-image-data",
        UserMessage(contents=[ImageContent(base64_data="aGVsbG8=", mime_type="image/png")]),
        '{"contents":[{"image":{"base64Data":"aGVsbG8=","mimeType":"image/png"},'
        '"detailLevel":"LOW","type":"IMAGE"}],"type":"USER"}',
    ),
    (
        "user-audio",
        UserMessage(contents=[AudioContent(base64_data="bXAz", mime_type="audio/mp3")]),
        '{"contents":[{"audio":{"base64Data":"bXAz","mimeType":"audio/mp3"},"type":"AUDIO"}],'
        '"type":"USER"}',
    ),
    (
        "user-video",
        UserMessage(contents=[VideoContent(base64_data="bXA0", mime_type="video/mp4")]),
        '{"contents":[{"video":{"base64Data":"bXA0","mimeType":"video/mp4"},"type":"VIDEO"}],'
        '"type":"USER"}',
    ),
    (
        "user-pdf",
        UserMessage(contents=[PdfFileContent(base64_data="cGRm", mime_type="application/pdf")]),
        '{"contents":[{"pdfFile":{"base64Data":"cGRm","mimeType":"application/pdf"},'
        '"type":"PDF"}],"type":"USER"}',
    ),
    (
        "user-attributes",
        UserMessage("hello", attributes=_KLAUS),
        '{"contents":[{"text":"hello","type":"TEXT"}],'
        '"attributes":{"name":"Klaus","age":42,"extra":["one","two"]},"type":"USER"}',
    ),
    (
        "ai",
        AiMessage("hello"),
        '{"text":"hello","toolExecutionRequests":[],"attributes":{},"type":"AI"}',
    ),
    (
        "ai-request",
        AiMessage(tool_execution_requests=[_WEATHER]),
        '{"toolExecutionRequests":[{"name":"weather","arguments":"{\\"city\\": \\"Munich\\"}"}],'
        '"attributes":{},"type":"AI"}',
    ),
    (
        "ai-everything",
        AiMessage(
            "test-text",
            thinking="test-thinking",
            tool_execution_requests=[_WEATHER],
            attributes=_KLAUS,
        ),
        '{"text":"test-text","thinking":"test-thinking","toolExecutionRequests":'
        '[{"name":"weather","arguments":"{\\"city\\": \\"Munich\\"}"}],'
        '"attributes":{"name":"Klaus","age":42,"extra":["one","two"]},"type":"AI"}',
    ),
    (
        "tool-result",
        ToolExecutionResultMessage("12345", "weather", "sunny"),
        '{"id":"12345","toolName":"weather","contents":[{"text":"sunny","type":"TEXT"}],'
        '"attributes":{},"type":"TOOL_EXECUTION_RESULT"}',
    ),
    (
        "tool-result-error",
        ToolExecutionResultMessage("12345", "weather", "error occurred", is_error=True),
        '{"id":"12345","toolName":"weather","contents":[{"text":"error occurred","type":"TEXT"}],'
        '"isError":true,"attributes":{},"type":"TOOL_EXECUTION_RESULT"}',
    ),
    (
        "tool-result-no-ids",
        ToolExecutionResultMessage(None, None, "sunny"),
        '{"contents":[{"text":"sunny","type":"TEXT"}],"attributes":{},'
        '"type":"TOOL_EXECUTION_RESULT"}',
    ),
    (
        "tool-result-empty-ids",
        ToolExecutionResultMessage("", "", "sunny"),
        '{"id":"","toolName":"","contents":[{"text":"sunny","type":"TEXT"}],"attributes":{},'
        '"type":"TOOL_EXECUTION_RESULT"}',
    ),
    (
        "tool-result-attributes",
        ToolExecutionResultMessage(
            "67890",
            "tool_search_tool",
            "Tools found: weather, time",
            attributes={"found_tools": ["weather", "time"]},
        ),
        '{"id":"67890","toolName":"tool_search_tool","contents":[{"text":'
        '"Tools found: weather, time","type":"TEXT"}],'
        '"attributes":{"found_tools":["weather","time"]},"type":"TOOL_EXECUTION_RESULT"}',
    ),
    (
        "custom",
        CustomMessage({"k1": "v1", "k2": "v2"}),
        '{"attributes":{"k1":"v1","k2":"v2"},"type":"CUSTOM"}',
    ),
]


@pytest.mark.parametrize(
    ("message", "expected"),
    [pytest.param(m, j, id=name) for name, m, j in SERIALIZER_CASES],
)
def test_serializer_output_is_byte_identical(message, expected):
    assert message_to_json(message) == expected
    assert message_from_json(expected) == message
    assert message_from_obj(json.loads(expected)) == message
    assert message_to_obj(message) == json.loads(expected)


def test_messages_to_json_of_one_user_message():
    expected = '[{"contents":[{"text":"hello","type":"TEXT"}],"type":"USER"}]'

    assert messages_to_json([UserMessage("hello")]) == expected
    assert messages_from_json(expected) == [UserMessage("hello")]


def test_conversation_example():
    # Reference §3.3: one conversation with a tool round trip.
    conversation: list[ChatMessage] = [
        SystemMessage("Use calculator for math questions"),
        UserMessage("How much is 2+2?"),
        AiMessage(
            tool_execution_requests=[
                ToolExecutionRequest("1", "calculator", '{ "a": 2, "b": 2 }'),
            ]
        ),
        ToolExecutionResultMessage("1", "calculator", "4"),
        AiMessage("2 + 2 = 4"),
    ]
    expected = (
        '[{"text":"Use calculator for math questions","type":"SYSTEM"},'
        '{"contents":[{"text":"How much is 2+2?","type":"TEXT"}],"type":"USER"},'
        '{"toolExecutionRequests":[{"id":"1","name":"calculator",'
        '"arguments":"{ \\"a\\": 2, \\"b\\": 2 }"}],"attributes":{},"type":"AI"},'
        '{"id":"1","toolName":"calculator","contents":[{"text":"4","type":"TEXT"}],'
        '"attributes":{},"type":"TOOL_EXECUTION_RESULT"},'
        '{"text":"2 + 2 = 4","toolExecutionRequests":[],"attributes":{},"type":"AI"}]'
    )

    assert messages_to_json(conversation) == expected
    assert messages_from_json(expected) == conversation


# --------------------------------------------------------------------------------------------
# Reference §3.2: deserialization rules
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [None, "null", b"null", "[]", " [ ] "])
def test_empty_message_lists(text):
    assert messages_from_json(text) == []
    assert messages_to_json([]) == "[]"


def test_user_message_without_attributes_reads_as_empty_attributes():
    message = message_from_json('{"contents":[{"text":"hello","type":"TEXT"}],"type":"USER"}')

    assert message == UserMessage("hello")
    assert isinstance(message, UserMessage)
    assert message.name is None
    assert message.attributes == {}


def test_empty_ai_message():
    assert message_from_json('{"type":"AI"}') == AiMessage()


@pytest.mark.parametrize(
    "legacy",
    [
        '{"id":"12345","toolName":"weather","text":"sunny","type":"TOOL_EXECUTION_RESULT"}',
        '{"id":"12345","toolName":"weather","text":"sunny","attributes":{},'
        '"type":"TOOL_EXECUTION_RESULT"}',
    ],
)
def test_legacy_tool_result_with_text(legacy):
    message = message_from_json(legacy)

    assert message == ToolExecutionResultMessage("12345", "weather", "sunny")
    assert isinstance(message, ToolExecutionResultMessage)
    assert message.text == "sunny"
    assert message.is_error is None
    assert message.attributes == {}


def test_explicit_nulls_read_like_absent_fields():
    assert (
        message_from_json(
            '{"text":null,"thinking":null,"toolExecutionRequests":null,"attributes":null,"type":"AI"}'
        )
        == AiMessage()
    )
    assert message_from_json(
        '{"name":null,"contents":[{"text":"x","type":"TEXT"}],"attributes":null,"type":"USER"}'
    ) == UserMessage("x")
    assert message_from_json('{"attributes":null,"type":"CUSTOM"}') == CustomMessage()
    assert message_from_json(
        '{"id":null,"toolName":null,"text":"x","contents":[],"isError":null,'
        '"type":"TOOL_EXECUTION_RESULT"}'
    ) == ToolExecutionResultMessage(text="x")


def test_fields_may_come_in_any_order():
    text = '{"type":"USER","attributes":{"a":1},"contents":[{"type":"TEXT","text":"x"}]}'

    assert message_from_json(text) == UserMessage("x", attributes={"a": 1})
    assert message_from_json(text.encode()) == UserMessage("x", attributes={"a": 1})


def test_media_round_trip_and_field_order():
    message = UserMessage(
        contents=[
            ImageContent(
                "u", base64_data="b", mime_type="m", detail_level="AUTO", revised_prompt="p"
            ),
            AudioContent("u", base64_data="b", mime_type="m", binary_data=b"\x00\xfe\xff"),
            VideoContent("u", base64_data="b", mime_type="m"),
            PdfFileContent("u"),
        ]
    )
    expected = (
        '{"contents":['
        '{"image":{"url":"u","base64Data":"b","mimeType":"m","revisedPrompt":"p"},'
        '"detailLevel":"AUTO","type":"IMAGE"},'
        '{"audio":{"url":"u","binaryData":"AP7/","base64Data":"b","mimeType":"m"},'
        '"type":"AUDIO"},'
        '{"video":{"url":"u","base64Data":"b","mimeType":"m"},"type":"VIDEO"},'
        '{"pdfFile":{"url":"u","mimeType":"application/pdf"},"type":"PDF"}'
        '],"type":"USER"}'
    )

    assert message_to_json(message) == expected
    assert message_from_json(expected) == message


def test_lenient_reading_where_java_is_lenient_or_has_a_default():
    # A missing detailLevel is LOW; a PDF without a MIME type is application/pdf; Jackson
    # skips whitespace inside base64.
    text = (
        '{"contents":[{"image":{"url":"u"},"type":"IMAGE"},'
        '{"pdfFile":{"url":"u"},"type":"PDF"},'
        '{"audio":{"binaryData":"AP7/\\n AA=="},"type":"AUDIO"}],"type":"USER"}'
    )

    assert message_from_json(text) == UserMessage(
        contents=[
            ImageContent("u"),
            PdfFileContent("u", mime_type="application/pdf"),
            AudioContent(binary_data=b"\x00\xfe\xff\x00"),
        ]
    )


def test_empty_user_name_is_dropped_like_jackson_non_empty():
    # LangChain4j writes UserMessage with NON_EMPTY, so name "" disappears (Java does the same).
    message = UserMessage("hi", name="")

    assert message_to_json(message) == message_to_json(UserMessage("hi"))
    assert message_from_json(message_to_json(message)).name is None


# --------------------------------------------------------------------------------------------
# Jackson's string escaping and number formatting
# --------------------------------------------------------------------------------------------


def test_control_characters_are_escaped_like_jackson():
    text = "".join(map(chr, range(0x20))) + '"\\/\x7f'
    expected = (
        '"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000B\\f\\r'
        "\\u000E\\u000F\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019"
        '\\u001A\\u001B\\u001C\\u001D\\u001E\\u001F\\"\\\\/\x7f"'
    )

    assert message_to_json(SystemMessage(text)) == '{"text":' + expected + ',"type":"SYSTEM"}'
    assert message_from_json(message_to_json(SystemMessage(text))) == SystemMessage(text)


@pytest.mark.parametrize(
    "text",
    [
        "literal \\u001f stays lower case",
        "\\\\u001f",
        "\\\x1f",
        "\x1f\\u001f\\\x1f",
    ],
)
def test_only_real_escapes_get_upper_case_hex(text):
    written = message_to_json(UserMessage(text, attributes={"k\x1b": text}))

    assert written.count("\\u001F") == 2 * text.count("\x1f")
    assert written.count("\\u001B") == 1
    assert message_from_json(written) == UserMessage(text, attributes={"k\x1b": text})


def test_non_ascii_is_written_raw():
    text = "Grüße 東京 😀 \u2028\u2029 \ufeff"

    assert message_to_json(SystemMessage(text)) == '{"text":"' + text + '","type":"SYSTEM"}'


# (value, JDK 19+ Double.toString) from Temurin 25.
JAVA_DOUBLES = [
    (1e20, "1.0E20"),
    (1e-5, "1.0E-5"),
    (2.5, "2.5"),
    (1e7, "1.0E7"),
    (9999999.999999998, "9999999.999999998"),
    (1e-3, "0.001"),
    (9.99e-4, "9.99E-4"),
    (0.0009999999999999998, "9.999999999999998E-4"),
    (5e-324, "4.9E-324"),
    (1e-323, "9.9E-324"),
    (1.5e-323, "1.5E-323"),
    (2.2250738585072014e-308, "2.2250738585072014E-308"),
    (2.225073858507201e-308, "2.225073858507201E-308"),
    (1e23, "1.0E23"),
    (2e23, "2.0E23"),
    (2.82879384806159e17, "2.82879384806159E17"),
    (1.7976931348623157e308, "1.7976931348623157E308"),
    (0.1, "0.1"),
    (100.0, "100.0"),
    (-0.0, "-0.0"),
    (0.0, "0.0"),
    (123456789.0, "1.23456789E8"),
    (1234567.125, "1234567.125"),
    (-3.14159, "-3.14159"),
    (4.35, "4.35"),
    (0.30000000000000004, "0.30000000000000004"),
    (1e16, "1.0E16"),
    (1.0000000000000002, "1.0000000000000002"),
    (5e-5, "5.0E-5"),
    (6.02214076e23, "6.02214076E23"),
]


@pytest.mark.parametrize(("value", "expected"), JAVA_DOUBLES)
def test_floats_are_written_like_java_double_to_string(value, expected):
    assert double_to_string(value) == expected
    message = CustomMessage({"v": value, "list": [value, 1, True, None]})
    written = message_to_json(message)

    assert written == (
        f'{{"attributes":{{"v":{expected},"list":[{expected},1,true,null]}},"type":"CUSTOM"}}'
    )
    assert message_from_json(written) == message


@pytest.mark.parametrize(
    ("value", "expected"),
    [(float("inf"), "Infinity"), (float("-inf"), "-Infinity"), (float("nan"), "NaN")],
)
def test_non_finite_doubles_print_like_java(value, expected):
    # Messages refuse them, but the token estimator meets 1e999 in tool arguments.
    assert double_to_string(value) == expected


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_java_double_reads_back_as_the_same_float(value):
    written = double_to_string(value)

    assert float(written) == value
    assert struct.pack("<d", float(written)) == struct.pack("<d", value)


def test_integers_and_booleans():
    attributes = {"i": 12345678901234567890123, "neg": -7, "t": True, "f": False, "n": None}

    assert message_to_json(CustomMessage(attributes)) == (
        '{"attributes":{"i":12345678901234567890123,"neg":-7,"t":true,"f":false,"n":null},'
        '"type":"CUSTOM"}'
    )


# --------------------------------------------------------------------------------------------
# UserMessage.attributes: java.util.HashMap iteration order
# --------------------------------------------------------------------------------------------

# (keys in insertion order, JDK 19+ order, JDK 8-18 order) from Temurin 25 and OpenJDK 17:
# new HashMap<>(linkedHashMapOf(keys)).keySet().
# fmt: off
JAVA_HASHMAP_ORDERS = [
    (["name", "age", "extra"], ["name", "age", "extra"], ["name", "age", "extra"]),
    (
        ["k1", "k2", "k3", "x", "y", "zz"],
        ["k3", "x", "zz", "y", "k1", "k2"],
        ["zz", "k1", "k2", "k3", "x", "y"],
    ),
    (["found_tools"], ["found_tools"], ["found_tools"]),
    (list("abcdefghijkl"), list("abcdefghijkl"), list("abcdefghijkl")),
    (
        ["session", "user_id", "locale", "source", "timestamp", "tags",
         "score", "model", "trace_id", "😀", "中文", "é"],
        ["score", "trace_id", "中文", "user_id", "session", "😀",
         "é", "model", "source", "locale", "timestamp", "tags"],
        ["trace_id", "session", "é", "source", "locale", "tags",
         "score", "中文", "user_id", "😀", "model", "timestamp"],
    ),
    # "Aa" and "BB" have the same Java hashCode: a bucket collision keeps insertion order.
    (["Aa", "BB", "C#", "x"], ["Aa", "BB", "C#", "x"], ["Aa", "BB", "C#", "x"]),
    (
        ["AaAaAaAa", "AaAaAaBB", "AaAaBBAa", "AaAaBBBB", "AaBBAaAa",
         "AaBBAaBB", "AaBBBBAa", "AaBBBBBB", "BBAaAaAa", "z"],
        ["AaAaAaAa", "AaAaAaBB", "AaAaBBAa", "AaAaBBBB", "AaBBAaAa",
         "AaBBAaBB", "AaBBBBAa", "AaBBBBBB", "BBAaAaAa", "z"],
        None,
    ),
    # Nine keys in one bucket of a 16-slot table make treeifyBin double the table first.
    (
        ["key6", "key90", "key106", "key18", "key29", "other0",
         "other1", "other2", "key117", "key128", "key1003", "key1014"],
        ["key6", "key90", "key106", "key117", "key128", "key18",
         "key29", "key1003", "key1014", "other1", "other0", "other2"],
        None,
    ),
]
# fmt: on


@pytest.mark.parametrize(("keys", "jdk19", "jdk17"), JAVA_HASHMAP_ORDERS)
def test_hashmap_order_matches_the_jvm(keys, jdk19, jdk17):
    assert java_hashmap_order(keys) == jdk19
    if jdk17 is not None:
        assert java_hashmap_order(keys, jdk17=True) == jdk17


def test_two_keys_are_ordered_by_their_buckets_too():
    # A table of 4 buckets: "a" (hash 97) in bucket 1 before "b" (98) in bucket 2, whatever
    # the insertion order.
    assert java_hashmap_order(["b", "a"]) == ["a", "b"]


@given(st.text(alphabet=st.sampled_from(["a", "\uffff", "\U0001f600", "\U00010000", "\u00e9"])))
def test_the_java_hash_counts_utf16_code_units(key):
    from eventlog.java import _java_spread_hash

    # String.hashCode by its definition, over the UTF-16 code units Java stores.
    units = key.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    assert _java_spread_hash(key) == h ^ (h >> 16)


def test_user_attributes_are_written_in_hashmap_order():
    attributes = {key: i for i, key in enumerate(["k1", "k2", "k3", "x", "y", "zz"])}
    message = UserMessage("hi", attributes=attributes)
    written = message_to_json(message)

    assert written == (
        '{"contents":[{"text":"hi","type":"TEXT"}],'
        '"attributes":{"k3":2,"x":3,"zz":5,"y":4,"k1":0,"k2":1},"type":"USER"}'
    )
    assert list(message_to_obj(message)["attributes"]) == ["k3", "x", "zz", "y", "k1", "k2"]
    assert message_from_json(written) == message
    # The other messages keep insertion order (LinkedHashMap in LangChain4j).
    assert message_to_json(CustomMessage(attributes)).startswith(
        '{"attributes":{"k1":0,"k2":1,"k3":2,"x":3,"y":4,"zz":5}'
    )


def test_nested_attribute_objects_keep_insertion_order():
    message = UserMessage("hi", attributes={"outer": {"zz": 1, "k1": 2}})

    assert '"attributes":{"outer":{"zz":1,"k1":2}}' in message_to_json(message)


# --------------------------------------------------------------------------------------------
# Malformed input: always a ValueError that says where and what
# --------------------------------------------------------------------------------------------

_TEXT = '{"text":"x","type":"TEXT"}'

MALFORMED = [
    ("", "invalid JSON"),
    ("{", "invalid JSON"),
    ('{"type":"AI"} trailing', "invalid JSON"),
    ('{"type":"AI","attributes":{"x":NaN}}', "NaN is not valid JSON"),
    ('{"type":"AI","attributes":{"x":-Infinity}}', "-Infinity is not valid JSON"),
    ("null", r"\$: a chat message must be a JSON object, got null"),
    ("[]", r"\$: a chat message must be a JSON object, got array"),
    ('"USER"', "got string"),
    ("{}", r'\$: chat message has no "type"; expected one of SYSTEM, USER, AI'),
    ('{"type":"FOO"}', r"\$\.type: unknown message type string 'FOO'; expected one of SYSTEM"),
    ('{"type":7}', r"\$\.type: unknown message type number 7"),
    ('{"type":["AI"]}', r"unknown message type array"),
    ('{"type":"AI","role":"x"}', r"\$: unknown field 'role' in AiMessage; .* has only text"),
    ('{"type":"SYSTEM"}', r"\$\.text: SystemMessage.text cannot be null or blank"),
    ('{"text":"  ","type":"SYSTEM"}', r"\$\.text: SystemMessage.text cannot be null or blank"),
    ('{"text":5,"type":"SYSTEM"}', r"\$\.text: must be a string, got number 5"),
    ('{"type":"USER"}', r"\$\.contents: UserMessage.contents cannot be null or empty"),
    ('{"contents":[],"type":"USER"}', "UserMessage.contents cannot be null or empty"),
    ('{"contents":{},"type":"USER"}', r"\$\.contents: must be an array or null, got object"),
    ('{"contents":["x"],"type":"USER"}', r"\$\.contents\[0\]: a content must be a JSON object"),
    ('{"contents":[{"text":"x"}],"type":"USER"}', r'\$\.contents\[0\]: content has no "type"'),
    ('{"contents":[{"type":"GIF"}],"type":"USER"}', r"\$\.contents\[0\]\.type: unknown content"),
    (
        '{"contents":[{"type":"TEXT"}],"type":"USER"}',
        r"\$\.contents\[0\]\.text: TextContent.text cannot be null",
    ),
    ('{"contents":[{"text":1,"type":"TEXT"}],"type":"USER"}', r"\[0\]\.text: must be a string"),
    (
        '{"contents":[{"text":"x","extra":1,"type":"TEXT"}],"type":"USER"}',
        r"\$\.contents\[0\]: unknown field 'extra' in TextContent",
    ),
    (
        '{"name":["x"],"contents":[' + _TEXT + '],"type":"USER"}',
        r"\$\.name: must be a string or null, got array",
    ),
    (
        '{"contents":[' + _TEXT + '],"attributes":[],"type":"USER"}',
        r"\$\.attributes: must be an object or null, got array",
    ),
    (
        '{"contents":[{"image":{},"type":"IMAGE"}],"type":"USER"}',
        r"\$\.contents\[0\]\.image: ImageContent needs url or base64_data",
    ),
    (
        '{"contents":[{"type":"IMAGE"}],"type":"USER"}',
        r"\$\.contents\[0\]\.image: Image \('image'\) must be a JSON object, got null",
    ),
    (
        '{"contents":[{"image":{"url":"u","size":1},"type":"IMAGE"}],"type":"USER"}',
        r"\$\.contents\[0\]\.image: unknown field 'size' in Image",
    ),
    (
        '{"contents":[{"image":{"url":1},"type":"IMAGE"}],"type":"USER"}',
        r"\$\.contents\[0\]\.image\.url: must be a string or null, got number 1",
    ),
    (
        '{"contents":[{"image":{"url":"u"},"detailLevel":"MAX","type":"IMAGE"}],"type":"USER"}',
        r"\$\.contents\[0\]\.detailLevel: unknown detail level string 'MAX'",
    ),
    (
        '{"contents":[{"audio":{"binaryData":"***"},"type":"AUDIO"}],"type":"USER"}',
        r"\$\.contents\[0\]\.audio\.binaryData: is not valid base64",
    ),
    (
        '{"contents":[{"audio":{"binaryData":"AP7"},"type":"AUDIO"}],"type":"USER"}',
        r"\.binaryData: is not valid base64",
    ),
    (
        '{"contents":[{"video":{"mimeType":"v"},"type":"VIDEO"}],"type":"USER"}',
        r"\.video: VideoContent needs url or base64_data",
    ),
    (
        '{"contents":[{"pdfFile":null,"type":"PDF"}],"type":"USER"}',
        r"\.pdfFile: PdfFile \('pdfFile'\) must be a JSON object",
    ),
    (
        '{"toolExecutionRequests":{},"type":"AI"}',
        r"\$\.toolExecutionRequests: must be an array or null",
    ),
    (
        '{"toolExecutionRequests":[null],"type":"AI"}',
        r"\$\.toolExecutionRequests\[0\]: a tool execution request must be a JSON object",
    ),
    (
        '{"toolExecutionRequests":[{"name":"w","args":"{}"}],"type":"AI"}',
        r"\$\.toolExecutionRequests\[0\]: unknown field 'args' in ToolExecutionRequest",
    ),
    (
        '{"toolExecutionRequests":[{"arguments":{"a":1}}],"type":"AI"}',
        r"\$\.toolExecutionRequests\[0\]\.arguments: must be a string or null, got object",
    ),
    ('{"thinking":true,"type":"AI"}', r"\$\.thinking: must be a string or null, got boolean"),
    ('{"type":"TOOL_EXECUTION_RESULT"}', r'needs "contents" \(a non-empty array\) or the legacy'),
    ('{"contents":[],"type":"TOOL_EXECUTION_RESULT"}', "it has neither"),
    (
        '{"text":"x","contents":[' + _TEXT + '],"type":"TOOL_EXECUTION_RESULT"}',
        'has both "text" and "contents"',
    ),
    (
        '{"text":"x","isError":"yes","type":"TOOL_EXECUTION_RESULT"}',
        r"\$\.isError: must be true, false or null, got string 'yes'",
    ),
    (
        '{"text":"x","toolName":1,"type":"TOOL_EXECUTION_RESULT"}',
        r"\$\.toolName: must be a string or null",
    ),
    ('{"attributes":"x","type":"CUSTOM"}', r"\$\.attributes: must be an object or null"),
    ('{"attributes":{"a":1e400},"type":"CUSTOM"}', r"\$\.attributes: .* is inf"),
    (
        '{"attributes":{"a":' + "[" * 300 + "]" * 300 + '},"type":"CUSTOM"}',
        r"\$\.attributes: .* nested more than 256 levels",
    ),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"attributes":{"a":' + "9" * 5000 + '},"type":"CUSTOM"}', "invalid JSON"),
]


@pytest.mark.parametrize(("text", "match"), MALFORMED)
def test_malformed_input_is_a_positioned_value_error(text, match):
    with pytest.raises(ValueError, match=f"^message_from_json: .*{match}"):
        message_from_json(text)


def test_message_from_obj_names_itself():
    with pytest.raises(ValueError, match=r"^message_from_obj: \$\.type: unknown message type"):
        message_from_obj({"type": "BOT"})
    with pytest.raises(ValueError, match=r"^message_from_obj: \$: a chat message must be"):
        message_from_obj(("not", "a", "dict"))
    with pytest.raises(ValueError, match=r"unknown field 1, 'x' in CustomMessage|unknown field"):
        message_from_obj({"type": "CUSTOM", 1: 2, "x": 3})


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{}", r"^messages_from_json: \$: expected a JSON array of messages, got object"),
        ('"x"', "expected a JSON array of messages, got string"),
        ('[{"type":"AI"},null]', r"^messages_from_json: \$\[1\]: a chat message must be"),
        (
            '[{"type":"AI"},{"type":"USER","contents":[{"type":"TEXT","text":null}]}]',
            r"^messages_from_json: \$\[1\]\.contents\[0\]\.text: TextContent.text cannot be null",
        ),
        ("[", "^messages_from_json: invalid JSON"),
        (b"\xff\xfe\x00", "^messages_from_json: "),
        (b'["\xff"]', "^messages_from_json: input is not valid UTF-8"),
    ],
)
def test_malformed_lists(text, match):
    with pytest.raises(ValueError, match=match):
        messages_from_json(text)


def test_wrong_argument_types_are_type_errors():
    with pytest.raises(TypeError, match="message_to_json: expected a chat message"):
        message_to_json(TextContent("x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="message_to_obj: expected a chat message"):
        message_to_obj("x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="message_to_json: expected a chat message"):
        messages_to_json([AiMessage(), None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="expected JSON text as str or bytes, got int"):
        message_from_json(5)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------


@given(chat_messages())
def test_round_trip_is_exact(message):
    written = message_to_json(message)
    read = message_from_json(written)

    assert read == message
    assert type(read) is type(message)
    assert message_to_json(read) == written
    assert message_from_json(written.encode()) == message


@given(chat_messages())
def test_message_to_obj_agrees_with_message_to_json(message):
    obj = message_to_obj(message)
    parsed = json.loads(message_to_json(message))

    assert parsed == obj
    # Same key order at every level, not just equal dicts.
    assert json.dumps(parsed) == json.dumps(obj)
    assert message_from_obj(obj) == message
    # What callers may do with the obj: plain json round trip.
    assert message_from_obj(json.loads(json.dumps(obj, ensure_ascii=False))) == message


@given(chat_messages())
def test_output_is_compact_single_line_json(message):
    written = message_to_json(message)

    assert "\n" not in written
    assert json.loads(written)["type"] == message.type
    assert written.endswith(f'"type":"{message.type}"}}')


@given(conversations())
def test_list_round_trip(conversation):
    written = messages_to_json(conversation)

    assert messages_from_json(written) == conversation
    assert written == "[" + ",".join(message_to_json(m) for m in conversation) + "]"


def _only_value_errors(call: Any, *args: Any) -> None:
    try:
        result = call(*args)
    except ValueError:
        return
    assert result is not None


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(json_values(max_leaves=20))
def test_arbitrary_json_only_raises_value_error(value):
    text = json.dumps(value, ensure_ascii=False)
    _only_value_errors(message_from_json, text)
    _only_value_errors(messages_from_json, text)
    _only_value_errors(message_from_obj, value)
    _only_value_errors(messages_from_json, f"[{text}]")


@given(st.one_of(st.text(max_size=60), st.binary(max_size=60)))
def test_arbitrary_text_only_raises_value_error(text):
    _only_value_errors(message_from_json, text)
    _only_value_errors(messages_from_json, text)


_PERTURBATIONS: st.SearchStrategy[Any] = st.one_of(
    json_values(max_leaves=4), st.sampled_from(["", [], {}, None])
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(chat_messages(), st.data())
def test_perturbed_messages_only_raise_value_error(message, data):
    obj = message_to_obj(message)
    # Replace or add one field somewhere in the object tree.
    target = obj
    while True:
        children = [
            child
            for value in target.values()
            for child in (value if isinstance(value, list) else [value])
        ]
        nested = [child for child in children if isinstance(child, dict)]
        if not nested or data.draw(st.booleans()):
            break
        target = data.draw(st.sampled_from(nested))
    key = data.draw(st.sampled_from([*target, "type", "text", "contents", "url", "extra"]))
    target[key] = data.draw(_PERTURBATIONS)

    text = json.dumps(obj, ensure_ascii=False)
    _only_value_errors(message_from_json, text)
    _only_value_errors(message_from_obj, obj)


def test_attribute_subclasses_write_as_their_json_base_type():
    class Level(enum.IntEnum):
        HIGH = 3

    class Role(enum.StrEnum):
        ADMIN = "admin"

    message = CustomMessage({"level": Level.HIGH, "role": Role.ADMIN, "o": OrderedDict(a=1.5)})
    written = message_to_json(message)

    assert written == '{"attributes":{"level":3,"role":"admin","o":{"a":1.5}},"type":"CUSTOM"}'
    assert message_from_json(written) == message


def test_message_to_obj_does_not_expose_the_message_attributes():
    message = AiMessage(attributes={"k": "v"})
    obj = message_to_obj(message)
    obj["attributes"]["k"] = "changed"

    assert message.attributes == {"k": "v"}


def test_a_long_string_in_an_error_is_quoted_cut_at_40_characters():
    with pytest.raises(ValueError, match="unknown message type string '" + "T" * 40 + "';"):
        message_from_json('{"type": "' + "T" * 100 + '"}')


def test_a_crowded_bucket_doubles_the_table_only_below_64():
    from eventlog.java import _grow_for_crowded_buckets

    # Nine hashes in bucket 0 of every table size: the insertion that crowds a bucket doubles
    # the table (treeifyBin) while it is shorter than 64 (MIN_TREEIFY_CAPACITY), and from 64 on
    # makes a tree instead.
    crowded = [i * 1024 for i in range(9)]
    assert _grow_for_crowded_buckets(crowded, 16) == 32
    assert _grow_for_crowded_buckets(crowded, 32) == 64
    assert _grow_for_crowded_buckets(crowded, 64) == 64
    assert _grow_for_crowded_buckets(crowded[:8], 16) == 16
    # The tenth insertion into the still crowded bucket doubles again: the count after a
    # resize is of every key inserted so far.
    assert _grow_for_crowded_buckets([*crowded, 9 * 1024], 16) == 64
    # After a resize each bucket holds exactly the keys inserted so far: four in bucket 5
    # before the crowd and four after make eight (no resize), five after make nine (one).
    before, after = [5 + 1024 * i for i in range(4)], [5 + 1024 * i for i in range(4, 9)]
    assert _grow_for_crowded_buckets([*before, *crowded, *after[:4]], 16) == 32
    assert _grow_for_crowded_buckets([*before, *crowded, *after], 16) == 64
