"""docs/resilience.md and docs/testing.md: every python block runs, and their tests pass."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"


def blocks(text: str) -> list[str]:
    """The ```python blocks of a Markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


@pytest.mark.parametrize("page", ["resilience.md", "testing.md"])
def test_doc_blocks_run(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each python block of the page executes in order; the test_* functions it defines pass."""
    path = DOCS / page
    code = blocks(path.read_text())
    assert len(code) >= 3
    monkeypatch.chdir(tmp_path)
    ns: dict[str, Any] = {"__name__": page}
    for i, block in enumerate(code, 1):
        exec(compile(block, f"{page}[block {i}]", "exec"), ns)
    tests = [fn for name, fn in ns.items() if name.startswith("test_") and callable(fn)]
    for fn in tests:
        fn()
    if page == "testing.md":
        assert tests, "testing.md shows at least one test function"
