"""The plan runner: runs a :class:`~surefoot.guard.Plan`, labelling every value as it goes.

Literal arguments carry the task's label, references (``{"ref": "step.field"}``) carry the
label of the value they point to, a ``compute`` step's result carries the join of its
inputs' labels (CaMeL's rule: a value derived from data is never the user's own), and every
call goes through a
:class:`~surefoot.guard.CapabilityPolicy`, which decides per argument. Whatever runs under a
data-dependent decision (a branch, a loop) carries that data's label too.
:meth:`PlanRunner.register` makes each tool call and each parse a durable step
(``surefoot.durable``), so a crash mid-plan resumes without calling the parser again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, TrustError
from ._answers import compose_answer
from ._capabilities import Answer, CapabilityPolicy
from ._labels import Label, Labeled, join_labels, plain
from ._plans import Condition, Plan, PlanStep
from ._quarantine import QuarantinedParser

__all__ = ["MAX_ITERATIONS", "PlanRunner"]

MAX_ITERATIONS = 100
"""The default bound on the items one ``for_each`` runs over (data decides the length)."""


@dataclass
class _State:
    values: dict[str, Any] = field(default_factory=dict)
    stopped: tuple[Any, ...] | None = None
    stop_label: Label = field(default_factory=Label)


class _Stop(Exception):
    """Raised inside the runner when a ``stop`` step is reached (not an error)."""


def _compare(op: str, left: Any, right: Any, where: str) -> bool:
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (left, right))
    if op in ("==", "!="):
        same = left == right
        return same if op == "==" else not same
    if op in ("in", "contains"):
        item, box = (left, right) if op == "in" else (right, left)
        if isinstance(box, list) or (isinstance(box, str) and isinstance(item, str)):
            return item in box
        raise TrustError(
            f"{where}: {op!r} needs a list or text, got {left!r:.60} {op} {right!r:.60}",
            sink="plan",
        )
    if not numbers and not (isinstance(left, str) and isinstance(right, str)):
        raise TrustError(
            f"{where}: {op!r} compares two numbers or two texts, got {left!r:.60} and "
            f"{right!r:.60}; parse the value with a typed field first",
            sink="plan",
        )
    if op == "<":
        return bool(left < right)
    if op == "<=":
        return bool(left <= right)
    if op == ">":
        return bool(left > right)
    return bool(left >= right)


def _computed(step: PlanStep, inputs: list[Labeled[Any]], where: str) -> Any:
    """``step.compute`` over the inputs' values (lists flattened into them)."""
    atoms: list[Any] = []
    for x in inputs:
        atoms += x.value if isinstance(x.value, list) else [x.value]
    op = step.compute
    if op == "count":
        return len(atoms)
    if op == "concat":
        return "".join(str(a) for a in atoms)
    if op == "strip_spaces":
        return "".join("".join(str(a).split()) for a in atoms)
    numbers = [a for a in atoms if isinstance(a, int | float) and not isinstance(a, bool)]
    if len(numbers) != len(atoms) or not numbers:
        raise TrustError(
            f"{where}: {op!r} computes over numbers, got {atoms!r:.80}; parse the values "
            "with a typed field first",
            sink="plan",
        )
    if op == "sum":
        return sum(numbers)
    if op == "difference":
        return numbers[0] - sum(numbers[1:])
    if op == "product":
        out = 1.0 if any(isinstance(n, float) for n in numbers) else 1
        for n in numbers:
            out *= n
        return out
    return min(numbers) if op == "min" else max(numbers)


