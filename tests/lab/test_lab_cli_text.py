"""The lab's command line shows what experiments say as written: brackets are text, never rich
markup (the AgentDojo experiment's "skipped" line kept ``./lab[agentdojo]``, #24)."""

from __future__ import annotations

import pytest

from surefoot.errors import MissingExtraError
from surefoot_lab._extras import missing_extra
from surefoot_lab.cli import main as lab_main
from surefoot_lab.statebus import agentdojo


def _missing() -> None:
    raise missing_extra("agentdojo", "the AgentDojo experiment")


def test_skipped_agentdojo_names_the_extra_on_screen(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the extra, the table row and the answer both show ``'./lab[agentdojo]'``."""
    monkeypatch.setattr(agentdojo, "load_suites", _missing)
    monkeypatch.setenv("COLUMNS", "400")  # one line per row: the text is not wrapped
    lab_main(["run", "statebus.agentdojo"])
    out = capsys.readouterr().out
    assert "surefoot-lab[agentdojo]" in out
    assert "pip install './lab[agentdojo]'" in out
    rows = [line for line in out.splitlines() if "skipped:" in line]
    assert rows and all("./lab[agentdojo]" in line for line in rows)
    answer = [line for line in out.splitlines() if line.startswith("Answer.")]
    assert answer and "./lab[agentdojo]" in answer[0]


def test_text_in_brackets_from_a_tool_is_not_styled(capsys: pytest.CaptureFixture[str]) -> None:
    """A cell holding ``[bold red]…[/]`` (what a tool or an agent could return) is printed as
    those characters, not as a style."""
    from rich.console import Console

    from surefoot_lab import Table
    from surefoot_lab.cli._tables import rich_table

    t = Table("from [red]a tool[/red]", ["value"])
    t.add("[bold red]pay ACC-666[/] now")
    console = Console(width=200, color_system=None)
    console.print(rich_table(t))
    out = capsys.readouterr().out
    assert "[bold red]pay ACC-666[/] now" in out and "from [red]a tool[/red]" in out


def test_missing_extra_error_is_the_lab_distribution() -> None:
    """The error itself names the lab's distribution and extra (what the screen must keep)."""
    with pytest.raises(MissingExtraError) as info:
        _missing()
    assert info.value.extra == "agentdojo"
