"""A fact's own expiry (ADR-0082): how a writer's ``expires_at`` is read, what admission makes of
it on an add and a replace (a replace that names none keeps the row's), what the reviewer's
answer may say, and the row an event leaves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import attrs
import pytest

from fermix_memory.domain.admission import AdmissionPolicy, WriteContext
from fermix_memory.domain.errors import InvalidArgument, ReviewerAnswerError
from fermix_memory.domain.event_base import Provenance
from fermix_memory.domain.expiry import EXAMPLE, NEVER, PastExpiry, expiry_time, future_expiry, stated_expiry
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.memory_events import MemoryAdded, MemoryArchived, MemoryReplaced, OperationRefused
from fermix_memory.domain.memory_evolution import evolve_memory
from fermix_memory.domain.operations import AddOperation, ReplaceOperation
from fermix_memory.domain.reviewer_answer import OPERATIONS_SCHEMA, operation_to_dict, parse_reviewer_answer
from fermix_memory.domain.scopes import Reader, WriterKind
from fermix_memory.domain.values import Category, PromoteTarget, Scope, ScopeType, Trust

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = datetime(2026, 6, 1, 9, 30, tzinfo=UTC)
POLICY = AdmissionPolicy()


# --- reading a writer's expiry ------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "utc"), [
    ("2026-06-01T11:30+02:00", LATER),
    ("2026-06-01T09:30Z", LATER),
    (" 2026-06-01T09:30:00+00:00 ", LATER),
    (datetime(2026, 6, 1, 4, 30, tzinfo=timezone(timedelta(hours=-5))), LATER),
    ("9999-12-31T23:59:59.999999+00:00", datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
])
def test_a_time_with_a_zone_is_read_in_utc(raw: object, utc: datetime) -> None:
    moment = expiry_time(raw)
    assert moment == utc and moment is not None and moment.tzinfo is UTC


def test_never_takes_an_expiry_off() -> None:
    assert expiry_time(NEVER) is None and expiry_time(" never ") is None
    with pytest.raises(InvalidArgument):
        expiry_time("Never")


@pytest.mark.parametrize(("raw", "says"), [
    ("2026-06-01T09:30", "has no time zone: give one, e.g. 2027-03-01T09:00Z"),
    (datetime(2026, 6, 1, 9, 30), "has no time zone"),
    ("2026-06-01", "has no time zone"),
    ("tomorrow", "'tomorrow' is not an ISO 8601 time (years 1 to 9999) such as 2027-03-01T09:00Z, nor 'never'"),
    ("", "is not an ISO 8601 time"),
    ("99999-01-01T00:00Z", "is not an ISO 8601 time (years 1 to 9999)"),
    ("2026-06-01T09:30:00." + "0" * 39 + "+00:00", "is not an ISO 8601 time"),  # 65 characters: too long
    ("9999-12-31T23:00-05:00", "is beyond the year 9999 in UTC"),
    (1767225600, "must be an ISO 8601 text such as 2027-03-01T09:00Z, got a value of type int"),
    (None, "got a value of type NoneType"),
])
def test_anything_else_is_an_invalid_argument_that_says_why(raw: object, says: str) -> None:
    with pytest.raises(InvalidArgument, match=r"^the expiry ") as caught:
        expiry_time(raw, "the expiry")
    assert says in str(caught.value)
    assert not isinstance(caught.value, PastExpiry)


def test_a_text_up_to_the_length_limit_is_read() -> None:
    text = "2026-06-01T09:30:00." + "0" * 38 + "+00:00"
    assert len(text) == 64 and expiry_time(f"  {text}  ") == LATER
    assert EXAMPLE == "2027-03-01T09:00Z" and expiry_time(EXAMPLE) == datetime(2027, 3, 1, 9, tzinfo=UTC)


def test_an_expiry_must_be_after_the_write() -> None:
    assert future_expiry(AT + timedelta(microseconds=1), AT) == AT + timedelta(microseconds=1)
    for past in (AT, AT - timedelta(days=1)):
        with pytest.raises(PastExpiry, match=r"^when 2026-0.* is not after now \(2026-03-01T12:00:00\+00:00\):"
                                             " a fact that has expired is not stored$"):
            future_expiry(past, AT, "when")


def test_a_statement_keeps_clears_or_sets_the_expiry() -> None:
    assert stated_expiry(None, LATER, AT) == LATER  # names none: the row's own
    assert stated_expiry(None, None, AT) is None
    assert stated_expiry(NEVER, LATER, AT) is None
    assert stated_expiry("2026-06-01T09:30Z", None, AT) == LATER
    with pytest.raises(PastExpiry, match=r"^x "):
        stated_expiry("2026-01-01T00:00Z", LATER, AT, "x")
    with pytest.raises(InvalidArgument, match=r"^x 'soon'"):
        stated_expiry("soon", LATER, AT, "x")


# --- admission -----------------------------------------------------------------------------------


class Rows:
    def __init__(self, *rows: Memory) -> None:
        self.rows = {r.id: r for r in rows}

    def by_id(self, memory_id: int) -> Memory | None:
        return self.rows.get(memory_id)

    def by_key(self, agent_id: str, owner_id: str, scope: Scope, key: str) -> Memory | None:
        return next((r for r in self.rows.values() if (r.agent_id, r.owner_id, r.scope, r.key)
                     == (agent_id, owner_id, scope, key)), None)


def ctx(writer: WriterKind = WriterKind.OPERATOR, trust: Trust = Trust.OPERATOR) -> WriteContext:
    return WriteContext(writer=writer, reader=Reader(agent_id="ada", owner_id="alice"),
                        provenance=Provenance(agent_id="ada", owner_id="alice", trust=trust))


def row(expires_at: datetime | None = None, *, archived: bool = False) -> Memory:
    return Memory(id=1, agent_id="ada", owner_id="alice", scope_type=ScopeType.OWNER, scope_id="alice",
                  category=Category.GOAL, key="trip", value="Lisbon", promote_target=PromoteTarget.USER_MD,
                  created_at=AT, updated_at=AT, expires_at=expires_at,
                  archived_at=AT if archived else None, archived_by="operator" if archived else None)


def add(expires_at: object = None, value: str = "Lisbon") -> AddOperation:
    return AddOperation(category="goal", key="trip", value=value, expires_at=expires_at)  # type: ignore[arg-type]


def test_an_add_stores_the_expiry_in_utc() -> None:
    [event] = POLICY.decide(add("2026-06-01T11:30+02:00"), ctx(), Rows(), AT)
    assert isinstance(event, MemoryAdded) and event.expires_at == LATER
    [event] = POLICY.decide(add(LATER), ctx(), Rows(), AT)
    assert isinstance(event, MemoryAdded) and event.expires_at == LATER
    [event] = POLICY.decide(add(), ctx(), Rows(), AT)
    assert isinstance(event, MemoryAdded) and event.expires_at is None
    [event] = POLICY.decide(add(NEVER), ctx(), Rows(), AT)
    assert isinstance(event, MemoryAdded) and event.expires_at is None


@pytest.mark.parametrize(("given", "kept"), [(None, LATER), (NEVER, None), ("2026-07-01T00:00Z",
                                                                             datetime(2026, 7, 1, tzinfo=UTC))])
def test_a_replace_keeps_the_expiry_unless_it_names_one(given: str | None, kept: datetime | None) -> None:
    [event] = POLICY.decide(ReplaceOperation(id=1, value="Porto", expires_at=given), ctx(), Rows(row(LATER)), AT)
    assert isinstance(event, MemoryReplaced) and event.expires_at == kept
    # An add of the same key replaces: the same rule.
    [event] = POLICY.decide(add(given, "Porto"), ctx(), Rows(row(LATER)), AT)
    assert isinstance(event, MemoryReplaced) and event.memory_id == 1 and event.expires_at == kept


def test_only_a_new_expiry_is_a_change_and_the_same_one_is_none() -> None:
    [event] = POLICY.decide(ReplaceOperation(id=1, expires_at="2026-06-01T09:30Z"), ctx(), Rows(row()), AT)
    assert isinstance(event, MemoryReplaced) and event.value == "Lisbon" and event.expires_at == LATER
    assert POLICY.decide(ReplaceOperation(id=1, expires_at="2026-06-01T11:30+02:00"), ctx(), Rows(row(LATER)),
                         AT) == []
    assert POLICY.decide(add("2026-06-01T09:30Z"), ctx(), Rows(row(LATER)), AT) == []
    assert POLICY.decide(add(), ctx(), Rows(row(LATER)), AT) == []
    assert POLICY.decide(ReplaceOperation(id=1, expires_at=NEVER), ctx(), Rows(row()), AT) == []
    [event] = POLICY.decide(ReplaceOperation(id=1, expires_at=NEVER), ctx(), Rows(row(LATER)), AT)
    assert isinstance(event, MemoryReplaced) and event.expires_at is None
    [event] = POLICY.decide(add(), ctx(), Rows(row(LATER, archived=True)), AT)  # restating un-archives it
    assert isinstance(event, MemoryReplaced) and event.expires_at == LATER


@pytest.mark.parametrize(("given", "reason", "detail"), [
    ("2026-06-01T09:30", "invalid_expiry", "expires_at 2026-06-01T09:30:00 has no time zone"),
    ("next week", "invalid_expiry", "expires_at 'next week' is not an ISO 8601 time"),
    ("99999-01-01T00:00Z", "invalid_expiry", "is not an ISO 8601 time (years 1 to 9999)"),
    ("2026-03-01T12:00Z", "past_expiry", "is not after now (2026-03-01T12:00:00+00:00)"),
    ("2020-01-01T00:00Z", "past_expiry", "expires_at 2020-01-01T00:00:00+00:00 is not after now"),
])
def test_a_bad_or_past_expiry_is_refused_and_the_refusal_says_why(given: str, reason: str, detail: str) -> None:
    for op, rows in ((add(given), Rows()), (ReplaceOperation(id=1, expires_at=given), Rows(row(LATER))),
                     (add(given, "Porto"), Rows(row()))):
        [event] = POLICY.decide(op, ctx(WriterKind.REVIEWER, Trust.GUEST), rows, AT)
        assert isinstance(event, OperationRefused) and event.reason == reason and detail in event.detail


def test_a_refused_expiry_is_refused_before_the_row_is_looked_at() -> None:
    [event] = POLICY.decide(add("soon"), ctx(), Rows(row()), AT)
    assert isinstance(event, OperationRefused) and event.reason == "invalid_expiry"


# --- the reviewer's answer ------------------------------------------------------------------------


def test_the_reviewer_may_name_an_expiry_on_add_and_replace() -> None:
    ops = parse_reviewer_answer('{"operations": ['
                                '{"op": "add", "category": "goal", "key": "trip", "value": "Lisbon",'
                                ' "expires_at": "2026-06-01T09:30Z"},'
                                '{"op": "replace", "id": 4, "expires_at": "never"},'
                                '{"op": "add", "category": "goal", "key": "k", "value": "v", "expires_at": "soon"}]}')
    assert ops == [add("2026-06-01T09:30Z"), ReplaceOperation(id=4, expires_at=NEVER),
                   AddOperation(category="goal", key="k", value="v", expires_at="soon")]  # admission's to refuse
    assert [operation_to_dict(op).get("expires_at") for op in ops] == ["2026-06-01T09:30Z", NEVER, "soon"]
    assert operation_to_dict(add(LATER))["expires_at"] == "2026-06-01T09:30:00+00:00"
    assert "expires_at" not in operation_to_dict(add()) and "expires_at" not in operation_to_dict(
        ReplaceOperation(id=4, value="v"))
    assert operation_to_dict(ReplaceOperation(id=4, expires_at=NEVER)) == {"op": "replace", "id": 4,
                                                                           "expires_at": NEVER}


@pytest.mark.parametrize("op", [
    '{"op": "add", "category": "goal", "key": "k", "value": "v", "expires_at": 1767225600}',
    '{"op": "replace", "id": 4, "expires_at": null}',
    '{"op": "archive", "id": 4, "expires_at": "2026-06-01T09:30Z"}',
])
def test_an_expiry_that_is_not_a_string_or_on_an_archive_fails_the_answer(op: str) -> None:
    with pytest.raises(ReviewerAnswerError, match=r"operations\[0\]"):
        parse_reviewer_answer('{"operations": [' + op + "]}")


def test_the_structured_output_schema_offers_it_on_add_and_replace_only() -> None:
    items = OPERATIONS_SCHEMA["properties"]["operations"]["items"]["anyOf"]  # type: ignore[index]
    assert ["expires_at" in item["properties"] for item in items] == [True, True, False]


# --- the row an event leaves ----------------------------------------------------------------------


def test_the_row_follows_the_expiry_its_events_state() -> None:
    p = Provenance(agent_id="ada", owner_id="alice", trust=Trust.OPERATOR)
    added = evolve_memory(None, 1, MemoryAdded(at=AT, agent_id="ada", owner_id="alice", scope_type=ScopeType.OWNER,
                                                scope_id="alice", category=Category.GOAL, key="trip", value="Lisbon",
                                                provenance=p, expires_at=LATER))
    assert added is not None and added.expires_at == LATER
    archived = evolve_memory(added, 2, MemoryArchived(at=AT, memory_id=1, archived_by="operator", reason="",
                                                      provenance=p))
    assert archived is not None and archived.expires_at == LATER  # archive and restore leave it
    replaced = evolve_memory(archived, 3, MemoryReplaced(at=AT, memory_id=1, category=Category.GOAL, key="trip",
                                                         value="Porto", confidence=1.0, previous_value="Lisbon",
                                                         provenance=p))
    assert replaced is not None and replaced.expires_at is None  # the event states the row's expiry
    assert attrs.evolve(replaced, expires_at=LATER) == evolve_memory(
        replaced, 4, MemoryReplaced(at=AT, memory_id=1, category=Category.GOAL, key="trip", value="Porto",
                                    confidence=1.0, previous_value="Porto", provenance=p, expires_at=LATER))