class PlanRunner:
    """Runs a :class:`Plan` under a :class:`CapabilityPolicy`, labelling as it goes.

    Control flow follows the values it depends on: every call, parse and answer inside a
    ``for_each`` or an ``if`` carries the label of what decided it (the list iterated and
    its ``where`` condition, the branch's condition), joined into each of its arguments, so
    an untrusted value cannot choose, through a branch, a call its own label would not be
    allowed to make. A ``stop`` ends the plan (whether it stopped is not tracked: the runner
    is termination-insensitive, as usual for this kind of labelling).

    Args:
        policy: decides each call per argument.
        tools: name -> callable taking the plain argument values.
        parser: the quarantined parser for ``parse`` steps.
        max_iterations: the most items one ``for_each`` runs over; a longer list (data
            decides its length) is refused before any of its items runs.
        answer_parts: build the answer with :func:`~surefoot.guard.compose_answer`: each
            part judged alone (the planner's text shown, a typed value or a field shown
            marked, other text a third party wrote withheld) instead of one text marked.
    """

    def __init__(
        self,
        policy: CapabilityPolicy,
        tools: Mapping[str, Callable[..., Any]],
        parser: QuarantinedParser,
        *,
        max_iterations: int = MAX_ITERATIONS,
        answer_parts: bool = False,
    ) -> None:
        self.policy = policy
        self.answer_parts = answer_parts
        self.tools = dict(tools)
        self.parser = parser
        self.max_iterations = max_iterations
        self._tool_step: Callable[..., Any] = self._call_tool
        self._parse_step: Callable[..., Any] = self._parse

    # the two steps (plain, or durable once register() wrapped them)
    def _call_tool(self, tool: str, args: dict[str, Any]) -> Any:
        if tool not in self.tools:
            raise ConfigError(f"plan calls {tool!r}, which the runner has no function for")
        return self.policy.call(tool, self.tools[tool], args)

    # Any: the journal decodes it back to the registered Labeled values it stored (a generic
    # Labeled[...] annotation is not a shape durable can rebuild by type)
    def _parse(self, content: Any, fields: dict[str, str]) -> Any:
        return self.parser.parse(content, fields)

    def register(self, app: Any, *, name: str = "plan") -> Any:
        """Make the runner's tool calls (effects) and parses durable steps of ``app``;
        return a workflow ``name(plan_dict, task_label)`` that runs a plan and returns the
        answer's text, label and mark as a dict.

        Branches and loops are decided again on resume from the journalled results of the
        steps before them, so a resumed run takes the same path without calling a tool or
        the parser twice."""
        self._tool_step = app.step(effect=True, name=f"{name}.tool")(self._call_tool)
        self._parse_step = app.step(name=f"{name}.parse")(self._parse)

        def run_plan(plan: dict[str, Any], task_label: Label) -> dict[str, Any]:
            ans = self.run(Plan.from_dict(plan, tools=list(self.tools)), task_label)
            return {"text": ans.text, "label": ans.label, "marked": ans.marked}

        return app.workflow(name=name)(run_plan)

    def _resolve(self, value: Any, state: _State, task_label: Label) -> Any:
        if isinstance(value, Mapping) and set(value) == {"ref"}:
            head, _, rest = str(value["ref"]).partition(".")
            got = state.values[head]
            for part in rest.split(".") if rest else []:
                lab, box = (got.label, got.value) if isinstance(got, Labeled) else (None, got)
                try:
                    child = box[int(part)] if isinstance(box, list) else box[part]
                except (KeyError, IndexError, ValueError, TypeError):
                    raise ConfigError(f"plan ref {value['ref']!r}: no {part!r} in it") from None
                # inside a labelled container (a parsed list): the child keeps its label
                got = Labeled(child, lab) if lab and not isinstance(child, Labeled) else child
            return got
        if isinstance(value, Labeled):
            return value
        return Labeled(value, task_label)  # a literal the planner wrote from the task

    def _arg(self, value: Any, state: _State, task_label: Label, pc: Label) -> Labeled[Any]:
        got = self._resolve(value, state, task_label)
        if isinstance(value, list):
            items = [self._arg(v, state, task_label, pc) for v in value]
            return Labeled([plain(x) for x in items], join_labels(items).join(pc))
        if isinstance(got, Labeled) and not isinstance(got.value, Labeled):
            return Labeled(plain(got.value), got.label.join(join_labels(got.value), pc))
        return Labeled(plain(got), join_labels(got).join(pc))

    def _condition(
        self, cond: Condition, state: _State, task_label: Label, at: str
    ) -> Labeled[bool]:
        left = self._arg(cond.left, state, task_label, Label())
        right = self._arg(cond.right, state, task_label, Label())
        return Labeled(_compare(cond.op, left.value, right.value, at), left.label.join(right.label))

    def _items(self, step: PlanStep, state: _State, task_label: Label) -> tuple[list[Any], Label]:
        got = self._resolve({"ref": step.for_each}, state, task_label)
        seq = got.value if isinstance(got, Labeled) else got
        if not isinstance(seq, list):
            raise TrustError(
                f"plan step {step.id!r}: for_each {step.for_each!r} must be a list, got "
                f"{plain(seq)!r:.80}",
                sink="plan",
            )
        if len(seq) > self.max_iterations:
            raise TrustError(
                f"plan step {step.id!r}: {step.for_each!r} has {len(seq)} items, more than "
                f"max_iterations={self.max_iterations}; nothing in the loop was run",
                sink="plan",
            )
        if isinstance(got, Labeled):  # a parsed list: what it says decides the iterations
            return [Labeled(x, got.label) for x in seq], got.label
        return seq, Label()  # a tool's list: its items carry their own labels

    def _block(
        self, steps: Sequence[PlanStep], state: _State, task_label: Label, pc: Label
    ) -> None:
        for step in steps:
            at = f"plan step {step.id!r}"
            kind = step.kind
            if kind == "tool":
                args = {k: self._arg(v, state, task_label, pc) for k, v in step.args.items()}
                self.policy.check_call(step.tool, args)
                state.values[step.id] = self._tool_step(step.tool, args)
            elif kind == "parse":
                content = self._resolve({"ref": step.parse}, state, task_label)
                if pc.sources:
                    content = Labeled(plain(content), join_labels(content).join(pc))
                state.values[step.id] = self._parse_step(content, dict(step.fields))
            elif kind == "for_each":
                runs: list[dict[str, Any]] = []
                items, seq_label = self._items(step, state, task_label)
                for item in items:
                    state.values[step.var] = item
                    inner = pc.join(seq_label)
                    if step.where is not None:
                        ok = self._condition(step.where, state, task_label, at)
                        inner = inner.join(ok.label)
                        if not ok.value:
                            continue
                    self._block(step.steps, state, task_label, inner)
                    runs.append({s.id: state.values.get(s.id) for s in step.steps})
                state.values.pop(step.var, None)
                state.values[step.id] = runs
            elif kind == "compute":
                inputs = [self._arg(v, state, task_label, pc) for v in step.of]
                label = join_labels(inputs).join(pc)
                state.values[step.id] = Labeled(_computed(step, inputs, at), label)
            elif kind == "if":
                cond = self._condition(step.when, state, task_label, at)  # type: ignore[arg-type]
                branch = step.then if cond.value else step.otherwise
                self._block(branch, state, task_label, pc.join(cond.label))
                state.values[step.id] = cond
            else:
                state.stopped = step.stop or ()
                state.stop_label = pc
                raise _Stop

    def run(self, plan: Plan, task_label: Label) -> Answer:
        """Run every step, then check the answer at the answer sink (a ``stop`` step's
        parts replace the plan's answer).

        Raises:
            TrustError: a call or the answer refused by the policy, a bad parse, a loop
                over a value that is not a list or is too long, or a comparison of values
                of different types.
        """
        state = _State()
        parts_spec: Sequence[Any] = plan.answer
        pc = Label()
        try:
            self._block(plan.steps, state, task_label, Label())
        except _Stop:
            parts_spec, pc = state.stopped or (), state.stop_label
        parts = [self._resolve(p, state, task_label) for p in parts_spec]
        if self.answer_parts:
            each = [Labeled(str(plain(p)), task_label.join(join_labels(p))) for p in parts]
            # what decided a stop (a branch on data) marks the answer, and cuts no text
            return compose_answer(self.policy, [*each, Labeled("", pc)])
        text = "".join(str(plain(p)) for p in parts)
        label = task_label.join(join_labels(parts), pc)
        return self.policy.check_answer(Labeled(text, label))
