"""docs/llm.md: every python block runs, in order, against FakeProvider through the real SDK."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from surefoot.testing import FakeProvider, rate_limited

DOC = Path(__file__).resolve().parents[3] / "docs" / "llm.md"


def test_llm_doc_blocks_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's program runs from the docs alone, on a real endpoint and on the fake."""
    code = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)
    assert len(code) >= 5
    with FakeProvider() as fp:
        monkeypatch.setenv("OPENAI_BASE_URL", fp.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-doc-test")
        monkeypatch.setenv("SUREFOOT_LLM_MODEL", "gpt-4o-mini")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-doc-test")
        fp.script(rate_limited(retry_after=0.01))  # the first call is retried once
        fp.responder = lambda api, msgs: (
            '{"answer": "Rayleigh scattering", "confidence": 0.9}'
            if "JSON" in str(msgs)
            else "Rayleigh scattering favours blue light."
        )
        ns: dict[str, Any] = {"__name__": "llm_doc", "BASE_URL": fp.openai_url}
        for i, block in enumerate(code, 1):
            exec(compile(block, f"{DOC.name}[block {i}]", "exec"), ns)
        assert ns["meter"].totals.attempts >= 2 and ns["meter"].totals.cost > 0
        assert ns["reply"].parsed["answer"] == "Rayleigh scattering"
        assert fp.count(fault="429") == 1
