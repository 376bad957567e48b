"""Agents as teams write them, made durable and guarded by surefoot.

Each framework lives in its own subpackage, imported explicitly (its SDK is an extra):
``surefoot.integrations.openai_agents`` (the OpenAI Agents SDK).
"""
