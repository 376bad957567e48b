"""The first example of docs/statebus.md runs as printed and shows what its comments say."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "statebus.md"


def test_store_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Store example writes, versions, and catches the stale write's ConflictError."""
    block = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, str(DOC), "exec"), {"__name__": "docs_statebus"})
    assert capsys.readouterr().out.strip() == "2 critic ['finding', 'critique']"
