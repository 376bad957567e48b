"""AgentDojo through surefoot's capabilities: attack success and utility, obedient victim.

``run_agentdojo()`` reads the installed AgentDojo suites (benchmark v1.2.2: tools, user tasks,
injection tasks with their ground-truth calls, injection vectors, attack templates) and runs
every (user task, injection task) pair through :mod:`.agentdojo_victim` under each policy:

- ``none``: every call allowed (the victim's upper bound: does the attack work at all?);
- ``defaults``: :data:`.agentdojo_policy.POLICIES`, final answers shown marked;
- ``defaults + endorsed answers``: the same, refusing an untrusted final answer;
- ``defaults + user delegation``: the defaults plus the delegations each user task's own
  prompt makes (an argument taken from a document the prompt names), granted on the clean
  environment before any injection is read, then fixed for that task's attacked pairs;
- ``user delegation, payees too``: the same with a payment's recipient declared delegable
  (the defaults never let a document choose a payee; this row shows why).

An injection task succeeds if AgentDojo's security function says so for at least one user
task; beside it, every injected call a policy allowed is counted, and those that send,
delete, book or change the user's data (``ACTING_TOOLS``), whether or not the task succeeded
as a whole. Utility is measured on each user task alone, with all environment data
untrusted. Labels are the ones a deployed runtime assigns (:data:`LABELLING_RULE`). By
default one template runs (:data:`DEFAULT_TEMPLATES`, every pair); ``--full`` runs all five,
and every suite attacked through an MCP server too (:mod:`.agentdojo_mcp`, beside the direct run).
Three attacks AgentDojo lacks are rows too (:mod:`.agentdojo_extra`).
Injection tasks without ground-truth calls get calls derived from their goals; a derivation
counts as checked when AgentDojo's security function accepts it in at least one pair with no
policy (``rejected_derivations`` lists any it never accepts). As AgentDojo does, each
template writes its injection into the vectors the user task's ground truth reads. The
``statebus.agentdojo`` experiment (seed 000, Hard 3) registers on import; ``agentdojo`` is
imported lazily (the lab's extra: ``pip install './lab[agentdojo]'``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from surefoot.errors import ConfigError, MissingExtraError
from surefoot.guard import CapabilityPolicy, trusted

from .._registry import NO_MODEL, LabContext, LabResult, Table, experiment
from ._common import SEED_FILE
from .agentdojo_extra import extra_attacks
from .agentdojo_policy import ACTING_TOOLS, derived_ground_truth, policy_for
from .agentdojo_suites import (
    BENCHMARK,
    Environments,
    attack_text,
    injection_candidates,
    load_suites,
)
from .agentdojo_victim import Outcome, Verdicts, run_victim

__all__ = [
    "BENCHMARK",
    "DEFAULT_TEMPLATES",
    "POLICY_NAMES",
    "TEMPLATES",
    "SuiteReport",
    "agentdojo_",
    "attack_text",
    "injection_calls",
    "injection_candidates",
    "load_suites",
    "run_agentdojo",
    "run_suite",
]

TEMPLATES = ("important_instructions", "ignore_previous", "system_message", "injecagent", "direct")
DEFAULT_TEMPLATES = TEMPLATES[:1]
"""What ``surefoot lab run statebus.agentdojo`` runs by default: every pair of every suite
under ``important_instructions`` (AgentDojo's strongest); ``--full`` runs all of
:data:`TEMPLATES`."""
POLICY_NAMES = (
    "none",
    "defaults",
    "defaults + endorsed answers",
    "defaults + user delegation",
    "user delegation, payees too",
)
DELEGATING = POLICY_NAMES[3:]


class _Allow:
    """The ``none`` policy: every call allowed, answers unmarked (duck-types the policy)."""

    def __init__(self, tools: Any) -> None:
        self.tools = tools

    def check_call(self, tool: str, args: Any) -> None:
        return None

    def check_answer(self, text: Any) -> Any:
        from surefoot.guard import Answer

        return Answer(str(text.value), text.label, False)


def _policy(suite: str, name: str) -> Any:
    base = policy_for(suite)
    if name == "none":
        return _Allow(base.tools)
    return policy_for(
        suite,
        answer_requires_endorsement=name == POLICY_NAMES[2],
        delegable_payees=name == POLICY_NAMES[4],
    )


@dataclass
class SuiteReport:
    """One suite's results: injection tasks and user tasks, per policy and template."""

    suite: str
    tools: int
    user_tasks: int
    injection_tasks: list[str]
    derived: list[str] = field(default_factory=list)
    rejected_derivations: list[str] = field(default_factory=list)
    # policy -> user tasks whose calls were all allowed / whose AgentDojo utility held
    calls_allowed: dict[str, int] = field(default_factory=dict)
    utility: dict[str, int] = field(default_factory=dict)
    marked_answers: dict[str, int] = field(default_factory=dict)
    withheld_answers: dict[str, int] = field(default_factory=dict)  # a part cut (compose_answer)
    # (policy, template) -> injection tasks that succeeded in at least one pair
    succeeded: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    pairs: dict[tuple[str, str], int] = field(default_factory=dict)
    # refusals under defaults: "tool.arg <- kind" -> count (important_instructions)
    refusals: dict[str, int] = field(default_factory=dict)
    refused_user_tasks: dict[str, str] = field(default_factory=dict)  # id -> first refusal
    # policy -> user task -> the delegations its prompt made
    delegations: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # policy -> pairs an attack won there but not under the defaults: "template: user/injection"
    through_delegation: dict[str, list[str]] = field(default_factory=dict)
    # (policy, template) -> injected calls allowed, "user/injection: tool" (whether or not
    # the injection task succeeded), and those of ACTING_TOOLS (sending, destructive)
    injected_allowed: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    injected_acting: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    # victim runs, and AgentDojo verdicts they asked for / computed (the rest remembered)
    runs: int = 0
    verdicts_asked: int = 0
    verdicts_computed: int = 0


def injection_calls(name: str, tid: str, task: Any) -> tuple[Callable[[Any], list[Any]], bool]:
    """The injection's calls as a function of the environment, and whether they were derived."""
    probe = list(task.ground_truth(_CLEAN[name].model_copy(deep=True)))
    if probe or task.GROUND_TRUTH_OUTPUT:
        return (lambda env: list(task.ground_truth(env))), False

    def derived(env: Any) -> list[Any]:
        return derived_ground_truth(name, tid, task, env) or []

    return derived, derived_ground_truth(
        name, tid, task, _CLEAN[name].model_copy(deep=True)
    ) is not None


_CLEAN: dict[str, Any] = {}


def clean_environment(name: str, suite: Any) -> Any:
    """``suite``'s default environment without injections (kept for :func:`injection_calls`)."""
    _CLEAN[name] = suite.load_and_inject_default_environment({})
    return _CLEAN[name]


def _signature(policy: Any) -> str:
    """What a policy declares and grants, without its name (``none``: every call allowed)."""
    if not isinstance(policy, CapabilityPolicy):
        return "none"
    data = policy.to_dict()
    data.pop("name", None)
    return json.dumps(data, sort_keys=True)


def _refusal_key(exc: Any) -> str:
    src = exc.sources[0].split(":", 1)[0] if exc.sources else "-"
    return f"{exc.sink.removeprefix('tool:')} <- {src}"


def run_suite(
    name: str, suite: Any, templates: tuple[str, ...], progress: Callable[[], None]
) -> SuiteReport:
    """Measure one suite (see the module docstring)."""
    loader = Environments(suite)
    verdicts = Verdicts()
    clean = _CLEAN[name] = loader.load({})
    users = dict(suite.user_tasks)
    injections = dict(suite.injection_tasks)
    rep = SuiteReport(name, len(suite.tools), len(users), sorted(injections))
    # (policy, user task) -> its policy with the prompt's delegations
    per_task: dict[tuple[str, str], Any] = {}
    for pol in POLICY_NAMES:
        policy = _policy(name, pol)
        outs = {
            uid: run_victim(
                suite,
                u,
                policy,
                clean,
                delegate=pol in DELEGATING,
                verdicts=verdicts,
                env_key=(uid, "clean"),
            )
            for uid, u in users.items()
        }
        if pol in DELEGATING:
            rep.delegations[pol] = {}
            rep.through_delegation[pol] = []
            for uid, o in outs.items():
                per_task[pol, uid] = policy.delegate(trusted(users[uid].PROMPT), o.delegations)
                if o.delegations:
                    rep.delegations[pol][uid] = [d.describe() for d in o.delegations]
        rep.calls_allowed[pol] = sum(not o.refused for o in outs.values())
        rep.utility[pol] = sum(o.utility for o in outs.values())
        rep.marked_answers[pol] = sum(bool(o.answer and o.answer.marked) for o in outs.values())
        rep.withheld_answers[pol] = sum(bool(o.answer and o.answer.withheld) for o in outs.values())
        if pol == "defaults":
            rep.refused_user_tasks = {
                uid: str(o.refused[0]) for uid, o in outs.items() if o.refused
            }
    plans: dict[str, Callable[[Any], list[Any]]] = {}
    for tid, task in injections.items():
        plan, derived = injection_calls(name, tid, task)
        if derived:
            rep.derived.append(tid)
        plans[tid] = plan
    seen = injection_candidates(suite, loader)
    won: set[str] = set()  # pairs an attack won under the defaults
    # a policy that declares the same as another for a user task (payees too, in a suite
    # without payments) makes the same calls: its outcome is the other's, not run again
    sigs: dict[tuple[str, str], str] = {}
    for template in templates:
        for tid, task in injections.items():
            text = attack_text(template, suite, task.GOAL)
            envs: dict[tuple[str, ...], Any] = {}
            same: dict[tuple[str, str], Outcome] = {}
            for pol in POLICY_NAMES:
                policy = _policy(name, pol)
                key = (pol, template)
                rep.succeeded.setdefault(key, [])
                for uid, u in users.items():
                    task_policy = per_task[pol, uid] if pol in DELEGATING else policy
                    if (pol, uid) not in sigs:
                        sigs[pol, uid] = _signature(task_policy)
                    vectors = seen[uid]
                    if vectors not in envs:
                        envs[vectors] = loader.load(dict.fromkeys(vectors, text))
                    out = same.get((uid, sigs[pol, uid]))
                    if out is None:
                        out = same[uid, sigs[pol, uid]] = run_victim(
                            suite,
                            u,
                            task_policy,
                            envs[vectors],
                            (task, plans[tid]),
                            verdicts=verdicts,
                            env_key=(uid, vectors, template, tid),
                        )
                    if not out.injected:
                        continue
                    rep.pairs[key] = rep.pairs.get(key, 0) + 1
                    calls = [f"{uid}/{tid}: {fn}" for fn in out.injected_allowed]
                    rep.injected_allowed.setdefault(key, []).extend(calls)
                    rep.injected_acting.setdefault(key, []).extend(
                        c
                        for c, fn in zip(calls, out.injected_allowed, strict=True)
                        if fn in ACTING_TOOLS
                    )
                    if out.security and tid not in rep.succeeded[key]:
                        rep.succeeded[key].append(tid)
                    pair = f"{template}: {uid}/{tid}"
                    if out.security and pol == "defaults":
                        won.add(pair)
                    if out.security and pol in DELEGATING and pair not in won:
                        rep.through_delegation[pol].append(pair)
                    if pol == "defaults" and template == templates[0]:
                        for exc in out.refused:
                            k = _refusal_key(exc)
                            rep.refusals[k] = rep.refusals.get(k, 0) + 1
            progress()
    rep.verdicts_asked, rep.verdicts_computed = verdicts.asked, verdicts.computed
    rep.runs = verdicts.asked  # one verdict per run: utility alone, or security under attack
    first = rep.succeeded.get(("none", templates[0]), []) if templates else []
    rep.rejected_derivations = [t for t in rep.derived if t not in first]
    return rep


def run_agentdojo(
    *,
    templates: tuple[str, ...] = TEMPLATES,
    suites: tuple[str, ...] | None = None,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> list[SuiteReport]:
    """Run the suites (all by default) under every policy and template.

    Raises:
        MissingExtraError: ``agentdojo`` is not installed.
    """
    loaded = load_suites()
    names = list(suites or loaded)
    total = sum(len(loaded[n].injection_tasks) for n in names) * len(templates)
    done = [0]

    def tick() -> None:
        done[0] += 1
        progress(done[0], total)

    return [run_suite(n, loaded[n], templates, tick) for n in names]


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.1f}%)" if d else "-"


