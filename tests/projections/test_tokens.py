"""OpenAiTokenCountEstimator: LangChain4j's counting rules, offline encoding loading."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time

import pytest
import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog.contents import AudioContent, ImageContent, TextContent
from eventlog.messages import (
    AiMessage,
    CustomMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from projections import tokenizer_files, tokens
from projections.tokens import (
    EncodingUnavailableError,
    OpenAiTokenCountEstimator,
    TokenCountEstimator,
    encoding_name_for_model,
)
from tests.projections.tiktoken_oracle import tiktoken_encoding

CL100K = "cl100k_base"
O200K = "o200k_base"
AVERAGE_TEXT = "Hello, how are you doing? What do you want to talk about?"


@pytest.fixture(scope="module")
def gpt35() -> OpenAiTokenCountEstimator:
    return OpenAiTokenCountEstimator("gpt-3.5-turbo")


@pytest.fixture(scope="module")
def gpt4o_mini() -> OpenAiTokenCountEstimator:
    return OpenAiTokenCountEstimator("gpt-4o-mini")


def calculator(
    request_id: str, arguments: str | None = '{ "a": 2, "b": 2 }'
) -> ToolExecutionRequest:
    return ToolExecutionRequest(id=request_id, name="calculator", arguments=arguments)


# --------------------------------------------------------------------------------------------
# §4.6: OpenAiTokenCountEstimatorTest (gpt-3.5-turbo / cl100k_base)
# --------------------------------------------------------------------------------------------


def test_encode_then_decode_returns_the_text(gpt35):
    text = "This is a text which will be encoded and decoded back."

    assert gpt35.decode(gpt35.encode(text)) == text


def test_encode_with_truncation(gpt35):
    text = "This is a text which will be encoded with truncation and decoded back."

    ids = gpt35.encode(text, 10)

    assert len(ids) == 10
    assert gpt35.decode(ids) == "This is a text which will be encoded with trunc"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello", 1),
        ("Hello!", 2),
        ("Hello, how are you?", 6),
        ("", 0),
        ("\n", 1),
        ("\n\n", 1),
        ("\n \n\n", 2),
    ],
)
def test_short_texts(gpt35, text, expected):
    assert gpt35.estimate_token_count_in_text(text) == expected


@pytest.mark.parametrize("repeats", [1, 2, 3, 10, 50, 100])
def test_average_and_large_texts_cost_15_tokens_per_sentence(gpt35, repeats):
    text = " ".join([AVERAGE_TEXT] * repeats)

    assert gpt35.estimate_token_count_in_text(text) == 15 * repeats


def test_duplicated_request_with_null_argument_value_is_counted(gpt35):
    request = ToolExecutionRequest(
        id="tool-id",
        name="tool-name",
        arguments='{\n    "name": "Klaus",\n    "address": null\n}\n',
    )

    assert (
        gpt35.estimate_token_count_in_message(AiMessage(tool_execution_requests=[request] * 2)) > 0
    )


@pytest.mark.parametrize("arguments", [None, "", " ", "{}"])
def test_duplicated_request_with_empty_arguments_is_counted(gpt35, arguments):
    request = ToolExecutionRequest(id="tool-id", name="tool-name", arguments=arguments)
    message = AiMessage(tool_execution_requests=[request, request])

    # Check the arguments add nothing: 4 + 6 + 15 + 2 * (7 + tokens("tool-name")).
    expected = 4 + 6 + 15 + 2 * (7 + gpt35.estimate_token_count_in_text("tool-name"))
    assert gpt35.estimate_token_count_in_message(message) == expected


# --------------------------------------------------------------------------------------------
# §4.2: encoding selection
# --------------------------------------------------------------------------------------------

# Every OpenAiChatModelName / OpenAiEmbeddingModelName / OpenAiLanguageModelName in §4.2.
MODEL_ENCODINGS = {
    **dict.fromkeys(
        [
            "gpt-3.5-turbo",
            "gpt-3.5-turbo-1106",
            "gpt-3.5-turbo-0125",
            "gpt-3.5-turbo-16k",
            "gpt-3.5-turbo-instruct",
            "gpt-4",
            "gpt-4-0613",
            "gpt-4-turbo",
            "gpt-4-turbo-2024-04-09",
            "gpt-4-32k",
            "gpt-4-32k-0613",
            "text-embedding-3-small",
            "text-embedding-3-large",
            "text-embedding-ada-002",
        ],
        CL100K,
    ),
    **dict.fromkeys(
        [
            "gpt-4o",
            "gpt-4o-2024-05-13",
            "gpt-4o-2024-08-06",
            "gpt-4o-2024-11-20",
            "gpt-4o-mini",
            "gpt-4o-mini-2024-07-18",
            "o1",
            "o1-2024-12-17",
            "o3",
            "o3-2025-04-16",
            "o3-mini",
            "o3-mini-2025-01-31",
            "o4-mini",
            "o4-mini-2025-04-16",
            "gpt-4.1",
            "gpt-4.1-2025-04-14",
            "gpt-4.1-mini",
            "gpt-4.1-mini-2025-04-14",
            "gpt-4.1-nano",
            "gpt-4.1-nano-2025-04-14",
            "gpt-5",
            "gpt-5-mini",
            "gpt-5-nano",
            "gpt-5.1",
        ],
        O200K,
    ),
}


@pytest.mark.parametrize(("model_name", "expected"), sorted(MODEL_ENCODINGS.items()))
def test_encoding_for_every_langchain4j_model_name(model_name, expected):
    estimator = OpenAiTokenCountEstimator(model_name)

    assert encoding_name_for_model(model_name) == expected
    assert estimator.encoding_name == expected
    assert estimator.model_name == model_name
    assert estimator.estimate_token_count_in_text("a") == 1


@pytest.mark.parametrize(
    ("model_name", "expected"),
    [
        # jtokkit's exact names win over its prefixes ...
        ("text-davinci-003", "p50k_base"),
        ("code-cushman-001", "p50k_base"),
        ("text-davinci-edit-001", "p50k_edit"),
        ("davinci", "r50k_base"),
        ("code-search-ada-code-001", "r50k_base"),
        # ... and the prefixes apply in jtokkit's order.
        ("gpt-4o-audio-preview", O200K),
        ("gpt-4-32k-0314", CL100K),
        ("gpt-4-vision-preview", CL100K),
        ("gpt-3.5-turbo-16k-0613", CL100K),
        # LangChain4j's own rule comes first: anything starting with "o".
        ("omni-moderation-latest", O200K),
    ],
)
def test_jtokkit_table_and_prefix_order(model_name, expected):
    assert encoding_name_for_model(model_name) == expected


@pytest.mark.parametrize(
    "model_name", ["davinci-002", "claude-3", "ft:gpt-4o-mini:org::id", "GPT-4"]
)
def test_unknown_model_names_are_rejected_like_jtokkit(model_name):
    with pytest.raises(ValueError, match=f"Model '{model_name}' is unknown to jtokkit") as caught:
        OpenAiTokenCountEstimator(model_name)

    assert "TokenCountEstimator" in str(caught.value)


@pytest.mark.parametrize("model_name", ["", " ", "\t\n", None])
def test_blank_model_name_is_rejected(model_name):
    with pytest.raises(ValueError, match="model_name cannot be null or blank"):
        OpenAiTokenCountEstimator(model_name)


def test_p50k_and_r50k_models_need_their_encoding_file(monkeypatch, tmp_path):
    # Check the shared cache does not hold them: the error must say so instead of downloading.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))

    with pytest.raises(EncodingUnavailableError, match=r"'p50k_base'.*TIKTOKEN_CACHE_DIR"):
        OpenAiTokenCountEstimator("text-davinci-003")


# --------------------------------------------------------------------------------------------
# §4.3 / §4.4: per-message and list counts
# --------------------------------------------------------------------------------------------


def test_breakdown_examples_gpt_4o_mini(gpt4o_mini):
    r1, r2 = calculator("1"), calculator("2")

    assert gpt4o_mini.estimate_token_count_in_message(UserMessage("How much is 2+2?")) == 12
    assert gpt4o_mini.estimate_token_count_in_message(AiMessage(tool_execution_requests=[r1])) == 24
    assert (
        gpt4o_mini.estimate_token_count_in_message(AiMessage(tool_execution_requests=[r1, r2]))
        == 57
    )
    result = ToolExecutionResultMessage(id="1", tool_name="calculator", text="4")
    assert gpt4o_mini.estimate_token_count_in_message(result) == 5


def test_system_message_counts_its_text(gpt35):
    assert gpt35.estimate_token_count_in_message(SystemMessage("Hello, how are you?")) == 4 + 6


def test_user_name_costs_one_plus_its_tokens(gpt35):
    anonymous = gpt35.estimate_token_count_in_message(UserMessage("Hello"))
    named = gpt35.estimate_token_count_in_message(UserMessage("Hello", name="Klaus"))

    assert anonymous == 4 + 1
    assert named == anonymous + 1 + gpt35.estimate_token_count_in_text("Klaus")


def test_user_message_sums_every_text_content(gpt35):
    message = UserMessage(contents=[TextContent("Hello"), TextContent("Hello!")])

    assert gpt35.estimate_token_count_in_message(message) == 4 + 1 + 2


@pytest.mark.parametrize(
    "content",
    [ImageContent("https://example.com/cat.png"), AudioContent("https://example.com/a.mp3")],
    ids=["image", "audio"],
)
def test_non_text_user_content_is_rejected(gpt35, content):
    message = UserMessage(contents=[TextContent("look"), content])

    with pytest.raises(ValueError, match="Unknown content type: "):
        gpt35.estimate_token_count_in_message(message)


def test_ai_message_counts_text_but_not_thinking(gpt35):
    plain = AiMessage("Hello, how are you?")
    thinking = AiMessage("Hello, how are you?", thinking="a long chain of thought")

    assert gpt35.estimate_token_count_in_message(plain) == 4 + 6
    assert gpt35.estimate_token_count_in_message(thinking) == 4 + 6


def test_ai_message_text_and_single_request_both_count(gpt4o_mini):
    message = AiMessage("Let me compute.", tool_execution_requests=[calculator("1")])

    text = gpt4o_mini.estimate_token_count_in_text("Let me compute.")
    assert gpt4o_mini.estimate_token_count_in_message(message) == 24 + text


def test_single_request_counts_raw_arguments_and_name_twice(gpt35):
    request = ToolExecutionRequest(id="x", name="get_weather", arguments="not json at all")

    name = gpt35.estimate_token_count_in_text("get_weather")
    arguments = gpt35.estimate_token_count_in_text("not json at all")
    expected = 4 + 6 - 1 + 2 * name + arguments
    assert (
        gpt35.estimate_token_count_in_message(AiMessage(tool_execution_requests=[request]))
        == expected
    )


def test_single_request_with_null_name_and_arguments_counts_them_as_zero(gpt35):
    # jtokkit counts a null text as 0 tokens.
    request = ToolExecutionRequest()

    assert gpt35.estimate_token_count_in_message(AiMessage(tool_execution_requests=[request])) == 9


def test_tool_result_counts_only_its_text(gpt35):
    short = ToolExecutionResultMessage(id="1", tool_name="t", text="Hello")
    long_ids = ToolExecutionResultMessage(
        id="a-very-long-id", tool_name="a_very_long_name", text="Hello"
    )

    assert gpt35.estimate_token_count_in_message(short) == 5
    assert gpt35.estimate_token_count_in_message(long_ids) == 5


def test_tool_result_without_exactly_one_text_is_rejected(gpt35):
    message = ToolExecutionResultMessage(
        id="1", tool_name="t", contents=[TextContent("a"), TextContent("b")]
    )

    with pytest.raises(ValueError, match="exactly one TextContent"):
        gpt35.estimate_token_count_in_message(message)


def test_custom_message_is_an_unknown_message_type(gpt35):
    with pytest.raises(ValueError, match="Unknown message type: "):
        gpt35.estimate_token_count_in_message(CustomMessage({"k": "v"}))


def test_none_is_an_unknown_message_type(gpt35):
    with pytest.raises(ValueError, match="Unknown message type: None"):
        gpt35.estimate_token_count_in_message(None)


def test_list_adds_three_priming_tokens(gpt35):
    messages = [SystemMessage("Be brief."), UserMessage("Hello"), AiMessage("Hello!")]

    per_message = sum(gpt35.estimate_token_count_in_message(m) for m in messages)
    assert gpt35.estimate_token_count_in_messages([]) == 3
    assert gpt35.estimate_token_count_in_messages(messages) == 3 + per_message
    assert gpt35.estimate_token_count_in_messages(iter(messages)) == 3 + per_message


@pytest.mark.parametrize(("model_name", "overhead"), [("o1", 2), ("o3-mini", 2), ("gpt-4o", 3)])
def test_o_models_prime_one_token_less(model_name, overhead):
    estimator = OpenAiTokenCountEstimator(model_name)
    user = UserMessage("Hello")

    assert estimator.messages_overhead == overhead
    assert estimator.estimate_token_count_in_messages([]) == overhead
    assert estimator.estimate_token_count_in_messages([user]) == overhead + 5


@pytest.mark.parametrize(
    ("model_name", "extra"), [("o4-mini", 2), ("o4-mini-2025-04-16", 2), ("o3", 0), ("gpt-4o", 0)]
)
def test_o4_models_add_two_tokens_per_ai_message(model_name, extra, gpt4o_mini):
    estimator = OpenAiTokenCountEstimator(model_name)

    for message in (
        AiMessage("Hello"),
        AiMessage(tool_execution_requests=[calculator("1")]),
        AiMessage(tool_execution_requests=[calculator("1"), calculator("2")]),
    ):
        expected = gpt4o_mini.estimate_token_count_in_message(message) + extra
        assert estimator.estimate_token_count_in_message(message) == expected
    # Only AI messages: the +2 is applied inside LangChain4j's AiMessage branch.
    assert estimator.estimate_token_count_in_message(UserMessage("Hello")) == 5


def test_special_token_strings_are_ordinary_text(gpt35):
    assert gpt35.estimate_token_count_in_text("<|endoftext|>") > 1


# --------------------------------------------------------------------------------------------
# Tool arguments of multi-request messages: Jackson parsing + Java String.valueOf rendering
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("json_value", "java_text"),
    [
        ("2", "2"),
        ("-0", "0"),
        ("12345678901234567890", "12345678901234567890"),
        ("2.5", "2.5"),
        ("1.0", "1.0"),
        ("100", "100"),
        ("1E2", "100.0"),
        ("-0.0", "-0.0"),
        ("0.001", "0.001"),
        ("0.0001", "1.0E-4"),
        ("1234567.0", "1234567.0"),
        ("12345678.9", "1.23456789E7"),
        ("1e7", "1.0E7"),
        ("-1.5e-10", "-1.5E-10"),
        ("1e400", "Infinity"),
        ("-1e400", "-Infinity"),
        ("4.9e-324", "4.9E-324"),
        ("1e-323", "9.9E-324"),
        ("1.5e-323", "1.5E-323"),
        ("1.7976931348623157e308", "1.7976931348623157E308"),
        ("1e21", "1.0E21"),
        ("9999999.0", "9999999.0"),
        ("true", "true"),
        ("false", "false"),
        ("null", "null"),
        ('"Klaus"', "Klaus"),
        ('""', ""),
        ("[1, 2]", "[1, 2]"),
        ("[]", "[]"),
        ('[1, "a", null, true, 2.5]', "[1, a, null, true, 2.5]"),
        ('{"k": "v", "k2": 2}', "{k=v, k2=2}"),
        ("{}", "{}"),
        ('{"a": {"b": [1, {"c": null}]}}', "{a={b=[1, {c=null}]}}"),
    ],
)
def test_argument_values_render_like_java_string_value_of(gpt35, json_value, java_text):
    arguments = f'{{"key": {json_value}}}'
    message = AiMessage(tool_execution_requests=[calculator("1", arguments), calculator("2", "{}")])

    one_entry = 2 + 1 + gpt35.estimate_token_count_in_text(java_text)  # "key" is 1 token
    name = gpt35.estimate_token_count_in_text("calculator")
    expected = 4 + 6 + 15 + 2 * (7 + name) + one_entry
    assert gpt35.estimate_token_count_in_message(message) == expected
    assert tokens._java_string_value_of(tokens._JSON_DECODER.decode(json_value)) == java_text


def test_only_json_values_are_rendered():
    with pytest.raises(TypeError, match="not a JSON value type"):
        tokens._java_string_value_of(object())


def test_duplicate_keys_keep_first_position_and_last_value(gpt35):
    assert tokens._java_string_value_of(
        tokens._JSON_DECODER.decode('{"a": 1, "b": 2, "a": 3}')
    ) == ("{a=3, b=2}")


def test_trailing_content_after_the_object_is_ignored_like_jackson(gpt35):
    clean = AiMessage(tool_execution_requests=[calculator("1"), calculator("2")])
    trailing = AiMessage(
        tool_execution_requests=[calculator("1", ' \n{ "a": 2, "b": 2 } trailing'), calculator("2")]
    )

    assert gpt35.estimate_token_count_in_message(trailing) == gpt35.estimate_token_count_in_message(
        clean
    )


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ("[1, 2]", "JSON list, not an object"),
        ('"text"', "JSON str, not an object"),
        ("null", "JSON NoneType, not an object"),
        ("{'a': 1}", "not valid JSON"),
        ('{"a": NaN}', "not valid JSON"),
        ('{"a": 1,}', "not valid JSON"),
        ("\u00a0{}", "not valid JSON"),
    ],
)
def test_arguments_that_are_not_a_json_object_are_rejected(gpt35, arguments, problem):
    bad = ToolExecutionRequest(id="call-7", name="lookup", arguments=arguments)
    message = AiMessage(tool_execution_requests=[calculator("1"), bad])

    with pytest.raises(ValueError, match=problem) as caught:
        gpt35.estimate_token_count_in_message(message)

    assert "call-7" in str(caught.value)
    assert "JSON object" in str(caught.value)


# --------------------------------------------------------------------------------------------
# messages_overhead, identity, the protocol
# --------------------------------------------------------------------------------------------

texts = st.text(max_size=40)
requests = st.builds(
    ToolExecutionRequest,
    id=st.none() | texts,
    name=st.none() | texts,
    arguments=st.none()
    | st.dictionaries(
        st.text(max_size=8),
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | texts,
        max_size=3,
    ).map(json.dumps),
)
messages_strategy = st.one_of(
    texts.map(lambda t: SystemMessage("You " + t)),  # never blank
    st.builds(lambda text, name: UserMessage(text, name=name), texts, st.none() | texts),
    st.builds(
        lambda text, reqs: AiMessage(text, tool_execution_requests=reqs),
        st.none() | texts,
        st.lists(requests, max_size=3),
    ),
    st.builds(lambda text: ToolExecutionResultMessage(id="1", tool_name="t", text=text), texts),
)


@pytest.mark.parametrize("model_name", ["gpt-3.5-turbo", "gpt-4o-mini", "o3", "o4-mini"])
def test_list_count_is_overhead_plus_message_counts(model_name):
    estimator = OpenAiTokenCountEstimator(model_name)

    @settings(max_examples=60, deadline=None)
    @given(st.lists(messages_strategy, max_size=6))
    def check(messages):
        singles = sum(estimator.estimate_token_count_in_message(m) for m in messages)
        assert estimator.estimate_token_count_in_messages(messages) == (
            estimator.messages_overhead + singles
        )

    check()


def test_identity_names_model_encoding_and_versions(gpt4o_mini):
    identity = gpt4o_mini.identity

    assert identity.startswith(f"openai:gpt-4o-mini:o200k_base:tiktoken-{tiktoken.__version__}")
    assert "langchain4j-1.19.0" in identity
    assert OpenAiTokenCountEstimator("gpt-4o").identity != identity
    assert OpenAiTokenCountEstimator("gpt-4o-mini").identity == identity


def test_estimator_satisfies_the_protocol(gpt35):
    class WordCounter:
        def estimate_token_count_in_text(self, text):
            return len(text.split())

        def estimate_token_count_in_message(self, message):
            return 1

        def estimate_token_count_in_messages(self, messages):
            return len(list(messages))

    assert isinstance(gpt35, TokenCountEstimator)
    assert isinstance(WordCounter(), TokenCountEstimator)
    assert not isinstance(object(), TokenCountEstimator)


def test_repr_names_the_model(gpt35):
    assert repr(gpt35) == "OpenAiTokenCountEstimator('gpt-3.5-turbo')"


# --------------------------------------------------------------------------------------------
# encode / decode
# --------------------------------------------------------------------------------------------


def test_truncation_never_splits_a_multibyte_character(gpt35):
    text = "🎉🎉🎉"
    full = gpt35.encode(text)
    assert len(full) > 3  # each emoji spans several tokens

    for limit in range(len(full) + 1):
        ids = gpt35.encode(text, limit)
        assert len(ids) <= limit
        assert text.startswith(gpt35.decode(ids))


def test_encode_zero_and_negative_limits(gpt35):
    assert gpt35.encode("Hello", 0) == []
    assert gpt35.encode("Hello", 5) == gpt35.encode("Hello")
    with pytest.raises(ValueError, match="max_tokens=-1"):
        gpt35.encode("Hello", -1)


def test_decode_rejects_unknown_ids(gpt35):
    with pytest.raises(ValueError, match="decode with cl100k_base failed"):
        gpt35.decode([10**7])


# --------------------------------------------------------------------------------------------
# Offline loading
# --------------------------------------------------------------------------------------------


@pytest.fixture
def fresh_loader(monkeypatch):
    """An empty encoding cache, and a loud failure if anything reaches for the network."""
    monkeypatch.setattr(tokenizer_files, "_ENCODINGS", {})

    def no_network(*args, **kwargs):
        pytest.fail(f"tried to download: {args}")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", no_network)
    monkeypatch.setattr(tiktoken, "get_encoding", no_network)


def cache_name(encoding_name: str) -> str:
    """The file name tiktoken caches an encoding's download under: sha1 of its URL."""
    url = tokenizer_files._SPECS[encoding_name].url
    return hashlib.sha1(url.encode()).hexdigest()  # noqa: S324 - tiktoken's naming


