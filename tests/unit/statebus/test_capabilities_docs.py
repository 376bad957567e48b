"""The worked example of docs/statebus.md's capabilities section runs and prints what it shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "statebus.md"


def test_capabilities_example_prints_the_documented_refusal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The section's examples (declared policy, a user's delegation, a plan with a loop) run
    one after another and each prints exactly the text block that follows it."""
    section = DOC.read_text().split("## Capabilities per argument", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    shown = re.findall(r"```text\n(.*?)```", section, flags=re.S)
    assert len(code) == len(shown) == 3
    namespace = {"__name__": "docs_capabilities"}
    for block, expected in zip(code, shown, strict=True):
        exec(compile(block, str(DOC), "exec"), namespace)
        assert capsys.readouterr().out == expected


def test_documented_measurements_match_the_acceptance_test() -> None:
    """The AgentDojo table in the docs carries the totals the acceptance test asserts."""
    section = DOC.read_text().split("### Measured on AgentDojo", 1)[1]
    total = [line for line in section.splitlines() if line.startswith("| total | defaults |")]
    assert total and "1/35" in total[0] and "84/97" in total[0] and "87/97" in total[0]
    mine = [
        x for x in section.splitlines() if x.startswith("| total | defaults + user delegation |")
    ]
    assert mine and "1/35" in mine[0] and "94/97" in mine[0] and "95/97" in mine[0]
