"""``SurefootDurability``: a PydanticAI agent's runs become surefoot workflow runs.

A capability on PydanticAI's public builder (``pydantic_ai.durable_exec``): it subclasses
``BaseDurabilityCapability`` and hands it a ``CallableOperationBackend`` (``_backend``) that runs
every durable operation the base collects (model requests, tool calls, MCP discovery and
calls, the event stream handler) as one surefoot step. Inside a surefoot run the agent's
own code is workflow code; outside one the capability is transparent.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.capabilities.abstract import WrapRunHandler
from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    DurabilityEngineSpec,
    JournalOperationNamer,
    ModelRequestId,
    ToolsetCallToolId,
    conversation_id_from_run_id,
    replay_scope,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models import Model
from pydantic_ai.run import AgentRunResult
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import (
    AgentDepsT,
    DeferredToolRequests,
    DeferredToolResults,
    RunContext,
    ToolDenied,
)
from pydantic_ai.toolsets import FunctionToolset

from ...durable import App, RunHandle, current_run, in_run
from ...durable.engine import engine_scheme
from ...errors import ConfigError, StepMismatchError
from ...resilience import RetryPolicy
from .._approvals import Decision, await_answers
from .._operations import OperationSteps, ToolCalls
from ._backend import (
    METADATA_KEY,
    StepOptions,
    SurefootOperationBackend,
    SurefootOperationConfig,
    run_calls,
)

__all__ = ["SurefootDurability", "enqueue", "start"]


def _serialization_failure(error: Exception) -> BaseException:
    return UserError(
        f"a value crossing into a surefoot step could not be reduced to JSON ({error}); "
        "surefoot journals JSON only (never pickle): make deps, model settings and tool "
        "results JSON-serializable with pydantic"
    )


SUREFOOT_ENGINE_SPEC = DurabilityEngineSpec(
    engine_name="surefoot",
    durable_unit_noun="step",
    durable_container_noun="workflow",
    codec=JSON_CODEC,
    serialization_failure=_serialization_failure,
    wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
    # Steps run in the workflow's own process: an MCP session is held for the run and
    # entered by its first step (so connecting is retried as a step is).
    toolset_lifecycles={
        "function": "enter-always",
        "mcp": "enter-in-durable-unit",
        "dynamic": "enter-never",
    },
    journal_discovery=True,
    sequential_tools_in_durable_context=False,
    tool_config_key=METADATA_KEY,
)

DEFAULT_MODEL_RETRY = RetryPolicy(max_attempts=3)

_AGENTS: weakref.WeakKeyDictionary[App, dict[str, AbstractAgent[Any, Any]]] = (
    weakref.WeakKeyDictionary()
)
"""Per app, the agent each registered ``<name>.run`` workflow runs."""


def _journal_only(app: App) -> None:
    """A unit's body is a closure run in the workflow's own process: an engine that runs
    steps elsewhere (Temporal activities) cannot take it."""
    if engine_scheme(app.url) is not None:
        raise ConfigError(
            f"SurefootDurability runs on a surefoot journal (sqlite:// or postgresql://), not "
            f"on an engine URL ({app.url.partition('://')[0]}://…): its steps run the agent's "
            "calls in the workflow's process. On Temporal use PydanticAI's TemporalDurability"
        )


def _in_run() -> bool:
    """In a surefoot run's code or one of its steps (what ``current_run()`` answers, without
    building its ``RunContext``: PydanticAI asks several times per operation)."""
    return in_run()


@dataclass(init=False, kw_only=True)
class SurefootDurability(BaseDurabilityCapability[AgentDepsT]):
    """Make an agent durable: ``Agent(..., capabilities=[SurefootDurability(app)])``.

    Inside a surefoot run (the workflow this capability registers, ``start``/``enqueue``
    below, or ``await agent.run(…)`` inside your own ``@app.workflow``), each model request,
    tool call, MCP list/call and event-handler call is a journalled step: a resumed run
    replays what finished and repeats nothing that was journalled. Outside a run the agent
    behaves as without it.

    Args:
        app: the surefoot app whose journal records the runs.
        name: the agent's durable name (default: the agent's ``name``); it prefixes every
            persisted operation name, so keep it stable while runs are in flight.
        models: other models a run may switch to, by id (see PydanticAI's durability docs).
        event_stream_handler: handles the run's events; each call is a step.
        model_retry: retries of a model request step: surefoot's ``RetryPolicy`` (default
            3 attempts, backoff, ``Retry-After`` obeyed); the only retry loop: inside a run
            the model's SDK client sends each request once (``max_retries=0``).
        tool_retry: attempts of a tool step (default 1); per tool with
            ``metadata={'surefoot': {'retry': …}}``.

    A tool declared ``metadata={'surefoot': {'effect': True}}`` is an effect: an intent row
    is journalled before it runs, and ``current_effect_key()`` gives it
    ``f"{run_id}:{tool_call_id}"``, the same on every replay. A tool declared
    ``requires_approval=True`` waits, holding no worker, for ``approve(app, run_id,
    digest, by=…)`` naming exactly that call (``pending_approvals`` lists them); an
    external tool (``CallDeferred``) waits for ``deliver(app, run_id, digest, value, by=…)``.
    """

    engine_spec = SUREFOOT_ENGINE_SPEC

    def __init__(
        self,
        app: App,
        *,
        name: str | None = None,
        models: Mapping[str, Model] | None = None,
        event_stream_handler: EventStreamHandler[AgentDepsT] | None = None,
        model_retry: Any = DEFAULT_MODEL_RETRY,
        tool_retry: Any = None,
    ) -> None:
        if not isinstance(app, App):
            raise ConfigError(
                f"SurefootDurability needs a surefoot durable.App, got {type(app).__name__}"
            )
        super().__init__(models=models, event_stream_handler=event_stream_handler, name=name)
        self.app = app
        self._options = SurefootOperationConfig(
            model=StepOptions(retry=model_retry),
            tool=StepOptions(retry=tool_retry),
            event=StepOptions(),
        )
        self._backend: SurefootOperationBackend | None = None
        self._steps = OperationSteps(app)
        self.workflow_name = ""

    # -- binding -----------------------------------------------------------------------

    def _bind_to_agent(self, agent: AbstractAgent[AgentDepsT, Any]) -> None:
        _journal_only(self.app)
        self._backend = SurefootOperationBackend(
            self._steps, agent_name=self.name, config=self._options
        )
        self._register_toolsets(agent)
        self.workflow_name = name = f"{self.name}.run"
        agents = _AGENTS.setdefault(self.app, {})
        agents[name] = agent  # the agent bound last under this name runs the workflow
        if (name, "1") in self.app.registered():
            return
        output = TypeAdapter(Any)

        async def agent_run(prompt: str, message_history: Any = None) -> Any:
            history = (
                ModelMessagesTypeAdapter.validate_python(message_history)
                if message_history
                else None
            )
            run_agent = agents[name]
            result: AgentRunResult[Any] = await run_agent.run(prompt, message_history=history)
            return output.dump_python(result.output, mode="json")

        agent_run.__name__ = agent_run.__qualname__ = self.workflow_name.replace(".", "_")
        self.app.workflow(name=self.workflow_name)(agent_run)

    def get_model_settings(self) -> Any:
        """Inside a run, the model's SDK retries are off (``max_retries=0``): the model
        request step's ``RetryPolicy`` is the only retry loop, each attempt journalled."""

        def settings(ctx: RunContext[AgentDepsT]) -> ModelSettings:
            return ModelSettings(max_retries=0) if self.in_durable_context else ModelSettings()

        return settings

    def get_durable_operation_backend(self) -> SurefootOperationBackend:
        if self._backend is None:
            raise UserError("SurefootDurability is used before it was bound to an agent")
        return self._backend

    # -- where the code runs -----------------------------------------------------------

    @property
    def in_durable_context(self) -> bool:
        return _in_run()

    @property
    def in_durable_unit(self) -> bool:
        if super().in_durable_unit:
            return True
        try:
            return current_run().step is not None
        except ConfigError:
            return False

    def get_default_run_id(self) -> str | None:
        """The surefoot run's id for its first agent run, ``f"{run_id}:{n}"`` for the n-th
        (a workflow may hold several): the same on every replay."""
        if not self.in_durable_context:
            return None
        return self._steps.agent_run_id()

    def get_default_conversation_id(self, run_id: str) -> str | None:
        return conversation_id_from_run_id(run_id) if self.in_durable_context else None

    async def durable_sleep(self, seconds: float) -> None:
        """A surefoot durable timer: the run suspends holding no worker."""
        await self.app.sleep(max(seconds, 0.0))

    async def wrap_run(self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler) -> Any:
        if not self.in_durable_context:
            return await handler()
        _journal_only(self.app)  # the URL may have been configured after the agent was built
        if self._steps.first_in_execution(f"{self.name}__operations"):
            await self._check_operations()  # once per run and agent
        token = run_calls.set(ToolCalls(ctx.run_id or current_run().run_id))
        try:
            with replay_scope():  # spans covering only replayed steps are not exported
                return await super().wrap_run(ctx, handler=handler)
        finally:
            run_calls.reset(token)

    def operations(self) -> list[str]:
        """What this agent can journal, one line per operation: the model request and each
        tool call's persisted name, with ``effect`` / ``approval`` marks, and each other
        toolset's id. Journalled when the agent first runs in a surefoot run (``…__operations``)."""
        agent = self.agent
        if agent is None:
            return []
        namer = JournalOperationNamer(self.name)
        out = [namer.operation_name(ModelRequestId(model_id=None, model_name="default"))]
        leaves: list[Any] = []
        for toolset in agent.toolsets:
            toolset.apply(leaves.append)
        for ts in leaves:
            inner = getattr(ts, "wrapped", ts)
            tools = getattr(inner, "tools", None)
            if isinstance(inner, FunctionToolset) and isinstance(tools, dict):
                base = namer.operation_name(ToolsetCallToolId("function", toolset_id=str(inner.id)))
                for name in sorted(tools):
                    tool = tools[name]
                    opts = (tool.metadata or {}).get(METADATA_KEY) or {}
                    marks = [
                        m
                        for m, on in (
                            ("effect", opts.get("effect") is True),
                            ("approval", tool.requires_approval),
                        )
                        if on
                    ]
                    out.append(f"{base}:{name}" + (f" [{', '.join(marks)}]" if marks else ""))
            else:
                out.append(f"toolset {type(inner).__name__} {getattr(inner, 'id', None)}")
        return sorted(set(out))

    async def _check_operations(self) -> None:
        """Journal the agent's operations at the run's start; a replay under an agent that
        changed (a tool renamed, added, removed, made an effect) stops the run in
        ``needs_attention`` with ``StepMismatchError``, as a changed workflow does."""
        now = self.operations()

        async def body() -> list[str]:
            return now

        step = self._steps.step(f"{self.name}__operations", json_values=True)
        recorded = await step(body)
        if recorded != now:
            gone = sorted(set(recorded) - set(now))
            new = sorted(set(now) - set(recorded))
            raise StepMismatchError(
                current_run().run_id,
                f"{self.name}__operations",
                f"operations {gone}",
                f"operations {new}",
            )

    # -- approvals: surefoot signals bound to the exact call -------------------------------

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[AgentDepsT], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        """Each approval and each external call waits, holding no worker, for the answer
        that names its digest (``approve`` / ``deliver``); in the order the model asked."""
        if not self.in_durable_context or not (requests.approvals or requests.calls):
            return None
        calls = [
            ("approval", p.tool_call_id, p.tool_name, p.args_as_dict()) for p in requests.approvals
        ]
        calls += [
            ("external", p.tool_call_id, p.tool_name, p.args_as_dict()) for p in requests.calls
        ]
        answers = await await_answers(self.app, self._steps, calls, agent_run_id=ctx.run_id)
        results = DeferredToolResults()
        for (_, call_id, _, _), answer in zip(calls, answers, strict=True):
            if isinstance(answer, Decision):
                results.approvals[call_id] = (
                    True
                    if answer.approved
                    else ToolDenied(answer.reason or f"denied by {answer.by}")
                )
            else:
                results.calls[call_id] = answer.value
            results.answered_by[call_id] = answer.by
        return results