def packaged_bytes(encoding_name: str) -> bytes:
    return (tokenizer_files._packaged_dir() / f"{encoding_name}.tiktoken").read_bytes()


@pytest.mark.parametrize("encoding_name", sorted(tokenizer_files._PACKAGED))
def test_packaged_files_are_tiktokens_own(encoding_name):
    data = packaged_bytes(encoding_name)

    assert hashlib.sha256(data).hexdigest() == tokenizer_files._SPECS[encoding_name].sha256


@pytest.mark.parametrize("cache_dir", [None, "", "empty"])
@pytest.mark.parametrize("model_name", ["gpt-4", "gpt-4o", "gpt-4o-mini", "o1", "gpt-3.5-turbo"])
def test_packaged_encodings_need_no_cache(
    monkeypatch, tmp_path, fresh_loader, cache_dir, model_name
):
    # Check a fresh install counts with no cache variable, a disabled cache and an empty one.
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    if cache_dir is None:
        monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    else:
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", cache_dir and str(tmp_path))

    estimator = OpenAiTokenCountEstimator(model_name)

    assert estimator.estimate_token_count_in_text(AVERAGE_TEXT) == 15
    assert list(tmp_path.iterdir()) == []  # nothing copied into a cache


def test_missing_encoding_fails_fast_with_remedy(monkeypatch, tmp_path, fresh_loader):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))

    started = time.monotonic()
    with pytest.raises(EncodingUnavailableError) as caught:
        OpenAiTokenCountEstimator("text-davinci-003")
    elapsed = time.monotonic() - started

    assert elapsed < 1.0
    error = caught.value
    message = str(error)
    assert isinstance(error, RuntimeError)
    assert error.encoding_name == "p50k_base"
    assert error.looked_at == (f"{tmp_path / cache_name('p50k_base')} (missing)",)
    assert "set TIKTOKEN_CACHE_DIR" in message
    assert "reinstall chatledger" not in message  # p50k_base is not packaged


