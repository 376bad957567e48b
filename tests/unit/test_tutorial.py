"""docs/tutorial.md: every python block runs, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"


def blocks(text: str) -> list[str]:
    """The ```python blocks of a Markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_tutorial_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each python block of the tutorial executes without error (its asserts included)."""
    code = blocks(TUTORIAL.read_text())
    assert len(code) >= 5
    monkeypatch.chdir(tmp_path)
    ns: dict[str, Any] = {"__name__": "tutorial"}
    try:
        for i, block in enumerate(code, 1):
            exec(compile(block, f"{TUTORIAL.name}[block {i}]", "exec"), ns)
    finally:
        for name in ("app", "app7"):
            if name in ns:
                ns[name].close()
    assert ns["llm"].calls >= 5
