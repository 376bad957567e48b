"""What every framework integration needs to run an agent's work as surefoot steps.

A framework (PydanticAI, the OpenAI Agents SDK, an MCP client) hands an integration units
of work at run time: a model request, a tool call, an event handed to a handler. Each
becomes one journalled surefoot step, named by the framework's stable operation name:

- ``OperationSteps.step(name, effect=…, retry=…)``: the surefoot step that runs such a unit
  (registered once per app and name; its result is journalled, never recomputed).
- ``ToolCalls``: per agent run, the idempotency key of each effect tool call, derived from the
  run id and the model's ``tool_call_id`` (``f"{run_id}:{tool_call_id}"``, with ``#2``, ``#3``
  for a tool call id the model used again): the same on every replay, on any worker, whatever
  position the call lands on. ``current_effect_key()`` gives it to the tool.
- Approvals: a call that needs a person's approval waits for the signal
  ``approve:<digest>``, where the digest is a hash of the run, the call's id, the tool and
  its arguments (``call_digest``). An approval names that digest, so it releases exactly
  that call with exactly those arguments, never another; ``approve`` refuses a digest no
  call of the run is waiting for, and writes the decision to the run's audit log.

Parallel tool calls stay in a deterministic order because surefoot numbers a task's steps
by the order in which the tasks were *created* (``docs/durable.md``, "Positions"): the calls
of one model response get the same positions on every replay, whichever finishes first.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..durable import App, current_run
from ..errors import ConfigError

__all__ = [
    "APPROVAL_REQUEST_STEP",
    "APPROVAL_SIGNAL_PREFIX",
    "ApprovalRequest",
    "Decision",
    "OperationSteps",
    "ToolCalls",
    "approval_signal",
    "approve",
    "await_approvals",
    "call_digest",
    "current_effect_key",
    "pending_approvals",
]

APPROVAL_SIGNAL_PREFIX = "approve:"
APPROVAL_REQUEST_STEP = "approval.request"
"""The pure step that journals what a waiting call asks to do, before its wait."""

_DECISIONS = ("approval", "denial")  # the audit actions ``approve`` writes

_effect_key: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "surefoot_integration_effect_key", default=None
)


def _canonical(value: Any) -> str:
    """One JSON text per value: sorted keys, no spaces (the same arguments, the same digest)."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"tool arguments must be JSON to be bound to an approval, got {type(value).__name__}: "
            f"{exc}"
        ) from None