def test_packaged_file_with_wrong_hash_is_refused(monkeypatch, tmp_path, fresh_loader):
    packaged = tmp_path / "encodings"
    packaged.mkdir()
    damaged = packaged / "cl100k_base.tiktoken"
    damaged.write_bytes(packaged_bytes(CL100K)[:-100])
    monkeypatch.setattr(tokenizer_files, "_packaged_dir", lambda: packaged)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))

    with pytest.raises(EncodingUnavailableError) as caught:
        OpenAiTokenCountEstimator("gpt-4")

    assert caught.value.looked_at == (
        f"chatledger's packaged copy {damaged} (sha256 mismatch)",
        f"{tmp_path / 'cache' / cache_name(CL100K)} (missing)",
    )
    assert "reinstall chatledger" in str(caught.value)
    assert damaged.stat().st_size > 0  # left alone


def test_cache_dir_serves_encodings_that_are_not_packaged(monkeypatch, tmp_path, fresh_loader):
    # No other encoding file exists offline, so cl100k_base plays one that is not packaged.
    monkeypatch.setattr(tokenizer_files, "_PACKAGED", frozenset())
    (tmp_path / cache_name(CL100K)).write_bytes(packaged_bytes(CL100K))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))

    estimator = OpenAiTokenCountEstimator("gpt-3.5-turbo")

    assert estimator.estimate_token_count_in_text(AVERAGE_TEXT) == 15


