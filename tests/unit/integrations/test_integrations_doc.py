"""docs/integrations.md's python blocks run as pasted (so the page cannot rot)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

if os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1":
    import pydantic_ai.durable_exec  # noqa: F401 - CI installs surefoot[pydantic-ai]
pytest.importorskip("pydantic_ai.durable_exec", reason="surefoot[pydantic-ai] is not installed")

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations.md"
MARK = "# illustrative"


def blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), flags=re.M | re.S)


def runnable() -> list[str]:
    return [b for b in blocks() if not b.lstrip().startswith(MARK)]


def test_the_first_example_is_runnable_and_at_most_15_lines() -> None:
    assert runnable() and runnable()[0] == blocks()[0]
    assert len(blocks()[0].strip().splitlines()) <= 15
    for b in blocks():
        assert b in runnable() or b.startswith(MARK), b[:80]


@pytest.mark.parametrize("index", range(len(runnable())))
def test_python_block_runs_as_pasted(index: int, tmp_path: Path) -> None:
    """Each runnable block exits 0 in an empty folder; run twice, the first prints the same
    (the second time from the journal)."""
    env = {**os.environ, "PYTHONPATH": str(DOC.parents[1] / "src")}
    env["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    env.pop("SUREFOOT_CRASH", None)
    outs = []
    for _ in range(2 if index == 0 else 1):
        proc = subprocess.run(
            [sys.executable, "-c", runnable()[index]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(proc.stdout)
    if index == 0:
        assert outs[0].splitlines()[0] == '{"capital":"unknown"}'
        assert outs[0].splitlines()[1] == str(
            [
                "geo__operations",
                "geo__model.request",
                "geo__function_toolset__<agent>.call_tool:capital",
                "geo__model.request",
            ]
        )
        assert outs[1] == outs[0]
