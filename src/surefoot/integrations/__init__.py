"""Integrations: surefoot's guarantees for the tools and frameworks agents are written with.

Each integration is its own subpackage and imports its SDK lazily (an extra):
``surefoot.integrations.mcp`` (MCP servers over stdio and streamable HTTP, ``surefoot[mcp]``).
"""