def test_corrupt_cache_file_is_skipped_and_kept(monkeypatch, tmp_path, fresh_loader):
    corrupt = tmp_path / cache_name("p50k_base")
    corrupt.write_bytes(b"garbage\n")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))

    with pytest.raises(EncodingUnavailableError, match="sha256 mismatch"):
        OpenAiTokenCountEstimator("text-davinci-003")
    assert corrupt.read_bytes() == b"garbage\n"


def test_empty_cache_dir_disables_the_cache_like_tiktoken(monkeypatch, fresh_loader):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")

    with pytest.raises(EncodingUnavailableError, match="disabled"):
        OpenAiTokenCountEstimator("davinci")


def test_default_cache_dirs_follow_tiktoken(monkeypatch, tmp_path):
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(tmp_path))
    assert tokenizer_files._tiktoken_cache_dir() == str(tmp_path)

    monkeypatch.delenv("DATA_GYM_CACHE_DIR")
    default = tokenizer_files._tiktoken_cache_dir()
    assert default is not None
    assert default.endswith("data-gym-cache")


def test_unreadable_cache_entry_is_reported(monkeypatch, tmp_path, fresh_loader):
    (tmp_path / cache_name("r50k_base")).mkdir()  # a directory, not a file
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))

    with pytest.raises(EncodingUnavailableError, match="unreadable"):
        OpenAiTokenCountEstimator("davinci")


