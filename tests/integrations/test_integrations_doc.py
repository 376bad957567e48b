"""docs/integrations.md's python blocks run as pasted, in a fresh directory, and a second run
of the same program answers from the journal."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def _blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), flags=re.M | re.S)


def _section(code: str) -> str:
    return "openai_agents" if "openai_agents" in code else "other"


@pytest.mark.parametrize("code", _blocks(), ids=lambda c: _section(c))
def test_the_example_runs_as_pasted_and_again_from_the_journal(code: str, tmp_path: Path) -> None:
    if _section(code) == "openai_agents":
        pytest.importorskip("agents", reason="the openai-agents extra is not installed")
    lines = [ln for ln in code.splitlines() if ln.strip()]
    assert len(lines) <= 18, "an integration's example stays short"
    (tmp_path / "example.py").write_text(code)
    env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    outs = []
    for _ in range(2):
        ran = subprocess.run(
            [sys.executable, "example.py"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, ran.stderr
        outs.append(ran.stdout)
    assert outs[0] == outs[1] and outs[0].strip()
