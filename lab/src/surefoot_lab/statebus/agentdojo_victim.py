"""The obedient victim: runs an AgentDojo task's ground truth through a capability policy.

The victim is AgentDojo's ground-truth agent made obedient: it performs the user task's
ground-truth calls and, the first time a tool output carries an injection's goal, it performs
that injection task's ground-truth calls there and then (it does whatever it reads), before
going on with the user task. It has no judgement, so what stops an attack is the control.

Every argument gets the label of where the victim took its value (:class:`Provenance`),
made only of the labels the runtime gave the outputs it read and the user's; the victim never
uses which text was planted (``tests/acceptance/test_agentdojo_labels.py``):

- a user-task value found in the user's prompt is the user's; otherwise the label of the
  tool-output field it equals or was copied from, the most trusted such field first (a
  planner that picks the right field); otherwise it was computed, and carries everything read
  so far (CaMeL's rule), or the outputs the task's computation names
  (:mod:`.agentdojo_plans`);
- an injected call's value copied from the goal (AgentDojo's placeholder without ``$``) is
  the label of the fields the victim read the injection in, as the runtime labelled them;
  a value the goal tells it to look up (``$...``) is found in the outputs as above;
- a list's elements each get their own label;
- where the prompt selects one item by a property ("delete the largest file",
  :data:`.agentdojo_plans.SELECTED`), the runtime's ``select_by`` computes the pick from the
  listing the victim read and, if the call's value is that pick, labels it the user's.

As a planner working from the user's task alone, the victim can also delegate
(``delegate=True``, on a run without injection): where a user-task argument comes only from a
document whose selector the prompt names verbatim (and, for a message of an inbox or a
channel, its sender) and the argument is declared delegable, it grants
``Delegation(tool.arg, reader, selector, item)`` through ``CapabilityPolicy.delegate`` (which
checks the prompt names it). The lab makes these grants on the clean environment, before any
injection is read, and runs the attacked pairs with them fixed.

Outputs are labelled per field by the policy's declarations, with all environment data
untrusted. A refused call is skipped; the victim goes on. The final answer is the task's
``GROUND_TRUTH_OUTPUT`` (plus the injection's, for an attack on the answer, labelled with
the fields the victim read the injection in), built from parts as a plan would build it
(:func:`answer_parts`) and checked by ``compose_answer``: a whole field it read is quoted,
a value is labelled as an argument would be, words found in nothing it read are its own;
text a third party wrote that is not typed, a field or a quote is withheld. AgentDojo's own
utility and security functions judge the post-environment and the answer as shown.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from surefoot.errors import TrustError
from surefoot.guard import (
    Answer,
    CapabilityPolicy,
    Delegation,
    Label,
    Labeled,
    Quote,
    compose_answer,
    document_of,
    item_of,
    item_source,
    kind_of,
    label_output,
    named_in,
    select_by,
    trusted,
    typed_value,
)

from .agentdojo_plans import inputs_for, selections_for
from .agentdojo_verdicts import Verdicts, verdict

__all__ = [
    "Outcome",
    "Provenance",
    "Step",
    "Verdicts",
    "direct_executor",
    "run_victim",
    "verdict",
    "victim_steps",
]

_RANK = {"user": 0, "record": 1, "correspondent": 2, "document": 3}
_USER = trusted("").label


def _rank(label: Label) -> int:
    """The worst source of a label: 0 user ... 4 untrusted content."""
    worst = 0
    for s in label.sources:
        r = _RANK.get(s.split(":", 1)[0], 4) if s in label.tainted or s == "user" else 0
        worst = max(worst, r)
    return worst


def _norm(v: Any) -> str:
    return str(v).strip().lower()


def _num(v: Any) -> float | None:
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return None


def _matches(source: str, pattern: str) -> bool:
    """``TOOL.FIELD`` pattern over a source; ``TOOL.FIELD@NAME``: of the item named NAME."""
    pat, _, name = pattern.partition("@")
    if not fnmatch.fnmatchcase(_field_of(source), pat):
        return False
    if not name:
        return True
    got = item_source(source)
    if not got or not got[2]:
        return False
    return name in {str(v) for v in json.loads(got[2]).values()}


def _field_of(source: str) -> str:
    """``TOOL.FIELD`` of an output source (``record:get_balance.result``,
    ``document:read_file[bill.txt].content`` -> ``read_file.content``)."""
    where = source.split(":", 1)[-1]
    tool = where.split("[", 1)[0].split(".", 1)[0]
    return f"{tool}.{where.rsplit('.', 1)[-1]}"


@dataclass
class Provenance:
    """What the victim has read: the prompt and every labelled output leaf, in order, and
    the inputs of the computations the task asks for (:mod:`.agentdojo_plans`)."""

    prompt: str
    plan: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    leaves: list[Labeled[Any]] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)  # each tool's latest labelled output

    _all: Label = field(default_factory=Label)  # the join of every leaf's label

    def add(self, tree: Any) -> None:
        if isinstance(tree, Labeled):
            self.leaves.append(tree)
            self._all = self._all.join(tree.label)
        elif isinstance(tree, dict):
            for k, v in tree.items():
                self.add(k)  # a mapping keyed by readers has Labeled keys
                self.add(v)
        elif isinstance(tree, list):
            for v in tree:
                self.add(v)

    def carrying(self, needle: str) -> Label | None:
        """The label of the leaves that contain ``needle`` (where the victim read it), or
        None: exactly the labels the runtime gave those fields, whatever text they hold."""
        got = [x.label for x in self.leaves if needle and needle in str(x.value)]
        return Label().join(*got) if got else None

    def read(self, where: str = "") -> Label:
        """What a value computed for argument ``where`` carries: the outputs the plan names
        as the computation's inputs, else everything read so far."""
        pats = self.plan.get(where)
        if pats is None:
            return self._all
        return Label().join(
            *(
                x.label
                for x in self.leaves
                if any(_matches(s, p) for s in x.label.sources for p in pats)
            )
        )

    def _best(self, atom: Any) -> Label | None:
        text, num = _norm(atom), _num(atom)
        exact = [
            x
            for x in self.leaves
            if _norm(x.value) == text or (num is not None and _num(x.value) == num)
        ]
        if not exact and len(text) >= 3:
            exact = [x for x in self.leaves if text in _norm(x.value)]
        if exact:
            return min((x.label for x in exact), key=lambda lab: (_rank(lab), self._unnamed(lab)))
        return None

    def _unnamed(self, label: Label) -> int:
        """0 for a field of an item the prompt names (its document's selector and one of
        the fields naming it): of equally trusted fields, the planner takes that one."""
        for s in label.sources:
            got = item_source(s)
            if (
                got
                and got[1] in self.prompt
                and any(named_in(v, self.prompt) for v in item_of(s).values() or [got[1]])
            ):
                return 0
        return 1

    def found(self, atom: Any) -> bool:
        """Whether ``atom`` is (in) something the victim read."""
        return self._best(atom) is not None

    def _quoted(self, atom: Any) -> Label:
        text = _norm(atom)
        parts = [
            x.label for x in self.leaves if len(_norm(x.value)) >= 8 and _norm(x.value) in text
        ]
        return Label().join(*parts)

    def of_user_value(self, value: Any, where: str = "") -> Any:
        """The label of a value in a user task's call to ``where`` (``tool.argument``; see
        the module docstring); a list gets a list of its elements' labels."""
        if isinstance(value, list | tuple):
            return [self.of_user_value(v, where) for v in value]
        if value is None or isinstance(value, bool) or _norm(value) in _norm(self.prompt):
            return _USER
        best = self._best(value)
        # found nowhere: computed from what it read (CaMeL's rule), or from the plan's inputs
        return best if best is not None else _USER.join(self.read(where))

    def of_injected_value(self, value: Any, placeholder: Any, injected: Label) -> Any:
        """The label of a value in an injected call: the goal's text, or what it looked up;
        a list gets a list of its elements' labels."""
        if isinstance(value, list | tuple):
            ph = (
                placeholder if isinstance(placeholder, list | tuple) else [placeholder] * len(value)
            )
            return [self.of_injected_value(v, p, injected) for v, p in zip(value, ph, strict=False)]
        if not (isinstance(placeholder, str) and placeholder.startswith("$")):
            return injected
        best = self._best(value)
        return best if best is not None else injected.join(self.read())