def test_encodings_are_loaded_once_per_process(monkeypatch, fresh_loader):
    loads = []
    real_load = tokenizer_files._load_encoding

    def counting_load(name):
        loads.append(name)
        return real_load(name)

    monkeypatch.setattr(tokenizer_files, "_load_encoding", counting_load)
    built: list[OpenAiTokenCountEstimator] = []
    threads = [
        threading.Thread(target=lambda: built.append(OpenAiTokenCountEstimator("gpt-4")))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert loads == [CL100K]
    assert len({id(estimator._encoding) for estimator in built}) == 1


@pytest.mark.parametrize("encoding_name", sorted(tokenizer_files._SPECS))
def test_specs_match_tiktokens_own_constructors(monkeypatch, encoding_name):
    # Intercept the download tiktoken's constructor would make and compare the rest.
    seen = []

    def fake_load(url, expected_hash=None):
        seen.append((url, expected_hash))
        return {b"x": 0}

    monkeypatch.setattr(tiktoken_ext.openai_public, "load_tiktoken_bpe", fake_load)
    theirs = tiktoken_ext.openai_public.ENCODING_CONSTRUCTORS[encoding_name]()
    ours = tokenizer_files._SPECS[encoding_name]

    assert theirs["name"] == encoding_name
    assert seen == [(ours.url, ours.sha256)]
    assert ours.pat_str == theirs["pat_str"]
    assert ours.special_tokens == theirs["special_tokens"]
    assert ours.explicit_n_vocab == theirs.get("explicit_n_vocab")


@pytest.mark.parametrize("encoding_name", [CL100K, O200K])
def test_loaded_encodings_match_tiktoken(encoding_name):
    theirs = tiktoken_encoding(encoding_name)
    ours = tokenizer_files.get_encoding(encoding_name)
    sample = "Hello, wörld! 1234567 <|endoftext|> 🎉 \n\n  x"

    assert ours.name == encoding_name
    assert ours.n_vocab == theirs.n_vocab
    assert ours.encode_ordinary(sample) == theirs.encode_ordinary(sample)
    assert ours.encode(sample, allowed_special="all") == theirs.encode(
        sample, allowed_special="all"
    )


def test_importing_the_packages_leaves_heavy_dependencies_unloaded():
    # Import time: tiktoken is paid for by the first estimator, sqlite-utils by the first
    # SQLiteEventStore.
    code = (
        "import sys, eventlog, projections; "
        "loaded = sorted(m for m in ('sqlite_utils', 'tiktoken') if m in sys.modules); "
        "print(loaded)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )

    assert result.stdout.strip() == "[]"
