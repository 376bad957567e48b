"""docs/mcp.md's example runs as pasted, in an empty folder, and prints what the page shows;
run a second time it prints the same from the journal and the server applies nothing more."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")  # the example's server is the SDK's

DOC = Path(__file__).resolve().parents[4] / "docs" / "mcp.md"


def test_the_example_prints_what_the_page_shows_twice(tmp_path: Path) -> None:
    section = DOC.read_text().split("\n## An example", 1)[1].split("\n## ", 1)[0]
    server, client = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    (shown,) = re.findall(r"```text\n(.*?)```", section, flags=re.S)
    assert server.startswith("# notes_server.py")
    (tmp_path / "notes_server.py").write_text(server)
    env = {k: v for k, v in os.environ.items() if k != "SUREFOOT_CRASH"}
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", client],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout == shown
    keys = re.findall(r'"key": "([^"]+)"', (tmp_path / "notes.jsonl").read_text())
    assert keys == ["r-1:2", "r-1:3"]
