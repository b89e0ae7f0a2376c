"""Every public method of MemorySystem and of its Session, fed arbitrary JSON-ish values: a
result or a FermixError.

The methods are found with ``inspect``, so a new public method is fuzzed without touching this
file: ``VALID`` only gives well-formed arguments to start from, so that a fuzzed argument is
checked past the others. Any argument without one is always fuzzed.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import itertools
import json
from collections.abc import Iterator
from concurrent.futures import Future
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fermix_memory import FermixError, MemorySystem, Session

AGENT, OWNER_ID, CONV = "ada", "alice", "telegram:42"
OWNER = {"agent_id": AGENT, "owner_id": OWNER_ID}
TURN = {**OWNER, "conversation": CONV}
LINE = json.dumps({"agent_id": AGENT, "owner_id": OWNER_ID, "channel": "telegram", "chat_id": "42",
                   "role": "user", "sender": OWNER_ID, "content": "I drink my coffee black"})

# Well-formed arguments per method; the fuzzer replaces one or two of them per call.
VALID: dict[str, dict[str, Any]] = {
    "open": {},  # home is always a fresh folder, see call()
    "close": {},
    "append_message": {**TURN, "role": "user", "sender": OWNER_ID, "content": "I live in Paris"},
    "history": {"agent_id": AGENT, "conversation": CONV},
    "messages": {"agent_id": AGENT, "conversation": CONV, "after_id": 0, "limit": 5},
    "reviewed_up_to": TURN,
    "awaiting_review": OWNER,
    "conversation_state": {"agent_id": AGENT, "conversation": CONV},
    "events": {"after": 0},
    "log_entries": {"after": 0, "kind": "message.appended"},
    "clear_window": {"agent_id": AGENT, "conversation": CONV},
    "retract_newest_message": {**TURN, "trust": "guest"},
    "import_history": {"lines": [LINE]},
    "export_history": {},
    "write_memory": {"operations": {"op": "add", "category": "preference", "key": "coffee", "value": "black"},
                     **OWNER},
    "restore": {"memory_id": 1},
    "memory": {"memory_id": 1},
    "explain": {"memory_id": 1},
    "memories": {},
    "erased_memories": {"as_of": "2026-01-01T00:00:00Z", **OWNER},
    "recall": {"query": "paris", **OWNER},
    "before_turn": TURN,
    "after_turn": TURN,
    "wait_for_background": {},
    "handle_command": {"text": "/new", **TURN},
    "compact": {"agent_id": AGENT, "conversation": CONV},
    "record_transcript": {**OWNER, "device_id": "phone", "role": "user", "text": "hello"},
    "review_now": {},
    "tool_definitions": {},
    "dispatch_tool": {"name": "memory_recall", "arguments": {"query": "paris"}, **TURN},
    "register_memory_source": {"source_id": "notes", **OWNER, "source_type": "notes", "name": "Notes"},
    "save_job": {"job_id": "daily", **OWNER, "name": "Daily", "schedule": "0 9 * * *", "prompt": "Summarise"},
    "claim_job_run": {"run_id": "r0", "job_id": "daily"},
    "record_job_run": {"run_id": "r1", "job_id": "daily", "status": "succeeded",
                       "started_at": datetime(2026, 1, 1, 9, tzinfo=UTC)},
    "memory_source": {"source_id": "notes"},
    "memory_sources": {**OWNER, "limit": 5},
    "job": {"job_id": "daily"},
    "jobs": OWNER,
    "job_run": {"run_id": "r1"},
    "job_runs": {"job_id": "daily", "limit": 5},
    "compose_prompt": {**TURN, "system": "You are Ada.", "style": "anthropic"},
    "session": {**TURN, "trust": "guest"},
    "prompt_file": OWNER,
    "rebuild_prompt_files": OWNER,
    "resources": {},
    "resource_history": {"name": "user_md", **OWNER},
    "resource_revision": {"name": "user_md", "revision": 1, **OWNER},
    "resource_diff": {"name": "user_md", "a": 1, "b": 1, **OWNER},
    "resource_rollback": {"name": "user_md", "revision": 1, **OWNER},
    "forget_owner": {"owner_id": "mallory"},
    "verify": {},
    "replay_into": {},  # target_dir is always a fresh folder, see call()
}
# The same for the methods of a session (memory.session(**TURN)).
SESSION_VALID: dict[str, dict[str, Any]] = {
    "append": {"role": "user", "content": "I live in Paris"},
    "history": {},
    "recall": {"query": "paris"},
    "before_turn": {},
    "compose_prompt": {"system": "You are Ada.", "style": "openai"},
    "after_turn": {"peak_prompt_tokens": 10},
    "handle_command": {"text": "/new"},
    "retract_newest": {},
    "dispatch_tool": {"name": "memory_recall", "arguments": {"query": "paris"}},
}
PATH_ARGUMENTS = {("open", "home"), ("replay_into", "target_dir")}
NOT_FUZZED = {"close"}  # ends the home every other method runs on; covered by its own test


def nested(depth: int, leaf: Any, as_list: bool) -> Any:
    """``leaf`` inside ``depth`` lists (or mappings), built with the garbage collector paused: the
    containers hold no cycles, and 100,000 new ones would start full collections otherwise."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        for _ in range(depth):
            leaf = [leaf] if as_list else {"k": leaf}
    finally:
        if collecting:
            gc.enable()
    return leaf


