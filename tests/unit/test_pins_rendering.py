"""Pins for domain/rendering.py: the seed's section caps and token budgets as LITERALS (never read
from the module under test), a file exactly at its budget, and the exact drop order."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fermix_memory.domain.memory import Memory
from fermix_memory.domain.rendering import (
    MEMORY_MD,
    USER_MD,
    FileLayout,
    one_line,
    render_memory_md,
    render_prompt_file,
    render_user_md,
)
from fermix_memory.domain.values import Category, ScopeType
from tests.unit.test_rendering import chars4, row, rule, sections

USER_CAPS = {"Identity": 6, "Preferences": 6, "Interests": 6, "Goals": 5}
MEMORY_CAPS = {"Context": 12, "Working Rules": 8}
CATEGORY_OF = {"Identity": Category.IDENTITY, "Preferences": Category.PREFERENCE, "Interests": Category.INTEREST,
               "Goals": Category.GOAL, "Context": Category.CONTEXT, "Working Rules": Category.DIRECTIVE}


def many(title: str, count: int, first_id: int = 1) -> list[Memory]:
    return [row(first_id + i, CATEGORY_OF[title], f"{title[:3].lower()}{i}", "v") for i in range(count)]


@pytest.mark.parametrize(("title", "cap"), [*USER_CAPS.items(), *MEMORY_CAPS.items()])
def test_each_section_shows_exactly_its_cap_of_rows(title: str, cap: int) -> None:
    render = render_user_md if title in USER_CAPS else render_memory_md
    for count in (cap - 1, cap, cap + 1, cap + 5):
        shown = sections(render(many(title, count), chars4, budget=10**9))[title]
        assert len(shown) == min(count, cap), (title, count)
    # The newest ``cap`` rows, newest first.
    shown = sections(render(many(title, cap + 3), chars4, budget=10**9))[title]
    prefix = title[:3].lower()
    assert shown == [f"- {prefix}{i}: v" for i in range(cap + 2, 2, -1)]


def test_the_layouts_name_their_sections_in_order() -> None:
    assert [s.title for s in USER_MD.sections] == list(USER_CAPS)
    assert [s.title for s in MEMORY_MD.sections] == list(MEMORY_CAPS)


def test_working_rules_cap_of_eight_counts_the_merged_list() -> None:
    own = many("Working Rules", 3)
    shared = [rule(100 + i, f"shared{i}", "s") for i in range(10)]
    shown = sections(render_memory_md(own, chars4, agent_rules=shared))["Working Rules"]
    assert len(shown) == 8
    assert shown[:3] == ["- wor2: v", "- wor1: v", "- wor0: v"]
    assert shown[3:] == [f"- shared{i}: s" for i in range(9, 4, -1)]
    # Nine rules of the owner: eight of them, no shared ones.
    nine = sections(render_memory_md(many("Working Rules", 9), chars4, agent_rules=shared))["Working Rules"]
    assert len(nine) == 8 and all(line.startswith("- wor") for line in nine)


def test_a_shared_rule_with_the_same_key_as_an_older_shared_one_wins_by_recency() -> None:
    old = rule(1, "tone", "old")
    new = rule(2, "tone", "new")
    for order in ([old, new], [new, old]):
        assert render_memory_md([], chars4, agent_rules=order) == "## Working Rules\n- tone: new\n"


class Fixed:
    """A counter that says every non-empty text has ``tokens`` tokens."""

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens

    def __call__(self, text: str) -> int:
        return self.tokens if text else 0


@pytest.mark.parametrize(
    ("render", "layout", "category", "budget"),
    [(render_user_md, USER_MD, Category.IDENTITY, 1500), (render_memory_md, MEMORY_MD, Category.CONTEXT, 2000)],
)
def test_default_budgets_are_1500_tokens_for_user_md_and_2000_for_memory_md(
    render: Callable[..., str], layout: FileLayout, category: Category, budget: int
) -> None:
    rows = [row(1, category, "name", "Ada")]
    heading = "Identity" if category is Category.IDENTITY else "Context"
    whole = f"## {heading}\n- name: Ada\n"
    assert render(rows, Fixed(budget)) == whole
    assert render(rows, Fixed(budget + 1)) == ""
    assert render_prompt_file(rows, layout, Fixed(budget)) == whole
    assert render_prompt_file(rows, layout, Fixed(budget + 1)) == ""


def test_a_file_exactly_at_its_budget_is_kept_whole_and_one_token_less_drops_the_oldest_row() -> None:
    rows = [row(i, Category.CONTEXT, f"k{i}", "v") for i in range(1, 5)]
    full = render_memory_md(rows, chars4, budget=10**9)
    exact = chars4(full)
    assert render_memory_md(rows, chars4, budget=exact) == full
    smaller = render_memory_md(rows, chars4, budget=exact - 1)
    assert smaller == "## Context\n- k4: v\n- k3: v\n- k2: v\n"
    # A reduced file exactly at the budget is the answer (not one row fewer).
    assert render_memory_md(rows, chars4, budget=chars4(smaller)) == smaller
    two = "## Context\n- k4: v\n- k3: v\n"
    assert render_memory_md(rows, chars4, budget=chars4(two)) == two
    assert render_memory_md(rows, chars4, budget=chars4(two) - 1) == "## Context\n- k4: v\n"


@pytest.mark.parametrize("keep", range(0, 13))
def test_the_budget_drops_as_few_rows_as_possible(keep: int) -> None:
    rows = [row(i, Category.CONTEXT, f"k{i:02}", "v") for i in range(1, 13)]

    def counter(text: str) -> int:  # one token per bullet
        return text.count("- ")

    text = render_memory_md(rows, counter, budget=keep)
    assert counter(text) == keep
    if keep:
        assert sections(text)["Context"] == [f"- k{i:02}: v" for i in range(12, 12 - keep, -1)]
    else:
        assert text == ""


def test_drops_go_by_recency_across_sections_and_the_section_breaks_ties() -> None:
    # The same updated_at and id in two sections: the earlier section's row goes first.
    rows = [row(1, Category.CONTEXT, "same", "v", minutes=0), row(1, Category.DIRECTIVE, "same", "v", minutes=0),
            row(2, Category.DIRECTIVE, "newer", "v", minutes=5)]
    full = render_memory_md(rows, chars4, budget=10**9)
    assert full == "## Context\n- same: v\n\n## Working Rules\n- newer: v\n- same: v\n"
    one_dropped = render_memory_md(rows, chars4, budget=chars4(full) - 1)
    assert one_dropped == "## Working Rules\n- newer: v\n- same: v\n"


def test_layout_blank_line_between_sections_and_empty_value_bullet() -> None:
    rows = [row(1, Category.IDENTITY, "name", ""), row(2, Category.GOAL, "goal", "Run")]
    assert render_user_md(rows, chars4) == "## Identity\n- name:\n\n## Goals\n- goal: Run\n"


def test_negative_budget_is_refused_and_zero_allowed() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        render_memory_md([], chars4, budget=-1)
    assert render_memory_md([row(1, Category.CONTEXT)], chars4, budget=0) == ""
    assert render_memory_md([], Fixed(5), budget=0) == ""


def test_keys_are_cut_to_64_and_values_to_200_characters() -> None:
    line = render_user_md([row(1, Category.IDENTITY, "k" * 65, "v" * 201)], chars4).split("\n")[1]
    key, value = line[2:].split(": ")
    assert key == "k" * 63 + "…" and value == "v" * 199 + "…"
    line = render_user_md([row(1, Category.IDENTITY, "k" * 64, "v" * 200)], chars4).split("\n")[1]
    assert line == "- " + "k" * 64 + ": " + "v" * 200


def test_one_line_collapses_whitespace_and_cleans_separators() -> None:
    assert one_line("  a \n\n b\u2028c\u2029d\x85e\x9ff\x1fg\x7f ", 100) == "a b c d e f g"
    assert one_line("\ud800x", 10) == "\ufffdx"


def test_rows_that_do_not_render_are_left_out() -> None:
    rows = [row(1, Category.CONTEXT, "conv", "yes", scope_type=ScopeType.CONVERSATION),
            row(2, Category.DIRECTIVE, "conv_rule", "no", scope_type=ScopeType.CONVERSATION),
            row(3, Category.CONTEXT, "job", "no", scope_type=ScopeType.JOB),
            row(4, Category.CONTEXT, "archived", "no", archived=True),
            row(5, Category.CONTEXT, "hidden", "no", promote_target=None),
            row(6, Category.DIRECTIVE, "rule", "yes")]
    assert render_memory_md(rows, chars4) == "## Context\n- conv: yes\n\n## Working Rules\n- rule: yes\n"
    # Shared rules that are not the agent's standing rules are ignored.
    others = [rule(10, "archived_rule", "x", archived=True), rule(11, "chat_rule", "x",
                                                                scope_type=ScopeType.CONVERSATION)]
    assert render_memory_md([], chars4, agent_rules=others) == ""
    # A shared rule that is the same row as an own rule is shown once.
    own = rule(12, "tone", "Be brief", owner="owner")
    assert render_memory_md([own], chars4, agent_rules=[own]) == "## Working Rules\n- tone: Be brief\n"