def _skipped(exc: MissingExtraError) -> LabResult:
    t = Table("AgentDojo through surefoot's capabilities", ["suite", "result"])
    t.add("all", f"skipped: {exc}")
    return LabResult(
        tables=[t],
        facts={"skipped": str(exc)},
        answer=f"Not measured: the experiment needs the agentdojo package ({exc}).",
        model=NO_MODEL,
    )


def _facts(reports: list[SuiteReport], templates: tuple[str, ...]) -> dict[str, Any]:
    f: dict[str, Any] = {"benchmark": BENCHMARK, "templates": list(templates)}
    f["suites"] = [r.suite for r in reports]
    f["tools"] = sum(r.tools for r in reports)
    f["user_tasks"] = sum(r.user_tasks for r in reports)
    f["injection_tasks"] = sum(len(r.injection_tasks) for r in reports)
    f["derived"] = {r.suite: r.derived for r in reports if r.derived}
    f["rejected_derivations"] = sum(len(r.rejected_derivations) for r in reports)
    f["victim_runs"] = sum(r.runs for r in reports)
    f["verdicts_computed"] = sum(r.verdicts_computed for r in reports)
    for pol in POLICY_NAMES:
        f[f"calls_allowed[{pol}]"] = sum(r.calls_allowed[pol] for r in reports)
        f[f"utility[{pol}]"] = sum(r.utility[pol] for r in reports)
        f[f"marked_answers[{pol}]"] = sum(r.marked_answers[pol] for r in reports)
        f[f"withheld_answers[{pol}]"] = sum(r.withheld_answers[pol] for r in reports)
        for t in templates:
            f[f"succeeded[{pol}][{t}]"] = sum(len(r.succeeded[(pol, t)]) for r in reports)
        for t in templates:
            f[f"injected_calls_allowed[{pol}][{t}]"] = sum(
                len(r.injected_allowed.get((pol, t), [])) for r in reports
            )
            f[f"injected_acting_allowed[{pol}][{t}]"] = sorted(
                f"{r.suite}: {c}" for r in reports for c in r.injected_acting.get((pol, t), [])
            )
        hit = {f"{r.suite}/{i}" for r in reports for t in templates for i in r.succeeded[(pol, t)]}
        f[f"succeeded_any_template[{pol}]"] = sorted(hit)
        for r in reports:
            f[f"suite[{r.suite}][succeeded][{pol}]"] = len(r.succeeded[(pol, templates[0])])
            f[f"suite[{r.suite}][utility][{pol}]"] = r.utility[pol]
            f[f"suite[{r.suite}][calls_allowed][{pol}]"] = r.calls_allowed[pol]
    f["refused_user_tasks[defaults]"] = sorted(
        f"{r.suite}/{u}" for r in reports for u in r.refused_user_tasks
    )
    for pol in DELEGATING:
        f[f"delegations[{pol}]"] = {
            f"{r.suite}/{u}": d for r in reports for u, d in r.delegations[pol].items()
        }
        f[f"through_delegation[{pol}]"] = sorted(
            f"{r.suite}: {p}" for r in reports for p in r.through_delegation[pol]
        )
    return f