_TEXT = st.text(st.characters(blacklist_categories=()), max_size=12)  # surrogates and NUL included
_SPECIAL_TEXT = st.sampled_from([
    "", " ", "\x00", "a\x00b", "\ud800", "x" * 300, "y" * 1_100_000, "telegram:42", "telegram:42:t", ":",
    AGENT, OWNER_ID, "user", "assistant", "operator", "guest", "user_md", "memory_md", "/new", "/compact", "/clear",
    "add", "memory_store", "memory_recall", "memory_sources_list", "openai", "anthropic", "1", "-1", "nan", "{}",
    "2026-01-01T00:00:00", "not a time", "* * * * *", LINE,
])
def too_long_to_print() -> int:
    return 10**5000  # str() refuses it: an error message that shows it fails


_INTS = st.one_of(
    st.integers(-3, 3),
    st.integers(),
    st.sampled_from([2**31, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**70, -(2**70)]),
    st.builds(too_long_to_print),
)
_SCALARS = st.one_of(st.none(), st.booleans(), _INTS, st.floats(), _TEXT, _SPECIAL_TEXT)
# Past the interpreter's recursion limit too: repr() or json of such a value raises RecursionError.
_DEPTHS = st.one_of(st.integers(0, 500), st.sampled_from([1_200, 5_000, 100_000]))
_DEEP = st.builds(nested, _DEPTHS, _SCALARS, st.booleans())
JSONISH = st.one_of(
    st.recursive(_SCALARS, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_TEXT, kids, max_size=3),
                 max_leaves=8),
    _DEEP,
    st.fixed_dictionaries({"op": st.sampled_from(["add", "replace", "archive"])},
                          optional={k: _SCALARS for k in ("category", "key", "value", "memory_id", "reason")}),
)


def public_methods(cls: type = MemorySystem) -> list[str]:
    names = []
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") or isinstance(inspect.getattr_static(cls, name), property):
            continue
        if callable(member):
            names.append(name)
    return names


