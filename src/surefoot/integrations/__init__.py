"""Agents as teams write them, made durable and guarded on surefoot (DESIGN §9).

Each integration has its own subpackage, imported on its own (each needs its extra):
``surefoot.integrations.pydantic_ai`` (a durability capability for PydanticAI agents, extra
``pydantic-ai``), ``surefoot.integrations.openai_agents`` (a durable runner for the OpenAI
Agents SDK, extra ``openai-agents``) and ``surefoot.integrations.mcp`` (MCP servers over stdio
and streamable HTTP as durable, keyed, guarded tools, extra ``mcp``). What the frameworks share
(operation names, effect keys from a run and a tool call's id, approvals bound to the exact
call) is in ``surefoot.integrations._operations``; see ``docs/integrations.md`` and
``docs/mcp.md``.
"""