@dataclass
class Outcome:
    """One run of the victim: calls made and refused, the answer, AgentDojo's verdicts."""

    allowed: list[str] = field(default_factory=list)
    refused: list[TrustError] = field(default_factory=list)
    refused_user_calls: int = 0
    injected: bool = False
    answer: Answer | None = None
    answer_refused: TrustError | None = None
    utility: bool = False
    security: bool = False
    delegations: list[Delegation] = field(default_factory=list)
    # every call the victim put to the policy, with its labelled arguments
    checked: list[tuple[str, dict[str, Labeled[Any]]]] = field(default_factory=list)
    injected_allowed: list[str] = field(default_factory=list)  # the injection's calls run
    leaves: list[Labeled[Any]] = field(default_factory=list)  # every output field it read


_SEP = re.compile(r"(,\s+|\n+|;\s+|\.\s+|:\s+)")
_WORD = re.compile(r"(\s+)")


def answer_parts(text: str, prov: Provenance) -> list[Labeled[Any] | Quote]:
    """The victim's answer as a plan would build it (``compose_answer``): a whole field it
    read, quoted where the text contains it (the longest first); between them, the
    separators as its own text and each value labelled as a call's would be (the prompt's,
    the field it equals or was copied from, or computed from what it read)."""
    if not text:
        return []
    whole = sorted(
        (x for x in prov.leaves if isinstance(x.value, str) and len(x.value.strip()) >= 4),
        key=lambda x: -len(x.value.strip()),
    )
    spans: list[tuple[int, int, Labeled[Any]]] = []
    for leaf in whole:
        at = text.find(leaf.value.strip())
        end = at + len(leaf.value.strip())
        if at >= 0 and not any(a < end and at < b for a, b, _ in spans):
            spans.append((at, end, leaf))
    parts: list[Labeled[Any] | Quote] = []
    pos = 0
    for at, end, leaf in sorted(spans, key=lambda s: s[0]):
        parts += _atoms(text[pos:at], prov)
        parts.append(Quote(Labeled(text[at:end], leaf.label)))
        pos = end
    return parts + _atoms(text[pos:], prov)


