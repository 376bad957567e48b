"""README.md: every python block runs, in order, in one namespace, and every link resolves."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def blocks(text: str) -> list[str]:
    """The ```python blocks of a Markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_readme_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each python block of the README executes without error (its asserts included)."""
    code = blocks(README.read_text())
    assert len(code) == 3  # one per subsystem
    monkeypatch.chdir(tmp_path)
    ns: dict[str, Any] = {"__name__": "readme"}
    try:
        for i, block in enumerate(code, 1):
            exec(compile(block, f"{README.name}[block {i}]", "exec"), ns)
    finally:
        if "app" in ns:
            ns["app"].close()
    assert ns["llm"].calls == 4  # three for the flaky call, one for the durable draft
    assert sorted(p.name for p in tmp_path.glob("*.db")) == ["runs.db", "team.db"]


def test_readme_links_resolve() -> None:
    """Every relative link in the README names a file that exists."""
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert local
    assert [link for link in local if not (ROOT / link).exists()] == []
