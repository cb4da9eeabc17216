"""Recorded model calls (`context_sent`): what each sent, what it left out and why, and what
it would have sent under another policy (`what_if_call`), on SQLite files."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("langchain_core", reason="the langchain extra is not installed")

from eventlog import SQLiteEventStore
from projections import MessageWindowPolicy, TokenWindowPolicy, what_if_call
from projections.calls import LeftOut, model_call, model_calls
from projections.tokens import OpenAiTokenCountEstimator
from tests.calls_scenario import ESTIMATOR_MODEL, TOKEN_BUDGET, record_history, record_session

Q3 = {"new": {"role": "user", "content": "q3"}}


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "calls.db"
    record_session(path)
    record_history(path)
    with SQLiteEventStore(path) as store:
        yield store


def _left(call) -> list[tuple[int, int, int, str]]:
    return [(g.first[0], g.last[0], g.size, g.reason) for g in call.left]


def test_each_call_says_what_it_left_out_and_why(db) -> None:
    calls = list(model_calls(db, "conv", 1, None))
    # Check every recorded call is found, and re-running its policy gives what was sent.
    assert [c.seq for c in calls] == [3, 10, 14]
    assert [c.reproduced for c in calls] == [True, True, True]
    first, second, third = calls
    assert first.sent == (
        {"ref": [1, 0]},
        {"ref": [2, 0]},
        {"new": {"role": "user", "content": "q2?"}},
    )
    assert first.left == []
    # Check the window, the validity rules and a retraction each give their reason.
    assert second.sent == ({"ref": [4, 0]}, {"ref": [6, 0]}, Q3)
    assert _left(second) == [
        (1, 2, 2, "outside the last 5 items"),
        (5, 5, 1, "tool call without its result dropped for validity for openai"),
        (7, 7, 1, "tool result without its call dropped for validity for openai"),
        (8, 8, 1, "retracted at seq 9"),
    ]
    # Check a token budget and a clear: the list before the clear is named once, as a run.
    assert (third.policy.split(":")[:3], third.profile, third.tokens) == (
        ["tokens", str(TOKEN_BUDGET), "openai"],
        None,
        15,
    )
    assert third.sent == ({"ref": [13, 0]}, {"new": {"role": "user", "content": "q5"}})
    assert third.left == [
        LeftOut((1, 0), (7, 0), 6, "before the last clear (seq 11)"),
        LeftOut((12, 0), (12, 0), 1, f"over the {TOKEN_BUDGET}-token budget"),
    ]


def test_a_langchain_window_says_what_it_left_out(db) -> None:
    first, second = model_calls(db, "lc", 1, None)
    assert (first.seq, first.adapter, first.reproduced) == (5, "langchain", True)
    assert first.sent == ({"ref": [1, 0]}, {"ref": [3, 0]}, {"ref": [4, 0]})
    assert _left(first) == [(2, 2, 1, "outside the last 3 items")]
    assert second.sent == ({"ref": [4, 0]}, {"ref": [6, 0]}, {"ref": [7, 0]})
    assert _left(second) == [
        (1, 1, 1, "system message replaced by a newer one"),
        (2, 3, 2, "outside the last 3 items"),
    ]


def test_no_window_recorded_at_other_events(db) -> None:
    assert model_call(db, "conv", 9) is None
    assert model_call(db, "conv", 10) is not None
    with pytest.raises(ValueError, match="no window recorded at seq 9"):
        what_if_call(db, "conv", 9, MessageWindowPolicy(5))


def test_what_if_call_names_a_policy_that_is_not_one(db) -> None:
    with pytest.raises(TypeError, match=r"^what_if_call: policy must be a WindowPolicy .* str"):
        what_if_call(db, "conv", 10, "messages:5")  # type: ignore[arg-type]


def test_the_recorded_policy_reproduces_the_call_exactly(db) -> None:
    again = what_if_call(db, "conv", 10, MessageWindowPolicy(5), valid_for="openai")
    assert again.same
    assert again.sent == model_call(db, "conv", 10).sent
    assert again.policy == "messages:5"
    estimator = OpenAiTokenCountEstimator(ESTIMATOR_MODEL)
    tokens = what_if_call(db, "conv", 14, TokenWindowPolicy(TOKEN_BUDGET, estimator))
    assert tokens.same
    assert tokens.sent == ({"ref": [13, 0]}, {"new": {"role": "user", "content": "q5"}})


def test_another_policy_gives_another_input(db) -> None:
    # Check a wider window without a profile sends the tool call and its result as well.
    wider = what_if_call(db, "conv", 10, MessageWindowPolicy(20))
    assert not wider.same
    assert wider.sent == (
        {"ref": [1, 0]},
        {"ref": [2, 0]},
        {"ref": [4, 0]},
        {"ref": [5, 0]},
        {"ref": [6, 0]},
        {"ref": [7, 0]},
        Q3,
    )
    assert [(g.first[0], g.reason) for g in wider.left] == [(8, "retracted at seq 9")]
    # Check a narrower one, and that retracted and cleared items are never sent.
    narrow = what_if_call(db, "conv", 14, MessageWindowPolicy(1))
    assert narrow.sent == ({"new": {"role": "user", "content": "q5"}},)
    assert narrow.left[-1] == LeftOut((12, 0), (13, 0), 2, "outside the last item")
    # Check a LangChain read under a window of 2.
    lc = what_if_call(db, "lc", 8, MessageWindowPolicy(2))
    assert lc.sent == ({"ref": [6, 0]}, {"ref": [7, 0]})
    assert not lc.same


def test_a_quarantined_record_is_named_as_such(tmp_path) -> None:
    import sqlite3

    from eventlog.testing.records import user_payload

    path = tmp_path / "calls.db"
    record_session(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET payload = ? WHERE seq = 2", (user_payload("damaged"),))
    with SQLiteEventStore(path) as store:
        store.quarantine("conv", 2, reason="disk fault")
        call = model_call(store, "conv", 10)
    assert call is not None
    assert _left(call)[0] == (1, 1, 1, "outside the last 5 items")
    assert _left(call)[1] == (2, 2, 1, "left out as damaged (quarantined)")
    # Check the rest of the list still gives its reasons, and the call is still reproduced
    # (it did not send event 2).
    assert call.reproduced
    assert _left(call)[-1] == (8, 8, 1, "retracted at seq 9")


@pytest.mark.parametrize(
    "policy",
    [
        MessageWindowPolicy(7),
        MessageWindowPolicy(7, always_keep_system_message_first=True, evict_to=0.5),
        TokenWindowPolicy(900, OpenAiTokenCountEstimator(ESTIMATOR_MODEL)),
        TokenWindowPolicy(
            900,
            OpenAiTokenCountEstimator(ESTIMATOR_MODEL),
            always_keep_system_message_first=True,
            evict_to=0.7,
        ),
    ],
)
def test_a_recorded_policy_is_rebuilt_as_it_was(policy) -> None:
    from projections.adapters.item_list import describe
    from projections.calls import parse_recorded_policy

    text = describe(policy, "conv")
    rebuilt = parse_recorded_policy(text)
    assert describe(rebuilt, "conv") == text
    assert type(rebuilt) is type(policy)


def test_a_policy_that_cannot_be_rebuilt_is_refused_by_name() -> None:
    from projections.calls import parse_recorded_policy

    with pytest.raises(ValueError, match=r"'tokens:900:my-estimator' cannot be re-run here"):
        parse_recorded_policy("tokens:900:my-estimator")


def test_a_call_the_policy_does_not_reproduce_says_so(tmp_path) -> None:
    import asyncio

    from projections.adapters.openai_agents import LedgerSession

    items: list[Any] = [{"role": "user", "content": f"m{i}"} for i in range(4)]
    with SQLiteEventStore(tmp_path / "s.db") as store:
        session = LedgerSession("conv", store=store)
        asyncio.run(session.add_items(items))
        callback = session.window_callback(MessageWindowPolicy(10))

        async def run() -> None:
            history: list[Any] = list(await session.get_items())
            await callback(history[-2:], [])  # the app gave the callback only part of the list

        asyncio.run(run())
        call = model_call(store, "conv", 5)
    assert call is not None
    assert call.sent == ({"ref": [3, 0]}, {"ref": [4, 0]})
    assert call.reproduced is False
    assert _left(call) == [
        (1, 2, 2, "not sent, though re-running the recorded policy sends it (not reproduced)")
    ]


def _u(text: str) -> Any:
    return {"role": "user", "content": text}


def _record_call(session: Any, policy: Any, new: list[Any]) -> None:
    import asyncio

    async def run() -> None:
        callback = session.window_callback(policy)
        await callback(list(await session.get_items()), new)

    asyncio.run(run())


def test_calls_after_a_purge_a_quarantined_record_and_an_erasure_are_read_not_crashed(
    tmp_path,
) -> None:
    import asyncio
    import sqlite3

    from projections.adapters.openai_agents import LedgerSession

    path = tmp_path / "odd.db"
    with SQLiteEventStore(path) as store:
        # A purged session continued: the event before the tombstone is gone.
        purged = LedgerSession("purged", store=store)
        asyncio.run(purged.add_items([_u("q1"), _u("q2")]))
        store.purge("purged", expected_seq=2, reason="retention")
        purged = LedgerSession("purged", store=store)
        asyncio.run(purged.add_items([_u("q3")]))
        _record_call(purged, MessageWindowPolicy(5), [_u("q4")])
        # A clear whose event before it is later acknowledged as damaged.
        cleared = LedgerSession("cleared", store=store)
        asyncio.run(cleared.add_items([_u("q1"), _u("q2")]))
        asyncio.run(cleared.clear_session())
        asyncio.run(cleared.add_items([_u("q3")]))
        _record_call(cleared, MessageWindowPolicy(5), [_u("q4")])
        # An erased session whose call was recorded before the erasure.
        erased = LedgerSession("erased", store=store)
        asyncio.run(erased.add_items([_u("q1"), _u("q2")]))
        _record_call(erased, MessageWindowPolicy(5), [_u("q3")])
        store.erase("erased", reason="a request")
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE events SET payload = replace(payload, 'q2', 'XX') "
            "WHERE stream_id = 'cleared' AND seq = 2"
        )
    with SQLiteEventStore(path) as store:
        store.quarantine("cleared", 2, reason="disk fault")
        for memory in ("purged", "cleared"):
            call = model_call(store, memory, 5)
            assert call is not None
            assert call.reproduced is True
            assert [e.get("ref") for e in call.sent] == [[4, 0], None]
            assert what_if_call(store, memory, 5, MessageWindowPolicy(1)).same is False
        # An erased call is no call one can read: "no window recorded", never a crash.
        assert model_call(store, "erased", 3) is None
        assert list(model_calls(store, "erased", 1, None)) == []
        with pytest.raises(ValueError, match=r"no window recorded at seq 3 .*content was erased"):
            what_if_call(store, "erased", 3, MessageWindowPolicy(1))