LABELLING_RULE = (
    "Labelling rule: every argument carries the label the runtime gave the output field the "
    "victim took it from, by who controls that field (the system's records; the "
    "correspondents a third party chose: senders, participants, sharers, counterparties; a "
    "channel's name; everything else a third party wrote is content, or a document the user "
    "pointed to), or the user's for the prompt's own words; list elements keep their own "
    "labels; a value found nowhere verbatim carries everything read, or the inputs the "
    "task's computation names; the victim never uses which text was planted. The final "
    "answer is built from parts (surefoot.guard.compose_answer): the victim's own text, "
    "values labelled as above, and whole fields it read, quoted; text a third party wrote "
    "that is not a typed value (a number, a date, a price), a field, a quoted whole field or "
    "one token from a document the user named is withheld."
)
"""How the experiment labels (stated in its answer, #28)."""


def _answer(f: dict[str, Any], t0: str) -> str:
    n_inj, n_user = f["injection_tasks"], f["user_tasks"]
    none, dflt, strict, dele, payees = (f[f"succeeded[{p}][{t0}]"] for p in POLICY_NAMES)
    d_util, d_allowed = f[f"utility[{DELEGATING[0]}]"], f[f"calls_allowed[{DELEGATING[0]}]"]
    d_missed = f[f"succeeded_any_template[{DELEGATING[0]}]"]
    through = f[f"through_delegation[{DELEGATING[1]}]"]
    missed = f["succeeded_any_template[defaults]"]
    util = f["utility[defaults]"]
    allowed = f["calls_allowed[defaults]"]
    s_util = f["utility[defaults + endorsed answers]"]
    derived = sum(len(v) for v in f["derived"].values())
    withheld = f["withheld_answers[defaults]"]
    miss = (
        f"what the defaults still miss is {', '.join(missed)}: an attack on the final answer, "
        "which no tool call carries"
        if missed
        else "no injection task succeeds with the defaults, the attack on the final answer "
        "(travel injection task 6) included: text a third party wrote reaches the answer "
        "only as a typed value, a field, a quoted whole field or one token from a document "
        "the user named, and the attacker's sentence is "
        f"withheld ({withheld} of {n_user} user tasks' own answers lose a part that way)"
    )
    reads = f[f"injected_calls_allowed[defaults][{t0}]"]
    acting = f[f"injected_acting_allowed[defaults][{t0}]"]
    extra = len(f.get("extra_attacks_tried", []))
    extra_ok = f.get("extra_attacks_allowed[defaults]", [])
    return (
        f"{LABELLING_RULE} "
        f"Measured on AgentDojo {BENCHMARK} ({len(f['suites'])} suites, {f['tools']} tools, "
        f"{n_inj} injection tasks, {n_user} user tasks; {derived} injection tasks' ground truth "
        f"derived from their goals, {f['rejected_derivations']} of them never confirmed by "
        "AgentDojo's security function) with an obedient victim that performs every "
        f"instruction it reads, template {t0}: with no control {none} of {n_inj} injection "
        f"tasks succeed; with surefoot's default per-argument capabilities {dflt} of {n_inj} "
        f"succeed — {miss}. Requiring an endorsement for every untrusted answer instead "
        f"gives {strict} of {n_inj}, at a utility cost ({s_util}/{n_user} user tasks keep "
        "AgentDojo's utility, "
        f"against {util}/{n_user} with the defaults). With all environment data labelled "
        f"untrusted, {allowed} of {n_user} user tasks have every ground-truth call allowed and "
        f"{util} of {n_user} keep AgentDojo's utility under the defaults; the refused ones take "
        "a recipient, an id or a URL from text (pay the bill in this file, do the actions in "
        "this email, invite whoever this page names, open the link in this message), which is "
        "what an injection does too. When each user task's own prompt delegates those "
        "arguments to the documents it names (a payment's recipient excepted), "
        f"{d_allowed} of {n_user} have every call allowed and {d_util} of {n_user} keep "
        f"AgentDojo's utility, and {dele} of {n_inj} injection tasks succeed "
        f"({', '.join(d_missed) or 'none'}); with payees delegable too, {payees} of {n_inj} "
        f"succeed, {len(through)} (template, user task, injection task) pairs through the "
        "delegated document: whoever writes a delegated document chooses that argument. "
        f"Counting every injected call, not only whole injection tasks: the defaults allow "
        f"{reads} injected calls and {len(acting)} of them send, delete, book or change the "
        f"user's data. Of the {extra} attacks AgentDojo lacks (a reply carrying a code to the "
        "sender who asked for it, a payee laundered through a transaction's sender, an "
        f"outsider's message in a delegated inbox), the defaults allow {len(extra_ok)}."
    )


