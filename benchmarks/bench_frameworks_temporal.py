"""bench_frameworks.py's agent under PydanticAI's ``TemporalDurability``: the workflow class.

Temporal needs the workflow class at module level, so it lives here; bench_frameworks.py's
``temporal`` case imports it (with ``surefoot[temporal]`` and ``surefoot[pydantic-ai]``).
"""

from __future__ import annotations

from pydantic_ai.durable_exec.temporal import TemporalDurability
from temporalio import workflow

from bench_frameworks import build_agent, conversation

agent = build_agent([TemporalDurability()])


@workflow.defn(name="bench_chat")
class Chat:
    """One conversation of ``turns`` agent runs, each given the history so far."""

    @workflow.run
    async def run(self, turns: int) -> int:
        return await conversation(agent, turns)
