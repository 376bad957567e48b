"""The OpenAI Agents SDK exports traces to OpenAI unless told not to: never from tests."""

import os

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
