"""The lab's command line, as ``surefoot lab`` (the product's CLI, the lab installed) and as
``surefoot-lab``: one clear line for a bad id or path, reports written, progress when piped,
tables that fit."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import surefoot_lab as lab
from surefoot.cli import main as surefoot_main
from surefoot_lab import Table
from surefoot_lab.cli import main as lab_main
from surefoot_lab.cli._experiments import PlainProgress
from surefoot_lab.cli._tables import rich_table

LabCLI = Callable[..., tuple[int, str, str]]  # the lab_cli fixture (tests/lab/conftest.py)


def _as_surefoot_lab(argv: list[str]) -> None:
    surefoot_main(["lab", *argv])


ENTRIES: dict[str, Callable[[list[str]], None]] = {
    "surefoot lab": _as_surefoot_lab,
    "surefoot-lab": lab_main,
}


@pytest.fixture(params=sorted(ENTRIES))
def entry(request: pytest.FixtureRequest) -> tuple[str, Callable[[list[str]], None]]:
    """Each way in to the lab's commands: ``surefoot lab …`` and ``surefoot-lab …``."""
    return request.param, ENTRIES[request.param]


def test_unknown_experiment_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], entry: tuple[str, Callable[[list[str]], None]]
) -> None:
    """A SurefootError becomes one line on stderr, named after the command, and exit code 1."""
    name, run = entry
    with pytest.raises(SystemExit) as info:
        run(["run", "no.such.experiment"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    prog = name.split()[0]
    assert err.startswith(f"{prog}: error: no lab experiment 'no.such.experiment'")
    assert "Traceback" not in err and err.count("\n") == 1


def test_report_path_in_a_missing_folder_fails_before_running(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    entry: tuple[str, Callable[[list[str]], None]],
) -> None:
    """--json/--md into a folder that does not exist is refused up front, in one line."""
    target = tmp_path / "nope" / "x.json"
    with pytest.raises(SystemExit) as info:
        entry[1](["run", "resilience.waits", "--json", str(target)])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "does not exist" in err
    assert err.count("\n") == 1
    assert not target.parent.exists()


@pytest.mark.parametrize("bad", ["0", "-3"])
def test_seeds_below_one_are_refused(capsys: pytest.CaptureFixture[str], bad: str) -> None:
    """--seeds must be at least 1."""
    with pytest.raises(SystemExit) as info:
        _as_surefoot_lab(["run", "resilience.waits", "--seeds", bad])
    assert info.value.code == 2
    assert "--seeds" in capsys.readouterr().err


def test_lab_run_writes_reports(
    tmp_path: Path, entry: tuple[str, Callable[[list[str]], None]]
) -> None:
    """A run writes the JSON and Markdown reports it was asked for, labelled with the model."""
    j, m = tmp_path / "r.json", tmp_path / "r.md"
    entry[1](["run", "resilience.waits", "--json", str(j), "--md", str(m)])
    doc = json.loads(j.read_text())
    assert doc["experiments"][0]["id"] == "resilience.waits"
    assert doc["experiments"][0]["facts"]
    assert "resilience.waits" in m.read_text()


def test_lab_list_piped_is_not_forced_to_160_columns(
    lab_cli: LabCLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped with COLUMNS=100, lab list fits 100 columns and keeps every id whole."""
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = lab_cli("list")
    assert code == 0
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 100
    for e in lab.experiments():
        assert any(e.id in line for line in out.splitlines()), e.id


def test_lab_run_piped_reports_progress_on_stderr(
    lab_cli: LabCLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped, each experiment gets a start and a done line on stderr; results on stdout."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = lab_cli("run", "resilience.waits", "--quick")
    assert code == 0
    assert "[1/1] resilience.waits: running" in err and "[1/1] resilience.waits: done in" in err
    assert "running" not in out and "Answer." in out


def test_plain_progress_says_still_running_when_an_experiment_is_silent() -> None:
    """An experiment that reports nothing for a while gets 'still running' lines."""
    out = io.StringIO()
    with PlainProgress(out, every=0.05).experiment("durable.port", 1, 1) as tick:
        tick(1, 4)
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert lines[0] == "[1/1] durable.port: running"
    assert any("still running (1/4" in x for x in lines)
    assert lines[-1].startswith("[1/1] durable.port: done in")


def test_lab_tables_left_align_prose_and_right_align_numbers() -> None:
    """A column of words is left-aligned, a column of numbers right-aligned."""
    t = Table("t", ["case", "reason", "calls", "rate"])
    t.add("a", "the server said 503", 12, "40%")
    t.add("b", "a reset", 1_200, "7.5%")
    rt = rich_table(t)
    assert [c.justify for c in rt.columns] == ["left", "left", "right", "right"]


def test_python_dash_m_surefoot_lab_is_the_same_group() -> None:
    """python -m surefoot_lab runs the lab's group: list, run and chaos."""
    out = subprocess.run(
        [sys.executable, "-m", "surefoot_lab", "--help"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("Usage: surefoot-lab")
    assert {"chaos", "list", "run"} <= {
        line.split()[0] for line in out.stdout.split("Commands:")[1].splitlines() if line.strip()
    }


def test_llm_local_without_the_model_runs_and_says_the_model_is_absent(
    lab_cli: LabCLI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """--llm local without `make local-llm` used to stop the lab with a one-line error; it now
    runs the experiments on their own model, says on stderr why, and the report records it."""
    from surefoot_lab.cli import _experiments

    monkeypatch.setattr(
        _experiments, "local_model_missing", lambda: "llama-cpp-python is not installed"
    )
    report = tmp_path / "r.json"
    code, out, err = lab_cli(
        "run", "resilience.waits", "--quick", "--llm", "local", "--json", str(report)
    )
    assert code == 0, err
    assert "--llm local: the local model is absent (llama-cpp-python is not installed)" in err
    assert "Answer." in out
    (exp,) = json.loads(report.read_text())["experiments"]
    assert "llama-cpp-python is not installed" in exp["params"]["llm_absent"]


def test_a_real_model_experiment_says_the_local_model_was_absent(tmp_path: Path) -> None:
    """An experiment that runs on a real model when given one says, when the local model was
    asked for but absent, that its figures are its own model's."""
    exp = lab.Experiment(
        "x.real", "000.txt", "Hard 1", "t", lambda ctx: lab.LabResult(answer="0 lost."), True
    )
    res = exp.run(lab.LabContext(workdir=tmp_path, llm_absent="the local model is absent (x)"))
    assert res.answer.startswith("0 lost. --llm local was asked for, but the local model is")
    assert res.params["llm_absent"] == "the local model is absent (x)"