def _bound(agent: AbstractAgent[Any, Any]) -> SurefootDurability[Any]:
    cap = SurefootDurability.from_agent(agent)
    if cap is None:
        raise ConfigError(
            f"agent {agent.name!r} has no SurefootDurability capability; create it with "
            "Agent(..., capabilities=[SurefootDurability(app)])"
        )
    return cap


def _history(message_history: Any) -> Any:
    if message_history is None:
        return None
    return ModelMessagesTypeAdapter.dump_python(message_history, mode="json")


def start(
    agent: AbstractAgent[Any, Any],
    prompt: str,
    *,
    run_id: str | None = None,
    message_history: Any = None,
) -> RunHandle:
    """Run ``agent`` on ``prompt`` as a surefoot run executed in this process; its handle.

    ``handle.result()`` is the run's output (as JSON). Starting the same ``run_id`` again
    returns the same run, resumed here if it was abandoned.
    """
    cap = _bound(agent)
    return cap.app.start(cap.workflow_name, prompt, _history(message_history), run_id=run_id)


def enqueue(
    agent: AbstractAgent[Any, Any],
    prompt: str,
    *,
    run_id: str | None = None,
    message_history: Any = None,
) -> RunHandle:
    """Record a run of ``agent`` on ``prompt`` for ``surefoot worker`` (or any worker)."""
    cap = _bound(agent)
    return cap.app.enqueue(cap.workflow_name, prompt, _history(message_history), run_id=run_id)
