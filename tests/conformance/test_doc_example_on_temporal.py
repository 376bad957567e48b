"""docs/durable.md's first example runs on Temporal with only its App URL changed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "durable.md"
URL = '"sqlite:///runs.db"'

pytestmark = pytest.mark.temporal


def first_example() -> str:
    """The page's first python block, as a user pastes it."""
    found = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), flags=re.M | re.S)
    return str(found[0])


def test_the_example_names_its_url_once() -> None:
    """The example's only configuration is its App URL (what this test changes)."""
    assert first_example().count(URL) == 1


def test_the_durable_example_runs_unchanged_on_temporal(
    temporal_server: Any, tmp_path: Path
) -> None:
    """Run twice as a script with a temporal:// URL: the post (key r-42:4) both times, the
    second time from Temporal's record (the run had succeeded; nothing ran again)."""
    queue = f"doc-{uuid.uuid4().hex[:8]}"
    url = f'"temporal://{temporal_server.address}?task_queue={queue}&heartbeat=2&sticky=1"'
    script = tmp_path / "research.py"
    script.write_text(first_example().replace(URL, url))
    env = {**os.environ, "PYTHONPATH": str(DOC.parents[1] / "src")}
    outs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-X", "faulthandler", str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs.append(proc.stdout)
    expected = "post r-42:4: ['look up why is the sky blue?', 'write it down'] (ann says yes)"
    assert outs[0].strip().splitlines() == [expected]
    assert outs[1].strip().splitlines() == [expected]