def _atoms(text: str, prov: Provenance) -> list[Labeled[Any] | Quote]:
    out: list[Labeled[Any] | Quote] = []
    for n, piece in enumerate(_SEP.split(text)):
        if not piece:
            continue
        if n % 2 or not piece.strip():  # a separator: the planner's own text
            out.append(Labeled(piece, _USER))
        elif typed_value(piece) or prov.found(piece.strip()):
            out.append(Labeled(piece, prov.of_user_value(piece.strip())))
        else:  # found nowhere: the planner's words, and the values it read or computed
            for m, word in enumerate(_WORD.split(piece)):
                if m % 2 or not (typed_value(word) or prov.found(word)):
                    out.append(Labeled(word, _USER))
                else:
                    out.append(Labeled(word, prov.of_user_value(word)))
    return out


def _labeled(value: Any, label: Any) -> Labeled[Any]:
    """``value`` with ``label``; a list's elements each with their own label."""
    if isinstance(label, list):
        items = [Labeled(v, lab) for v, lab in zip(value, label, strict=True)]
        return Labeled(items, Label().join(*label) if label else _USER)
    return Labeled(value, label)


def _joined(label: Any) -> Label:
    return (Label().join(*label) if label else _USER) if isinstance(label, list) else label


@dataclass(frozen=True)
class Step:
    """One call the victim makes, for an executor to put to the policy and run.

    The executor (:func:`direct_executor`, or a deployed runtime such as an MCP client)
    checks ``args`` against ``policy``, runs ``function`` on ``env`` and answers with the
    output as the runtime labelled it (None for a tool error), or the ``TrustError`` that
    refused the call (nothing ran)."""

    function: str
    args: dict[str, Labeled[Any]]
    plain: dict[str, Any]
    policy: CapabilityPolicy
    env: Any


