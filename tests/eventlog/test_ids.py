"""Memory ids <-> stored keys: one key per id, never shared, and reversible."""

from __future__ import annotations

import enum
import re
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventlog.ids import StreamKey, id_from_json, memory_id_from_key, memory_key

ids = st.recursive(
    st.text() | st.integers() | st.uuids(),
    lambda inner: st.lists(inner, max_size=3).map(tuple),
    max_leaves=6,
)


@given(ids)
def test_round_trip(memory_id):
    assert memory_id_from_key(memory_key(memory_id)) == memory_id


@given(ids, ids)
def test_distinct_ids_have_distinct_keys(a, b):
    assert (memory_key(a) == memory_key(b)) == (a == b and type(a) is type(b))


def test_plain_strings_are_their_own_key():
    assert memory_key("user-1") == "user-1"
    assert memory_key("") == ""
    assert memory_key("~x") == "~~x"
    assert memory_key(7) == "~i:7"
    assert memory_key(uuid.UUID(int=1)) == "~u:00000000-0000-0000-0000-000000000001"
    assert memory_key(("u", 1)) == '~t:["u",1]'


class _Channel(str, enum.Enum):  # noqa: UP042 - the mixin, not StrEnum, is the case
    """A str-mixin enum, as apps name tenants or channels: its str() is "_Channel.WEB"."""

    WEB = "web"
    SYSTEM = "~sys:compaction"


def test_a_str_enum_member_is_the_string_it_equals():
    # memory_key took str(member), which for a (str, Enum) member is "_Channel.WEB": the id
    # equal to "web" got another memory than "web" - and the one of the literal id
    # "_Channel.WEB" - while inside a tuple it was "web" (JSON writes the value).
    assert memory_key(_Channel.WEB) == memory_key("web") == "web"
    assert memory_key(_Channel.WEB) != memory_key("_Channel.WEB")
    assert memory_key(("u", _Channel.WEB)) == memory_key(("u", "web"))
    # Check the value still goes through the str rules (the tag doubled, never a system key).
    assert memory_key(_Channel.SYSTEM) == "~~sys:compaction"
    assert memory_id_from_key(memory_key(_Channel.WEB)) == "web"


def test_nul_is_never_stored_raw():
    key = memory_key("a\x00b")
    assert "\x00" not in key
    assert memory_id_from_key(key) == "a\x00b"
    assert "\x00" not in memory_key(("a\x00", 1))


def test_system_keys_pass_through():
    assert memory_key(StreamKey("~sys:compaction")) == "~sys:compaction"
    assert memory_id_from_key("~sys:compaction") == "~sys:compaction"


@pytest.mark.parametrize(
    "key",
    ["~x:1", "~i:abc", '~t:{"a":1}', "~t:not json", "~u:zz", '~t:["a",{"uuid":"zz"}]', "~t:[true]"],
)
def test_foreign_keys_are_rejected(key):
    with pytest.raises(ValueError, match="not a chatledger key"):
        memory_id_from_key(key)


@pytest.mark.parametrize(
    ("value", "bad"),
    [(True, "true"), (1.5, "1.5"), ({"uuid": "zz"}, '{"uuid": "zz"}'), (["a", [None]], "null")],
)
def test_the_id_grammar_names_the_part_that_is_not_an_id(value, bad):
    # One grammar for tagged stored keys and the CLI's --id-json (which adds its option name).
    with pytest.raises(ValueError, match=re.escape(f"{bad} is not a memory id part")):
        id_from_json(value)


def test_the_id_grammar_reads_every_kind_of_part():
    u = "12345678-1234-5678-1234-567812345678"
    assert id_from_json(["a", 1, {"uuid": u}, ["b"]]) == ("a", 1, uuid.UUID(u), ("b",))


@pytest.mark.parametrize("memory_id", ["a\ud800b", ("user", "a\ud800b"), ("user", ("a\ud800b",))])
def test_a_lone_surrogate_is_refused_in_a_string_id_or_any_part_of_a_tuple(memory_id):
    # Checked here, where every backend gets its key: no store can keep a lone surrogate.
    with pytest.raises(ValueError, match=r"holds a lone surrogate '\\ud800'"):
        memory_key(memory_id)


def test_text_beyond_ascii_is_kept_as_is():
    assert memory_key("é-🙂") == "é-🙂"
    assert memory_key(("é", 1)) == '~t:["é",1]'


def test_a_long_id_is_shown_cut_to_80_characters_in_the_error():
    whole = "x" * 72 + "\ud800"  # its repr is 80 characters: shown whole
    with pytest.raises(ValueError) as caught:
        memory_key(whole)
    assert f"memory id {whole!r} holds" in str(caught.value)
    longer = "x" * 73 + "\ud800"  # 81: cut to 77 and an ellipsis
    with pytest.raises(ValueError) as caught:
        memory_key(longer)
    assert f"memory id {repr(longer)[:77]}... holds" in str(caught.value)


def test_a_doubled_tag_is_undone_on_the_way_back():
    assert memory_id_from_key("~~x") == "~x"
    assert memory_id_from_key("~~") == "~"
