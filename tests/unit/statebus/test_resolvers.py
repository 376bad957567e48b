"""Resolvers: priority, vote and judge as functions of the proposals."""

from __future__ import annotations

import ast
import random
from typing import Any

import pytest

from surefoot.errors import ConfigError
from surefoot.llm import FakeLLM
from surefoot.statebus import Proposal, judge, priority, vote

ORDER = ["lead", "a", "b"]


def test_priority_takes_the_highest_ranked_agent() -> None:
    """The first agent of the order wins whatever the others say, at no model call."""
    props = [Proposal("b", 1), Proposal("lead", 2), Proposal("a", 1)]
    r = priority(props, ORDER)
    assert (r.value, r.rule, r.calls, r.chosen_from) == (2, "priority", 0, ("lead",))


def test_bad_proposals_are_config_errors() -> None:
    """No proposals, an agent proposing twice, or an agent missing from the order are refused."""
    with pytest.raises(ConfigError, match="at least one"):
        priority([], ORDER)
    with pytest.raises(ConfigError, match="at most once"):
        vote([Proposal("a", 1), Proposal("a", 2)], ORDER)
    with pytest.raises(ConfigError, match="not in the priority order"):
        priority([Proposal("zed", 1)], ORDER)
    with pytest.raises(ConfigError, match="tie must be"):
        vote([Proposal("a", 1)], ORDER, tie="coin")


def test_vote_takes_the_majority_and_breaks_ties_by_rank_or_abstains() -> None:
    """Two against one wins; a 1-1 tie goes to the higher rank, or abstains on request."""
    r = vote([Proposal("lead", "x"), Proposal("a", "y"), Proposal("b", "y")], ORDER)
    assert r.value == "y" and r.chosen_from == ("a", "b")
    tie = [Proposal("a", "x"), Proposal("lead", "y")]
    assert vote(tie, ORDER).value == "y"
    r2 = vote(tie, ORDER, tie="abstain")
    assert r2.abstained and r2.value is None


def test_vote_counts_unhashable_values() -> None:
    """Dict proposals are compared by value (any key order), so equal dicts vote together."""
    r = vote(
        [
            Proposal("lead", {"k": 1}),
            Proposal("a", {"k": 2, "j": 0}),
            Proposal("b", {"j": 0, "k": 2}),
        ],
        ORDER,
    )
    assert r.value == {"k": 2, "j": 0} and r.chosen_from == ("a", "b")


def test_judge_makes_no_call_when_proposals_agree() -> None:
    """Identical proposals resolve without calling the model."""
    llm = FakeLLM(seed=0, responder=lambda m: "1")
    r = judge([Proposal("a", 5), Proposal("b", 5)], llm, field="f", rng=random.Random(0))
    assert r.value == 5 and r.calls == 0 and llm.calls == 0


def test_judge_calls_once_shows_shuffled_candidates_and_takes_the_number() -> None:
    """A split costs one call; the candidates are shuffled; the answered number is taken."""
    prompts: list[str] = []

    def responder(messages: list[dict[str, Any]]) -> str:
        prompts.append(str(messages[-1]["content"]))
        return "The answer is 2."

    llm = FakeLLM(seed=0, responder=responder)
    props = [Proposal("a", "alpha"), Proposal("b", "beta"), Proposal("c", "gamma")]
    orders = set()
    for seed in range(8):
        r = judge(props, llm, field="title", rng=random.Random(seed))
        listed = [ln.split(". ", 1)[1] for ln in prompts[-1].splitlines() if ln[:1].isdigit()]
        orders.add(tuple(listed))
        assert r.calls == 1 and r.value == ast.literal_eval(listed[1])
    assert llm.calls == 8 and len(orders) > 1


def test_judge_abstains_on_an_answer_without_a_valid_number() -> None:
    """An answer with no number, or a number out of range, makes the judge abstain."""
    for text in ("I cannot decide", "7"):
        llm = FakeLLM(seed=0, responder=lambda m, t=text: t)
        r = judge([Proposal("a", 1), Proposal("b", 2)], llm, field="f", rng=random.Random(0))
        assert r.abstained and r.value is None and r.calls == 1