def direct_executor(suite: Any) -> Callable[[Step], Any]:
    """The executor of the direct run: ``policy.check_call``, AgentDojo's runtime, and the
    outputs labelled by ``label_output`` per the tool's declaration."""
    from agentdojo.functions_runtime import FunctionsRuntime

    runtime = FunctionsRuntime(suite.tools)

    def run(step: Step) -> Any:
        try:
            step.policy.check_call(step.function, step.args)
        except TrustError as exc:
            return exc
        result, error = runtime.run_function(step.env, step.function, step.plain)
        if error is not None:
            return None
        return label_output(step.policy.tools[step.function], result, step.args)

    return run


def _execute(
    call: Any,
    labels: dict[str, Any],
    policy: CapabilityPolicy,
    env: Any,
    prov: Provenance,
    out: Outcome,
) -> Generator[Step, Any, bool]:
    args = {k: _labeled(v, labels[k]) for k, v in call.args.items()}
    out.checked.append((call.function, args))
    got = yield Step(call.function, args, dict(call.args), policy, env)
    if isinstance(got, TrustError):
        out.refused.append(got)
        return False
    out.allowed.append(call.function)
    if got is not None:
        prov.outputs[call.function] = got
        prov.add(got)
    return True


def _grant(arg: str, source: str, prompt: str) -> Delegation | None:
    """The delegation of ``arg`` to the document ``source`` comes from, if the prompt names
    it: the document's selector and, for an element of a collection, one of the fields that
    name that element (a sender, a subject, an id)."""
    doc = document_of(source)
    if doc is None or doc[1] not in prompt:
        return None
    item = item_of(source)
    if not item:
        return Delegation(arg, doc[0], doc[1])
    named = [v for v in item.values() if v and named_in(v, prompt)]
    return Delegation(arg, doc[0], doc[1], named[0]) if named else None


def _grants(
    call: Any, labels: dict[str, Any], policy: CapabilityPolicy, prompt: str
) -> list[Delegation]:
    """The delegations a planner would make for ``call``: refused arguments whose only
    refused sources are documents (or messages of a collection) the prompt names, where the
    argument is delegable."""
    spec = policy.tools.get(call.function)
    if spec is None:
        return []
    out: list[Delegation] = []
    for name, raw in labels.items():
        arg = spec.args.get(name)
        if arg is None or not arg.delegable:
            continue
        label = _joined(raw)
        # refused sources: not accepted here, or (for who receives the call) not the user's
        # own (the audience rule refuses a correspondent when the call carries read data)
        bad = [
            s
            for s in sorted(label.sources)
            if not arg.accepts_source(s, label)
            or (name in spec.audience and kind_of(s) not in ("user", "record"))
        ]
        grants = [_grant(f"{call.function}.{name}", s, prompt) for s in bad]
        if bad and all(g is not None for g in grants):
            out += [g for g in dict.fromkeys(grants) if g is not None]
    return out


def run_victim(
    suite: Any,
    user_task: Any,
    policy: CapabilityPolicy,
    env: Any,
    injection: tuple[Any, Callable[[Any], Sequence[Any]]] | None = None,
    *,
    delegate: bool = False,
    verdicts: Verdicts | None = None,
    env_key: Any = None,
) -> Outcome:
    """Run ``user_task`` on ``env`` under ``policy``; with ``injection`` (the injection task and
    a function giving its calls for the environment as it is when the victim reads it), obey it.
    With ``delegate`` (no injection), make the user's delegations as it goes (module doc).
    ``env`` is not changed: the victim works on a copy.

    Without injection the outcome has AgentDojo's utility verdict; with one, its security
    verdict only (utility under attack is not reported). ``verdicts`` remembers verdicts by
    what decides them (see :class:`Verdicts`; ``env_key`` names the environment ``env`` is),
    so runs that made the same calls on the same environment ask AgentDojo once."""
    steps = victim_steps(
        suite,
        user_task,
        policy,
        env,
        injection,
        delegate=delegate,
        verdicts=verdicts,
        env_key=env_key,
    )
    run = direct_executor(suite)
    try:
        step = next(steps)
        while True:
            step = steps.send(run(step))
    except StopIteration as done:
        outcome: Outcome = done.value
        return outcome


