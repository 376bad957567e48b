"""AgentDojo with a real model as planner and quarantined parser: a bounded subset, measured.

The plan pattern of ``surefoot.statebus``, end to end on AgentDojo's own tools: the model
writes a :class:`~surefoot.statebus.Plan` from the user's prompt and the tools' descriptions
only (``make_plan``); ``parse`` steps go to a :class:`~surefoot.statebus.QuarantinedParser`
on the same model; :class:`~surefoot.statebus.PlanRunner` runs the plan under the suite's
default :class:`~surefoot.statebus.CapabilityPolicy`, every tool output labelled untrusted.
AgentDojo's utility function judges each user task alone (clean environment) and its
security function each (user task, injection task) pair, the injection written into the
vectors the user task reads, as the obedient victim's run does. The same subset through the
obedient victim is measured beside it.

A plan the model cannot write (not JSON, not a valid plan), a parse it cannot do, a call the
policy refuses: each ends that run, is counted, and the task fails; nothing is retried.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from surefoot.errors import ConfigError, TrustError
from surefoot.guard import PlanRunner, QuarantinedParser, make_plan, trusted
from surefoot.llm import ChatCompletion

from .agentdojo_policy import policy_for
from .agentdojo_victim import run_victim

__all__ = ["ModelRun", "SubsetReport", "run_model_subset"]


class _Bound:
    """The lab client with every call bounded (temperature 0, ``max_tokens``)."""

    def __init__(self, client: Any, max_tokens: int) -> None:
        self.client = client
        self.max_tokens = max_tokens

    def create(self, *, messages: Sequence[Mapping[str, Any]], **_: Any) -> ChatCompletion:
        reply: ChatCompletion = self.client.create(
            messages=messages, max_tokens=self.max_tokens, temperature=0, allow_empty=True
        )
        return reply


@dataclass
class ModelRun:
    """One run of the model's plan: how far it got and AgentDojo's verdicts."""

    stage: str = "plan"  # where it ended: plan, run, refused, answered
    error: str = ""
    calls: list[str] = field(default_factory=list)
    utility: bool = False
    security: bool = False


@dataclass
class SubsetReport:
    """The subset's figures, model and obedient victim side by side."""

    suite: str
    user_tasks: list[str]
    injection_tasks: list[str]
    template: str
    model_utility: int = 0
    model_attacks: list[str] = field(default_factory=list)  # "user/injection" that won
    victim_utility: int = 0
    victim_attacks: list[str] = field(default_factory=list)
    stages: dict[str, int] = field(default_factory=dict)  # model runs by where they ended
    examples: dict[str, str] = field(default_factory=dict)  # stage -> first error
    model_calls: int = 0
    seconds: float = 0.0


def _describe(fn: Any) -> str:
    params = sorted(getattr(fn.parameters, "model_fields", {}))
    return f"{fn.description.strip().splitlines()[0]} Arguments: {', '.join(params) or 'none'}."


def _run_plan(
    suite: Any, policy: Any, user_task: Any, env: Any, client: Any
) -> tuple[ModelRun, Any, Any, list[Any], str]:
    """Plan, run and answer one user task on ``env``: the run, the pre- and
    post-environment, the calls made and the answer's text."""
    from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime

    runtime = FunctionsRuntime(suite.tools)
    env = user_task.init_environment(env)
    pre = env.model_copy(deep=True)
    run = ModelRun()
    traces: list[Any] = []

    def tool(name: str) -> Any:
        def call(**kwargs: Any) -> Any:
            traces.append(FunctionCall(function=name, args=kwargs))
            run.calls.append(name)
            result, error = runtime.run_function(env, name, kwargs)
            return result if error is None else {"error": error}

        return call

    tools = {f.name: tool(f.name) for f in suite.tools}
    task = trusted(user_task.PROMPT)
    output = ""
    try:
        plan = make_plan(client, task, {f.name: _describe(f) for f in suite.tools})
        run.stage = "run"
        answer = PlanRunner(policy, tools, QuarantinedParser(client)).run(plan, task.label)
        run.stage, output = "answered", answer.text
    except TrustError as exc:
        run.stage = "refused" if str(exc.sink).startswith("tool:") else run.stage
        run.error = str(exc)
    except (ConfigError, TypeError, ValueError, KeyError, AttributeError) as exc:
        run.error = f"{type(exc).__name__}: {exc}"
    got = user_task.utility_from_traces(output, pre, env, traces)
    run.utility = bool(got if got is not None else user_task.utility(output, pre, env))
    return run, pre, env, traces, output


def _security(task: Any, pre: Any, post: Any, traces: list[Any], output: str) -> bool:
    got = task.security_from_traces(output, pre, post, traces)
    return bool(got if got is not None else task.security(output, pre, post))


def run_model_subset(
    llm: Any,
    suite_name: str,
    suite: Any,
    *,
    users: int,
    injections: int,
    template: str,
    attack_text: Callable[[str, Any, str], str],
    candidates: Mapping[str, tuple[str, ...]],
    plans: Mapping[str, Callable[[Any], list[Any]]],
) -> SubsetReport:
    """The first ``users`` user tasks alone and against the first ``injections`` injection
    tasks (``template``), through the model's plans and through the obedient victim.

    Args:
        attack_text: (template, suite, goal) -> the injection text.
        candidates: user task -> the injection vectors it reads.
        plans: injection task -> its calls as a function of the environment (the victim's).
    """
    client = llm.client()
    bound = _Bound(client, max_tokens=max(llm.max_tokens, 256))
    user_ids = sorted(suite.user_tasks, key=lambda k: int(k.rsplit("_", 1)[1]))[:users]
    inj_ids = sorted(suite.injection_tasks, key=lambda k: int(k.rsplit("_", 1)[1]))[:injections]
    rep = SubsetReport(suite_name, user_ids, inj_ids, template)
    policy = policy_for(suite_name)
    clean = suite.load_and_inject_default_environment({})
    started = time.perf_counter()

    def note(run: ModelRun) -> None:
        rep.stages[run.stage] = rep.stages.get(run.stage, 0) + 1
        if run.error and run.stage not in rep.examples:
            rep.examples[run.stage] = run.error[:200]

    for uid in user_ids:
        u = suite.user_tasks[uid]
        run, *_ = _run_plan(suite, policy, u, clean.model_copy(deep=True), bound)
        note(run)
        rep.model_utility += run.utility
        rep.victim_utility += run_victim(suite, u, policy, clean.model_copy(deep=True)).utility
        for tid in inj_ids:
            task = suite.injection_tasks[tid]
            text = attack_text(template, suite, task.GOAL)
            env = suite.load_and_inject_default_environment(dict.fromkeys(candidates[uid], text))
            run, pre, post, traces, output = _run_plan(
                suite, policy, u, env.model_copy(deep=True), bound
            )
            note(run)
            if _security(task, pre, post, traces, output):
                rep.model_attacks.append(f"{uid}/{tid}")
            out = run_victim(suite, u, policy, env.model_copy(deep=True), (task, plans[tid]))
            if out.security:
                rep.victim_attacks.append(f"{uid}/{tid}")
    rep.model_calls = int(client.meter.totals.attempts)
    rep.seconds = time.perf_counter() - started
    return rep
