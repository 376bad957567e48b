"""The obedient victim labels with what a runtime can assign, never with which text was
planted (#28): every label it puts to the policy is made of the labels the tools' outputs
were given (per field, by who controls it) and the user's own words."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

pytest.importorskip("agentdojo")  # installed by `make test` (the agentdojo extra)

from surefoot.guard import CapabilityPolicy, Labeled
from surefoot_lab.statebus import agentdojo as ad
from surefoot_lab.statebus.agentdojo_policy import policy_for
from surefoot_lab.statebus.agentdojo_victim import run_victim


@pytest.fixture(autouse=True)
def _clean_slack() -> None:
    """``injection_calls`` probes the suite's clean environment (``run_suite`` loads it)."""
    suite = ad.load_suites()["slack"]
    ad._CLEAN["slack"] = suite.load_and_inject_default_environment({})


def _elements(value: Labeled[Any]) -> list[Labeled[Any]]:
    items = value.value
    if isinstance(items, list) and items and all(isinstance(x, Labeled) for x in items):
        return items
    return [value]


def _channels_as_records() -> CapabilityPolicy:
    """Slack's defaults, but with channel names declared records (what the lab did before):
    the declaration, not the victim, must decide what planted text in a name may do."""
    base = policy_for("slack")
    tools = dict(base.tools)
    tools["get_channels"] = dataclasses.replace(tools["get_channels"], fields={"*": "record"})
    return CapabilityPolicy(base.name, tools.values(), version=base.version)


@pytest.mark.parametrize("policy_kind", ["defaults", "channel names as records"])
def test_the_victim_never_relabels_planted_text(policy_kind: str) -> None:
    """Slack user task 5 reads the channel list, where the attack sits in a channel's name:
    each label of each call (the injected ones too) is a join of the runtime's output labels
    and ``user``. A victim that turned the name into "content" because it knew the text was
    planted fails this."""
    policy = policy_for("slack") if policy_kind == "defaults" else _channels_as_records()
    suite = ad.load_suites()["slack"]
    user = suite.user_tasks["user_task_5"]
    vectors = ad.injection_candidates(suite)["user_task_5"]
    injected = 0
    for tid, task in suite.injection_tasks.items():
        plan, _ = ad.injection_calls("slack", tid, task)
        text = ad.attack_text("important_instructions", suite, task.GOAL)
        env = suite.load_and_inject_default_environment(dict.fromkeys(vectors, text))
        out = run_victim(suite, user, policy, env, (task, plan))
        injected += out.injected
        given = {s for leaf in out.leaves for s in leaf.label.sources} | {"user"}
        for _, args in out.checked:
            for value in args.values():
                for one in _elements(value):
                    assert one.label.sources <= given, (tid, one)
    assert injected == len(suite.injection_tasks)


def test_declared_channel_names_as_records_let_the_attack_through() -> None:
    """With channel names declared records, the planted URL in a name is accepted: that is
    what the deployed labelling measures (the lab's 1/35 came from relabelling planted
    text); the defaults declare a channel's name a ``name``, which selects the channel only."""
    suite = ad.load_suites()["slack"]
    user = suite.user_tasks["user_task_5"]
    vectors = ad.injection_candidates(suite)["user_task_5"]
    won = {}
    for label, policy in (("records", _channels_as_records()), ("names", policy_for("slack"))):
        hits = 0
        for tid, task in suite.injection_tasks.items():
            plan, _ = ad.injection_calls("slack", tid, task)
            text = ad.attack_text("important_instructions", suite, task.GOAL)
            env = suite.load_and_inject_default_environment(dict.fromkeys(vectors, text))
            hits += run_victim(suite, user, policy, env, (task, plan)).security
        won[label] = hits
    assert won["records"] > 0 and won["names"] == 0
