"""Plans: what to call, in which order, with which arguments, decided from trusted input.

This is the CaMeL / dual-LLM pattern. :func:`make_plan` asks a planner model for a
:class:`Plan` from the trusted task alone (and the tools' names); the planner never sees a
tool's output, so planted text cannot change the plan. Untrusted content is read by a
:class:`~surefoot.guard.QuarantinedParser` in the plan's ``parse`` steps, and
:class:`~surefoot.guard.PlanRunner` runs the plan under a capability policy.

A plan may branch (``if``), loop (``for_each`` over a list, optionally ``where`` a condition
holds) and ``stop``: the control flow is the planner's, written from trusted input. A plan is
JSON data, validated here (:meth:`Plan.from_dict`) and interpreted by the runner, never code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, TrustError
from ._labels import Labeled
from ._replies import ChatModel, reply_object

__all__ = ["COMPUTE_OPS", "OPS", "Condition", "Plan", "PlanStep", "make_plan"]

OPS = ("==", "!=", "<", "<=", ">", ">=", "in", "contains")
"""The comparisons a plan's ``if`` and ``where`` may use."""
COMPUTE_OPS = ("sum", "difference", "product", "min", "max", "count", "concat", "strip_spaces")
"""What a ``compute`` step may do with its inputs (lists are flattened into them): the
computations a task asks for ("the difference", "the total", "the IBAN without spaces"),
made explicit so the result carries the labels of exactly its inputs."""
_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Condition:
    """``left op right``; each side a literal (from the task) or ``{"ref": ...}``."""

    left: Any
    op: str
    right: Any

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Condition:
        if not isinstance(data, Mapping) or set(data) != {"left", "op", "right"}:
            raise ConfigError(
                f"{where}: a condition is {{'left': ..., 'op': ..., 'right': ...}}, "
                f"got {data!r:.120}"
            )
        if data["op"] not in OPS:
            raise ConfigError(f"{where}: op must be one of {OPS}, got {data['op']!r}")
        return cls(data["left"], data["op"], data["right"])

    def to_dict(self) -> dict[str, Any]:
        return {"left": self.left, "op": self.op, "right": self.right}


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One step of a plan; exactly one kind:

    - a tool call: ``tool`` + ``args``;
    - a parse: ``parse`` (a reference) + ``fields``;
    - a loop: ``for_each`` (a reference to a list) + ``var`` (``"as"`` in JSON) + ``steps``,
      optionally ``where`` (a :class:`Condition` on the item; items failing it are skipped);
    - a branch: ``when`` (``"if"`` in JSON, a :class:`Condition`) + ``then`` / ``otherwise``
      (``"else"``);
    - a computation: ``compute`` (one of :data:`COMPUTE_OPS`) + ``of`` (its inputs,
      references or literals); the result carries the join of its inputs' labels;
    - a stop: ``stop`` (the answer's parts); the plan ends there.
    """

    id: str
    tool: str = ""
    args: Mapping[str, Any] = field(default_factory=dict)
    parse: str = ""
    fields: Mapping[str, str] = field(default_factory=dict)
    for_each: str = ""
    var: str = ""
    where: Condition | None = None
    steps: tuple[PlanStep, ...] = ()
    when: Condition | None = None
    then: tuple[PlanStep, ...] = ()
    otherwise: tuple[PlanStep, ...] = ()
    stop: tuple[Any, ...] | None = None
    compute: str = ""
    of: tuple[Any, ...] = ()

    @property
    def kind(self) -> str:
        for k in ("tool", "parse", "for_each", "compute"):
            if getattr(self, k):
                return k
        return "if" if self.when is not None else "stop"

    def to_dict(self) -> dict[str, Any]:
        """The step as the JSON data :meth:`Plan.from_dict` reads."""
        out: dict[str, Any] = {"id": self.id}
        if self.tool:
            out |= {"tool": self.tool, "args": dict(self.args)}
        elif self.parse:
            out |= {"parse": self.parse, "fields": dict(self.fields)}
        elif self.for_each:
            out |= {"for_each": self.for_each, "as": self.var}
            out["steps"] = [x.to_dict() for x in self.steps]
            if self.where is not None:
                out["where"] = self.where.to_dict()
        elif self.compute:
            out |= {"compute": self.compute, "of": list(self.of)}
        elif self.when is not None:
            out |= {"if": self.when.to_dict(), "then": [x.to_dict() for x in self.then]}
            out["else"] = [x.to_dict() for x in self.otherwise]
        else:
            out["stop"] = list(self.stop or ())
        return out


_KINDS = {"tool", "parse", "for_each", "if", "stop", "compute"}


def _parts(value: Any) -> list[Any]:
    return [value] if isinstance(value, str | Mapping) else list(value)


class _Scope:
    """Names a reference may use at one point of a plan: earlier steps and loop variables."""

    def __init__(self, names: set[str], ids: set[str]) -> None:
        self.names = names  # visible here
        self.ids = ids  # every id in the plan (unique plan-wide)

    def check(self, refs: list[str], where: str) -> None:
        for ref in refs:
            if ref.split(".", 1)[0] not in self.names:
                raise ConfigError(f"{where}: {ref!r} refers to no earlier step")


def _steps(raw: Any, scope: _Scope, tools: Sequence[str], where: str) -> tuple[PlanStep, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: steps must be a list, got {raw!r:.120}")
    out: list[PlanStep] = []
    for i, s in enumerate(raw):
        sid = s.get("id") if isinstance(s, Mapping) else None
        if not isinstance(sid, str) or not _ID.match(sid) or sid in scope.ids:
            raise ConfigError(f"plan step {i}: id must be a new identifier, got {sid!r}")
        assert isinstance(s, Mapping)
        kinds = sorted(_KINDS & set(s))
        if len(kinds) != 1:
            raise ConfigError(
                f"plan step {sid!r}: give either 'tool' or 'parse' (or one of 'for_each', "
                f"'if', 'compute', 'stop'), not {s!r:.120}"
            )
        scope.ids.add(sid)
        at = f"plan step {sid!r}"
        kind = kinds[0]
        if kind == "tool":
            step = PlanStep(sid, tool=s["tool"], args=s.get("args", {}))
            if tools and step.tool not in tools:
                raise ConfigError(f"{at}: unknown tool {step.tool!r} ({list(tools)})")
            scope.check(_refs(step.args), at)
        elif kind == "parse":
            step = PlanStep(sid, parse=s["parse"], fields=s.get("fields", {}))
            scope.check([step.parse], at)
        elif kind == "for_each":
            var = s.get("as")
            if not isinstance(var, str) or not _ID.match(var) or var in scope.ids:
                raise ConfigError(f"{at}: 'as' must name a new loop variable, got {var!r}")
            scope.check([s["for_each"]], at)
            scope.ids.add(var)
            inner = _Scope({*scope.names, var}, scope.ids)
            cond = Condition.from_dict(s["where"], at) if "where" in s else None
            if cond is not None:
                inner.check(_refs([cond.left, cond.right]), at)
            body = _steps(s.get("steps", []), inner, tools, at)
            step = PlanStep(sid, for_each=s["for_each"], var=var, where=cond, steps=body)
        elif kind == "compute":
            if s["compute"] not in COMPUTE_OPS:
                raise ConfigError(
                    f"{at}: compute must be one of {COMPUTE_OPS}, got {s['compute']!r}"
                )
            of = s.get("of", [])
            if not isinstance(of, list) or not of:
                raise ConfigError(f"{at}: 'of' lists the computation's inputs, got {of!r:.80}")
            scope.check(_refs(of), at)
            step = PlanStep(sid, compute=s["compute"], of=tuple(of))
        elif kind == "if":
            cond = Condition.from_dict(s["if"], at)
            scope.check(_refs([cond.left, cond.right]), at)
            then = _steps(s.get("then", []), _Scope(set(scope.names), scope.ids), tools, at)
            other = _steps(s.get("else", []), _Scope(set(scope.names), scope.ids), tools, at)
            step = PlanStep(sid, when=cond, then=then, otherwise=other)
        else:
            parts = _parts(s["stop"])
            scope.check(_refs(parts), at)
            step = PlanStep(sid, stop=tuple(parts))
        scope.names.add(sid)
        out.append(step)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Plan:
    """Steps decided from trusted input, and the answer's parts (text and references).

    The plan is data: JSON of steps (see :class:`PlanStep`), validated here and interpreted
    by :class:`PlanRunner`; nothing in it is evaluated as code.
    """

    steps: tuple[PlanStep, ...]
    answer: tuple[Any, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, tools: Sequence[str] = ()) -> Plan:
        """Validate a plan given as JSON data (ids unique, references backwards and in
        scope, tools known, conditions well formed).

        Raises:
            ConfigError: naming the step and what is wrong with it.
        """
        raw = data.get("steps") if isinstance(data, Mapping) else None
        if not isinstance(raw, list):
            raise ConfigError(f"a plan is {{'steps': [...], 'answer': [...]}}, got {data!r:.120}")
        scope = _Scope(set(), set())
        steps = _steps(raw, scope, tools, "plan")
        answer = _parts(data.get("answer", []))
        for ref in _refs(answer):
            if ref.split(".", 1)[0] not in scope.names:
                raise ConfigError(f"plan answer: {ref!r} refers to no step")
        return cls(steps, tuple(answer))

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON data (what :meth:`from_dict` reads)."""
        return {"steps": [s.to_dict() for s in self.steps], "answer": list(self.answer)}


def _refs(value: Any) -> list[str]:
    if isinstance(value, Mapping):
        if set(value) == {"ref"} and isinstance(value["ref"], str):
            return [value["ref"]]
        return [r for v in value.values() for r in _refs(v)]
    if isinstance(value, list | tuple):
        return [r for v in value for r in _refs(v)]
    return []


def make_plan(client: ChatModel, task: Labeled[str], tools: Mapping[str, str], **kw: Any) -> Plan:
    """Ask ``client`` for a plan from the trusted ``task`` and tool descriptions only.

    Raises:
        TrustError: ``task`` is unlabelled or tainted (a plan must come from trusted input).
        ConfigError: the reply is not a valid plan.
    """
    if not isinstance(task, Labeled) or task.tainted:
        srcs = sorted(task.label.tainted) if isinstance(task, Labeled) else "no label"
        raise TrustError(
            f"a plan is made from trusted input only; the task {task!r:.80} is not ({srcs}). "
            "Pass untrusted content to QuarantinedParser through a plan step instead",
            sink="plan",
        )
    prompt = (
        'Write a plan as JSON: {"steps": [{"id": ..., "tool": ..., "args": {...}} or '
        '{"id": ..., "parse": "<step>.<field>", "fields": {"name": "str|int|float|bool|'
        'list[str]"}} or {"id": ..., "for_each": "<step>", "as": "item", "steps": [...]} or '
        '{"id": ..., "if": {"left": ..., "op": "<", "right": ...}, "then": [...], "else": '
        '[...]} or {"id": ..., "compute": "sum|difference|product|min|max|count|concat|'
        'strip_spaces", "of": [...]} or {"id": ..., "stop": [text]}], "answer": [text or '
        '{"ref": "<step>.<field>"}]}. Use {"ref": ...} '
        "for values the plan reads. Tools: " + json.dumps(dict(tools)) + f"\n\nTASK: {task.value}"
    )
    resp = client.create(
        model=kw.get("model", "planner"), messages=[{"role": "user", "content": prompt}]
    )
    return Plan.from_dict(reply_object(resp, "plan"), tools=list(tools))