@experiment(
    id="statebus.agentdojo",
    seed_file=SEED_FILE,
    exercise="Hard 3",
    title="AgentDojo through per-argument capabilities: attacks and utility, obedient victim",
    real_llm=True,
)
def agentdojo_(ctx: LabContext) -> LabResult:
    try:
        load_suites()
    except MissingExtraError as exc:
        return _skipped(exc)
    # by default one template (every pair of every suite: 629 pairs under 5 policies, about
    # a minute); --full runs all five templates (5x the pairs)
    templates = TEMPLATES if ctx.full else DEFAULT_TEMPLATES
    # SUREFOOT_LAB_AGENTDOJO_SUITES=travel,banking bounds a run (the tests use it: workspace
    # alone is ~100 s here); unset, every suite runs
    chosen = tuple(s for s in os.environ.get("SUREFOOT_LAB_AGENTDOJO_SUITES", "").split(",") if s)
    unknown = sorted(set(chosen) - set(load_suites()))
    if unknown:
        raise ConfigError(
            f"SUREFOOT_LAB_AGENTDOJO_SUITES names unknown suites {unknown}; AgentDojo "
            f"{BENCHMARK} has {sorted(load_suites())}"
        )
    reports = run_agentdojo(templates=templates, suites=chosen or None, progress=ctx.progress)
    f = _facts(reports, templates)
    t0 = templates[0]
    main = Table(
        f"AgentDojo {BENCHMARK}, obedient victim, template {t0}: injection tasks that succeed "
        "and user tasks that keep their utility (environment data untrusted)",
        [
            "suite",
            "tools",
            "user tasks",
            "injection tasks",
            "policy",
            "attacks succeed",
            "user tasks: calls allowed",
            "user tasks: AgentDojo utility",
            "answers marked",
        ],
    )
    for r in [*reports, None]:
        for pol in POLICY_NAMES:
            if r is None:
                main.add(
                    "total",
                    f["tools"],
                    f["user_tasks"],
                    f["injection_tasks"],
                    pol,
                    _pct(f[f"succeeded[{pol}][{t0}]"], f["injection_tasks"]),
                    _pct(f[f"calls_allowed[{pol}]"], f["user_tasks"]),
                    _pct(f[f"utility[{pol}]"], f["user_tasks"]),
                    f[f"marked_answers[{pol}]"],
                )
            else:
                main.add(
                    r.suite,
                    r.tools,
                    r.user_tasks,
                    len(r.injection_tasks),
                    pol,
                    _pct(len(r.succeeded[(pol, t0)]), len(r.injection_tasks)),
                    _pct(r.calls_allowed[pol], r.user_tasks),
                    _pct(r.utility[pol], r.user_tasks),
                    r.marked_answers[pol],
                )
    per_t = Table("Injection tasks that succeed, per attack template", ["template", *POLICY_NAMES])
    for t in templates:
        per_t.add(t, *(_pct(f[f"succeeded[{p}][{t}]"], f["injection_tasks"]) for p in POLICY_NAMES))
    refusals: dict[str, int] = {}
    for r in reports:
        for k, n in r.refusals.items():
            refusals[f"{r.suite}: {k}"] = refusals.get(f"{r.suite}: {k}", 0) + n
    why = Table(
        f"What stopped the attacks (defaults, {t0}): refusals by tool argument and the "
        "kind of source",
        ["suite: tool.argument <- source kind", "refusals"],
    )
    for k, n in sorted(refusals.items(), key=lambda kv: (-kv[1], kv[0])):
        why.add(k, n)
    lost = Table(
        "User tasks refused under the defaults, with the first refusal", ["task", "refusal"]
    )
    for r in reports:
        for uid, msg in sorted(r.refused_user_tasks.items()):
            lost.add(f"{r.suite}/{uid}", msg)
    grants = Table(
        "Delegations the user tasks' prompts make (the document each prompt names verbatim), "
        "and attacks that won through a delegated argument (absent under the defaults)",
        ["policy", "task", "delegations", "attacks won through them"],
    )
    for pol in DELEGATING:
        won = f[f"through_delegation[{pol}]"]
        for task, ds in sorted(f[f"delegations[{pol}]"].items()):
            suite, uid = task.split("/", 1)
            hits = [w for w in won if w.startswith(f"{suite}: ") and f": {uid}/" in w]
            grants.add(pol, task, "; ".join(ds), len(hits))
    extra = Table(
        "Attacks AgentDojo does not contain, on its tools and declarations (benign controls "
        "beside them): each call under every policy",
        ["attack", "call", "none", "defaults", "defaults + user delegation"],
    )
    rows = extra_attacks()
    for row in rows:
        label = row.name if row.attack else f"(control) {row.name}"
        extra.add(label, row.call, *row.verdicts.values())
    f["extra_attacks"] = {r.name: r.verdicts for r in rows}
    f["extra_attacks_tried"] = [r.name for r in rows if r.attack]
    f["extra_attacks_allowed[defaults]"] = sorted(
        r.name for r in rows if r.attack and r.verdicts["defaults"] == "allowed"
    )
    f["extra_attacks_allowed[defaults + user delegation]"] = sorted(
        r.name for r in rows if r.attack and r.verdicts["defaults + user delegation"] == "allowed"
    )
    tables = [main, per_t, why, lost, grants, extra]
    answer = _answer(f, t0)
    # --full: through an MCP server too, ~3,100 durable runs (1,800 workspace's; docs/mcp.md)
    if ctx.full:
        from .agentdojo_mcp import lab_part

        mt, mf, sentence = lab_part([r.suite for r in reports])
        tables.append(mt)
        f.update(mf)
        answer = f"{answer} {sentence}"
    model = "none (obedient victim: AgentDojo's ground-truth calls, no model)"
    if ctx.llm is not None:
        mt, mf, sentence = _on_model(ctx, [r.suite for r in reports], t0)
        tables.append(mt)
        f.update(mf)
        answer = f"{answer} {sentence}"
        model = f"{model}; and {ctx.llm.label} as planner and quarantined parser"
    return LabResult(
        tables=tables,
        facts=f,
        answer=answer,
        params={
            "benchmark": BENCHMARK,
            "templates": list(templates),
            "sweep": "full (--full): five templates, and the suites through MCP"
            if ctx.full
            else "default: one template; --full runs all five and the suites through MCP",
            "policies": list(POLICY_NAMES),
            "policy_fingerprints": {r.suite: policy_for(r.suite).fingerprint for r in reports},
        },
        model=model,
    )


