"""The worked example of docs/statebus.md's capabilities section runs and prints what it shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "statebus.md"


def test_capabilities_example_prints_the_documented_refusal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The declared policy allows the amount from the bill and refuses its recipient as shown."""
    section = DOC.read_text().split("## Capabilities per argument", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    shown = re.findall(r"```text\n(.*?)```", section, flags=re.S)
    assert len(code) == 1 and len(shown) == 1
    exec(compile(code[0], str(DOC), "exec"), {"__name__": "docs_capabilities"})
    assert capsys.readouterr().out == shown[0]


def test_documented_measurements_match_the_acceptance_test() -> None:
    """The AgentDojo table in the docs carries the totals the acceptance test asserts."""
    section = DOC.read_text().split("### Measured on AgentDojo", 1)[1]
    total = [line for line in section.splitlines() if line.startswith("| total | defaults |")]
    assert total and "1/35" in total[0] and "84/97" in total[0] and "87/97" in total[0]
