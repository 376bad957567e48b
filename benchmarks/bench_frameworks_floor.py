"""The floor under an engine built on PydanticAI's ``durable_exec`` builder (bench_frameworks).

``NoJournalDurability``: a durability capability on the same public builder as surefoot's
(``BaseDurabilityCapability`` + ``CallableOperationBackend``, surefoot's engine spec, so the same
``JSON_CODEC`` round-trip of every result), whose backend runs each operation's body and
returns its payload: every model request and tool call is collected, named, configured,
encoded and decoded as for a real engine, and nothing is journalled. What it costs over no
capability is what an engine on this builder pays before it stores a byte.

``journal_steps``: the bare journal: per turn, the same number of surefoot steps as
``SurefootDurability`` runs (two model requests, two tool calls), each returning a value of
the size it journals, with no PydanticAI machinery around them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai.durable_exec import (
    BaseDurabilityCapability,
    CallableOperationBackend,
    DurableOperationId,
    JournalOperationNamer,
    OperationConfigRole,
)
from pydantic_ai.tools import AgentDepsT

from surefoot.integrations.pydantic_ai._durability import SUREFOOT_ENGINE_SPEC


class _NoConfig:
    def base(self, role: OperationConfigRole, *, operation_id: DurableOperationId) -> None:
        return None

    def for_tool(
        self,
        role: OperationConfigRole,
        *,
        operation_id: DurableOperationId,
        tool: object | None,
        tool_name: str,
    ) -> Literal[False] | None:
        return None


class NoJournalBackend(CallableOperationBackend[None]):
    """Runs each named operation's (encoded) body in place; journals nothing."""

    def __init__(self, agent_name: str) -> None:
        super().__init__(namer=JournalOperationNamer(agent_name), config=_NoConfig())

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: None,
    ) -> object:
        return await body()


@dataclass(init=False, kw_only=True)
class NoJournalDurability(BaseDurabilityCapability[AgentDepsT]):
    """Every operation wrapped as a durable unit by the builder; no journal behind it."""

    engine_spec = SUREFOOT_ENGINE_SPEC

    def __init__(self) -> None:
        super().__init__()
        self._backend: NoJournalBackend | None = None

    def _bind_to_agent(self, agent: Any) -> None:
        self._backend = NoJournalBackend(self.name)
        self._register_toolsets(agent)

    def get_durable_operation_backend(self) -> NoJournalBackend:
        assert self._backend is not None
        return self._backend

    @property
    def in_durable_context(self) -> bool:
        return True


RESPONSE_CHARS = 500


def journal_steps(app: Any) -> Callable[[int], Awaitable[None]]:
    """A coroutine function running one turn's steps (2 model requests, 2 tool calls)."""

    @app.step(name="floor__model.request")
    async def model_request(turn: int, final: bool) -> dict[str, Any]:
        text = "x" * RESPONSE_CHARS if final else ""
        return {"parts": [{"part_kind": "text", "content": text}], "kind": "response"}

    @app.step(name="floor__toolset.call")
    async def tool_call(turn: int, which: str) -> dict[str, Any]:
        return {"return_value": f"{which} {turn}", "kind": "tool-return"}

    async def turn(i: int) -> None:
        await model_request(i, False)
        await tool_call(i, "lookup")
        await tool_call(i, "note")
        await model_request(i, True)

    return turn
