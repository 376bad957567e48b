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
- ``call_digest``: a hash of the agent run, the call's id, the tool and its arguments,
  which names one call exactly (approvals and external results are bound to it:
  ``surefoot.integrations._approvals``).

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
from typing import Any, ClassVar

from ..durable import App, current_run
from ..errors import ConfigError

__all__ = ["OperationSteps", "ToolCalls", "call_digest", "current_effect_key"]

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


async def _record_step(record: dict[str, Any]) -> dict[str, Any]:
    return record


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

    def step(
        self, name: str, *, effect: bool = False, retry: Any = None, json_values: bool = False
    ) -> Any:
        """The step named ``name``: call it with ``(body, effect_key)`` inside a run.

        ``body`` is an async callable returning the unit's JSON-ready result;
        ``json_values``: its results are JSON's own types already (a framework's JSON codec
        made them, as PydanticAI's ``JSON_CODEC`` does: no tuple, no ``IntEnum``), so they are
        journalled by one C encode and checked by one decode, without surefoot's walks over
        values of any type (a result that is not such still gets the full check). An effect
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
        step.__surefoot_step__.json_values = json_values  # type: ignore[attr-defined]
        self._steps[name] = (step, effect)
        return step

    async def journal_record(self, name: str, record: Mapping[str, Any]) -> Any:
        """In workflow code: journal ``record`` as the pure step ``name`` (its result), and
        return it as journalled (on a replay, the journalled one)."""
        got = self._steps.get(name)
        if got is None:
            fn = self.app.step(name=name)(_record_step)
            self._steps[name] = (fn, False)
        else:
            fn = got[0]
        return await fn(dict(record))


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
