"""The operation backend: each PydanticAI durable operation runs as one surefoot step.

Built on ``pydantic_ai.durable_exec.CallableOperationBackend``, which owns naming (through
``JournalOperationNamer``), per-tool configuration and the result codec; this module only says
how a named unit runs on surefoot: as the step ``OperationSteps.step(name)``, with an effect
tool's key derived from the run and the model's ``tool_call_id``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic_ai.durable_exec import (
    CallableOperationBackend,
    DurableOperationId,
    JournalOperationNamer,
    OperationConfigRole,
    ToolsetCallToolId,
    record_durable_unit,
)

from ...errors import ConfigError
from .._operations import OperationSteps, ToolCalls

__all__ = ["METADATA_KEY", "StepOptions", "SurefootOperationBackend", "SurefootOperationConfig"]

METADATA_KEY = "surefoot"
"""The tool metadata key read for a tool's step options: ``{'surefoot': {'effect': True}}``."""

run_calls: contextvars.ContextVar[ToolCalls | None] = contextvars.ContextVar(
    "surefoot_pydantic_ai_run_calls", default=None
)
"""The agent run's ``ToolCalls`` (set by the capability's ``wrap_run``, in workflow code)."""


@dataclass(frozen=True, slots=True)
class StepOptions:
    """How one operation runs as a surefoot step.

    Attributes:
        effect: the tool changes the world: an intent row is committed before it runs, and
            it gets ``current_effect_key()`` (``f"{run_id}:{tool_call_id}"``).
        retry: attempts (an int) or a ``surefoot.resilience.RetryPolicy``; None is one attempt.
    """

    effect: bool = False
    retry: Any = None


def _tool_options(base: StepOptions, tool: object | None, tool_name: str) -> StepOptions:
    tool_def = getattr(tool, "tool_def", None)
    meta = getattr(tool_def, "metadata", None) or {}
    opts = meta.get(METADATA_KEY) if isinstance(meta, dict) else None
    if opts is None:
        return base
    if not isinstance(opts, dict) or not set(opts) <= {"effect", "retry"}:
        raise ConfigError(
            f"tool {tool_name!r}: metadata[{METADATA_KEY!r}] must be a dict with 'effect' "
            f"(bool) and/or 'retry' (attempts or a RetryPolicy), got {opts!r}"
        )
    effect = opts.get("effect", base.effect)
    if not isinstance(effect, bool):
        raise ConfigError(f"tool {tool_name!r}: 'effect' must be True or False, got {effect!r}")
    return replace(base, effect=effect, retry=opts.get("retry", base.retry))


class SurefootOperationConfig:
    """Step options per operation role (``DurableOperationConfig``), and per tool from its
    metadata (``{'surefoot': {'effect': True, 'retry': 3}}``)."""

    def __init__(self, *, model: StepOptions, tool: StepOptions, event: StepOptions) -> None:
        self._roles = {"model": model, "tool": tool, "event": event, "capability": StepOptions()}

    def base(self, role: OperationConfigRole, *, operation_id: DurableOperationId) -> StepOptions:
        return self._roles[role]

    def for_tool(
        self,
        role: OperationConfigRole,
        *,
        operation_id: DurableOperationId,
        tool: object | None,
        tool_name: str,
    ) -> StepOptions | Literal[False]:
        return _tool_options(self._roles[role], tool, tool_name)


class SurefootOperationBackend(CallableOperationBackend[StepOptions]):
    """Runs each bound operation as the surefoot step named by ``JournalOperationNamer``.

    Args:
        steps: the app's operation steps.
        agent_name: the agent's durable name (the prefix of every operation name).
        config: step options per role and tool.
    """

    def __init__(
        self, steps: OperationSteps, *, agent_name: str, config: SurefootOperationConfig
    ) -> None:
        super().__init__(namer=JournalOperationNamer(agent_name), config=config)
        self.steps = steps

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: StepOptions,
    ) -> object:
        is_call = isinstance(operation_id, ToolsetCallToolId)
        effect = bool(config.effect) and is_call
        key = None
        if effect:
            calls = run_calls.get()
            ctx = cache_key[2] if len(cache_key) > 2 else None
            call_id = getattr(ctx, "tool_call_id", None)
            if calls is None or not call_id:
                raise ConfigError(
                    f"effect tool operation {name!r} ran without a tool call id inside a "
                    "surefoot run; effects need the model's tool_call_id for their key"
                )
            key = calls.effect_key(call_id)
        # The body returns what PydanticAI's JSON_CODEC made (pydantic's mode='json').
        step = self.steps.step(name, effect=effect, retry=config.retry, json_values=True)
        ran: list[bool] = []

        async def run_body() -> object:
            ran.append(True)
            return await body()

        value = await step(run_body, key)
        # A replayed unit (its journalled result returned) is reported as such, so the
        # agent's instrumentation emits no span and no metrics for work it did not do.
        record_durable_unit(executed=bool(ran))
        return value
