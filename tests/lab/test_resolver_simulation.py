"""The resolver simulation of the lab: the FakeLLM judge, the closed form, seeded trials."""

from __future__ import annotations

import random

import pytest

from surefoot.errors import ConfigError
from surefoot.llm import FakeLLM
from surefoot.statebus import Proposal, judge
from surefoot_lab.statebus.resolvers import judge_responder, predicted_accuracy, simulate


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
