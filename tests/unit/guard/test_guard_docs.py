"""The examples of docs/guard.md run and print what the page shows; its measurements match the
acceptance test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "guard.md"


def _section(title: str) -> str:
    return DOC.read_text().split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def test_labels_example_prints_what_the_page_shows(capsys: pytest.CaptureFixture[str]) -> None:
    """The labels example derives a tainted value and endorses it, printing the shown block."""
    section = _section("Labels")
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    (shown,) = re.findall(r"```text\n(.*?)```", section, flags=re.S)
    exec(compile(code, str(DOC), "exec"), {"__name__": "docs_guard_labels"})
    assert capsys.readouterr().out == shown


def test_capabilities_and_plan_examples_print_what_the_page_shows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The capabilities examples (a declared policy, a user's delegation) and the plan with a
    loop run one after another and each prints exactly the text block that follows it."""
    section = (
        _section("Capabilities per argument")
        + _section("Selections the user's task makes")
        + _section("Plans from trusted input")
    )
    code = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    shown = re.findall(r"```text\n(.*?)```", section, flags=re.S)
    assert len(code) == len(shown) == 4
    namespace = {"__name__": "docs_capabilities"}
    for block, expected in zip(code, shown, strict=True):
        exec(compile(block, str(DOC), "exec"), namespace)
        assert capsys.readouterr().out == expected


def test_documented_measurements_match_the_acceptance_test() -> None:
    """The AgentDojo table in the docs carries the totals the acceptance test asserts."""
    section = _section("Measured on AgentDojo")
    total = [line for line in section.splitlines() if line.startswith("| total | defaults |")]
    assert total and "0/35" in total[0] and total[0].count("76/97") == 2
    mine = [
        x for x in section.splitlines() if x.startswith("| total | defaults + user delegation |")
    ]
    assert mine and "0/35" in mine[0] and "85/97" in mine[0] and "84/97" in mine[0]