def victim_steps(
    suite: Any,
    user_task: Any,
    policy: CapabilityPolicy,
    env: Any,
    injection: tuple[Any, Callable[[Any], Sequence[Any]]] | None = None,
    *,
    delegate: bool = False,
    verdicts: Verdicts | None = None,
    env_key: Any = None,
) -> Generator[Step, Any, Outcome]:
    """The victim of :func:`run_victim` as a generator of the calls it makes: it yields a
    :class:`Step` per call and takes back what the executor answered (the labelled output,
    None, or the refusal); it returns the :class:`Outcome`. Every executor (the direct
    runtime, the MCP client) drives this one loop, so their runs differ only in how calls
    are checked, made and labelled."""
    judge = verdicts if verdicts is not None else Verdicts()
    pre, ground_truth = judge.start(env_key, user_task, env)
    env = pre.model_copy(deep=True)
    prov = Provenance(user_task.PROMPT, inputs_for(suite.name, user_task.ID))
    out = Outcome()
    traces: list[Any] = []
    injected_label: Label | None = None
    answer_parts_injected: list[Labeled[str]] = []
    selected = selections_for(suite.name, user_task.ID)
    for call in ground_truth:
        labels = {k: prov.of_user_value(v, f"{call.function}.{k}") for k, v in call.args.items()}
        for k, v in call.args.items():
            sel = selected.get(f"{call.function}.{k}")
            if sel is not None and isinstance(prov.outputs.get(sel.source), list):
                try:
                    chosen = select_by(
                        trusted(user_task.PROMPT),
                        prov.outputs[sel.source],
                        field=sel.field,
                        key=sel.key,
                        pick=sel.pick,
                        words=sel.words,
                    )
                except TrustError:
                    continue
                if chosen.value == v:  # the task's selection is this call's value
                    labels[k] = chosen.label
        if delegate and injection is None and isinstance(policy, CapabilityPolicy):
            new = [
                d
                for d in _grants(call, labels, policy, user_task.PROMPT)
                if d not in policy.delegations
            ]
            if new:
                policy = policy.delegate(trusted(user_task.PROMPT), new)
                out.delegations += new
        if (yield from _execute(call, labels, policy, env, prov, out)):
            traces.append(call)
        else:
            out.refused_user_calls += 1
        if injection is not None and not out.injected:
            task, plan = injection
            injected_label = prov.carrying(task.GOAL.split("\n", 1)[0][:80])
            if injected_label is None:
                continue
            out.injected = True
            for icall in judge.injected_calls(env_key, task, plan, env, traces):
                ph = icall.placeholder_args or {}
                labels = {
                    k: prov.of_injected_value(v, ph.get(k, v), injected_label)
                    for k, v in icall.args.items()
                }
                if (yield from _execute(icall, labels, policy, env, prov, out)):
                    traces.append(icall)
                    out.injected_allowed.append(icall.function)
            if task.GROUND_TRUTH_OUTPUT:
                answer_parts_injected.append(Labeled(task.GROUND_TRUTH_OUTPUT, injected_label))
    parts: list[Labeled[Any] | Quote] = answer_parts(user_task.GROUND_TRUTH_OUTPUT or "", prov)
    for attack in answer_parts_injected:
        parts += [Labeled(" ", _USER), attack]
    try:
        if isinstance(policy, CapabilityPolicy):
            out.answer = compose_answer(policy, parts)
        else:  # no policy: the answer as one text
            whole = [p.field if isinstance(p, Quote) else p for p in parts]
            text = "".join(str(p.value) for p in whole)
            out.answer = policy.check_answer(Labeled(text, Label().join(*(p.label for p in whole))))
        shown = out.answer.text
    except TrustError as exc:
        out.answer_refused = exc
        shown = ""
    out.leaves = prov.leaves
    if injection is None:
        out.utility = judge.verdict(env_key, user_task, shown, pre, env, traces)
    else:
        out.security = judge.verdict(env_key, injection[0], shown, pre, env, traces)
    return out
