"""Resolvers: priority, vote and judge, their closed-form accuracy, and the simulation."""

from __future__ import annotations

import ast
import random
from typing import Any

import pytest

from surefoot.errors import ConfigError
from surefoot.llm import FakeLLM
from surefoot.statebus import (
    Proposal,
    judge,
    judge_responder,
    predicted_accuracy,
    priority,
    simulate,
    vote,
)

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


def test_judge_responder_hits_its_assumed_accuracy() -> None:
    """Over many splits the scripted judge picks the true value at its accuracy."""
    llm = FakeLLM(seed=0, responder=judge_responder(lambda f: "v" + f[1:], 0.8, 3))
    rng = random.Random(1)
    right = 0
    n = 2000
    for t in range(n):
        props = [Proposal("a", f"v{t}"), Proposal("b", f"w{t}")]
        right += judge(props, llm, field=f"f{t}", rng=rng).value == f"v{t}"
    assert llm.calls == n
    assert abs(right / n - 0.8) < 0.03
    with pytest.raises(ConfigError):
        judge_responder(lambda f: f, 1.5, 0)


def test_closed_form_values() -> None:
    """Two-agent vote equals priority; three equal agents follow Condorcet; judge as derived."""
    assert predicted_accuracy("priority", [0.8, 0.7]) == (0.8, 0.0)
    assert predicted_accuracy("vote", [0.8, 0.7])[0] == pytest.approx(0.8)
    assert predicted_accuracy("vote", [0.7, 0.7, 0.7])[0] == pytest.approx(0.784)
    acc, calls = predicted_accuracy("judge", [0.8, 0.7], 0.9)
    assert calls == pytest.approx(1 - 0.56 - 0.06)
    assert acc == pytest.approx(0.56 + 0.38 * 0.9)
    with pytest.raises(ConfigError):
        predicted_accuracy("debate", [0.5])
    with pytest.raises(ConfigError):
        predicted_accuracy("vote", [1.2])
    with pytest.raises(ConfigError, match="at most 16"):
        predicted_accuracy("vote", [0.5] * 17)


@pytest.mark.parametrize(
    "accs", [(0.6, 0.6), (0.9, 0.6), (0.7, 0.7, 0.7), (0.9, 0.6, 0.6), (0.8, 0.7, 0.6, 0.5)]
)
def test_large_simulation_matches_the_formula(accs: tuple[float, ...]) -> None:
    """On 20,000 seeded fields every rule is within 0.015 of its closed-form accuracy and calls."""
    stats = simulate(accs, trials=20_000, seed=11, judge_accuracy=0.85)
    for rule, s in stats.items():
        acc, calls = predicted_accuracy(rule, accs, 0.85)
        assert abs(s.accuracy - acc) < 0.015, (rule, s.accuracy, acc)
        assert abs(s.calls_per_field - calls) < 0.015
        assert s.proposal_calls == 20_000 * len(accs)


def test_simulation_with_fakellm_judge_counts_calls_inside_the_fake() -> None:
    """With a FakeLLM judge, resolver calls equal the calls the fake received."""
    llm = FakeLLM(seed=0, responder=judge_responder(lambda f: "v" + f[1:], 0.9, 5))
    stats = simulate([0.8, 0.7], trials=3000, seed=2, llm=llm)
    assert stats["judge"].resolver_calls == llm.calls > 0
    acc, calls = predicted_accuracy("judge", [0.8, 0.7], 0.9)
    assert abs(stats["judge"].accuracy - acc) < 0.03
    assert abs(stats["judge"].calls_per_field - calls) < 0.03
    again = simulate([0.8, 0.7], trials=3000, seed=2, judge_accuracy=0.9)
    assert again["vote"].correct == stats["vote"].correct  # same seed, same proposals
    with pytest.raises(ConfigError):
        simulate([0.5], trials=0, seed=0)
