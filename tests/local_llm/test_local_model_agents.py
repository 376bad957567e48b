"""The real local model (SmolLM2-135M via llama.cpp): bounded runs that must hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from surefoot_lab.local_model import LabModel
from surefoot_lab.statebus.real_agents import run_real_agents

pytestmark = [pytest.mark.local_llm, pytest.mark.slow]


def test_endpoint_reports_the_local_model(local_llm: LabModel) -> None:
    """The local server lists the model under its alias and answers a bounded call."""
    assert local_llm.model == "SmolLM2-135M-Instruct" and local_llm.local
    client = local_llm.client()
    reply = client.create(messages=[{"role": "user", "content": "Say hi."}], max_tokens=5)
    assert reply.usage.completion_tokens <= 5 and client.meter.totals.calls == 1


def test_three_agents_on_one_stream_lose_nothing(local_llm: LabModel, tmp_path: Path) -> None:
    """Three agent processes, each adding two findings by real model calls, on one Stream
    with version checks: every finding kept, every retried append recognised."""
    r = run_real_agents("stream", tmp_path, agents=3, items=2, llm=local_llm, timeout=600)
    assert (r.produced, r.kept, r.lost) == (6, 6, 0)
    assert r.dedup_hits == 3
    assert r.model_calls >= 6 + r.retries  # one call per attempt to write, at least
    assert r.tokens > 0