def call_digest(run_id: str, tool_call_id: str, tool: str, args: Any) -> str:
    """The digest that names one tool call with its exact arguments in one run (hex, 32 chars).

    ``args`` is the call's arguments as the model sent them: a mapping, or the JSON text of
    one (decoded first, so ``'{"a":1}'`` and ``{"a": 1}`` give the same digest).
    """
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            pass  # a malformed argument string is bound as the string itself
    text = _canonical({"run": run_id, "call": tool_call_id, "tool": tool, "args": args})
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def approval_signal(digest: str) -> str:
    """The signal name a call bound to ``digest`` waits for."""
    return APPROVAL_SIGNAL_PREFIX + digest


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A tool call that waits for a person's decision.

    Attributes:
        tool_call_id: the model's id for the call. tool: the tool's name. args: the
            arguments the call will run with. digest: ``call_digest`` of them (what an
            approval must name). signal: the signal it waits for (``approve:<digest>``).
    """

    tool_call_id: str
    tool: str
    args: Any
    digest: str
    signal: str


@dataclass(frozen=True, slots=True)
class Decision:
    """A person's answer to one ``ApprovalRequest``.

    Attributes:
        digest: the call it answers. approved: run it (True) or not. by: who decided.
        reason: why, if they said (a denied call's reason is what the model is told).
    """

    digest: str
    approved: bool
    by: str
    reason: str | None = None


async def _approval_request_step(request: Mapping[str, Any]) -> dict[str, Any]:
    return dict(request)


class OperationSteps:
    """The surefoot steps an integration runs its units in, one per operation name and app.

    Args:
        app: the durable app whose journal records the steps.

    Steps are registered on first use (a worker registers them as it replays, as the
    process that started the run did), with the unit's result journalled as JSON.
    """

    _by_app: ClassVar[weakref.WeakKeyDictionary[App, dict[str, Any]]] = weakref.WeakKeyDictionary()

    _runs_by_app: ClassVar[weakref.WeakKeyDictionary[App, dict[tuple[str, int], int]]] = (
        weakref.WeakKeyDictionary()
    )

    _firsts_by_app: ClassVar[weakref.WeakKeyDictionary[App, dict[tuple[str, int], set[str]]]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, app: App) -> None:
        self.app = app
        self._steps = OperationSteps._by_app.setdefault(app, {})
        self._agent_runs = OperationSteps._runs_by_app.setdefault(app, {})
        self._firsts = OperationSteps._firsts_by_app.setdefault(app, {})

    def first_in_execution(self, tag: str) -> bool:
        """In workflow code: True the first time ``tag`` is asked about in this execution of
        the run (the same answers, in the same order, on every replay)."""
        run = current_run()
        key = (run.run_id, run.epoch)
        seen = self._firsts.setdefault(key, set())
        if len(self._firsts) > 4096:  # executions long gone
            self._firsts.clear()
            self._firsts[key] = seen
        if tag in seen:
            return False
        seen.add(tag)
        return True

    def agent_run_id(self) -> str:
        """In workflow code: the id of the agent run starting now, the same on every replay:
        the surefoot run's id for the first, ``f"{run_id}:{n}"`` for the n-th (one count
        per run for every agent of the app, so no two agent runs of a workflow share one).
        """
        run = current_run()
        key = (run.run_id, run.epoch)  # each execution (claim) of a run counts from 1
        n = self._agent_runs.pop(key, 0) + 1
        if len(self._agent_runs) > 4096:  # executions long gone
            self._agent_runs.clear()
        self._agent_runs[key] = n
        return run.run_id if n == 1 else f"{run.run_id}:{n}"

    def step(self, name: str, *, effect: bool = False, retry: Any = None) -> Any:
        """The step named ``name``: call it with ``(body, effect_key)`` inside a run.

        ``body`` is an async callable returning the unit's JSON-ready result. An effect
        step commits an intent row before it runs; after a crash between the intent and
        the result it runs again, with the same ``effect_key`` (declared ``idempotent``:
        the key makes it so).

        Raises:
            ConfigError: ``name`` was registered before as another kind of step (an effect
                and a pure step may not share a persisted name).
        """
        got = self._steps.get(name)
        if got is not None:
            step, was_effect = got
            if was_effect != effect:
                raise ConfigError(
                    f"operation {name!r} is registered as {'an effect' if was_effect else 'pure'}"
                    f" step and now asked for as {'an effect' if effect else 'pure'}; a "
                    "persisted operation keeps its kind: give the tool another name"
                )
            return step

        async def run_unit(
            body: Callable[[], Awaitable[Any]], effect_key: str | None = None
        ) -> Any:
            token = _effect_key.set(effect_key)
            try:
                return await body()
            finally:
                _effect_key.reset(token)

        run_unit.__name__ = run_unit.__qualname__ = name.replace(".", "_")
        step = self.app.step(name=name, effect=effect, idempotent=effect, retry=retry)(run_unit)
        self._steps[name] = (step, effect)
        return step

    async def journal_approval_request(self, request: ApprovalRequest) -> None:
        """Journal what a call asks to do (workflow code, before it waits)."""
        step = self._steps.get(APPROVAL_REQUEST_STEP)
        if step is None:
            fn = self.app.step(name=APPROVAL_REQUEST_STEP)(_approval_request_step)
            self._steps[APPROVAL_REQUEST_STEP] = (fn, False)
        else:
            fn = step[0]
        await fn(
            {
                "tool_call_id": request.tool_call_id,
                "tool": request.tool,
                "args": request.args,
                "digest": request.digest,
                "signal": request.signal,
            }
        )


def current_effect_key() -> str:
    """The idempotency key of the effect tool call executing now (``f"{run_id}:{tool_call_id}"``).

    Pass it to the service the tool changes, so a call run again after a crash is
    recognised there. The same on every attempt and every replay.

    Raises:
        ConfigError: called outside a tool declared as an effect, inside a durable run.
    """
    key = _effect_key.get()
    if key is None:
        raise ConfigError(
            "current_effect_key() works only inside a tool declared as an effect, while a "
            "durable run executes it (declare the tool with metadata={'surefoot': "
            "{'effect': True}})"
        )
    return key


class ToolCalls:
    """Per agent run (workflow code): effect keys for tool calls, deterministic on replay.

    Args:
        run_id: the agent run's id: the surefoot run's id for the first (or only) agent run
            of a workflow, ``f"{run_id}:2"``, ``:3``… for the next ones, so two agent runs
            of one workflow whose model reuses a tool call id get different keys.
    """

    __slots__ = ("_seen", "run_id")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._seen: dict[str, int] = {}

    def effect_key(self, tool_call_id: str) -> str:
        """The key of the next call carrying ``tool_call_id`` (``#n`` when it is seen again)."""
        n = self._seen.get(tool_call_id, 0) + 1
        self._seen[tool_call_id] = n
        base = f"{self.run_id}:{tool_call_id}"
        return base if n == 1 else f"{base}#{n}"


async def await_approvals(
    app: App,
    steps: OperationSteps,
    calls: list[tuple[str, str, Any]],
    *,
    agent_run_id: str | None = None,
) -> list[Decision]:
    """In workflow code: journal every call's request, then wait (holding no worker) for
    each call's own decision, in the order given; the decisions, in that order.

    ``calls`` are ``(tool_call_id, tool, args)``; ``agent_run_id`` names the agent run
    they belong to when a workflow holds several (default: the surefoot run). Every
    request is journalled before the first wait, so ``pending_approvals`` lists them all
    at once and they may be decided in any order. A decision is delivered only to the call
    whose digest it names: the signal's name carries the digest.
    """
    run_id = agent_run_id or current_run().run_id
    requests = []
    for tool_call_id, tool, args in calls:
        digest = call_digest(run_id, tool_call_id, tool, args)
        request = ApprovalRequest(tool_call_id, tool, args, digest, approval_signal(digest))
        await steps.journal_approval_request(request)
        requests.append(request)
    out = []
    for request in requests:
        got = await app.wait_for(request.signal, type=Decision)
        if not isinstance(got, Decision) or got.digest != request.digest:
            got = Decision(request.digest, False, "surefoot", "the decision named another call")
        out.append(got)
    return out


def pending_approvals(app: App, run_id: str) -> list[ApprovalRequest]:
    """The calls of ``run_id`` waiting for a decision, in the order they asked (a call
    decided but whose run has not taken the decision yet is not listed).

    Raises:
        UnknownRunError: no such run.
    """
    detail = app.show(run_id)
    decided = {s.name[len("signal:") :] for s in detail.steps if s.status == "done"}
    for a in detail.audit:  # decided, the decision not yet taken by the run
        if a.action in _DECISIONS:
            d = a.detail
            if isinstance(d, dict) and isinstance(d.get("digest"), str):
                decided.add(approval_signal(d["digest"]))
    out: list[ApprovalRequest] = []
    for s in detail.steps:
        if s.name != APPROVAL_REQUEST_STEP or not isinstance(s.result, dict):
            continue
        r = s.result
        if r.get("signal") in decided:
            continue
        out.append(
            ApprovalRequest(r["tool_call_id"], r["tool"], r["args"], r["digest"], r["signal"])
        )
    return out


def approve(
    app: App,
    run_id: str,
    digest: str,
    *,
    by: str,
    approved: bool = True,
    reason: str | None = None,
) -> bool:
    """Decide the call of ``run_id`` bound to ``digest``; the decision goes to the audit log.

    Returns:
        True if the decision was delivered; False if this call was decided before (the
        first decision stands; nothing changed).

    Raises:
        ConfigError: no call of the run asked for approval under ``digest`` (a decision is
            never sent to a call it was not made for), or ``by`` is empty.
        UnknownRunError: no such run.
    """
    if not isinstance(by, str) or not by.strip():
        raise ConfigError("approve() needs by= naming who decided (it goes to the audit log)")
    asked = [
        s.result
        for s in app.show(run_id).steps
        if s.name == APPROVAL_REQUEST_STEP
        and isinstance(s.result, dict)
        and s.result.get("digest") == digest
    ]
    if not asked:
        raise ConfigError(
            f"run {run_id!r} has no tool call waiting for approval under digest {digest!r}; "
            "list the waiting calls with pending_approvals(app, run_id) and pass one's digest"
        )
    sent = app.signal(
        run_id,
        approval_signal(digest),
        Decision(digest, bool(approved), by, reason),
        signal_id=f"approval:{digest}",
    )
    if sent:
        call = asked[0]
        detail = {
            "digest": digest,
            "tool": call.get("tool"),
            "tool_call_id": call.get("tool_call_id"),
            "approved": bool(approved),
            "reason": reason,
        }
        app.journal.audit(
            run_id,
            actor=by,
            action=_DECISIONS[0] if approved else _DECISIONS[1],
            detail=json.dumps(detail, sort_keys=True),
            now=app.clock.now(),
        )
    return sent