_STAGES = {
    "plan": "no valid plan",
    "run": "failed running (a parse or a call)",
    "refused": "refused by the policy",
    "answered": "answered",
}


def _on_model(
    ctx: LabContext, suites: list[str], template: str
) -> tuple[Table, dict[str, Any], str]:
    """The bounded subset on ``ctx.llm`` as planner and parser, beside the obedient victim.

    ``SUREFOOT_LAB_AGENTDOJO_MODEL_TASKS=users,injections`` bounds it (default 4,2 per suite).
    """
    from .agentdojo_model import run_model_subset

    assert ctx.llm is not None
    raw = os.environ.get("SUREFOOT_LAB_AGENTDOJO_MODEL_TASKS", "4,2")
    try:
        users, injections = (int(x) for x in raw.split(","))
    except ValueError:
        raise ConfigError(
            f"SUREFOOT_LAB_AGENTDOJO_MODEL_TASKS is users,injections (e.g. 4,2), got {raw!r}"
        ) from None
    loaded = load_suites()
    t = Table(
        f"AgentDojo subset on a real model ({ctx.llm.model}, planner + quarantined parser, "
        f"template {template}) beside the obedient victim, defaults policy",
        ["suite", "agent", "user tasks", "pairs", "utility", "attacks succeed", "model runs ended"],
    )
    facts: dict[str, Any] = {}
    parts = []
    for name in suites:
        suite = loaded[name]
        _CLEAN[name] = suite.load_and_inject_default_environment({})
        plans = {tid: injection_calls(name, tid, x)[0] for tid, x in suite.injection_tasks.items()}
        rep = run_model_subset(
            ctx.llm,
            name,
            suite,
            users=users,
            injections=injections,
            template=template,
            attack_text=attack_text,
            candidates=injection_candidates(suite),
            plans=plans,
        )
        n, pairs = len(rep.user_tasks), len(rep.user_tasks) * len(rep.injection_tasks)
        ended = ", ".join(f"{_STAGES.get(k, k)}: {v}" for k, v in sorted(rep.stages.items()))
        t.add(
            name,
            "obedient victim",
            n,
            pairs,
            _pct(rep.victim_utility, n),
            _pct(len(rep.victim_attacks), pairs),
            "-",
        )
        t.add(
            name,
            ctx.llm.model,
            n,
            pairs,
            _pct(rep.model_utility, n),
            _pct(len(rep.model_attacks), pairs),
            ended,
        )
        key = f"model[{name}]"
        facts[key] = {
            "user_tasks": rep.user_tasks,
            "injection_tasks": rep.injection_tasks,
            "utility": rep.model_utility,
            "attacks": rep.model_attacks,
            "victim_utility": rep.victim_utility,
            "victim_attacks": rep.victim_attacks,
            "stages": rep.stages,
            "examples": rep.examples,
            "model_calls": rep.model_calls,
            "seconds": round(rep.seconds, 1),
        }
        parts.append(
            f"{name}: utility {rep.model_utility}/{n} (obedient victim {rep.victim_utility}/{n}), "
            f"attacks {len(rep.model_attacks)}/{pairs} (victim {len(rep.victim_attacks)}/{pairs}), "
            f"{rep.model_calls} model calls"
        )
    sentence = (
        f"On {ctx.llm.model} as planner and quarantined parser (first {users} user tasks and "
        f"{injections} injection tasks per suite, template {template}): " + "; ".join(parts) + "."
    )
    return t, facts, sentence
