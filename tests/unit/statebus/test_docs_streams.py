"""The bounded-stream example of docs/statebus.md runs and prints what its comments say."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "statebus.md"


def test_bounded_stream_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Retention waits for the consumer, the trimmed id still deduplicates, the blocking
    fetch ends empty at its limit and the listing names the stream with its count."""
    section = DOC.read_text().split("### Bounded streams", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, str(DOC), "exec"), {"__name__": "docs_streams"})
    assert capsys.readouterr().out.splitlines() == [
        "5 5",
        "2 [3, 4, 5]",
        "True",
        "[]",
        "{'events': 3}",
    ]