def parameters(name: str, cls: type = MemorySystem) -> list[inspect.Parameter]:
    signature = inspect.signature(getattr(cls, name))
    return [p for p in signature.parameters.values() if p.name not in ("self", "cls")
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module", autouse=True)
def default_home(scratch: Path) -> Iterator[None]:
    """``open(home=None)`` means $FERMIX_HOME: keep that inside the scratch folder too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FERMIX_HOME", str(scratch / "default-home"))
        yield


def seeded(home: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(home) as system:
        system.write_memory(VALID["write_memory"]["operations"], **OWNER)  # memory row 1
        system.append_message(**VALID["append_message"])
        yield system


@pytest.fixture(scope="module")
def memory(scratch: Path) -> Iterator[MemorySystem]:
    yield from seeded(scratch / "home")


@pytest.fixture(scope="module")
def quiet_memory(scratch: Path) -> Iterator[MemorySystem]:
    """The same seeded home, for the tests that check nothing was appended: its log holds only
    what those tests add, not what the fuzzing added, so that verifying it stays quick."""
    yield from seeded(scratch / "quiet-home")


_fresh = itertools.count()


def as_path(value: Any, scratch: Path) -> Any:
    """A fuzzed folder stays inside the scratch folder: text becomes one fresh name there."""
    if not isinstance(value, str):
        return value
    return str(scratch / f"d{next(_fresh)}{value.replace('/', '_').replace('.', '_')}")


def call(memory: MemorySystem, scratch: Path, name: str, arguments: dict[str, Any]) -> Any:
    for method, argument in PATH_ARGUMENTS:
        if method == name:
            arguments.setdefault(argument, str(scratch / f"fresh{next(_fresh)}"))
            arguments[argument] = as_path(arguments[argument], scratch)
    if name == "open":
        with MemorySystem.open(**arguments):
            return None
    result = getattr(memory, name)(**arguments)
    if isinstance(result, Iterator):
        result = list(result)
    if isinstance(result, Future):
        memory.wait_for_background()
    return result


def test_every_public_method_is_known() -> None:
    # AGENT method missing here is still fuzzed (with every argument arbitrary); this only keeps
    # VALID honest, so renamed or removed methods are noticed.
    assert set(VALID) <= set(public_methods())
    assert set(public_methods()) >= NOT_FUZZED
    assert set(SESSION_VALID) <= set(public_methods(Session))


def test_the_well_formed_arguments_are_accepted(scratch: Path) -> None:
    # Otherwise the fuzzer would only ever meet the first check of a method.
    with MemorySystem.open(scratch / "well-formed") as system:
        system.write_memory(VALID["write_memory"]["operations"], **OWNER)  # memory row 1
        system.append_message(**VALID["append_message"])
        for name, arguments in VALID.items():
            if name not in NOT_FUZZED:
                call(system, scratch, name, dict(arguments))


def fuzz(memory: MemorySystem, name: str, params: list[inspect.Parameter], base: dict[str, Any],
         run_call: Any) -> None:
    """Call ``run_call(arguments)`` with one or two of ``base`` replaced by arbitrary values."""
    must_fuzz = [p.name for p in params if p.name not in base and p.default is p.empty
                 and (name, p.name) not in PATH_ARGUMENTS]
    choices = [p.name for p in params]

    @settings(max_examples=25, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        fuzzed = set(must_fuzz)
        if choices:
            fuzzed |= data.draw(st.sets(st.sampled_from(choices), min_size=1, max_size=2), label="fuzzed")
        arguments = dict(base)
        for argument in sorted(fuzzed):
            arguments[argument] = data.draw(JSONISH, label=argument)
        with contextlib.suppress(FermixError):
            run_call(arguments)

    run()
    assert memory.verify().ok


@pytest.mark.parametrize("name", sorted(set(public_methods()) - NOT_FUZZED))
def test_a_public_method_only_ever_raises_fermix_errors(memory: MemorySystem, scratch: Path, name: str) -> None:
    fuzz(memory, name, parameters(name), VALID.get(name, {}),
         lambda arguments: call(memory, scratch, name, arguments))


def call_session(memory: MemorySystem, name: str, arguments: dict[str, Any]) -> Any:
    result = getattr(memory.session(**TURN), name)(**arguments)
    if isinstance(result, Future):
        memory.wait_for_background()
    return result


@pytest.mark.parametrize("name", sorted(public_methods(Session)))
def test_a_session_method_only_ever_raises_fermix_errors(memory: MemorySystem, name: str) -> None:
    fuzz(memory, name, parameters(name, Session), SESSION_VALID.get(name, {}),
         lambda arguments: call_session(memory, name, arguments))


def test_the_well_formed_session_arguments_are_accepted(memory: MemorySystem) -> None:
    for name, arguments in SESSION_VALID.items():
        call_session(memory, name, dict(arguments))


# The arguments whose value names a member of a fixed set (an enum), wherever they appear.
ENUM_ARGUMENTS = {"trust", "role", "scope", "source", "style", "writer"}
DEEP_LIST, DEEP_MAPPING = nested(100_000, "user", True), nested(100_000, "user", False)


def enum_arguments(cls: type) -> list[tuple[str, str]]:
    return [(name, p.name) for name in public_methods(cls) for p in parameters(name, cls)
            if p.name in ENUM_ARGUMENTS]


def test_every_enum_argument_is_found() -> None:
    found = {argument for _, argument in enum_arguments(MemorySystem) + enum_arguments(Session)}
    assert found == ENUM_ARGUMENTS
    assert len(enum_arguments(MemorySystem)) >= 13 and len(enum_arguments(Session)) >= 4


@pytest.mark.parametrize("deep", [DEEP_LIST, DEEP_MAPPING, [["user"]], 10**5000], ids=["list", "mapping", "short",
                                                                                      "huge-int"])
@pytest.mark.parametrize(("cls", "name", "argument"),
                         [(MemorySystem, *pair) for pair in enum_arguments(MemorySystem)]
                         + [(Session, *pair) for pair in enum_arguments(Session)])
def test_an_enum_argument_given_a_structure_is_a_short_typed_error(
        quiet_memory: MemorySystem, scratch: Path, cls: type, name: str, argument: str, deep: Any) -> None:
    """Not a RecursionError (an enum's own error builds the value's repr), and the message
    describes the value in a few words instead of printing it."""
    memory = quiet_memory
    if cls is Session:
        arguments = {**SESSION_VALID.get(name, {}), argument: deep}
        run = lambda: call_session(memory, name, arguments)  # noqa: E731
    else:
        arguments = {**VALID.get(name, {}), argument: deep}
        run = lambda: call(memory, scratch, name, arguments)  # noqa: E731
    before = memory.verify().events
    with pytest.raises(FermixError) as caught:
        result = run()
        if name == "dispatch_tool":  # a tool call reports bad input in its result, never raises
            assert result["ok"] is False and len(result["error"]) < 200
            raise FermixError(result["error"])
    message = str(caught.value)
    assert argument in message and len(message) < 200
    assert memory.verify().events == before


def test_close_then_any_call_is_a_fermix_error(scratch: Path) -> None:
    system = MemorySystem.open(scratch / "closing")
    system.close()
    system.close()
    for name in sorted(set(VALID) - {"open", "close", "tool_definitions", "prompt_file"}):
        with pytest.raises(FermixError):
            call(system, scratch, name, dict(VALID[name]))
