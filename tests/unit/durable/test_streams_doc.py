"""docs/streams.md's python blocks run as pasted (so the page cannot rot), and its terminal
example is what ``surefoot runs follow`` prints for the page's first run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "streams.md"
MARK = "# illustrative"


def blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), flags=re.M | re.S)


def runnable() -> list[str]:
    return [b for b in blocks() if not b.lstrip().startswith(MARK)]


def _run(code: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(DOC.parents[1] / "src")}
    env.pop("SUREFOOT_CRASH", None)
    env["OPENAI_AGENTS_DISABLE_TRACING"] = "1"  # never export traces from a test
    return subprocess.run(
        [sys.executable, *code], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_the_page_has_runnable_and_marked_blocks() -> None:
    assert len(runnable()) >= 4
    for b in blocks():
        if b not in runnable():
            assert b.startswith(MARK), b[:80]


@pytest.mark.parametrize("index", range(len(runnable())))
def test_python_block_runs_as_pasted(index: int, tmp_path: Path) -> None:
    if "openai_agents" in runnable()[index]:
        pytest.importorskip("agents", reason="the openai-agents extra is not installed")
    proc = _run(["-c", runnable()[index]], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip(), "the example prints its result"
    if index == 0:
        assert "texts: {'1': 'a short note about streams '}" in proc.stdout
    if index == 1:
        assert proc.stdout.strip().endswith("tokens; True")


def test_the_terminal_example_is_what_follow_prints(tmp_path: Path) -> None:
    assert _run(["-c", runnable()[0]], tmp_path).returncode == 0
    cmd = ["-m", "surefoot", "runs", "follow", "note-1", "--db", "sqlite:///streams-demo.db"]
    proc = _run(cmd, tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = re.search(r"```console\n\$ surefoot runs follow[^\n]*\n(.*?)```", DOC.read_text(), re.S)
    assert page is not None
    shown = page.group(1).splitlines()
    printed = proc.stderr.splitlines()
    assert shown[0] == printed[0] and shown[-1] == printed[-1]  # the marker, the offset line
    assert shown[1] == proc.stdout.splitlines()[0].rstrip()
    assert shown[2] == printed[1]
