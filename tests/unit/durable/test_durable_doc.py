"""docs/durable.md's python blocks run as pasted (so the page cannot rot)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "durable.md"
MARK = "# illustrative"


def blocks() -> list[str]:
    """The ```python blocks of docs/durable.md, in order."""
    return re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), flags=re.M | re.S)


def runnable() -> list[str]:
    """The blocks meant to run: all but those whose first line starts with MARK."""
    return [b for b in blocks() if not b.lstrip().startswith(MARK)]


def test_the_page_has_runnable_and_marked_blocks() -> None:
    """The first example is runnable; every skipped block says it is illustrative."""
    assert len(runnable()) >= 2
    assert runnable()[0] == blocks()[0]
    for b in blocks():
        if b not in runnable():
            assert b.startswith(MARK), b[:80]


@pytest.mark.parametrize("index", range(len(runnable())))
def test_python_block_runs_as_pasted(index: int, tmp_path: Path) -> None:
    """Each runnable block exits 0 in an empty folder within 60 s (no hang, no error)."""
    code = runnable()[index]
    env = {**os.environ, "PYTHONPATH": str(DOC.parents[1] / "src")}
    env.pop("SUREFOOT_CRASH", None)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip(), "the example prints its result"
    if index == 0:  # the first example finishes its run: approved, slept, published
        assert "post r-42:4:" in proc.stdout and "(ann says yes)" in proc.stdout
