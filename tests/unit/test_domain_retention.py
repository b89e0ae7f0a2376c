"""Retention policies as written, and what falls due when (domain.retention)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.retention import (
    EXPIRES_AT,
    ConversationSummary,
    PolicyError,
    RetentionPolicy,
    RowSummary,
    aware,
    conversation_due,
    conversation_due_at,
    outlook,
    parse_duration,
    parse_policies,
    parse_policy,
    row_due,
    row_due_at,
)
from fermix_memory.domain.values import ConversationKey

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def policy(**entry: Any) -> RetentionPolicy:
    return parse_policy({"name": "p", "after": "1d", **entry})


def conv(key: str = "kiosk:1", *, agent: str = "shop", newest: datetime = T0, last: int = 5,
         trusts: tuple[str, ...] = ("guest",)) -> ConversationSummary:
    return ConversationSummary(agent_id=agent, conversation=ConversationKey.parse(key), newest=newest,
                               last_message_id=last, trusts=frozenset(trusts))


def row(category: str = "identity", *, memory_id: int = 9, agent: str = "ada", updated: datetime = T0,
        expires: datetime | None = None) -> RowSummary:
    return RowSummary(memory_id=memory_id, agent_id=agent, owner_id="alice", category=category, updated_at=updated,
                      expires_at=expires)


# --- durations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [
    ("1s", 1), ("90s", 90), ("2m", 120), ("3h", 10800), ("30d", 30 * 86400), ("2w", 14 * 86400),
    ("366000d", 366000 * 86400),
])
def test_a_duration_is_a_whole_number_and_a_unit(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "30", "d", "1.5d", "-1d", "30 d", " 30d", "30D", "30dd", "0s", "0d",
                                  "366001d", "1000000000000000s", 30, None, "\uff13d"])
def test_anything_else_is_refused_as_after(text: object) -> None:
    with pytest.raises(PolicyError) as refused:
        parse_duration(text)
    assert refused.value.key == "after" and isinstance(refused.value, DomainError)


def test_the_largest_duration_is_a_thousand_years_of_366_days() -> None:
    assert parse_duration(f"{1000 * 366 * 86400}s") == timedelta(days=366000)
    with pytest.raises(PolicyError, match="thousand years"):
        parse_duration(f"{1000 * 366 * 86400 + 1}s")
    with pytest.raises(PolicyError, match="more than zero"):
        parse_duration("0w")


# --- policies ----------------------------------------------------------------------------------


def test_a_policy_keeps_what_it_was_given() -> None:
    p = parse_policy({"name": "kiosk", "after": "30d", "channel_prefix": "kiosk:", "agent_id": "shop"})
    assert p == RetentionPolicy(name="kiosk", after="30d", span=timedelta(days=30), selector="channel_prefix",
                                value="kiosk:", agent_id="shop")
    assert not p.covers_rows
    assert policy(category="goal").covers_rows and policy(category="goal").agent_id is None
    assert policy(trust="operator").value == "operator" and not policy(trust="guest").covers_rows


@pytest.mark.parametrize(("entry", "key", "words"), [
    ({"after": "1d", "trust": "guest"}, "name", "name is required"),
    ({"name": "p", "trust": "guest"}, "after", "after is required"),
    ({"name": "p", "after": "1d"}, "category", "exactly one of"),
    ({"name": "p", "after": "1d", "trust": "guest", "category": "goal"}, "trust", "exactly one of"),
    ({"name": "p", "after": "1d", "trust": "guest", "channel_prefix": "k", "category": "goal"}, "channel_prefix",
     "exactly one of"),
    ({"name": "p", "after": "1d", "trust": "guest", "colour": "red"}, "colour", "unknown key colour"),
    ({"name": "p", "after": "1d", "category": "health"}, "category", "category must be one of identity"),
    ({"name": "p", "after": "1d", "trust": "everyone"}, "trust", 'trust must be "guest" or "operator"'),
    ({"name": "p", "after": "1d", "channel_prefix": ""}, "channel_prefix", "1 to 256 characters"),
    ({"name": "p", "after": "1d", "channel_prefix": "k" * 257}, "channel_prefix", "1 to 256 characters"),
    ({"name": "p", "after": "1d", "channel_prefix": 7}, "channel_prefix", "must be a string"),
    ({"name": "p", "after": "1d", "trust": "guest", "agent_id": ""}, "agent_id", "agent_id"),
    ({"name": "p", "after": "1d", "trust": "guest", "agent_id": 3}, "agent_id", "must be a string"),
    ({"name": "", "after": "1d", "trust": "guest"}, "name", "name"),
    ({"name": EXPIRES_AT, "after": "1d", "trust": "guest"}, "name", "another name"),
    ({"name": "p", "after": 30, "trust": "guest"}, "after", "must be a string"),
])
def test_a_policy_at_fault_names_its_key(entry: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(PolicyError, match=words) as refused:
        parse_policy(entry)
    assert refused.value.key == key and refused.value.index is None


def test_a_prefix_of_256_characters_is_enough() -> None:
    assert policy(channel_prefix="k" * 256).value == "k" * 256


def test_policies_keep_their_order_and_unique_names() -> None:
    found = parse_policies([{"name": "a", "after": "1d", "trust": "guest"},
                            {"name": "b", "after": "2d", "category": "goal"}])
    assert [p.name for p in found] == ["a", "b"]
    assert parse_policies([]) == ()
    with pytest.raises(PolicyError, match="name a is used by an earlier policy") as twice:
        parse_policies([{"name": "a", "after": "1d", "trust": "guest"}, {"name": "b", "after": "1d", "trust": "guest"},
                        {"name": "a", "after": "1d", "trust": "guest"}])
    assert twice.value.key == "name" and twice.value.index == 2
    with pytest.raises(PolicyError) as bad:
        parse_policies([{"name": "a", "after": "1d", "trust": "guest"}, {"name": "b", "after": "1x", "trust": "guest"}])
    assert (bad.value.key, bad.value.index) == ("after", 1)
    with pytest.raises(PolicyError) as first:
        parse_policies([{"name": "a", "after": "1x", "trust": "guest"}])
    assert first.value.index == 0


# --- what falls due ----------------------------------------------------------------------------


def test_a_time_without_an_offset_is_utc() -> None:
    assert aware(datetime(2026, 3, 1, 9, 0)) == T0
    assert aware(T0) is T0


def test_a_channel_prefix_covers_the_conversations_whose_key_starts_with_it() -> None:
    p = policy(channel_prefix="kiosk:")
    assert conversation_due_at(p, conv("kiosk:1")) == T0 + timedelta(days=1)
    assert conversation_due_at(p, conv("kiosk:1:thread")) == T0 + timedelta(days=1)
    assert conversation_due_at(p, conv("kiosks:1")) is None
    assert conversation_due_at(p, conv("telegram:kiosk:1")) is None
    assert conversation_due_at(policy(channel_prefix="kiosk:1:t"), conv("kiosk:1:thread")) is not None
    assert conversation_due_at(p, conv("kiosk:1", trusts=("guest", "operator"))) is not None  # trust is no matter


def test_a_trust_covers_conversations_in_which_every_message_has_it() -> None:
    p = policy(trust="guest")
    assert conversation_due_at(p, conv("telegram:1")) == T0 + timedelta(days=1)
    assert conversation_due_at(p, conv("telegram:1", trusts=("guest", "operator"))) is None
    assert conversation_due_at(p, conv("telegram:1", trusts=("operator",))) is None
    assert conversation_due_at(policy(trust="operator"), conv("telegram:1", trusts=("operator",))) is not None


def test_an_agent_keeps_a_policy_to_its_own() -> None:
    p = policy(trust="guest", agent_id="shop")
    assert conversation_due_at(p, conv(agent="shop")) is not None
    assert conversation_due_at(p, conv(agent="ada")) is None
    r = policy(category="identity", agent_id="ada")
    assert row_due_at(r, row(agent="ada")) is not None
    assert row_due_at(r, row(agent="shop")) is None


def test_a_category_covers_rows_only_and_a_selector_of_conversations_no_row() -> None:
    assert row_due_at(policy(category="identity"), row("identity", updated=T0)) == T0 + timedelta(days=1)
    assert row_due_at(policy(category="identity"), row("goal")) is None
    assert row_due_at(policy(trust="guest"), row()) is None
    assert row_due_at(policy(channel_prefix="k"), row()) is None
    assert conversation_due_at(policy(category="identity"), conv()) is None


def test_naive_stored_times_count_as_utc() -> None:
    naive = datetime(2026, 3, 1, 9, 0)
    assert conversation_due_at(policy(trust="guest"), conv(newest=naive)) == T0 + timedelta(days=1)
    assert row_due_at(policy(category="identity"), row(updated=naive)) == T0 + timedelta(days=1)
    assert row_due(tuple(), row(expires=naive)) is not None
    found = row_due((), row(expires=naive))
    assert found is not None and found.at == T0


def test_the_first_time_wins_and_the_earlier_policy_a_tie() -> None:
    short, long_ = policy(name="short", after="1d", trust="guest"), policy(name="long", after="2d", trust="guest")
    found = conversation_due([long_, short], conv())
    assert found is not None and (found.policy, found.at) == ("short", T0 + timedelta(days=1))
    same = policy(name="same", after="1d", channel_prefix="kiosk")
    found = conversation_due([short, same], conv())
    assert found is not None and found.policy == "short"
    found = conversation_due([same, short], conv())
    assert found is not None and found.policy == "same"
    assert conversation_due([], conv()) is None
    assert conversation_due([policy(category="goal")], conv()) is None


def test_a_rows_own_expiry_counts_beside_the_policies() -> None:
    p = policy(name="health", after="2d", category="identity")
    found = row_due([p], row(expires=T0 + timedelta(days=1)))
    assert found is not None and (found.policy, found.at) == (EXPIRES_AT, T0 + timedelta(days=1))
    found = row_due([p], row(expires=T0 + timedelta(days=3)))
    assert found is not None and found.policy == "health"
    found = row_due([p], row(expires=T0 + timedelta(days=2)))
    assert found is not None and found.policy == "health"  # a policy wins a tie
    assert row_due([p], row("goal")) is None
    found = row_due([p], row("goal", expires=T0))
    assert found is not None and found.policy == EXPIRES_AT


def test_the_outlook_sorts_each_item_under_the_policy_that_erases_it_first() -> None:
    kiosk, guests = policy(name="kiosk", after="30d", channel_prefix="kiosk:"), policy(name="guests", trust="guest")
    health = policy(name="health", after="14d", category="identity")
    now = T0 + timedelta(days=1)
    conversations = [conv("kiosk:1", trusts=("guest", "operator")), conv("kiosk:2"), conv("telegram:1"),
                     conv("telegram:2", newest=T0 + timedelta(hours=1)), conv("telegram:3", trusts=("operator",))]
    rows = [row(memory_id=1), row(memory_id=2, updated=T0 - timedelta(days=14)),
            row("goal", memory_id=3, expires=now), row("goal", memory_id=4, expires=now + timedelta(seconds=1)),
            row("goal", memory_id=5)]
    seen = outlook([kiosk, guests, health], conversations, rows, now)
    by_name = {p.name: p for p in seen.policies}
    assert list(by_name) == ["kiosk", "guests", "health", EXPIRES_AT]
    assert [str(c.conversation) for c in by_name["guests"].conversations] == ["kiosk:2", "telegram:1"]
    assert by_name["guests"].next_due == T0 + timedelta(days=1, hours=1)
    assert by_name["kiosk"].conversations == () and by_name["kiosk"].next_due == T0 + timedelta(days=30)
    assert [r.memory_id for r in by_name["health"].rows] == [2]
    assert by_name["health"].next_due == T0 + timedelta(days=14)
    assert [r.memory_id for r in by_name[EXPIRES_AT].rows] == [3]
    assert by_name[EXPIRES_AT].next_due == now + timedelta(seconds=1)
    assert seen.due_count == 4 and by_name["guests"].due_count == 2
    assert seen.next_due == now + timedelta(seconds=1)


def test_the_next_due_time_is_the_earliest_of_a_policys_items() -> None:
    guests = policy(name="guests", trust="guest")
    later = [conv("telegram:1", newest=T0 + timedelta(hours=5)), conv("telegram:2", newest=T0 + timedelta(hours=2)),
             conv("telegram:3", newest=T0 + timedelta(hours=3))]
    seen = outlook([guests], later, [], T0)
    assert seen.policies[0].next_due == T0 + timedelta(days=1, hours=2)
    assert seen.due_count == 0
    empty = outlook([guests], [], [], T0)
    assert empty.next_due is None and empty.due_count == 0 and [p.name for p in empty.policies] == ["guests",
                                                                                                    EXPIRES_AT]
